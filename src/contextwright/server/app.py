"""The HTTP API: a FastAPI app over one Engine. Routes are thin; the engine does the work.

    app = create_app(Engine.open("sqlite:///team.db"), Settings(api_keys={"k3y-acme": ["acme"]}))

OpenAPI at /openapi.json, docs at /docs (no CDN: docs.py), the inspector at /inspector/,
metrics at /metrics.
Sync routes run in the server's thread pool, where the engine's own pool runs the sources.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

from .. import __version__
from ..engine import Engine
from ..settings import Settings
from . import docs, problems
from .fast import FastRoutes
from .limits import BodyLimit
from .metrics import Metrics, RequestCounter
from .routes import agents, assemble, health, records, traces

STATIC = Path(__file__).parent / "static"
# Routers for parts built beside the core; each is included only when its library module exists.
OPTIONAL = {
    "sessions": "contextwright.sessions",
    "tasks": "contextwright.tasks",
    "rules": "contextwright.rules.ruleset",
}


def _available(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:
        return False


def create_app(
    engine: Engine, settings: Settings | None = None, *, close_engine: bool = False
) -> FastAPI:
    """`close_engine=True` when the app owns the engine (`contextwright serve`, each of its
    workers): the engine is closed when the server shuts down, so that queued traces are written
    and SQLite checkpoints its WAL into the file instead of leaving the -wal file behind."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if close_engine:
                engine.close()

    app = FastAPI(
        lifespan=lifespan,
        title="contextwright",
        version=__version__,
        description="Context windows computed from records, with a trace of why.",
        docs_url=None,  # docs.install serves /docs without a CDN; ReDoc's page needs one
        redoc_url=None,
    )
    app.state.engine = engine
    app.state.settings = settings
    app.state.metrics = Metrics(
        lambda: engine.store.count(), lambda: engine.assembler.traces.failed
    )
    # The engine's gate reports to the app serving it (the last one made, for an engine shared).
    engine.gate.on_wait = app.state.metrics.assemble_queue_seconds.observe
    problems.install(app)
    docs.install(app)

    for module in (records, agents, assemble, traces, health):
        app.include_router(module.router)
    for name, lib in OPTIONAL.items():
        if _available(lib) and _available(f"contextwright.server.routes.{name}"):
            route_module = importlib.import_module(f"contextwright.server.routes.{name}")
            app.include_router(route_module.router)

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/inspector/")

    app.mount("/inspector", StaticFiles(directory=STATIC, html=True), name="inspector")
    app.add_middleware(FastRoutes, api=app)  # inside the metrics and the body limit (fast.py)
    app.add_middleware(RequestCounter, metrics=app.state.metrics)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    return app
