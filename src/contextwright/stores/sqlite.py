"""The default store: one SQLite file, WAL, FTS5 (BM25) and named migrations recorded in a table.

Each thread gets its own connection (sources run on a thread pool); writes are serialized by one
lock (and, between the processes of one file, a lock file: sqlite_writers.py) and run in a single
transaction, so a rejected batch leaves the file exactly as it was. A record's full-text,
addressing and tag rows are written by triggers within its INSERT (sqlite_schema.py, m007).
`current_status` is the only column that changes after insert: it is derived from the append-only
`status_facts` table, kept beside the record so that "open questions" is an indexed read.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..errors import StoreError, ValidationError
from ..ports import Query, Written
from ..records import Record
from .fulltext import COMMON_DF, LARGE_WINDOW
from .groups import Groups, Job
from .rows import COLUMNS, KEYED, KEYS, RecordCache, RecordKey
from .sql import AUTHORS_SQL, refuse_newer
from .sqlite_checkpoint import NET_PAGES, Checkpointer
from .sqlite_docs import (
    PUT,
    TRACES,
    Connections,
    TraceFile,
    doc_row,
    get_doc,
    list_docs,
    store_files,
    traces_path,
)
from .sqlite_facts import SQLiteFacts
from .sqlite_inserts import SQLiteInserts, rows_per_insert
from .sqlite_jobs import answer, write_group
from .sqlite_schema import MIGRATIONS, Migration
from .sqlite_text import VISIBLE, SQLiteText
from .sqlite_vectors import SQLiteVectors
from .sqlite_vocab import Vocabulary
from .sqlite_writers import FileLock

__all__ = [
    "COMMON_DF",
    "LARGE_WINDOW",
    "MIGRATIONS",
    "VISIBLE",
    "SQLiteStore",
    "store_files",
    "traces_path",
]

SELECT = "SELECT " + ", ".join(f"r.{c.strip()}" for c in COLUMNS.split(",")) + " FROM records r"
BY_RID = (
    SELECT.replace(" FROM", ", r.rid FROM") + " WHERE r.rid IN (SELECT value FROM json_each(?))"
)


def _union_kinds(join: str, where: str, n: int, order: str) -> str:
    """`kind IN (...) ORDER BY created_at LIMIT n` as one ordered index range per kind, merged.
    SQLite would otherwise walk the whole project in time order looking for a rare kind."""
    one = (
        f"SELECT * FROM (SELECT {KEYS}, r.created_at AS at_ FROM records r"
        + f"{join} WHERE {where} AND r.kind = :k{{i}} "
        f"ORDER BY r.created_at {order}, r.rid {order} LIMIT :limit)"
    )
    parts = " UNION ALL ".join(one.format(i=i) for i in range(n))
    return (
        f"SELECT rid, id, current_status FROM ({parts}) "
        f"ORDER BY at_ {order}, rid {order} LIMIT :limit"
    )


class SQLiteStore(SQLiteInserts, SQLiteText, SQLiteVectors, SQLiteFacts):
    def __init__(
        self,
        path: str,
        *,
        migrations: Sequence[Migration] = MIGRATIONS,
        record_cache: int = 20_000,
        mmap_mb: int = 1024,
    ) -> None:
        if not isinstance(mmap_mb, int) or isinstance(mmap_mb, bool) or not 0 <= mmap_mb <= 65536:
            raise ValidationError(
                "mmap_mb", mmap_mb, "give megabytes from 0 to 65536 (0: no memory-mapped reads)"
            )
        self.path = path
        self.records = RecordCache(record_cache)  # decoded records by row id (see rows.py)
        self.url = f"sqlite:///{path}"
        # One connection per thread, reading the first `mmap_mb` of the file through mmap
        # (docs/stores.md), checkpointing in a commit only past NET_PAGES of log (the
        # Checkpointer copies it beside the writers).
        self._conns = Connections(path, mmap_mb << 20, NET_PAGES)
        self._write_lock = self._conns.lock  # writes and `close` take it
        # Then, around each transaction, the other processes' writers (sqlite_writers.py).
        self._writers = FileLock(path)
        self._checkpoints = Checkpointer(path)  # the log copied into the file beside the writers
        self._groups = Groups()  # the batches waiting to be written (add_many)
        self._df: dict[tuple[str, int | None], tuple[int, int]] = {}  # see _word_count
        self._vocabulary = Vocabulary(path)  # the index's word counts, read at once
        # Writes made in this process, by which thread the last one, and how many there had
        # been at the last full-text ranking (`warm_here`).
        self._writes, self._last_writer, self._ranked_at = 0, 0, 0
        self._traces = TraceFile(traces_path(path))  # traces in a file of their own (sqlite_docs)
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise StoreError(f"cannot open {self.url}: directory {directory!r} does not exist")
        try:
            conn = self._conn()
            conn.execute("PRAGMA journal_mode=WAL")
            self._migrate(conn, migrations)
            self._rows = rows_per_insert(conn)
            # m007's trigger writes each record's full-text, addressing and tag rows.
            self._triggered = bool(
                conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = 'records_written'"
                ).fetchone()
            )
            with self._write_lock:
                self._traces.adopt(conn)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {self.url}: {exc}") from exc

    # -- connections and migrations -------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        return self._conns.get()

    def _migrate(self, conn: sqlite3.Connection, migrations: Sequence[Migration]) -> None:
        # Not under the lock file: a path that is no database makes none beside it.
        with self._write_lock:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
            )
            done = {row[0] for row in conn.execute("SELECT name FROM migrations")}
            refuse_newer(self.url, done, (name for name, _ in (*MIGRATIONS, *migrations)))
            for name, script in migrations:
                if name in done:
                    continue
                try:
                    conn.executescript(
                        f"BEGIN IMMEDIATE;\n{script}\n"
                        f"INSERT INTO migrations VALUES ('{name}', datetime('now'));\nCOMMIT;"
                    )
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise

    def warm_here(self) -> bool:
        """Would the full-text ranking run faster on the calling thread than on another? Yes
        when the last write made in this process came through this thread's connection and no
        ranking has run since: a connection drops its page cache when it next reads after
        another one wrote (sqlite_docs.py), so after an agent's own write (its reply, then its
        next call) this thread's cache is the only one still warm (FullTextSource.prepare)."""
        return self._last_writer == threading.get_ident() and self._writes != self._ranked_at

    def applied_migrations(self) -> list[str]:
        return [r[0] for r in self._conn().execute("SELECT name FROM migrations ORDER BY rowid")]

    def _write(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        conn = self._conn()
        with self._write_lock, self._writers:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(f"cannot write {self.url}: {exc}") from exc
            try:
                result = fn(conn)
                conn.execute("COMMIT")
                self._checkpoints.written()
                self._writes += 1
                self._last_writer = threading.get_ident()
                return result
            except sqlite3.Error as exc:
                conn.execute("ROLLBACK")
                raise StoreError(f"cannot write {self.url}: {exc}") from exc
            except UnicodeEncodeError as exc:
                # A lone surrogate the driver cannot bind: the caller's text, not the store's
                # failure. records.check_text refuses it before; this is the net under it.
                conn.execute("ROLLBACK")
                raise ValidationError(
                    "input",
                    "<text>",
                    "send valid UTF-8 text (no lone surrogates)",
                    problem="cannot be stored",
                ) from exc
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    @staticmethod
    def _bump(conn: sqlite3.Connection, projects: Iterable[str]) -> dict[str, int]:
        """Raise each project's version by one; the versions it raised them to."""
        bump = (
            "INSERT INTO project_versions VALUES (?, 1) "
            "ON CONFLICT(project) DO UPDATE SET version = version + 1 RETURNING version"
        )
        return {p: conn.execute(bump, (p,)).fetchone()[0] for p in sorted(set(projects))}

    # -- records --------------------------------------------------------------------------------

    def add_many(self, records: Sequence[Record]) -> list[Record]:
        """Group commit (groups.Groups): the batches other threads queue while one writes are
        stored by the next writer in one transaction, each answered alone (sqlite_jobs). Under
        load the lock's holder competes for the GIL with every assembling thread: with 8
        assemblers beside 8 writers in one process, add p99 was 415 ms without (contention.py)."""
        return self.add_many_written(records)[0]

    def add_many_written(
        self, records: Sequence[Record]
    ) -> tuple[list[Record], tuple[Written, ...]]:
        """`add_many`, and its write's version steps (ports.ReportsWrites; none: none new)."""
        if not records:
            return [], ()
        job = Job(records)
        self._groups.write(job, self._write_lock, self._store_jobs)
        return answer(job, self.url), job.written

    def _store_jobs(self, jobs: list[Job]) -> None:
        if len(jobs) == 1:  # alone: exactly the one transaction of before
            jobs[0].out, jobs[0].written = self._write(
                lambda conn: self._add_batch(conn, jobs[0].records)
            )
        else:
            self._write(lambda conn: write_group(conn, jobs, self._add_batch))

    def _resolve(self, conn: sqlite3.Connection, keys: Sequence[RecordKey]) -> list[Record]:
        """The records of rows read by their key columns (KEYS), in order, through the cache."""
        return self.records.resolve(
            keys, lambda rids: conn.execute(BY_RID, (json.dumps(rids),)).fetchall()
        )

    def _get_many(self, conn: sqlite3.Connection, project: str, ids: Sequence[str]) -> list[Record]:
        out: list[Record] = []
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            marks = ", ".join("?" * len(chunk))
            keys = conn.execute(
                f"{KEYED} WHERE r.project = ? AND r.id IN ({marks})", [project, *chunk]
            ).fetchall()
            out.extend(self._resolve(conn, keys))
        order = {rid: n for n, rid in enumerate(ids)}
        out.sort(key=lambda r: order.get(r.id, 0))
        return out

    def get_many(self, project: str, ids: Sequence[str]) -> list[Record]:
        return self._get_many(self._conn(), project, list(ids))

    def query(self, q: Query) -> list[Record]:
        where = ["r.project = :project"]
        params: dict[str, Any] = {"project": q.project, "agent": q.agent, "limit": q.limit}
        join = ""
        if q.agent is not None:
            where.append(VISIBLE)
        # Several kinds and nothing narrower: one index range per kind, merged (see _union_kinds).
        # A status filter is no narrower: "open tasks and questions" walked the whole project.
        kinds = None if q.kinds is None else tuple(dict.fromkeys(q.kinds))  # each kind once
        per_kind = (
            kinds is not None
            and len(kinds) > 1
            and all(
                getattr(q, f) is None
                for f in ("session", "author", "addressed_to", "tag", "pinned")
            )
        )
        if kinds is not None:
            params.update({f"k{i}": k for i, k in enumerate(kinds)})
            if not per_kind:
                marks = ", ".join(f":k{i}" for i in range(len(kinds)))
                where.append(f"r.kind IN ({marks})")
        if q.statuses is not None:
            marks = ", ".join(f":s{i}" for i in range(len(q.statuses)))
            where.append(f"r.current_status IN ({marks})")
            params.update({f"s{i}": s for i, s in enumerate(q.statuses)})
        for name in ("session", "author", "milestone"):
            value = getattr(q, name)
            if value is not None:
                where.append(f"r.{name} = :{name}")
                params[name] = value
        if q.pinned is not None:
            # A literal, not a parameter, so that the partial index on pinned rows can be used.
            where.append(f"r.pinned = {int(q.pinned)}")
        if q.since is not None:
            where.append("r.created_at >= :since")
            params["since"] = q.since
        if q.before is not None:
            where.append("r.created_at < :before")
            params["before"] = q.before
        by = "r"  # whose (created_at, rid) order the rows; the same values either way
        if q.addressed_to is not None:
            params["addr"] = q.addressed_to
            join += " JOIN addressed_time ad ON ad.rid = r.rid AND ad.name = :addr"
            by = "ad"
        if q.tag is not None:
            join += " JOIN record_tags tg ON tg.rid = r.rid AND tg.tag = :tag"
            params["tag"] = q.tag
        order = "DESC" if q.newest_first else "ASC"
        if per_kind and kinds is not None:
            sql = _union_kinds(join, " AND ".join(where), len(kinds), order)
        else:
            time_col = "ad.at" if by == "ad" else "r.created_at"
            sql = f"{KEYED}{join} WHERE {' AND '.join(where)} ORDER BY {time_col} {order}, {by}.rid {order} LIMIT :limit"
        conn = self._conn()
        return self._resolve(conn, conn.execute(sql, params).fetchall())

    def neighbours(
        self, project: str, agent: str, anchors: Sequence[tuple[str, float]]
    ) -> list[tuple[list[Record], list[Record]]]:
        """For each (session, time): the newest record of that session said before it, and the
        two oldest said at or after it, that `agent` may see. One statement for all anchors
        (locality.py asks for ten), instead of two round trips each."""
        if len(anchors) > 100:  # SQLite allows 500 terms in one compound SELECT
            return [
                *self.neighbours(project, agent, anchors[:100]),
                *self.neighbours(project, agent, anchors[100:]),
            ]
        if not anchors:
            return []
        parts = []
        params: dict[str, Any] = {"project": project, "agent": agent}
        for i, (session, at) in enumerate(anchors):
            params[f"s{i}"], params[f"t{i}"] = session, at
            for side, op, order, n in ((0, "<", "DESC", 1), (1, ">=", "ASC", 2)):
                parts.append(
                    f"SELECT * FROM (SELECT {KEYS}, r.created_at, {i} AS a_, {side} AS side_ "
                    f"FROM records r WHERE r.project = :project AND {VISIBLE} AND "
                    f"r.session = :s{i} AND r.created_at {op} :t{i} "
                    f"ORDER BY r.created_at {order}, r.rid {order} LIMIT {n})"
                )
        out: list[tuple[list[Record], list[Record]]] = [([], []) for _ in anchors]
        conn = self._conn()
        rows = conn.execute(" UNION ALL ".join(parts), params).fetchall()
        rows.sort(key=lambda row: (row[4], row[5], row[3], row[0]))  # side 0 has one row
        for row, r in zip(rows, self._resolve(conn, [row[:3] for row in rows]), strict=True):
            out[row[4]][row[5]].append(r)
        return out

    def replies_to(self, project: str, ids: Sequence[str], agent: str | None) -> list[Record]:
        if not ids:
            return []
        # One parameter however many ids (a project's tasks can pass SQLite's variable limit).
        params: dict[str, Any] = {"ids": json.dumps(list(ids)), "agent": agent, "project": project}
        visible = f" AND {VISIBLE}" if agent is not None else ""
        # In insertion order (rid): the store's own time, which no writer's created_at can move.
        sql = (
            f"{KEYED} WHERE r.project = :project AND r.reply_to IN "
            f"(SELECT value FROM json_each(:ids)){visible} ORDER BY r.rid"
        )
        conn = self._conn()
        return self._resolve(conn, conn.execute(sql, params).fetchall())

    def superseded_by(self, project: str, ids: Sequence[str]) -> dict[str, str]:
        if not ids:
            return {}
        marks = ", ".join("?" * len(ids))
        # `+created_at`: an ORDER BY that the (project, created_at) index could serve made the
        # planner walk the whole project in time order (55 ms at 100k records, on a quarter of
        # cold calls) instead of seeking records_supersedes and sorting the few rows it finds.
        rows = self._conn().execute(
            f"SELECT supersedes, id FROM records WHERE project = ? AND supersedes IN ({marks}) "
            "ORDER BY +created_at, rid",
            [project, *ids],
        )
        return {old: new for old, new in rows}

    def version(self, project: str) -> int:
        row = (
            self._conn()
            .execute("SELECT version FROM project_versions WHERE project = ?", (project,))
            .fetchone()
        )
        return int(row[0]) if row else 0

    def projects(self) -> list[str]:
        return [
            r[0]
            for r in self._conn().execute("SELECT project FROM project_versions ORDER BY project")
        ]

    def agents(self, project: str) -> list[str]:
        # A skip scan of the (project, author) index: one seek per author, not one row per
        # record (0.02 ms instead of 28 ms at 100k records).
        rows = self._conn().execute(AUTHORS_SQL.format(p=":p"), {"p": project})
        return [r[0] for r in rows]

    def count(self, project: str | None = None) -> int:
        if project is None:
            return int(self._conn().execute("SELECT count(*) FROM records").fetchone()[0])
        return int(
            self._conn()
            .execute("SELECT count(*) FROM records WHERE project = ?", (project,))
            .fetchone()[0]
        )

    # -- edges, kv, docs ------------------------------------------------------------------------

    def put_doc(
        self,
        collection: str,
        doc_id: str,
        project: str,
        data: dict[str, Any],
        at: float,
        key: str | None = None,
    ) -> None:
        row = doc_row(collection, doc_id, project, data, at, key)
        if collection == TRACES:
            self._traces.put(row)
        else:
            self._write(lambda conn: conn.execute(PUT, row))

    def put_docs(
        self,
        collection: str,
        docs: Sequence[tuple[str, str, dict[str, Any], float, str | None]],
        *,
        durable: bool = True,
    ) -> None:
        """`put_doc` of each, in one transaction (ports.PutsDocs). `durable` changes nothing: in
        WAL mode with `synchronous=NORMAL` no commit waits for the disk."""
        rows = [
            doc_row(collection, i, project, data, at, key) for i, project, data, at, key in docs
        ]
        if not rows:
            return
        if collection == TRACES:
            self._traces.put_many(rows)
        else:
            self._write(lambda conn: conn.executemany(PUT, rows))

    def _docs(self, collection: str) -> sqlite3.Connection:
        return self._traces.get() if collection == TRACES else self._conn()

    def get_doc(self, collection: str, project: str, doc_id: str) -> dict[str, Any] | None:
        return get_doc(self._docs(collection), collection, project, doc_id)

    def list_docs(
        self, collection: str, project: str, *, key: str | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        return list_docs(self._docs(collection), collection, project, key, limit)

    def settle(self) -> None:
        """Wait for the word counts being read in the background (`Engine.flush` calls this)."""
        self._vocabulary.wait()

    def close(self) -> None:
        self._vocabulary.wait(timeout=10)
        self._checkpoints.close()
        self._conns.close()
        self._traces.close()
        with self._write_lock:
            self._writers.close()
