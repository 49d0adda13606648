"""The HTTP API and the inspector page (the 'server' extra: fastapi, uvicorn, prometheus-client)."""

from .app import create_app

__all__ = ["create_app"]
