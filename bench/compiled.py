"""Benchmark of the compiled hot path against the sources (docs/compiled.md): pairs of processes,
one on the mypyc build and one with CONTEXTWRIGHT_PURE=1, take turns on the same cold requests
over the same store, so that each pair shares the VM's spell.

    .venv/bin/python bench/compiled.py [--records 100000] [--calls 200] [--pairs 8] [--json]

Each process runs `--calls` cold calls (requests new to it) and then the same requests again with
every record known (`seen`), and reports its p50s and the calling thread's CPU time. The report
gives each pair's ratio (compiled ÷ source) and their median. Needs a current build (`make
compile`); without one both sides would run from source, and it says so and stops.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from assemble import BUDGET, PROJECT, _requests, bench_store, call_ms, machine, seen_calls

from contextwright import Engine, compiled


def worker(path: str, calls: int) -> dict[str, Any]:
    """One process's measurements on the store at `path`."""
    engine = Engine.open(f"sqlite:///{path}", persist_traces=False)
    reqs = _requests(calls)
    cold: list[float] = []
    cpu: list[float] = []
    for agent, task, day in reqs:
        c0 = time.thread_time()
        result, ms = call_ms(
            engine.assemble, PROJECT, agent, task, BUDGET, session=f"{agent}-{day}"
        )
        cpu.append((time.thread_time() - c0) * 1000)
        cold.append(ms)
        del result  # freed after the clock stopped (call_ms)
    seen = seen_calls(engine, reqs)
    engine.close()
    return {
        "compiled": compiled.ACTIVE,
        "cold_p50": statistics.median(cold),
        "seen_p50": statistics.median(seen),
        "cpu_p50": statistics.median(cpu),
    }


def _run_worker(path: str, calls: int, pure: bool) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "CONTEXTWRIGHT_PURE"}
    if pure:
        env["CONTEXTWRIGHT_PURE"] = "1"
    cmd = [sys.executable, __file__, "--worker", path, "--calls", str(calls)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def run(records: int, calls: int, pairs: int, workdir: str, quiet: bool) -> dict[str, Any]:
    path = bench_store(os.path.join(workdir, f"compiled-{records}.db"), records)
    runs: list[dict[str, Any]] = []
    for i in range(pairs):
        order = (True, False) if i % 2 == 0 else (False, True)  # who goes first alternates
        got = {pure: _run_worker(path, calls, pure) for pure in order}
        source, built = got[True], got[False]
        if not built["compiled"] or source["compiled"]:
            raise SystemExit(f"no current compiled build ({compiled.REASON}); run `make compile`")
        runs.append({"source": source, "compiled": built})
        if not quiet:
            print(
                f"pair {i + 1}: cold {built['cold_p50']:.2f} vs {source['cold_p50']:.2f} ms, "
                f"seen {built['seen_p50']:.2f} vs {source['seen_p50']:.2f} ms",
                file=sys.stderr,
            )

    def ratios(key: str) -> list[float]:
        return [round(r["compiled"][key] / r["source"][key], 3) for r in runs]

    return {
        "records": records,
        "calls": calls,
        "pairs": runs,
        "ratio": {k: ratios(f"{k}_p50") for k in ("cold", "seen", "cpu")},
        "median_ratio": {k: statistics.median(ratios(f"{k}_p50")) for k in ("cold", "seen", "cpu")},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=200, help="cold calls per process")
    parser.add_argument("--pairs", type=int, default=8, help="pairs of processes")
    parser.add_argument("--dir", help="where the database file goes (default: a temp dir)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.calls)))
        return
    with tempfile.TemporaryDirectory(prefix="cw-compiled-") as tmp:
        result = run(args.records, args.calls, args.pairs, args.dir or tmp, args.json)
    report = {"machine": machine(), **result}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    med = report["median_ratio"]
    print(f"{args.records} records, {args.pairs} pairs of {args.calls} cold calls")
    print(
        f"compiled ÷ source, median of the pairs: cold {med['cold']:.3f}, seen "
        f"{med['seen']:.3f}, CPU {med['cpu']:.3f}"
    )


if __name__ == "__main__":
    main()
