"""Display names ("Ada Lovelace", "أحمد", "🦊 Fox") through every interface: the engine on every
store, HTTP on real uvicorn, the MCP SDK's client and the CLI; and imports of real-looking chats
(display names, emoji, right-to-left text, very long lines) that report exactly what they stored."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client

from contextwright import Engine, ValidationError
from contextwright.cli import cli
from contextwright.importers import import_file
from contextwright.mcp.server import build_server, trace_uri
from contextwright.records import build_record, display_name_problem, parse_mentions
from contextwright.server import create_app
from contextwright.settings import Settings
from servers import running

ADA, GRACE = "Ada Lovelace", "Grace Hopper"
NAMES = [
    ADA,
    GRACE,
    "أحمد الخطيب",
    "דנה לוי",
    "Zoë O'Brien-Smith",
    "李小龙",
    "🦊 Fox",
    "team/reviewer",
]


def test_display_names_through_the_engine(engine: Engine) -> None:
    """Authored, addressed privately, filtered and assembled as a display name, on every store."""
    for name in NAMES:
        engine.register_agent("chat", name)
    engine.add(
        project="chat", author=ADA, content="The analytical engine weaves algebraic patterns"
    )
    engine.add(
        project="chat",
        author=ADA,
        content="Only for you: the compiler bug is in the loop",
        visibility="direct",
        to=[GRACE],
    )
    engine.add(project="chat", author="أحمد الخطيب", content="مرحبا بالجميع 👋 engine")
    assert [r.author for r in engine.records("chat", author=ADA)] == [ADA, ADA]
    assert {r.content for r in engine.records("chat", agent=GRACE)} >= {
        "Only for you: the compiler bug is in the loop"
    }
    assert "Only for you" not in " ".join(r.content for r in engine.records("chat", agent="🦊 Fox"))
    window = engine.assemble("chat", GRACE, "what did Ada say about the compiler bug?", 2000)
    assert "compiler bug is in the loop" in window.text and ADA in window.text
    other = engine.assemble("chat", "דנה לוי", "compiler bug", 2000)
    assert "compiler bug is in the loop" not in other.text
    done = engine.set_status("chat", engine.records("chat", author=ADA)[0].id, "resolved", by=GRACE)
    assert done.status == "resolved"


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("", "1-200"),
        ("   ", "whitespace"),
        (" Ada", "whitespace"),
        ("Ada\n## System", "U+000A"),
        ("Ada\u202eecalevol", "U+202E"),
        ("Ada\u2028", "U+2028"),
        ("x" * 201, "1-200"),
    ],
)
def test_names_that_cannot_work_are_refused_and_nothing_is_stored(
    engine: Engine, name: str, words: str
) -> None:
    for call in (
        lambda: engine.add(project="chat", author=name, content="hi"),
        lambda: engine.add(project="chat", author="a", content="hi", visibility="direct", to=[name]),
        lambda: engine.add_many([{"project": "chat", "author": "a", "content": "ok"},
                                 {"project": "chat", "author": name, "content": "hi"}]),
    ):  # fmt: skip
        with pytest.raises(ValidationError) as err:
            call()
        assert words in err.value.message and "Ada Lovelace" in err.value.fix
    with pytest.raises(ValidationError):
        engine.register_agent("chat", name)
    assert engine.store.count("chat") == 0


_ALLOWED = st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp"))


@settings(max_examples=200, deadline=None)
@given(st.text(_ALLOWED, min_size=1, max_size=200).filter(lambda s: s == s.strip()))
def test_any_name_without_controls_is_a_display_name(name: str) -> None:
    bidi = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
    problem = display_name_problem(name)
    assert (problem is None) == (not bidi & set(name))
    if problem is None:
        r = build_record({"project": "p", "author": name, "content": "x", "to": [name]}, len)
        assert r.author == name and r.to == (name,)


def test_mentions_any_script_and_quoted_display_names() -> None:
    text = '@"Ada Lovelace" and @Zoë, @محمد, not a@b.com, @"  padded" @kv:port'
    assert parse_mentions(text) == ("Ada Lovelace", "Zoë", "محمد", "kv:port")


def test_identifiers_stay_strict(engine: Engine) -> None:
    for key in ("project", "session", "milestone", "id"):
        fields: dict[str, Any] = {"project": "chat", "author": ADA, "content": "x"}
        fields[key] = "Ada Lovelace"
        with pytest.raises(ValidationError) as err:
            engine.add(**fields)
        assert err.value.field == key


def test_display_names_over_http() -> None:
    engine = Engine.open("memory://")
    app = create_app(engine, Settings(db="memory://"))
    try:
        with running(app) as base, httpx.Client(base_url=base) as client:
            for name in NAMES:
                path = f"/v1/projects/chat/agents/{quote(name, safe='')}"
                put = client.put(path, json={"role": "default"})
                assert put.status_code == 200, put.text
                assert client.get(path).json()["id"] == name
            r = client.post(
                "/v1/projects/chat/records",
                json={"author": ADA, "content": "مرحبا — the loop bug", "visibility": "direct",
                      "to": [GRACE]},
            )  # fmt: skip
            assert r.status_code == 201, r.text
            assert r.json()["author"] == ADA and r.json()["to"] == [GRACE]
            seen = client.get("/v1/projects/chat/records", params={"agent": GRACE, "author": ADA})
            assert [x["author"] for x in seen.json()["records"]] == [ADA]
            hidden = client.get("/v1/projects/chat/records", params={"agent": "דנה לוי"})
            assert hidden.json()["records"] == []
            win = client.post(
                "/v1/projects/chat/assemble", json={"agent": GRACE, "task": "loop bug"}
            )
            assert win.status_code == 200, win.text
            assert "the loop bug" in win.json()["text"]
            bad = client.post("/v1/projects/chat/records", json={"author": "Ada\n", "content": "x"})
            assert bad.status_code == 422 and "author" in bad.text
    finally:
        engine.close()


def test_display_names_over_mcp() -> None:
    engine = Engine.open("memory://")
    engine.register_agent("chat", GRACE)

    async def go() -> tuple[Any, Any, Any]:
        async with Client(build_server(engine)) as client:
            posted = await client.call_tool(
                "post_message",
                {"project": "chat", "author": ADA, "content": '@"Grace Hopper" the loop bug',
                 "to": [GRACE], "visibility": "direct"},
            )  # fmt: skip
            window = await client.call_tool(
                "assemble_context", {"project": "chat", "agent": GRACE, "task": "loop bug"}
            )
            data = json.loads(window.content[0].text)
            trace = await client.read_resource(trace_uri("chat", GRACE, data["trace_id"]))
            return posted, data, json.loads(trace.contents[0].text)

    try:
        posted, window, trace = asyncio.run(go())
    finally:
        engine.close()
    assert not posted.is_error and json.loads(posted.content[0].text)["mentions"] == [GRACE]
    assert "the loop bug" in window["text"]
    assert trace["agent"] == GRACE


def test_display_names_through_the_cli(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"

    def run(*args: str) -> str:
        result = CliRunner().invoke(cli, ["--db", db, *args])
        assert result.exit_code == 0, (result.output, result.stderr)
        return result.stdout

    run("add", "-p", "chat", "-a", ADA, "--to", GRACE, "--visibility", "direct", "مرحبا loop bug")
    run("add", "-p", "chat", "-a", "🦊 Fox", "hello from the den")
    out = run("assemble", "-p", "chat", "-a", GRACE, "-t", "loop bug", "-b", "4000")
    assert "مرحبا loop bug" in out and ADA in out
    hidden = run("assemble", "-p", "chat", "-a", "🦊 Fox", "-t", "loop bug", "-b", "4000")
    assert "مرحبا loop bug" not in hidden


# -- imports ----------------------------------------------------------------------------------


def _chat(tmp_path: Path) -> Path:
    """A JSONL chat export as people write it: display names, emoji, RTL text, a very long line."""
    rows = [
        {"id": "m1", "author": ADA, "content": "Shall we meet at the engine? 🚂"},
        {"id": "m2", "author": GRACE, "content": "Yes! bring the 🐛 from the Mark II"},
        {"id": "m3", "author": "أحمد الخطيب", "content": "مرحبا بالجميع، سأصل متأخرا"},
        {"id": "m4", "author": "דנה לוי", "content": "שלום! אני כאן"},
        {"id": "m5", "author": "Zoë 👩‍💻", "content": "long " + "word " * 40_000},
    ]
    path = tmp_path / "chat.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", "utf-8")
    return path


def test_import_reports_stored_then_skipped_with_why(engine: Engine, tmp_path: Path) -> None:
    path = _chat(tmp_path)
    first = import_file(engine, path, "jsonl", "chat")
    assert (first.rows, first.stored, first.skipped, first.refused) == (5, 5, [], [])
    assert first.projects == {"chat": 5}
    authors = {r.author for r in engine.records("chat", limit=10)}
    assert authors == {ADA, GRACE, "أحمد الخطيب", "דנה לוי", "Zoë 👩‍💻"}
    assert len(engine.get("chat", "m5").content) > 200_000

    again = import_file(engine, path, "jsonl", "chat")
    assert again.stored == 0 and engine.store.count("chat") == 5
    assert [(n.row, n.reason) for n in again.skipped] == [
        (f"line {i}", "already present with the same content") for i in range(1, 6)
    ]
    assert "stored 0 new records of 5 rows" in again.summary()
    assert "skipped 5: already present with the same content (line 1" in again.summary()


def test_a_second_project_counts_only_what_the_store_took(engine: Engine, tmp_path: Path) -> None:
    """The same file into another project: the count printed is what that project now holds,
    whether ids are global (the rows are skipped, with why) or per project (they are stored)."""
    path = _chat(tmp_path)
    import_file(engine, path, "jsonl", "chat")
    other = import_file(engine, path, "jsonl", "chat-copy")
    assert other.stored == engine.store.count("chat-copy")
    assert other.stored + len(other.skipped) == 5
    assert all(n.reason for n in other.skipped)
    if other.skipped:
        assert "stored 0 new records of 5 rows; skipped 5; refused 0" in other.summary()


def test_import_refuses_bad_rows_naming_each(engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(r, ensure_ascii=False)
            for r in (
                {"author": ADA, "content": "fine"},
                {"author": " Grace", "content": "leading space"},
                {"author": GRACE, "content": 7},
                {"author": "דנה", "content": "fine too"},
            )
        ),
        "utf-8",
    )
    with pytest.raises(ValidationError) as err:
        import_file(engine, path, "jsonl", "chat")
    assert err.value.field == "line 2: author" and "1 more rows" in err.value.fix
    assert engine.store.count("chat") == 0

    report = import_file(engine, path, "jsonl", "chat", skip_invalid=True)
    assert report.stored == 2 == engine.store.count("chat")
    assert [(n.row, n.field) for n in report.refused] == [
        ("line 2", "author"),
        ("line 3", "content"),
    ]
    assert "refused 1:" in report.summary() and "line 3" in report.summary()


def _locomo(speakers: tuple[str, str], sample: str) -> dict[str, Any]:
    a, b = speakers
    return {
        "sample_id": sample,
        "conversation": {
            "speaker_a": a,
            "speaker_b": b,
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": a, "dia_id": "D1:1", "text": "Hi! 😀"},
                {"speaker": b, "dia_id": "D1:2", "text": "שלום, how are you?"},
            ],
        },
        "qa": [],
    }


def test_locomo_import_one_project_per_sample(engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "loco.json"
    path.write_text(
        json.dumps([_locomo((ADA, GRACE), "chat 1"), _locomo(("أحمد", "  Dana  "), "chat-2")])
    )
    report = import_file(engine, path, "locomo", "loco-{sample}")
    assert report.projects == {"loco-chat-1": 2, "loco-chat-2": 2}
    assert {r.author for r in engine.records("loco-chat-1")} == {ADA, GRACE}
    assert {r.author for r in engine.records("loco-chat-2")} == {"أحمد", "Dana"}
    with pytest.raises(ValidationError) as err:
        import_file(engine, _chat(tmp_path), "jsonl", "x-{sample}")
    assert err.value.field == "project"


def test_cli_import_prints_what_it_stored(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    path = _chat(tmp_path)

    def run(*args: str) -> Any:
        return CliRunner().invoke(cli, ["--db", db, *args])

    first = run("import", str(path), "-p", "chat")
    assert first.exit_code == 0 and "stored 5 new records of 5 rows in chat (5)" in first.stdout
    again = run("import", str(path), "-p", "chat", "--json")
    data = json.loads(again.stdout)
    assert (data["stored"], data["skipped"], data["refused"]) == (0, 5, 0)
    assert data["skipped_rows"][0] == {
        "row": "line 1",
        "reason": "already present with the same content",
        "id": "m1",
    }


def test_a_multi_word_name_is_named_whole_or_by_its_given_name() -> None:
    from contextwright.assembly.scoring import topic

    people = [ADA, GRACE, "bob"]
    assert topic("What did Ada say about the grace period?", people) == (
        "What did say about the grace period?"
    )
    assert topic("what did grace   hopper's team ship next spring", people) == (
        "what did team ship next spring"
    )
