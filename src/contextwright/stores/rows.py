"""Row <-> Record conversion and the per-connection record cache, shared by the SQL stores."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Sequence
from itertools import islice
from typing import Any

from ..records import FIELDS, Record, record_of

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
        _dump_names(r.to),
        r.visibility,
        _dump_names(r.mentions),
        _dump_names(r.tags),
        _dump_names(r.refs),
        r.status,
        r.supersedes,
        r.reply_to,
        int(r.pinned),
        r.created_at,
        r.content,
        r.tokens,
        r.content_hash,
        json.dumps(dict(r.meta)) if r.meta else "{}",
    )


def _dump_names(names: tuple[str, ...]) -> str:
    # Most lists are empty: json.dumps' own cost was a tenth of a batched add's store time.
    return json.dumps(list(names)) if names else "[]"


def _names(value: Any) -> tuple[str, ...]:
    # Most lists are empty; skipping the JSON parser for them is a measurable share of a read.
    if value == "[]":
        return ()
    return tuple(json.loads(value) if isinstance(value, str) else value)


def row_to_record(row: Any) -> Record:
    """The Record of a row of COLUMNS."""
    return record_of(row_values(row))


_STATUS = FIELDS.index("status")
_META = FIELDS.index("meta")
assert len(FIELDS) - 1 == _META  # the cache keeps the meta last, as its items (RecordCache)
_set_meta = Record.__dict__["meta"].__set__


def row_values(row: Any) -> tuple[Any, ...]:
    """A row of COLUMNS as Record's fields in FIELDS order (records.record_of)."""
    meta = row[19]
    return (
        row[0], row[1], row[4], row[5], row[16], float(row[15]), int(row[17]), row[18],
        row[2], row[3], _names(row[6]), row[7], _names(row[8]), _names(row[9]), _names(row[10]),
        row[11], row[12], row[13], bool(row[14]),
        ({} if meta == "{}" else json.loads(meta)) if isinstance(meta, str) else (meta or {}),
    )  # fmt: skip


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
    is dropped (first in, first out).

    It keeps each record's field values (`row_values`), not the Record, and a read makes its
    Records from them (`record_of`, ~2 us). A tuple of strings, numbers and tuples of strings is
    an object the cyclic GC stops tracking the first time it looks at it; a Record it tracks for
    good. A cache of 20,000 Records made them a third to half of a process's tracked objects,
    and a full collection walks every one (after 200 cold calls at 100k records through three
    engines: 94k tracked objects; with values, 45k). The Records of the latest reads are kept
    as Records too, at most `hot` of them (first in, first out), so that a read makes Records
    only for the rows that left that window: most reads in a session touch the same recent
    records, and the long tail of older ones costs the GC nothing."""

    def __init__(self, size: int = 20_000, hot: int = 4_096) -> None:
        self.size = size
        self.hot = hot
        self._by_rid: dict[int, tuple[Any, ...]] = {}
        self._hot: dict[int, Record] = {}
        self._lock = threading.Lock()

    def resolve(
        self, keys: Sequence[RecordKey], fetch: Callable[[list[int]], Iterable[Any]]
    ) -> list[Record]:
        """The records of `keys` in order; `fetch(rids)` gives the full rows (COLUMNS, then rid)
        of those not cached."""
        cache, hot = self._by_rid, self._hot
        out: list[Record | None] = []
        missing: list[int] = []
        at = _STATUS
        made: list[tuple[int, Record]] = []
        for rid, rec_id, status in keys:
            r = hot.get(rid)
            if r is not None and r.id == rec_id and r.status == status:
                out.append(r)
                continue
            v = cache.get(rid)
            if v is None or v[0] != rec_id:
                missing.append(rid)
                out.append(None)
                continue
            if v[at] != status:
                v = cache[rid] = (*v[:at], status, *v[at + 1 :])
            r = _record(v)
            made.append((rid, r))
            out.append(r)
        if not missing:
            if made:
                self._keep_hot(made)
            return out  # type: ignore[return-value]
        values = {row[20]: row_values(row) for row in fetch(missing)}
        fetched = {rid: record_of(v) for rid, v in values.items()}
        if self.size > 0:
            with self._lock:
                cache.update(
                    {rid: (*v[:_META], tuple(v[_META].items())) for rid, v in values.items()}
                )
                if len(cache) > self.size:
                    for rid in list(islice(cache, len(cache) - self.size + self.size // 10)):
                        del cache[rid]
            made.extend(fetched.items())
        if made:
            self._keep_hot(made)
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

    def _keep_hot(self, made: list[tuple[int, Record]]) -> None:
        if self.hot > 0:
            hot = self._hot
            with self._lock:
                hot.update(made)
                if len(hot) > self.hot:
                    for rid in list(islice(hot, len(hot) - self.hot + self.hot // 4)):
                        del hot[rid]

    def clear(self) -> None:
        with self._lock:
            self._by_rid.clear()
            self._hot.clear()

    def __len__(self) -> int:
        return len(self._by_rid)


def _record(v: tuple[Any, ...]) -> Record:
    """The Record of a RecordCache entry: its values, the meta's items last. The meta is kept as
    items because a tuple that holds a dict stays tracked (the GC cannot tell the dict holds only
    strings); each Record gets a meta of its own."""
    r = record_of(v)
    _set_meta(r, dict(v[_META]) if v[_META] else {})
    return r
