"""PostgreSQL beyond the contract suite: migrations applied once by many workers, concurrent
writers, a pool that outlives dropped connections, pgvector search with the same answers as the
SQLite store, errors that never show a password, the missing extra, and the engine end to end."""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import io
import random
import re
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextwright import Budget, Engine, MissingExtra, StoreError, ValidationError
from contextwright.embedders import HashEmbedder
from contextwright.ports import Query
from contextwright.records import Record, build_record
from contextwright.stores import open_store
from contextwright.stores.fulltext import COMMON_DF, LARGE_WINDOW
from contextwright.stores.postgres import MIGRATIONS, PostgresStore
from contextwright.stores.postgres_schema import WORDS_SPAN
from contextwright.stores.postgres_url import redact
from contextwright.stores.postgres_vectors import Vector
from contextwright.stores.sqlite import SQLiteStore
from test_postgres_group_commit import waits

pytestmark = pytest.mark.postgres

P = "pgp"
T0 = 1_750_000_000.0
SECRET = "s3cret-Pa55"


def rec(i: int, **fields: Any) -> Record:
    data: dict[str, Any] = {
        "id": f"r{i:05d}",
        "project": P,
        "author": "ann",
        "kind": "note",
        "content": f"note number {i}",
        "created_at": T0 + i,
        **fields,
    }
    return build_record(data, lambda text: len(text.split()))


def _other_db(pg_url: str, name: str) -> str:
    """A fresh, empty database on the same server, dropped again by the caller."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    base, _, query = pg_url.partition("?")
    return base.rsplit("/", 1)[0] + f"/{name}" + (f"?{query}" if query else "")


def _drop_db(pg_url: str, name: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _migrate_before(conn: psycopg.Connection[Any], first: str) -> None:
    """The schema the migrations before `first` built, recorded as applied."""
    conn.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ)")
    for name, script in MIGRATIONS:
        if name < first:
            conn.execute(script)
            conn.execute("INSERT INTO migrations VALUES (%s, now())", (name,))


def _run_threads(n: int, target: Callable[[int], None]) -> list[BaseException]:
    errors: list[BaseException] = []
    start = threading.Barrier(n)

    def body(k: int) -> None:
        try:
            start.wait()
            target(k)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return errors


# -- migrations -----------------------------------------------------------------------------------


def test_migrations_are_recorded_once_and_reopening_is_a_no_op(pg_url: str) -> None:
    names = [name for name, _ in MIGRATIONS]
    url = _other_db(pg_url, "cw_migrate")
    try:
        # Several workers start at once against an empty database: one of them migrates.
        stores: list[PostgresStore] = []
        errors = _run_threads(4, lambda _k: stores.append(PostgresStore(url, max_size=1)))
        assert errors == []
        for store in stores:
            assert store.applied_migrations() == names
        with psycopg.connect(url) as conn:
            before = conn.execute(
                "SELECT name, applied_at FROM migrations ORDER BY name"
            ).fetchall()
        assert [n for n, _ in before] == sorted(names)
        for store in stores:
            store.close()
        again = PostgresStore(url)
        assert again.applied_migrations() == names
        again.close()
        with psycopg.connect(url) as conn:
            after = conn.execute("SELECT name, applied_at FROM migrations ORDER BY name").fetchall()
        assert after == before
    finally:
        _drop_db(pg_url, "cw_migrate")


# -- concurrency and the pool ---------------------------------------------------------------------


def test_concurrent_writers_lose_nothing_and_bump_the_version_once_per_write(
    pg: PostgresStore,
) -> None:
    threads, writes = 4, 15

    def writer(k: int) -> None:
        for j in range(writes):
            n = k * 1000 + j * 10
            if j % 3 == 0:  # some batches, some single records
                pg.add_many([rec(n + m) for m in range(3)])
            else:
                pg.add_many([rec(n, to=["bob"], tags=["t"])])

    assert _run_threads(threads, writer) == []
    expected = threads * sum(3 if j % 3 == 0 else 1 for j in range(writes))
    assert pg.count(P) == expected
    assert pg.version(P) == threads * writes
    got = pg.query(Query(P, None, limit=10_000))
    assert len({r.id for r in got}) == expected
    assert len(pg.query(Query(P, None, tag="t", limit=10_000))) == threads * 10


def test_concurrent_writers_of_the_same_id_store_it_once(pg: PostgresStore) -> None:
    results: list[Record] = []
    lock = threading.Lock()

    def writer(k: int) -> None:
        stored = pg.add_many([rec(7, content="written by all", created_at=T0 + k)])[0]
        with lock:
            results.append(stored)

    assert _run_threads(4, writer) == []
    assert pg.count(P) == 1
    assert len({r.content for r in results}) == 1  # everyone got back the record as stored
    assert results[0] == pg.get_many(P, ["r00007"])[0]
    assert pg.version(P) == 1


def test_the_pool_survives_many_calls_and_dropped_connections(pg_url: str) -> None:
    store = PostgresStore(pg_url, max_size=2)
    try:
        store.add_many([rec(i) for i in range(20)])

        def reader(k: int) -> None:
            for i in range(40):
                assert len(store.query(Query(P, "ann", limit=5))) == 5
                store.kv_set(P, f"k{k}", str(i), T0)

        assert _run_threads(6, reader) == []
        assert store._pool.get_stats()["pool_size"] <= 2
        # The server drops every connection (a restart, a failover): the next reads reconnect.
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        for _ in range(3):
            assert store.count(P) == 20
        assert store.kv_list(P, "k") == {f"k{k}": "39" for k in range(6)}
    finally:
        store.close()


def test_a_second_worker_sees_every_write_at_once(pg_url: str) -> None:
    """The engine keeps no state: two processes' stores on one database agree after each write."""
    a, b = PostgresStore(pg_url), PostgresStore(pg_url)
    try:
        a.add_many([rec(1)])
        assert b.version(P) == 1 and b.get_many(P, ["r00001"])[0].content == "note number 1"
        b.set_status(P, "r00001", "resolved", "bob", T0 + 5)
        assert a.version(P) == 2 and a.get_many(P, ["r00001"])[0].status == "resolved"
    finally:
        a.close()
        b.close()


# -- vectors --------------------------------------------------------------------------------------

TEXTS = [
    "the login cache keeps stale sessions",
    "sessions live in redis now",
    "billing export runs every night",
    "the rate limiter drops bursts above 100",
    "password reset emails are delayed",
    "redis cluster failover drill on friday",
    "dark mode ships behind a flag",
    "csv import chokes on quoted newlines",
]
QUERIES = ["where do sessions live", "redis failover", "nightly billing", "login cache stale"]


def _vector_records() -> list[Record]:
    out = []
    for i, text in enumerate(TEXTS):
        fields: dict[str, Any] = {"content": text, "author": ["ann", "bob", "cat"][i % 3]}
        if i % 4 == 1:  # direct to dan: ann, bob or cat may not see it unless they wrote it
            fields.update(visibility="direct", to=["dan"])
        if i % 4 == 3:
            fields.update(visibility="private")
        out.append(rec(i, **fields))
    return out


def _embed(store: Any, records: list[Record]) -> None:
    emb = HashEmbedder()
    store.put_vectors(
        emb.name, [(r.project, r.id, v) for r, v in zip(records, emb.embed(TEXTS), strict=True)]
    )


def test_vector_search_matches_the_sqlite_store(pg: PostgresStore, tmp_path: Path) -> None:
    records = _vector_records()
    sqlite = SQLiteStore(str(tmp_path / "v.db"))
    try:
        for store in (pg, sqlite):
            store.add_many(records)
            assert store.unembedded_count("hash") == len(records)
            assert [r.id for r in store.unembedded("hash", 3)] == [r.id for r in records[:3]]
            _embed(store, records)
            assert store.unembedded_count("hash") == 0
        emb = HashEmbedder()
        by_id = {r.id: r for r in records}
        for text in QUERIES:
            q = emb.embed([text])[0]
            for agent in (None, "ann", "bob", "dan", "eve"):
                got = pg.vector_search(P, agent, q, 4, "hash")
                want = sqlite.vector_search(P, agent, q, 4, "hash")
                assert [h.record.id for h in got] == [h.record.id for h in want], (text, agent)
                # Same cosines up to SQLite's int8 quantization.
                for g, w in zip(got, want, strict=True):
                    assert abs(g.score - w.score) < 0.02
                assert [h.score for h in got] == sorted((h.score for h in got), reverse=True)
                if agent is not None:
                    assert all(by_id[h.record.id].visible_to(agent) for h in got)
        # A direct record is found by its recipient and its author, by nobody else.
        q = emb.embed([TEXTS[1]])[0]
        assert pg.vector_search(P, "dan", q, 1, "hash")[0].record.id == "r00001"
        assert pg.vector_search(P, "bob", q, 1, "hash")[0].record.id == "r00001"
        assert "r00001" not in [h.record.id for h in pg.vector_search(P, "eve", q, 8, "hash")]
    finally:
        sqlite.close()


def test_both_stores_rank_only_the_newest_window_of_matches_on_a_large_store(
    pg: PostgresStore, tmp_path: Path
) -> None:
    """Past COMMON_DF records, SQLite and PostgreSQL rank the same window, the newest
    LARGE_WINDOW matches: 200 old one-word records, which would outrank every newer and longer
    match, are outside it in both (PostgreSQL ranked 1,000 until 22 Nov 2026)."""
    project, old, new = "window", 200, LARGE_WINDOW
    filler = COMMON_DF + 100 - old - new  # enough records for a large store, matching nothing
    contents = [
        *["alpha"] * old,
        *["alpha and a few more words that make this match longer"] * new,
        *[f"unrelated note {i}" for i in range(filler)],
    ]
    records = [rec(100_000 + i, project=project, content=c) for i, c in enumerate(contents)]
    oldest = {r.id for r in records[:old]}
    sqlite = SQLiteStore(str(tmp_path / "w.db"))
    try:
        for store in (pg, sqlite):
            store.add_many(records)
            hits = store.search_text(project, "ann", "alpha", 40)
            assert len(hits) == 40, store
            assert not oldest & {h.record.id for h in hits}, store
    finally:
        sqlite.close()


def test_vectors_are_replaced_skipped_and_scoped(pg: PostgresStore) -> None:
    records = _vector_records()
    pg.add_many(records)
    _embed(pg, records)
    one_hot = np.zeros(HashEmbedder().dim, dtype=np.float32)
    one_hot[3] = 1.0
    # Embedding again overwrites; an id that does not exist is skipped; nothing else changes.
    pg.put_vectors("hash", [(P, "r00000", one_hot), (P, "gone", one_hot)])
    top = pg.vector_search(P, None, one_hot, 1, "hash")[0]
    assert top.record.id == "r00000" and top.score == pytest.approx(1.0, abs=1e-6)
    assert pg.vector_search("other", None, one_hot, 5, "hash") == []
    assert pg.vector_search(P, None, one_hot, 5, "another-model") == []
    assert pg.vector_search(P, None, one_hot, 0, "hash") == []
    assert pg.unembedded_count("another-model") == len(records)


# -- errors ---------------------------------------------------------------------------------------


def _all_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://cw:{SECRET}@127.0.0.1:1/cw",  # nothing listens on port 1
        f"postgresql://cw:{SECRET}@127.0.0.1:notaport/cw",
        f"postgresql://cw@127.0.0.1:1/cw?password={SECRET}",
    ],
)
def test_an_unreachable_server_is_a_store_error_without_the_password(url: str) -> None:
    with pytest.raises(StoreError) as info:
        open_store(url)
    assert SECRET not in _all_text(info.value)
    assert "cannot open postgresql://cw" in str(info.value)
    assert "***" in str(info.value)


def test_a_missing_database_is_a_store_error_without_the_password(pg_url: str) -> None:
    base, _, query = pg_url.partition("?")
    user_host = base.split("://", 1)[1].rsplit("/", 1)[0].split("@", 1)
    url = f"postgresql://{user_host[0].split(':')[0]}:{SECRET}@{user_host[1]}/nope?{query}"
    with pytest.raises(StoreError, match='database "nope" does not exist') as info:
        PostgresStore(url)
    assert SECRET not in _all_text(info.value)


@pytest.mark.parametrize(
    "url,shown",
    [
        ("postgresql://app:pw@db:5432/cw", "postgresql://app:***@db:5432/cw"),
        ("postgresql://app@db/cw", "postgresql://app@db/cw"),
        ("postgres://app:p@ss:w@rd@db/cw", "postgres://app:***@db/cw"),
        ("postgresql://app@db/cw?password=pw&sslmode=require", "postgresql://app@db/cw?password=***&sslmode=require"),
        ("host=db user=app password=pw dbname=cw", "host=db user=app password=*** dbname=cw"),
    ],
)  # fmt: skip
def test_redact(url: str, shown: str) -> None:
    assert redact(url) == shown


def test_the_store_url_never_holds_the_password(pg_url: str) -> None:
    base, _, query = pg_url.partition("?")
    scheme, rest = base.split("://", 1)
    user, host = rest.split("@", 1)
    url = f"{scheme}://{user.split(':')[0]}:{SECRET}@{host}?{query}&pool_max=3"
    store = PostgresStore(url)
    try:
        assert SECRET not in store.url and "pool_max" in store.url
        assert store._pool.max_size == 3
    finally:
        store.close()


@pytest.mark.parametrize("value", ["0", "many", ""])
def test_a_bad_pool_size_is_a_validation_error(value: str) -> None:
    with pytest.raises(ValidationError, match="pool_max"):
        PostgresStore(f"postgresql://app@127.0.0.1:1/cw?pool_max={value}")


def test_text_postgres_cannot_hold_is_refused_and_changes_nothing(pg: PostgresStore) -> None:
    """Validation refuses NUL for every store; the store refuses it too if a Record is built by
    hand, and the whole batch is rolled back."""
    pg.add_many([rec(1)])
    with pytest.raises(ValidationError, match="NUL"):
        rec(3, content="a NUL \x00 byte")
    by_hand = dataclasses.replace(rec(3), content="a NUL \x00 byte")
    with pytest.raises(ValidationError, match="NUL"):  # bad input (422), not an outage (503)
        pg.add_many([rec(2), by_hand])
    assert pg.count(P) == 1 and pg.version(P) == 1
    assert pg.get_many(P, ["r00002", "r00003"]) == []


def test_without_the_extra_the_error_names_the_pip_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_import = builtins.__import__

    def no_psycopg(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.split(".")[0] in ("psycopg", "psycopg_pool"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_psycopg)
    expected = "PostgresStore requires the 'postgres' extra: pip install 'contextwright[postgres]'"
    for opener in (PostgresStore, open_store, Engine.open):
        with pytest.raises(MissingExtra) as info:
            opener("postgresql://app@db/cw")
        assert str(info.value) == expected
        assert info.value.to_dict()["extra"] == "postgres"


# -- the engine on PostgreSQL ---------------------------------------------------------------------


def test_engine_end_to_end(pg_url: str) -> None:
    with Engine(PostgresStore(pg_url), clock=lambda: T0 + 100) as engine:
        engine.register_agent(P, "bob", "developer")
        engine.add(project=P, author="pm", kind="constraint", content="Never log auth tokens.",
                   pinned=True)  # fmt: skip
        engine.add(project=P, author="ann", content="The login cache keeps stale sessions.")
        task = engine.add(
            project=P, author="ann", kind="task", content="@bob fix the login bug", to=["bob"]
        )
        engine.add(project=P, author="ann", visibility="private", content="SECRET login notes")
        result = engine.assemble(P, "bob", "fix the login bug", Budget(model="gpt-4o", window=4000))
        assert "Never log auth tokens." in result.text
        assert "login cache keeps stale sessions" in result.text
        assert "fix the login bug" in result.text
        assert "SECRET" not in result.text
        assert result.tokens <= result.available
        stored = engine.trace(P, result.trace.id)
        assert stored.id == result.trace.id and stored.tokens == result.tokens
        assert [t.id for t in engine.traces(P, "bob")] == [result.trace.id]
        kept = [i for i in stored.items if i["decision"] == "kept"]
        assert "fulltext" in {i["source"] for i in kept}
        assert any(task.id in i["record_ids"] for i in kept)


def test_the_vector_source_on_postgres(pg_url: str) -> None:
    with Engine(PostgresStore(pg_url), embedder="hash", clock=lambda: T0 + 100) as engine:
        engine.register_agent(P, "bob", "developer")
        engine.add_many(
            {"project": P, "author": "ann", "content": text, "id": f"v{i}"}
            for i, text in enumerate(TEXTS)
        )
        assert engine.wait_for_embeddings(timeout=20)
        result = engine.assemble(P, "bob", "redis failover drill", 4000)
        notes = result.trace.notes["vectors"]
        assert notes["on"] is True and notes["lag"] == 0 and notes["embedder"] == "hash"
        vector_items = [i for i in result.trace.items if "vector" in i["sources"]]
        assert vector_items and vector_items[0]["record_ids"] == ["v5"]


# -- full text ------------------------------------------------------------------------------------


def _corpus() -> list[Record]:
    """Short messages and long tool results over the same common words; a few rare names."""
    rng = random.Random(5)
    common = ["login", "flow", "cache", "session", "token", "deploy", "review", "billing"]
    rare = ["zorblax", "quimby", "vantor", "pelgrin"]
    out = []
    for i in range(60):
        if i % 3 == 0:
            lines = [" ".join(rng.choices(common, k=8)) for _ in range(30)]
            out.append(rec(i, kind="tool_result", content="\n".join(lines)))
        else:
            words = [*rng.choices(common, k=5), *([rare[i % 4]] if i % 5 == 1 else [])]
            out.append(rec(i, content=" ".join(words)))
    return out


def test_full_text_ranks_rare_words_first_and_long_records_lower(
    pg: PostgresStore, tmp_path: Path
) -> None:
    """BM25 on both stores: a rare word outweighs common ones, and length discounts. With
    PostgreSQL's ts_rank the long tool results, full of the common words, would come first."""
    sqlite = SQLiteStore(str(tmp_path / "t.db"))
    try:
        records = _corpus()
        for store in (pg, sqlite):
            store.add_many(records)
        for task, rare in (
            ("fix the login flow for zorblax", "zorblax"),
            ("vantor review", "vantor"),
        ):
            with_rare = {r.id for r in records if rare in r.content}
            for store in (pg, sqlite):
                hits = store.search_text(P, "ann", task, 10)
                assert {h.record.id for h in hits[: len(with_rare)]} == with_rare
        hits = pg.search_text(P, "ann", "billing token", 10)
        assert len(hits) == 10 and all(h.record.kind == "note" for h in hits)
    finally:
        sqlite.close()


def test_a_new_word_is_found_although_its_count_is_cached(pg: PostgresStore) -> None:
    pg.add_many([rec(i) for i in range(50)])
    assert pg.search_text(P, None, "zeta release", 5) == []
    pg.add_many([rec(99, content="the zeta release is out")])  # too little growth to recount
    assert [h.record.id for h in pg.search_text(P, None, "zeta release", 5)] == ["r00099"]


def test_the_docs_example_prints_what_it_shows(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/postgres.md's example, on the session's server rather than a second one of its own."""
    import pgserver

    text = (Path(__file__).resolve().parent.parent / "docs" / "postgres.md").read_text()
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)
    at = next(i for i, (lang, code) in enumerate(blocks) if "pgserver.get_server" in code)
    code, (lang, expected) = blocks[at][1], blocks[at + 1]
    assert lang == "text"

    class SessionServer:
        def get_uri(self) -> str:
            return pg_url

        def cleanup(self) -> None:
            pass

    monkeypatch.setattr(pgserver, "get_server", lambda *a, **k: SessionServer())
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/postgres.md", "exec"), {"__name__": "docs"})
    assert out.getvalue().split() == expected.split()


def test_a_batch_is_stored_in_its_order_and_duplicates_return_the_first(pg: PostgresStore) -> None:
    a1, b, a2 = rec(1, content="first"), rec(2), rec(1, content="first", created_at=T0 + 9)
    out = pg.add_many([a1, b, a2])
    assert [r.content for r in out] == ["first", "note number 2", "first"]
    # Same created_at: the insertion order breaks the tie, as in SQLite.
    same = [rec(10 + i, created_at=T0) for i in range(5)]
    pg.add_many([*same, same[0]])
    got = pg.query(Query(P, None, since=T0, before=T0 + 0.5, newest_first=False, limit=10))
    assert [r.id for r in got] == [r.id for r in same]


def test_a_database_a_newer_version_migrated_is_refused_by_name(pg_url: str) -> None:
    # Its writes would miss what the newer migration changed (as m009 moved the words out of
    # `records`): a worker of the older version must not write it.
    url = _other_db(pg_url, "cw_newer")
    try:
        PostgresStore(url, max_size=1).close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("INSERT INTO migrations VALUES ('m999_future', now())")
        with pytest.raises(StoreError, match="m999_future unknown here") as err:
            PostgresStore(url, max_size=1)
        assert "cannot open postgresql://" in str(err.value)
    finally:
        _drop_db(pg_url, "cw_newer")


def test_a_database_of_the_old_schema_migrates_to_project_scoped_identity(pg_url: str) -> None:
    """m004_record_identity on a database built by the migrations before it, holding data."""
    url = _other_db(pg_url, "cw_old_identity")
    try:
        old = [(n, s) for n, s in MIGRATIONS if n < "m004"]
        assert [n for n, _ in old] == ["m001_records", "m002_edges_kv_docs", "m003_vectors"]
        with psycopg.connect(url, autocommit=True) as conn:
            _migrate_before(conn, "m004")
            conn.execute(
                "INSERT INTO records (id, project, author, kind, recipients, visibility, "
                "mentions, tags, refs, current_status, pinned, created_at, content, tokens, "
                "content_hash, meta) VALUES ('note-1', 'alpha', 'alice', 'question', '[]', "
                "'project', '[]', '[]', '[]', 'resolved', 0, 1.0, 'alpha kept words', 3, 'h', "
                "'{}')"
            )
            conn.execute(
                "INSERT INTO status_facts (record_id, status, by, at) "
                "VALUES ('note-1', 'resolved', 'alice', 2.0)"
            )
        store = PostgresStore(url, max_size=1)
        try:
            assert "m004_record_identity" in store.applied_migrations()
            [r] = store.get_many("alpha", ["note-1"])
            assert (r.content, r.status) == ("alpha kept words", "resolved")
            assert [h.record.id for h in store.search_text("alpha", None, "kept", 5)] == ["note-1"]
            assert [f["status"] for f in store.status_history("alpha", "note-1")] == ["resolved"]
            # Now the same id in another project is another record.
            store.add_many([rec(1, project="beta", id="note-1", content="beta words")])
            assert store.get_many("beta", ["note-1"])[0].content == "beta words"
            assert store.get_many("alpha", ["note-1"])[0].content == "alpha kept words"
            assert store.status_history("beta", "note-1") == []
        finally:
            store.close()
    finally:
        _drop_db(pg_url, "cw_old_identity")


def test_neighbours_match_sqlite_in_one_statement(pg: PostgresStore, tmp_path: Path) -> None:
    """locality.py's batch of (session, time) anchors: the same records, sides and order as the
    SQLite store, the agent's visibility applied, and one read for the whole batch."""
    rng = random.Random(3)
    records = [
        rec(
            i,
            session=f"s{i % 3}",
            author=rng.choice(["ann", "bob"]),
            created_at=T0 + i // 2,  # ties in time: the rid decides
            **(
                {"visibility": "direct", "to": [rng.choice(["ann", "cy"])]}
                if rng.random() < 0.3
                else {}
            ),
        )
        for i in range(60)
    ]
    lite = SQLiteStore(str(tmp_path / "n.db"))
    pg.add_many(records)
    lite.add_many(records)
    anchors = [(f"s{i % 3}", T0 + i // 2) for i in range(0, 60, 7)] + [("s9", T0), ("s0", T0)]
    reads: list[str] = []
    read = pg._read
    pg._read = lambda sql, params=None: reads.append(sql) or read(sql, params)  # type: ignore[method-assign]
    for agent in ("ann", "bob", "cy"):
        got = pg.neighbours(P, agent, anchors)
        want = lite.neighbours(P, agent, anchors)
        assert [([r.id for r in b], [r.id for r in a]) for b, a in got] == [
            ([r.id for r in b], [r.id for r in a]) for b, a in want
        ]
    assert len(reads) == 3
    assert pg.neighbours(P, "ann", []) == []
    lite.close()


def test_follow_ups_are_the_reads_one_by_one_in_one_round_trip(pg: PostgresStore) -> None:
    """chains.py's follow-up reads sent together: the answers of `replies_to`, `superseded_by`
    and `neighbours`, the agent's visibility applied, one round trip for all, and none sent for
    an empty list."""
    pg.add_many(
        [
            rec(1, kind="question", content="which cache?"),
            rec(2, reply_to="r00001", author="bob", content="redis"),
            rec(3, reply_to="r00001", author="bob", visibility="direct", to=["cy"],
                content="memcached, between us"),
            rec(4, kind="decision", content="cache in redis"),
            rec(5, kind="decision", supersedes="r00004", content="cache in memcached"),
            rec(6, kind="question", content="and the queue?"),
        ]
    )  # fmt: skip
    reads: list[int] = []
    read_many = pg._read_many
    pg._read_many = lambda statements: reads.append(len(statements)) or read_many(statements)  # type: ignore[method-assign]
    anchors = [(None, pg.get_many(P, ["r00003"])[0].created_at)]
    for agent in ("ann", "cy"):
        replied, replaced = ["r00001", "r00006", "r09999"], ["r00004", "r00005"]
        replies, by, near = pg.follow_ups(P, agent, replied, replaced, anchors)
        assert [r.id for r in replies] == [r.id for r in pg.replies_to(P, replied, agent)]
        assert by == pg.superseded_by(P, replaced) == {"r00004": "r00005"}
        want = pg.neighbours(P, agent, anchors)
        assert [([r.id for r in b], [r.id for r in a]) for b, a in near] == [
            ([r.id for r in b], [r.id for r in a]) for b, a in want
        ]
    assert reads == [3, 3]
    replies, by, near = pg.follow_ups(P, "cy", ["r00001"], [], [])
    assert [r.id for r in replies] == ["r00002", "r00003"] and by == {} and near == []
    assert pg.follow_ups(P, "ann", [], ["r00004"], []) == ([], {"r00004": "r00005"}, [])
    assert reads == [3, 3, 1, 1]
    assert pg.follow_ups(P, "ann", [], [], []) == ([], {}, [])
    assert reads == [3, 3, 1, 1]  # nothing to read: nothing sent
    assert pg.follow_ups("other", "ann", ["r00001"], ["r00004"], anchors) == ([], {}, [([], [])])


# Indexes that do not lead with the project, and why (docs/scaling.md): a GIN index on one column
# (and its copy on each partition), the store-wide insertion order (not unique: a sharded table may
# keep it per shard), and the documents, whose (collection, id) is unique across projects by the
# store contract.
NOT_PROJECT_FIRST = {
    "record_words_tsv", "records_rid", "docs_pkey", "docs_by_key", "migrations_pkey",
}  # fmt: skip
# The name of a partition's copy of `record_words_tsv`.
_PARTITION_TSV = re.compile(r"^record_words_(\d+|default)_tsv_idx$")


def test_every_key_and_index_leads_with_the_project(pg: PostgresStore) -> None:
    """What sharding by project (Citus) needs: the project in every primary key and unique
    constraint, and first in every index, but for the exceptions named above."""
    rows = pg._read(
        "SELECT i.relname, a.attname, x.indisunique FROM pg_index x "
        "JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid "
        "JOIN pg_namespace n ON n.oid = t.relnamespace "
        "LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = x.indkey[0] "
        "WHERE n.nspname = current_schema()"
    )
    assert len(rows) > 15
    leading = {_PARTITION_TSV.sub("record_words_tsv", name): column for name, column, _ in rows}
    assert {n for n, c in leading.items() if c != "project"} == NOT_PROJECT_FIRST
    tables = {r[0] for r in pg._read(
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}  # fmt: skip
    keyed = {r[0] for r in pg._read(
        "SELECT c.conrelid::regclass::text FROM pg_constraint c WHERE c.contype = 'p' AND "
        "EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.conrelid "
        "AND a.attname = 'project' AND a.attnum = ANY(c.conkey))")}  # fmt: skip
    assert tables - keyed == {"docs", "migrations"}


def test_m006_gives_addressing_and_tags_their_project(pg_url: str) -> None:
    """m006_project_keys on a database of m001-m005 holding addressed, tagged, embedded records."""
    url = _other_db(pg_url, "cw_old_keys")
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            _migrate_before(conn, "m006")
            for rid, project in ((1, "alpha"), (2, "beta")):
                conn.execute(
                    "INSERT INTO records (rid, id, project, author, kind, recipients, visibility, "
                    "mentions, tags, refs, pinned, created_at, content, tokens, content_hash, "
                    "meta) VALUES (%s, 'd-1', %s, 'ann', 'message', '[\"bob\"]', 'direct', '[]', "
                    "'[\"red\"]', '[]', 0, 1.0, 'secret words', 2, 'h', '{}')",
                    (rid, project),
                )
                conn.execute("INSERT INTO addressing VALUES ('bob', 'to', %s)", (rid,))
                conn.execute("INSERT INTO record_tags VALUES ('red', %s)", (rid,))
        store = PostgresStore(url, max_size=1)
        try:
            assert "m006_project_keys" in store.applied_migrations()
            for project in ("alpha", "beta"):
                seen = store.query(Query(project, "bob"))
                assert [r.id for r in seen] == ["d-1"]
                assert store.query(Query(project, "cy")) == []
                assert [r.id for r in store.query(Query(project, None, addressed_to="bob"))] == [
                    "d-1"
                ]
                assert [r.id for r in store.query(Query(project, None, tag="red"))] == ["d-1"]
        finally:
            store.close()
    finally:
        _drop_db(pg_url, "cw_old_keys")


def test_the_full_text_index_keeps_a_short_pending_list(pg_url: str) -> None:
    """m007: the GIN index's pending list, which every search scans whole, is kept short (a 4 MB
    one filled by concurrent adds made assemble calls 5x slower); since m009 the index of every
    partition of the words, including those made by a writer since."""
    url = _other_db(pg_url, "cw_no_pending")
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            _migrate_before(conn, "m007")
            options = "SELECT reloptions FROM pg_class WHERE relname = 'records_tsv'"
            assert conn.execute(options).fetchone()[0] is None  # fastupdate on by default
        store = PostgresStore(url, max_size=1)
        try:
            assert "m007_fulltext_short_pending_list" in store.applied_migrations()
            store._run(f"SELECT setval('records_rid_seq', {3 * WORDS_SPAN})", None)
            store.add_many([rec(1)])
            rows = store._read(
                "SELECT relname, reloptions FROM pg_class WHERE relname LIKE 'record_words%tsv%'"
            )
            assert {r[0] for r in rows} == {
                "record_words_tsv", "record_words_default_tsv_idx", "record_words_0_tsv_idx",
                "record_words_1_tsv_idx", "record_words_3_tsv_idx", "record_words_4_tsv_idx",
            }  # fmt: skip
            assert all(r[1] == ["gin_pending_list_limit=128"] for r in rows)
        finally:
            store.close()
    finally:
        _drop_db(pg_url, "cw_no_pending")


def test_m009_moves_the_words_into_partitions_and_ranks_older_records_as_before(
    pg_url: str,
) -> None:
    """m009_fulltext_partitions on a database of m001-m008 holding records, some stored before
    m008 (no length) and some after, with rids in partitions far apart: each record's words and
    length are in the partition of its rid (none in the DEFAULT partition), `records` keeps no
    tsvector, and the scores are those of the same records written since."""
    url = _other_db(pg_url, "cw_old_words")
    texts = [
        "alpha beta", "alpha", "beta gamma delta alpha", "the alpha of it all, alpha again",
        "gamma", " ".join(["beta"] + [f"w{k}" for k in range(300)]), "nothing here",
    ]  # fmt: skip
    rids = [1, 2, 3, 3 * WORDS_SPAN + 5, 3 * WORDS_SPAN + 6, 7 * WORDS_SPAN, 7 * WORDS_SPAN + 1]
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            _migrate_before(conn, "m009")
            for i, (rid, text) in enumerate(zip(rids, texts, strict=True)):
                length = "length(to_tsvector('english', %(c)s))" if i % 2 else "NULL"
                conn.execute(
                    "INSERT INTO records (rid, id, project, author, kind, recipients, visibility, "
                    "mentions, tags, refs, pinned, created_at, content, tokens, content_hash, "
                    "meta, tsv, tsv_len) VALUES (%(rid)s, %(id)s, 'old', 'ann', 'note', '[]', "
                    "'project', '[]', '[]', '[]', 0, %(at)s, %(c)s, 2, 'h', '{}', "
                    f"to_tsvector('english', %(c)s), {length})",
                    {"rid": rid, "id": f"r{i:05d}", "at": T0 + i, "c": text},
                )
            conn.execute(f"SELECT setval('records_rid_seq', {rids[-1]})")
        store = PostgresStore(url, max_size=1)
        try:
            assert "m009_fulltext_partitions" in store.applied_migrations()
            assert store._read(
                "SELECT count(*) FROM information_schema.columns "
                "WHERE table_name = 'records' AND column_name IN ('tsv', 'tsv_len')"
            ) == [(0,)]
            store.add_many([rec(i, project="new", content=t) for i, t in enumerate(texts)])
            words = store._read(
                "SELECT w.tableoid::regclass::text, w.rid, w.tsv_len, length(w.tsv), "
                "w.tsv = to_tsvector('english', r.content) FROM record_words w "
                "JOIN records r USING (project, rid) WHERE r.project = 'old' ORDER BY w.rid"
            )
            assert [(r[0], r[1]) for r in words] == [
                (f"record_words_{rid // WORDS_SPAN}", rid) for rid in rids
            ]
            assert all(r[2] == r[3] and r[4] for r in words)
            assert store._read("SELECT count(*) FROM record_words_default") == [(0,)]

            def ranked(project: str, task: str) -> list[tuple[str, float]]:
                hits = store.search_text(project, "ann", task, 10)
                return [(h.record.id, round(h.score, 9)) for h in hits]

            tasks = ["alpha beta", "alpha", "gamma beta", "w7 delta"]
            old = {task: ranked("old", task) for task in tasks}
            assert all(old.values())
            assert old == {task: ranked("new", task) for task in tasks}
        finally:
            store.close()
    finally:
        _drop_db(pg_url, "cw_old_words")


def test_a_writer_makes_the_words_partitions_before_its_rids_reach_them(pg_url: str) -> None:
    """Past the partitions the migration made, the writer makes the one its newest rid is in and
    the next; rows that the DEFAULT partition took meanwhile (when a partition could not be made:
    a lock held past its wait) are moved into theirs, made then even though the writer's rids
    have moved past it, and every record is found by the search
    throughout, on every side of a partition's bounds; the write itself never fails for it."""
    url = _other_db(pg_url, "cw_grow_words")
    try:
        store = PostgresStore(url, max_size=2)
        try:
            parts = "SELECT relname FROM pg_class WHERE relname ~ '^record_words_[0-9]+$'"
            assert {r[0] for r in store._read(parts)} == {"record_words_0", "record_words_1"}
            store._run(f"SELECT setval('records_rid_seq', {5 * WORDS_SPAN - 3})", None)
            with psycopg.connect(url, autocommit=True) as other, other.transaction():
                # A search over every partition holds this lock, which attaching one waits for.
                other.execute("LOCK TABLE record_words_default IN ACCESS SHARE MODE")
                store.add_many([rec(i, content=f"zebra {i}") for i in range(2)])
                assert {r[0] for r in store._read(parts)} == {"record_words_0", "record_words_1"}
            assert store._read("SELECT count(*) FROM record_words_default") == [(2,)]
            assert [h.record.id for h in store.search_text(P, "ann", "zebra", 10)] == [
                "r00001", "r00000",
            ]  # fmt: skip
            store._words_retry = 0.0  # the second's wait before trying again, skipped
            store.add_many([rec(i, content=f"zebra {i}") for i in range(2, 5)])
            assert {r[0] for r in store._read(parts)} == {
                "record_words_0", "record_words_1", "record_words_4", "record_words_5",
                "record_words_6",
            }  # fmt: skip
            assert store._read("SELECT count(*) FROM record_words_default") == [(0,)]
            placed = store._read(
                "SELECT tableoid::regclass::text, rid FROM record_words ORDER BY rid"
            )
            assert [p for p, _ in placed] == ["record_words_4"] * 2 + ["record_words_5"] * 3
            assert placed[1][1] == 5 * WORDS_SPAN - 1 and placed[2][1] == 5 * WORDS_SPAN
            hits = store.search_text(P, "ann", "zebra", 10)
            assert [h.record.id for h in hits] == [f"r{i:05d}" for i in range(4, -1, -1)]
            # A second process (a fresh store) finds them made and makes nothing.
            second = PostgresStore(url, max_size=1)
            try:
                second.add_many([rec(9, content="zebra 9")])
                assert len(store._read(parts)) == 5
            finally:
                second.close()
        finally:
            store.close()
    finally:
        _drop_db(pg_url, "cw_grow_words")


def test_addressing_rows_stored_before_m010_get_their_records_time(pg_url: str) -> None:
    """m010_addressing_time gives every addressing row its record's time, so that records
    addressed to a name read in time order through the new index, those stored before it (in
    whatever order they were stored) as those after."""
    url = _other_db(pg_url, "cw_old_addressing")
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            _migrate_before(conn, "m010")
            for i, at in enumerate([5, 1, 3]):  # stored out of time order
                (rid,) = conn.execute(
                    "INSERT INTO records (id, project, author, kind, recipients, visibility, "
                    "mentions, tags, refs, pinned, created_at, content, tokens, content_hash, "
                    "meta) VALUES (%s, 'old', 'ann', 'note', '[\"bob\"]', 'project', '[\"bob\"]', "
                    "'[]', '[]', 0, %s, 'hi bob', 2, 'h', '{}') RETURNING rid",
                    (f"r{i}", T0 + at),
                ).fetchone()
                conn.execute(
                    "INSERT INTO addressing (project, name, how, rid) "
                    "VALUES ('old', 'bob', 'to', %s), ('old', 'bob', 'mention', %s)",
                    (rid, rid),
                )
        store = PostgresStore(url, max_size=1)
        try:
            assert store.applied_migrations()[-1] == "m010_addressing_time"
            store.add_many([rec(9, project="old", to=["bob"], created_at=T0 + 2)])
            times = store._read("SELECT count(*) FROM addressing WHERE created_at IS NULL")
            assert times == [(0,)]
            got = store.query(Query("old", "bob", addressed_to="bob", limit=10))
            assert [r.id for r in got] == ["r0", "r2", "r00009", "r1"]
            first = store.query(
                Query("old", "bob", addressed_to="bob", newest_first=False, limit=2)
            )
            assert [r.id for r in first] == ["r1", "r00009"]
        finally:
            store.close()
    finally:
        _drop_db(pg_url, "cw_old_addressing")


def _writes(turns: list[list[str]]) -> list[list[str]]:
    """The round trips that write: a read the engine's own threads send meanwhile on the one
    connection (the store's size, a search it started ahead) is left out."""
    return [t for t in turns if not set(t) <= {"SELECT", "WITH"}]


def test_traces_are_written_together_without_waiting_for_a_flush(pg_url: str) -> None:
    """The trace writer stores a batch of traces in one transaction (ports.PutsDocs), sent in
    one round trip, whose commit does not wait for the write-ahead log's flush; the setting ends
    with it, so the next transaction on the same pooled connection is as durable as the database
    says. Vectors are written the same way."""
    from contextwright.traces.writer import TraceWriter

    url = _other_db(pg_url, "cw_traces")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER DATABASE cw_traces SET synchronous_commit = on")
    try:
        store = PostgresStore(url, max_size=1)
        engine = Engine(store)
        try:
            store.add_many([rec(i, content=f"the cache note {i}") for i in range(5)])
            traces = [engine.assemble(P, "ann", "the cache", 500).trace for _ in range(3)]
            engine.flush()
            assert [engine.trace(P, t.id) is not None for t in traces] == [True] * 3
            with waits(store) as turns:
                TraceWriter(store)._write(traces)  # written again: one transaction for all three
            turns = _writes(turns)
            assert len(turns) == 1 and turns[0][:2] == ["BEGIN", "SELECT"], turns  # the setting
            assert turns[0][-1] == "COMMIT", turns
            # Vectors the same way: derived from the records, embedded again if lost.
            with waits(store) as turns:
                store.put_vectors("m", [(P, "r00001", np.ones(4)), (P, "r00002", np.ones(4))])
            turns = _writes(turns)
            assert len(turns) == 1 and turns[0][:2] == ["BEGIN", "SELECT"], turns
            assert store._read("SHOW synchronous_commit") == [("on",)]  # for these two only
            rows = store._read(
                "SELECT id, xmin::text, data::jsonb ->> 'id' FROM docs WHERE collection = 'traces'"
            )
            assert sorted(r[0] for r in rows) == sorted(t.id for t in traces)
            assert len({r[1] for r in rows}) == 1
            assert all(r[0] == r[2] for r in rows)
            # As put_doc: a document of another project with the same id changes nothing.
            store.put_docs("traces", [(traces[0].id, "other", {"x": 1}, 0.0, None)], durable=False)
            assert store.get_doc("traces", "other", traces[0].id) is None
            assert store.get_doc("traces", P, traces[0].id) is not None
        finally:
            engine.close()
    finally:
        _drop_db(pg_url, "cw_traces")


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), min_size=1, max_size=48)
)
def test_vectors_reach_the_server_bit_for_bit(pg: PostgresStore, values: list[float]) -> None:
    """Vectors go to the server in pgvector's binary form (postgres_vectors.Vector): every
    float32 arrives as it was, in stored vectors and in the query vector of a search."""
    vec = np.asarray(values, dtype=np.float32)
    if not pg.get_many(P, ["v1"]):
        pg.add_many([rec(1, id="v1")])
    pg.put_vectors("m", [(P, "v1", vec)])
    (stored,) = pg._read("SELECT embedding::real[] FROM vectors WHERE model = 'm'")
    assert np.asarray(stored[0], dtype=np.float32).tobytes() == vec.tobytes()
    # The query vector too: compared in the server with the stored one, it is the same.
    ((same,),) = pg._read(
        "SELECT %s::vector = embedding FROM vectors WHERE model = 'm'", (Vector(vec),)
    )
    assert same
    if np.any(vec):
        assert [h.record.id for h in pg.vector_search(P, "ann", vec, 1, "m")] == ["v1"]
