"""The SQLite store's full-text ranking is FTS5's own bm25(): the same hits, in the same order
(best score first, then newest), with the same scores as a plain bm25() query over the index."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextwright.records import Record, build_record
from contextwright.stores.fulltext import fts_match
from contextwright.stores.sqlite import SQLiteStore
from contextwright.tokens.counter import default_counter

WORDS = [f"w{i}" for i in range(40)]
AGENTS = ["ann", "bob"]


def _records(rng: random.Random, n: int) -> list[Record]:
    count = default_counter().count
    out = []
    for i in range(n):
        # Zipf-like: low words everywhere, high words rare; lengths from 1 to 60 words.
        words = [WORDS[min(int(rng.paretovariate(1.2)) - 1, 39)] for _ in range(rng.randint(1, 60))]
        data = {
            "id": f"r{i:04d}",
            "project": "p",
            "author": rng.choice(AGENTS),
            "visibility": rng.choice(["project", "project", "private"]),
            "content": " ".join(words),
            "created_at": 1_750_000_000.0 + i,
        }
        out.append(build_record(data, count))
    return out


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SQLiteStore]:
    s = SQLiteStore(str(tmp_path_factory.mktemp("fts") / "rank.db"))
    s.add_many(_records(random.Random(7), 400))
    yield s
    s.close()


def _bm25_order(path: str, text: str, agent: str) -> list[tuple[str, float]]:
    """The reference: every match's bm25() straight from FTS5, visibility applied afterwards."""
    match = fts_match(text)
    assert match is not None
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT r.rid, r.id, r.author, r.visibility, bm25(records_fts) FROM records_fts t "
            "JOIN records r ON r.rid = t.rowid WHERE records_fts MATCH ?",
            (f"content:({match})",),
        ).fetchall()
    finally:
        conn.close()
    visible = [row for row in rows if row[3] == "project" or row[2] == agent]
    visible.sort(key=lambda row: (row[4], -row[0]))  # best (lowest) bm25 first, then newest
    return [(row[1], -row[4]) for row in visible]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=4, unique=True),
    st.sampled_from(AGENTS),
    st.integers(1, 60),
)
def test_the_store_ranks_as_fts5_bm25_does(
    store: SQLiteStore, terms: list[str], agent: str, limit: int
) -> None:
    text = " ".join(terms)
    expected = _bm25_order(store.path, text, agent)
    hits = store.search_text("p", agent, text, limit)
    assert [(h.record.id, h.score) for h in hits] == expected[:limit]


def test_a_common_word_ranks_as_bm25_does(store: SQLiteStore) -> None:
    """w0 is in most records: many ties and many matches, still bm25()'s order."""
    expected = _bm25_order(store.path, "w0", "ann")
    assert len(expected) > 100
    hits = store.search_text("p", "ann", "w0", 50)
    assert [(h.record.id, h.score) for h in hits] == expected[:50]
