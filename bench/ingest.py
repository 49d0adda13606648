"""Batched ingest alone, in one process: `add_many` in batches of 1,000 into a new SQLite file, the
records of bench/assemble.py's generator. Seconds, not minutes: for comparing two versions of
the write path (run it under each, in turns) where bench/assemble.py builds a whole store.

    .venv/bin/python bench/ingest.py [--records 20000] [--rounds 3] [--json]
                                     [--postgres DIR] [--threads N]

Prints records/s of wall time and per CPU second of the process (the machine is shared: the
second moves less with the load), the CPU reference and the load average.
`--postgres DIR`: into a local PostgreSQL instead (bench/postgres.py's `start_postgres` on DIR,
durable defaults, its database emptied each round); the server's CPU per record is printed too
(every process of the server, from /proc), since on this store most of the work is the server's.
`--threads N`: N threads adding one record per call instead of batches (the HTTP service's adds,
without HTTP): what the PostgreSQL store's group commit is for.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from assemble import AGENTS, PROJECT, cpu_reference_ms, fill, generate, tree_cpu_seconds

from contextwright import Engine


def server_cpu(pgdata: str | None) -> float:
    """CPU seconds the PostgreSQL server on `pgdata` has used, its exited backends' included."""
    if pgdata is None:
        return 0.0
    with open(os.path.join(pgdata, "postmaster.pid")) as f:
        return tree_cpu_seconds(int(f.readline()), exited=True)


def threaded_fill(engine: Engine, records: list[dict[str, Any]], threads: int) -> float:
    """`records` added one per call by `threads` threads; the seconds the adds took."""
    for name, role in AGENTS:
        engine.register_agent(PROJECT, name, role)
    # Without links: a record's reply_to or supersedes may name one another thread has not
    # stored yet.
    plain = [{k: v for k, v in r.items() if k not in ("reply_to", "supersedes")} for r in records]
    shares = [plain[k::threads] for k in range(threads)]

    def add(share: list[dict[str, Any]]) -> None:
        for item in share:
            engine.add(**item)

    workers = [threading.Thread(target=add, args=(share,)) for share in shares]
    t0 = time.perf_counter()
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    return time.perf_counter() - t0


def one_round(
    records: list[dict[str, Any]], pg_url: str | None, pgdata: str | None, threads: int
) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        url = pg_url or f"sqlite:///{tmp}/ingest.db"
        if pg_url is not None:
            empty(pg_url)
        engine = Engine.open(url, embedder=None, persist_traces=False)
        s0, c0 = server_cpu(pgdata), time.process_time()
        seconds = fill(engine, records) if not threads else threaded_fill(engine, records, threads)
        cpu = time.process_time() - c0  # the checkpoint after the adds is in it; it is small
        server = server_cpu(pgdata) - s0
        engine.close()
    return len(records) / seconds, len(records) / cpu, server / len(records) * 1e6


def empty(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--postgres", metavar="DIR", default=None)
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    records = generate(args.records)
    pg_url = pgdata = None
    if args.postgres:
        from postgres import start_postgres

        _server, pg_url = start_postgres(args.postgres)  # stopped when this process exits
        pgdata = os.path.join(args.postgres, "pgdata")
    rounds = [one_round(records, pg_url, pgdata, args.threads) for _ in range(args.rounds)]
    report = {
        "store": "postgresql" if pg_url else "sqlite",
        "records": args.records,
        "threads": args.threads,
        "records_per_s": [round(w) for w, _, _ in rounds],
        "records_per_cpu_s": [round(c) for _, c, _ in rounds],
        "server_cpu_us_per_record": [round(s, 1) for _, _, s in rounds],
        "median_per_s": round(statistics.median(w for w, _, _ in rounds)),
        "cpu_reference_ms": round(statistics.median(cpu_reference_ms() for _ in range(31)), 3),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    how = f"one per call on {args.threads} threads" if args.threads else "in batches of 1,000"
    server = f", server CPU {report['server_cpu_us_per_record']} us/record" if pg_url else ""
    print(
        f"ingest {report['records']} records {how} ({report['store']}): "
        f"{report['records_per_s']} records/s (per CPU second {report['records_per_cpu_s']}"
        f"{server}); cpu ref {report['cpu_reference_ms']} ms; load average "
        f"{report['load_average']}"
    )


if __name__ == "__main__":
    main()
