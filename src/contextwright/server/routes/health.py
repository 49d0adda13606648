"""Health and Prometheus metrics."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from ... import __version__

router = APIRouter(tags=["health"])


@router.get("/health")
def health(request: Request) -> dict[str, Any]:
    engine = request.app.state.engine
    engine.store.version("__health__")  # touches the store: a broken store answers 503
    return {"status": "ok", "version": __version__}


@router.get("/metrics")
def metrics(request: Request) -> Response:
    return Response(request.app.state.metrics.render(), media_type=CONTENT_TYPE_LATEST)
