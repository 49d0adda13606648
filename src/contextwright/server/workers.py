"""Many server processes on one database: `contextwright serve --workers N`.

uvicorn starts N processes that share the listening socket; each builds its own engine and app
from the settings its parent put in the environment (`to_env`), the same way `Settings.from_env`
reads them for one process. The processes share nothing but the database: every per-process cache
of the engine and the stores is keyed by the project's store version, which every write through any
process raises in its own transaction (docs/scaling.md).
"""

from __future__ import annotations

import copyreg
import json
import os
import socket
from typing import Any

from fastapi import FastAPI

from ..errors import ValidationError
from ..gate import default_limit
from ..heap import settle_heap
from ..settings import Settings

# Where `serve --workers N` has its workers publish how many connections each serves (balance.py).
BALANCE_DIR = "CONTEXTWRIGHT_WORKERS_DIR"
# The database's connection budget that the workers share: PostgreSQL allows 100 by default; a
# few are left for psql, backups and migrations.
PG_CONNECTIONS = 90


def default_workers(cpus: int | None = None) -> int:
    """One process per core: the engine's work is Python (the GIL), so a process per core is what
    a machine can run at once; the database's waits are covered by each process's threads."""
    n = os.cpu_count() if cpus is None else cpus
    return max(1, n or 1)


def worker_slots(store: object, workers: int) -> int:
    """Each worker's share of the machine's assemble calls (`default_limit`, one per core on
    SQLite): the workers' gates together admit what one process's would. Every worker taking the
    whole default had two assemble threads per core running beside the adds, and an add waited
    behind them for the GIL at every store call (bench/load.py, 2 workers on 2 cores: add p50
    about 0.4x, add p99 about 0.6x with one slot each; assemble p99 about 1.3x)."""
    return max(1, default_limit(store) // max(1, workers))


def check_workers(workers: int, db: str) -> None:
    if workers > 1 and db.startswith("memory:"):
        raise ValidationError(
            "workers", workers, "use --workers 1 with memory:// (each process would have its own "
            "store), or a sqlite:/// file or postgresql:// database",
        )  # fmt: skip


def pool_url(db: str, workers: int) -> str:
    """`db` with a per-process pool size, unless it names one: what one process's calls and
    threads want at once (`default_pool_max`), fewer when the workers together would pass
    PG_CONNECTIONS."""
    if not db.startswith(("postgresql:", "postgres:")) or "pool_max=" in db:
        return db
    from ..stores.postgres import default_pool_max  # psycopg is not imported by this

    size = max(2, min(default_pool_max(), PG_CONNECTIONS // max(workers, 1)))
    return db + ("&" if "?" in db else "?") + f"pool_max={size}"


def to_env(settings: Settings, prefix: str = "CONTEXTWRIGHT_") -> dict[str, str]:
    """The environment from which `Settings.from_env` gives back `settings`."""
    keys: dict[str, Any] = {
        key: list(scope.projects)
        if scope.agents is None
        else {"project": scope.projects[0], "agents": list(scope.agents)}
        for key, scope in settings.api_keys.items()
    }
    env = {
        "DB": settings.db,
        "HOST": settings.host,
        "PORT": str(settings.port),
        "MAX_BODY_BYTES": str(settings.max_body_bytes),
        "LOG_LEVEL": settings.log_level,
        "EMBEDDER": settings.embedder,
        "DEBUG_CONTEXT": "true" if settings.debug_context else "",
        "RULES_DIR": settings.rules_dir or "",
        "PIPELINES": settings.pipelines or "",
        "API_KEYS": json.dumps(keys) if keys else "",
        "ASSEMBLE_SLOTS": "" if settings.assemble_slots is None else str(settings.assemble_slots),
    }
    return {prefix + k: v for k, v in env.items()}


def app_from_env() -> FastAPI:
    """uvicorn's factory in each worker process: the engine and the app of the parent's settings."""
    from ..engine import Engine
    from . import create_app

    settings = Settings.from_env()
    options: dict[str, Any] = {}
    if settings.rules_dir:
        options["rules"] = settings.rules_dir
    if settings.pipelines:
        options["pipelines"] = settings.pipelines
    # A worker serves: "auto" keeps vectors on (as `serve` with one process); "none" must reach
    # Engine.open as None, whose own default is "auto".
    options["embedder"] = None if settings.embedder == "none" else settings.embedder
    options["assemble_slots"] = settings.assemble_slots
    app = create_app(Engine.open(settings.db, **options), settings, close_engine=True)
    shared = os.environ.get(BALANCE_DIR)
    if shared and os.path.isdir(shared):
        from .balance import Balance

        app.add_middleware(Balance, directory=shared)
    # As `serve` settles its one process: start-up's objects out of every later full GC
    # collection, the young generation sized for assemble calls.
    settle_heap()
    return app


class PortShare(socket.socket):
    """The parent's socket under `--workers N`: bound with SO_REUSEPORT and never listening, it
    holds the port; each worker it is handed to gets, in its place, a listening socket of its own
    on the same port (`_handed_over`, called when uvicorn passes it to the worker). The kernel
    then spreads new connections over the workers' sockets by their addresses. On one shared
    listening socket the first worker to wake took every connection waiting (16 keep-alive
    clients split 16/0, 14/2 and 9/7 over 2 workers in three tries), and the busier process kept
    them for good."""

    @classmethod
    def bind_to(cls, host: str, port: int) -> PortShare:
        """Raises OSError (EADDRINUSE) when anything listens on the port already: SO_REUSEPORT
        alone would let this server share the port with another one of the same user, each
        answering some of the connections, where uvicorn's one socket refused to start."""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
        sock = cls(family, socket.SOCK_STREAM)
        try:
            reuse(sock)
            sock.bind((host, port))
        except OSError:
            sock.close()
            raise
        return sock


def reuse(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)


def worker_socket(family: int, host: str, port: int) -> socket.socket:
    """A worker's own socket on the parent's port (uvicorn makes it listen)."""
    sock = socket.socket(family, socket.SOCK_STREAM)
    reuse(sock)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def _handed_over(sock: PortShare) -> tuple[Any, ...]:
    """What a worker unpickles in the PortShare's place: a listening socket of its own."""
    host, port = sock.getsockname()[:2]
    return (worker_socket, (int(sock.family), host, port))


copyreg.pickle(PortShare, _handed_over)


def shares_ports() -> bool:
    """Whether this system spreads connections over sockets on one port (Linux, BSDs, macOS
    have SO_REUSEPORT; Windows has not, and its workers share uvicorn's one socket)."""
    return hasattr(socket, "SO_REUSEPORT") and os.name != "nt"
