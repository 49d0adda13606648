"""cw_bm25 (stores/_fts.c through stores/sqlite_bm25.py): FTS5's bm25() with the documents' lengths
kept in memory. It only makes the full-text ranking faster: every score must be bm25()'s, bit
for bit, whichever lengths a connection has read, and a store without it ranks the same."""

from __future__ import annotations

import random
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextwright.records import Record, build_record
from contextwright.stores import sqlite_bm25
from contextwright.stores.sqlite import SQLiteStore
from contextwright.tokens import default_counter

pytestmark = pytest.mark.skipif(
    not sqlite_bm25.available(),
    reason="no compiled kernel in this run (make compile; not under CONTEXTWRIGHT_PURE)",
)

WORDS = [f"w{i}" for i in range(40)]
CHUNK = 4096  # rows per read of lengths (_fts.c's CHUNK_BITS)


def _records(rng: random.Random, n: int, start: int = 0) -> list[Record]:
    count = default_counter().count
    out = []
    for i in range(start, start + n):
        # Zipf-like: low words everywhere, high words rare; lengths from 1 to 60 words.
        words = [WORDS[min(int(rng.paretovariate(1.2)) - 1, 39)] for _ in range(rng.randint(1, 60))]
        data = {"id": f"r{i}", "project": "p", "author": "a", "content": " ".join(words)}
        out.append(build_record({**data, "created_at": 1_750_000_000.0 + i}, count))
    return out


def _ranked(conn: sqlite3.Connection, fn: str, match: str) -> list[tuple[int, float]]:
    sql = (
        f"SELECT t.rowid, {fn}(records_fts) FROM records_fts t WHERE records_fts MATCH ? "
        "ORDER BY t.rowid DESC LIMIT 500"
    )
    return conn.execute(sql, (match,)).fetchall()


def _match(terms: list[str]) -> str:
    return "content:(" + " OR ".join(f'"{t}"' for t in terms) + ")"


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SQLiteStore]:
    """More rows than two chunks of lengths, so that a ranking meets rows of chunks it may not
    read in that statement (at most two a statement) and rows it never read."""
    store = SQLiteStore(str(tmp_path_factory.mktemp("fts") / "large.db"))
    store.add_many(_records(random.Random(7), 3 * CHUNK + 500))
    yield store
    store.close()


def test_the_store_ranks_with_cw_bm25_where_the_build_has_it(large: SQLiteStore) -> None:
    conn = large._conn()
    assert large._conns.bm25(conn) == "cw_bm25"
    seen: list[str] = []
    thread = threading.Thread(target=lambda: seen.append(large._conns.bm25(large._conn())))
    thread.start()
    thread.join()
    assert seen == ["cw_bm25"]  # every thread's connection has it


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4, unique=True))
def test_cw_bm25_scores_every_row_as_bm25_does(large: SQLiteStore, terms: list[str]) -> None:
    """On a fresh connection (no lengths read) and on one that has ranked before, in any order
    of chunks: the same rows, in the same order, with the same doubles."""
    fresh = sqlite3.connect(large.path)
    try:
        assert sqlite_bm25.register(fresh, large.path)
        match = _match(terms)
        expected = _ranked(fresh, "bm25", match)
        assert expected, "every word is in some record"
        assert _ranked(fresh, "cw_bm25", match) == expected  # lengths read as it goes
        assert _ranked(fresh, "cw_bm25", match) == expected  # from the lengths it kept
        used = large._conn()  # the store's own, which has ranked in earlier examples
        assert _ranked(used, "cw_bm25", match) == expected
    finally:
        fresh.close()


def test_rows_added_after_a_ranking_are_scored_as_bm25_does(tmp_path: Path) -> None:
    """A row written after the connection read its chunk has no length there yet: it is asked for
    as bm25() asks, and the next ranking uses the one kept. The statistics (row count, average
    length) move with the table, as bm25()'s do."""
    store = SQLiteStore(str(tmp_path / "grow.db"))
    rng = random.Random(3)
    store.add_many(_records(rng, 300))
    conn = store._conn()
    match = _match(["w0", "w5", "w17"])
    assert _ranked(conn, "cw_bm25", match) == _ranked(conn, "bm25", match)
    for start in (300, 800, CHUNK - 10):
        store.add_many(_records(rng, 500, start=start))
        assert _ranked(conn, "cw_bm25", match) == _ranked(conn, "bm25", match)
    store.close()


def test_text_ranked_gives_the_same_hits_without_the_kernel(large: SQLiteStore) -> None:
    """The store's full-text ranking, as the full-text source asks for it, with cw_bm25 and with
    bm25() on the same connection."""
    conn = large._conn()
    fast = set(large._conns._fast)
    rng = random.Random(11)
    for _ in range(20):
        text = " ".join(rng.sample(WORDS, rng.randint(1, 3)))
        assert large._conns.bm25(conn) == "cw_bm25"
        with_kernel = large.text_ranked("p", "a", text, 40)
        large._conns._fast = set()
        try:
            assert large._conns.bm25(conn) == "bm25"
            assert large.text_ranked("p", "a", text, 40) == with_kernel
        finally:
            large._conns._fast = fast


def test_register_refuses_a_connection_to_another_file(tmp_path: Path) -> None:
    """The kernel checks the connection's handle against the file the store opened before it
    uses it: a mismatch, or something that is not a connection, leaves bm25()."""
    store = SQLiteStore(str(tmp_path / "one.db"))
    other = SQLiteStore(str(tmp_path / "two.db"))
    conn = sqlite3.connect(other.path)
    try:
        assert not sqlite_bm25.register(conn, store.path)
        with pytest.raises(sqlite3.OperationalError, match="cw_bm25"):
            conn.execute("SELECT cw_bm25(records_fts) FROM records_fts WHERE records_fts MATCH 'x'")
        assert not sqlite_bm25.register("not a connection", store.path)  # type: ignore[arg-type]
        assert sqlite_bm25.register(conn, other.path)  # the right file: registered
    finally:
        conn.close()
        store.close()
        other.close()


def test_a_closed_and_reopened_store_ranks_again(tmp_path: Path) -> None:
    """close() forgets which connections had the function; the next ones register anew."""
    path = str(tmp_path / "again.db")
    store = SQLiteStore(path)
    store.add_many(_records(random.Random(5), 50))
    first = store.text_ranked("p", "a", "w1 w2", 10)
    store.close()
    assert store._conns._fast == set()
    assert store.text_ranked("p", "a", "w1 w2", 10) == first
    assert store._conns.bm25(store._conn()) == "cw_bm25"
    store.close()


def test_rowids_past_what_is_kept_are_scored_as_bm25_does(tmp_path: Path) -> None:
    """A rowid far past the table's rows, or below zero (not ones the store makes: its rowids
    count up from 1), is asked for every time, as bm25() does: the same doubles, and no memory
    spent on the gap."""
    path = str(tmp_path / "sparse.db")
    conn = sqlite3.connect(path)
    try:
        conn.execute("CREATE VIRTUAL TABLE records_fts USING fts5(content)")
        rows = [
            (-3, "alpha gamma"),
            (5, "alpha beta"),
            (2**31 - 1, "alpha gamma gamma"),
            (2**40, "alpha beta beta"),
        ]
        conn.executemany("INSERT INTO records_fts(rowid, content) VALUES (?, ?)", rows)
        conn.commit()
        assert sqlite_bm25.register(conn, path)
        for terms in (["alpha"], ["beta"], ["alpha", "gamma"]):
            match = _match(terms)
            assert _ranked(conn, "cw_bm25", match) == _ranked(conn, "bm25", match)
            assert _ranked(conn, "cw_bm25", match) == _ranked(conn, "bm25", match)
    finally:
        conn.close()


def test_a_ranking_runs_with_the_function_of_the_connection_that_runs_it(
    large: SQLiteStore,
) -> None:
    """The calling thread plans a ranking and the pool's connection runs it: where that one has
    no cw_bm25 (registration refused), the statement ranks with bm25(), never fails."""
    text = "w1 w7 w20"
    expected = large.text_ranked("p", "a", text, 40)
    plan = large.ranking_plan("p", "a", text, 40)  # planned where cw_bm25 is registered
    plain = sqlite3.connect(large.path)  # a connection without it, as this thread's
    mine = large._conns._local.conn
    large._conns._local.conn = plain
    try:
        assert large._conns.bm25(plain) == "bm25"
        assert large.ranking_result(plan, large.ranking_rows(plan)) == expected
    finally:
        large._conns._local.conn = mine
        plain.close()
