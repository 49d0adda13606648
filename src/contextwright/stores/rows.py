"""Row <-> Record conversion and the per-connection record cache, shared by the SQL stores."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Sequence
from itertools import islice
from typing import Any

from ..records import Record, record_of

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
    meta = row[19]
    # Record's fields in FIELDS order (records.record_of) from COLUMNS' order.
    return record_of((
        row[0], row[1], row[4], row[5], row[16], float(row[15]), int(row[17]), row[18],
        row[2], row[3], _names(row[6]), row[7], _names(row[8]), _names(row[9]), _names(row[10]),
        row[11], row[12], row[13], bool(row[14]),
        ({} if meta == "{}" else json.loads(meta)) if isinstance(meta, str) else (meta or {}),
    ))  # fmt: skip


# Phase one of a cached read: the key columns of each row, in the read's order (reads select
# them only, then decode the rows they have not seen: phase two).
KEYS = "r.rid, r.id, r.current_status"
KEYED = f"SELECT {KEYS} FROM records r"
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
