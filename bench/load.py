"""Load benchmark of the HTTP API: concurrent clients on loopback, mixed adds and assembles, on a
project of 100k records in a SQLite file. Bounded in time and in requests; stops by itself.

    .venv/bin/python bench/load.py [--records 100000] [--clients 16] [--seconds 20]
                                   [--max-requests 50000] [--assemble-share 0.3] [--json]
                                   [--workers 0] [--vectors 500] [--warmup 5] [--postgres DIR]

The server runs in its own process (uvicorn, one worker, as `contextwright serve` runs it, with an
API key so that authentication is part of the cost); the clients are asyncio tasks in this process,
one keep-alive HTTP/1.1 connection each, written on raw streams: httpx.AsyncClient (`--client
httpx`) spent about as much CPU per request as the server, on the same two cores. Both share the
machine, so the figures are for the whole loop on one box; the CPU each side used per request is
reported beside them. Reports requests/s and p50/p99 latency per operation, and errors (any non-2xx
counts).
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
from assemble import AGENTS, PROJECT, TOPICS, cpu_reference_ms, fill, generate, tree_cpu_seconds

KEY = "bench-key-000000"
BUDGET = {"model": "gpt-4o", "window": 8000, "reserve": 1000}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def build_db(path: str, n: int, vectors: int = 0) -> float:
    """The records; with `vectors`, every record's vector stored as well (the state a server
    with vectors on reaches once it has embedded its backlog): that many records' real MiniLM
    vectors, random unit vectors for the rest (as bench/vectors.py), so that the run measures
    the steady state of `serve`'s default and not the embedding of 100k records behind it."""
    from contextwright import Engine

    engine = Engine.open(f"sqlite:///{path}", embedder=None)
    seconds = fill(engine, generate(n))
    if vectors:
        put_vectors(engine, vectors)
    engine.close()
    return seconds


def build_pg(url: str, n: int, vectors: int = 0) -> float | None:
    """As build_db, on PostgreSQL, unless its database holds the project already."""
    from contextwright import Engine

    with Engine.open(url, embedder=None) as engine:
        if engine.store.count(PROJECT):
            seconds = None
        else:
            print(f"building {n} records on PostgreSQL ...", file=sys.stderr)
            seconds = fill(engine, generate(n))
            if vectors:
                put_vectors(engine, vectors)
    from postgres import vacuum_analyze

    vacuum_analyze(url)  # without it, this run's assemble p50 was 600 ms on PostgreSQL
    return seconds


def put_vectors(engine: Any, sample: int) -> None:
    from vectors import store_vectors

    from contextwright.embedders import load_embedder

    # What "auto", serve's default, picks with the vectors extra.
    store_vectors(engine, load_embedder("minilm"), sample)


def serve(path: str, port: int) -> None:
    """Child process: the API over the prepared file, until terminated."""
    import uvicorn

    from contextwright import Engine
    from contextwright.heap import settle_heap
    from contextwright.server import create_app
    from contextwright.settings import Settings

    engine = Engine.open(f"sqlite:///{path}", embedder=None)
    app = create_app(engine, Settings(api_keys={KEY: [PROJECT]}))
    settle_heap()  # as `contextwright serve` does
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def postgres_cpu(workdir: str | None) -> float:
    """CPU seconds of the PostgreSQL server of `--postgres WORKDIR`, its exited backends'
    included (bench/ingest.py's measure); 0.0 without one."""
    if workdir is None:
        return 0.0
    with open(os.path.join(workdir, "pgdata", "postmaster.pid")) as f:
        return tree_cpu_seconds(int(f.readline()), exited=True)


def pct(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


class Connection:
    """One keep-alive HTTP/1.1 connection: POST a JSON body, read the status and the body (the
    server always sends Content-Length). A few microseconds of Python a request, where
    httpx.AsyncClient spent about a millisecond."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes) -> int:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        self.writer.write(
            f"POST {path} HTTP/1.1\r\nhost: {self.host}\r\nauthorization: Bearer {KEY}\r\n"
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        fields = dict(
            (k.strip().lower(), v.strip()) for k, _, v in (ln.partition(":") for ln in lines[1:])
        )
        await self.reader.readexactly(int(fields.get("content-length", "0")))
        if fields.get("connection", "").lower() == "close":
            self.close()
        return status

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


def requests_of(names: list[str], share: float, rng: random.Random) -> tuple[str, str, Any]:
    agent = rng.choice(names)
    topic = rng.choice(TOPICS)
    if rng.random() < share:
        body = {"agent": agent, "task": f"continue the {topic} work", "budget": BUDGET,
                "format": "openai"}  # fmt: skip
        return "assemble", f"/v1/projects/{PROJECT}/assemble", body
    body = {"author": agent, "content": f"update on the {topic}: step {rng.random():.6f}"}
    return "add", f"/v1/projects/{PROJECT}/records", body


async def drive(
    base: str,
    clients: int,
    seconds: float,
    max_requests: int,
    share: float,
    seed: int,
    client_kind: str = "raw",
) -> dict[str, Any]:
    names = [a for a, _ in AGENTS]
    lat: dict[str, list[float]] = {"add": [], "assemble": []}
    errors: dict[str, int] = {}
    sent = 0
    deadline = time.perf_counter() + seconds
    host, port = base.removeprefix("http://").rsplit(":", 1)

    async def worker(i: int, client: httpx.AsyncClient | None) -> None:
        nonlocal sent
        rng = random.Random(seed + i)
        conn = Connection(host, int(port))
        while time.perf_counter() < deadline and sent < max_requests:
            sent += 1
            op, path, body = requests_of(names, share, rng)
            t = time.perf_counter()
            try:
                if client is None:
                    code = await conn.post(path, json.dumps(body).encode())
                else:
                    code = (await client.post(path, json=body)).status_code
                ok, tag = 200 <= code < 300, str(code)
            except (httpx.HTTPError, OSError, asyncio.IncompleteReadError, ValueError) as exc:
                ok, tag = False, type(exc).__name__
                conn.close()
            lat[op].append((time.perf_counter() - t) * 1000)
            if not ok:
                errors[tag] = errors.get(tag, 0) + 1
        conn.close()

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    headers = {"Authorization": f"Bearer {KEY}"}
    t0 = time.perf_counter()
    c0 = time.process_time()
    if client_kind == "httpx":
        async with httpx.AsyncClient(
            base_url=base, headers=headers, limits=limits, timeout=60.0
        ) as client:
            await asyncio.gather(*(worker(i, client) for i in range(clients)))
    else:
        await asyncio.gather(*(worker(i, None) for i in range(clients)))
    elapsed = time.perf_counter() - t0
    client_cpu = time.process_time() - c0
    total = sum(len(v) for v in lat.values())
    return {
        "seconds": round(elapsed, 2),
        "requests": total,
        "requests_per_s": round(total / elapsed, 1),
        "client": client_kind,
        "client_cpu_ms_per_request": round(client_cpu * 1000 / max(total, 1), 3),
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
    ap.add_argument(
        "--client",
        choices=("raw", "httpx"),
        default="raw",
        help="raw: keep-alive connections on asyncio streams (default); httpx: httpx.AsyncClient",
    )
    ap.add_argument(
        "--vectors",
        type=int,
        default=0,
        metavar="SAMPLE",
        help="build the file with every record's vector stored (SAMPLE real MiniLM ones, random "
        "unit vectors for the rest), to measure serve's default (vectors on, CONTEXTWRIGHT_EMBEDDER "
        "unset) in its steady state; with --workers",
    )
    ap.add_argument(
        "--warmup",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="drive the same load this long first, untimed: each worker's first calls (with "
        "vectors on, the model and the vector matrix loading) out of the figures",
    )
    ap.add_argument(
        "--postgres",
        metavar="WORKDIR",
        default=None,
        help="serve a PostgreSQL database instead of the SQLite file: a local pgserver on WORKDIR "
        "(as bench/postgres.py), its records loaded the first time; with --workers",
    )
    ap.add_argument("--serve", nargs=2, metavar=("DB", "PORT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve[0], int(args.serve[1]))
        return
    if not (0.0 <= args.assemble_share <= 1.0) or args.clients < 1 or args.seconds <= 0:
        raise SystemExit("give --assemble-share in 0..1, --clients >= 1 and --seconds > 0")

    if args.postgres and args.workers is None:
        raise SystemExit("give --workers with --postgres (the server is `contextwright serve`)")

    with tempfile.TemporaryDirectory() as tmp:
        path = args.db or os.path.join(tmp, "load.db")
        ingest_s = None
        url = f"sqlite:///{path}"
        if args.postgres:
            from postgres import start_postgres

            _pg, url = start_postgres(args.postgres)  # stopped when this process exits
            ingest_s = build_pg(url, args.records, args.vectors)
        elif not os.path.exists(path):
            print(f"building {args.records} records ...", file=sys.stderr)
            ingest_s = build_db(path, args.records, args.vectors)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        if args.workers is None:
            proc = subprocess.Popen([sys.executable, __file__, "--serve", path, str(port)])
        else:
            # The command as a user runs it, with its defaults (workers, GC settling, pool).
            cmd = [sys.executable, "-m", "contextwright.cli", "serve", "--db", url,
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
            if args.warmup > 0:
                asyncio.run(drive(base, args.clients, args.warmup, args.max_requests,
                                  args.assemble_share, args.seed + 1, args.client))  # fmt: skip
            server_cpu = tree_cpu_seconds(proc.pid)
            pg_cpu = postgres_cpu(args.postgres)
            report = asyncio.run(
                drive(
                    base,
                    args.clients,
                    args.seconds,
                    args.max_requests,
                    args.assemble_share,
                    args.seed,
                    args.client,
                )
            )
            server_cpu = tree_cpu_seconds(proc.pid) - server_cpu
            report["server_cpu_ms_per_request"] = round(
                server_cpu * 1000 / max(report["requests"], 1), 3
            )
            if args.postgres:
                # The database's side of each request: on one box it shares the cores with the
                # server, so requests/s follow the sum of both, not the server's alone.
                pg_cpu = postgres_cpu(args.postgres) - pg_cpu
                report["postgres_cpu_ms_per_request"] = round(
                    pg_cpu * 1000 / max(report["requests"], 1), 3
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
        store="postgresql" if args.postgres else "sqlite",
        vectors=args.vectors,
        warmup_s=args.warmup,
        # serve's setting; the in-process server (no --workers) runs without vectors
        embedder=os.environ.get("CONTEXTWRIGHT_EMBEDDER") or "auto"
        if args.workers is not None
        else "none",
        load_average=[round(x, 2) for x in os.getloadavg()],
        cpu_reference_ms=round(sorted(cpu_reference_ms() for _ in range(31))[15], 3),
        cpus=os.cpu_count(),
    )
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(
        f"{report['records']} records, {report['clients']} clients, {report['seconds']}s: "
        f"{report['requests']} requests, {report['requests_per_s']} req/s, errors {report['errors']}"
        f"; {report['store']}, embedder {report['embedder']}"
    )
    pg_ms = report.get("postgres_cpu_ms_per_request")
    pg = "" if pg_ms is None else f"postgres {pg_ms} ms, "
    print(
        f"  CPU per request: server {report['server_cpu_ms_per_request']} ms, {pg}client "
        f"({report['client']}) {report['client_cpu_ms_per_request']} ms; cpu ref "
        f"{report['cpu_reference_ms']} ms; load average {report['load_average']}"
    )
    for op, s in report["ops"].items():
        print(
            f"  {op:<9} {s['count']:>6} ({s['per_s']}/s)  p50 {s['p50_ms']} ms  p99 {s['p99_ms']} ms"
        )


if __name__ == "__main__":
    main()
