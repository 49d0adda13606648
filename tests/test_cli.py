"""The `contextwright` command, through click's CliRunner and once as a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from contextwright import Engine
from contextwright.cli import cli

LOCOMO = Path("/work/shared/data/locomo/locomo-dev.json")


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'cli.db'}"


def run(db: str, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["--db", db, *args], input=input)


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.stderr)
    return result.stdout


def one_line_error(result: Result, *expected: str) -> str:
    assert result.exit_code != 0
    assert result.exception is None or isinstance(result.exception, SystemExit)
    err = result.stderr.strip()
    assert "Traceback" not in result.output
    assert len(err.splitlines()) == 1, err
    for text in expected:
        assert text in err
    return err


def all_commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = [prefix]
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            out += all_commands(cmd, (*prefix, name))
        else:
            out.append((*prefix, name))
    return out


@pytest.mark.parametrize("path", all_commands(cli), ids=lambda p: " ".join(p) or "contextwright")
def test_help_everywhere(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0 and "Usage:" in result.output


def test_add_assemble_trace(db: str) -> None:
    rid = ok(
        run(db, "add", "-p", "acme", "-a", "alice", "@bob the login bug is in auth.py")
    ).strip()
    assert len(rid) == 26
    piped = ok(
        run(db, "add", "-p", "acme", "-a", "carol", "-k", "decision", "--json", input="Use JWT.")
    )
    assert json.loads(piped)["kind"] == "decision"

    text = ok(
        run(db, "assemble", "-p", "acme", "-a", "bob", "-t", "fix the login bug", "-b", "2000")
    )
    assert "login bug is in auth.py" in text and "Use JWT." in text
    data = json.loads(
        ok(
            run(
                db,
                "assemble",
                "-p",
                "acme",
                "-a",
                "bob",
                "-t",
                "login",
                "--format",
                "openai",
                "--json",
            )
        )
    )
    assert data["format"] == "openai" and data["tokens"] <= data["available"]

    shown = ok(run(db, "trace", "show", "-p", "acme", data["trace_id"]))
    assert data["trace_id"] in shown and "kept" in shown
    as_json = json.loads(ok(run(db, "trace", "show", "-p", "acme", data["trace_id"], "--json")))
    assert as_json["request"]["task"] == "login"
    listed = json.loads(ok(run(db, "trace", "list", "-p", "acme", "-a", "bob", "--json")))
    assert data["trace_id"] in [t["id"] for t in listed]


def test_import_jsonl_openai_and_locomo(db: str, tmp_path: Path) -> None:
    jsonl = tmp_path / "r.jsonl"
    jsonl.write_text(
        "\n".join(json.dumps({"author": "a", "content": f"line {i}"}) for i in range(5)) + "\n"
    )
    assert json.loads(ok(run(db, "import", str(jsonl), "-p", "acme", "--json")))["stored"] == 5

    chatgpt = [
        {
            "id": "conv-1",
            "title": "Auth",
            "current_node": "n2",
            "mapping": {
                "n0": {"message": None, "parent": None},
                "n1": {
                    "message": {
                        "author": {"role": "user"},
                        "content": {"parts": ["How do JWTs expire?"]},
                        "create_time": 1.7e9,
                    },
                    "parent": "n0",
                },
                "n2": {
                    "message": {
                        "author": {"role": "assistant"},
                        "content": {"parts": ["Via the exp claim."]},
                        "create_time": 1.7e9 + 5,
                    },
                    "parent": "n1",
                },
            },
        },
        {
            "messages": [
                {"role": "user", "content": "hello"},
                {"role": "assistant", "content": "hi"},
            ]
        },
    ]
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps(chatgpt))
    out = ok(run(db, "import", str(export), "-p", "chat", "--format", "openai"))
    assert "stored 4 new records of 4 rows in chat (4)" in out

    sample = json.loads(LOCOMO.read_text())[:1]
    loco = tmp_path / "locomo.json"
    loco.write_text(json.dumps(sample))
    result = run(db, "import", str(loco), "-p", "loco", "--format", "locomo", "--json")
    n = json.loads(ok(result))["stored"]
    assert n > 100 and "importing" in result.stderr  # the progress bar
    with Engine.open(db) as engine:
        assert engine.store.count("acme") == 5
        assert engine.store.count("chat") == 4
        assert engine.store.count("loco") == n
        assert {r.author for r in engine.records("chat", limit=10)} == {"user", "assistant"}


def test_import_rejects_a_bad_file_and_stores_nothing(db: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"author": "a", "content": "fine"}\n{"author": "a", "content": 7}\n')
    one_line_error(run(db, "import", str(bad), "-p", "acme"), "line 2", "content")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"author": "a", "content": "fine"}\n{not json\n')
    one_line_error(run(db, "import", str(broken), "-p", "acme"), "line 2")
    one_line_error(run(db, "import", str(tmp_path / "missing.jsonl"), "-p", "acme"), "path")
    with Engine.open(db) as engine:
        assert engine.store.count() == 0


def test_trace_show_reads_only_the_given_project_and_agent(db: str) -> None:
    """A trace holds what its agent saw, private records included: `trace show` finds it only
    under its own project (and, with --agent, only as its own agent), with the same error as an
    id that exists nowhere."""
    with Engine.open(db) as engine:
        engine.add(project="alpha", author="alice", visibility="private", content="SECRET-A1")
        trace_id = engine.assemble("alpha", "alice", "SECRET-A1", 2000).trace.id
        engine.add(project="beta", author="eve", content="hello")
    shown = ok(run(db, "trace", "show", "-p", "alpha", "-a", "alice", trace_id, "--json"))
    assert json.loads(shown)["agent"] == "alice"
    for args in (("-p", "beta"), ("-p", "beta", "-a", "alice"), ("-p", "alpha", "-a", "bob")):
        result = run(db, "trace", "show", *args, trace_id)
        err = one_line_error(result, f"trace {trace_id!r} does not exist")
        assert "SECRET" not in err and "SECRET" not in result.stdout
    listed = json.loads(ok(run(db, "trace", "list", "-p", "beta", "--json")))
    assert listed == []


def test_errors_are_one_line(db: str, tmp_path: Path) -> None:
    one_line_error(run(db, "trace", "show", "-p", "acme", "NOPE"), "trace 'NOPE' does not exist")
    one_line_error(run(db, "add", "-p", "acme", "-a", " Ada", "x"), "author", "whitespace")
    one_line_error(run(db, "add", "-p", "bad name", "-a", "Ada Lovelace", "x"), "project")
    one_line_error(run(db, "assemble", "-p", "acme", "-a", "ghost", "-t", "x"), "ghost")
    one_line_error(run(db, "assemble", "-p", "acme", "-a", "bob", "-b", "lots"), "--budget")
    one_line_error(
        run("sqlite:///no/such/dir/x.db", "trace", "show", "-p", "acme", "x"), "does not exist"
    )
    one_line_error(run("nosuch://x", "trace", "show", "-p", "acme", "x"), "url")
    usage = one_line_error(run(db, "add", "-p", "acme"), "Missing option", "--help")
    assert usage.startswith("error: ")
    one_line_error(run(db, "nosuchcommand"), "No such command")


def test_session_commands(db: str) -> None:
    with Engine.open(db) as engine:
        for i in range(12):
            engine.sessions.append(
                "acme", "dev", "s1", "user" if i % 2 == 0 else "assistant", f"turn {i} " * 30
            )
    gauge = json.loads(
        ok(run(db, "session", "gauge", "-p", "acme", "-a", "dev", "s1", "-b", "2000", "--json"))
    )
    assert gauge["used"] > 0 and "compaction_hint" in gauge
    assert "tokens" in ok(run(db, "session", "gauge", "-p", "acme", "-a", "dev", "s1"))
    compacted = json.loads(
        ok(run(db, "session", "compact", "-p", "acme", "-a", "dev", "s1", "--json"))
    )
    assert compacted["replaced"] > 0
    listed = json.loads(
        ok(run(db, "session", "compactions", "-p", "acme", "-a", "dev", "s1", "--json"))
    )
    assert listed["compactions"][0]["summaries"][0]["id"] == compacted["summary_id"]
    undone = json.loads(ok(run(db, "session", "undo", "-p", "acme", "-a", "dev", "s1", "--json")))
    assert undone["summaries"] == [compacted["summary_id"]] and undone["remaining"] == 0
    one_line_error(run(db, "session", "undo", "-p", "acme", "-a", "dev", "s1"), "no compaction")
    reset = ok(run(db, "session", "reset", "-p", "acme", "-a", "dev", "s1", "--new-session", "s2"))
    assert "s2" in reset
    one_line_error(
        run(db, "session", "compact", "-p", "acme", "-a", "dev", "s1", "--keep", "2"), "--keep"
    )
    one_line_error(
        run(db, "session", "reset", "-p", "acme", "-a", "dev", "s2", "--new-session", "s2")
    )


def test_rules_check(tmp_path: Path) -> None:
    good = tmp_path / "good"
    good.mkdir()
    (good / "a.json").write_text(
        json.dumps(
            {
                "rules": [
                    {
                        "name": "no-tools",
                        "when": {"field": "task", "contains": "review"},
                        "then": [{"suppress": {"kind": "tool_result"}}],
                    }
                ]
            }
        )
    )
    assert "1 rules OK" in ok(CliRunner().invoke(cli, ["rules", "check", str(good)]))
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "b.json").write_text(json.dumps({"rules": [{"name": "x", "then": []}]}))
    result = CliRunner().invoke(cli, ["rules", "check", str(bad), "--json"])
    assert result.exit_code == 1
    problems = json.loads(result.stdout)
    assert problems and problems[0]["file"].endswith("b.json") and problems[0]["field"]
    one_line_error(CliRunner().invoke(cli, ["rules", "check", str(tmp_path / "nope")]), "DIRECTORY")


def test_bench_recall_small(tmp_path: Path) -> None:
    sample = json.loads(LOCOMO.read_text())[:1]
    sample[0]["qa"] = sample[0]["qa"][:3]
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(sample))
    result = CliRunner().invoke(
        cli,
        [
            "bench",
            "recall",
            "--dataset",
            "locomo",
            "--path",
            str(path),
            "--budgets",
            "500,1000",
            "--embedder",
            "none",
            "--json",
        ],
    )
    report = json.loads(ok(result))
    assert {r["budget"] for r in report["results"]} == {500, 1000}
    assert all(0.0 <= r["turn_recall"] <= 1.0 for r in report["results"])


def test_real_subprocess(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'sub.db'}"
    cmd = [sys.executable, "-m", "contextwright.cli", "--db", db]
    added = subprocess.run(
        [*cmd, "add", "-p", "acme", "-a", "alice", "hello"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert added.returncode == 0 and len(added.stdout.strip()) == 26
    failed = subprocess.run(
        [*cmd, "trace", "show", "-p", "acme", "NOPE"], capture_output=True, text=True, timeout=60
    )
    assert failed.returncode == 1
    assert failed.stderr.strip() == "error: trace 'NOPE' does not exist"
    assert failed.stdout == ""


def test_serve_prints_the_inspector_url_and_serves(tmp_path: Path) -> None:
    import httpx

    from servers import free_port, wait_http

    port = free_port()
    db = f"sqlite:///{tmp_path / 'serve.db'}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "contextwright.cli", "serve", "--db", db, "--port", str(port)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stderr is not None
        lines = [proc.stderr.readline() for _ in range(2)]
        assert f"inspector: http://127.0.0.1:{port}/inspector/" in "".join(lines)
        wait_http(f"http://127.0.0.1:{port}/health")
        assert (tmp_path / "serve.db").exists()
        page = httpx.get(f"http://127.0.0.1:{port}/inspector/")
        assert page.status_code == 200 and "inspector" in page.text
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.mark.parametrize("command", ["serve", "mcp"])
def test_servers_settle_the_heap_just_before_they_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """`serve` and `mcp` freeze what start-up made (settle_heap) once everything is built and
    right before the server runs (docs/benchmarks.md: the HTTP API's p99)."""
    import uvicorn

    import contextwright.mcp.server
    from contextwright.cli import service

    calls: list[str] = []
    monkeypatch.setattr(service.heap, "settle_heap", lambda: calls.append("settle"))
    monkeypatch.setattr(uvicorn.Server, "run", lambda self: calls.append("run"))
    # One process, as on a one-core machine (many workers each settle their own heap: workers.py).
    monkeypatch.setattr("contextwright.server.workers.default_workers", lambda: 1)

    class Server:
        def run(self, *args: object, **kwargs: object) -> None:
            calls.append("run")

    monkeypatch.setattr(contextwright.mcp.server, "build_server", lambda engine: Server())
    ok(run(f"sqlite:///{tmp_path / 's.db'}", command))
    assert calls == ["settle", "run"]


HANDOFF = """summary: JWT signing added
files_created:
  - path: src/api/jwt.ts
    purpose: signs and checks tokens
patterns_discovered:
  - pattern: every auth route goes through the JWT middleware in src/api
gotchas:
  - issue: clock skew breaks token expiry in src/api tests
    severity: high
"""


def test_tasks_computed_context_and_traces_from_the_command_line(
    db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each new command is one library call, and --json prints that call's result."""
    first = json.loads(
        ok(
            run(
                db,
                *("task", "create", "-p", "acme", "-n", "JWT", "--json"),
                *("-o", "Add JWT auth to src/api/app.ts", "--criterion", "tokens expire"),
            )
        )
    )
    assert first["kind"] == "task" and first["meta"]["acceptance_criteria"] == ["tokens expire"]
    done = json.loads(
        ok(run(db, "task", "complete", "-p", "acme", first["id"], "--json", input=HANDOFF))
    )
    assert done["task"]["status"] == "completed" and len(done["nodes"]) == 2
    second = ok(
        run(
            db,
            *("task", "create", "-p", "acme", "-n", "JWT refresh"),
            *("-o", "Add refresh tokens to the JWT auth in src/api", "--depends-on", first["id"]),
        )
    ).strip()
    ok(run(db, "add", "-p", "acme", "-a", "dev", "on it"))

    plain = ok(run(db, "task", "context", "-p", "acme", second))
    assert "## Context (Computed)" in plain and "JWT middleware" in plain
    assert "## Context Debug" not in plain
    assert "## Context Debug" in ok(run(db, "task", "context", "-p", "acme", second, "--debug"))
    monkeypatch.setenv("CONTEXTWRIGHT_DEBUG_CONTEXT", "true")
    data = json.loads(ok(run(db, "task", "context", "-p", "acme", second, "--json")))
    assert "## Context Debug" in data["markdown"] and data["task_id"] == second
    monkeypatch.delenv("CONTEXTWRIGHT_DEBUG_CONTEXT")

    window = json.loads(
        ok(
            run(
                db,
                "assemble",
                "-p",
                "acme",
                "-a",
                "dev",
                "--task-id",
                second,
                "-b",
                "3000",
                "--json",
            )
        )
    )
    with Engine.open(db) as engine:
        stored = engine.trace("acme", window["trace_id"])
        assert stored.request["task_id"] == second
        assert "computed" in stored.notes

    replayed = json.loads(
        ok(run(db, "trace", "replay", "-p", "acme", window["trace_id"], "-b", "600", "--json"))
    )
    assert replayed["trace"]["notes"]["replay_of"] == window["trace_id"]
    assert replayed["trace"]["budget"]["window"] == 600
    diff = json.loads(
        ok(
            run(
                db,
                "trace",
                "diff",
                "-p",
                "acme",
                window["trace_id"],
                replayed["trace"]["id"],
                "--json",
            )
        )
    )
    assert diff["a"] == window["trace_id"] and diff["b"] == replayed["trace"]["id"]
    assert diff["request"]["budget"]["after"]["window"] == 600
    text = ok(run(db, "trace", "diff", "-p", "acme", window["trace_id"], replayed["trace"]["id"]))
    assert text.startswith(f"{window['trace_id']} -> {replayed['trace']['id']}:")


def test_new_commands_refuse_bad_input_in_one_line_and_store_nothing(db: str) -> None:
    task = ok(run(db, "task", "create", "-p", "acme", "-n", "T", "-o", "do it")).strip()
    note = ok(run(db, "add", "-p", "acme", "-a", "pam", "just a note")).strip()
    with Engine.open(db) as engine:
        before = engine.store.count()
    one_line_error(run(db, "task", "create", "-p", "acme", "-n", "", "-o", "x"), "name=")
    one_line_error(run(db, "task", "create", "-p", "bad name", "-n", "T", "-o", "x"), "project=")
    one_line_error(
        run(db, "task", "create", "-p", "acme", "-n", "T", "-o", "x" * 9000), "objective", "8000"
    )
    one_line_error(
        run(db, "task", "create", "-p", "acme", "-n", "T", "-o", "x", "--depends-on", "NOPE"),
        "dependencies[0]",
    )
    one_line_error(run(db, "task", "create", "-p", "acme", "-n", "T"), "--objective")
    one_line_error(
        run(db, "task", "create", "-p", "acme", "-n", "T", "-o", "x", "--complexity", "hard"),
        "complexity",
    )
    one_line_error(run(db, "task", "complete", "-p", "acme", "NOPE", input=HANDOFF), "task 'NOPE'")
    one_line_error(
        run(db, "task", "complete", "-p", "acme", note, input=HANDOFF), "not a task", "task_id"
    )
    bad_yaml = run(db, "task", "complete", "-p", "acme", task, input="summary: [unclosed")
    assert bad_yaml.exit_code == 1 and "handoff=" in bad_yaml.stderr  # with an example handoff
    one_line_error(run(db, "task", "complete", "-p", "acme", task, input="files_created: []"))
    one_line_error(run(db, "task", "context", "-p", "acme", "NOPE"), "task 'NOPE'")
    one_line_error(run(db, "task", "context", "-p", "other", task), "task")
    one_line_error(run(db, "assemble", "-p", "acme", "-a", "dev", "--task-id", "NOPE"), "task_id")
    one_line_error(run(db, "trace", "replay", "-p", "acme", "NOPE"), "trace 'NOPE'")
    one_line_error(run(db, "trace", "diff", "-p", "acme", "NOPE", "NOPE2"), "trace 'NOPE'")
    one_line_error(run(db, "trace", "diff", "-p", "acme", "NOPE"), "B")
    with Engine.open(db) as engine:
        assert engine.store.count() == before
        assert engine.tasks.get("acme", task).status == "open"


def test_add_from_stdin_drops_the_final_newline(db: str) -> None:
    data = json.loads(ok(run(db, "add", "-p", "acme", "-a", "pam", "-", "--json", input="hi\n")))
    assert data["content"] == "hi"
    kept = json.loads(ok(run(db, "add", "-p", "acme", "-a", "pam", "--json", input="a\n\nb\n\n")))
    assert kept["content"] == "a\n\nb\n"


@pytest.mark.parametrize(
    ("command", "blocked", "words"),
    [
        ("serve", "uvicorn", "pip install 'contextwright[server]'"),
        ("mcp", "mcp.server.mcpserver", "pip install --upgrade 'contextwright[mcp]'"),
    ],
)
def test_a_missing_extra_names_the_install_command(
    tmp_path: Path, command: str, blocked: str, words: str
) -> None:
    """Without the server extra (`make demo` before it installed it), or with an mcp SDK too old
    for mcp.server.mcpserver, the command says what to install: exit 1, not 3 ("a bug")."""
    code = (
        f"import sys; sys.modules[{blocked!r}] = None\n"
        "from contextwright.cli import main\n"
        f"main(['--db', 'sqlite:///{tmp_path / 'x.db'}', {command!r}])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and words in done.stderr
