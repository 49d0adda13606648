"""Two versions of contextwright on the same PostgreSQL store, beside the SQLite store, in one
process: this checkout's code and another checkout's (`--old`, e.g. a worktree of main) take
turns request by request on the same databases, so that a noisy machine slows all alike, and
their windows are compared.

    .venv/bin/python bench/postgres_ab.py --old ../main --dir DIR [--records 1000000] [--calls 100]
        [--settle-heap]

DIR is a `bench/postgres.py --dir DIR` whose stores hold `--records` records (that run builds
them; nothing here writes to them but the engines' own reads). The other checkout's package is
loaded whole under another name (`cw_old`), engine and stores alike, so each call is entirely one
version's. The order of the two PostgreSQL engines alternates from request to request.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import statistics
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from assemble import BUDGET, PROJECT, _requests, call_ms, cpu_reference_ms, machine
from postgres import start_postgres, warm_buffers, warm_files, warm_up

from contextwright import Engine
from contextwright.stores.postgres import PostgresStore
from contextwright.stores.sqlite import SQLiteStore


def load_package(checkout: str, name: str = "cw_old") -> Any:
    """The `contextwright` package of another checkout, imported as `name` (its modules import
    one another relatively, so they stay within it)."""
    root = os.path.join(checkout, "src", "contextwright")
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(root, "__init__.py"), submodule_search_locations=[root]
    )
    if spec is None or spec.loader is None:
        sys.exit(f"no contextwright package under {checkout}/src")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def run(old_checkout: str, workdir: str, n: int, calls: int, settle: bool = False) -> None:
    old = load_package(old_checkout)
    importlib.import_module("cw_old.stores.postgres")
    server, url = start_postgres(workdir)
    try:
        engines: dict[str, Any] = {
            "sqlite": Engine(SQLiteStore(os.path.join(workdir, "bench.db"))),
            "pg_old": old.Engine(sys.modules["cw_old.stores.postgres"].PostgresStore(url)),
            "pg_new": Engine(PostgresStore(url)),
        }
        for name, engine in engines.items():
            if engine.store.count(PROJECT) != n:
                sys.exit(f"{workdir} holds other stores ({name}): build it with bench/postgres.py")
        warm_files([os.path.join(workdir, "pgdata", "base"), os.path.join(workdir, "bench.db")])
        warm_buffers(url)
        # Each version's own Budget: the other's class is not one it accepts.
        budgets = {name: BUDGET for name in engines}
        budgets["pg_old"] = old.Budget(**dataclasses.asdict(BUDGET))
        reqs = _requests(calls)
        warm_up(engines.values(), reqs, settle, [budgets[name] for name in engines])
        load_before = os.getloadavg()
        times: dict[str, list[float]] = {name: [] for name in engines}
        texts: dict[str, list[str]] = {name: [] for name in engines}
        reference: list[float] = []
        for i, (agent, task, day) in enumerate(reqs):
            order = ["sqlite", "pg_old", "pg_new"] if i % 2 else ["sqlite", "pg_new", "pg_old"]
            for name in order:
                result, ms = call_ms(
                    engines[name].assemble, PROJECT, agent, task, budgets[name],
                    session=f"{agent}-{day}",
                )  # fmt: skip
                times[name].append(ms)
                texts[name].append(result.text)
                del result
            reference.append(cpu_reference_ms())
        m = machine()
        print(f"machine: {m['nproc']} cpu · {m['cpu']} · python {m['python']}")
        print(
            f"{n} records, {calls} calls per engine; load average {load_before} before, "
            f"{os.getloadavg()} after; CPU reference p50 {statistics.median(reference):.3f} ms"
        )
        p50 = {name: statistics.median(v) for name, v in times.items()}
        for name, v in times.items():
            p99 = sorted(v)[min(len(v) - 1, int(0.99 * len(v)))]
            print(f"{name:>7} assemble p50 {p50[name]:7.2f} ms  p99 {p99:7.2f} ms")
        print(
            f"PostgreSQL / SQLite p50: old {p50['pg_old'] / p50['sqlite']:.2f}, "
            f"new {p50['pg_new'] / p50['sqlite']:.2f}; new / old {p50['pg_new'] / p50['pg_old']:.3f}"
        )
        same = sum(a == b for a, b in zip(texts["pg_old"], texts["pg_new"], strict=True))
        print(f"windows the same in both versions: {same} of {calls}")
        for engine in engines.values():
            engine.close()
    finally:
        server.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--old", required=True, help="the other checkout (its src/contextwright)")
    parser.add_argument("--dir", required=True, help="a bench/postgres.py --dir with its stores")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument(
        "--settle-heap",
        action="store_true",
        help="gc.collect() then gc.freeze() after the warm-up, as `contextwright serve` does",
    )
    args = parser.parse_args()
    run(args.old, args.dir, args.records, args.calls, args.settle_heap)


if __name__ == "__main__":
    main()
