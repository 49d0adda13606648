"""Keep-alive connections evened out over the processes of `contextwright serve --workers N`.

Each worker listens on a socket of its own (workers.PortShare) and the kernel places a new
connection by a hash of its addresses: 16 keep-alive clients land 9/7, 10/6 or 11/5 on two
workers, and stay there. The process with more of them is the busier one for as long as they
live, while the other has a core to spare. So each worker writes how many connections it served
in the last seconds to a file of a directory the workers share, and one holding more than its
share (the total over the workers, rounded up) closes one connection a moment: its next answer
carries `Connection: close`, and the client's next connection is placed anew. A client sees
one answer as before and opens a new connection, as HTTP/1.1 allows at any answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# How often a worker counts, and for how long a connection that sent nothing still counts.
INTERVAL_S = 0.25
WINDOW_S = 2.0


def over_share(mine: int, counts: list[int]) -> bool:
    """Whether a worker serving `mine` connections, where the workers serve `counts` (its own
    among them), should close one: it holds more than the total's share, rounded up."""
    total = sum(counts)
    return bool(counts) and mine > -(-total // len(counts))


class Balance:
    def __init__(self, app: ASGIApp, directory: str) -> None:
        self.app = app
        self.directory = directory
        self.me = os.path.join(directory, str(os.getpid()))
        self.seen: dict[Any, float] = {}  # client address -> when it last sent a request
        self.shed = False  # close the connection of the next answer
        self._task: asyncio.Task[None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._task is None:  # on the first scope, uvicorn's lifespan: counts from start-up
            self._task = asyncio.get_running_loop().create_task(self._count())
        client = scope.get("client")
        if scope["type"] != "http" or not client:
            await self.app(scope, receive, send)
            return
        key = tuple(client)
        self.seen[key] = time.monotonic()
        if not self.shed:
            await self.app(scope, receive, send)
            return
        self.shed = False
        del self.seen[key]

        async def closing(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), (b"connection", b"close")]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, closing)

    async def _count(self) -> None:
        while True:
            await asyncio.sleep(INTERVAL_S)
            mine = self.live(time.monotonic())  # here: `seen` is the event loop's
            with contextlib.suppress(OSError):
                # The files in a thread: on the event loop, each round's write, rename and
                # reads held up every request of the process (the rename alone 3.9 ms of wall
                # time a round under bench/load.py, on a loaded machine; four rounds a second).
                self.shed = await asyncio.to_thread(self.publish, mine)

    def live(self, now: float) -> int:
        """How many connections sent a request in the last WINDOW_S."""
        for key, at in list(self.seen.items()):
            if now - at > WINDOW_S:
                del self.seen[key]
        return len(self.seen)

    def publish(self, mine: int) -> bool:
        """Publish this worker's count and say whether to shed a connection."""
        temporary = f"{self.me}.tmp"
        with open(temporary, "w") as f:
            f.write(str(mine))
        os.replace(temporary, self.me)
        return over_share(mine, self.counts())

    def counts(self) -> list[int]:
        """The counts of the workers alive (a worker that died and was replaced left a file)."""
        out = []
        for name in os.listdir(self.directory):
            if not name.isdigit():
                continue
            try:
                os.kill(int(name), 0)
            except ProcessLookupError:
                continue
            except PermissionError:
                pass
            with (
                contextlib.suppress(OSError, ValueError),
                open(os.path.join(self.directory, name)) as f,
            ):
                out.append(int(f.read()))
        return out
