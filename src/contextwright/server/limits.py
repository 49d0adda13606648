"""A request body size limit, enforced before the body reaches a route (413 problem details).

Pure ASGI: a declared Content-Length over the limit is refused at once; a streamed body is read up
to the limit and refused the moment it passes it, so an oversized request never does any work.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS", "DELETE"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                size = self.max_bytes + 1
            if size > self.max_bytes:
                await self._refuse(scope, send, size)
                return
        chunks: list[bytes] = []
        total = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            total += len(chunk)
            if total > self.max_bytes:
                await self._refuse(scope, send, total)
                return
            chunks.append(chunk)
            more = bool(message.get("more_body"))
        whole = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        await self.app(scope, replaying(whole, receive), send)

    async def _refuse(self, scope: Scope, send: Send, size: int) -> None:
        app: Any = scope.get("app")
        metrics = getattr(getattr(app, "state", None), "metrics", None)
        if metrics is not None:
            metrics.errors.labels(type="payload_too_large", status="413").inc()
        payload = json.dumps(
            {
                "type": "/problems/payload_too_large",
                "title": "Payload too large",
                "status": 413,
                "detail": f"the request body is {size} bytes or more; the limit is "
                f"{self.max_bytes} bytes: send fewer records per batch",
                "field": "body",
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/problem+json"),
                    (b"content-length", str(len(payload)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})


def replaying(first: Message, receive: Receive) -> Receive:
    """A `receive` that hands over `first` (a message read already) once, then what `receive`
    says next: the body read whole, for the app after the middleware that read it."""
    pending = [first]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay
