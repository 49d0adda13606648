"""Full-text search for PostgresStore: the GIN-indexed tsvector finds the matches, and a BM25
score ranks them, as SQLite's FTS5 does.

PostgreSQL's own ts_rank and ts_rank_cd know nothing of how rare a word is and barely discount
length, so a long tool result that holds every common word of the task outranks the one short
message with the task's rare name in it: on the benchmark's records their top 40 were tool
results for every request, and not one of SQLite's top 10. Here each query word is weighted by
its inverse document frequency, counted once and cached per process (recounted after 20% growth,
like SQLiteStore), and a record's length discounts its score as BM25 does (k1 = 1.2, b = 0.75;
a word counts once per record). Words found in more than COMMON_DF records are left out of the
match on a large store, as in SQLiteStore, so the cost stays bounded whatever the words are.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any

from ..ports import Hit
from ._rows import query_terms, row_to_record

COMMON_DF = 2000  # as SQLiteStore
K1, B = 1.2, 0.75
# A lock, word -> (records with it, max rid when counted), [average lexemes, max rid then].
_State = tuple[threading.Lock, dict[str, tuple[int, int]], list[float]]
_TSQ = "plainto_tsquery('english', %(t{i})s)"  # never a syntax error, whatever the word


class PostgresText:
    """Mixed into PostgresStore, which supplies `_read` and the SELECT pieces."""

    _read: Callable[..., list[Any]]
    _cols: str
    _visible: str

    def _text_stats(self) -> _State:
        state: _State | None = getattr(self, "_text_state", None)
        if state is None:
            state = (threading.Lock(), {}, [0.0, 0.0])
            self._text_state = state
        return state

    def _weights(self, terms: list[str]) -> tuple[dict[str, float], float]:
        """IDF per word and the average record length in lexemes."""
        lock, df, avg = self._text_stats()
        top = int(self._read("SELECT coalesce(max(rid), 0) FROM records")[0][0])
        with lock:
            stale = [t for t in terms if t not in df or top > df[t][1] * 1.2]
            avg_stale = avg[0] == 0.0 or top > avg[1] * 1.2
        if stale:
            ors = " || ".join(_TSQ.format(i=i) for i in range(len(stale)))
            counts = ", ".join(
                f"count(*) FILTER (WHERE tsv @@ {_TSQ.format(i=i)})" for i in range(len(stale))
            )
            params = {f"t{i}": t for i, t in enumerate(stale)}
            row = self._read(f"SELECT {counts} FROM records WHERE tsv @@ ({ors})", params)[0]
            with lock:
                df.update((t, (int(n), top)) for t, n in zip(stale, row, strict=True))
        if avg_stale:
            # The newest records stand for all: one short index range, however large the table.
            sample = "SELECT length(tsv) AS n FROM records ORDER BY rid DESC LIMIT 2000"
            mean = self._read(f"SELECT coalesce(avg(n), 0) FROM ({sample}) s")[0][0]
            with lock:
                avg[:] = [max(float(mean), 1.0), float(top)]
        with lock:
            n = max(top, 1)
            # A word counted in no record may be in one now (the count is cached): weigh it as
            # the rarest, and keep it in the match; matching nothing costs nothing.
            weights = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t in terms
                       for f in [max(df[t][0], 1)]}  # fmt: skip
            return weights, avg[0]

    def search_text(self, project: str, agent: str | None, text: str, limit: int) -> list[Hit]:
        terms = query_terms(text)
        if not terms or limit <= 0:
            return []
        weights, avg = self._weights(terms)
        lock, df, _ = self._text_stats()
        with lock:
            counts = {t: df[t][0] for t in terms}
        match = [t for t in terms if counts[t] <= COMMON_DF] or [min(terms, key=counts.__getitem__)]
        params: dict[str, Any] = {f"t{i}": t for i, t in enumerate(match)}
        params.update(project=project, agent=agent, limit=limit, avg=avg)
        params.update({f"w{i}": weights[t] for i, t in enumerate(match)})
        present = " + ".join(
            f"%(w{i})s * (r.tsv @@ {_TSQ.format(i=i)})::int" for i in range(len(match))
        )
        ors = " || ".join(_TSQ.format(i=i) for i in range(len(match)))
        visible = f" AND {self._visible}" if agent is not None else ""
        sql = (
            f"SELECT {self._cols}, ({present}) * {K1 + 1} / "
            f"(1 + {K1} * (1 - {B} + {B} * length(r.tsv) / %(avg)s)) AS score "
            f"FROM records r WHERE r.project = %(project)s AND r.tsv @@ ({ors}){visible} "
            "ORDER BY score DESC, r.rid DESC LIMIT %(limit)s"
        )
        return [Hit(row_to_record(row[:-1]), float(row[-1])) for row in self._read(sql, params)]
