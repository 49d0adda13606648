"""Receipts for every fallback (docs/assembly.md "Fallbacks"): a call that runs on less than its
configuration says what was attempted and what ran instead, in the window's warnings and in its
stored trace, through every interface. Each fallback here is triggered for real."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from mcp import Client

import contextwright.embedders as embedders
from contextwright import Budget, Engine
from contextwright.assembly.defaults import default_sources
from contextwright.assembly.request import AssembleRequest
from contextwright.cli import cli
from contextwright.mcp.server import build_server
from contextwright.ports import Embedder, Summarizer
from contextwright.server import create_app
from contextwright.sessions import SessionConfig
from contextwright.settings import Settings
from contextwright.stores import open_store
from contextwright.summarizers import OpenAICompatibleSummarizer
from contextwright.testing import FailingSource, FailingSummarizer, SlowSource
from contextwright.traces.trace import Trace
from servers import ADMIN_KEY, KEYS, auth, free_port

INTERFACES = ["library", "http", "mcp"]


def _window(
    engine: Engine, interface: str, budget: int, session: str | None = "s1"
) -> tuple[list[str], Trace]:
    """The window's warnings through `interface`, checked equal to its stored trace's."""
    named = {} if session is None else {"session": session}
    if interface == "library":
        result = engine.window(
            AssembleRequest.build("p", "dev", "next", budget, "markdown", session=session)
        )
        warnings, trace_id = result.warnings, result.trace.id
    elif interface == "http":
        client = TestClient(create_app(engine, Settings(api_keys=KEYS)))
        body = {"agent": "dev", "task": "next", "budget": budget, **named}
        answer = client.post("/v1/projects/p/assemble", json=body, headers=auth(ADMIN_KEY))
        assert answer.status_code == 200, answer.text
        warnings, trace_id = answer.json()["warnings"], answer.json()["trace_id"]
    else:

        async def go() -> Any:
            async with Client(build_server(engine)) as client:
                args = {"project": "p", "agent": "dev", "task": "next", "budget": budget}
                return await client.call_tool("assemble_context", {**args, **named})

        result = asyncio.run(go())
        assert not result.is_error, result
        warnings = result.structured_content["warnings"]
        trace_id = result.structured_content["trace_id"]
    trace = engine.trace("p", trace_id, "dev")
    assert trace.warnings == warnings
    return list(warnings), trace


def _chat(engine: Engine, turns: int) -> None:
    s = engine.sessions
    for i in range(turns):
        s.append("p", "dev", "s1", "user", f"question {i} about the parser and its grammar")
        s.append("p", "dev", "s1", "assistant", f"answer {i}: the grammar is LL(1), rule {i}")


def _big_tool_result_last(engine: Engine) -> None:
    """The last two turns (kept whole by every rung) hold a tool result no window here fits:
    only the purge of tool results makes it fit."""
    engine.sessions.config = SessionConfig(tool_result_cap=100_000)
    _chat(engine, 3)
    s = engine.sessions
    call = s.append("p", "dev", "s1", "tool_call", "read", tool="read_file", arguments={"a": 1})
    body = "\n".join(f"line {j} of the big file" for j in range(600))
    s.append("p", "dev", "s1", "tool_result", body, reply_to=call.id)


def _long_chat(engine: Engine) -> None:
    """Long turns past the kept ones: auto compaction is not enough, the emergency one is."""
    engine.sessions.config = SessionConfig(tool_result_cap=1_200)
    s = engine.sessions
    for i in range(12):
        s.append("p", "dev", "s1", "user", f"Please build page {i}. " + "word " * 60)
        s.append("p", "dev", "s1", "assistant", f"Built page {i}. " + "detail " * 60)


LADDER: dict[str, tuple[Callable[[Engine], None], int, str]] = {
    "purge_tool_results": (_big_tool_result_last, 2_000, "cut to a one-line summary"),
    "emergency_compaction": (_long_chat, 1_100, "emergency compaction summarized"),
}


@pytest.mark.parametrize("interface", INTERFACES)
@pytest.mark.parametrize("rung", sorted(LADDER))
def test_an_overflow_ladder_rung_is_in_the_windows_warnings(interface: str, rung: str) -> None:
    setup, budget, said = LADDER[rung]
    engine = Engine.open("memory://", embedder=None)
    try:
        setup(engine)
        warnings, trace = _window(engine, interface, budget)
        taken = [s for s in trace.notes["session"]["steps"] if s["step"] == rung]
        assert len(taken) == 1 and not taken[0].get("skipped"), trace.notes["session"]["steps"]
        mine = [w for w in warnings if said in w]
        assert len(mine) == 1 and "did not fit" in mine[0], warnings
        # A rung that changed nothing (no tool results, no files) leaves no receipt.
        taken = [
            s
            for s in trace.notes["session"]["steps"]
            if s["step"] in ("emergency_compaction", "purge_tool_results", "drop_files")
            and not s.get("skipped")
        ]
        assert len([w for w in warnings if "did not fit" in w]) == len(taken)
    finally:
        engine.close()


def _down(kind: str) -> Summarizer:
    if kind == "raises":
        return FailingSummarizer()
    # A model-backed summarizer whose server is not there: connection refused, no retry. Its
    # address carries a key, as some deployments' do: no agent may read it.
    url = f"http://ops:sk-LIVE-SECRET@127.0.0.1:{free_port()}/v1?api-key=sk-QUERY"
    return OpenAICompatibleSummarizer(url, "m", retries=0)


@pytest.mark.parametrize("interface", INTERFACES)
@pytest.mark.parametrize("kind", ["raises", "model_unreachable"])
@pytest.mark.filterwarnings("ignore::contextwright.summarizers.SummarizerFallback")
def test_a_summarizer_that_is_down_is_in_the_windows_warnings(interface: str, kind: str) -> None:
    engine = Engine.open("memory://", embedder=None)
    try:
        _long_chat(engine)
        engine.sessions.summarizer = _down(kind)
        warnings, trace = _window(engine, interface, 1_100)
        compacted = [s for s in trace.notes["session"]["steps"] if s.get("summary")]
        assert compacted, trace.notes["session"]["steps"]  # the extractive summary was written
        said = [w for w in warnings if "summarizer" in w]
        assert len(said) == 1 and "extractive summarizer instead" in said[0], warnings
        assert ("ConnectionError" if kind == "raises" else "ConnectError") in said[0]
        # What the agent reads names the kind of failure, never an address, a key or the text
        # of the error (a plug-in's message or a provider's answer may hold anything).
        stored = json.dumps(engine.trace(trace.project, trace.id).to_json_dict())
        for secret in ("the summarizer is down", "sk-LIVE-SECRET", "sk-QUERY", "127.0.0.1"):
            assert secret not in said[0] and secret not in stored
        written = [r for r in engine.records(trace.project, limit=1000) if r.kind == "summary"]
        assert written and {r.meta["summarizer"] for r in written} == {"extractive"}
    finally:
        engine.close()


def test_the_cli_prints_a_session_windows_receipts(tmp_path: Path) -> None:
    """`contextwright assemble --session` prints the text; its receipts go to stderr."""
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    engine = Engine.open(db, embedder=None)
    try:
        _big_tool_result_last(engine)
    finally:
        engine.close()
    args = ["--db", db, "assemble", "-p", "p", "-a", "dev", "-t", "next", "-b", "2000"]
    result = CliRunner().invoke(cli, [*args, "--session", "s1"])
    assert result.exit_code == 0, result.output
    said = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert any("did not fit" in w and "one-line summary" in w for w in said), result.stderr
    assert "did not fit" not in result.stdout


@pytest.mark.parametrize("interface", INTERFACES)
def test_a_source_past_its_deadline_and_a_failing_one_are_in_the_warnings(interface: str) -> None:
    slow = SlowSource("slow", ["late news that never arrives"], delay_s=10.0)
    broken = FailingSource("broken", RuntimeError("index offline"))
    engine = Engine(
        open_store("memory://"), sources=[*default_sources(), slow, broken], deadline_ms=100
    )
    try:
        engine.add(project="p", author="dev", content="next: the parser")
        warnings, trace = _window(engine, interface, 2_000, session=None)
        runs = {s["name"]: s for s in trace.sources}
        assert "deadline of 100 ms passed" in runs["slow"]["error"]
        assert runs["broken"]["error"] == "RuntimeError: index offline"
        assert [w for w in warnings if w.startswith("source ")] == [
            "source slow failed: deadline of 100 ms passed; the window was built without it",
            "source broken failed: RuntimeError: index offline; the window was built without it",
        ]
    finally:
        slow.release()
        engine.close()


@pytest.mark.parametrize("interface", INTERFACES)
@pytest.mark.parametrize("state", ["loading", "failed"])
def test_an_embedder_loading_or_failed_is_in_the_warnings(
    interface: str, state: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()

    def load(name: str = "minilm") -> Embedder | None:
        release.wait(30)
        raise OSError("model.onnx is truncated")

    monkeypatch.setattr(embedders, "load_embedder", load)
    monkeypatch.setattr("contextwright.embedders.missing_reason", lambda name: None)
    if state == "failed":
        release.set()
    engine = Engine(open_store("memory://"), embedder="minilm")
    try:
        if state == "failed":
            engine.wait_for_embeddings(timeout=30)
        engine.add(project="p", author="dev", content="next: the parser")
        warnings, trace = _window(engine, interface, 2_000, session=None)
        assert trace.notes["vectors"]["state"] == state
        said = [w for w in warnings if "embedder" in w]
        assert len(said) == 1 and "full text alone" in said[0], warnings
        if state == "failed":
            assert "model.onnx is truncated" in said[0]
    finally:
        release.set()
        engine.close()


def test_a_trace_the_store_would_not_take_is_counted_in_the_metrics(tmp_path: Path) -> None:
    """The trace writer's fallback: the call is answered, its trace is lost, and the server's
    metrics say how many were (the writer keeps only its newest errors)."""
    store = open_store(f"sqlite:///{tmp_path / 't.db'}")
    engine = Engine(store, embedder=None)
    try:
        engine.add(project="p", author="dev", content="next: the parser")
        (tmp_path / "gone").mkdir()
        store._traces.path = str(tmp_path / "gone")  # type: ignore[attr-defined]  # a directory
        client = TestClient(create_app(engine, Settings(api_keys=KEYS)))
        body = {"agent": "dev", "task": "next", "budget": 2_000}
        for _ in range(3):
            answer = client.post("/v1/projects/p/assemble", json=body, headers=auth(ADMIN_KEY))
            assert answer.status_code == 200, answer.text
            engine.flush()
        writer = engine.assembler.traces
        assert writer.failed == 3 and answer.json()["trace_id"] in writer.errors[-1]
        metrics = client.get("/metrics", headers=auth(ADMIN_KEY)).text
        assert "contextwright_traces_unstored 3.0" in metrics
    finally:
        engine.close()


def test_a_window_rebuilt_after_a_providers_overflow_says_so() -> None:
    """Library only: no HTTP or MCP call takes a provider's error."""
    engine = Engine.open("memory://", embedder=None)
    try:
        _chat(engine, 10)
        budget = Budget(model="gpt-4", window=8_192)
        error = {"error": {"message": "prompt is too long: 9000 tokens > 6000 maximum"}}
        win = engine.sessions.handle_provider_error("p", "dev", "s1", error, budget=budget)
        said = [w for w in win.assembly.warnings if "provider" in w]
        assert len(said) == 1 and "its limit 6000, its count 9000" in said[0], said
        assert f"rebuilt for a {win.steps[0]['retargeted_window']}-token window" in said[0]
        assert engine.trace("p", win.assembly.trace.id, "dev").warnings == win.assembly.warnings
    finally:
        engine.close()


@pytest.mark.parametrize("kind", ["raises", "model_unreachable"])
def test_a_compaction_outside_a_window_still_tells_its_caller(kind: str) -> None:
    """A manual compaction (no window to carry the receipt) warns its caller as before, and the
    summary says which summarizer wrote it; a summarizer that is not set up raises."""
    from contextwright.errors import MissingExtra
    from contextwright.summarizers import SummarizerFallback

    engine = Engine.open("memory://", embedder=None)
    try:
        _long_chat(engine)
        engine.sessions.summarizer = _down(kind)
        with pytest.warns(SummarizerFallback, match="extractive summarizer instead"):
            done = engine.sessions.compact("p", "dev", "s1", keep=4)
        assert done.summarizer == "extractive"
        assert done.summary is not None and done.summary.meta["summarizer"] == "extractive"
        engine.sessions.summarizer = FailingSummarizer(MissingExtra("Summarizer", "summarizer"))
        _long_chat(engine)
        with pytest.raises(MissingExtra):
            engine.sessions.compact("p", "dev", "s1", keep=4)
    finally:
        engine.close()
