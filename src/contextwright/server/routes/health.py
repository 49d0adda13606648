"""Health and Prometheus metrics."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from ... import __version__
from ...errors import ContextwrightError, StoreError

router = APIRouter(tags=["health"])


@router.get("/health")
def health(request: Request) -> dict[str, Any]:
    engine = request.app.state.engine
    try:
        engine.store.version("__health__")  # touches the store
    except ContextwrightError:
        raise
    except Exception as exc:  # a broken store is a 503, not a 500
        raise StoreError(f"the store does not answer: {type(exc).__name__}: {exc}") from exc
    return {"status": "ok", "version": __version__}


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {
            "description": "Prometheus metrics, in its text format",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }
    },
)
def metrics(request: Request) -> Response:
    return Response(request.app.state.metrics.render(), media_type=CONTENT_TYPE_LATEST)
