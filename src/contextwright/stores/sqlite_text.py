"""The full-text half of SQLiteStore: FTS5 with BM25, bounded on a large store.

A small store ranks every match. A large one (more than COMMON_DF records) leaves the words found
in more than COMMON_DF records out of the match (the idea of Lucene's common-terms cutoff) and
ranks only the newest LARGE_WINDOW matches of the project, so that the cost stays bounded whatever
the words are. A store of one project answers the same query without reading a row of `records`
for every match in the window (see ONE_PROJECT).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from ..errors import StoreError
from ..ports import Hit
from ..records import Record
from ..text import query_terms
from .fulltext import COMMON_DF, LARGE_WINDOW, fts_match
from .rows import KEYS, RecordKey
from .sqlite_vocab import Vocabulary

VISIBLE = (
    "(r.visibility = 'project' OR r.author = :agent OR (r.visibility = 'direct' AND EXISTS "
    "(SELECT 1 FROM addressing a WHERE a.name = :agent AND a.how = 'to' AND a.rid = r.rid)))"
)

# A store that holds one project ranks its window without reading a row of `records` for every
# match in it: bm25 over the newest matches, and only the best `:first` of them are looked up in
# `records` (for whether the agent may see them); `text_ranked` asks again for all of the window
# when fewer than `limit` of those are visible. The first column says whether the store held one
# project in the same snapshot.
ONE_PROJECT = (
    "SELECT (SELECT count(*) = 1 AND max(project) = :project FROM project_versions), "
    "(SELECT json_group_array(json_array(rid, id, status, printf('%!.20g', score))) FROM ("
    "SELECT r.rid AS rid, r.id AS id, r.current_status AS status, w.score AS score FROM ("
    "SELECT rid, score FROM (SELECT t.rowid AS rid, bm25(records_fts) AS score "
    "FROM records_fts t WHERE records_fts MATCH :m ORDER BY t.rowid DESC LIMIT :window) "
    "ORDER BY score, rid DESC LIMIT :first) w JOIN records r ON r.rid = w.rid WHERE {visible} "
    "ORDER BY w.score, w.rid DESC LIMIT :limit))"
)
# Any store: the window holds this project's matches only, so other projects cannot crowd it
# out: the project is checked by rowid on `records` before the window is cut. The same row lookup
# says whether the agent may see the match (`vis_`), so that each match in the window is read
# once; the invisible ones are dropped after the cut.
GENERAL = (
    "SELECT json_group_array(json_array(rid, id, current_status, printf('%!.20g', score))) "
    "FROM (SELECT rid, id, current_status, score FROM (SELECT " + KEYS + ", "
    "bm25(records_fts) AS score, {visible} AS vis_ FROM records_fts t "
    "JOIN records r ON r.rid = t.rowid WHERE records_fts MATCH :m "
    "AND r.project = :project {inner}) WHERE vis_ ORDER BY score, rid DESC LIMIT :limit)"
)


@dataclass(frozen=True)
class RankingPlan:
    """A full-text ranking to run (SQLiteText.ranking_plan): its statements and parameters."""

    text: str
    params: dict[str, Any]
    general: str  # GENERAL, for any store
    one_project: str | None  # ONE_PROJECT, tried first where words were left out


# `ranking_rows`' answer when ONE_PROJECT finds the store holds more than one project.
MORE_PROJECTS = "more projects"

# Word counts kept for the COMMON_DF cutoff (`_word_count`); past this many the cache starts again.
WORD_COUNTS_KEPT = 50_000

# (rid, id, current status) of a record, and its BM25 score (higher is better).
Ranked = tuple[RecordKey, float]


class SQLiteText:
    _conn: Callable[[], sqlite3.Connection]
    _resolve: Callable[[sqlite3.Connection, Sequence[RecordKey]], list[Record]]
    _df: dict[tuple[str, int | None], tuple[int, int]]  # (word, cap) -> (count, max rid then)
    _vocabulary: Vocabulary
    _writes: int
    _ranked_at: int

    def search_text(self, project: str, agent: str | None, text: str, limit: int) -> list[Hit]:
        return self.ranked_hits(self.text_ranked(project, agent, text, limit))

    def ranked_hits(self, ranked: Sequence[Ranked]) -> list[Hit]:
        """The Hits of `text_ranked`'s answer, in its order, read through the record cache."""
        records = self._resolve(self._conn(), [key for key, _ in ranked])
        return [Hit(r, score) for r, (_, score) in zip(records, ranked, strict=True)]

    def text_ranked(self, project: str, agent: str | None, text: str, limit: int) -> list[Ranked]:
        """`search_text` without reading the records: the keys and scores of the hits, best first.

        In three steps, so that the full-text source can run the middle one on the pool while
        the other sources read on the calling thread (sources.py), and resolve the hits after:
        `ranking_plan` (which words, which statement), `ranking_rows` (the statement: SQL only,
        answering in one row of JSON, so that it takes the GIL once rather than once per row)
        and `ranking_result` (the rows as Ranked). A pool thread that runs Python beside the
        calling thread takes the GIL from it at each of that thread's statements, so the pool
        runs the middle step only (docs/assembly.md)."""
        plan = self.ranking_plan(project, agent, text, limit)
        return self.ranking_result(plan, self.ranking_rows(plan))

    def ranking_plan(
        self, project: str, agent: str | None, text: str, limit: int
    ) -> RankingPlan | None:
        """The statement that ranks `text` for `agent`; None when there is nothing to rank."""
        self._ranked_at = self._writes  # see SQLiteStore.warm_here
        match = fts_match(text)
        if match is None or limit <= 0:
            return None
        selective = self._selective_match(query_terms(text))
        params = {
            "m": f"content:({selective or match})",
            "project": project,
            "agent": agent,
            "limit": limit,
            "wide": limit * 8,
            "window": max(limit * 8, LARGE_WINDOW),
            "first": limit * 2,
        }
        visible = VISIBLE if agent is not None else "1"
        # A small store ranks every match. A large one ranks the newest LARGE_WINDOW matches of
        # its selective words only, so that the cost stays bounded whatever the words are.
        inner = (
            "ORDER BY score LIMIT :wide"
            if selective is None
            else "ORDER BY t.rowid DESC LIMIT :window"
        )
        general = GENERAL.format(visible=visible, inner=inner)
        if selective is None:
            return RankingPlan(text, params, general, None)
        one_project = ONE_PROJECT.format(visible=visible)
        return RankingPlan(text, params, general, one_project)

    def ranking_rows(self, plan: RankingPlan | None) -> str | None:
        """The plan's statement, run: SQL only, one row (the hits as JSON). ONE_PROJECT where
        the plan has it, which answers MORE_PROJECTS instead when the store holds more."""
        if plan is None:
            return None
        try:
            conn = self._conn()
            if plan.one_project is not None:
                one, found = conn.execute(plan.one_project, plan.params).fetchone()
                return found if one else MORE_PROJECTS
            return cast(str | None, conn.execute(plan.general, plan.params).fetchone()[0])
        except sqlite3.OperationalError as exc:
            raise StoreError(f"full-text search failed for {plan.text[:80]!r}: {exc}") from exc

    def ranking_result(self, plan: RankingPlan | None, found: str | None) -> list[Ranked]:
        """`ranking_rows`' answer as Ranked, best first, after what ONE_PROJECT leaves to do: a
        store of more than one project ranks with the general statement, and when fewer than
        `limit` of the best matches are visible to the agent, the whole window is looked at."""
        if plan is None:
            return []
        if found == MORE_PROJECTS:
            return _ranked(self.ranking_rows(replace(plan, one_project=None)))
        ranked = _ranked(found)
        if plan.one_project is not None and len(ranked) < plan.params["limit"]:
            whole = replace(plan, params={**plan.params, "first": plan.params["window"]})
            ranked = _ranked(self.ranking_rows(whole))
        return ranked

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
        # A word's count comes from the index's vocabulary, read at once (sqlite_vocab.py), where
        # that knows the word; it is exact, so it sorts the words as a count does. Otherwise the
        # word is counted: whether it is common needs COMMON_DF + 1 postings at most, not all of
        # them. Only when every word is common are they counted in full, to keep the rarest.
        known = self._vocabulary.known(terms, top)

        def count(t: str, cap: int | None) -> int:
            return known[t] if t in known else self._word_count(conn, t, top, cap)

        freq = {t: count(t, COMMON_DF + 1) for t in terms}
        keep = [t for t in terms if 0 < freq[t] <= COMMON_DF]
        if not keep:
            full = {t: count(t, None) for t in terms if freq[t] > 0}
            rarest = min(full, key=lambda t: full[t], default=None)
            keep = [rarest] if rarest else list(terms)
        return " OR ".join(f'"{t}"' for t in keep)

    def _word_count(self, conn: sqlite3.Connection, word: str, top: int, cap: int | None) -> int:
        """The records that hold `word`, counted up to `cap` (None: all); cached per word and
        cap until the store has grown by a fifth."""
        key = (word, cap)
        cached = self._df.get(key)
        if cached is None or top > cached[1] * 1.2:  # recount after 20% growth
            match = 'content:"' + word.replace('"', "") + '"'
            inner = "SELECT 1 FROM records_fts WHERE records_fts MATCH ?"
            if cap is not None:
                inner += f" LIMIT {int(cap)}"
            (n,) = conn.execute(f"SELECT count(*) FROM ({inner})", (match,)).fetchone()
            if len(self._df) >= WORD_COUNTS_KEPT:  # bounded: a server may see any number of words
                self._df.clear()
            cached = self._df[key] = (int(n), top)
        return cached[0]


def _ranked(found: str | None) -> list[Ranked]:
    """The JSON rows of a ranked search as Ranked, best first (bm25 ascending, then newest): the
    order is restored here, because SQLite does not promise the order of an aggregate's input,
    and each score travels as 20 digits (SQLite's `%!.20g`), which parse back to the same float."""
    rows = [(float(row[3]), row) for row in json.loads(found)] if found else []
    rows.sort(key=lambda x: (x[0], -x[1][0]))
    return [((row[0], row[1], row[2]), -score) for score, row in rows]
