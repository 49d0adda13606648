"""bench/load.py's load on several `contextwright serve` configurations at once, driven in turns
(A, B, C, then C, B, A, ...), so that the swings of a shared machine fall on each alike.

    .venv/bin/python bench/load_turns.py --db FILE [--records 100000] [--rounds 6] [--segment 2.5]
        [--warmup 4] [--clients 16] [--json]
        --config NAME WORKERS [ENV=VALUE ...] --config NAME WORKERS [ENV=VALUE ...] ...

Each configuration is a server of its own (`contextwright serve --workers WORKERS`, with the
environment given, e.g. CONTEXTWRIGHT_ASSEMBLE_SLOTS=2 or PYTHONPATH=/other/checkout/src) on a
fresh copy of `--db` (built by bench/load.py's way when missing), all started before any is timed.
Every round drives each of them for `--segment` seconds with the same clients as bench/load.py
(16 keep-alive connections, 70% adds, 30% assembles of 8,000 tokens), new connections each
segment. A single load.py run on this machine swung from 290 to 500 requests/s between two runs
of one configuration; in turns, the comparison holds within a run. Reports per configuration:
requests/s (and per segment), the server's CPU per request, add and assemble p50/p99, beside the
CPU reference and the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from assemble import AGENTS, PROJECT, cpu_reference_ms, tree_cpu_seconds
from load import KEY, Connection, build_db, free_port, pct, requests_of, wait_ready


async def segment(
    port: int, clients: int, seconds: float, seed: int, lat: dict[str, list[float]] | None
) -> tuple[int, dict[str, int]]:
    """Requests answered in `seconds` by one server, and the errors; latencies into `lat`."""
    names = [a for a, _ in AGENTS]
    deadline = time.perf_counter() + seconds
    done = 0
    errors: dict[str, int] = {}

    async def client(i: int) -> None:
        nonlocal done
        rng = random.Random(seed * 1000 + i)
        conn = Connection("127.0.0.1", port)
        while time.perf_counter() < deadline:
            op, path, body = requests_of(names, 0.3, rng)
            t = time.perf_counter()
            try:
                code, tag = await conn.post(path, json.dumps(body).encode()), ""
                tag = "" if 200 <= code < 300 else str(code)
            except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                tag = type(exc).__name__
                conn.close()
            if lat is not None:
                lat[op].append((time.perf_counter() - t) * 1000)
            if tag:
                errors[tag] = errors.get(tag, 0) + 1
            done += 1
        conn.close()

    await asyncio.gather(*(client(i) for i in range(clients)))
    return done, errors


def start(name: str, workers: int, env: dict[str, str], db: str) -> tuple[Any, int]:
    port = free_port()
    cmd = [sys.executable, "-m", "contextwright.cli", "serve", "--db", f"sqlite:///{db}",
           "--port", str(port), "--log-level", "warning", "--workers", str(workers)]  # fmt: skip
    full = {**os.environ, "CONTEXTWRIGHT_API_KEYS": json.dumps({KEY: [PROJECT]}), **env}
    proc = subprocess.Popen(cmd, env=full)
    wait_ready(f"http://127.0.0.1:{port}", proc)
    return proc, port


def parse_config(values: list[str]) -> tuple[str, int, dict[str, str]]:
    if len(values) < 2 or not values[1].isdigit() or int(values[1]) < 1:
        raise SystemExit(f"--config {' '.join(values)}: give NAME WORKERS [ENV=VALUE ...]")
    env = {}
    for item in values[2:]:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise SystemExit(f"--config {values[0]}: {item!r} is not ENV=VALUE")
        env[key] = value
    return values[0], int(values[1]), env


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--db", required=True, help="the prepared SQLite file (built when missing)")
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--config", nargs="+", action="append", required=True, metavar="ARG")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--segment", type=float, default=2.5, help="seconds per turn")
    ap.add_argument("--warmup", type=float, default=4.0, help="seconds per server, untimed")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    configs = [parse_config(c) for c in args.config]
    if len({name for name, _, _ in configs}) != len(configs):
        raise SystemExit("give each --config a name of its own")
    if not os.path.exists(args.db):
        print(f"building {args.records} records ...", file=sys.stderr)
        build_db(args.db, args.records)
    servers: dict[str, tuple[Any, int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for name, workers, env in configs:
                copy = os.path.join(tmp, f"{name}.db")
                shutil.copyfile(args.db, copy)  # each run writes: every server from the same file
                servers[name] = start(name, workers, env, copy)
            for _, port in servers.values():
                asyncio.run(segment(port, args.clients, args.warmup, 999, None))
            out = {n: {"lat": {"add": [], "assemble": []}, "s": 0.0, "n": 0, "cpu": 0.0,
                       "segments": [], "errors": {}} for n in servers}  # fmt: skip
            refs = []
            for r in range(args.rounds):
                order = list(servers) if r % 2 == 0 else list(reversed(servers))
                for name in order:
                    proc, port = servers[name]
                    c0, t0 = tree_cpu_seconds(proc.pid), time.perf_counter()
                    n, errors = asyncio.run(
                        segment(port, args.clients, args.segment, r, out[name]["lat"])
                    )
                    took = time.perf_counter() - t0
                    o = out[name]
                    o["cpu"] += tree_cpu_seconds(proc.pid) - c0
                    o["s"] += took
                    o["n"] += n
                    o["segments"].append(round(n / took, 1))
                    for tag, k in errors.items():
                        o["errors"][tag] = o["errors"].get(tag, 0) + k
                refs.append(cpu_reference_ms())
        finally:
            for proc, _ in servers.values():
                proc.terminate()
            for proc, _ in servers.values():
                proc.wait(timeout=30)
    report = {
        name: {
            "requests_per_s": round(o["n"] / o["s"], 1),
            "segments_per_s": o["segments"],
            "server_cpu_ms_per_request": round(o["cpu"] * 1000 / max(o["n"], 1), 3),
            "errors": o["errors"],
            **{
                f"{op}_{p}_ms": round(pct(o["lat"][op], q), 2)
                for op in ("add", "assemble")
                for p, q in (("p50", 50), ("p99", 99))
            },
        }
        for name, o in out.items()
    }
    meta = {
        "cpu_reference_ms": round(sorted(refs)[len(refs) // 2], 3),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
    }
    if args.json:
        print(json.dumps({"configs": report, **meta}, indent=2))
        return
    for name, s in report.items():
        print(
            f"{name:>12}: {s['requests_per_s']} req/s {s['segments_per_s']}, server CPU "
            f"{s['server_cpu_ms_per_request']} ms/request; add p50 {s['add_p50_ms']} p99 "
            f"{s['add_p99_ms']} ms; assemble p50 {s['assemble_p50_ms']} p99 "
            f"{s['assemble_p99_ms']} ms; errors {s['errors']}"
        )
    print(f"cpu ref {meta['cpu_reference_ms']} ms; load average {meta['load_average']}")


if __name__ == "__main__":
    main()
