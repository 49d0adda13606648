"""Service commands: serve (HTTP API + inspector) and mcp (the MCP server)."""

from __future__ import annotations

import os
import re
import socket
import tempfile
from typing import Any

import click

from .. import heap
from ..errors import MissingExtra
from . import State, cli, pass_state


@cli.command()
@click.option("--db", metavar="URL", default=None, help="Store URL (same as the group's --db).")
@click.option("--host", default=None, help="Interface to bind (default 127.0.0.1).")
@click.option("--port", default=None, type=click.IntRange(0, 65535), help="Default 8765.")
@click.option(
    "--log-level",
    default=None,
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
)
@click.option(
    "--workers",
    default=None,
    type=click.IntRange(1, 256),
    help="Server processes on the one database (default: one per CPU core).",
)
@click.option(
    "--assemble-slots",
    default=None,
    type=click.IntRange(0),
    help="Assemble calls each process runs at once; the rest wait their turn, so that adds are "
    "not starved (default: one per core on SQLite, four per core on PostgreSQL, shared among "
    "the workers, at least one each; 0: no limit; or CONTEXTWRIGHT_ASSEMBLE_SLOTS).",
)
@pass_state
def serve(
    state: State,
    db: str | None,
    host: str | None,
    port: int | None,
    log_level: str | None,
    workers: int | None,
    assemble_slots: int | None,
) -> None:
    """Run the HTTP API and the inspector on 127.0.0.1 (SQLite file by default; --db for any store)."""
    try:
        import fastapi  # noqa: F401
        import uvicorn
    except ImportError:
        raise MissingExtra("contextwright serve", "server") from None

    from ..server import create_app
    from ..server.workers import (
        BALANCE_DIR,
        PortShare,
        check_workers,
        default_workers,
        pool_url,
        shares_ports,
        to_env,
        worker_slots,
    )

    if db:
        state.settings = state.settings.with_(db=db)
    if assemble_slots is not None:
        state.settings = state.settings.with_(assemble_slots=assemble_slots)
    if workers is None:
        # memory:// is one process's store: more processes would each have their own.
        workers = 1 if state.settings.db.startswith("memory:") else default_workers()
    check_workers(workers, state.settings.db)
    state.settings = state.settings.with_(db=pool_url(state.settings.db, workers))
    settings = state.settings.with_(
        **{
            k: v
            for k, v in {"host": host, "port": port, "log_level": log_level}.items()
            if v is not None
        }
    )
    if settings.port == 0:  # any free port, so that the printed URL is the real one
        with socket.socket() as sock:
            sock.bind((settings.host, 0))
            settings = settings.with_(port=int(sock.getsockname()[1]))
    shown = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
    shown_db = re.sub(r"://[^/@]*@", "://***@", settings.db)  # never print a password
    if workers > 1:
        # Each worker opens its own engine (the factory reads these settings back); opening the
        # store once here first applies the migrations before N processes race for them. The
        # parent is not serving, so under embedder "auto" it loads no model; the workers do.
        if settings.assemble_slots is None:
            slots = worker_slots(state.engine.store, workers)
            settings = settings.with_(assemble_slots=slots)
        else:
            state.engine  # noqa: B018
        state.close()
        os.environ.update(to_env(settings))
        click.echo(f"contextwright serving {shown_db} with {workers} workers", err=True)
        click.echo(f"inspector: http://{shown}:{settings.port}/inspector/", err=True)
        click.echo(f"API docs:  http://{shown}:{settings.port}/docs", err=True)
        options: dict[str, Any] = {
            "factory": True,
            "workers": workers,
            "host": settings.host,
            "port": settings.port,
            "log_level": settings.log_level,
        }
        if not shares_ports():
            uvicorn.run("contextwright.server.workers:app_from_env", **options)
            return
        from uvicorn.supervisors import Multiprocess

        # As uvicorn.run with workers, but each worker listening on a socket of its own.
        config = uvicorn.Config("contextwright.server.workers:app_from_env", **options)
        try:
            held = PortShare.bind_to(settings.host, settings.port)
        except OSError as exc:
            raise click.ClickException(
                f"cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}; "
                "stop what listens there or give another --port"
            ) from None
        with tempfile.TemporaryDirectory(prefix="contextwright-workers-") as shared:
            os.environ[BALANCE_DIR] = shared
            Multiprocess(config, sockets=[held]).run()
        return
    state.serving = True
    # The app closes the engine when uvicorn shuts down: after SIGTERM uvicorn raises the signal
    # again once it has stopped, which ends the process before click would close it.
    app = create_app(state.engine, settings, close_engine=True)
    config = uvicorn.Config(
        app, host=settings.host, port=settings.port, log_level=settings.log_level
    )
    server = uvicorn.Server(config)
    click.echo(f"contextwright serving {shown_db}", err=True)
    click.echo(f"inspector: http://{shown}:{settings.port}/inspector/", err=True)
    click.echo(f"API docs:  http://{shown}:{settings.port}/docs", err=True)
    heap.settle_heap()  # once, just before the server answers
    server.run()


@cli.command()
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio for a local agent, http for streamable HTTP.",
)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--db", metavar="URL", default=None, help="Store URL (same as the group's --db).")
@click.option("--port", default=8766, show_default=True, type=click.IntRange(1, 65535))
@pass_state
def mcp(state: State, transport: str, host: str, db: str | None, port: int) -> None:
    """Run the MCP server (tools: post_message, assemble_context, search_memory, ...)."""
    from ..mcp.server import build_server

    if db:
        state.settings = state.settings.with_(db=db)
    state.serving = True
    server = build_server(state.engine)
    heap.settle_heap()  # once, just before the server answers
    if transport == "stdio":
        server.run("stdio")
    else:
        click.echo(f"MCP streamable HTTP: http://{host}:{port}/mcp", err=True)
        server.run("streamable-http", host=host, port=port)
