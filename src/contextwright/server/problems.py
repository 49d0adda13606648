"""Errors at the HTTP edge, as RFC 9457 problem details (application/problem+json).

The library raises its own error tree; this module is the one place that turns it into status
codes. Bad input is always a 4xx that names the field; nothing a client sends can produce a 500.

    ValidationError, BudgetError, RuleError, ContextOverflow -> 422
    UnicodeError (text that is not valid UTF-8 and got past validation) -> 422
    NotFound -> 404          StoreError -> 503          MissingExtra -> 501
    request validation (wrong types, missing fields, bad JSON) -> 422 naming the field
    HTTPProblem (auth, body size, unknown routes) -> its own status
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import (
    BudgetError,
    ContextOverflow,
    ContextwrightError,
    MissingExtra,
    NotFound,
    RuleError,
    StoreError,
    ValidationError,
)
from . import schemas as schemas_module

log = logging.getLogger("contextwright.server")
MEDIA_TYPE = "application/problem+json"
_UNION_TAG = re.compile(r"^([A-Z]\w*|int|str|float|bool|list\[.*|dict\[.*|none|.*\[.*\].*)$")

STATUS: list[tuple[type[ContextwrightError], int, str]] = [
    (ValidationError, 422, "Invalid input"),
    (BudgetError, 422, "Budget too small"),
    (ContextOverflow, 422, "Context overflow"),
    (RuleError, 422, "Invalid rule"),
    (NotFound, 404, "Not found"),
    (StoreError, 503, "Store unavailable"),
    (MissingExtra, 501, "Optional part not installed"),
]


BODY_UNREADABLE = "There was an error parsing the body"
UNREADABLE_FIX = (
    "send it as UTF-8, with objects and lists nested fewer than 500 levels deep and numbers of "
    "fewer than 4,300 digits"
)

# What any route can answer besides its success, as problem details (see `install`): a body that
# does not parse (400), a missing or wrong key (401, 403), an unknown id (404), the wrong method
# (405), a body over the limit (413), invalid input (422), an unavailable store (503).
ERROR_STATUSES = {
    "400": "The body is not JSON",
    "401": "No API key, or an unknown one",
    "403": "The key may not use this project",
    "404": "No such record, trace, task, agent or key",
    "405": "Method not allowed",
    "413": "The body is over the size limit",
    "422": "Invalid input: the problem names the field, the value and the fix",
    "503": "The store is unavailable",
}
PROBLEM_SCHEMA: dict[str, Any] = {
    "title": "Problem",
    "description": "RFC 9457 problem details",
    "type": "object",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "field": {"type": "string"},
        "errors": {"type": "array", "items": {"type": "object"}},
    },
}


class HTTPProblem(Exception):
    """An edge-only error (authentication, scope, body size) with its status code."""

    def __init__(self, status: int, title: str, detail: str, field: str | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.title = title
        self.detail = detail
        self.field = field


def problem(
    status: int,
    title: str,
    detail: str,
    *,
    kind: str,
    field: str | None = None,
    **extra: Any,
) -> JSONResponse:
    body: dict[str, Any] = {
        "type": f"/problems/{kind}",
        "title": title,
        "status": status,
        "detail": detail,
    }
    if field is not None:
        body["field"] = field
    body.update({k: v for k, v in extra.items() if v is not None})
    body = _printable(body)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE, headers=headers)


def _printable(value: Any) -> Any:
    """A problem quotes what the client sent (a field path, a value); text that is not valid
    UTF-8 (a lone surrogate) is written as its escape, so that the answer can always be encoded."""
    if isinstance(value, str):
        return value if value.isascii() else value.encode("utf-8", "backslashreplace").decode()
    if isinstance(value, dict):
        return {_printable(k): _printable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_printable(v) for v in value]
    return value


def field_of(loc: Sequence[Any]) -> str:
    """("body", "records", 0, "content") -> "records[0].content"; the location prefix is dropped."""
    parts = list(loc)
    if parts and parts[0] in ("body", "query", "path", "header", "cookie"):
        parts = parts[1:]
    out = ""
    for p in parts:
        if isinstance(p, str) and _UNION_TAG.match(p):
            continue  # pydantic names the union member it tried ("BudgetIn", "int"); not a field
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + str(p)
    return out or (str(loc[0]) if loc else "body")


def _count(request: Request, kind: str, status: int) -> None:
    metrics = getattr(request.app.state, "metrics", None)
    if metrics is not None:
        metrics.errors.labels(type=kind, status=str(status)).inc()


def document(app: FastAPI) -> None:
    """Make the app's OpenAPI say what `install` does: every operation's error answers are
    application/problem+json with the Problem schema (FastAPI's own 422 entry says
    application/json with its validation schema, which is not what is sent)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        schemas = schema.setdefault("components", {}).setdefault("schemas", {})
        schemas["Problem"] = PROBLEM_SCHEMA
        for name in ("HTTPValidationError", "ValidationError"):
            schemas.pop(name, None)
        ref = {"schema": {"$ref": "#/components/schemas/Problem"}}
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                for status, text in ERROR_STATUSES.items():
                    responses[status] = {"description": text, "content": {MEDIA_TYPE: ref}}
        schemas_module.apply(schema)  # success models, request enums, the key scheme
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def install(app: FastAPI) -> None:
    """Register the handlers that turn every error into problem details, and document them."""
    document(app)

    @app.exception_handler(ContextwrightError)
    async def library_error(request: Request, exc: ContextwrightError) -> JSONResponse:
        status, title = 500, "Error"
        for cls, code, text in STATUS:
            if isinstance(exc, cls):
                status, title = code, text
                break
        _count(request, exc.error_type, status)
        details = {k: v for k, v in exc.details.items() if k != "field"}
        field = getattr(exc, "field", None) or exc.details.get("field")
        if isinstance(exc, NotFound) and field is None:
            field = exc.what
        return problem(status, title, exc.message, kind=exc.error_type, field=field, **details)

    @app.exception_handler(RequestValidationError)
    async def request_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {
                "field": field_of(e.get("loc", ())),
                "message": str(e.get("msg", "")),
                "type": e.get("type"),
            }
            for e in exc.errors()
        ]
        first = errors[0] if errors else {"field": "body", "message": "invalid request"}
        detail = f"{first['field']}: {first['message']}"
        if len(errors) > 1:
            detail += f" (and {len(errors) - 1} more)"
        _count(request, "validation_error", 422)
        return problem(
            422,
            "Invalid request",
            detail,
            kind="validation_error",
            field=first["field"],
            errors=errors,
        )

    @app.exception_handler(HTTPProblem)
    async def edge_error(request: Request, exc: HTTPProblem) -> JSONResponse:
        kind = exc.title.lower().replace(" ", "_")
        _count(request, kind, exc.status)
        return problem(exc.status, exc.title, exc.detail, kind=kind, field=exc.field)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        title = {404: "Not found", 405: "Method not allowed"}.get(exc.status_code, "HTTP error")
        detail, field, fix = str(exc.detail), None, None
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"no route {request.method} {request.url.path}; see /docs"
        if exc.status_code == 400 and detail == BODY_UNREADABLE:
            # FastAPI's answer when the JSON parser fails other than on syntax (that is a 422):
            # bytes that are not UTF-8, nesting deeper than its recursion allows, a 4,300+ digit number.
            field, fix = "body", UNREADABLE_FIX
            detail = f"body: the body cannot be read as JSON: {fix}"
        _count(request, "http_error", exc.status_code)
        return problem(
            exc.status_code,
            title,
            detail,
            kind=title.lower().replace(" ", "_"),
            field=field,
            fix=fix,
        )

    @app.exception_handler(UnicodeError)
    async def text_error(request: Request, exc: UnicodeError) -> JSONResponse:
        # Text that is not valid UTF-8 (a lone surrogate from a JSON \\ud800 escape) that got
        # past validation: the client's input, so a 4xx; logged, as validation should catch it.
        log.warning("text not valid UTF-8 on %s %s: %s", request.method, request.url.path, exc)
        _count(request, "validation_error", 422)
        return problem(
            422,
            "Invalid text",
            "the request holds text that is not valid UTF-8 (a lone surrogate such as \\ud800); "
            "send every \\uD800-\\uDFFF escape as a high and low pair",
            kind="validation_error",
        )

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        # A bug, not bad input: log it whole, answer without internals.
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        _count(request, "internal", 500)
        return problem(
            500,
            "Internal error",
            f"{type(exc).__name__}; see the server log",
            kind="internal",
        )
