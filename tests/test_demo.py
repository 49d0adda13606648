"""`make demo` runs the real code end to end: a week of a product team replayed into a SQLite file,
then three agents' windows. These tests run it into a temporary directory and check what it built."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from contextwright import Engine
from contextwright.demo import PROJECT, TEAM, clock, replay
from contextwright.demo.__main__ import ACTS, BUDGET, VIEWS, main, open_fresh
from contextwright.demo.show import PlainConsole


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("demo")
    buf = io.StringIO()
    engine = open_fresh(str(out))
    try:
        for act in ACTS:
            act(engine, PlainConsole(buf))
    finally:
        engine.close()
    return out / "team.db", buf.getvalue()


@pytest.fixture
def engine(demo: tuple[Path, str]) -> Iterator[Engine]:
    with Engine.open(f"sqlite:///{demo[0]}", clock=clock) as e:
        yield e


def test_replays_a_realistic_week(engine: Engine) -> None:
    assert engine.store.count(PROJECT) >= 500
    agents = {a.id: a.role for a in engine.agents(PROJECT)}
    assert agents == TEAM
    kinds = {r.kind for r in engine.records(PROJECT, limit=10_000)}
    assert {"decision", "question", "tool_call", "tool_result", "handoff", "constraint"} <= kinds
    results = engine.records(PROJECT, kinds=["tool_result"], limit=10_000)
    assert results and all(r.reply_to for r in results)
    assert max(r.tokens for r in results) > 500  # large tool results
    days = {int(r.created_at // 86_400) for r in engine.records(PROJECT, limit=10_000)}
    assert len(days) == 5


def test_the_three_windows_fit_and_leave_out_what_they_must(engine: Engine) -> None:
    superseded = {
        r.id for r in engine.records(PROJECT, kinds=["decision"], statuses=["superseded"])
    }
    assert len(superseded) == 2
    private = {
        r.id: r.author for r in engine.records(PROJECT, limit=10_000) if r.visibility == "private"
    }
    direct = {
        r.id: {r.author, *r.to}
        for r in engine.records(PROJECT, limit=10_000)
        if r.visibility == "direct"
    }
    assert private and direct
    for view in VIEWS:
        result = engine.assemble(
            PROJECT, view.agent, view.task, BUDGET, format=view.format, session=f"{view.agent}-day5"
        )
        assert 0 < result.tokens <= result.available
        shown = {
            rid
            for items in result.sections.values()
            for i in items
            for rid in i.candidate.record_ids
        }
        assert not shown & superseded
        for rid in shown:
            assert private.get(rid, view.agent) == view.agent
            assert view.agent in direct.get(rid, {view.agent})
        assert engine.trace(result.trace.project, result.trace.id).tokens == result.tokens


def test_output_shows_three_windows_budgets_and_traces(demo: tuple[Path, str]) -> None:
    text = demo[1]
    for view in VIEWS:
        assert f"Window for {view.agent} · {view.format}" in text
    assert text.count("Budget: gpt-4o window 6000") == 3
    assert text.count("; the sources") == 3
    assert "superseded by" in text  # a superseded decision is shown as dropped, with why


def test_replay_is_deterministic(tmp_path: Path) -> None:
    def snapshot(name: str) -> list[tuple[str, float, str]]:
        with Engine.open(f"sqlite:///{tmp_path / name}", clock=clock) as e:
            replay(e)
            return [(r.id, r.created_at, r.content) for r in e.records(PROJECT, limit=10_000)]

    assert snapshot("a.db") == snapshot("b.db")


def test_main_recreates_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "team.db").write_text("not a database")
    main(["--out", str(tmp_path), "--plain"])
    out = capsys.readouterr().out
    assert "records from rhea (researcher)" in out
    with Engine.open(f"sqlite:///{tmp_path / 'team.db'}") as e:
        assert e.store.count(PROJECT) >= 500
