"""Writers beside assemblers in one process: add latency with 8 writer threads alone, then with 8
assembler threads running beside them, on one engine over a prepared SQLite file (the HTTP server's
situation: its request threads share one engine, one GIL and one store).

    .venv/bin/python bench/contention.py --db /tmp/load100k.db [--seconds 8] [--switch-ms 5]

`--db` takes a file that bench/load.py prepared (`--db` there), or builds one of `--records`.
`--switch-ms` sets `sys.setswitchinterval` (CPython's default is 5 ms): how long a thread that holds
the GIL may keep it while another waits for it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from assemble import AGENTS, PROJECT, TOPICS, cpu_reference_ms, fill, generate, machine

from contextwright import Engine

BUDGET = 8000


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] if ordered else 0.0


def phase(engine: Engine, writers: int, readers: int, seconds: float) -> dict[str, Any]:
    names = [a for a, _ in AGENTS]
    adds: list[float] = []
    assembles: list[float] = []
    stop = time.perf_counter() + seconds

    def write(i: int) -> None:
        k = 0
        while time.perf_counter() < stop:
            k += 1
            t = time.perf_counter()
            engine.add(project=PROJECT, author=names[i % len(names)],
                       content=f"update {i}-{k} on the {TOPICS[k % len(TOPICS)]}")  # fmt: skip
            adds.append((time.perf_counter() - t) * 1000)

    def read(i: int) -> None:
        k = 0
        while time.perf_counter() < stop:
            k += 1
            t = time.perf_counter()
            engine.assemble(PROJECT, names[(i + k) % len(names)],
                            f"continue the {TOPICS[(i * 7 + k) % len(TOPICS)]} work", BUDGET)  # fmt: skip
            assembles.append((time.perf_counter() - t) * 1000)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    threads += [threading.Thread(target=read, args=(i,)) for i in range(readers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out: dict[str, Any] = {"adds": len(adds), "add_p50_ms": round(pct(adds, 50), 2),
                           "add_p99_ms": round(pct(adds, 99), 2)}  # fmt: skip
    if readers:
        out.update(assembles=len(assembles), assemble_p50_ms=round(pct(assembles, 50), 2),
                   assemble_p99_ms=round(pct(assembles, 99), 2))  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--switch-ms", type=float, default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.switch_ms is not None:
        sys.setswitchinterval(args.switch_ms / 1000)
    if not os.path.exists(args.db):
        e = Engine.open(f"sqlite:///{args.db}")
        fill(e, generate(args.records))
        e.close()
    engine = Engine.open(f"sqlite:///{args.db}")
    engine.assemble(PROJECT, AGENTS[0][0], "warm up", BUDGET)
    ref = [cpu_reference_ms() for _ in range(50)]
    report = {
        "machine": machine(),
        "switch_ms": sys.getswitchinterval() * 1000,
        "writers_alone": phase(engine, 8, 0, args.seconds),
        "writers_and_assemblers": phase(engine, 8, 8, args.seconds),
        "cpu_reference_ms_p50": round(pct(ref + [cpu_reference_ms() for _ in range(50)], 50), 3),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    engine.close()
    print(json.dumps(report, indent=None if not args.json else 2))


if __name__ == "__main__":
    main()
