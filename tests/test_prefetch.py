"""The inline sources' reads, fetched before they run (`SourceContext.prefetch`): on a store that
answers many queries in one round trip (`ReadsMany`: PostgreSQL) the window is the one that reading
each query alone gives, and the reads cost one round trip instead of one each."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from contextwright import Engine
from contextwright.assembly import pipeline
from contextwright.assembly.sources import SourceContext
from contextwright.errors import StoreError
from contextwright.ports import Query, ReadsMany, Store, capable
from contextwright.roles import profile_for
from contextwright.stores.postgres import PostgresStore
from contextwright.tokens.counter import default_counter
from pg import pq_traced

P = "pf"
T0 = 1_750_000_000.0
COUNTER = default_counter()
INLINE = ["history", "addressed", "open_items", "pinned", "decisions", "kv"]


def _fill(engine: Engine) -> None:
    engine.register_agent(P, "ann", "developer")
    engine.register_agent(P, "bob", "reviewer")
    rows: list[dict[str, Any]] = []
    for i in range(40):
        rows.append({"project": P, "author": "ann" if i % 3 else "bob", "kind": "message",
                     "content": f"turn {i} about the billing export", "session": "s1",
                     "created_at": T0 + i})  # fmt: skip
    rows += [
        {"project": P, "author": "bob", "kind": "message", "content": "@ann see @deploy.target",
         "created_at": T0 + 50},
        {"project": P, "author": "bob", "kind": "task", "content": "ship the export", "to": ["ann"],
         "created_at": T0 + 51},
        {"project": P, "author": "ann", "kind": "question", "content": "which region?",
         "created_at": T0 + 52},
        {"project": P, "author": "bob", "kind": "constraint", "content": "never drop rows",
         "created_at": T0 + 53},
        {"project": P, "author": "bob", "kind": "state", "content": "export is at step 2",
         "created_at": T0 + 54, "pinned": True},
        {"project": P, "author": "ann", "kind": "note", "content": "pinned note", "pinned": True,
         "created_at": T0 + 55},
        {"project": P, "author": "bob", "kind": "decision", "content": "use parquet",
         "created_at": T0 + 56},
        {"project": P, "author": "bob", "kind": "message", "content": "for cy only",
         "visibility": "direct", "to": ["cy"], "created_at": T0 + 57},
    ]  # fmt: skip
    engine.add_many(rows)
    engine.kv_set(P, "deploy.target", "eu-west-1")


def _queries(engine: Engine) -> list[Query]:
    """Every query the default inline sources read for ann's call, and a few more shapes."""
    ctx = _ctx(engine.store)
    out: list[Query] = []
    for src in engine.assembler.sources:
        wants = getattr(src, "queries", None)
        if wants is not None:
            out.extend(wants(ctx))
    return [
        *out,
        Query(P, "ann", kinds=("message",), newest_first=False, limit=5),
        Query(P, "ann", since=T0 + 10, before=T0 + 20),
        Query(P, "ann", kinds=("nothing",)),  # no rows
        Query(P, None, statuses=("open", "active"), limit=3),
    ]


def _ctx(store: Store) -> SourceContext:
    return SourceContext(store=store, counter=COUNTER, project=P, agent="ann",
                         role=profile_for("developer"), task="ship the export @deploy.target",
                         session="s1", now=T0 + 100)  # fmt: skip


def test_prefetched_reads_are_the_separate_reads(store: Store) -> None:
    engine = Engine(store, workers=1)
    _fill(engine)
    queries = _queries(engine)
    assert len(set(queries)) >= 8
    alone = [store.query(q) for q in queries]
    ctx = _ctx(store)
    ctx.prefetch(queries)
    if capable(store, ReadsMany):
        assert set(ctx.reads) == set(queries)  # all of them read beforehand
        assert store.query_many(queries) == alone  # type: ignore[attr-defined]
    assert [ctx.query(q) for q in queries] == alone
    assert any(alone) and not all(alone)


def _window(engine: Engine) -> tuple[str, list[Any]]:
    result = engine.assemble(P, "ann", "ship the export @deploy.target", 4000, session="s1")
    items = [sorted((k, repr(v)) for k, v in i.items()) for i in result.trace.items]
    return result.text, items


def test_the_window_is_the_one_without_prefetch(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = Engine(store, cache_ttl_s=0)
    _fill(engine)
    with_prefetch = _window(engine)
    monkeypatch.setattr(pipeline, "_prefetch", lambda *a: None)
    assert _window(engine) == with_prefetch
    assert "eu-west-1" in with_prefetch[0] and "use parquet" in with_prefetch[0]


@contextmanager
def round_trips(store: PostgresStore) -> Iterator[list[int]]:
    """Counts the round trips of a store of one connection while the block runs (libpq's trace):
    each Sync or simple Query is answered by one ReadyForQuery. The count is in the list after
    the block."""
    counted: list[int] = []
    with pq_traced(store) as text:
        yield counted
    counted.append(
        sum(1 for line in text[0].splitlines() if "\tB\t" in line and "ReadyForQuery" in line)
    )


@pytest.fixture
def one_conn(pg_url: str) -> Iterator[PostgresStore]:
    store = PostgresStore(pg_url, min_size=1, max_size=1)
    yield store
    store.close()


@pytest.mark.postgres
def test_inline_sources_read_in_one_round_trip(one_conn: PostgresStore) -> None:
    engine = Engine(one_conn, workers=1, cache_ttl_s=0)  # no pool: every source on this thread
    _fill(engine)
    ctx = _ctx(one_conn)
    sources = [s for s in engine.assembler.sources if s.name in INLINE]
    assert len(sources) == len(INLINE)
    with round_trips(one_conn) as trips:
        found, runs = pipeline.run_sources(sources, ctx, None, 5.0)
    assert not [r for r in runs if r.error] and found
    # Six distinct reads (addressed and kv share one) in one; kv's one value is one more lookup.
    assert len(ctx.reads) == 6
    assert trips == [2]


@pytest.mark.postgres
def test_a_planner_setting_is_one_round_trip_and_ends_with_its_read(
    one_conn: PostgresStore,
) -> None:
    with round_trips(one_conn) as trips:
        assert one_conn._read("SHOW enable_indexscan", planner="enable_indexscan = off") == [
            ("off",)
        ]
    assert trips == [1]
    assert one_conn._read("SHOW enable_indexscan") == [("on",)]  # the same connection
    with pytest.raises(StoreError):
        one_conn._read("SELECT * FROM no_such_table", planner="enable_indexscan = off")
    assert one_conn._read("SHOW enable_indexscan") == [("on",)]


@pytest.mark.postgres
def test_the_agent_and_the_version_are_one_read(
    one_conn: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = Engine(one_conn, workers=1)
    _fill(engine)
    doc = one_conn.get_doc("agents", P, f"{P}/ann")
    assert doc is not None
    assert one_conn.doc_with_version("agents", P, f"{P}/ann") == (doc, one_conn.version(P))
    assert one_conn.doc_with_version("agents", "elsewhere", "elsewhere/ann") == (None, 0)
    with round_trips(one_conn) as trips:
        agent, version = engine.agents_dir.get_at_version(P, "ann")
    assert trips == [1] and version == one_conn.version(P) and agent.role == "developer"

    def no_version(project: str) -> int:
        raise AssertionError("the version was read with the agent")

    monkeypatch.setattr(one_conn, "version", no_version)
    assert "use parquet" in engine.assemble(P, "ann", "ship the export", 4000, session="s1").text


@pytest.mark.postgres
def test_follow_ups_are_one_round_trip(one_conn: PostgresStore) -> None:
    """chains.read_links: the two follow-up reads of a call, sent together (pipeline mode)."""
    engine = Engine(one_conn, workers=1)
    _fill(engine)
    engine.add(project=P, author="bob", kind="decision", content="use orc", id="d2",
               supersedes=engine.store.query(Query(P, None, kinds=("decision",)))[-1].id,
               created_at=T0 + 60)  # fmt: skip
    question = one_conn.query(Query(P, None, kinds=("question",)))[0].id
    old = one_conn.query(Query(P, None, kinds=("decision",), newest_first=False))[0].id
    engine.add(project=P, author="bob", content="eu-west-1", reply_to=question, created_at=T0 + 61)
    with round_trips(one_conn) as trips:
        replies, by, near = one_conn.follow_ups(P, "ann", [question], [old], [(None, T0 + 61)])
    assert trips == [1]
    assert [r.content for r in replies] == ["eu-west-1"] and by == {old: "d2"}
    assert len(near) == 1
