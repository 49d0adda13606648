"""A real PostgreSQL (with pgvector) for the contract suite: the PyPI package `pgserver` ships the
binaries and runs them unprivileged (as root it runs the server as a `pgserver` system user).
One server and one migrated database per test session; every test starts from empty tables."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

TABLES = (
    "records, addressing, record_tags, status_facts, project_versions, edges, kv, docs, vectors"
)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    # platformdirs warns (an error under filterwarnings=error) without a runtime dir.
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="cw-xdg-"))
    import pgserver
    import psycopg

    from contextwright.stores.postgres import PostgresStore

    # pytest's tmp dirs are private to root (0700); the server's user must reach its data dir.
    pgdata = tempfile.mkdtemp(prefix="cw-pg-", dir="/tmp")
    os.chmod(pgdata, 0o755)
    server: Any = pgserver.get_server(pgdata, cleanup_mode="stop")
    try:
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
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
        # DELETE, not TRUNCATE: the tables are small, and TRUNCATE's new files cost an fsync each.
        for table in TABLES.split(", "):
            conn.execute(f"DELETE FROM {table}")
    return pg_server


def _with_db(uri: str, name: str) -> str:
    base, _, query = uri.partition("?")
    return base.rsplit("/", 1)[0] + f"/{name}" + (f"?{query}" if query else "")
