"""/docs (Swagger UI) with every asset served by this server, so that it works on a machine with no
internet. FastAPI's own pages load Swagger UI, ReDoc and a favicon from CDNs: offline, /docs was a
blank page. The files come from the `fastapi-offline` package (in the 'server' extra), which ships
Swagger UI 5 (it reads OpenAPI 3.1, which FastAPI writes). There is no /redoc: ReDoc's page still
loads its logo from a CDN, and one docs page that works everywhere is enough.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from ..errors import MissingExtra

ASSETS_URL = "/docs-assets"


def assets_dir() -> Path:
    spec = importlib.util.find_spec("fastapi_offline")
    if spec is None or spec.origin is None:
        raise MissingExtra("the offline /docs page (fastapi-offline)", "server")
    return Path(spec.origin).parent / "static"


def install(app: FastAPI) -> None:
    """Serve /docs and its OAuth2 redirect from local files; the app must be made with
    `docs_url=None, redoc_url=None`, so that FastAPI's CDN pages are not there."""
    app.mount(ASSETS_URL, StaticFiles(directory=assets_dir()), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"
    redirect_url = app.swagger_ui_oauth2_redirect_url or "/docs/oauth2-redirect"

    @app.get("/docs", include_in_schema=False)
    def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=root + redirect_url,
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            swagger_ui_parameters=app.swagger_ui_parameters,
        )

    @app.get(redirect_url, include_in_schema=False)
    def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()
