"""The full-text search's statement on PostgreSQL: what the server computes for each row of the
window it ranks."""

from __future__ import annotations

from typing import Any

import pytest

from contextwright.records import Record, build_record
from contextwright.stores.postgres import PostgresStore
from contextwright.stores.postgres_schema import set_planner
from contextwright.stores.postgres_text import K1, B

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
