"""Summarizers: the extractive default, and the OpenAI-compatible one against a real HTTP server
on 127.0.0.1 that speaks the chat completions API (and fails in the ways real ones do)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from contextwright import Engine, ValidationError
from contextwright.sessions import SessionConfig
from contextwright.summarizers import (
    ExtractiveSummarizer,
    OpenAICompatibleSummarizer,
    SummarizerFallback,
)
from contextwright.tokens.counter import default_counter

TURNS = [
    "user: Build a landing page with a dark theme.",
    "assistant: Created `index.html` with the Tailwind CSS setup.",
    "user: ok",
    "assistant: We decided to use Tailwind over styled-components.",
    "user: I prefer concise responses, no emojis.",
    '[tool: read_file("src/app.ts") → 247 lines, TypeScript]',
    "user: Actually, I meant a three-column footer.",
    "assistant: Footer updated with 3 columns in src/components/Footer.tsx.",
    "user: thanks",
]


def test_extractive_keeps_what_matters_within_bounds() -> None:
    s = ExtractiveSummarizer()
    out = s.summarize(TURNS, max_tokens=400)
    assert out == s.summarize(TURNS, max_tokens=400)  # deterministic
    for needle in (
        "Tailwind over styled-components",
        "no emojis",
        "src/app.ts",
        "three-column footer",
        "Footer.tsx",
        "3 columns",
    ):
        assert needle in out
    assert "user: ok" not in out and "thanks" not in out
    assert all(line.startswith("- ") for line in out.splitlines())
    tight = s.summarize(TURNS, max_tokens=40)
    assert default_counter().count(tight) <= 40
    assert "three-column footer" in tight  # corrections outrank everything


def test_extractive_carries_a_previous_summary() -> None:
    s = ExtractiveSummarizer()
    prev = "## Session Summary (compacted)\n- Chose PostgreSQL 16 for the orders service."
    out = s.summarize([prev, "user: please continue", "assistant: done"], max_tokens=100)
    assert "Chose PostgreSQL 16 for the orders service." in out


class _Handler(BaseHTTPRequestHandler):
    script: ClassVar[list[str]] = []
    seen: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, *args: object) -> None:  # keep test output quiet
        pass

    def do_POST(self) -> None:
        length = int(self.headers["content-length"])
        body = json.loads(self.rfile.read(length))
        type(self).seen.append(
            {"path": self.path, "body": body, "auth": self.headers.get("authorization")}
        )
        action = type(self).script.pop(0) if type(self).script else "ok"
        if action == "slow":
            time.sleep(1.0)
            action = "ok"
        if action in ("500", "429", "400"):
            payload = json.dumps({"error": {"message": f"status {action}"}}).encode()
            self.send_response(int(action))
            if action == "429":
                self.send_header("retry-after", "0")
        elif action == "malformed":
            payload = b'{"choices": [{"text": "legacy"}]}'
            self.send_response(200)
        elif action == "garbage":
            payload = b"<html>oops</html>"
            self.send_response(200)
        else:
            content = "- Model summary: dark landing page, Tailwind chosen."
            payload = json.dumps(
                {
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": content},
                        }
                    ],
                    "usage": {"prompt_tokens": 50, "completion_tokens": 12, "total_tokens": 62},
                }
            ).encode()
            self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        try:
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out first, as the test meant it to


@pytest.fixture
def server() -> Iterator[str]:
    _Handler.script = []
    _Handler.seen = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def make(url: str, **kw: Any) -> OpenAICompatibleSummarizer:
    return OpenAICompatibleSummarizer(url, "local-model", "sk-test", backoff=0.01, **kw)


def test_model_summary_over_the_chat_api(server: str) -> None:
    out = make(server).summarize(TURNS, max_tokens=200)
    assert out == "- Model summary: dark landing page, Tailwind chosen."
    req = _Handler.seen[0]
    assert req["path"] == "/v1/chat/completions" and req["auth"] == "Bearer sk-test"
    assert req["body"]["model"] == "local-model" and req["body"]["max_tokens"] == 200
    assert req["body"]["messages"][0]["role"] == "system"
    assert "Tailwind over styled-components" in req["body"]["messages"][1]["content"]


def test_retries_500_and_429_then_succeeds(server: str) -> None:
    _Handler.script = ["500", "429"]
    s = make(server, retries=2)
    assert s.summarize(TURNS, max_tokens=100).startswith("- Model summary")
    assert len(_Handler.seen) == 3 and s.last_error is None


@pytest.mark.parametrize(
    ("script", "reason", "calls"),
    [
        (["500", "500", "500"], "HTTP 500", 3),
        (["400"], "HTTP 400", 1),
        (["malformed"], "malformed reply", 1),
        (["garbage"], "malformed reply", 1),
        (["slow", "slow"], "timed out", 2),
    ],
)
def test_falls_back_to_extractive_with_a_warning(
    server: str, script: list[str], reason: str, calls: int
) -> None:
    _Handler.script = list(script)
    s = make(
        server,
        retries=len(script) - 1 if reason != "HTTP 400" and "malformed" not in reason else 2,
        timeout=0.3,
    )
    with pytest.warns(SummarizerFallback, match=reason):
        out = s.summarize(TURNS, max_tokens=300)
    assert out == ExtractiveSummarizer().summarize(TURNS, max_tokens=300)
    assert s.last_error is not None and reason in s.last_error
    assert len(_Handler.seen) == calls


def test_unreachable_server_falls_back() -> None:
    s = make("http://127.0.0.1:9/v1", retries=0, timeout=0.5)
    with pytest.warns(SummarizerFallback):
        assert "Tailwind" in s.summarize(TURNS, max_tokens=300)


def test_config_is_validated() -> None:
    with pytest.raises(ValidationError) as e:
        OpenAICompatibleSummarizer("localhost:8000", "m")
    assert e.value.field == "base_url"
    with pytest.raises(ValidationError):
        OpenAICompatibleSummarizer.from_config({"base_url": "http://x", "model": "m", "key": "k"})
    ok = OpenAICompatibleSummarizer.from_config(
        {"base_url": "http://127.0.0.1:1/v1/", "model": "m", "api_key": "k", "timeout": 3}
    )
    assert ok.base_url == "http://127.0.0.1:1/v1" and ok.timeout == 3.0


def test_session_compaction_uses_the_model_summarizer(server: str) -> None:
    engine = Engine.open("memory://", workers=1)
    try:
        engine.sessions.summarizer = make(server)
        engine.sessions.config = SessionConfig(keep_turns=4)
        for i in range(8):
            engine.sessions.append("p", "dev", "s", "user", f"step {i}: please continue")
        c = engine.sessions.compact("p", "dev", "s")
        assert c.summary is not None and c.summarizer == "openai_compatible"
        assert "- Model summary: dark landing page" in c.summary.content
    finally:
        engine.close()
