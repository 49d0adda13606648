"""Documents of the SQLite store (`docs`), and the file of their own that traces are kept in.

Every assemble call writes a trace (~100 KB at 100k records), from the engine's trace writer,
on a thread and a connection of its own. In WAL mode a connection drops its whole page cache
when it starts a read after another connection has written to the file, so with traces in the
store's file every call began by reading again, from the operating system, each page of the
records, indexes and full-text index that it touched: 4-6% of a cold call at 100k records
(docs/benchmarks.md). Traces therefore live in a file beside the store (`traces_path`: `x.db`
-> `x.traces.db`), with the same `docs` table, and a trace written there leaves the readers of
records their pages. Traces that an older version kept in the store's file are moved there when
the store opens (`TraceFile.adopt`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from typing import Any

from .sql import docs_sql
from .sqlite_writers import lock_path

try:  # the `server` extra's encoder: an 80 KB trace in 0.06 ms instead of 2.2
    import orjson as _orjson
except ImportError:  # pragma: no cover - the extra installs it
    _orjson = None  # type: ignore[assignment]

PASSTHROUGH = (
    0 if _orjson is None else _orjson.OPT_PASSTHROUGH_DATACLASS | _orjson.OPT_PASSTHROUGH_DATETIME
)
# The collection kept in the file of its own.
TRACES = "traces"

DOCS_TABLE = """
CREATE TABLE IF NOT EXISTS docs (
    collection TEXT NOT NULL, id TEXT NOT NULL, project TEXT NOT NULL, key TEXT,
    at REAL NOT NULL, data TEXT NOT NULL, PRIMARY KEY (collection, id)
);
CREATE INDEX IF NOT EXISTS docs_by_key ON docs(collection, project, key, at);
"""

# A document belongs to the project that wrote it first: another project's put with the same id
# changes nothing (and its get finds nothing).
PUT = (
    "INSERT INTO docs VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(collection, id) DO UPDATE "
    "SET key = excluded.key, at = excluded.at, data = excluded.data "
    "WHERE docs.project = excluded.project"
)


def connect(path: str, mmap_bytes: int = 0, checkpoint_pages: int = 0) -> sqlite3.Connection:
    """A connection as every connection of the SQLite store is set up (autocommit: the store
    opens its own transactions), reading the first `mmap_bytes` of the file through mmap, and
    checkpointing in the commit that finds `checkpoint_pages` of log (0: SQLite's default)."""
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    if mmap_bytes:
        conn.execute(f"PRAGMA mmap_size={int(mmap_bytes)}")
    if checkpoint_pages:
        conn.execute(f"PRAGMA wal_autocheckpoint={int(checkpoint_pages)}")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA busy_timeout=10000")
    conn.execute("PRAGMA cache_size=-16384")  # 16 MB: reads and ingest ran as fast as with 64
    conn.execute("PRAGMA temp_store=MEMORY")
    return conn


def traces_path(path: str) -> str:
    """Where the store at `path` keeps its traces: `team.db` -> `team.traces.db` (an in-memory
    database, `:memory:`, keeps them in memory too)."""
    if path == ":memory:":
        return path
    root, ext = os.path.splitext(path)
    return f"{root}.traces{ext}"


def doc_row(
    collection: str, doc_id: str, project: str, data: dict[str, Any], at: float, key: str | None
) -> tuple[Any, ...]:
    payload = dumps(data) if collection == TRACES else standard(data)
    return (collection, doc_id, project, key, at, payload)


def standard(data: dict[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"), default=str)


def dumps(data: dict[str, Any]) -> str:
    """A trace's JSON text. Every assemble call's trace is encoded here, on the trace writer's
    thread but holding the GIL all the while: 2.2 ms a trace with the standard encoder, which
    every add of the process waited behind when it came in meanwhile; orjson (the `server`
    extra) takes 0.06 ms. The same values read back either way: what orjson would write
    differently goes to `str` as the standard encoder's `default` does (dataclasses, dates), and
    what it cannot encode (integers past 64 bits, keys that are not strings, lone surrogates) to
    the standard encoder. A NaN would be `null`: traces hold the engine's own numbers, never a
    NaN (records refuse one in meta), which other documents, written far less often, might hold
    and keep the standard encoder for."""
    if _orjson is not None:
        try:
            return _orjson.dumps(data, default=str, option=PASSTHROUGH).decode()
        except (TypeError, ValueError):
            pass
    return standard(data)


def get_doc(
    conn: sqlite3.Connection, collection: str, project: str, doc_id: str
) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT data FROM docs WHERE collection = ? AND id = ? AND project = ?",
        (collection, doc_id, project),
    ).fetchone()
    return None if row is None else dict(json.loads(row[0]))


def list_docs(
    conn: sqlite3.Connection, collection: str, project: str, key: str | None, limit: int
) -> list[dict[str, Any]]:
    sql, params = docs_sql(collection, project, key, limit, "?")
    return [dict(json.loads(r[0])) for r in conn.execute(sql, params)]


class Connections:
    """One connection per thread to one SQLite file (`connect`), opened on first use, and the
    lock that writes and `close` share, so that no connection is closed in the middle of a
    write."""

    def __init__(self, path: str, mmap_bytes: int = 0, checkpoint_pages: int = 0) -> None:
        self.path = path
        self.mmap_bytes = mmap_bytes
        self.checkpoint_pages = checkpoint_pages
        self.lock = threading.RLock()
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []

    def get(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._open()
            with self.lock:
                self._all.append(conn)
        return conn

    def _open(self) -> sqlite3.Connection:
        return connect(self.path, self.mmap_bytes, self.checkpoint_pages)

    def close(self) -> None:
        with self.lock:
            for conn in self._all:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            self._all.clear()
        self._local = threading.local()


class TraceFile(Connections):
    """The traces of one SQLite store, in `traces_path(store)`, made with the first connection.
    Each write is one statement, committed on its own."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self._ready = False

    def _open(self) -> sqlite3.Connection:
        conn = super()._open()
        with self.lock:
            if not self._ready:  # the first connection of this process makes the table
                conn.execute("PRAGMA journal_mode=WAL")
                conn.executescript(DOCS_TABLE)
                self._ready = True
        return conn

    def put(self, row: tuple[Any, ...]) -> None:
        conn = self.get()
        with self.lock:  # never while `close` closes the connections
            conn.execute(PUT, row)

    def put_many(self, rows: list[tuple[Any, ...]]) -> None:
        """`put` of each, in one transaction: the trace writer's batch (~15% less CPU a trace
        than a commit each, for batches of 4 traces of ~70 kB)."""
        if len(rows) == 1:
            self.put(rows[0])
            return
        conn = self.get()
        with self.lock:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(PUT, rows)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def adopt(self, store: sqlite3.Connection) -> int:
        """Move the traces that the store's own file holds (kept there before 22 Nov 2026) into
        this file, through `store` (a connection to the store's file that holds its write lock);
        the number moved. Inside SQLite, so that no trace passes through Python. Copied, then
        deleted from the store in one transaction: a move cut short leaves every trace in one
        file or both, and the next open finishes it (a trace already here is kept)."""
        if not store.execute(
            "SELECT 1 FROM docs WHERE collection = ? LIMIT 1", (TRACES,)
        ).fetchone():
            return 0
        self.get()  # makes the table
        store.execute("ATTACH DATABASE ? AS traces_file", (self.path,))
        try:
            store.execute("BEGIN IMMEDIATE")
            try:
                moved = store.execute(
                    "INSERT OR IGNORE INTO traces_file.docs SELECT * FROM main.docs "
                    "WHERE collection = ?",
                    (TRACES,),
                ).rowcount
                store.execute("DELETE FROM main.docs WHERE collection = ?", (TRACES,))
                store.execute("COMMIT")
            except BaseException:
                store.execute("ROLLBACK")
                raise
        finally:
            store.execute("DETACH DATABASE traces_file")
        return int(moved)


def store_files(path: str) -> list[str]:
    """Every file of the SQLite store at `path`: the store, its traces file (`traces_path`), the
    write-ahead log and shared-memory index of each, and the file its writers lock
    (sqlite_writers.lock_path). To copy a store, or remove one, take them all (with no process
    writing to it)."""
    files = [f + suffix for f in (path, traces_path(path)) for suffix in ("", "-wal", "-shm")]
    return [*files, lock_path(path)]
