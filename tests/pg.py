"""A real PostgreSQL (with pgvector) for the contract suite: the PyPI package `pgserver` ships the
binaries and runs them unprivileged (as root it runs the server as a `pgserver` system user).
One server and one migrated database per test session; every test starts from empty tables.

The server is disposable, so it is run for speed, not durability: its data lives in memory
(/dev/shm) where there is room, and fsync, synchronous commit and full-page writes are off. A
commit then costs a round trip instead of a disk flush (a few milliseconds less per write on a
busy machine), and the shutdown checkpoint at the end of the session has nothing to flush."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from contextwright.stores.postgres import PostgresStore

TABLES = (
    "records, record_words, addressing, record_tags, status_facts, project_versions, edges, kv, "
    "docs, vectors"
)
# One round trip per test. DELETE, not TRUNCATE: the tables are small, and TRUNCATE makes files.
EMPTY = "; ".join(f"DELETE FROM {t}" for t in TABLES.split(", "))
NO_DURABILITY = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


def _data_parent() -> str:
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK):
        st = os.statvfs(shm)
        if st.f_bavail * st.f_frsize > 1 << 30:
            return shm
    return "/tmp"


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    # platformdirs warns (an error under filterwarnings=error) without a runtime dir.
    if "XDG_RUNTIME_DIR" not in os.environ:
        runtime = os.path.join(tempfile.gettempdir(), f"cw-xdg-{os.getuid()}")
        os.makedirs(runtime, mode=0o700, exist_ok=True)
        os.environ["XDG_RUNTIME_DIR"] = runtime
    import pgserver
    import psycopg

    from contextwright.stores.postgres import PostgresStore

    # pytest's tmp dirs are private to root (0700); the server's user must reach its data dir.
    pgdata = tempfile.mkdtemp(prefix="cw-pg-", dir=_data_parent())
    os.chmod(pgdata, 0o755)
    server: Any = pgserver.get_server(pgdata, cleanup_mode="stop")
    try:
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            for name, value in NO_DURABILITY.items():
                conn.execute(f"ALTER SYSTEM SET {name} = {value}")
            conn.execute("SELECT pg_reload_conf()")
            conn.execute("CREATE DATABASE cw_test")
        url = _with_db(server.get_uri(), "cw_test")
        PostgresStore(url, max_size=1).close()  # applies the migrations once
        yield url
    finally:
        server.cleanup()
        shutil.rmtree(pgdata, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: str) -> str:
    import psycopg

    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(EMPTY)
    return pg_server


@pytest.fixture
def pg(pg_url: str) -> Iterator[PostgresStore]:
    """A PostgresStore on the emptied database, closed after the test."""
    from contextwright.stores.postgres import PostgresStore

    store = PostgresStore(pg_url)
    yield store
    store.close()


def _with_db(uri: str, name: str) -> str:
    base, _, query = uri.partition("?")
    return base.rsplit("/", 1)[0] + f"/{name}" + (f"?{query}" if query else "")


@contextmanager
def pq_traced(store: PostgresStore) -> Iterator[list[str]]:
    """libpq's protocol trace of a store of one connection while the block runs: one message a
    line (a statement's text may run over several), the file's text in the list after the block
    (untrace flushes libpq's buffer)."""
    fd, path = tempfile.mkstemp(suffix=".pqtrace")
    text: list[str] = []
    try:
        with store._pool.connection() as conn:
            conn.pgconn.trace(fd)
        try:
            yield text
        finally:
            with store._pool.connection() as conn:
                conn.pgconn.untrace()
        with open(path) as f:
            text.append(f.read())
    finally:
        os.close(fd)
        os.unlink(path)
