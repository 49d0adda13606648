"""PostgresStore's group commit (postgres_writes.py): the batches that threads queue while
another's transaction is open are stored together, and must store and answer exactly what the
same batches stored one after another would (compared with the SQLite store, each batch alone):
a refused batch fails alone, a repeat answers with the first, and a project's version counts
the writes that stored something in it."""

from __future__ import annotations

import functools
import itertools
import re
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextwright import ValidationError
from contextwright.ports import Query
from contextwright.records import Record, build_record
from contextwright.stores.batches import plan_batch
from contextwright.stores.postgres import PostgresStore
from contextwright.stores.sqlite import SQLiteStore
from pg import pq_traced
from test_group_commit import queued

pytestmark = pytest.mark.postgres

P = "gcp"
_EXAMPLES = itertools.count()


def rec(rid: str, content: str, project: str = P, **fields: Any) -> Record:
    data: dict[str, Any] = {"id": rid, "project": project, "author": "ann", "content": content,
                            "created_at": 1.0, **fields}  # fmt: skip
    return build_record(data, lambda text: len(text.split()))


def answer(store: Any, batch: Sequence[Record]) -> list[tuple[str, str]] | str:
    try:
        return [(r.id, r.content_hash) for r in store.add_many(batch)]
    except ValidationError as exc:
        return f"refused: {exc.field}"


def grouped(store: PostgresStore, batches: Sequence[Sequence[Record]]) -> list[Any]:
    """Each batch's answer, all of them queued into one group (a batch that contradicts itself
    is refused before it queues)."""
    results: dict[int, Any] = {}

    def add(n: int) -> None:
        results[n] = answer(store, batches[n])

    queue = []
    for n, batch in enumerate(batches):
        try:
            plan_batch(batch, {})
            queue.append(functools.partial(add, n))
        except ValidationError:
            add(n)
    queued(store, queue)
    return [results[n] for n in range(len(batches))]


def view(store: Any, projects: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in projects:
        records = store.query(Query(p, None, limit=1000))
        out[p] = {
            "records": sorted((r.id, r.content, r.status) for r in records),
            "version": store.version(p),
            "edges": store.edges(p),
            "tagged": sorted(r.id for r in store.query(Query(p, None, tag="t", limit=1000))),
            "to bob": sorted(
                r.id for r in store.query(Query(p, None, addressed_to="bob", limit=1000))
            ),
        }
    return out


def test_queued_batches_share_one_transaction_and_a_refused_one_fails_alone(
    pg: PostgresStore,
) -> None:
    pg.add_many([rec("taken", "first words")])
    batches = [[rec(f"r{n}-{k}", f"batch {n} record {k}") for k in range(3)] for n in range(8)]
    batches[3].append(rec("taken", "other words"))  # a changed repeat: batch 3 is refused
    groups = pg._grouped
    results = grouped(pg, batches)
    assert results[3] == "refused: id"
    for n in (0, 1, 2, 4, 5, 6, 7):
        assert [rid for rid, _ in results[n]] == [f"r{n}-{k}" for k in range(3)]
    stored = {r.id for r in pg.get_many(P, [f"r{n}-{k}" for n in range(8) for k in range(3)])}
    assert stored == {f"r{n}-{k}" for n in range(8) if n != 3 for k in range(3)}
    assert pg.get_many(P, ["taken"])[0].content == "first words"
    assert pg._grouped == groups + 1  # one transaction for all eight
    assert pg.version(P) == 8  # the first add and the seven stored batches, not the refused


def test_a_group_of_single_adds_is_one_insert_and_counts_each_write(pg: PostgresStore) -> None:
    pg.add_many([rec("old", "stored before")])
    batches = [
        [rec("a", "one", to=["bob"], visibility="direct")],
        [rec("b", "two", tags=["t"])],
        [rec("old", "stored before")],  # stores nothing: no bump
        [rec("c", "three", project="other")],
        [rec("a", "one", to=["bob"], visibility="direct")],  # stored by the first: no bump
        [rec("d", "four")],
    ]
    groups = pg._grouped
    results = grouped(pg, batches)
    assert [r[0][0] for r in results] == ["a", "b", "old", "c", "a", "d"]
    assert pg._grouped == groups + 1
    assert pg.version(P) == 1 + 3  # "old", then a, b and d
    assert pg.version("other") == 1
    assert [r.id for r in pg.query(Query(P, None, tag="t", limit=10))] == ["b"]
    assert [r.id for r in pg.query(Query(P, None, addressed_to="bob", limit=10))] == ["a"]


MESSAGE = re.compile(r"^[^\t\n]+\t([FB])\t\d+\t(\w+)(.*?)(?=^[^\t\n]+\t[FB]\t|\Z)", re.M | re.S)


@contextmanager
def waits(store: PostgresStore) -> Iterator[list[list[str]]]:
    """The statements sent before each wait for the server, on a store of one connection: each
    turn from the client's messages to the server's is one round trip (a pipeline's Flush is one
    as much as a Sync)."""
    turns: list[list[str]] = []
    with pq_traced(store) as text:
        yield turns
    sent: list[str] = []
    for side, kind, rest in MESSAGE.findall(text[0]):
        if side == "F" and kind == "Parse":
            sent.append(rest.split('"', 3)[3].split()[0].rstrip('"'))  # its first word
        elif side == "B" and sent:
            turns.append(sent)
            sent = []


def test_a_group_is_two_round_trips_with_the_version_bump_last(pg_url: str) -> None:
    """BEGIN with the insert, then the version bump with COMMIT: the project's row of
    project_versions, which every write to the project updates, stays locked (and another
    process's write waits) for one round trip on the server, not while this process reads the
    insert's answer (four round trips, the lock held over two of them)."""
    store = PostgresStore(pg_url, min_size=1, max_size=1)
    try:
        store.add_many([rec("first", "stored before")])
        batches = [[rec(f"g{n}", f"grouped {n}")] for n in range(4)]
        with waits(store) as turns:
            results = grouped(store, batches)
        assert [r[0][0] for r in results] == ["g0", "g1", "g2", "g3"]
        assert turns == [
            ["BEGIN", "WITH"],  # the insert
            ["INSERT", "COMMIT"],  # the bump of project_versions
        ], turns
        assert store.version(P) == 5
    finally:
        store.close()


def test_a_large_group_is_copied_and_counts_each_write(pg: PostgresStore) -> None:
    """A group of COPY_FROM records or more is staged with COPY, outside a pipeline, in the
    same transaction as its version bump."""
    batches = [[rec(f"c{n}-{k}", f"copied {n} {k}") for k in range(30)] for n in range(3)]
    batches.append([rec("c0-0", "copied 0 0")])  # stored by the first: no bump
    groups = pg._grouped
    results = grouped(pg, batches)
    assert [len(r) for r in results] == [30, 30, 30, 1]
    assert pg._grouped == groups + 1
    assert pg.count(P) == 90
    assert pg.version(P) == 3


def test_a_lone_record_changed_is_refused_and_changes_nothing(pg: PostgresStore) -> None:
    pg.add_many([rec("x", "first")])
    with pytest.raises(ValidationError):
        pg.add_many([rec("x", "second")])
    assert pg.get_many(P, ["x"])[0].content == "first"
    assert pg.version(P) == 1
    # The same record again answers with the stored one and bumps nothing.
    assert pg.add_many([rec("x", "first")])[0].content == "first"
    assert pg.version(P) == 1


IDS = ["a", "b", "c", "d"]
_record = st.builds(
    lambda rid, words, project, supersedes, tagged: (rid, words, project, supersedes, tagged),
    st.sampled_from(IDS),
    st.sampled_from(["red", "green"]),
    st.sampled_from(["p1", "p2"]),
    st.one_of(st.none(), st.sampled_from(IDS)),
    st.booleans(),
)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batches=st.lists(st.lists(_record, min_size=1, max_size=4), min_size=2, max_size=6))
def test_a_group_stores_and_answers_what_the_batches_one_by_one_would(
    pg: PostgresStore, batches: list[list[tuple[str, str, str, str | None, bool]]]
) -> None:
    """Whatever the batches hold (repeats within and across them, changed repeats, supersedes
    links, two projects), the group's answers and the stored records, links, tags, addressing
    and versions are those of the SQLite store given the batches one at a time."""
    run = next(_EXAMPLES)
    projects = [f"g{run}-p1", f"g{run}-p2"]

    def build(spec: tuple[str, str, str, str | None, bool]) -> Record:
        rid, words, project, supersedes, tagged = spec
        extra: dict[str, Any] = {"tags": ["t"]} if tagged else {"to": ["bob"]}
        if supersedes is not None and supersedes != rid:
            extra["supersedes"] = supersedes
        return rec(rid, f"{words} {rid}", f"g{run}-{project}", **extra)

    built = [[build(spec) for spec in batch] for batch in batches]
    with tempfile.TemporaryDirectory() as tmp:
        lite = SQLiteStore(f"{tmp}/lite.db")
        want = [answer(lite, batch) for batch in built]
        want_view = view(lite, projects)
        lite.close()
    assert grouped(pg, built) == want
    assert view(pg, projects) == want_view
