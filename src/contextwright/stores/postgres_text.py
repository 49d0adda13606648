"""Full-text search for PostgresStore: the tsvector finds the matches, and a BM25 score ranks them,
as SQLite's FTS5 does.

PostgreSQL's own ts_rank and ts_rank_cd know nothing of how rare a word is and barely discount
length, so a long tool result that holds every common word of the task outranks the one short
message with the task's rare name in it: on the benchmark's records their top 40 were tool
results for every request, and not one of SQLite's top 10. Here each query word is weighted by
its inverse document frequency, counted once and cached per process (recounted after 20% growth,
like SQLiteStore), and a record's length discounts its score as BM25 does (k1 = 1.2, b = 0.75;
a word counts once per record).

The cost is bounded as in SQLiteStore: on a large store, words found in more than COMMON_DF
records are left out of the match, and only the newest LARGE_WINDOW matches are ranked. Each
ranked row's tsvector is unpacked once (`strip`, in a LATERAL that the planner may not inline) and
every word looked up in that copy: a long record's tsvector is stored compressed, and each `@@`
on the stored value would decompress it again.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

from ..ports import Hit
from ..text import query_terms
from .fulltext import COMMON_DF, LARGE_WINDOW
from .rows import row_to_record

K1, B = 1.2, 0.75
# How long the store's size, which decides when word counts are recounted (after 20% growth),
# is taken as known: a round trip per search otherwise, for a number that moves by percents.
TOP_TTL = 1.0
_TSQ = "plainto_tsquery('english', %(t{i})s)"  # never a syntax error, whatever the word
# A word's count: (records with it, max rid when counted).
_Count = tuple[int, int]


class PostgresText:
    """Mixed into PostgresStore, which supplies `_read` and the SELECT pieces."""

    _read: Callable[..., list[Any]]
    _cols: str
    _visible: str
    _top: tuple[float, int] = (-TOP_TTL - 1.0, 0)  # (when read, max rid)

    def _text_state(self) -> tuple[threading.Lock, dict[str, _Count], list[float]]:
        state: tuple[threading.Lock, dict[str, _Count], list[float]] | None = getattr(
            self, "_text", None
        )
        if state is None:
            state = (threading.Lock(), {}, [0.0, 0.0, 0.0])  # [avg lexemes, max rid, records]
            self._text = state
        return state

    def _counts(self, terms: list[str]) -> tuple[dict[str, _Count], int, float]:
        """Each word's count, the number of records, and the average record length in lexemes."""
        lock, cache, avg = self._text_state()
        now = time.monotonic()
        with lock:
            top_at, top = self._top
        if now - top_at > TOP_TTL:
            top = int(self._read("SELECT coalesce(max(rid), 0) FROM records")[0][0])
            with lock:
                self._top = (now, top)
        with lock:
            stale = [t for t in terms if t not in cache or top > cache[t][1] * 1.2]
            avg_stale = avg[0] == 0.0 or top > avg[1] * 1.2
        if stale:
            # One index scan per word: a GIN match needs no recheck, so no tsvector is read.
            counts = ", ".join(
                f"(SELECT count(*) FROM records WHERE tsv @@ {_TSQ.format(i=i)})"
                for i in range(len(stale))
            )
            row = self._read(f"SELECT {counts}", {f"t{i}": t for i, t in enumerate(stale)})[0]
            with lock:
                cache.update((t, (int(c), top)) for t, c in zip(stale, row, strict=True))
        if avg_stale:
            # Counted, not max(rid): ids are never reused, and a conflicting insert uses one up.
            # The newest records stand for all in the average: one short index range.
            sample = "SELECT length(tsv) AS n FROM records ORDER BY rid DESC LIMIT 2000"
            row = self._read(
                f"SELECT (SELECT count(*) FROM records), (SELECT avg(n) FROM ({sample}) s)"
            )[0]
            with lock:
                avg[:] = [max(float(row[1] or 0), 1.0), float(top), float(row[0])]
        with lock:
            return {t: cache[t] for t in terms}, int(avg[2]), avg[0]

    def search_text(self, project: str, agent: str | None, text: str, limit: int) -> list[Hit]:
        terms = query_terms(text)
        if not terms or limit <= 0:
            return []
        counts, total, avg = self._counts(terms)
        words = list(terms)
        df = {t: counts[t][0] for t in words}
        large = total > COMMON_DF
        if large:
            words = [t for t in words if df[t] <= COMMON_DF] or [min(words, key=df.__getitem__)]
        n = max(total, 1)
        params: dict[str, Any] = {
            "project": project,
            "agent": agent,
            "limit": limit,
            "avg": avg,
            "window": max(limit * 8, LARGE_WINDOW) if large else None,  # NULL: no limit
        }
        for i, t in enumerate(words):
            # A word counted in no record may be in one now (counts are cached): weigh it as the
            # rarest and keep it in the match; matching nothing costs nothing.
            f = max(df[t], 1)
            params[f"t{i}"] = t
            params[f"w{i}"] = math.log(1 + (n - f + 0.5) / (f + 0.5))
        ors = " || ".join(_TSQ.format(i=i) for i in range(len(words)))
        present = " + ".join(
            f"%(w{i})s::float8 * (l.v @@ {_TSQ.format(i=i)})::int" for i in range(len(words))
        )
        visible = f" AND {self._visible}" if agent is not None else ""
        # The window's rows carry what ranking and visibility need (rid, visibility, author, the
        # tsvector); only the `limit` best are joined back for their columns, one index lookup
        # each, instead of every row of the window (500 lookups at 100k records).
        sql = (
            "WITH w AS (SELECT r.project, r.rid, r.visibility, r.author, r.tsv FROM records r "
            f"WHERE r.project = %(project)s AND r.tsv @@ ({ors}) "
            "ORDER BY r.rid DESC LIMIT %(window)s), "
            f"s AS (SELECT r.rid, ({present}) * {K1 + 1} / "
            f"(1 + {K1} * (1 - {B} + {B} * length(l.v) / %(avg)s::float8)) AS score "
            "FROM w r CROSS JOIN LATERAL (SELECT strip(r.tsv) AS v OFFSET 0) l "
            f"WHERE true{visible} ORDER BY score DESC, r.rid DESC LIMIT %(limit)s) "
            f"SELECT {self._cols}, s.score FROM s JOIN records r "
            "ON r.project = %(project)s AND r.rid = s.rid "
            "ORDER BY s.score DESC, r.rid DESC"
        )
        return [Hit(row_to_record(row[:-1]), float(row[-1])) for row in self._read(sql, params)]
