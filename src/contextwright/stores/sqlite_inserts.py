"""How SQLiteStore writes a batch of records (`SQLiteInserts._add_batch`, inside the store's write
transaction): the new rows in as few INSERTs as the library allows, each record's full-text,
addressing and tag rows written by m007's triggers (or statement by statement on a file without
them), superseded records' status changes, and the projects' version steps."""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence

from ..ports import Written
from ..records import Record
from .batches import by_project, plan_batch, stored_of
from .rows import COLUMNS, KEYED, RecordKey, record_to_row
from .sqlite_jobs import steps

# Rows per INSERT at most: a batch of 1,000 (bench/assemble.py's fill) is one statement, as many
# as the library's variable limit allows (WIDTH a row; 999 variables before SQLite 3.32). FTS5
# writes its pending rows out at the start of every statement that writes to it (its savepoint),
# so the trigger's full-text rows cost a new small segment per INSERT: with 49 rows an INSERT,
# ingest made 0.6-0.7x the records per CPU second of one INSERT a batch.
ROWS = 1000
WIDTH = len(COLUMNS.split(","))  # a record's columns: its variables in an INSERT
_ROW = "(" + ", ".join("?" * WIDTH) + ")"


def rows_per_insert(conn: sqlite3.Connection) -> int:
    """Records per INSERT on `conn`: ROWS, or fewer where the library allows fewer variables."""
    return max(1, min(ROWS, conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // WIDTH))


@functools.lru_cache(maxsize=64)
def _insert_sql(n: int) -> str:
    # A row whose (project, id) is stored already is skipped (SQLiteStore._insert_new).
    values = ", ".join([_ROW] * n)
    return f"INSERT INTO records ({COLUMNS}) VALUES {values} ON CONFLICT (project, id) DO NOTHING"


def _insert_by_hand(conn: sqlite3.Connection, fresh: Sequence[Record]) -> None:
    """The rows of `fresh` and what each needs beside it, written statement by statement: for a
    file opened without m007_written_by_trigger (a store given its own `migrations`)."""
    # One statement per table for the whole batch: a statement per record cost more in
    # the driver's Python than SQLite's own work. The row ids are given, as SQLite would
    # pick them (max + 1 onwards; BEGIN IMMEDIATE keeps every other writer out), so that
    # the full-text, addressing and tag rows can name them without a read back.
    base = conn.execute("SELECT coalesce(max(rid), 0) FROM records").fetchone()[0]
    rids = range(base + 1, base + 1 + len(fresh))
    pairs = list(zip(rids, fresh, strict=True))
    many = conn.executemany
    many(f"INSERT INTO records (rid, {COLUMNS}) VALUES (?{', ?' * WIDTH})",
         [(rid, *record_to_row(r)) for rid, r in pairs])  # fmt: skip
    many("INSERT INTO records_fts(rowid, content) VALUES (?, ?)",
         [(rid, r.content) for rid, r in pairs])  # fmt: skip
    addressed = [(n, how, rid, r.created_at) for rid, r in pairs
                 for how, names in (("to", r.to), ("mention", r.mentions)) for n in names]  # fmt: skip
    # Only statements with rows: each one is a turn at the GIL inside the write lock.
    if addressed:
        many("INSERT OR IGNORE INTO addressing VALUES (?, ?, ?)",
             [(n, how, rid) for n, how, rid, _ in addressed])  # fmt: skip
        many("INSERT OR IGNORE INTO addressed_time VALUES (?, ?, ?)",
             [(n, at, rid) for n, _, rid, at in addressed])  # fmt: skip
    tagged = [(t, rid) for rid, r in pairs for t in r.tags]
    if tagged:
        many("INSERT OR IGNORE INTO record_tags VALUES (?, ?)", tagged)


class SQLiteInserts:
    _rows: int  # records per INSERT
    _triggered: bool  # m007's triggers write the rows beside each record
    _bump: Callable[[sqlite3.Connection, Iterable[str]], dict[str, int]]
    _status: Callable[..., None]
    _get_many: Callable[[sqlite3.Connection, str, Sequence[str]], list[Record]]
    _resolve: Callable[[sqlite3.Connection, Sequence[RecordKey]], list[Record]]

    def _add_batch(
        self, conn: sqlite3.Connection, records: Sequence[Record]
    ) -> tuple[list[Record], tuple[Written, ...]]:
        if self._triggered:
            out, fresh = self._insert_new(conn, records)
        else:
            out, fresh = self._plan(conn, records)  # may refuse: the transaction rolls back
            if fresh:
                _insert_by_hand(conn, fresh)
        if not fresh:
            return out, ()
        # After the whole batch, so that a record may supersede one later in the same batch.
        for r in fresh:
            if r.supersedes:
                self._status(
                    conn, r.project, r.supersedes, "superseded", r.author, r.created_at,
                    f"by {r.id}",
                )  # fmt: skip
                conn.execute(
                    "INSERT OR IGNORE INTO edges VALUES (?, ?, ?, 'supersedes')",
                    (r.project, r.id, r.supersedes),
                )
        # The batch's one bump is the only step of its projects' versions (a status change
        # bumps nothing here), so each version before it is the one after, less one.
        after = self._bump(conn, {r.project for r in fresh})
        return out, steps({p: v - 1 for p, v in after.items()}, after, fresh)

    def _plan(
        self, conn: sqlite3.Connection, records: Sequence[Record]
    ) -> tuple[list[Record], list[Record]]:
        """plan_batch over the records of the batch's ids stored already."""
        keys = ((r.project, r.id) for r in records)
        return plan_batch(records, stored_of(lambda p, ids: self._get_many(conn, p, ids), keys))

    def _insert_new(
        self, conn: sqlite3.Connection, records: Sequence[Record]
    ) -> tuple[list[Record], list[Record]]:
        """What `_plan` answers, the records it finds new stored: each INSERT skips the rows
        whose (project, id) is stored already (an earlier row of the batch included), and only
        when one did are the ids read, to answer the stored record or refuse a changed write.
        Reading them first was a statement, a turn at the GIL, in every add."""
        inserted: list[range] = []  # the row ids each INSERT gave, in a row
        for i in range(0, len(records), self._rows):
            chunk = records[i : i + self._rows]
            cur = conn.execute(
                _insert_sql(len(chunk)), [v for r in chunk for v in record_to_row(r)]
            )
            last = cur.lastrowid or 0  # the row id of this INSERT's last row, when it wrote one
            inserted.append(range(last - cur.rowcount + 1, last + 1))
        if sum(map(len, inserted)) == len(records):
            return list(records), list(records)
        ours: set[int] = {rid for rids in inserted for rid in rids}
        # What stood before the batch, as plan_batch is given it: the rows the batch did not write.
        stored: list[Record] = []
        for project, ids in by_project((r.project, r.id) for r in records).items():
            keys = conn.execute(
                f"{KEYED} WHERE r.project = ? AND r.id IN (SELECT value FROM json_each(?))",
                (project, json.dumps(ids)),
            ).fetchall()
            stored.extend(self._resolve(conn, [k for k in keys if k[0] not in ours]))
        return plan_batch(records, {(r.project, r.id): r for r in stored})
