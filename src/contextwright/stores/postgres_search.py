"""The full-text search's statement for PostgresStore (postgres_text.py): the newest matches of the
task's words, ranked by BM25 in SQL, from the words' counts (which words are left out as common,
each word's weight, and the rid floor above which the newest matches are sought)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .fulltext import COMMON_DF, LARGE_WINDOW

K1, B = 1.2, 0.75
TSQ = "plainto_tsquery('english', %(t{i})s)"  # never a syntax error, whatever the word


def search_sql(
    project: str,
    agent: str | None,
    limit: int,
    known: tuple[Mapping[str, int], int, float],
    top: int,
    cols: str,
    visible: str,
) -> tuple[str, dict[str, Any], str | None]:
    """The statement, parameters and planner setting of the search of the words of `known`
    (each word's count, the number of records, their average length). `top`: the highest rid
    known; `cols` and `visible`: the store's columns and visibility test."""
    df, total, avg = known
    large = total > COMMON_DF
    n = max(total, 1)
    params: dict[str, Any] = {
        "project": project,
        "agent": agent,
        "limit": limit,
        "avg": avg,
        "window": max(limit * 8, LARGE_WINDOW) if large else None,  # NULL: no limit
    }
    visible = f" AND {visible}" if agent is not None else ""
    words = _kept(list(df), df, large)
    for i, t in enumerate(words):
        # A word counted in no record may be in one now (counts are cached): weigh it as the
        # rarest and keep it in the match; matching nothing costs nothing.
        f = max(df[t], 1)
        params[f"t{i}"] = t
        params[f"w{i}"] = math.log(1 + (n - f + 0.5) / (f + 0.5))
    # The newest `window` matches. GIN answers in no order, so they are all collected and the
    # newest kept; past the window, only among the newest rows (`rid > floor`), where a
    # window and a quarter is expected by the words' counts (625 for 500: five standard
    # deviations of a count spread evenly over time): the postings are intersected with the rid
    # index's range before any row is read, and the rows read are recent and cached. Fewer
    # than `window` matches above the floor (the words were busier long ago), and the search
    # runs again without it. A word in a tenth of the records or more is found soonest by
    # walking the rows newest first (ten rows a match). At 1M records, for a word in 10,600:
    # about 47,000 rows walked, all 10,600 collected, or 940 above the floor (10 ms beside
    # 18 ms intersected with a BRIN index, whose lossy pages had every row rechecked); for a
    # word in 186,000: 2,700 walked.
    matches = max(sum(df[t] for t in words), 1)
    floor, newest = 0, "r.rid + 0"
    if large and matches * 10 >= n:
        newest = "r.rid"
    elif large and matches > 2 * params["window"] and top > 0:
        floor = max(0, top - math.ceil(1.25 * params["window"] * n / matches))
    params["floor"] = floor
    if newest == "r.rid" and len(words) > 1:
        window = _walked_window(len(words), visible)
    else:
        window = _window(len(words), newest, visible)
    # Above a floor, the planner walks the rid index and tests every row's tsvector (20,000
    # rows, 39 ms at 100k records) rather than intersect the two indexes (760 rows, 4 ms):
    # it does not know what a tsvector test costs.
    planner = "enable_indexscan = off" if floor else None
    return _joined(window, cols), params, planner


def _joined(window: str, cols: str) -> str:
    # Only the `limit` best are joined back for their columns, one index lookup each, instead
    # of every row of the window (500 lookups at 100k records).
    return (
        f"{window} SELECT {cols}, s.score, (SELECT count(*) FROM w) FROM s "
        "JOIN records r ON r.project = %(project)s AND r.rid = s.rid "
        "ORDER BY s.score DESC, r.rid DESC"
    )


def _kept(words: Sequence[str], counts: Mapping[str, int], large: bool) -> list[str]:
    """The words a search keeps, in their order: past COMMON_DF records on a large store a word
    is common and left out, but the rarest is always kept."""
    if not large:
        return list(words)
    return [t for t in words if counts[t] <= COMMON_DF] or [min(words, key=counts.__getitem__)]


# A record's BM25 length discount; `n` is its length in lexemes. Its constants are float8: written
# bare they are numeric, and `0.75 * n` was numeric arithmetic cast to float8 through its text on
# every row of the window, 0.5 ms of a 3 ms search at 1M records. The values are the same to the
# bit (0.75 times an integer, and 0.25, are exact in both).
_DISCOUNT = f"(1 + {K1}::float8 * (1 - {B}::float8 + {B}::float8 * {{n}} / %(avg)s::float8))"


def _window(words: int, newest: str, visible: str) -> str:
    """The CTEs `w` (the newest `window` matches above the floor) and `s` (the `limit` best of
    them by score), without reading a tsvector: each word's newest `window` matches are found on
    its own, and a row's words are the scans that found it. The newest `window` matches of any
    word are among those (a match with fewer than `window` newer matches of all the words has
    fewer of its own words'), so the window and every score are those of one scan of all the
    words, whose ranking unpacked each matched row's tsvector to see which words it holds (a tool
    result's is several kB, compressed and out of line: half of a search's time at 100k).
    `rid + 0` keeps the planner, misled by its coarse estimate of a word's share, from walking the
    rid index newest first (105,000 rows for a word in 4,500)."""
    scans = " UNION ALL ".join(
        f"(SELECT r.rid, {i} AS i, r.visibility, r.author, r.recipients, r.tsv_len AS n "
        f"FROM record_words r WHERE r.project = %(project)s AND r.tsv @@ {TSQ.format(i=i)} "
        f"AND r.rid > %(floor)s ORDER BY {newest} DESC LIMIT %(window)s)"
        for i in range(words)
    )
    if words == 1:
        found, present = f"SELECT * FROM ({scans}) m", "%(w0)s::float8"
    else:
        held = ", ".join(f"bool_or(i = {i}) AS m{i}" for i in range(words))
        found = (
            f"SELECT rid, visibility, author, recipients, n, {held} FROM ({scans}) m "
            "GROUP BY rid, visibility, author, recipients, n ORDER BY rid DESC LIMIT %(window)s"
        )
        present = " + ".join(f"%(w{i})s::float8 * r.m{i}::int" for i in range(words))
    return (
        f"WITH w AS ({found}), s AS (SELECT r.rid, ({present}) * {K1 + 1} / "
        f"{_DISCOUNT.format(n='r.n')} AS score FROM w r WHERE true{visible} "
        "ORDER BY score DESC, r.rid DESC LIMIT %(limit)s)"
    )


def _walked_window(words: int, visible: str) -> str:
    """`w` and `s` as `_window` makes them, for words so common that the rows are walked newest
    first: there a rarer word walked alone would read far more rows than all of them together,
    so one walk finds the matches and each row's tsvector says which words it holds. It is
    unpacked once (`strip`, in a LATERAL that the planner may not inline) and every word looked
    up in that copy: each `@@` on the stored, compressed value would decompress it again."""
    ors = " || ".join(TSQ.format(i=i) for i in range(words))
    present = " + ".join(
        f"%(w{i})s::float8 * (l.v @@ {TSQ.format(i=i)})::int" for i in range(words)
    )
    return (
        "WITH w AS (SELECT r.rid, r.visibility, r.author, r.recipients, r.tsv, r.tsv_len "
        f"FROM record_words r WHERE r.project = %(project)s AND r.tsv @@ ({ors}) "
        "AND r.rid > %(floor)s ORDER BY r.rid DESC LIMIT %(window)s), "
        f"s AS (SELECT r.rid, ({present}) * {K1 + 1} / {_DISCOUNT.format(n='r.tsv_len')} AS score "
        "FROM w r CROSS JOIN LATERAL (SELECT strip(r.tsv) AS v OFFSET 0) l "
        f"WHERE true{visible} ORDER BY score DESC, r.rid DESC LIMIT %(limit)s)"
    )
