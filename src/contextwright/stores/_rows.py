"""Row <-> Record conversion and FTS query building, shared by the SQL stores."""

from __future__ import annotations

import json
import re
import threading
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from itertools import islice
from typing import Any

from ..records import Record, changed_write, same_write

STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "s",
        "t",
        "don",
        "let",
        "lets",
        "ll",
        "ve",
        "re",
        "d",
        "m",
        "o",
        "y",
        "also",
        "get",
        "got",
        "would",
        "could",
        "should",
        "might",
        "must",
        "shall",
        "may",
        "please",
        "thanks",
        "thank",
        "ok",
        "okay",
        "yes",
        "yeah",
        "hi",
        "hey",
    ]
)

# A word as SQLite FTS5's unicode61 tokenizer sees one: a run of letters and digits of any script
# (Unicode categories L* and N*); the underscore, punctuation, emoji and combining marks separate
# words. "Zoë", "Москва" and "東京タワー" are words; "cache_ttl" is two.
_WORD_RE = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    """Every word worth matching in `text`, lowercased, in order, repeats kept: no stopwords, and
    no one-character ASCII words ("a", "x"), while a single character of another script (a CJK
    ideograph: "猫") is a word."""
    return [
        w
        for w in _WORD_RE.findall(text.lower())
        if (len(w) > 1 or not w.isascii()) and w not in STOPWORDS
    ]


def fold_latin(word: str) -> str:
    """`word` with the diacritics of Latin letters removed ("café" -> "cafe"), as unicode61
    (remove_diacritics) indexes it; other scripts keep theirs, as they do there."""
    if word.isascii():
        return word
    out: list[str] = []
    for ch in unicodedata.normalize("NFD", word):
        if unicodedata.combining(ch) and out and out[-1] < "\u0250":  # a mark on a Latin base
            continue
        out.append(ch)
    return unicodedata.normalize("NFC", "".join(out))


def query_terms(text: str, limit: int = 32) -> list[str]:
    """The distinct words of `words(text)`, first occurrence order, at most `limit`. They are
    not folded: SQLite's index folds them in the query, PostgreSQL's keeps accents."""
    seen: dict[str, None] = {}
    for word in words(text):
        seen.setdefault(word, None)
        if len(seen) >= limit:
            break
    return list(seen)


def fts_match(text: str) -> str | None:
    terms = query_terms(text)
    return " OR ".join(f'"{t}"' for t in terms) if terms else None


# What bounds a full-text ranking's cost on a large store, the same in both SQL stores
# (sqlite_text.py, postgres_text.py), so that they rank alike: words found in more records than
# COMMON_DF are left out of the BM25 query (the rarest word is always kept), and only the newest
# LARGE_WINDOW matches of the project (or 8 times the limit, if more) are ranked.
COMMON_DF = 2000
LARGE_WINDOW = 500


COLUMNS = (
    "id, project, milestone, session, author, kind, recipients, visibility, mentions, tags, refs, "
    "current_status, supersedes, reply_to, pinned, created_at, content, tokens, content_hash, meta"
)


def record_to_row(r: Record) -> tuple[Any, ...]:
    return (
        r.id,
        r.project,
        r.milestone,
        r.session,
        r.author,
        r.kind,
        json.dumps(list(r.to)),
        r.visibility,
        json.dumps(list(r.mentions)),
        json.dumps(list(r.tags)),
        json.dumps(list(r.refs)),
        r.status,
        r.supersedes,
        r.reply_to,
        int(r.pinned),
        r.created_at,
        r.content,
        r.tokens,
        r.content_hash,
        json.dumps(dict(r.meta)),
    )


def _names(value: Any) -> tuple[str, ...]:
    # Most lists are empty; skipping the JSON parser for them is a measurable share of a read.
    if value == "[]":
        return ()
    return tuple(json.loads(value) if isinstance(value, str) else value)


def row_to_record(row: Any) -> Record:
    meta = row[19]
    return Record(
        id=row[0],
        project=row[1],
        milestone=row[2],
        session=row[3],
        author=row[4],
        kind=row[5],
        to=_names(row[6]),
        visibility=row[7],
        mentions=_names(row[8]),
        tags=_names(row[9]),
        refs=_names(row[10]),
        status=row[11],
        supersedes=row[12],
        reply_to=row[13],
        pinned=bool(row[14]),
        created_at=float(row[15]),
        content=row[16],
        tokens=int(row[17]),
        content_hash=row[18],
        meta=({} if meta == "{}" else json.loads(meta)) if isinstance(meta, str) else (meta or {}),
    )


# Phase one of a cached read: the key columns of each row, in the read's order.
KEYS = "r.rid, r.id, r.current_status"
RecordKey = tuple[int, str, str | None]


class RecordCache:
    """Decoded records by row id, so that a read selects three short columns (`KEYS`) and decodes
    only the rows it has not seen before; each assemble call reads ~175 rows, and decoding them was
    most of the cost of a read.

    Correct across processes because a record never changes but for its status, and the status is
    always taken from the read itself (phase one), never from the cache: a status change made by
    any process is seen by the next read. Records are never deleted, so a row id names one record
    for the life of the file; the id is checked too. Bounded: past `size` records the oldest tenth
    is dropped (first in, first out)."""

    def __init__(self, size: int = 20_000) -> None:
        self.size = size
        self._by_rid: dict[int, Record] = {}
        self._lock = threading.Lock()

    def resolve(
        self, keys: Sequence[RecordKey], fetch: Callable[[list[int]], Iterable[Any]]
    ) -> list[Record]:
        """The records of `keys` in order; `fetch(rids)` gives the full rows (COLUMNS, then rid)
        of those not cached."""
        cache = self._by_rid
        out: list[Record | None] = []
        missing: list[int] = []
        for rid, rec_id, status in keys:
            r = cache.get(rid)
            if r is None or r.id != rec_id:
                missing.append(rid)
                out.append(None)
            elif r.status != status:
                r = cache[rid] = r.with_status(status)
                out.append(r)
            else:
                out.append(r)
        if not missing:
            return out  # type: ignore[return-value]
        fetched = {row[20]: row_to_record(row) for row in fetch(missing)}
        if self.size > 0:
            with self._lock:
                cache.update(fetched)
                if len(cache) > self.size:
                    for rid in list(islice(cache, len(cache) - self.size + self.size // 10)):
                        del cache[rid]
        done: list[Record] = []
        for (rid, _, status), r in zip(keys, out, strict=True):
            if r is None:
                r = fetched.get(rid)
                if r is None:  # not readable any more (cannot happen: records are never deleted)
                    continue
                if r.status != status:
                    r = r.with_status(status)
            done.append(r)
        return done

    def clear(self) -> None:
        with self._lock:
            self._by_rid.clear()

    def __len__(self) -> int:
        return len(self._by_rid)


def edges_sql(
    project: str, src: str | None, dst: str | None, kind: str | None, mark: str
) -> tuple[str, list[str]]:
    """The edges query of the SQL stores; `mark` is the driver's placeholder (? or %s)."""
    where, params = [f"project = {mark}"], [project]
    for col, value in (("src", src), ("dst", dst), ("kind", kind)):
        if value is not None:
            where.append(f"{col} = {mark}")
            params.append(value)
    sql = f"SELECT src, dst, kind FROM edges WHERE {' AND '.join(where)} ORDER BY src, kind, dst"
    return sql, params


def docs_sql(
    collection: str, project: str, key: str | None, limit: int, mark: str
) -> tuple[str, list[Any]]:
    """The `list_docs` query of the SQL stores, newest first; `mark` is the driver's placeholder."""
    where, params = [f"collection = {mark}", f"project = {mark}"], [collection, project]
    if key is not None:
        where.append(f"key = {mark}")
        params.append(key)
    sql = f"SELECT data FROM docs WHERE {' AND '.join(where)} ORDER BY at DESC LIMIT {mark}"
    return sql, [*params, limit]


# A project's distinct authors by a skip scan of the (project, author, created_at) index, which
# both SQL stores have: one seek per author instead of a pass over every record. `{p}` is the
# driver's placeholder for the project.
AUTHORS_SQL = (
    "WITH RECURSIVE a(author) AS ("
    "SELECT min(author) FROM records WHERE project = {p} "
    "UNION ALL SELECT (SELECT min(author) FROM records WHERE project = {p} AND author > a.author) "
    "FROM a WHERE a.author IS NOT NULL) "
    "SELECT author FROM a WHERE author IS NOT NULL"
)


RecordId = tuple[str, str]  # (project, id): a record's identity


def plan_batch(
    records: Sequence[Record], stored: dict[RecordId, Record]
) -> tuple[list[Record], list[Record]]:
    """What `add_many` answers, and the records it must insert, given the records of the batch's
    (project, id)s already `stored`. A repeat with the same write answers the first (stored or
    earlier in the batch); with another write the whole batch is refused (ValidationError)."""
    out: list[Record] = []
    fresh: dict[RecordId, Record] = {}
    for r in records:
        key = (r.project, r.id)
        before = stored.get(key) or fresh.get(key)
        if before is None:
            fresh[key] = r
            out.append(r)
        elif same_write(before, r):
            out.append(before)
        else:
            raise changed_write(r)
    return out, list(fresh.values())


def by_project(pairs: Iterable[RecordId]) -> dict[str, list[str]]:
    """(project, id) pairs as each project's ids, in order, once each."""
    out: dict[str, dict[str, None]] = {}
    for project, rid in pairs:
        out.setdefault(project, {})[rid] = None
    return {p: list(ids) for p, ids in out.items()}
