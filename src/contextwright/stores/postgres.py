"""The scale-out store: PostgreSQL through psycopg 3 with a connection pool; a GIN-indexed tsvector
ranked by BM25 for full text (postgres_text.py), pgvector for vectors (postgres_vectors.py), and
the schema and write statements in postgres_schema.py. The engine keeps no state between calls,
so many workers can serve one database. Same semantics as the SQLite store, checked by the same
contract suite (docs/postgres.md lists the differences).

    store = PostgresStore("postgresql://app@db.internal/contextwright?pool_max=16")

The URL is checked with one direct connection before the pool opens: a wrong host or password
fails at once with libpq's own words (no password in them), not after a pool timeout."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any, TypeVar

from ..errors import MissingExtra, StoreError, ValidationError
from ..gate import default_limit
from ..ports import Query
from ..records import Record
from .postgres_facts import PostgresFacts
from .postgres_links import PostgresLinks
from .postgres_schema import MIGRATIONS, set_local, set_planner
from .postgres_text import COUNTS_PLANNER, VERSION_SQL, PostgresText, _version
from .postgres_url import password_of, redact, take_pool_option
from .postgres_vectors import PostgresVectors, binary_vectors
from .postgres_writes import PostgresWrites
from .rows import COLUMNS, row_to_record
from .sql import AUTHORS_SQL, refuse_newer

# The connections one process's engine may want at once: every assemble call the gate lets run
# (gate.default_limit: four per core on a store like this one), each with a read on its own
# thread while the full-text source reads on the engine's pool (SOURCE_THREADS, Engine's
# `workers`), and the embedding worker and a writer beside them. A pool grows to its maximum only
# under load (`min_size` 1); a call past it waits for a connection (psycopg_pool's queue).
SOURCE_THREADS = 4


def default_pool_max(cpus: int | None = None) -> int:
    """The pool's maximum on this machine (`cpus`, else the CPU count): 14 on two cores."""
    return default_limit(None, cpus) + SOURCE_THREADS + 2


# Serializes schema changes when many workers start at once against a fresh database.
MIGRATION_LOCK = 0x636F6E74  # "cont"
T = TypeVar("T")

# Whether the agent may see the record, from the row alone: its recipients are the names its
# `to` addressing rows hold. An EXISTS over those rows was planned as a hash of all of them (15,000
# per agent at 1M records) built on every call, however few records the LIMIT then read.
VISIBLE = (
    "(r.visibility = 'project' OR r.author = %(agent)s "
    "OR (r.visibility = 'direct' AND r.recipients::jsonb ? %(agent)s))"
)
COLS = ", ".join(f"r.{c.strip()}" for c in COLUMNS.split(","))
SELECT = f"SELECT {COLS} FROM records r"


class PostgresStore(PostgresWrites, PostgresFacts, PostgresLinks, PostgresText, PostgresVectors):
    # Its reads wait on another process (the GIL is free meanwhile), so reads on two threads
    # overlap: sources that say `inline = "local"` (full text, vectors) run on the pool here.
    remote = True

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
        conninfo, pool_max = take_pool_option(url)
        max_size = max_size if max_size is not None else pool_max or default_pool_max()
        if not isinstance(max_size, int) or max_size < 1:
            raise ValidationError("max_size", max_size, "give a pool size of at least 1")
        if not isinstance(min_size, int) or not 0 <= min_size <= max_size:
            raise ValidationError("min_size", min_size, f"give 0 to max_size ({max_size})")
        self.url = redact(url)
        self._secret = password_of(conninfo)
        self._broken_types: tuple[type[BaseException], ...] = (psycopg.OperationalError,)
        self._data_error: type[BaseException] = psycopg.DataError
        status = psycopg.pq.TransactionStatus
        self._open_states = (status.INTRANS, status.INERROR)  # a transaction to roll back
        self._select, self._cols, self._visible = SELECT, COLS, VISIBLE
        self._init_writes()
        extra: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in conninfo:
            extra["connect_timeout"] = connect_timeout
        try:
            with psycopg.connect(conninfo, **extra) as conn:
                self._migrate(conn, self.url)
            self._pool = ConnectionPool(
                conninfo, min_size=min_size, max_size=max_size, kwargs=extra, open=True,
                timeout=15, name="contextwright", configure=binary_vectors,
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
    def _migrate(conn: Any, url: str) -> None:
        names = [name for name, _ in MIGRATIONS]
        # The common case, a worker starting against a migrated database: one read, no lock.
        if conn.execute("SELECT to_regclass('migrations') IS NOT NULL").fetchone()[0]:
            done = {r[0] for r in conn.execute("SELECT name FROM migrations")}
            refuse_newer(url, done, names)
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

    def _error(self, what: str, exc: BaseException) -> StoreError | ValidationError:
        text = str(exc).strip() or type(exc).__name__
        if self._secret:
            text = text.replace(self._secret, "***")
        if isinstance(exc, UnicodeEncodeError | self._data_error):
            # Values the database refuses (NUL in text, a lone surrogate, a number out of range)
            # are the caller's input, not an outage: a 422, never a 503. Validation refuses them
            # before they get here (records.check_text); this is the net under it.
            return ValidationError(
                "input", "<value>", "send text without NUL or lone surrogates, and numbers in "
                f"range ({text})", problem="cannot be stored",
            )  # fmt: skip
        return StoreError(f"{what}: {text}")

    @staticmethod
    def _ours(exc: BaseException) -> bool:
        """Errors of the database or the pool, and text the driver cannot encode; anything else
        is a bug and propagates as is."""
        return isinstance(exc, UnicodeEncodeError) or type(exc).__module__.startswith(
            ("psycopg", "psycopg_pool")
        )

    def _read(
        self,
        sql: str,
        params: Any = None,
        *,
        planner: str | None = None,
        replan: bool = False,
        prepare: bool | None = None,
    ) -> list[Any]:
        """The rows of one read. `planner`: a planner setting ("name = value") for this read
        only, where its cost model is known to choose badly: set with `set_config(..., true)` in
        the same pipeline, whose statements up to its one Sync are one implicit transaction, so
        the setting ends with it. One round trip, where BEGIN, SET LOCAL, the read and COMMIT
        were four. `replan`: planned for its values on every run, never prepared. psycopg
        prepares a statement run 5 times on a connection, and from the sixth run on the server
        may keep one generic plan for all values, blind to them: for the full-text reads, whose
        best plan depends on the words' tsquery, the generic plan it kept was 1.8x slower (search
        9.7 ms against 5.5, word counts 4.3 against 2.1, at 100k records). `prepare=True`:
        prepared on its first run on a connection (psycopg's own choice is its fifth), for a read
        that must keep one generic plan from the start."""
        prepare = False if replan else prepare

        def read(conn: Any) -> list[Any]:
            if planner is None:
                return list(conn.execute(sql, params, prepare=prepare).fetchall())
            with conn.pipeline():
                set_planner(conn, planner)
                cur = conn.execute(sql, params, prepare=prepare)
            return list(cur.fetchall())

        return self._reading(read)

    def _reading(self, read: Callable[[Any], T]) -> T:
        """`read(conn)` on a pooled connection, tried once more if the server had dropped it."""
        for attempt in (1, 2):
            broken = False
            try:
                with self._pool.connection() as conn:
                    try:
                        return read(conn)
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

    def _run(self, sql: str, params: Any) -> list[Any]:
        """One write statement, atomic on its own (autocommit); its rows, if it returns any.
        Never retried: a connection lost after the commit would apply it twice."""
        try:
            with self._pool.connection() as conn:
                cur = conn.execute(sql, params)
                return list(cur.fetchall()) if cur.description is not None else []
        except Exception as exc:
            if self._ours(exc):
                raise self._error(f"cannot write {self.url}", exc) from exc
            raise

    def _write(self, fn: Callable[[Any], Any], *, transaction: bool = True) -> Any:
        """`fn(conn)` in one transaction: all of it is stored, or none of it. Without one, `fn`
        must make at most one write statement, which autocommit makes atomic by itself, or open
        its own transaction (to send it in one pipeline)."""
        try:
            with self._pool.connection() as conn:
                if not transaction:
                    return fn(conn)
                with conn.transaction():
                    return fn(conn)
        except StoreError:
            raise
        except Exception as exc:
            if self._ours(exc):
                raise self._error(f"cannot write {self.url}", exc) from exc
            raise

    def _piped(self, fn: Callable[[Any], T], *, durable: bool = True, pipeline: bool = True) -> T:
        """`fn(conn)` in one transaction whose BEGIN, statements and COMMIT are sent in one
        pipeline: one round trip, or one more for each answer `fn` reads before its end.
        Plain BEGIN and COMMIT: psycopg's transaction() syncs after its BEGIN and before its
        COMMIT in a pipeline (three round trips). `durable=False`: the commit returns before
        the write-ahead log is flushed (for this transaction only; docs/postgres.md). Not
        `pipeline`: the same transaction, statement by statement (COPY cannot be piped)."""

        def write(conn: Any) -> T:
            try:
                with conn.pipeline() if pipeline else nullcontext():
                    conn.execute("BEGIN")
                    if not durable:
                        set_local(conn, "synchronous_commit", "off")
                    out = fn(conn)
                    conn.execute("COMMIT")
            except BaseException:
                if conn.info.transaction_status in self._open_states:  # not if the link broke
                    conn.execute("ROLLBACK")
                raise
            return out

        result: T = self._write(write, transaction=False)
        return result

    # -- records --------------------------------------------------------------------------------

    def _get_many(self, conn: Any, project: str, ids: Sequence[str]) -> list[Record]:
        if not ids:
            return []
        rows = conn.execute(
            f"{SELECT} WHERE r.project = %s AND r.id = ANY(%s)", (project, list(ids))
        ).fetchall()
        order = {rid: n for n, rid in enumerate(ids)}
        return sorted((row_to_record(row) for row in rows), key=lambda r: order.get(r.id, 0))

    def get_many(self, project: str, ids: Sequence[str]) -> list[Record]:
        ids = list(ids)
        if not ids:
            return []
        rows = self._read(f"{SELECT} WHERE r.project = %s AND r.id = ANY(%s)", (project, ids))
        order = {rid: n for n, rid in enumerate(ids)}
        return sorted((row_to_record(row) for row in rows), key=lambda r: order.get(r.id, 0))

    def query(self, q: Query) -> list[Record]:
        return [row_to_record(row) for row in self._read(*_query_sql(q))]

    def query_many(self, queries: Sequence[Query]) -> list[list[Record]]:
        """Each query's records as `query` gives them, all in one round trip: psycopg's pipeline
        mode sends every statement before it waits for the first answer. An assemble call's
        inline sources make six reads; one at a time, each waited ~0.3 ms on the server and as
        long again for the GIL on a busy process."""
        if not queries:
            return []
        found = self._read_many([_query_sql(q) for q in queries])
        return [[row_to_record(row) for row in rows] for rows in found]

    def _read_many(
        self, statements: Sequence[tuple[str, Any]], counts: tuple[str, Any] | None = None
    ) -> list[list[Any]]:
        """The rows of each read, sent together and answered together (one Sync); one read
        alone is `_read`'s, with no pipeline around it. `counts`: the word counts' statement
        (`counts_read`), sent last with its planner setting; its rows come last."""
        if len(statements) == 1 and counts is None:
            return [self._read(*statements[0])]

        def read(conn: Any) -> list[list[Any]]:
            with conn.pipeline():
                cursors = [conn.cursor() for _ in statements]
                for cur, (sql, params) in zip(cursors, statements, strict=True):
                    cur.execute(sql, params)
                if counts is not None:
                    # After the other reads: the setting is the counts' alone, until the Sync.
                    set_planner(conn, COUNTS_PLANNER)
                    cursors.append(conn.execute(*counts, prepare=True))
            return [list(cur.fetchall()) for cur in cursors]

        return self._reading(read)

    def replies_to(self, project: str, ids: Sequence[str], agent: str | None) -> list[Record]:
        if not ids:
            return []
        return [row_to_record(row) for row in self._read(*self._replies_sql(project, ids, agent))]

    def neighbours(
        self, project: str, agent: str, anchors: Sequence[tuple[str | None, float]]
    ) -> list[tuple[list[Record], list[Record]]]:
        """For each (session, time): the newest record of that session said before it, and the
        two oldest said at or after it, that `agent` may see. One statement for all anchors
        (two LATERAL index scans each) instead of two round trips per anchor."""
        if not anchors:
            return []
        return self._neighbour_sides(
            self._read(*self._neighbours_sql(project, agent, anchors)), len(anchors)
        )

    @staticmethod
    def _neighbours_sql(
        project: str, agent: str, anchors: Sequence[tuple[str | None, float]]
    ) -> tuple[str, Any]:
        sql = (
            f"SELECT a.n, n.side, {', '.join('n.' + c.strip() for c in COLUMNS.split(','))} "
            "FROM unnest(%(s)s::text[], %(t)s::float8[]) WITH ORDINALITY AS a(session, at, n) "
            "CROSS JOIN LATERAL ("
            f"(SELECT 0 AS side, r.rid, {COLS} FROM records r WHERE r.project = %(project)s "
            f"AND r.session = a.session AND r.created_at < a.at AND {VISIBLE} "
            "ORDER BY r.created_at DESC, r.rid DESC LIMIT 1) UNION ALL "
            f"(SELECT 1 AS side, r.rid, {COLS} FROM records r WHERE r.project = %(project)s "
            f"AND r.session = a.session AND r.created_at >= a.at AND {VISIBLE} "
            "ORDER BY r.created_at, r.rid LIMIT 2)) n ORDER BY a.n, n.side, n.created_at, n.rid"
        )
        params = {
            "project": project,
            "agent": agent,
            "s": [s for s, _ in anchors],
            "t": [float(t) for _, t in anchors],
        }
        return sql, params

    @staticmethod
    def _neighbour_sides(rows: Sequence[Any], n: int) -> list[tuple[list[Record], list[Record]]]:
        out: list[tuple[list[Record], list[Record]]] = [([], []) for _ in range(n)]
        for row in rows:
            out[row[0] - 1][row[1]].append(row_to_record(row[2:]))
        return out

    def superseded_by(self, project: str, ids: Sequence[str]) -> dict[str, str]:
        if not ids:
            return {}
        return {old: new for old, new in self._read(*self._replaced_sql(project, ids))}

    def version(self, project: str) -> int:
        return _version(self._read(VERSION_SQL, {"p": project}))

    def doc_with_version(
        self, collection: str, project: str, doc_id: str, words: Sequence[str] = ()
    ) -> tuple[dict[str, Any] | None, int]:
        """`get_doc` and `version` in one statement: an assemble call's first two reads. With
        `words` (the task's), the word counts its full-text search would read next go in the same
        round trip, where they are all it would read (`counts_read`); the search then finds
        them counted."""
        sql = (
            "SELECT (SELECT data FROM docs WHERE collection = %(c)s AND id = %(id)s AND "
            f"project = %(p)s), ({VERSION_SQL})"
        )
        params = {"c": collection, "id": doc_id, "p": project}
        counts = self.counts_read(words) if words else None
        if counts is None:
            ((data, version),) = self._read(sql, params)
        else:
            counts_sql, counts_params, keep = counts
            try:
                ((data, version),), rows = self._read_many(
                    [(sql, params)], (counts_sql, counts_params)
                )
            except StoreError:  # the search counts them itself, and reports its failure
                ((data, version),) = self._read(sql, params)
            else:
                keep(rows)
        return (None if data is None else dict(json.loads(data))), int(version or 0)

    def projects(self) -> list[str]:
        return [r[0] for r in self._read("SELECT project FROM project_versions ORDER BY project")]

    def agents(self, project: str) -> list[str]:
        rows = self._read(AUTHORS_SQL.format(p="%(p)s"), {"p": project})
        return [r[0] for r in rows]

    def count(self, project: str | None = None) -> int:
        if project is None:
            return int(self._read("SELECT count(*) FROM records")[0][0])
        return int(self._read("SELECT count(*) FROM records WHERE project = %s", (project,))[0][0])

    def close(self) -> None:
        self._pool.close()


def _one_of(column: str, name: str, values: Sequence[str], params: dict[str, Any]) -> str:
    """`column = value` for one value: the planner reads an index in order past an equality, not
    past `= ANY(array)`, so "the 20 newest open tasks" would sort every open record first."""
    if len(values) == 1:
        params[name] = values[0]
        return f"{column} = %({name})s"
    params[name] = list(values)
    return f"{column} = ANY(%({name})s)"


def _query_sql(q: Query) -> tuple[str, dict[str, Any]]:
    """The statement and parameters of `q`, for `query` and `query_many`."""
    where = ["r.project = %(project)s"]
    params: dict[str, Any] = {"project": q.project, "agent": q.agent, "limit": q.limit}
    join = ""
    if q.agent is not None:
        where.append(VISIBLE)
    if q.kinds is not None:
        where.append(_one_of("r.kind", "kinds", q.kinds, params))
    if q.statuses is not None:
        where.append(_one_of("r.current_status", "statuses", q.statuses, params))
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
    if q.tag is not None:
        join += (
            " JOIN record_tags tg ON tg.project = r.project AND tg.tag = %(tag)s AND tg.rid = r.rid"
        )
        params["tag"] = q.tag
    order = "DESC" if q.newest_first else "ASC"
    if q.addressed_to is None:
        ordered = f"ORDER BY r.created_at {order}, r.rid {order} LIMIT %(limit)s"
        return f"{SELECT}{join} WHERE {' AND '.join(where)} {ordered}", params
    params["addr"] = q.addressed_to
    return _addressed_sql(join, " AND ".join(where), order), params


def _addressed_sql(join: str, where: str, order: str) -> str:
    """Records addressed to %(addr)s (by `to` or @mention), in time order: the name's addressing
    rows walked in that order through their index (m010_addressing_time), each joined to its
    record and tested against the query's filters, until the limit is found; a record addressed
    both ways is one row of each, side by side in that order, kept once (DISTINCT ON). As SQLite's
    addressed_time: the work follows the records returned and those the filters pass over, not
    the records addressed to the name nor the project's size. All in one query with its LIMIT, so
    that the planner costs the walk for the rows the LIMIT takes: a DISTINCT subquery was planned
    for all of the name's rows, and sorted them (2.4-4 ms at 100k records, not 0.3) wherever the
    index's pages were not yet all-visible, as after m010 until a VACUUM."""
    return (
        f"SELECT DISTINCT ON (a.created_at, a.rid) {COLS} FROM records r "
        f"JOIN addressing a ON a.rid = r.rid{join} "
        f"WHERE a.project = %(project)s AND a.name = %(addr)s AND {where} "
        f"ORDER BY a.created_at {order}, a.rid {order} LIMIT %(limit)s"
    )
