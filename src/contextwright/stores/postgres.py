"""The scale-out store: PostgreSQL through psycopg 3 with a connection pool; tsvector + GIN for full
text, pgvector for vectors (postgres_vectors.py). The engine keeps no state between calls, so many
workers can serve one database. Same semantics as the SQLite store, checked by the same contract
suite; full-text ranking is PostgreSQL's (the 'english' configuration and ts_rank_cd), not BM25.

    store = PostgresStore("postgresql://app@db.internal/contextwright?pool_max=16")

The URL is checked with one direct connection before the pool opens, so a wrong host or password
fails at once with libpq's own words (and no password in them), not after a pool timeout.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any
from urllib.parse import unquote

from ..errors import MissingExtra, StoreError, ValidationError
from ..ports import Hit, Query
from ..records import Record
from ._rows import COLUMNS, query_terms, record_to_row, row_to_record
from .postgres_vectors import M003_VECTORS, PostgresVectors

DEFAULT_POOL_MAX = 8
# Serializes schema changes when many workers start at once against a fresh database.
MIGRATION_LOCK = 0x636F6E74  # "cont"

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
    ("m003_vectors", M003_VECTORS),
]

# A record, its addressing rows and its tags in one statement (one round trip, pipelined).
INSERT_RECORD = f"""
    WITH ins AS (
        INSERT INTO records ({COLUMNS}) VALUES ({", ".join(["%s"] * 20)})
        ON CONFLICT (id) DO NOTHING RETURNING rid
    ), addr AS (
        INSERT INTO addressing (name, how, rid)
        SELECT u.name, u.how, ins.rid FROM ins, unnest(%s::text[], %s::text[]) AS u(name, how)
        ON CONFLICT DO NOTHING
    ), tags AS (
        INSERT INTO record_tags (tag, rid) SELECT u.tag, ins.rid FROM ins, unnest(%s::text[]) AS u(tag)
        ON CONFLICT DO NOTHING
    )
    SELECT rid FROM ins
"""
# A supersedes link: the old record's status fact (only if it exists, as in SQLite) and the edge.
SUPERSEDE = """
    WITH upd AS (
        UPDATE records SET current_status = 'superseded' WHERE id = %(old)s RETURNING id
    ), fact AS (
        INSERT INTO status_facts (record_id, status, by, at, note)
        SELECT id, 'superseded', %(by)s, %(at)s, %(note)s FROM upd
    )
    INSERT INTO edges VALUES (%(project)s, %(new)s, %(old)s, 'supersedes') ON CONFLICT DO NOTHING
"""

VISIBLE = (
    "(r.visibility = 'project' OR r.author = %(agent)s OR (r.visibility = 'direct' AND EXISTS "
    "(SELECT 1 FROM addressing a WHERE a.name = %(agent)s AND a.how = 'to' AND a.rid = r.rid)))"
)
COLS = ", ".join(f"r.{c.strip()}" for c in COLUMNS.split(","))
SELECT = f"SELECT {COLS} FROM records r"


class PostgresStore(PostgresVectors):
    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int | None = None,
        connect_timeout: int = 10,
    ) -> None:
        try:
            import psycopg
            from psycopg_pool import ConnectionPool
        except ImportError as exc:
            raise MissingExtra("PostgresStore", "postgres") from exc
        conninfo, pool_max = _pool_option(url)
        max_size = max_size if max_size is not None else pool_max or DEFAULT_POOL_MAX
        if not isinstance(max_size, int) or max_size < 1:
            raise ValidationError("max_size", max_size, "give a pool size of at least 1")
        if not isinstance(min_size, int) or not 0 <= min_size <= max_size:
            raise ValidationError("min_size", min_size, f"give 0 to max_size ({max_size})")
        self.url = redact(url)
        self._secret = _password(conninfo)
        self._broken_types: tuple[type[BaseException], ...] = (psycopg.OperationalError,)
        self._select, self._cols, self._visible = SELECT, COLS, VISIBLE
        extra: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in conninfo:
            extra["connect_timeout"] = connect_timeout
        try:
            with psycopg.connect(conninfo, **extra) as conn:
                self._migrate(conn)
            self._pool = ConnectionPool(
                conninfo, min_size=min_size, max_size=max_size, kwargs=extra, open=True,
                timeout=15, name="contextwright",
            )  # fmt: skip
            self._pool.wait(timeout=15)
        except StoreError:
            raise
        except Exception as exc:
            err = self._error(f"cannot open {self.url}", exc)
            if self._secret and self._secret in str(exc):
                raise err from None  # the chained exception would print the password
            raise err from exc

    # -- plumbing -------------------------------------------------------------------------------

    @staticmethod
    def _migrate(conn: Any) -> None:
        names = [name for name, _ in MIGRATIONS]
        # The common case, a worker starting against a migrated database: one read, no lock.
        if conn.execute("SELECT to_regclass('migrations') IS NOT NULL").fetchone()[0]:
            done = {r[0] for r in conn.execute("SELECT name FROM migrations")}
            if done >= set(names):
                return
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS migrations "
                "(name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL)"
            )
            done = {row[0] for row in conn.execute("SELECT name FROM migrations")}
            for name, script in MIGRATIONS:
                if name not in done:
                    conn.execute(script)
                    conn.execute("INSERT INTO migrations VALUES (%s, clock_timestamp())", (name,))

    def applied_migrations(self) -> list[str]:
        return [r[0] for r in self._read("SELECT name FROM migrations ORDER BY applied_at, name")]

    def _error(self, what: str, exc: BaseException) -> StoreError:
        text = str(exc).strip() or type(exc).__name__
        if self._secret:
            text = text.replace(self._secret, "***")
        return StoreError(f"{what}: {text}")

    @staticmethod
    def _ours(exc: BaseException) -> bool:
        """Errors of the database or the pool; anything else is a bug and propagates as is."""
        return type(exc).__module__.startswith(("psycopg", "psycopg_pool"))

    def _read(self, sql: str, params: Any = None) -> list[Any]:
        for attempt in (1, 2):
            broken = False
            try:
                with self._pool.connection() as conn:
                    try:
                        return list(conn.execute(sql, params).fetchall())
                    except self._broken_types:
                        broken = bool(conn.broken)
                        raise
            except Exception as exc:
                if not self._ours(exc):
                    raise
                if broken and attempt == 1:
                    # The server dropped a connection (restart, failover, idle kill), and likely
                    # every other one: replace the dead ones in the pool, then try once more.
                    self._pool.check()
                    continue
                raise self._error(f"read failed on {self.url}", exc) from exc
        raise AssertionError("unreachable")

    def _write(self, fn: Callable[[Any], Any]) -> Any:
        """`fn(conn)` in one transaction: all of it is stored, or none of it."""
        try:
            with self._pool.connection() as conn, conn.transaction():
                return fn(conn)
        except StoreError:
            raise
        except Exception as exc:
            if self._ours(exc):
                raise self._error(f"cannot write {self.url}", exc) from exc
            raise

    @staticmethod
    def _bump(conn: Any, projects: Iterable[str]) -> None:
        # Sorted, so that two writers to the same projects lock their rows in the same order.
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO project_versions VALUES (%s, 1) ON CONFLICT (project) "
                "DO UPDATE SET version = project_versions.version + 1",
                [(p,) for p in sorted(set(projects))],
            )

    # -- records --------------------------------------------------------------------------------

    def add_many(self, records: Sequence[Record]) -> list[Record]:
        if not records:
            return []
        unique = list({r.id: r for r in reversed(records)}.values())[::-1]  # first of each id
        rows = [
            (
                *record_to_row(r),
                [*r.to, *r.mentions],
                ["to"] * len(r.to) + ["mention"] * len(r.mentions),
                list(r.tags),
            )
            for r in unique
        ]

        def write(conn: Any) -> list[Record]:
            with conn.cursor() as cur:
                # One statement per record, pipelined: an id already stored inserts nothing and
                # returns no rid (also when another writer stored it a moment ago).
                cur.executemany(INSERT_RECORD, rows, returning=True)
                rids = []
                while True:
                    row = cur.fetchone()
                    rids.append(None if row is None else row[0])
                    if not cur.nextset():
                        break
            fresh = [r for r, rid in zip(unique, rids, strict=True) if rid is not None]
            stored = {r.id: r for r in fresh}
            old = [r.id for r, rid in zip(unique, rids, strict=True) if rid is None]
            stored.update((r.id, r) for r in self._get_many(conn, old))
            # After the whole batch, so that a record may supersede one later in the same batch.
            replaced = [
                {"old": r.supersedes, "new": r.id, "by": r.author, "at": r.created_at,
                 "project": r.project, "note": f"by {r.id}"}
                for r in fresh if r.supersedes
            ]  # fmt: skip
            if replaced:
                with conn.cursor() as cur:
                    cur.executemany(SUPERSEDE, replaced)
            if fresh:
                self._bump(conn, (r.project for r in fresh))
            return [stored[r.id] for r in records]

        result: list[Record] = self._write(write)
        return result

    def _get_many(self, conn: Any, ids: Sequence[str]) -> list[Record]:
        if not ids:
            return []
        rows = conn.execute(f"{SELECT} WHERE r.id = ANY(%s)", (list(ids),)).fetchall()
        order = {rid: n for n, rid in enumerate(ids)}
        return sorted((row_to_record(row) for row in rows), key=lambda r: order.get(r.id, 0))

    def get_many(self, ids: Sequence[str]) -> list[Record]:
        ids = list(ids)
        if not ids:
            return []
        rows = self._read(f"{SELECT} WHERE r.id = ANY(%s)", (ids,))
        order = {rid: n for n, rid in enumerate(ids)}
        return sorted((row_to_record(row) for row in rows), key=lambda r: order.get(r.id, 0))

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

    def close(self) -> None:
        self._pool.close()


_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^:@/?#]*):.*@")
_PASSWORD_KV = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^&\s]*)", re.IGNORECASE)


def redact(url: str) -> str:
    """The URL without its password (in the user part or as a `password=` parameter)."""
    return _PASSWORD_KV.sub(r"\1***", _USERINFO.sub(r"\1:***@", url, count=1))


def _password(conninfo: str) -> str | None:
    try:
        from psycopg.conninfo import conninfo_to_dict

        value = conninfo_to_dict(conninfo).get("password")
    except Exception:  # unparsable: the connect that follows says why
        m = _USERINFO.match(conninfo)
        value = unquote(conninfo[len(m.group(1)) + 1 : m.end() - 1]) if m else None
    return str(value) if value else None


def _pool_option(url: str) -> tuple[str, int | None]:
    """Take `pool_max=N` out of the URL's query (libpq would reject it); the rest goes to libpq."""
    base, sep, query = url.partition("?")
    if not sep or "://" not in base:
        return url, None
    keep, pool_max = [], None
    for part in query.split("&"):
        name, _, value = part.partition("=")
        if name != "pool_max":
            keep.append(part)
        elif value.isdigit() and int(value) >= 1:
            pool_max = int(value)
        else:
            raise ValidationError("pool_max", value, "give a whole number of connections >= 1")
    return base + ("?" + "&".join(keep) if keep else ""), pool_max
