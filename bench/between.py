"""What the time between two calls costs the second one: the same agent-loop calls on SQLite,
back to back, after the CPU was kept busy for a while, and after it slept as long.

    .venv/bin/python bench/between.py [--records 100000] [--sessions 30] [--idle-ms 100] [--json]

The agent loop of `bench/assemble.py` (one task and one session per agent, ten turns, the
agent's reply written between two calls, the trace flushed after each call), in one process, on
one engine. Before each call one of three things happens, in turn, so that the machine's slow and
fast spells fall on all three alike:

- `back_to_back`: nothing; the call finds in the CPU's caches what the last call left there;
- `busy`: the calling thread spins for `--idle-ms` (the CPU stays awake, and the call's data is
  left alone by this process but not by whatever else runs on the machine);
- `asleep`: the calling thread sleeps for `--idle-ms`, as it waits for a model's answer.

The work of the three is the same (the same code, requests of the same kind, the same store),
so what differs is where the call's data is when it starts: the gap between `back_to_back` and
the other two is what a call pays for memory that has gone cold.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from collections.abc import Callable
from typing import Any

from assemble import (
    BUDGET,
    PROJECT,
    _requests,
    _sentence,
    _stats,
    assemble_ms,
    bench_store,
    machine,
)

from contextwright import Engine


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def run(path: str, sessions: int, idle_s: float) -> dict[str, Any]:
    waits: dict[str, Callable[[], object]] = {
        "back_to_back": lambda: None,
        "busy": lambda: _spin(idle_s),
        "asleep": lambda: time.sleep(idle_s),
    }
    names = list(waits)
    times: dict[str, list[float]] = {name: [] for name in names}
    rng = random.Random(13)
    turn_no = 0
    with Engine.open(f"sqlite:///{path}", embedder=None) as engine:
        for agent, task, day in _requests(sessions, seed=13):
            session = f"between-{agent}-{day}-{turn_no}"
            for turn in range(10):
                name = names[turn_no % len(names)]
                turn_no += 1
                waits[name]()
                ms = assemble_ms(engine, PROJECT, agent, task, BUDGET, session=session)
                if turn:  # the first call of a session is a new task (the cold calls)
                    times[name].append(ms)
                engine.flush()
                engine.add(project=PROJECT, author=agent, content=_sentence(rng), session=session)
    return {name: _stats(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, default=30, help="agent-loop sessions of 10 turns")
    parser.add_argument("--idle-ms", type=float, default=100.0, help="the busy or asleep time")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--dir", help="where the database file goes (default: a temp dir)")
    args = parser.parse_args()
    if args.sessions < 1 or args.idle_ms < 0:
        parser.error("--sessions must be at least 1 and --idle-ms at least 0")
    with tempfile.TemporaryDirectory(prefix="cw-between-") as tmp:
        path = bench_store(
            os.path.join(args.dir or tmp, f"between-{args.records}.db"), args.records
        )
        calls = run(path, args.sessions, args.idle_ms / 1000)
    report = {
        "machine": machine(),
        "records": args.records,
        "idle_ms": args.idle_ms,
        "assemble_ms": calls,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    m = report["machine"]
    print(f"machine: {m['nproc']} cpu · {m['cpu']} · python {m['python']} · sqlite {m['sqlite']}")
    print(f"{'before the call':<24} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8}")
    labels = {
        "back_to_back": "nothing (back to back)",
        "busy": f"{args.idle_ms:g} ms busy",
        "asleep": f"{args.idle_ms:g} ms asleep",
    }
    for name, s in calls.items():
        print(f"{labels[name]:<24} {s['p50']:>8.2f} {s['p99']:>8.2f} {s['mean']:>8.2f}")


if __name__ == "__main__":
    main()
