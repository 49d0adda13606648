"""The full-text search's statement on PostgreSQL: what the server computes for each row of the
window it ranks."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright.records import Record, build_record
from contextwright.stores.postgres import PostgresStore
from contextwright.stores.postgres_schema import set_planner
from contextwright.stores.postgres_search import K1, B

pytestmark = pytest.mark.postgres

P = "search-sql"
T0 = 1_750_000_000.0
# The length discount as the search once wrote it, its constants numeric literals.
NUMERIC_DISCOUNT = f"(1 + {K1} * (1 - {B} + {B} * "


def rec(i: int, content: str, **fields: Any) -> Record:
    data = {"id": f"s{i:05d}", "project": P, "author": "ann", "kind": "note",
            "content": content, "created_at": T0 + i, **fields}  # fmt: skip
    return build_record(data, lambda text: len(text.split()))


def _rows(pg: PostgresStore, sql: str, params: dict[str, Any], planner: str | None) -> Any:
    def read(conn: Any) -> Any:
        with conn.transaction():
            if planner is not None:
                set_planner(conn, planner)
            return conn.execute(sql, params, prepare=False).fetchall()

    return pg._reading(read)


# (word counts, store size): one word ranked from its newest matches, one above a floor, two
# words found by scans of their own, two so common that the rows are walked.
SHAPES = [
    ({"alpha": 300}, 1_000),
    ({"alpha": 5_000}, 1_000_000),
    ({"alpha": 900, "beta": 700}, 1_000_000),
    ({"alpha": 1_500, "beta": 1_200}, 10_000),
]


@pytest.mark.parametrize(("df", "total"), SHAPES, ids=["small", "floor", "two", "walked"])
def test_the_score_is_float8_arithmetic_to_the_bit(
    pg: PostgresStore, df: dict[str, int], total: int
) -> None:
    """No row's length goes through numeric arithmetic (cast to float8 through its text, on
    every row of the window), and the scores and order are those of the numeric formula to the
    bit: 0.75 times an integer, and 0.25, are exact in both."""
    pg.add_many([
        rec(i, " ".join(["alpha"] * (i % 3 + 1) + ["beta"] * (i % 2) + [f"w{k}" for k in range(i % 17)]))
        for i in range(120)
    ])  # fmt: skip
    pg.search_text(P, None, "alpha", 5)  # the store's size known (_top)
    known = ({w: (c, 0) for w, c in df.items()}, total, 7.3)
    sql, params, planner = pg._search_sql(P, "ann", 40, known)
    assert ("strip(" in sql) == (total == 10_000)  # the walked shape
    params["floor"] = 0  # every row of this small store is in the window
    assert NUMERIC_DISCOUNT not in sql
    plan = _rows(pg, f"EXPLAIN VERBOSE {sql}", params, planner)
    assert not [line for (line,) in plan if "numeric" in line]
    old = sql.replace(f"(1 + {K1}::float8 * (1 - {B}::float8 + {B}::float8 * ", NUMERIC_DISCOUNT)
    assert old != sql
    got = _rows(pg, sql, params, planner)
    assert len(got) == 40
    assert got == _rows(pg, old, params, planner)


# A large store (past COMMON_DF records), each word in one record of `every`: alpha common (left
# out), beta at the cutoff (2,000: walked newest first with another word), gamma ranked above a
# floor (past two windows, under a tenth of the records), epsilon all collected, delta rare, omega
# in every record (common by ANALYZE's statistics); a private record now and then.
EVERY = {"alpha": 2, "beta": 7, "gamma": 13, "epsilon": 30, "delta": 200, "omega": 1}
VOCAB = [*EVERY, "absent"]
LARGE = 14_000


def _large(pg: PostgresStore) -> None:
    records = [
        rec(i, " ".join([*(w for w, k in EVERY.items() if i % k == 0), *[f"f{i % 13}"] * (i % 9)]),
            author="bob" if i % 5 else "ann", visibility="private" if i % 11 == 0 else "project")
        for i in range(LARGE)
    ]  # fmt: skip
    for k in range(0, LARGE, 2_000):
        pg.add_many(records[k : k + 2_000])
    pg._run("ANALYZE record_words", None)


def _plain(pg_url: str) -> PostgresStore:
    """A store whose searches read their counts first, then search."""
    store = PostgresStore(pg_url)
    store.counts_read = lambda *a, **k: None  # type: ignore[method-assign]
    return store


def _hits(hits: list[Any]) -> list[tuple[str, float]]:
    return [(h.record.id, h.score) for h in hits]


def test_words_the_statistics_call_common_are_counted_in_the_searchs_round_trip(
    pg: PostgresStore, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a large store, a search whose words not counted yet are all common lexemes by
    ANALYZE's statistics is one round trip: the project's version, the check that each is its
    own lexeme, and the search written with the statistics' estimates, which are the counts the
    counts statement gives them; its hits are those of the counts read first and the search sent
    after them, score for score. A word counted (not common) costs its round trip first, as
    before; a word that is not its own lexeme, the counts and a second search."""
    _large(pg)
    monkeypatch.setattr("contextwright.stores.postgres_text.TOP_TTL", 3600.0)
    pg.search_text(P, None, "f1", 5)  # the store's size, lengths and common lexemes known
    assert {"alpha", "omega"} <= set(pg._common) and "gamma" not in pg._common
    plain = _plain(pg_url)
    trips: list[str] = []
    reading = pg._reading

    def counting(read: Any) -> Any:
        trips.append(read.__qualname__.split(".")[-3])
        return reading(read)

    monkeypatch.setattr(pg, "_reading", counting)
    try:
        version, hits = pg.search_ahead(P, "ann", "omega alpha", 40)
        assert trips == ["_read_versioned"]  # with the words' check
        assert version == pg.version(P)
        assert len(hits) == 40
        assert _hits(hits) == _hits(plain.search_text(P, "ann", "omega alpha", 40))
        assert {"omega", "alpha"} <= set(pg._text_state()[1])  # counted and kept
        trips.clear()
        hits = pg.search_text(P, "ann", "gamma alpha", 40)  # gamma: counted first
        assert trips == ["_read", "_read"]
        assert _hits(hits) == _hits(plain.search_text(P, "ann", "gamma alpha", 40))
        trips.clear()
        pg._common = {**pg._common, "runs": 5}  # its lexeme is run: counted, searched again
        hits = pg.search_text(P, None, "alpha runs", 40)
        assert trips == ["_read_versioned", "_read", "_read"]
        assert _hits(hits) == _hits(plain.search_text(P, None, "alpha runs", 40))
        assert pg._text_state()[1]["runs"][0] == 0
    finally:
        plain.close()


def test_a_search_with_its_counts_ranks_as_one_sent_after_them(
    pg: PostgresStore, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the words (common, at the cutoff, above a floor, rare, absent; counted before or
    not), the hits of a search are those of the counts read first and the search sent after,
    score for score; it is sent with its counts where every word not counted is common."""
    _large(pg)
    monkeypatch.setattr("contextwright.stores.postgres_text.TOP_TTL", 3600.0)
    pg.search_text(P, None, "f1", 5)
    plain = _plain(pg_url)
    sent: list[bool] = []
    counted = pg._read_versioned

    def spy(*args: Any) -> Any:
        if len(args) > 4 and args[4]:  # sent with the guessed words' check
            sent.append(True)
        return counted(*args)

    monkeypatch.setattr(pg, "_read_versioned", spy)
    try:

        @settings(max_examples=30, deadline=None)
        @given(
            task=st.lists(st.sampled_from(VOCAB), min_size=1, max_size=3, unique=True),
            known=st.sets(st.sampled_from(VOCAB)),
            agent=st.sampled_from(["ann", None]),
            limit=st.integers(1, 60),
        )
        def same(task: list[str], known: set[str], agent: str | None, limit: int) -> None:
            cache = pg._text_state()[1]
            for word in VOCAB:
                if word not in known:
                    cache.pop(word, None)
            sent.clear()
            uncounted = set(task) - set(cache)
            got = pg.search_text(P, agent, " ".join(task), limit)
            assert sent == ([True] if uncounted and uncounted <= set(pg._common) else [])
            assert _hits(got) == _hits(plain.search_text(P, agent, " ".join(task), limit))

        same()
    finally:
        plain.close()
