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
records are left out of the match, and only the newest LARGE_WINDOW matches are ranked. No read
grows with the store: a word is counted up to COMMON_DF + 1 only, or not at all where ANALYZE's
statistics of the tsvector column say it is common; the store's size is the planner's estimate
past EXACT_TOTAL records; the newest matches are sought among the newest rows first (see
`search_text`). No tsvector is read to rank: each record's length in lexemes is kept beside it
(m008_fulltext_lengths), and which words a row holds is which words' index scans found it
(postgres_search.py, which writes the search's statement), except for words so common that
the rows are walked."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from ..errors import StoreError, ValidationError
from ..ports import Hit
from ..text import query_terms
from .fulltext import COMMON_DF
from .postgres_schema import GROW_WORDS, WORDS_SPAN, set_local, set_planner
from .postgres_search import TSQ, search_sql
from .rows import row_to_record

# How long the store's size, which decides when word counts are recounted (after 20% growth),
# is taken as known: a round trip per search otherwise, for a number that moves by percents.
TOP_TTL = 1.0
# Past this many records the total is the planner's estimate (pg_class.reltuples), not a count.
EXACT_TOTAL = 200_000
# A word whose estimated count passes this is common without being counted. COMMON_DF is the
# cutoff; the margin covers the estimate's error (ANALYZE samples 30,000 rows: a word in 3,000 of
# a million records is seen about 90 times, give or take 10).
COMMON_SURE = COMMON_DF * 3 // 2
# The share of rows holding each of the query's lexemes, among those ANALYZE found most often in
# the tsvectors. ANALYZE keeps them per partition of `record_words` (autovacuum never analyzes the
# partitioned table as a whole), and reading them costs by the partition (0.35 ms each at 1M
# records; all of them, 9 ms): the newest MCE_PARTITIONS partitions analyzed stand for all, a
# sample of 30,000 rows each (ANALYZE's own sample of the whole table was one of 30,000). A lexeme
# one of them does not list counts as in none of its rows: an estimate too low is safe (the word
# is counted). `%(parts)s`: the newest partitions' names, newest first.
MCE_PARTITIONS = 2
# The lexemes common by those statistics (their estimate over COMMON_SURE at the store's size
# `%(total)s`), each with that estimate: what a word's estimate needs of them. Read once per
# MCE_TTL seconds and kept by the process (`_common_lexemes`): reading `pg_stats` (its arrays cast
# from `anyarray` through text) was 0.85 ms of every word count at 1M records, more than half of
# it, for statistics that change when ANALYZE runs, every few minutes at most. The share and the
# estimate are computed as each count computed them from `pg_stats` (`real` arithmetic, rounded
# in SQL), so the counts are those of a read of the statistics at the time they were cached.
MCE_TTL = 60.0
_COMMON_LEXEMES = (
    "WITH p AS (SELECT s.most_common_elems::text::text[] AS e, s.most_common_elem_freqs AS f, "
    "c.reltuples AS n FROM pg_stats s JOIN pg_class c ON c.relname = s.tablename "
    "AND c.relnamespace = current_schema()::regnamespace WHERE s.schemaname = current_schema() "
    "AND s.tablename = ANY(%(parts)s) AND s.attname = 'tsv' AND c.reltuples > 0 "
    f"ORDER BY array_position(%(parts)s, s.tablename::text) LIMIT {MCE_PARTITIONS}), "
    # unnest pads the lexemes with NULLs beside the frequencies' three trailing statistics.
    "m AS (SELECT u.e, sum(u.f * p.n) / (SELECT sum(n) FROM p) AS f "
    "FROM p CROSS JOIN LATERAL unnest(p.e, p.f) u(e, f) WHERE u.e IS NOT NULL GROUP BY u.e) "
    # In a fixed order: the same statistics make the same statement text, which each connection
    # keeps prepared (its generic plan over every partition is planned once, not once a minute).
    "SELECT m.e, round(m.f * %(total)s) FROM m WHERE m.f * %(total)s > %(common)s ORDER BY m.e"
)
# Each word's count, in the order of %(words)s: its estimate (negative, so that it is told from a
# count) if every one of its lexemes is common (the least of their estimates: that of the rarest),
# else its records counted up to %(cap)s; and, as a second column, its count in full where it was
# capped and every word is common (past %(df)s, by estimate or capped count: the rarest is ranked),
# run only then. One text for any number of words: one prepared statement and generic plan per
# connection, planned once (planning a count over every partition cost more than running it); a
# text per number of words was planned for its values on its first five runs on each connection,
# most of a benchmark's counts. The common lexemes and their estimates are in the text, as array
# constants (`{lex}`, `{est}`: `_array`), changed only when they are read again: sent as
# parameters, the 910 of a 1M-record store cost 1.2 ms a count to send (psycopg's dumping of the
# lists), where a prepared statement's text is sent once per connection. `SELECT FROM`: with no column to read, the count reads no row of
# a page that VACUUM marked all-visible (990 pages read for a word in 993 records with `SELECT 1`).
_COUNTS = (
    "WITH f AS MATERIALIZED (SELECT w.i, w.word, CASE WHEN e.est IS NOT NULL THEN -e.est "
    "ELSE (SELECT count(*) FROM (SELECT FROM record_words "
    "WHERE tsv @@ plainto_tsquery('english', w.word) LIMIT %(cap)s) c) END AS c "
    "FROM unnest(%(words)s::text[]) WITH ORDINALITY w(word, i) CROSS JOIN LATERAL ("
    "SELECT CASE WHEN count(x.est) = count(*) AND count(*) > 0 THEN min(x.est) END AS est "
    "FROM (SELECT ({est})[array_position({lex}, l.e)] AS est "
    "FROM unnest(tsvector_to_array(to_tsvector('english', w.word))) l(e)) x) e) "
    "SELECT f.c, CASE WHEN f.c = %(cap)s AND (SELECT bool_and(abs(c) > %(df)s) FROM f) "
    "THEN (SELECT count(*) FROM record_words "
    "WHERE tsv @@ plainto_tsquery('english', f.word)) END FROM f ORDER BY f.i"
)
# The project's store version (PostgresStore.version, and with a call's first read or search).
VERSION_SQL = "SELECT version FROM project_versions WHERE project = %(p)s"
# A word's count: (records with it, max rid when counted).
_Count = tuple[int, int]
# Each word's count, the number of records, their average length: what `_counts` gives.
_Known = tuple[dict[str, _Count], int, float]
# Serializes the making of `record_words` partitions among a database's writers.
WORDS_LOCK = 0x776F7264  # "word"
# A writer that could not make a partition (another transaction held a lock on the table past
# WORDS_LOCK_WAIT) tries again after this many seconds, not on every write; the DEFAULT partition
# takes the rows meanwhile.
WORDS_RETRY = 1.0
# How long the making of a partition waits for a lock: the searches and inserts that come after
# it queue behind its wait, so it gives up first.
WORDS_LOCK_WAIT = "200ms"


class PostgresText:
    """Mixed into PostgresStore, which supplies `_read` and the SELECT pieces."""

    _read: Callable[..., list[Any]]
    _reading: Callable[..., Any]
    version: Callable[[str], int]
    _cols: str
    _visible: str
    _write: Callable[..., Any]
    _top: tuple[float, int] = (-TOP_TTL - 1.0, 0)  # (when read, max rid)
    _rid_written = 0  # the highest rid this process has written (PostgresWrites._insert)
    _words_made = -1  # the newest partition of `record_words` this process made or found
    _words_retry = 0.0  # monotonic time before which no partition is tried again
    # (when read, (partitions, total), the counts' statement): `_counts_sql`.
    _mce: tuple[float, tuple[tuple[str, ...], int], str] = (0.0, ((), -1), "")
    # The common lexemes in `_mce`'s statement, each with its estimated count: `_guessed`.
    _common: dict[str, int] = {}  # noqa: RUF012 (replaced whole, never changed in place)

    def _grow_words(self) -> None:
        """Make the partition of `record_words` that holds the newest rid written, the next one,
        and any that rows in the DEFAULT partition belong to, if they are not there: a search
        above a floor reads the newest partitions' GIN postings only, where a row in the DEFAULT
        partition is read by every search. Called by each add once its batch is stored, outside
        the group commit's lock (PostgresWrites.add_many); a partition is made once per
        WORDS_SPAN rids. Never fails a write: the rows go to the DEFAULT partition until it
        succeeds, and are moved from there into their partition when it does."""
        k = self._rid_written // WORDS_SPAN
        if k + 1 <= self._words_made or time.monotonic() < self._words_retry:
            return

        def grow(conn: Any) -> None:
            set_local(conn, "lock_timeout", WORDS_LOCK_WAIT)
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (WORDS_LOCK,))
            # And those of rows the DEFAULT partition took while no partition could be made,
            # which would otherwise stay there after the writer's rids had moved past them.
            stray = conn.execute(f"SELECT DISTINCT rid / {WORDS_SPAN} FROM record_words_default")
            for part in sorted({k, k + 1, *(int(r[0]) for r in stray)}):
                name = f"record_words_{part}"
                if conn.execute("SELECT to_regclass(%s) IS NULL", (name,)).fetchone()[0]:
                    lo, hi = part * WORDS_SPAN, (part + 1) * WORDS_SPAN
                    conn.execute(GROW_WORDS.format(k=part, lo=lo, hi=hi))

        try:
            self._write(grow)
        except (StoreError, ValidationError):
            self._words_retry = time.monotonic() + WORDS_RETRY
        else:
            self._words_made = k + 1

    def _text_state(self) -> tuple[threading.Lock, dict[str, _Count], list[float]]:
        state: tuple[threading.Lock, dict[str, _Count], list[float]] | None = getattr(
            self, "_text", None
        )
        if state is None:
            state = (threading.Lock(), {}, [0.0, 0.0, 0.0])  # [avg lexemes, max rid, records]
            self._text = state
        return state

    def _counts(self, terms: list[str]) -> tuple[dict[str, _Count], int, float]:
        """Each word's count, the number of records, and the average record length in lexemes.

        On a large store a count is exact up to COMMON_DF + 1 only (all that the cutoff needs),
        and a word the planner's statistics know as common is not counted at all: its count is
        the statistics' estimate. Counting every posting of a word found in a tenth of a million
        records took seconds, on every call that brought a new word."""
        lock, cache, avg = self._text_state()
        now = time.monotonic()
        with lock:
            top_at, top = self._top
        if now - top_at > TOP_TTL:
            top = int(self._read("SELECT coalesce(max(rid), 0) FROM records")[0][0])
            with lock:
                self._top = (now, top)
        with lock:
            stale, avg_stale = _stale(cache, terms, top), _avg_stale(avg, top)
        if avg_stale:
            # Counted on a store of up to EXACT_TOTAL rows, the planner's estimate past that
            # (kept by autovacuum, within a few percent): a count of a million rows is 100 ms.
            # The newest records stand for all in the average length: one short index range.
            # `record_words` has no index of the rids alone (no write pays for one): the
            # newest rids are those of `records`, and their lengths 2,000 lookups.
            sample = (
                "SELECT w.tsv_len AS n FROM (SELECT project, rid FROM records "
                "ORDER BY rid DESC LIMIT 2000) r JOIN record_words w USING (project, rid)"
            )
            total = (
                "SELECT CASE WHEN %(top)s <= %(exact)s OR c.reltuples < 0 "
                "THEN (SELECT count(*) FROM records) ELSE c.reltuples::bigint END "
                "FROM pg_class c WHERE c.oid = 'records'::regclass"
            )
            row = self._read(
                f"SELECT ({total}), (SELECT avg(n) FROM ({sample}) s)",
                {"top": top, "exact": EXACT_TOTAL},
            )[0]
            with lock:
                avg[:] = [max(float(row[1] or 0), 1.0), float(top), float(row[0])]
        with lock:
            total_now = int(avg[2])
        if stale:
            counted = self._count_words(stale, total_now)
            with lock:
                cache.update((t, (c, top)) for t, c in counted.items())
        with lock:
            return {t: cache[t] for t in terms}, total_now, avg[0]

    def _count_words(self, words: list[str], total: int) -> dict[str, int]:
        """The records holding each word; past COMMON_DF an estimate may stand for the count."""
        if total <= COMMON_DF:
            # One index scan per word: a GIN match needs no recheck, so no tsvector is read.
            counts = ", ".join(
                f"(SELECT count(*) FROM record_words WHERE tsv @@ {TSQ.format(i=i)})"
                for i in range(len(words))
            )
            row = self._read(
                f"SELECT {counts}", {f"t{i}": t for i, t in enumerate(words)}, replan=True
            )[0]
            return {t: int(c) for t, c in zip(words, row, strict=True)}
        # One generic plan, kept by the connection (prepared on its first run), not one planned
        # for the words on every run: every count is planned over every partition of
        # `record_words`, and planning took longer than running (3 ms of 5.5 for four words at 1M
        # records, 10 partitions). The plan does not depend on the words: a count is a GIN bitmap
        # scan per partition whatever the word, and a common word is not counted.
        rows = self._read(
            self._counts_sql(total), _counts_params(words), planner=COUNTS_PLANNER, prepare=True
        )
        return _counted(words, rows)

    def counts_read(
        self, terms: Sequence[str]
    ) -> tuple[str, Any, Callable[[list[Any]], None]] | None:
        """The word counts that a search for `terms` would read next, as a statement to send in
        another read's round trip (`doc_with_version`, an assemble call's first, or the search's
        own: `_search`), with what keeps its rows and gives the counts: (sql, params, keep).
        The statement runs with `COUNTS_PLANNER` and is prepared (`_count_words`). None where
        the search would read nothing, or more than the counts (the store's size or the common
        lexemes are due), or the store is small."""
        lock, cache, avg = self._text_state()
        now = time.monotonic()
        with lock:
            top_at, top = self._top
            if now - top_at > TOP_TTL or _avg_stale(avg, top):
                return None
            stale = _stale(cache, terms, top)
            total = int(avg[2])
        at, key, common = self._mce
        if not stale or total <= COMMON_DF or key != _mce_key(top, total) or now - at > MCE_TTL:
            return None

        def keep(rows: list[Any]) -> None:
            counted = _counted(stale, rows)
            with lock:
                cache.update((t, (c, top)) for t, c in counted.items())

        return common, _counts_params(stale), keep

    def _counts_sql(self, total: int) -> str:
        """`_COUNTS` with the lexemes ANALYZE's statistics put in more than COMMON_SURE of `total`
        records, and each one's estimated count (`_COMMON_LEXEMES`), read once per MCE_TTL
        seconds or when the newest partition or `total` changes."""
        key = _mce_key(self._top[1], total)
        parts = list(key[0])
        now = time.monotonic()
        at, cached_key, common = self._mce
        if cached_key != key or now - at > MCE_TTL:
            rows = self._read(
                _COMMON_LEXEMES, {"parts": parts, "total": total, "common": COMMON_SURE}
            )
            common = _COUNTS.format(
                lex=_array([str(r[0]) for r in rows], "text"),
                est=_array([repr(float(r[1])) for r in rows], "float8"),
            )
            # As `_counted` reads the statement's estimate of a word whose lexeme is common.
            self._common = {str(r[0]): abs(int(float(r[1]))) for r in rows}
            self._mce = (now, key, common)
        return common

    def search_text(self, project: str, agent: str | None, text: str, limit: int) -> list[Hit]:
        terms = query_terms(text)
        if not terms or limit <= 0:
            return []
        return self._search(None, project, agent, limit, terms)[1]

    def search_ahead(
        self, project: str, agent: str | None, text: str, limit: int
    ) -> tuple[int, list[Hit]]:
        """`search_text` with the project's store version read before the search in its round
        trip: (version, hits), for a search started before the call has read the version
        (assembly/ahead.py). Each statement of the pipeline reads a snapshot of its own, the
        search's no older than the version's, and a version's records commit with its bump, so
        the hits hold every record of that version, as a search sent after the version's read.
        What the search needs first (the store's size) it reads before, as `search_text` does;
        the words' counts it sends in its round trip where it can (`_search`)."""
        terms = query_terms(text)
        if not terms or limit <= 0:
            return self.version(project), []
        return self._search(project, project, agent, limit, terms)

    def _search(
        self, versioned: str | None, project: str, agent: str | None, limit: int, terms: list[str]
    ) -> tuple[int, list[Hit]]:
        """(version, hits): the version of `versioned` read first in the search's round trip
        (0 without). The words' counts are read first (`_counts`), then the search; except
        where the counts are all the search would read first and every word not counted yet is
        a lexeme that ANALYZE's statistics call common (`_guessed`): the counts statement would
        give each its estimate, not a count, so the search is written with the estimates and
        sent at once, with a check that each such word is its own one lexeme (`to_tsvector`
        leaves it as it is), which makes the estimate its count. Where one is not, the counts
        are read and the search sent again."""
        counting = self.counts_read(terms)
        guessed = self._guessed(counting[1]["words"]) if counting is not None else None
        if counting is not None and guessed is not None:
            keep = counting[2]
            sql, params, planner = self._search_sql(
                project, agent, limit, self._known(terms, guessed)
            )
            version, same, rows = self._read_versioned(versioned, sql, params, planner, guessed)
            if same:
                keep([(c, None) for c in guessed.values()])  # as the counts' rows: estimates
                return _version(version), self._searched(sql, params, rows)
        sql, params, planner = self._search_sql(project, agent, limit, self._counts(terms))
        if versioned is None:
            rows = self._read(sql, params, planner=planner, replan=True)
            return 0, self._searched(sql, params, rows)
        version, _, rows = self._read_versioned(versioned, sql, params, planner)
        return _version(version), self._searched(sql, params, rows)

    def _guessed(self, words: Sequence[str]) -> dict[str, int] | None:
        """What the counts statement gives each of `words` whose one lexeme is the word itself,
        where ANALYZE's statistics (`_counts_sql`) hold each as a common lexeme: its estimate.
        None where one is not there (its count is counted)."""
        common = self._common
        if not all(w in common for w in words):
            return None
        return {w: common[w] for w in words}

    def _known(self, terms: Sequence[str], guessed: dict[str, int]) -> _Known:
        """What `_counts` gives for `terms` where the counts of the words not counted yet are
        `guessed`, with no read."""
        lock, cache, avg = self._text_state()
        with lock:
            counts = {t: (guessed[t], 0) if t in guessed else cache[t] for t in terms}
            return counts, int(avg[2]), avg[0]

    def _read_versioned(
        self,
        project: str | None,
        sql: str,
        params: Any,
        planner: str | None,
        guessed: Mapping[str, int] | None = None,
    ) -> tuple[list[Any], bool, list[Any]]:
        """The project's version (none where `project` is None), whether each word `guessed`
        is its own one lexeme (`_guessed`; True with none), then a read planned for its values
        (`replan`), in one round trip; `planner` is the read's alone (set after the others)."""

        def read(conn: Any) -> tuple[list[Any], bool, list[Any]]:
            with conn.pipeline():
                version = None if project is None else conn.execute(VERSION_SQL, {"p": project})
                same = None if not guessed else conn.execute(_OWN_LEXEMES, {"words": list(guessed)})
                if planner is not None:
                    set_planner(conn, planner)
                found = conn.execute(sql, params, prepare=False)
            versions = [] if version is None else list(version.fetchall())
            own = same is None or bool(same.fetchall()[0][0])
            return versions, own, list(found.fetchall())

        return cast(tuple[list[Any], bool, list[Any]], self._reading(read))

    def _search_sql(
        self, project: str, agent: str | None, limit: int, known: _Known
    ) -> tuple[str, dict[str, Any], str | None]:
        """The search's statement, parameters and planner setting, from what `_counts` gives."""
        counts, total, avg = known
        return search_sql(
            project, agent, limit, ({t: c[0] for t, c in counts.items()}, total, avg),
            self._top[1], self._cols, self._visible,
        )  # fmt: skip

    def _searched(self, sql: str, params: dict[str, Any], rows: list[Any]) -> list[Hit]:
        """The hits of a search's rows; fewer than a window above its floor, the search again
        without the floor."""
        if params["floor"] and (not rows or rows[0][-1] < params["window"]):
            rows = self._read(sql, {**params, "floor": 0}, replan=True)
        return [Hit(row_to_record(row[:-2]), float(row[-2])) for row in rows]


def _mce_key(top: int, total: int) -> tuple[tuple[str, ...], int]:
    """What the common lexemes baked into the counts' statement were read for: the partitions
    of `record_words` whose statistics they come from, and the store's size."""
    newest = top // WORDS_SPAN
    # Two more than MCE_PARTITIONS: the newest may be too new to have been analyzed yet.
    oldest = newest - MCE_PARTITIONS - 1
    return tuple(f"record_words_{k}" for k in range(newest, oldest - 1, -1) if k >= 0), total


# The word counts keep one generic plan (`_count_words`).
COUNTS_PLANNER = "plan_cache_mode = force_generic_plan"
# Whether each word is its own one lexeme: then the counts statement (`_COUNTS`) gives a word
# whose lexeme is common that lexeme's estimate (`PostgresText._guessed`). 0.1 ms for four words,
# where the counts statement took 0.35 ms before the search in its round trip.
_OWN_LEXEMES = (
    "SELECT coalesce(bool_and(tsvector_to_array(to_tsvector('english', w)) = ARRAY[w]), true) "
    "FROM unnest(%(words)s::text[]) w"
)


def _counts_params(words: list[str]) -> dict[str, Any]:
    return {"words": words, "cap": COMMON_DF + 1, "df": COMMON_DF}


def _counted(words: list[str], rows: Sequence[Any]) -> dict[str, int]:
    """Each word's count from the rows of `_COUNTS`: past COMMON_DF, an estimate (negative)."""
    return {
        t: int(full) if full is not None else abs(int(first))
        for t, (first, full) in zip(words, rows, strict=True)
    }


def _version(rows: list[Any]) -> int:
    return int(rows[0][0]) if rows else 0


def _array(values: list[str], kind: str) -> str:
    """`values` as an SQL array constant of `kind`, for a statement's text that psycopg will
    still read for its `%(name)s` placeholders (so `%` is doubled)."""
    items = ",".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values)
    literal = "'{" + items.replace("'", "''").replace("%", "%%") + "}'"
    return f"{literal}::{kind}[]"


# What `_counts` reads again: a word counted before the store grew by a fifth, the average
# length likewise (the counts and the search then read them; counts_read sends the first ahead).
def _stale(cache: dict[str, _Count], terms: Sequence[str], top: int) -> list[str]:
    return [t for t in terms if t not in cache or top > cache[t][1] * 1.2]


def _avg_stale(avg: list[float], top: int) -> bool:
    return avg[0] == 0.0 or top > avg[1] * 1.2
