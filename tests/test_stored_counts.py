"""Whose token counts a project's records carry (stored_counts.py): an engine counts a window's
record lines from the records' stored counts only where they were made by its own tokenizer, so
that a store written by an engine with another tokenizer never puts a window over its budget."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextwright import Budget, Engine, ValidationError
from contextwright.assembly.render import render
from contextwright.assembly.stored_counts import COLLECTION, MIXED, tokenizer_name
from contextwright.ports import Store
from contextwright.records import build_record
from contextwright.stores import open_store
from contextwright.testing import WordTokenizer
from contextwright.tokens.counter import ENCODING, TokenCounter
from exact import UNCACHED, exact_tokens

P = "proj"
TEXTS = [
    "Ship the billing export today, then tell @bob what changed.",
    "The migration of the orders table failed twice on staging!",
    "Decision: keep the retry budget at three attempts per job.",
    "Why does the login page reload when the token refreshes?",
] * 6


def _fill(engine: Engine, session: str = "s1") -> None:
    engine.add_many(
        [
            {"project": P, "author": "alice", "content": f"{t} (note {i})", "session": session}
            for i, t in enumerate(TEXTS)
        ]
    )


def _note(engine: Engine) -> object:
    doc = engine.store.get_doc(COLLECTION, P, P)
    return None if doc is None else doc["tokenizer"]


def test_the_default_tokenizer_has_a_name() -> None:
    assert tokenizer_name(TokenCounter()) == ENCODING
    assert tokenizer_name(WordTokenizer()) == "words"


def test_an_engine_notes_its_tokenizer_and_takes_its_own_counts(store: Store) -> None:
    with Engine(store, persist_traces=False) as engine:
        assert _note(engine) is None
        _fill(engine)
        assert _note(engine) == ENCODING
        assert engine.counts.trusted(P, engine.store.version(P))


def test_another_tokenizer_makes_the_project_mixed_for_both(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    with Engine(open_store(url), persist_traces=False) as mine:
        _fill(mine)
        with Engine(open_store(url), counter=WordTokenizer(), persist_traces=False) as theirs:
            assert not theirs.counts.trusted(P, theirs.store.version(P))
            theirs.add(project=P, author="bob", content="counted by words", session="s1")
            assert _note(theirs) == MIXED
            assert not theirs.counts.trusted(P, theirs.store.version(P))
        # The note changed with a write, so with the project's version: read again.
        assert not mine.counts.trusted(P, mine.store.version(P))
        mine.add(project=P, author="alice", content="counted by cl100k again", session="s1")
        assert _note(mine) == MIXED  # never back: older records keep the other counts


def test_a_project_without_a_note_is_counted_line_by_line(store: Store) -> None:
    """Records stored before notes were kept (here: straight into the store) carry counts of
    unknown origin, and stay counted line by line after an engine writes there."""
    with Engine(store, persist_traces=False) as engine:
        engine.store.add_many([build_record({"project": P, "author": "a", "content": "hi"}, len)])
        assert _note(engine) is None
        assert not engine.counts.trusted(P, engine.store.version(P))
        _fill(engine)  # the first engine to write there cannot vouch for what was there before
        assert _note(engine) == MIXED
        assert not engine.counts.trusted(P, engine.store.version(P))


def test_a_rejected_write_notes_nothing(store: Store) -> None:
    with Engine(store, persist_traces=False) as engine:
        with pytest.raises(ValidationError):
            engine.add_many([{"project": P, "author": "a", "content": "ok"}, {"project": P}])
        with pytest.raises(ValidationError):
            engine.add(project=P, author="a", content="")
        assert _note(engine) is None


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "markdown"])
def test_records_counted_by_another_tokenizer_never_put_a_window_over_budget(
    tmp_path: Path, fmt: str
) -> None:
    """Records stored with word counts (far below cl100k's), then assembled by a cl100k engine
    in a tight budget: its window is counted line by line, exactly, and fits. Counted from the
    stored counts instead, the same window would be reported far smaller than it is."""
    url = f"sqlite:///{tmp_path / 'c.db'}"
    with Engine(open_store(url), counter=WordTokenizer(), persist_traces=False) as theirs:
        _fill(theirs)
    with Engine(open_store(url), persist_traces=False) as mine:
        budget = Budget(model="gpt-4", window=700, reserve=100)
        # Another session: the records are knowledge lines (`- alice (...): text`) in every format.
        result = mine.assemble(P, "alice", "the billing export", budget, fmt, session="s9")
        assert result.tokens == exact_tokens(result) <= result.available
        assert any(result.sections.get(s) for s in ("knowledge", "suggestions"))
        trusting = render(result.sections, "alice", fmt, TokenCounter(), stored_counts=True)
        assert trusting.tokens < result.tokens  # what the note protects against


def test_windows_counted_from_stored_counts_are_exact(store: Store) -> None:
    with Engine(store, persist_traces=False) as engine:
        _fill(engine)
        _fill(engine, session="s2")
        for fmt in ("openai", "anthropic", "markdown"):
            result = engine.assemble(P, "alice", "the billing export", 2000, fmt, session="s1")
            assert result.tokens == exact_tokens(result)
            assert UNCACHED.count(result.text) > 0


class CountsEveryLine(TokenCounter):
    """cl100k, but every line of several is counted word by word, as before stored counts were
    taken for them (costs.shown_count falls back to counting)."""

    count_shown = None


def test_lines_of_several_lines_cost_what_counting_them_costs(store: Store) -> None:
    """Tool outputs of several lines (each starting with a number, a word or a mark) are packed
    at the cost their stored counts give: exactly what counting each shown line gives, so the
    same window and the same decisions, to the token."""
    lines = [
        "{:03d} Ship the audit log in zone {}: the p95 went up. See (runbook) #{}",
        "{:03d} Fix the retry policy; the token must rotate on refresh {} {}",
        "{:03d} @ops: why did job {} fail on step {}?",
    ]
    clock = lambda: 1.8e9  # noqa: E731
    with Engine(store, persist_traces=False, clock=clock) as engine:
        engine.add_many(
            [
                {
                    "project": P,
                    "author": "alice",
                    "kind": "note",
                    "content": "\n".join(
                        lines[(i + k) % 3].format(k, i, k * i) for k in range(3 + i % 5)
                    )
                    + ("\n\nexit status 1" if i % 4 == 0 else ""),
                    "created_at": 1.7e9 + i * 3600,
                }
                for i in range(40)
            ]
        )
        every = Engine(store, persist_traces=False, clock=clock, counter=CountsEveryLine())
        budget = Budget(model="gpt-4", window=1200, reserve=100)
        for fmt in ("openai", "anthropic", "markdown"):
            a = engine.assemble(P, "alice", "the retry policy audit log", budget, fmt, session="x")
            b = every.assemble(P, "alice", "the retry policy audit log", budget, fmt, session="x")
            assert a.text == b.text and a.tokens == b.tokens == exact_tokens(a)
            assert a.trace.kept == b.trace.kept and a.trace.dropped == b.trace.dropped
            assert any("\n  " in i.text or "\n" in i.candidate.records[0].content
                       for s in ("knowledge", "suggestions") for i in a.sections.get(s, []))  # fmt: skip
