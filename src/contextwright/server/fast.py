"""The two requests a busy service answers most, adding a record and assembling a window, without
FastAPI's routing and dependency solving; every other request, and every one of these that is
not plainly well formed, goes through the app as before.

Under `bench/load.py` the event loop's thread spent ~0.7 ms of every request's ~3.5 ms of CPU,
most of it finding the route (each route's pattern in turn), solving the dependencies level by
level and validating the body through FastAPI's generic machinery, on the thread that every
request and answer of the process passes through. Here a POST to `/v1/projects/P/records` or
`/v1/projects/P/assemble` with no query string and a JSON body is checked the same way (the key,
the project's name and the key's right to it, the body against the route's own model) and handed
to the route's own function, in the same thread pool. Whenever a check fails, nothing has been
done yet: the request goes to the app, with its body replayed, and the answer is the app's, so
that every error keeps its one shape (problems.py). An exception the route raises is answered by
the app's handler for it, as the app would. An app with `dependency_overrides` (a test's) answers
every request itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pydantic
from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from .access import presented_key, resolve
from .deps import PROJECT_MAX, PROJECT_PATTERN, project_ctx
from .limits import replaying
from .routes import assemble as assemble_route
from .routes import records as records_route

PREFIX = "/v1/projects/"
# deps.ProjectName's constraints (pattern and length).
PROJECT_RE = re.compile(PROJECT_PATTERN.removesuffix("$") + r"\Z")


class FastRoutes:
    """ASGI middleware, inside the app's own middleware (metrics, body limit): see the module."""

    def __init__(self, app: ASGIApp, api: FastAPI) -> None:
        self.app = app
        self.api = api
        self.kinds: dict[str, tuple[type[pydantic.BaseModel], Callable[..., Any]]] = {
            "records": (records_route.RecordIn, records_route.add_record),
            "assemble": (assemble_route.AssembleIn, assemble_route.assemble),
        }
        # Each route as the app's router gave it to the first such request (FastAPI builds the
        # routes of included routers lazily); until then, they go through the app.
        self.routes: dict[str, APIRoute] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = self._match(scope)
        if found is None:
            await self.app(scope, receive, send)
            return
        kind, project = found
        route = self.routes.get(kind)
        if route is None:
            await self.app(scope, receive, send)
            self._learn(kind, scope.get("route"))
            return
        model, call = self.kinds[kind]
        body, replay = await _read_body(receive)
        args = self._checked(scope, project, model, body)
        if args is None:  # not plainly well formed: the app answers, as it would have
            await self.app(scope, replay, send)
            return
        scope["route"] = route  # what the metrics label requests with
        scope["endpoint"] = route.endpoint
        scope["path_params"] = {"project": project}
        try:
            response = await run_in_threadpool(call, *args)
        except Exception as exc:
            handler = self._handler(exc)
            if handler is None:
                raise  # to the app's outermost handler (a 500), as from the route
            response = await handler(Request(scope, replay), exc)
        await response(scope, replay, send)

    def _match(self, scope: Scope) -> tuple[str, str] | None:
        """The route's kind ("records", "assemble") and the project, for a request the fast
        path may answer."""
        if scope["type"] != "http" or scope["method"] != "POST" or scope.get("query_string"):
            return None
        if self.api.dependency_overrides:  # the app's own dependencies are not the ones here
            return None
        path: str = scope["path"]
        if not path.startswith(PREFIX) or scope.get("root_path"):
            return None
        project, _, kind = path[len(PREFIX) :].partition("/")
        if kind not in self.kinds or len(project) > PROJECT_MAX or not PROJECT_RE.match(project):
            return None
        return kind, project

    def _learn(self, kind: str, route: object) -> None:
        if (
            isinstance(route, APIRoute)
            and route.path == f"{PREFIX}{{project}}/{kind}"
            and "POST" in (route.methods or ())
            and route.endpoint is self.kinds[kind][1]  # the function called here, not another
        ):
            self.routes[kind] = route

    def _checked(
        self, scope: Scope, project: str, model: type[pydantic.BaseModel], body: bytes
    ) -> tuple[Any, ...] | None:
        """The route function's arguments, or None for the app to answer."""
        request = Request(scope)
        kind = request.headers.get("content-type")  # FastAPI reads no body as JSON without it
        if kind is None or kind.split(";")[0].strip().lower() != "application/json":
            return None
        try:
            access = resolve(self.api.state.settings, presented_key(request))
            ctx = project_ctx(self.api.state, access, project)
            data = model.model_validate_json(body, strict=True)
        except Exception:
            return None
        return ctx, data

    def _handler(self, exc: Exception) -> Any:
        """The app's handler for `exc`, as Starlette's ExceptionMiddleware picks it; not the one
        for any Exception, which the app's outermost middleware calls."""
        for cls in type(exc).__mro__:
            if cls is Exception:
                return None
            handler = self.api.exception_handlers.get(cls)
            if handler is not None:
                return handler
        return None


async def _read_body(receive: Receive) -> tuple[bytes, Receive]:
    """The whole body, and a `receive` that hands over again what was read (the body, or the
    client's leaving), then what `receive` says next."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client left: let the app see it
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            message = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            break
    body = message.get("body", b"") if message["type"] == "http.request" else b""
    return body, replaying(message, receive)
