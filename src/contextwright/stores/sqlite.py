"""The default store: one SQLite file, WAL, FTS5 (BM25) and named migrations recorded in a table.

Each thread gets its own connection (sources run on a thread pool); writes are serialized by one
lock and run in a single transaction, so a rejected batch leaves the file exactly as it was.
`current_status` is the only column that changes after insert: it is derived from the append-only
`status_facts` table, kept beside the record so that "open questions" is an indexed read.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..errors import StoreError
from ..ports import Hit, Query
from ..records import Record
from ._rows import COLUMNS, edges_sql, fts_match, query_terms, record_to_row, row_to_record
from .sqlite_schema import MIGRATIONS, Migration
from .sqlite_vectors import SQLiteVectors

VISIBLE = (
    "(r.visibility = 'project' OR r.author = :agent OR (r.visibility = 'direct' AND EXISTS "
    "(SELECT 1 FROM addressing a WHERE a.name = :agent AND a.how = 'to' AND a.rid = r.rid)))"
)
SELECT = "SELECT " + ", ".join(f"r.{c.strip()}" for c in COLUMNS.split(",")) + " FROM records r"
# Full-text words found in more records than this are left out of the BM25 query.
COMMON_DF = 2000
LARGE_WINDOW = 500


def _union_kinds(join: str, where: str, n: int, order: str) -> str:
    """`kind IN (...) ORDER BY created_at LIMIT n` as one ordered index range per kind, merged.
    SQLite would otherwise walk the whole project in time order looking for a rare kind."""
    one = (
        "SELECT * FROM ("
        + SELECT.replace(" FROM records r", ", r.rid AS rid_ FROM records r")
        + f"{join} WHERE {where} AND r.kind = :k{{i}} "
        f"ORDER BY r.created_at {order}, r.rid {order} LIMIT :limit)"
    )
    parts = " UNION ALL ".join(one.format(i=i) for i in range(n))
    return f"SELECT * FROM ({parts}) ORDER BY created_at {order}, rid_ {order} LIMIT :limit"


class SQLiteStore(SQLiteVectors):
    def __init__(self, path: str, *, migrations: Sequence[Migration] = MIGRATIONS) -> None:
        self.path = path
        self.url = f"sqlite:///{path}"
        self._local = threading.local()
        self._write_lock = threading.RLock()
        self._all: list[sqlite3.Connection] = []
        self._df: dict[str, tuple[int, int]] = {}  # word -> (records with it, max rid then)
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise StoreError(f"cannot open {self.url}: directory {directory!r} does not exist")
        try:
            conn = self._conn()
            conn.execute("PRAGMA journal_mode=WAL")
            self._migrate(conn, migrations)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {self.url}: {exc}") from exc

    # -- connections and migrations -------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute("PRAGMA busy_timeout=10000")
            conn.execute("PRAGMA cache_size=-65536")
            conn.execute("PRAGMA temp_store=MEMORY")
            self._local.conn = conn
            with self._write_lock:
                self._all.append(conn)
        return conn

    def _migrate(self, conn: sqlite3.Connection, migrations: Sequence[Migration]) -> None:
        with self._write_lock:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
            )
            done = {row[0] for row in conn.execute("SELECT name FROM migrations")}
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

    def applied_migrations(self) -> list[str]:
        return [r[0] for r in self._conn().execute("SELECT name FROM migrations ORDER BY rowid")]

    def _write(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        conn = self._conn()
        with self._write_lock:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(f"cannot write {self.url}: {exc}") from exc
            try:
                result = fn(conn)
                conn.execute("COMMIT")
                return result
            except sqlite3.Error as exc:
                conn.execute("ROLLBACK")
                raise StoreError(f"cannot write {self.url}: {exc}") from exc
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    @staticmethod
    def _bump(conn: sqlite3.Connection, projects: Iterable[str]) -> None:
        conn.executemany(
            "INSERT INTO project_versions VALUES (?, 1) "
            "ON CONFLICT(project) DO UPDATE SET version = version + 1",
            [(p,) for p in set(projects)],
        )

    # -- records --------------------------------------------------------------------------------

    def add_many(self, records: Sequence[Record]) -> list[Record]:
        if not records:
            return []

        def write(conn: sqlite3.Connection) -> list[Record]:
            ids = [r.id for r in records]
            existing = {r.id: r for r in self._get_many(conn, ids)}
            out: list[Record] = []
            fresh: list[Record] = []
            seen: set[str] = set()
            for r in records:
                if r.id in existing:
                    out.append(existing[r.id])
                elif r.id in seen:
                    out.append(next(f for f in fresh if f.id == r.id))
                else:
                    seen.add(r.id)
                    fresh.append(r)
                    out.append(r)
            if not fresh:
                return out
            placeholders = ", ".join("?" * 20)
            for r in fresh:
                cur = conn.execute(
                    f"INSERT INTO records ({COLUMNS}) VALUES ({placeholders})", record_to_row(r)
                )
                rid = cur.lastrowid
                conn.execute(
                    "INSERT INTO records_fts(rowid, content) VALUES (?, ?)", (rid, r.content)
                )
                addressing = [(n, "to", rid) for n in r.to] + [
                    (n, "mention", rid) for n in r.mentions
                ]
                if addressing:
                    conn.executemany(
                        "INSERT OR IGNORE INTO addressing VALUES (?, ?, ?)", addressing
                    )
                    conn.executemany(
                        "INSERT OR IGNORE INTO addressed_time VALUES (?, ?, ?)",
                        [(n, r.created_at, rid) for n, _, _ in addressing],
                    )
                if r.tags:
                    conn.executemany(
                        "INSERT OR IGNORE INTO record_tags VALUES (?, ?)",
                        [(t, rid) for t in r.tags],
                    )
            # After the whole batch, so that a record may supersede one later in the same batch.
            for r in fresh:
                if r.supersedes:
                    self._status(
                        conn, r.supersedes, "superseded", r.author, r.created_at, f"by {r.id}"
                    )
                    conn.execute(
                        "INSERT OR IGNORE INTO edges VALUES (?, ?, ?, 'supersedes')",
                        (r.project, r.id, r.supersedes),
                    )
            self._bump(conn, (r.project for r in fresh))
            return out

        result: list[Record] = self._write(write)
        return result

    def _get_many(self, conn: sqlite3.Connection, ids: Sequence[str]) -> list[Record]:
        out: list[Record] = []
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            marks = ", ".join("?" * len(chunk))
            out.extend(
                row_to_record(row)
                for row in conn.execute(f"{SELECT} WHERE r.id IN ({marks})", chunk)
            )
        order = {rid: n for n, rid in enumerate(ids)}
        out.sort(key=lambda r: order.get(r.id, 0))
        return out

    def get_many(self, ids: Sequence[str]) -> list[Record]:
        return self._get_many(self._conn(), list(ids))

    def query(self, q: Query) -> list[Record]:
        where = ["r.project = :project"]
        params: dict[str, Any] = {"project": q.project, "agent": q.agent, "limit": q.limit}
        join = ""
        if q.agent is not None:
            where.append(VISIBLE)
        # Several kinds and nothing narrower: one index range per kind, merged (see _union_kinds).
        kinds = None if q.kinds is None else tuple(dict.fromkeys(q.kinds))  # each kind once
        per_kind = (
            kinds is not None
            and len(kinds) > 1
            and all(
                getattr(q, f) is None
                for f in ("session", "author", "statuses", "addressed_to", "tag", "pinned")
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
            sql = f"{SELECT}{join} WHERE {' AND '.join(where)} ORDER BY {time_col} {order}, {by}.rid {order} LIMIT :limit"
        return [row_to_record(row) for row in self._conn().execute(sql, params)]

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
        cols = SELECT.replace(" FROM records r", "")
        parts = []
        params: dict[str, Any] = {"project": project, "agent": agent}
        for i, (session, at) in enumerate(anchors):
            params[f"s{i}"], params[f"t{i}"] = session, at
            for side, op, order, n in ((0, "<", "DESC", 1), (1, ">=", "ASC", 2)):
                parts.append(
                    f"SELECT * FROM ({cols}, r.rid AS rid_, {i} AS a_, {side} AS side_ "
                    f"FROM records r WHERE r.project = :project AND {VISIBLE} AND "
                    f"r.session = :s{i} AND r.created_at {op} :t{i} "
                    f"ORDER BY r.created_at {order}, r.rid {order} LIMIT {n})"
                )
        out: list[tuple[list[Record], list[Record]]] = [([], []) for _ in anchors]
        rows = self._conn().execute(" UNION ALL ".join(parts), params).fetchall()
        rows.sort(key=lambda row: (row[-2], row[-1], row[15], row[-3]))  # side 0 has one row
        for row in rows:
            out[row[-2]][row[-1]].append(row_to_record(row[:-3]))
        return out

    def search_text(self, project: str, agent: str | None, text: str, limit: int) -> list[Hit]:
        match = fts_match(text)
        if match is None or limit <= 0:
            return []
        selective = self._selective_match(query_terms(text))
        visible = f" AND {VISIBLE}" if agent is not None else ""
        # A small store ranks every match. A large one ranks the newest LARGE_WINDOW matches of
        # its selective words only, so that the cost stays bounded whatever the words are.
        inner = (
            "ORDER BY score LIMIT :wide"
            if selective is None
            else "ORDER BY t.rowid DESC LIMIT :window"
        )
        # The window holds this project's matches only, so other projects cannot crowd it out:
        # the project is checked by rowid on `records` before the window is cut.
        # Filter and rank on the few columns that decide, then read whole rows for the winners.
        sql = (
            f"SELECT {', '.join(f'r.{c.strip()}' for c in COLUMNS.split(','))}, g.score FROM "
            "(SELECT f.rid AS rid, f.score AS score FROM "
            "(SELECT t.rowid AS rid, bm25(records_fts) AS score FROM records_fts t "
            "JOIN records p ON p.rid = t.rowid WHERE records_fts MATCH :m "
            f"AND p.project = :project {inner}) f JOIN records r ON r.rid = f.rid "
            f"WHERE r.project = :project{visible} ORDER BY f.score, f.rid DESC LIMIT :limit) g "
            "JOIN records r ON r.rid = g.rid ORDER BY g.score, g.rid DESC"
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
            rows = self._conn().execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            raise StoreError(f"full-text search failed for {text[:80]!r}: {exc}") from exc
        return [Hit(row_to_record(row[:-1]), -float(row[-1])) for row in rows]

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

    def _status(
        self, conn: sqlite3.Connection, record_id: str, status: str, by: str, at: float, note: str
    ) -> None:
        if conn.execute("SELECT 1 FROM records WHERE id = ?", (record_id,)).fetchone() is None:
            return  # a fact about no record (as in the memory store): nothing to record
        conn.execute(
            "INSERT INTO status_facts (record_id, status, by, at, note) VALUES (?, ?, ?, ?, ?)",
            (record_id, status, by, at, note),
        )
        conn.execute("UPDATE records SET current_status = ? WHERE id = ?", (status, record_id))

    def set_status(self, record_id: str, status: str, by: str, at: float, note: str = "") -> None:
        self.set_status_many([record_id], status, by, at, note)

    def set_status_many(
        self, record_ids: Sequence[str], status: str, by: str, at: float, note: str = ""
    ) -> None:
        ids = list(dict.fromkeys(record_ids))

        def write(conn: sqlite3.Connection) -> None:
            projects: set[str] = set()
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                marks = ", ".join("?" * len(chunk))
                rows = conn.execute(
                    f"SELECT id, project FROM records WHERE id IN ({marks})", chunk
                ).fetchall()
                found = {rid for rid, _ in rows}
                conn.executemany(
                    "INSERT INTO status_facts (record_id, status, by, at, note) VALUES (?, ?, ?, ?, ?)",
                    [(rid, status, by, at, note) for rid in chunk if rid in found],
                )
                conn.executemany(
                    "UPDATE records SET current_status = ? WHERE id = ?",
                    [(status, rid) for rid in chunk if rid in found],
                )
                projects.update(project for _, project in rows)
            if projects:
                self._bump(conn, projects)

        if ids:
            self._write(write)

    def status_history(self, record_id: str) -> list[dict[str, Any]]:
        rows = self._conn().execute(
            "SELECT status, by, at, note FROM status_facts WHERE record_id = ? ORDER BY seq",
            (record_id,),
        )
        return [{"status": s, "by": b, "at": a, "note": n} for s, b, a, n in rows]

    def replies_to(self, ids: Sequence[str], agent: str | None) -> list[Record]:
        if not ids:
            return []
        marks = ", ".join(f":i{n}" for n in range(len(ids)))
        params: dict[str, Any] = {f"i{n}": i for n, i in enumerate(ids)}
        params["agent"] = agent
        visible = f" AND {VISIBLE}" if agent is not None else ""
        sql = f"{SELECT} WHERE r.reply_to IN ({marks}){visible} ORDER BY r.created_at"
        return [row_to_record(row) for row in self._conn().execute(sql, params)]

    def superseded_by(self, ids: Sequence[str]) -> dict[str, str]:
        if not ids:
            return {}
        marks = ", ".join("?" * len(ids))
        rows = self._conn().execute(
            f"SELECT supersedes, id FROM records WHERE supersedes IN ({marks}) ORDER BY created_at",
            list(ids),
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
        rows = self._conn().execute(
            "SELECT DISTINCT author FROM records WHERE project = ? ORDER BY author", (project,)
        )
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

    def add_edges(self, project: str, edges: Iterable[tuple[str, str, str]]) -> None:
        rows = [(project, s, d, k) for s, d, k in edges]

        def write(conn: sqlite3.Connection) -> None:
            conn.executemany("INSERT OR IGNORE INTO edges VALUES (?, ?, ?, ?)", rows)
            self._bump(conn, [project])

        if rows:
            self._write(write)

    def edges(
        self,
        project: str,
        *,
        src: str | None = None,
        dst: str | None = None,
        kind: str | None = None,
    ) -> list[tuple[str, str, str]]:
        sql, params = edges_sql(project, src, dst, kind, "?")
        return [(s, d, k) for s, d, k in self._conn().execute(sql, params)]

    def kv_set(self, project: str, key: str, value: str, at: float) -> None:
        def write(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO kv VALUES (?, ?, ?, ?) ON CONFLICT(project, key) "
                "DO UPDATE SET value = excluded.value, at = excluded.at",
                (project, key, value, at),
            )
            self._bump(conn, [project])

        self._write(write)

    def kv_get(self, project: str, key: str) -> str | None:
        row = (
            self._conn()
            .execute("SELECT value FROM kv WHERE project = ? AND key = ?", (project, key))
            .fetchone()
        )
        return None if row is None else str(row[0])

    def kv_list(self, project: str, prefix: str = "") -> dict[str, str]:
        rows = self._conn().execute(
            "SELECT key, value FROM kv WHERE project = ? AND substr(key, 1, ?) = ? ORDER BY key",
            (project, len(prefix), prefix),
        )
        return {k: v for k, v in rows}

    def put_doc(
        self,
        collection: str,
        doc_id: str,
        project: str,
        data: dict[str, Any],
        at: float,
        key: str | None = None,
    ) -> None:
        payload = json.dumps(data, separators=(",", ":"), default=str)
        self._write(
            lambda conn: conn.execute(
                "INSERT INTO docs VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(collection, id) DO UPDATE "
                "SET project = excluded.project, key = excluded.key, at = excluded.at, data = excluded.data",
                (collection, doc_id, project, key, at, payload),
            )
        )

    def get_doc(self, collection: str, doc_id: str) -> dict[str, Any] | None:
        row = (
            self._conn()
            .execute("SELECT data FROM docs WHERE collection = ? AND id = ?", (collection, doc_id))
            .fetchone()
        )
        return None if row is None else dict(json.loads(row[0]))

    def list_docs(
        self, collection: str, project: str, *, key: str | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        if key is None:
            rows = self._conn().execute(
                "SELECT data FROM docs WHERE collection = ? AND project = ? ORDER BY at DESC LIMIT ?",
                (collection, project, limit),
            )
        else:
            rows = self._conn().execute(
                "SELECT data FROM docs WHERE collection = ? AND project = ? AND key = ? "
                "ORDER BY at DESC LIMIT ?",
                (collection, project, key, limit),
            )
        return [dict(json.loads(r[0])) for r in rows]

    def close(self) -> None:
        with self._write_lock:
            for conn in self._all:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            self._all.clear()
        self._local = threading.local()
