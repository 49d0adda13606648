"""The fast path of the two busiest routes (server/fast.py) against the app's own routing, in one
process and interleaved: each request of bench/load.py's mix (70% adds, 30% assembles) goes once
through the app with the fast path and once through the app with it turned off, in turns, and the
CPU of each (the process's, one request at a time) is summed per operation and path.

    .venv/bin/python bench/http_paths.py --db /tmp/load100k.db [--requests 600]
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
from request_cost import call

from contextwright import Engine
from contextwright.server import create_app
from contextwright.server.fast import FastRoutes
from contextwright.settings import Settings

WARMUP = 50


async def drive(db: str, requests: int, seed: int) -> dict[str, Any]:
    engine = Engine.open(f"sqlite:///{db}", embedder=None)
    app = create_app(engine, Settings(api_keys={KEY: [PROJECT]}))
    match = FastRoutes._match
    fast = {"on": True}

    def switched(self: FastRoutes, scope: Any) -> Any:
        return match(self, scope) if fast["on"] else None

    FastRoutes._match = switched  # type: ignore[method-assign]
    names = [a for a, _ in AGENTS]
    rng = random.Random(seed)
    cpu: dict[tuple[str, bool], float] = {}
    count: dict[tuple[str, bool], int] = {}
    seen: dict[str, int] = {}
    for i in range(requests + WARMUP):
        op, path, body = requests_of(names, 0.3, rng)
        turn = seen[op] = seen.get(op, 0) + 1
        for on in (turn % 2 == 0, turn % 2 == 1):  # each op's first path alternates (caches)
            fast["on"] = on
            data = json.dumps(body if op == "assemble" else {**body, "content": f"{on} {body}"})
            c = time.process_time()
            await call(app, path, data.encode())
            if i >= WARMUP:
                cpu[op, on] = cpu.get((op, on), 0.0) + time.process_time() - c
                count[op, on] = count.get((op, on), 0) + 1
    engine.close()
    return {
        f"{op} {'fast' if on else 'app'}": round(cpu[op, on] / count[op, on] * 1000, 3)
        for op, on in sorted(cpu)
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--requests", type=int, default=600)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    ms = asyncio.run(drive(args.db, args.requests, args.seed))
    print(json.dumps({"cpu_ms_per_request": ms, "cpu_reference_ms": cpu_reference_ms(),
                      "load_average": os.getloadavg()}))  # fmt: skip


if __name__ == "__main__":
    main()
