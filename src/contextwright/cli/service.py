"""Service commands: serve (HTTP API + inspector) and mcp (the MCP server)."""

from __future__ import annotations

import click

from . import State, cli, pass_state


@cli.command()
@click.option("--host", default=None, help="Interface to bind (default 127.0.0.1).")
@click.option("--port", default=None, type=click.IntRange(0, 65535), help="Default 8765.")
@click.option(
    "--log-level",
    default=None,
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
)
@pass_state
def serve(state: State, host: str | None, port: int | None, log_level: str | None) -> None:
    """Run the HTTP API and the inspector on 127.0.0.1 (SQLite file by default; --db for any store)."""
    import uvicorn

    from ..server import create_app

    settings = state.settings.with_(
        **{
            k: v
            for k, v in {"host": host, "port": port, "log_level": log_level}.items()
            if v is not None
        }
    )
    app = create_app(state.engine, settings)
    config = uvicorn.Config(
        app, host=settings.host, port=settings.port, log_level=settings.log_level
    )
    server = uvicorn.Server(config)
    shown = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
    click.echo(f"contextwright serving {settings.db}", err=True)
    click.echo(f"inspector: http://{shown}:{settings.port}/inspector/", err=True)
    click.echo(f"API docs:  http://{shown}:{settings.port}/docs", err=True)
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
@click.option("--port", default=8766, show_default=True, type=click.IntRange(1, 65535))
@pass_state
def mcp(state: State, transport: str, host: str, port: int) -> None:
    """Run the MCP server (tools: post_message, assemble_context, search_memory, ...)."""
    from ..mcpserver import build_server

    server = build_server(state.engine)
    if transport == "stdio":
        server.run("stdio")
    else:
        click.echo(f"MCP streamable HTTP: http://{host}:{port}/mcp", err=True)
        server.run("streamable-http", host=host, port=port)
