"""What an HTTP request costs beyond the engine's call, in one process: the app called through
ASGI directly (no socket, no uvicorn), one request at a time, the load of bench/load.py (70% adds,
30% assembles); `Engine.add` and `Engine.window` are timed inside the routes.

    .venv/bin/python bench/request_cost.py --db /tmp/load100k.db [--requests 600] [--json]

`--db` takes a file that bench/load.py prepared. Prints, per operation, the whole request and the
engine's call (ms, mean), what lies between them (dependencies, validation, the thread-pool hop,
encoding the answer), the answer's size, and the process's CPU per request.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from assemble import AGENTS, cpu_reference_ms
from load import KEY, PROJECT, requests_of

from contextwright import Engine
from contextwright.assembly.result import Assembly
from contextwright.records import Record
from contextwright.server import create_app
from contextwright.settings import Settings

WARMUP = 50


async def call(app: Any, path: str, body: bytes) -> int:
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1),
        "headers": [(b"host", b"bench"), (b"authorization", f"Bearer {KEY}".encode()),
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())],
    }  # fmt: skip
    sent: list[dict[str, Any]] = []
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client never disconnects
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    if not 200 <= sent[0]["status"] < 300:
        raise SystemExit(f"{path} answered {sent[0]['status']}: {sent[1:]}")
    return sum(len(m.get("body", b"")) for m in sent)


async def drive(db: str, requests: int, seed: int) -> dict[str, Any]:
    engine = Engine.open(f"sqlite:///{db}", embedder=None)
    app = create_app(engine, Settings(api_keys={KEY: [PROJECT]}))
    in_engine = {"add": 0.0, "assemble": 0.0}
    add, window = engine.add, engine.window

    def timed_add(**fields: Any) -> Record:
        t = time.perf_counter()
        try:
            return add(**fields)
        finally:
            in_engine["add"] += time.perf_counter() - t

    def timed_window(*args: Any, **kwargs: Any) -> Assembly:
        t = time.perf_counter()
        try:
            return window(*args, **kwargs)
        finally:
            in_engine["assemble"] += time.perf_counter() - t

    engine.add, engine.window = timed_add, timed_window  # type: ignore[method-assign]
    names = [a for a, _ in AGENTS]
    rng = random.Random(seed)
    total = {"add": 0.0, "assemble": 0.0}
    count = {"add": 0, "assemble": 0}
    size = {"add": 0, "assemble": 0}
    c0 = 0.0
    for i in range(requests + WARMUP):
        if i == WARMUP:
            in_engine.update(add=0.0, assemble=0.0)
            c0 = time.process_time()
        op, path, body = requests_of(names, 0.3, rng)
        t = time.perf_counter()
        n = await call(app, path, json.dumps(body).encode())
        if i >= WARMUP:
            total[op] += time.perf_counter() - t
            count[op] += 1
            size[op] += n
    cpu = time.process_time() - c0
    engine.close()
    ops = {
        op: {
            "count": count[op],
            "request_ms": round(total[op] / count[op] * 1000, 3),
            "engine_ms": round(in_engine[op] / count[op] * 1000, 3),
            "beyond_ms": round((total[op] - in_engine[op]) / count[op] * 1000, 3),
            "answer_kb": round(size[op] / count[op] / 1024, 1),
        }
        for op in total
        if count[op]
    }
    return {"ops": ops, "cpu_ms_per_request": round(cpu * 1000 / requests, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--requests", type=int, default=600)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    report = asyncio.run(drive(args.db, args.requests, args.seed))
    report["cpu_reference_ms"] = round(sorted(cpu_reference_ms() for _ in range(31))[15], 3)
    report["load_average"] = [round(x, 2) for x in os.getloadavg()]
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for op, s in report["ops"].items():
        print(
            f"{op:<9} {s['count']:>5}  request {s['request_ms']} ms  engine {s['engine_ms']} ms  "
            f"beyond {s['beyond_ms']} ms  answer {s['answer_kb']} KB"
        )
    print(
        f"process CPU per request {report['cpu_ms_per_request']} ms; cpu ref "
        f"{report['cpu_reference_ms']} ms; load average {report['load_average']}"
    )


if __name__ == "__main__":
    main()
