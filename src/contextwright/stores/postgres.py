"""The scale-out store: PostgreSQL through psycopg 3 with a connection pool; tsvector + GIN for full
text, pgvector for vectors. The engine keeps no state between calls, so many workers can serve one
database. Same semantics as the SQLite store, checked by the same contract suite.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..errors import MissingExtra, StoreError
from ..ports import Hit, Query
from ..records import Record
from ._rows import COLUMNS, query_terms, record_to_row, row_to_record

MIGRATIONS: list[tuple[str, str]] = [
    (
        "m001_records",
        """
        CREATE TABLE records (
            rid BIGSERIAL PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            project TEXT NOT NULL, milestone TEXT, session TEXT, author TEXT NOT NULL,
            kind TEXT NOT NULL, recipients TEXT NOT NULL, visibility TEXT NOT NULL,
            mentions TEXT NOT NULL, tags TEXT NOT NULL, refs TEXT NOT NULL,
            current_status TEXT, supersedes TEXT, reply_to TEXT, pinned INTEGER NOT NULL,
            created_at DOUBLE PRECISION NOT NULL, content TEXT NOT NULL, tokens INTEGER NOT NULL,
            content_hash TEXT NOT NULL, meta TEXT NOT NULL,
            tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED
        );
        CREATE INDEX records_project_time ON records(project, created_at);
        CREATE INDEX records_session_time ON records(project, session, created_at);
        CREATE INDEX records_kind_time ON records(project, kind, created_at);
        CREATE INDEX records_author_time ON records(project, author, created_at);
        CREATE INDEX records_status ON records(project, current_status, kind)
            WHERE current_status IS NOT NULL;
        CREATE INDEX records_pinned ON records(project, created_at) WHERE pinned = 1;
        CREATE INDEX records_reply ON records(reply_to) WHERE reply_to IS NOT NULL;
        CREATE INDEX records_supersedes ON records(supersedes) WHERE supersedes IS NOT NULL;
        CREATE INDEX records_tsv ON records USING GIN (tsv);
        CREATE TABLE addressing (
            name TEXT NOT NULL, how TEXT NOT NULL, rid BIGINT NOT NULL,
            PRIMARY KEY (name, how, rid)
        );
        CREATE INDEX addressing_rid ON addressing(rid);
        CREATE TABLE record_tags (tag TEXT NOT NULL, rid BIGINT NOT NULL, PRIMARY KEY (tag, rid));
        CREATE TABLE status_facts (
            seq BIGSERIAL PRIMARY KEY, record_id TEXT NOT NULL, status TEXT NOT NULL,
            by TEXT NOT NULL, at DOUBLE PRECISION NOT NULL, note TEXT NOT NULL DEFAULT ''
        );
        CREATE INDEX status_facts_record ON status_facts(record_id, seq);
        CREATE TABLE project_versions (project TEXT PRIMARY KEY, version BIGINT NOT NULL);
        """,
    ),
    (
        "m002_edges_kv_docs",
        """
        CREATE TABLE edges (
            project TEXT NOT NULL, src TEXT NOT NULL, dst TEXT NOT NULL, kind TEXT NOT NULL,
            PRIMARY KEY (project, src, kind, dst)
        );
        CREATE INDEX edges_dst ON edges(project, dst, kind);
        CREATE TABLE kv (
            project TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
            at DOUBLE PRECISION NOT NULL, PRIMARY KEY (project, key)
        );
        CREATE TABLE docs (
            collection TEXT NOT NULL, id TEXT NOT NULL, project TEXT NOT NULL, key TEXT,
            at DOUBLE PRECISION NOT NULL, data TEXT NOT NULL, PRIMARY KEY (collection, id)
        );
        CREATE INDEX docs_by_key ON docs(collection, project, key, at);
        """,
    ),
    (
        "m003_vectors",
        """
        CREATE EXTENSION IF NOT EXISTS vector;
        CREATE TABLE vectors (
            rid BIGINT NOT NULL, model TEXT NOT NULL, project TEXT NOT NULL,
            embedding vector NOT NULL, PRIMARY KEY (rid, model)
        );
        CREATE INDEX vectors_project ON vectors(project, model);
        """,
    ),
]

VISIBLE = (
    "(r.visibility = 'project' OR r.author = %(agent)s OR (r.visibility = 'direct' AND EXISTS "
    "(SELECT 1 FROM addressing a WHERE a.name = %(agent)s AND a.how = 'to' AND a.rid = r.rid)))"
)
COLS = ", ".join(f"r.{c.strip()}" for c in COLUMNS.split(","))
SELECT = f"SELECT {COLS} FROM records r"


def _vector_literal(vec: Any) -> str:
    v = np.asarray(vec, dtype=np.float32).ravel()
    return "[" + ",".join(f"{x:.6g}" for x in v.tolist()) + "]"


class PostgresStore:
    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 8) -> None:
        try:
            import psycopg  # noqa: F401
            from psycopg_pool import ConnectionPool
        except ImportError as exc:
            raise MissingExtra("PostgresStore", "postgres") from exc
        self.url = url
        try:
            self._pool = ConnectionPool(
                url, min_size=min_size, max_size=max_size, kwargs={"autocommit": True},
                open=True, timeout=15,
            )  # fmt: skip
            self._pool.wait(timeout=15)
            self._migrate()
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"cannot open {_redact(url)}: {exc}") from exc

    # -- plumbing -------------------------------------------------------------------------------

    def _migrate(self) -> None:
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(4242)")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL)"
            )
            done = {row[0] for row in conn.execute("SELECT name FROM migrations")}
            for name, script in MIGRATIONS:
                if name not in done:
                    conn.execute(script)
                    conn.execute("INSERT INTO migrations VALUES (%s, now())", (name,))

    def applied_migrations(self) -> list[str]:
        return [r[0] for r in self._read("SELECT name FROM migrations ORDER BY applied_at, name")]

    def _read(self, sql: str, params: Any = None) -> list[Any]:
        try:
            with self._pool.connection() as conn:
                return list(conn.execute(sql, params).fetchall())
        except Exception as exc:
            raise StoreError(f"read failed on {_redact(self.url)}: {exc}") from exc

    def _write(self, fn: Any) -> Any:
        try:
            with self._pool.connection() as conn, conn.transaction():
                return fn(conn)
        except StoreError:
            raise
        except Exception as exc:
            if type(exc).__module__.startswith("psycopg"):
                raise StoreError(f"cannot write {_redact(self.url)}: {exc}") from exc
            raise

    @staticmethod
    def _bump(conn: Any, projects: Iterable[str]) -> None:
        for p in sorted(set(projects)):
            conn.execute(
                "INSERT INTO project_versions VALUES (%s, 1) ON CONFLICT (project) "
                "DO UPDATE SET version = project_versions.version + 1",
                (p,),
            )

    # -- records --------------------------------------------------------------------------------

    def add_many(self, records: Sequence[Record]) -> list[Record]:
        if not records:
            return []

        def write(conn: Any) -> list[Record]:
            existing = {r.id: r for r in self._get_many(conn, [r.id for r in records])}
            out: list[Record] = []
            fresh: dict[str, Record] = {}
            for r in records:
                if r.id in existing:
                    out.append(existing[r.id])
                elif r.id in fresh:
                    out.append(fresh[r.id])
                else:
                    fresh[r.id] = r
                    out.append(r)
            marks = ", ".join(["%s"] * 20)
            for r in fresh.values():
                rid = conn.execute(
                    f"INSERT INTO records ({COLUMNS}) VALUES ({marks}) RETURNING rid",
                    record_to_row(r),
                ).fetchone()[0]
                addressing = [(n, "to", rid) for n in r.to] + [
                    (n, "mention", rid) for n in r.mentions
                ]
                with conn.cursor() as cur:
                    if addressing:
                        cur.executemany(
                            "INSERT INTO addressing VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                            addressing,
                        )
                    if r.tags:
                        cur.executemany(
                            "INSERT INTO record_tags VALUES (%s, %s) ON CONFLICT DO NOTHING",
                            [(t, rid) for t in r.tags],
                        )
            for r in fresh.values():
                if r.supersedes:
                    self._status(
                        conn, r.supersedes, "superseded", r.author, r.created_at, f"by {r.id}"
                    )
                    conn.execute(
                        "INSERT INTO edges VALUES (%s, %s, %s, 'supersedes') ON CONFLICT DO NOTHING",
                        (r.project, r.id, r.supersedes),
                    )
            if fresh:
                self._bump(conn, (r.project for r in fresh.values()))
            return out

        result: list[Record] = self._write(write)
        return result

    def _get_many(self, conn: Any, ids: Sequence[str]) -> list[Record]:
        if not ids:
            return []
        rows = conn.execute(f"{SELECT} WHERE r.id = ANY(%s)", (list(ids),)).fetchall()
        order = {rid: n for n, rid in enumerate(ids)}
        return sorted((row_to_record(row) for row in rows), key=lambda r: order.get(r.id, 0))

    def get_many(self, ids: Sequence[str]) -> list[Record]:
        with self._pool.connection() as conn:
            return self._get_many(conn, list(ids))

    def query(self, q: Query) -> list[Record]:
        where = ["r.project = %(project)s"]
        params: dict[str, Any] = {"project": q.project, "agent": q.agent, "limit": q.limit}
        join = ""
        if q.agent is not None:
            where.append(VISIBLE)
        if q.kinds is not None:
            where.append("r.kind = ANY(%(kinds)s)")
            params["kinds"] = list(q.kinds)
        if q.statuses is not None:
            where.append("r.current_status = ANY(%(statuses)s)")
            params["statuses"] = list(q.statuses)
        for name in ("session", "author", "milestone"):
            value = getattr(q, name)
            if value is not None:
                where.append(f"r.{name} = %({name})s")
                params[name] = value
        if q.pinned is not None:
            where.append("r.pinned = %(pinned)s")
            params["pinned"] = int(q.pinned)
        if q.since is not None:
            where.append("r.created_at >= %(since)s")
            params["since"] = q.since
        if q.before is not None:
            where.append("r.created_at < %(before)s")
            params["before"] = q.before
        if q.addressed_to is not None:
            where.append(
                "EXISTS (SELECT 1 FROM addressing ad WHERE ad.name = %(addr)s AND ad.rid = r.rid)"
            )
            params["addr"] = q.addressed_to
        if q.tag is not None:
            join += " JOIN record_tags tg ON tg.rid = r.rid AND tg.tag = %(tag)s"
            params["tag"] = q.tag
        order = "DESC" if q.newest_first else "ASC"
        sql = (
            f"{SELECT}{join} WHERE {' AND '.join(where)} "
            f"ORDER BY r.created_at {order}, r.rid {order} LIMIT %(limit)s"
        )
        return [row_to_record(row) for row in self._read(sql, params)]

    def search_text(self, project: str, agent: str | None, text: str, limit: int) -> list[Hit]:
        terms = query_terms(text)
        if not terms or limit <= 0:
            return []
        visible = f" AND {VISIBLE}" if agent is not None else ""
        sql = (
            f"SELECT {COLS}, ts_rank_cd(r.tsv, q, 1) AS score FROM records r, "
            "to_tsquery('english', %(q)s) q "
            f"WHERE r.project = %(project)s AND r.tsv @@ q{visible} "
            "ORDER BY score DESC, r.rid DESC LIMIT %(limit)s"
        )
        params = {"q": " | ".join(terms), "project": project, "agent": agent, "limit": limit}
        return [Hit(row_to_record(row[:-1]), float(row[-1])) for row in self._read(sql, params)]

    def _status(
        self, conn: Any, record_id: str, status: str, by: str, at: float, note: str
    ) -> bool:
        cur = conn.execute(
            "UPDATE records SET current_status = %s WHERE id = %s RETURNING project",
            (status, record_id),
        )
        row = cur.fetchone()
        if row is None:
            return False
        conn.execute(
            "INSERT INTO status_facts (record_id, status, by, at, note) VALUES (%s, %s, %s, %s, %s)",
            (record_id, status, by, at, note),
        )
        return True

    def set_status(self, record_id: str, status: str, by: str, at: float, note: str = "") -> None:
        def write(conn: Any) -> None:
            row = conn.execute("SELECT project FROM records WHERE id = %s", (record_id,)).fetchone()
            if row is not None and self._status(conn, record_id, status, by, at, note):
                self._bump(conn, [row[0]])

        self._write(write)

    def status_history(self, record_id: str) -> list[dict[str, Any]]:
        rows = self._read(
            "SELECT status, by, at, note FROM status_facts WHERE record_id = %s ORDER BY seq",
            (record_id,),
        )
        return [{"status": s, "by": b, "at": a, "note": n} for s, b, a, n in rows]

    def replies_to(self, ids: Sequence[str], agent: str | None) -> list[Record]:
        if not ids:
            return []
        visible = f" AND {VISIBLE}" if agent is not None else ""
        sql = f"{SELECT} WHERE r.reply_to = ANY(%(ids)s){visible} ORDER BY r.created_at, r.rid"
        return [row_to_record(row) for row in self._read(sql, {"ids": list(ids), "agent": agent})]

    def superseded_by(self, ids: Sequence[str]) -> dict[str, str]:
        if not ids:
            return {}
        rows = self._read(
            "SELECT supersedes, id FROM records WHERE supersedes = ANY(%s) ORDER BY created_at, rid",
            (list(ids),),
        )
        return {old: new for old, new in rows}

    def version(self, project: str) -> int:
        rows = self._read("SELECT version FROM project_versions WHERE project = %s", (project,))
        return int(rows[0][0]) if rows else 0

    def projects(self) -> list[str]:
        return [r[0] for r in self._read("SELECT project FROM project_versions ORDER BY project")]

    def agents(self, project: str) -> list[str]:
        rows = self._read(
            "SELECT DISTINCT author FROM records WHERE project = %s ORDER BY author", (project,)
        )
        return [r[0] for r in rows]

    def count(self, project: str | None = None) -> int:
        if project is None:
            return int(self._read("SELECT count(*) FROM records")[0][0])
        return int(self._read("SELECT count(*) FROM records WHERE project = %s", (project,))[0][0])

    # -- edges, kv, docs ------------------------------------------------------------------------

    def add_edges(self, project: str, edges: Iterable[tuple[str, str, str]]) -> None:
        rows = [(project, s, d, k) for s, d, k in edges]

        def write(conn: Any) -> None:
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO edges VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING", rows
                )
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
        where, params = ["project = %s"], [project]
        for col, value in (("src", src), ("dst", dst), ("kind", kind)):
            if value is not None:
                where.append(f"{col} = %s")
                params.append(value)
        sql = (
            f"SELECT src, dst, kind FROM edges WHERE {' AND '.join(where)} ORDER BY src, kind, dst"
        )
        return [(s, d, k) for s, d, k in self._read(sql, params)]

    def kv_set(self, project: str, key: str, value: str, at: float) -> None:
        def write(conn: Any) -> None:
            conn.execute(
                "INSERT INTO kv VALUES (%s, %s, %s, %s) ON CONFLICT (project, key) "
                "DO UPDATE SET value = excluded.value, at = excluded.at",
                (project, key, value, at),
            )
            self._bump(conn, [project])

        self._write(write)

    def kv_get(self, project: str, key: str) -> str | None:
        rows = self._read("SELECT value FROM kv WHERE project = %s AND key = %s", (project, key))
        return None if not rows else str(rows[0][0])

    def kv_list(self, project: str, prefix: str = "") -> dict[str, str]:
        rows = self._read(
            "SELECT key, value FROM kv WHERE project = %s AND left(key, %s) = %s ORDER BY key",
            (project, len(prefix), prefix),
        )
        return {k: v for k, v in rows}

    def put_doc(
        self, collection: str, doc_id: str, project: str, data: dict[str, Any], at: float,
        key: str | None = None,
    ) -> None:  # fmt: skip
        payload = json.dumps(data, separators=(",", ":"), default=str)
        self._write(
            lambda conn: conn.execute(
                "INSERT INTO docs VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (collection, id) DO UPDATE "
                "SET project = excluded.project, key = excluded.key, at = excluded.at, data = excluded.data",
                (collection, doc_id, project, key, at, payload),
            )
        )

    def get_doc(self, collection: str, doc_id: str) -> dict[str, Any] | None:
        rows = self._read(
            "SELECT data FROM docs WHERE collection = %s AND id = %s", (collection, doc_id)
        )
        return None if not rows else dict(json.loads(rows[0][0]))

    def list_docs(
        self, collection: str, project: str, *, key: str | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        if key is None:
            rows = self._read(
                "SELECT data FROM docs WHERE collection = %s AND project = %s ORDER BY at DESC LIMIT %s",
                (collection, project, limit),
            )
        else:
            rows = self._read(
                "SELECT data FROM docs WHERE collection = %s AND project = %s AND key = %s "
                "ORDER BY at DESC LIMIT %s",
                (collection, project, key, limit),
            )
        return [dict(json.loads(r[0])) for r in rows]

    # -- vectors (pgvector, exact cosine search) ------------------------------------------------

    def unembedded(self, model: str, limit: int) -> list[Record]:
        sql = (
            f"{SELECT} WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.rid = r.rid AND v.model = %s) "
            "ORDER BY r.rid LIMIT %s"
        )
        return [row_to_record(row) for row in self._read(sql, (model, limit))]

    def unembedded_count(self, model: str) -> int:
        sql = (
            "SELECT count(*) FROM records r WHERE NOT EXISTS "
            "(SELECT 1 FROM vectors v WHERE v.rid = r.rid AND v.model = %s)"
        )
        return int(self._read(sql, (model,))[0][0])

    def put_vectors(self, model: str, rows: Sequence[tuple[str, Any]]) -> None:
        if not rows:
            return

        def write(conn: Any) -> None:
            for record_id, vec in rows:
                found = conn.execute(
                    "SELECT rid, project FROM records WHERE id = %s", (record_id,)
                ).fetchone()
                if found is None:
                    continue
                conn.execute(
                    "INSERT INTO vectors VALUES (%s, %s, %s, %s::vector) ON CONFLICT (rid, model) "
                    "DO UPDATE SET embedding = excluded.embedding",
                    (found[0], model, found[1], _vector_literal(vec)),
                )

        self._write(write)

    def vector_search(
        self, project: str, agent: str | None, vector: Any, limit: int, model: str
    ) -> list[Hit]:
        visible = f" AND {VISIBLE}" if agent is not None else ""
        sql = (
            f"SELECT {COLS}, 1 - (v.embedding <=> %(vec)s::vector) AS score FROM vectors v "
            "JOIN records r ON r.rid = v.rid "
            f"WHERE v.project = %(project)s AND v.model = %(model)s{visible} "
            "ORDER BY v.embedding <=> %(vec)s::vector, r.rid LIMIT %(limit)s"
        )
        params = {
            "vec": _vector_literal(vector),
            "project": project,
            "model": model,
            "agent": agent,
            "limit": limit,
        }
        return [Hit(row_to_record(row[:-1]), float(row[-1])) for row in self._read(sql, params)]

    def close(self) -> None:
        self._pool.close()


def _redact(url: str) -> str:
    """Never print a password in an error message."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        user = creds.split(":", 1)[0]
        return f"{scheme}://{user}:***@{host}" if ":" in creds else url
    return url
