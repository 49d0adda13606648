"""One window, every interface: the same records and request give the same window through
Python, HTTP (real uvicorn), MCP (the SDK's client) and the CLI; for a plain request and for a
session, whose stale tool output the session pipeline prunes to one line. And one budget meaning:
a bare number is the tokens available for the window, everywhere."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from mcp import Client

from contextwright import Engine
from contextwright.assembly.request import AssembleRequest
from contextwright.cli import cli
from contextwright.mcp.server import build_server
from contextwright.server import create_app
from contextwright.settings import Settings
from servers import running

NOW = 1_800_000_000.0
TOOL_OUTPUT = "\n".join(
    f"src/auth/module_{i}.py:{i * 7}: def check_token_{i}(token): return verify(token, key_{i})"
    for i in range(90)
)


def _engine(db: Path) -> Engine:
    return Engine.open(f"sqlite:///{db}", clock=lambda: NOW)


def _records(engine: Engine) -> None:
    engine.add(project="acme", author="alice", content="@bob the login bug is in auth.py")
    engine.add(project="acme", author="carol", kind="decision", content="we keep JWT for sessions")
    s = engine.sessions
    s.append("acme", "dev", "s1", "user", "Find where tokens are checked.")
    call = s.append(
        "acme", "dev", "s1", "tool_call", "grep", tool="grep", arguments={"pattern": "token"}
    )
    s.append("acme", "dev", "s1", "tool_result", TOOL_OUTPUT, reply_to=call.id)
    for i in range(8):  # enough later turns that the tool result is stale
        s.append("acme", "dev", "s1", "user", f"Next step {i}: look at module {i}.")
        s.append("acme", "dev", "s1", "assistant", f"Module {i} checks its token with verify.")


def _windows(db: Path, args: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The window for `args` through each interface: messages, text and tokens."""
    keep = ("messages", "text", "tokens", "available")
    out: dict[str, dict[str, Any]] = {}
    engine = _engine(db)
    try:
        request = AssembleRequest.build(
            args["project"], args["agent"], args.get("task", ""), args["budget"], "openai",
            session=args.get("session"),
        )  # fmt: skip
        result = engine.window(request).to_dict()
        out["python"] = {k: result[k] for k in keep}

        with running(create_app(engine, Settings())) as base:
            body = {k: v for k, v in args.items() if k != "project"}
            r = httpx.post(f"{base}/v1/projects/acme/assemble", json={**body, "format": "openai"})
            assert r.status_code == 200, r.text
            out["http"] = {k: r.json()[k] for k in keep}

        async def mcp() -> dict[str, Any]:
            async with Client(build_server(engine)) as client:
                res = await client.call_tool("assemble_context", {**args, "format": "openai"})
                assert not res.is_error, res
                sc = res.structured_content
                assert sc is not None
                return sc.get("result", sc) if set(sc) == {"result"} else sc

        got = asyncio.run(mcp())
        out["mcp"] = {k: got[k] for k in keep}
    finally:
        engine.close()

    cmd = ["--db", f"sqlite:///{db}", "assemble", "-p", args["project"], "-a", args["agent"]]
    cmd += ["-t", args.get("task", ""), "-b", str(args["budget"]), "--format", "openai", "--json"]
    if args.get("session"):
        cmd += ["--session", args["session"]]
    ran = CliRunner().invoke(cli, cmd)
    assert ran.exit_code == 0, ran.output
    printed = json.loads(ran.stdout)
    out["cli"] = {k: printed[k] for k in keep}
    return out


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "one.db"
    engine = _engine(path)
    _records(engine)
    engine.close()
    return path


def test_a_plain_request_gives_one_window_everywhere(db: Path) -> None:
    got = _windows(
        db, {"project": "acme", "agent": "bob", "task": "fix the login bug", "budget": 2000}
    )
    assert "login bug is in auth.py" in got["python"]["text"]
    for name, window in got.items():
        assert window == got["python"], name


def test_a_session_gets_the_session_pipeline_everywhere(db: Path) -> None:
    args = {"project": "acme", "agent": "dev", "session": "s1", "budget": 8000}
    got = _windows(db, args)
    for name, window in got.items():
        assert window == got["python"], name
    text = json.dumps(got["python"]["messages"])
    # The stale grep output is one line in the window, not 90 ([tool: grep(...)] ...).
    assert "module_89.py" not in text and "[tool: grep(" in text
    engine = _engine(db)
    try:
        raw = engine.assemble("acme", "dev", "", 8000, "openai", session="s1")
        assert "module_89.py" in json.dumps(raw.messages)  # plain assembly keeps it whole
        assert got["python"]["tokens"] * 4 < raw.tokens
        # The same window as the session manager's own call.
        own = engine.sessions.window("acme", "dev", "s1", "", 8000, "openai")
        assert own.messages == got["python"]["messages"] and own.tokens == got["python"]["tokens"]
    finally:
        engine.close()


@pytest.mark.parametrize("budget", [600, 4000])
def test_a_bare_budget_is_the_tokens_available_everywhere(db: Path, budget: int) -> None:
    got = _windows(db, {"project": "acme", "agent": "bob", "task": "login", "budget": budget})
    assert {w["available"] for w in got.values()} == {budget}
    assert all(w["tokens"] <= budget for w in got.values())


def test_the_cli_refuses_a_budget_with_two_meanings(db: Path) -> None:
    ran = CliRunner().invoke(
        cli,
        ["--db", f"sqlite:///{db}", "assemble", "-p", "acme", "-a", "bob", "-b", "4000",
         "--model", "gpt-4o"],
    )  # fmt: skip
    assert ran.exit_code != 0
    assert "--budget" in ran.output and "not both" in ran.output
