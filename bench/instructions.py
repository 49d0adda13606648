"""Instructions per cold assemble call, counted by valgrind: a measure that a noisy machine does
not blur (docs/benchmarks.md), for comparing two versions of the code.

    .venv/bin/python bench/instructions.py [--records 100000] [--calls 40] [--pure] [--json]

A child process runs `--calls` cold calls (the requests of `bench/assemble.py`, after one call
that warms the process) under `valgrind --tool=callgrind`, and another runs none; the difference,
divided by the calls, is what one call costs, startup and imports left out. With
`callgrind_annotate` at hand the report also splits it by library (Python's runtime, SQLite,
libc, tiktoken, the compiled modules). Two runs of the same code agree to about 1%; threads
(the pool, the trace writer) make the rest. A run takes a few minutes at 100k records: valgrind
runs the code ~50 times slower. `--pure` measures the sources (CONTEXTWRIGHT_PURE=1) instead of
the build. Needs valgrind (`apt-get install valgrind`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from typing import Any

from assemble import BUDGET, PROJECT, _requests, bench_store, machine

from contextwright import Engine

# "==123== Collected : 4216765617" (callgrind's total of instructions read)
_COLLECTED = re.compile(r"Collected\s*:\s*([\d,]+)")
# A line of `callgrind_annotate --inclusive=no`: "1,234 (0.1%)  file:function [/path/lib.so]"
_ANNOTATED = re.compile(r"^\s*([\d,]+)\s+\([^)]*\)\s+.*\[(.+)\]\s*$")


def worker(path: str, calls: int) -> None:
    """The measured process: one warm-up call, then `calls` cold calls."""
    engine = Engine.open(f"sqlite:///{path}", persist_traces=False)
    reqs = _requests(calls + 1)
    agent, task, day = reqs[0]
    engine.assemble(PROJECT, agent, task, BUDGET, session="warm-up")
    # The word counts the first full-text search starts reading on a thread of their own
    # (sqlite_vocab.py) are read before the measured calls, so both runs count them once.
    engine.flush()
    for agent, task, day in reqs[1:]:
        engine.assemble(PROJECT, agent, task, BUDGET, session=f"{agent}-{day}")
        engine.flush()
    engine.close()


def total_instructions(valgrind_stderr: str) -> int:
    found = _COLLECTED.search(valgrind_stderr)
    if found is None:
        raise SystemExit(f"valgrind reported no total:\n{valgrind_stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def by_library(annotated: str) -> Counter[str]:
    """Instructions per shared library, from `callgrind_annotate --inclusive=no` output."""
    out: Counter[str] = Counter()
    for line in annotated.splitlines():
        found = _ANNOTATED.match(line)
        if found:
            out[os.path.basename(found.group(2))] += int(found.group(1).replace(",", ""))
    return out


def _count(path: str, calls: int, pure: bool, workdir: str) -> tuple[int, Counter[str]]:
    env = {k: v for k, v in os.environ.items() if k != "CONTEXTWRIGHT_PURE"}
    # numpy's OpenBLAS threads spin a while when idle, and valgrind counts that (13 M a call in
    # one run on a small store): they sleep at once instead. (With one BLAS thread instead, the
    # process outgrew valgrind's heap segment and crashed in 2 of 3 runs at 100k.)
    env["OPENBLAS_THREAD_TIMEOUT"] = "4"
    if pure:
        env["CONTEXTWRIGHT_PURE"] = "1"
    out_file = os.path.join(workdir, f"callgrind-{calls}.out")
    cmd = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out_file}",
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        path,
        "--calls",
        str(calls),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the measured process failed:\n{done.stderr[-2000:]}")
    libraries: Counter[str] = Counter()
    if shutil.which("callgrind_annotate"):
        annotated = subprocess.run(
            ["callgrind_annotate", "--inclusive=no", "--threshold=100", out_file],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        libraries = by_library(annotated)
    return total_instructions(done.stderr), libraries


def run(records: int, calls: int, pure: bool, workdir: str, quiet: bool) -> dict[str, Any]:
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed: apt-get install valgrind")
    path = bench_store(os.path.join(workdir, f"instructions-{records}.db"), records)
    if not quiet:
        print(f"counting {calls} cold calls under valgrind (a few minutes)...", file=sys.stderr)
    with_calls, libs_with = _count(path, calls, pure, workdir)
    if not quiet:
        print("counting a run with no calls...", file=sys.stderr)
    without, libs_without = _count(path, 0, pure, workdir)
    per_library = {
        lib: round((libs_with[lib] - libs_without.get(lib, 0)) / calls / 1e6, 2)
        for lib in libs_with
    }
    measured = machine()
    if pure:  # what the measured process ran, not this one
        measured["compiled"], measured["compiled_reason"] = False, "CONTEXTWRIGHT_PURE=1 (--pure)"
    return {
        "machine": measured,
        "records": records,
        "calls": calls,
        "instructions_per_call_millions": round((with_calls - without) / calls / 1e6, 2),
        "by_library_millions": dict(
            sorted(((k, v) for k, v in per_library.items() if v >= 0.01), key=lambda kv: -kv[1])
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--pure", action="store_true", help="measure the sources, not the build")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--dir", help="where the database and valgrind's files go (a temp dir)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:  # the measured process (`--calls 0` is the run without calls)
        worker(args.worker, args.calls)
        return
    if args.calls < 1:
        parser.error(f"--calls={args.calls}: give at least 1")
    with tempfile.TemporaryDirectory() as tmp:
        report = run(args.records, args.calls, args.pure, args.dir or tmp, args.json)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(
        f"{report['instructions_per_call_millions']:.2f} M instructions per cold call "
        f"({report['calls']} calls, {report['records']:,} records, "
        f"{'compiled' if report['machine']['compiled'] else 'from source'})"
    )
    for lib, millions in report["by_library_millions"].items():
        print(f"  {millions:8.2f} M  {lib}")


if __name__ == "__main__":
    main()
