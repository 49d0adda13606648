"""Benchmark of the PostgreSQL store beside the SQLite store, in the same run on the same records:
assemble latency (p50/p99), the batched and the one-at-a-time ingest rate, and the bare store
reads that the default sources make.

    .venv/bin/python bench/postgres.py [--records 10000] [--calls 200] [--dir DIR] [--settle-heap]
        [--json]

The records, requests and budget are bench/assemble.py's synthetic team month. PostgreSQL is a
local `pgserver` (16, with pgvector) on a Unix socket, with its default durable settings (fsync
and synchronous commit on; `--synchronous-commit off` for the durability of SQLite's setting); SQLite
is a WAL file with synchronous=NORMAL, as the store opens it.
The two engines take turns request by request, so that a noisy machine slows both alike.
Before the calls, both databases' files are read once, so that they are in the OS page cache as
a running server's would be: the searches touch pages all over the table (a word's matches), and
on a cold cache the first touch of each is a disk read (30 µs a page here); PostgreSQL's
buffer cache is sized as for a server of its own (a quarter of the memory, `--shared-buffers-mb`)
and the records table read into it.
With `--dir`, both databases stay in DIR and a later run with the same `--records` reuses them
(no ingest, so no ingest rates), which is how one 1M-record load serves many experiments.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import psycopg
from assemble import (
    AGENTS,
    BUDGET,
    PROJECT,
    _baseline_queries,
    _requests,
    _stats,
    call_ms,
    cpu_reference_ms,
    generate,
    machine,
)

from contextwright import Engine
from contextwright.heap import settle_heap
from contextwright.stores.postgres import PostgresStore
from contextwright.stores.sqlite import SQLiteStore

SINGLES = 300  # records added one call at a time, after the batched ingest


def start_postgres(
    workdir: str, synchronous_commit: str = "on", shared_buffers_mb: int | None = None
) -> tuple[Any, str]:
    """A server on `workdir`/pgdata and its `cw_bench` database, created empty if it is not
    there yet; returns (server, url). `shared_buffers_mb`: the server's buffer cache, set (and
    the server restarted) if it differs; None leaves the server's own."""
    # pgserver keeps a lock file in the runtime dir until the interpreter exits: not in workdir.
    runtime = os.path.join(tempfile.gettempdir(), f"cw-xdg-{os.getuid()}")
    os.makedirs(runtime, mode=0o700, exist_ok=True)
    os.environ.setdefault("XDG_RUNTIME_DIR", runtime)
    import pgserver

    pgdata = os.path.join(workdir, "pgdata")
    if not os.path.exists(pgdata):
        os.makedirs(pgdata)
        os.chmod(workdir, 0o755)  # as root, pgserver runs the server as its own user
        os.chmod(pgdata, 0o755)  # initdb narrows it; the server refuses a wider one later
    server = pgserver.get_server(pgdata, cleanup_mode="stop")
    if shared_buffers_mb is not None:
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            now = conn.execute(
                "SELECT setting::bigint * 8 / 1024 FROM pg_settings WHERE name = 'shared_buffers'"
            ).fetchone()[0]
            if now != shared_buffers_mb:
                conn.execute(f"ALTER SYSTEM SET shared_buffers = '{int(shared_buffers_mb)}MB'")
        if now != shared_buffers_mb:  # read at start only: the server starts again
            server.cleanup()
            server = pgserver.get_server(pgdata, cleanup_mode="stop")
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = 'cw_bench'").fetchone():
            conn.execute("CREATE DATABASE cw_bench")
        conn.execute(f"ALTER DATABASE cw_bench SET synchronous_commit = {synchronous_commit}")
    base, _, query = server.get_uri().partition("?")
    return server, base.rsplit("/", 1)[0] + "/cw_bench" + (f"?{query}" if query else "")


def vacuum_analyze(url: str) -> None:
    """What autovacuum does within a minute or so of a bulk load, which a benchmark's short-lived
    server never gives it: planner statistics (without them the addressed read planned a scan of
    the whole project, 115 ms a call at 100k), and the visibility map and hint bits without which
    every read of the fresh rows checks the commit log (full text measured 3-5x slower)."""
    from contextwright.stores.postgres_url import take_pool_option

    with psycopg.connect(take_pool_option(url)[0], autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def warm_up(
    engines: Iterable[Engine],
    reqs: Sequence[tuple[str, str, str]],
    settle: bool,
    budgets: Any = None,
) -> None:
    """The first ten requests on every engine, unmeasured (page cache, token cache, plans), each
    with its budget (`budgets`, one per engine; default BUDGET); then, with `settle`, the heap
    frozen as `contextwright serve` does before it answers."""
    engines = list(engines)
    for agent, task, day in reqs[:10]:
        for i, engine in enumerate(engines):
            budget = BUDGET if budgets is None else budgets[i]
            engine.assemble(PROJECT, agent, task, budget, session=f"{agent}-{day}")
    if settle:
        settle_heap()


@contextlib.contextmanager
def built(workdir: str, records: int) -> Iterator[tuple[str, PostgresStore]]:
    """The URL and store of the PostgreSQL database that `--dir workdir` built with `records`
    records, its server started and its buffers warmed (`warm_buffers`); stopped after."""
    server, url = start_postgres(workdir)
    try:
        store = PostgresStore(url)
        if store.count(PROJECT) != records:
            sys.exit(f"{workdir} holds {store.count(PROJECT)} records: build it first")
        warm_buffers(url)
        yield url, store
    finally:
        server.cleanup()


def warm_buffers(url: str) -> None:
    """Read the records table, and the words table with its tsvectors, once into PostgreSQL's
    buffer cache, as the OS page cache is warmed for both stores (`warm_files`), so that the
    calls find what a running server's cache would hold. A TID range scan, unlike a sequential
    scan of a large table, keeps what it reads in the cache; each tsvector is read (`length`),
    which reads the TOAST table."""
    from contextwright.stores.postgres_url import take_pool_option

    with psycopg.connect(take_pool_option(url)[0], autocommit=True) as conn:
        conn.execute("SELECT count(*) FROM records WHERE ctid >= '(0,0)'::tid")
        conn.execute("SELECT sum(length(tsv)) FROM record_words WHERE ctid >= '(0,0)'::tid")


def warm_files(paths: list[str]) -> None:
    """Read every file under `paths` once (into the OS page cache)."""
    for top in paths:
        files = [top] if os.path.isfile(top) else [
            os.path.join(d, f) for d, _, names in os.walk(top) for f in names
        ]  # fmt: skip
        for name in files:
            with open(name, "rb") as f:
                while f.read(1 << 20):
                    pass


def ingest(engine: Engine, records: list[dict[str, Any]]) -> dict[str, float]:
    bulk, singles = records[:-SINGLES], records[-SINGLES:]
    t0 = time.perf_counter()
    for i in range(0, len(bulk), 1000):
        engine.add_many(bulk[i : i + 1000])
    bulk_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for r in singles:
        engine.add(**r)
    singles_s = time.perf_counter() - t0
    return {
        "batched_records_per_s": round(len(bulk) / bulk_s),
        "single_records_per_s": round(len(singles) / singles_s),
        "single_add_ms": round(singles_s / len(singles) * 1000, 2),
    }


def default_shared_buffers_mb() -> int:
    """A quarter of the machine's memory: PostgreSQL's documented starting point for a server of
    its own (`shared_buffers`; pgserver's own setting is 128 MB). With 128 MB, a 1M-record store
    (2.4 GB) was read from the OS page cache a page at a time, 8 kB copied per page, while the
    SQLite store maps its file (`mmap_size`) and reads the same cache in place."""
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 4 / 2**20)


def run(
    n: int,
    calls: int,
    workdir: str,
    synchronous_commit: str = "on",
    shared_buffers_mb: int | None = None,
    settle: bool = False,
) -> dict[str, Any]:
    shared_buffers_mb = shared_buffers_mb or default_shared_buffers_mb()
    server, url = start_postgres(workdir, synchronous_commit, shared_buffers_mb)
    try:
        engines = {
            "sqlite": Engine(SQLiteStore(os.path.join(workdir, "bench.db"))),
            "postgres": Engine(PostgresStore(url)),
        }
        out: dict[str, Any] = {name: {} for name in engines}
        loaded = {name: engine.store.count(PROJECT) for name, engine in engines.items()}
        if all(count == n for count in loaded.values()):
            for name in engines:
                out[name]["ingest"] = None  # reused from an earlier run with --dir
        else:
            if any(loaded.values()):
                sys.exit(f"{workdir} holds other stores ({loaded}): give an empty --dir")
            records = generate(n)
            for name, engine in engines.items():
                for agent, role in AGENTS:
                    engine.register_agent(PROJECT, agent, role)
                out[name]["ingest"] = ingest(engine, records)
                assert engine.store.count(PROJECT) == n
            del records  # the bench's, not the engines': its dicts slow every full GC in calls
        vacuum_analyze(url)
        warm_files([os.path.join(workdir, "pgdata", "base"), os.path.join(workdir, "bench.db")])
        warm_buffers(url)
        reqs = _requests(calls)
        warm_up(engines.values(), reqs, settle)
        load_before = os.getloadavg()
        times: dict[str, list[float]] = {name: [] for name in engines}
        reads: dict[str, list[float]] = {name: [] for name in engines}
        reference: list[float] = []  # the machine's speed beside the calls (assemble.py)
        tokens: dict[str, list[int]] = {name: [] for name in engines}
        for agent, task, day in reqs:
            session = f"{agent}-{day}"
            for name, engine in engines.items():
                result, ms = call_ms(engine.assemble, PROJECT, agent, task, BUDGET, session=session)
                times[name].append(ms)
                tokens[name].append(result.tokens)
                del result  # freed after the clock stopped (call_ms)
                t = time.perf_counter()
                _baseline_queries(engine, agent, task, session)
                reads[name].append((time.perf_counter() - t) * 1000)
            reference.append(cpu_reference_ms())
        for name, engine in engines.items():
            out[name]["assemble_ms"] = _stats(times[name])
            out[name]["store_reads_ms"] = _stats(reads[name])
            out[name]["window_tokens_p50"] = sorted(tokens[name])[len(tokens[name]) // 2]
            engine.close()
        ratio = out["postgres"]["assemble_ms"]["p50"] / max(
            out["sqlite"]["assemble_ms"]["p50"], 1e-9
        )
        return {
            "machine": machine(),
            "records": n,
            "calls": calls,
            "synchronous_commit": synchronous_commit,
            "shared_buffers_mb": shared_buffers_mb,
            "settle_heap": settle,
            "load_average": [round(x, 2) for x in (*load_before, *os.getloadavg())],
            "cpu_reference_ms_p50": round(sorted(reference)[len(reference) // 2], 3),
            "postgres_over_sqlite_p50": round(ratio, 2),
            **out,
        }
    finally:
        server.cleanup()


def _print(report: dict[str, Any]) -> None:
    m = report["machine"]
    print(f"machine: {m['nproc']} cpu · {m['cpu']} · python {m['python']} · sqlite {m['sqlite']}")
    print(
        f"{report['records']} records, {report['calls']} assemble calls per store, "
        f"PostgreSQL synchronous_commit={report['synchronous_commit']}, "
        f"shared_buffers={report['shared_buffers_mb']} MB"
        f"{', heap settled (gc.freeze)' if report['settle_heap'] else ''}; load average "
        f"{report['load_average'][:3]} before the calls, {report['load_average'][3:]} after"
    )
    print(
        f"{'store':>9} {'p50 ms':>8} {'p99 ms':>8} {'reads p50':>10} {'batched/s':>10} "
        f"{'single/s':>9} {'tokens p50':>11}"
    )
    for name in ("sqlite", "postgres"):
        r = report[name]
        rates = r["ingest"] or {"batched_records_per_s": "-", "single_records_per_s": "-"}
        print(
            f"{name:>9} {r['assemble_ms']['p50']:>8.2f} {r['assemble_ms']['p99']:>8.2f} "
            f"{r['store_reads_ms']['p50']:>10.2f} {rates['batched_records_per_s']:>10} "
            f"{rates['single_records_per_s']:>9} {r['window_tokens_p50']:>11}"
        )
    print(
        f"PostgreSQL p50 / SQLite p50 in this run: {report['postgres_over_sqlite_p50']}x; "
        f"CPU reference p50 {report['cpu_reference_ms_p50']} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument(
        "--synchronous-commit",
        choices=["on", "off"],
        default="on",
        help="off: a commit does not wait for its WAL flush (SQLite's synchronous=NORMAL is alike)",
    )
    parser.add_argument(
        "--shared-buffers-mb",
        type=int,
        help="PostgreSQL's buffer cache (default: a quarter of the memory; pgserver's is 128)",
    )
    parser.add_argument(
        "--dir",
        help="keep both databases in DIR and reuse them in a later run with the same --records",
    )
    parser.add_argument(
        "--settle-heap",
        action="store_true",
        help="gc.collect() then gc.freeze() after the warm-up, as `contextwright serve` does",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if args.dir:
        os.makedirs(args.dir, exist_ok=True)
    workdir = args.dir or tempfile.mkdtemp(prefix="cw-bench-pg-")
    try:
        report = run(
            args.records,
            args.calls,
            workdir,
            args.synchronous_commit,
            args.shared_buffers_mb,
            args.settle_heap,
        )
    finally:
        if not args.dir:
            shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print(report)


if __name__ == "__main__":
    main()
