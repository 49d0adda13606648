"""PostgreSQL's bounded reads: full-text search on a large store looks for the newest matches
among the newest rows first and must still rank exactly the newest LARGE_WINDOW matches when the
words were busier long ago."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from contextwright.records import Record, build_record
from contextwright.stores.fulltext import LARGE_WINDOW
from contextwright.stores.postgres import PostgresStore

pytestmark = pytest.mark.postgres

P = "reads"
T0 = 1_750_000_000.0


def rec(i: int, content: str, **fields: Any) -> Record:
    data = {"id": f"q{i:05d}", "project": P, "author": "ann", "kind": "note",
            "content": content, "created_at": T0 + i, **fields}  # fmt: skip
    return build_record(data, lambda text: len(text.split()))


@pytest.fixture
def pg(pg_url: str) -> Iterator[PostgresStore]:
    store = PostgresStore(pg_url)
    yield store
    store.close()


def test_a_word_busy_long_ago_still_ranks_the_newest_window(pg: PostgresStore) -> None:
    """1,100 matches among the oldest of 12,000 records: by its count the word is expected among
    the newest rows, where only 9 of its matches are. The newest LARGE_WINDOW (500) are ranked:
    their short ones (rank first), not only the long ones of the newest rows, and not the older
    short ones outside the window."""
    old_short, window_short, window_long = 600, 200, 300
    long_text = "alpha " + " ".join(f"word{k}" for k in range(40))
    contents = [
        *["alpha"] * old_short,  # outside the window: would outrank everything
        *["alpha beta"] * window_short,  # the best of the window
        *[long_text] * window_long,
        *[f"unrelated note {i}" for i in range(12_000 - 1_100)],
    ]
    assert window_short + window_long == LARGE_WINDOW
    records = [rec(i, c) for i, c in enumerate(contents)]
    for k in range(0, len(records), 2_000):
        pg.add_many(records[k : k + 2_000])
    hits = pg.search_text(P, "ann", "alpha", 40)
    best = {r.id for r in records[old_short : old_short + window_short]}
    assert len(hits) == 40
    assert {h.record.id for h in hits} <= best


def test_a_word_busy_lately_is_ranked_from_the_newest_rows(pg: PostgresStore) -> None:
    """The common case of the floor: matches spread evenly (one in 12, under a tenth of the
    records, which would be walked newest first), the newest 500 found above it."""
    records = [rec(i, "gamma" if i % 12 == 0 else f"other {i}") for i in range(14_000)]
    for k in range(0, len(records), 2_000):
        pg.add_many(records[k : k + 2_000])
    hits = pg.search_text(P, None, "gamma", 40)
    newest = [r.id for r in records if r.content == "gamma"][-LARGE_WINDOW:]
    assert len(hits) == 40
    # Equal scores: the newest first, all of them from the window.
    assert [h.record.id for h in hits] == newest[::-1][:40]
