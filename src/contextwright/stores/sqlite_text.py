"""The full-text half of SQLiteStore: FTS5 with BM25, bounded on a large store.

A small store ranks every match. A large one (more than COMMON_DF records) leaves the words found
in more than COMMON_DF records out of the match (the idea of Lucene's common-terms cutoff) and
ranks only the newest LARGE_WINDOW matches of the project, so that the cost stays bounded whatever
the words are. A store of one project answers the same query without reading a row of `records`
for every match in the window (see `_search_one_project`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import StoreError
from ..ports import Hit
from ..records import Record
from ._rows import KEYS, RecordKey, fts_match, query_terms

VISIBLE = (
    "(r.visibility = 'project' OR r.author = :agent OR (r.visibility = 'direct' AND EXISTS "
    "(SELECT 1 FROM addressing a WHERE a.name = :agent AND a.how = 'to' AND a.rid = r.rid)))"
)

# The full-text window of a store that holds one project: every match is that project's, so the
# window needs no row of `records` at all (the flag says whether that held in the same snapshot).
# Ranked in SQL (bm25, then newest), so that Python reads only the rows it needs, best first.
WINDOW = (
    "SELECT rid, score, one FROM (SELECT t.rowid AS rid, bm25(records_fts) AS score, "
    "(SELECT count(*) = 1 AND max(project) = :project FROM project_versions) AS one "
    "FROM records_fts t WHERE records_fts MATCH :m ORDER BY t.rowid DESC LIMIT :window) "
    "ORDER BY score, rid DESC"
)
# Full-text words found in more records than this are left out of the BM25 query.
COMMON_DF = 2000
LARGE_WINDOW = 500


class SQLiteText:
    _conn: Callable[[], sqlite3.Connection]
    _resolve: Callable[[sqlite3.Connection, Sequence[RecordKey]], list[Record]]
    _df: dict[str, tuple[int, int]]  # word -> (records with it, max rid then)

    def search_text(self, project: str, agent: str | None, text: str, limit: int) -> list[Hit]:
        match = fts_match(text)
        if match is None or limit <= 0:
            return []
        selective = self._selective_match(query_terms(text))
        visible = VISIBLE if agent is not None else "1"
        # A small store ranks every match. A large one ranks the newest LARGE_WINDOW matches of
        # its selective words only, so that the cost stays bounded whatever the words are.
        inner = (
            "ORDER BY score LIMIT :wide"
            if selective is None
            else "ORDER BY t.rowid DESC LIMIT :window"
        )
        # The window holds this project's matches only, so other projects cannot crowd it out:
        # the project is checked by rowid on `records` before the window is cut. The same row
        # lookup says whether the agent may see the match (`vis_`), so that each match in the
        # window is read once; the invisible ones are dropped after the cut, as before.
        sql = (
            "SELECT rid, id, current_status, score FROM "
            f"(SELECT {KEYS}, bm25(records_fts) AS score, {visible} AS vis_ "
            "FROM records_fts t JOIN records r ON r.rid = t.rowid WHERE records_fts MATCH :m "
            f"AND r.project = :project {inner}) WHERE vis_ ORDER BY score, rid DESC LIMIT :limit"
        )
        params = {
            "m": f"content:({selective or match})",
            "project": project,
            "agent": agent,
            "limit": limit,
            "wide": limit * 8,
            "window": max(limit * 8, LARGE_WINDOW),
        }
        try:
            conn = self._conn()
            if selective is not None:
                found = self._search_one_project(conn, params, visible)
                if found is not None:
                    return found
            rows = conn.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            raise StoreError(f"full-text search failed for {text[:80]!r}: {exc}") from exc
        records = self._resolve(conn, [row[:3] for row in rows])
        return [Hit(r, -float(row[3])) for r, row in zip(records, rows, strict=True)]

    def _search_one_project(
        self, conn: sqlite3.Connection, params: dict[str, Any], visible: str
    ) -> list[Hit] | None:
        """`search_text`'s answer for a store of one project, or None for a store of several.

        The same window (the newest matches), ranked the same way (bm25, then newest), but the
        rows of `records` are read only for the best matches, best first, until `limit` of them
        are visible: about 50 row lookups instead of one per match in the window (500)."""
        ranked = conn.execute(WINDOW, params)  # ORDER BY score, rid DESC
        try:
            limit: int = params["limit"]
            keys: list[RecordKey] = []
            scores: list[float] = []
            while len(keys) < limit:
                batch = ranked.fetchmany(limit - len(keys) + 8)  # a few more, for the invisible
                if not batch:
                    break
                if not batch[0][2]:  # several projects: cut the window among this project's rows
                    return None
                rids = json.dumps([row[0] for row in batch])
                seen = {
                    row[0]: row
                    for row in conn.execute(
                        f"SELECT {KEYS}, {visible} FROM records r "
                        "WHERE r.rid IN (SELECT value FROM json_each(:rids))",
                        {"rids": rids, "agent": params["agent"]},
                    )
                }
                for rid, score, _ in batch:
                    row = seen.get(rid)
                    if row is not None and row[3]:
                        keys.append(row[:3])
                        scores.append(score)
                        if len(keys) == limit:
                            break
        finally:
            ranked.close()  # the rest of the window is never read
        records = self._resolve(conn, keys)
        return [Hit(r, -float(score)) for r, score in zip(records, scores, strict=True)]

    def _selective_match(self, terms: Sequence[str]) -> str | None:
        """Leave out words found in more than COMMON_DF records (the idea of Lucene's common-terms
        cutoff): BM25 must read every posting of every word, and a word that common says little
        about relevance. The rarest word is always kept. Small stores are never affected."""
        if not terms:
            return None
        conn = self._conn()
        top = conn.execute("SELECT max(rid) FROM records").fetchone()[0] or 0
        if top <= COMMON_DF:
            return None
        freq: dict[str, int] = {}
        for t in terms:
            cached = self._df.get(t)
            if cached is None or top > cached[1] * 1.2:  # recount after 20% growth
                phrase = 'content:"' + t.replace('"', "") + '"'
                n = conn.execute(
                    "SELECT count(*) FROM records_fts WHERE records_fts MATCH ?", (phrase,)
                ).fetchone()[0]
                cached = self._df[t] = (int(n), top)
            freq[t] = cached[0]
        keep = [t for t in terms if 0 < freq[t] <= COMMON_DF]
        if not keep:
            rarest = min((t for t in terms if freq[t] > 0), key=lambda t: freq[t], default=None)
            keep = [rarest] if rarest else list(terms)
        return " OR ".join(f'"{t}"' for t in keep)
