"""Load benchmark of the HTTP API: concurrent clients on loopback, mixed adds and assembles, on a
project of 100k records in a SQLite file. Bounded in time and in requests; stops by itself.

    .venv/bin/python bench/load.py [--records 100000] [--clients 16] [--seconds 20]
                                   [--max-requests 50000] [--assemble-share 0.3] [--json]

The server runs in its own process (uvicorn, one worker, as `contextwright serve` runs it, with an
API key so that authentication is part of the cost); the clients are httpx.AsyncClient tasks in
this process. Both share the machine, so the figures are for the whole loop on one box.
Reports requests/s and p50/p99 latency per operation, and errors (any non-2xx counts).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import httpx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from assemble import AGENTS, PROJECT, TOPICS, fill, generate

KEY = "bench-key-000000"
BUDGET = {"model": "gpt-4o", "window": 8000, "reserve": 1000}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def build_db(path: str, n: int) -> float:
    from contextwright import Engine

    engine = Engine.open(f"sqlite:///{path}", embedder=None)
    seconds = fill(engine, generate(n))
    engine.close()
    return seconds


def serve(path: str, port: int) -> None:
    """Child process: the API over the prepared file, until terminated."""
    import uvicorn

    from contextwright import Engine
    from contextwright.cli.service import settle_heap
    from contextwright.server import create_app
    from contextwright.settings import Settings

    engine = Engine.open(f"sqlite:///{path}", embedder=None)
    app = create_app(engine, Settings(api_keys={KEY: [PROJECT]}))
    settle_heap()  # as `contextwright serve` does
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def pct(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def drive(
    base: str, clients: int, seconds: float, max_requests: int, share: float, seed: int
) -> dict[str, Any]:
    names = [a for a, _ in AGENTS]
    lat: dict[str, list[float]] = {"add": [], "assemble": []}
    errors: dict[str, int] = {}
    sent = 0
    deadline = time.perf_counter() + seconds

    async def worker(i: int, client: httpx.AsyncClient) -> None:
        nonlocal sent
        rng = random.Random(seed + i)
        while time.perf_counter() < deadline and sent < max_requests:
            sent += 1
            agent = rng.choice(names)
            topic = rng.choice(TOPICS)
            if rng.random() < share:
                op, path = "assemble", f"/v1/projects/{PROJECT}/assemble"
                body: dict[str, Any] = {
                    "agent": agent,
                    "task": f"continue the {topic} work",
                    "budget": BUDGET,
                    "format": "openai",
                }
            else:
                op, path = "add", f"/v1/projects/{PROJECT}/records"
                body = {
                    "author": agent,
                    "content": f"update on the {topic}: step {rng.random():.6f}",
                }
            t = time.perf_counter()
            try:
                r = await client.post(path, json=body)
                ok = 200 <= r.status_code < 300
                tag = str(r.status_code)
            except httpx.HTTPError as exc:
                ok, tag = False, type(exc).__name__
            lat[op].append((time.perf_counter() - t) * 1000)
            if not ok:
                errors[tag] = errors.get(tag, 0) + 1

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    headers = {"Authorization": f"Bearer {KEY}"}
    t0 = time.perf_counter()
    async with httpx.AsyncClient(
        base_url=base, headers=headers, limits=limits, timeout=60.0
    ) as client:
        await asyncio.gather(*(worker(i, client) for i in range(clients)))
    elapsed = time.perf_counter() - t0
    total = sum(len(v) for v in lat.values())
    return {
        "seconds": round(elapsed, 2),
        "requests": total,
        "requests_per_s": round(total / elapsed, 1),
        "errors": errors,
        "ops": {
            op: {
                "count": len(v),
                "per_s": round(len(v) / elapsed, 1),
                "p50_ms": round(pct(v, 50), 2),
                "p99_ms": round(pct(v, 99), 2),
                "mean_ms": round(statistics.fmean(v), 2) if v else 0.0,
            }
            for op, v in lat.items()
        },
    }


def wait_ready(base: str, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("the server exited during startup")
        try:
            if httpx.get(f"{base}/health", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit("the server did not start")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--max-requests", type=int, default=50_000)
    ap.add_argument("--assemble-share", type=float, default=0.3)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--db", default=None, help="keep the prepared SQLite file here and reuse it next time"
    )
    ap.add_argument(
        "--workers",
        type=int,
        default=None,
        help="serve with `contextwright serve --workers N` (0: its default, one per core); "
        "without it, one in-process uvicorn worker as before",
    )
    ap.add_argument("--serve", nargs=2, metavar=("DB", "PORT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve[0], int(args.serve[1]))
        return
    if not (0.0 <= args.assemble_share <= 1.0) or args.clients < 1 or args.seconds <= 0:
        raise SystemExit("give --assemble-share in 0..1, --clients >= 1 and --seconds > 0")

    with tempfile.TemporaryDirectory() as tmp:
        path = args.db or os.path.join(tmp, "load.db")
        ingest_s = None
        if not os.path.exists(path):
            print(f"building {args.records} records ...", file=sys.stderr)
            ingest_s = build_db(path, args.records)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        if args.workers is None:
            proc = subprocess.Popen([sys.executable, __file__, "--serve", path, str(port)])
        else:
            # The command as a user runs it, with its defaults (workers, GC settling, pool).
            cmd = [sys.executable, "-m", "contextwright.cli", "serve", "--db", f"sqlite:///{path}",
                   "--port", str(port), "--log-level", "warning"]  # fmt: skip
            if args.workers > 0:
                cmd += ["--workers", str(args.workers)]
            env = {**os.environ, "CONTEXTWRIGHT_API_KEYS": json.dumps({KEY: [PROJECT]})}
            proc = subprocess.Popen(cmd, env=env)
        try:
            wait_ready(base, proc)
            print(
                f"driving {base} with {args.clients} clients for {args.seconds}s ...",
                file=sys.stderr,
            )
            report = asyncio.run(
                drive(
                    base,
                    args.clients,
                    args.seconds,
                    args.max_requests,
                    args.assemble_share,
                    args.seed,
                )
            )
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    report.update(
        records=args.records,
        clients=args.clients,
        assemble_share=args.assemble_share,
        ingest_records_per_s=round(args.records / ingest_s) if ingest_s else None,
        workers=args.workers,
        load_average=[round(x, 2) for x in os.getloadavg()],
        cpus=os.cpu_count(),
    )
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(
        f"{report['records']} records, {report['clients']} clients, {report['seconds']}s: "
        f"{report['requests']} requests, {report['requests_per_s']} req/s, errors {report['errors']}"
    )
    for op, s in report["ops"].items():
        print(
            f"  {op:<9} {s['count']:>6} ({s['per_s']}/s)  p50 {s['p50_ms']} ms  p99 {s['p99_ms']} ms"
        )


if __name__ == "__main__":
    main()
