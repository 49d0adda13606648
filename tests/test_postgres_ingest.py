"""PostgreSQL's batch write: a large batch goes through COPY into a staging table, a small one as
parameter arrays; both must store exactly what the SQLite store stores (records, addressing,
tags, supersedes links), answer repeats with the stored record, and refuse a changed repeat
leaving the store as it was."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextwright import ValidationError
from contextwright.ports import Query
from contextwright.records import Record, build_record
from contextwright.stores.postgres import PostgresStore
from contextwright.stores.postgres_writes import COPY_FROM
from contextwright.stores.sqlite import SQLiteStore

pytestmark = pytest.mark.postgres

P = "ing"
T0 = 1_750_000_000.0
AGENTS = ("ann", "bob", "cy")
# Text that COPY's text format must escape: tab, newline, backslash, carriage return, quotes.
AWKWARD = ["a\tb", "line one\nline two", "back\\slash \\N", "cr\r\n", "quote ' \" é ✓"]


def _records(n: int, seed: int, start: int = 0) -> list[Record]:
    rng = random.Random(seed)
    out: list[Record] = []
    for i in range(start, start + n):
        fields: dict[str, Any] = {
            "id": f"x{i:05d}",
            "project": P,
            "author": rng.choice(AGENTS),
            "kind": rng.choice(["note", "message", "decision", "task"]),
            "content": f"{rng.choice(AWKWARD)} record {i} {rng.choice(['alpha', 'beta'])}",
            "created_at": T0 + i,
            "session": rng.choice([None, "s1", "s2"]),
        }
        roll = rng.random()
        if roll < 0.3:
            fields.update(to=[rng.choice(AGENTS)], visibility=rng.choice(["direct", "project"]))
        elif roll < 0.5:
            fields["tags"] = rng.sample(["red", "green", "blue"], k=rng.randint(1, 2))
        elif roll < 0.6 and out:
            fields["reply_to"] = rng.choice(out).id
        if fields["kind"] == "decision" and out and rng.random() < 0.5:
            fields["supersedes"] = rng.choice(out).id
        if rng.random() < 0.1:
            fields["meta"] = {"k": [1, "two", None], "tab": "\t"}
        out.append(build_record(fields, lambda text: len(text.split())))
    return out


@pytest.fixture
def stores(pg_url: str, tmp_path: Path) -> Iterator[tuple[PostgresStore, SQLiteStore]]:
    pg, lite = PostgresStore(pg_url), SQLiteStore(str(tmp_path / "lite.db"))
    yield pg, lite
    pg.close()
    lite.close()


def _view(store: Any) -> dict[str, Any]:
    """Everything a reader can tell apart, per agent."""
    out: dict[str, Any] = {"all": [r for r in store.query(Query(P, None, limit=1000))]}
    for agent in AGENTS:
        out[agent] = [r.id for r in store.query(Query(P, agent, limit=1000))]
        out[f"to {agent}"] = [
            r.id for r in store.query(Query(P, None, addressed_to=agent, limit=1000))
        ]
    for tag in ("red", "green", "blue"):
        out[tag] = [r.id for r in store.query(Query(P, None, tag=tag, limit=1000))]
    out["superseded"] = [
        r.id for r in store.query(Query(P, None, statuses=("superseded",), limit=1000))
    ]
    ids = [r.id for r in out["all"]]
    out["superseded_by"] = store.superseded_by(P, ids)
    out["history"] = {i: store.status_history(P, i) for i in out["superseded"]}
    out["edges"] = store.edges(P)
    return out


@pytest.mark.parametrize("size", [COPY_FROM - 1, COPY_FROM, 3 * COPY_FROM + 5])
def test_a_batch_stores_what_sqlite_stores(
    stores: tuple[PostgresStore, SQLiteStore], size: int
) -> None:
    pg, lite = stores
    first, second = _records(size, seed=size), _records(size, seed=size + 1, start=size)
    for batch in (first, second):
        assert [r.id for r in pg.add_many(batch)] == [r.id for r in lite.add_many(batch)]
    got, want = _view(pg), _view(lite)
    assert got == want
    assert len(got["all"]) == 2 * size
    assert pg.version(P) == lite.version(P)


def test_a_large_batch_with_repeats_answers_the_stored_records(
    stores: tuple[PostgresStore, SQLiteStore],
) -> None:
    pg, _ = stores
    stored = pg.add_many(_records(COPY_FROM, seed=1))
    fresh = _records(COPY_FROM, seed=2, start=COPY_FROM)
    # Half of the batch is stored already, and one fresh record comes twice.
    batch = [*stored[::2], *fresh, fresh[0]]
    out = pg.add_many(batch)
    repeats = stored[::2]
    assert out[: len(repeats)] == pg.get_many(P, [r.id for r in repeats])
    assert [(r.id, r.content_hash) for r in out] == [(r.id, r.content_hash) for r in batch]
    assert pg.count(P) == 2 * COPY_FROM


def test_a_large_batch_with_a_changed_repeat_changes_nothing(
    stores: tuple[PostgresStore, SQLiteStore],
) -> None:
    pg, _ = stores
    stored = pg.add_many(_records(10, seed=3))
    version = pg.version(P)
    changed = build_record(
        {"id": stored[0].id, "project": P, "author": "ann", "kind": "note",
         "content": "other words", "created_at": T0},
        lambda text: len(text.split()),
    )  # fmt: skip
    batch = [*_records(COPY_FROM, seed=4, start=100), changed]
    with pytest.raises(ValidationError):
        pg.add_many(batch)
    assert pg.count(P) == 10
    assert pg.version(P) == version
    # The staging table is emptied with the transaction: the next batch stores only its own.
    pg.add_many(_records(COPY_FROM, seed=5, start=1000))
    assert pg.count(P) == 10 + COPY_FROM
