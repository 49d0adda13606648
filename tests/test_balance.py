"""Keep-alive connections evened out over `serve --workers N` (server/balance.py): a worker that
serves more than its share of the connections closes one after its next answer."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from contextwright.server.balance import Balance, over_share


def test_a_worker_sheds_only_what_is_over_its_share() -> None:
    assert over_share(9, [9, 7])
    assert not over_share(8, [8, 8])
    assert not over_share(8, [8, 7])  # 15 over two: 8 is the share, rounded up
    assert over_share(2, [2, 0])
    assert not over_share(1, [1, 0])  # one connection is as even as it gets
    assert not over_share(0, [0, 1])
    assert not over_share(3, [3])  # alone: everything is its share
    assert not over_share(0, [])


async def _answer(app: Any, client: tuple[str, int]) -> list[tuple[bytes, bytes]]:
    scope = {"type": "http", "method": "GET", "path": "/", "client": client, "headers": []}
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return list(sent[0]["headers"])


async def _ok(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"x", b"1")]})
    await send({"type": "http.response.body", "body": b"ok"})


def test_the_busier_worker_closes_one_connection_after_its_next_answer(tmp_path: Path) -> None:
    (tmp_path / str(os.getppid())).write_text("1")  # the other worker, alive, with one
    (tmp_path / "999999999").write_text("50")  # a worker that died: not counted
    balance = Balance(_ok, str(tmp_path))

    async def run() -> None:
        for port in (1, 2, 3, 4):
            assert (b"connection", b"close") not in await _answer(balance, ("10.0.0.1", port))
        assert balance.publish(balance.live(time.monotonic())) is True
        assert (tmp_path / str(os.getpid())).read_text() == "4"
        balance.shed = True
        headers = await _answer(balance, ("10.0.0.1", 1))
        assert headers == [(b"x", b"1"), (b"connection", b"close")]
        assert ("10.0.0.1", 1) not in balance.seen
        assert (b"connection", b"close") not in await _answer(balance, ("10.0.0.1", 2))
        balance.seen = {("10.0.0.1", 2): time.monotonic()}
        assert balance.publish(balance.live(time.monotonic())) is False  # one against one: even
        assert balance._task is not None
        balance._task.cancel()

    asyncio.run(run())
