"""Every read that assemble calls make on the PostgreSQL store, one call at a time: when each round
trip started in the call, how long it waited, on which thread, and the server's own time for each
of its statements (`EXPLAIN (ANALYZE, BUFFERS)`, run again after the call, outside its clock).

    .venv/bin/python bench/postgres_plans.py --dir DIR [--records 1000000] [--calls 5] [--plans]

DIR is a `bench/postgres.py --dir DIR` whose store holds `--records` records (that run builds
it); its records and requests are bench/assemble.py's, and the calls are its first requests after
ten that warm the caches. `--plans` prints each statement's whole plan, not only its time.
A round trip is a pooled read (`PostgresStore._reading`): one statement, or several sent in one
pipeline (`query_many`, `follow_ups`, `doc_with_version` with the word counts, the project's
version with the search started ahead, and the words' counts between them where they are not
known yet and common: `_read_versioned` with them).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import psycopg
from assemble import BUDGET, PROJECT, _requests
from postgres import built, warm_up

from contextwright import Engine
from contextwright.stores.postgres import PostgresStore
from contextwright.stores.postgres_schema import set_planner
from contextwright.stores.postgres_text import _OWN_LEXEMES, COUNTS_PLANNER, VERSION_SQL
from contextwright.stores.postgres_url import take_pool_option

# One round trip: (start ms in the call, ms waited, thread, [(sql, params)], planner setting).
Trip = tuple[float, float, str, list[tuple[str, Any]], str | None]


class Recorder:
    """Wraps a store's reads to log each round trip of the current call."""

    def __init__(self, store: PostgresStore) -> None:
        self.trips: list[Trip] = []
        self.t0 = time.perf_counter()
        read, read_many = store._read, store._read_many

        def one(sql: str, params: Any = None, **kw: Any) -> list[Any]:
            return self._timed([(sql, params)], kw.get("planner"), lambda: read(sql, params, **kw))

        def many(statements: Any, counts: Any = None) -> list[list[Any]]:
            # The word counts' statement, where sent, goes last with its own planner setting.
            stmts = list(statements) + ([counts] if counts is not None else [])
            planner = COUNTS_PLANNER if counts is not None else None
            return self._timed(stmts, planner, lambda: read_many(statements, counts))

        versioned = store._read_versioned

        def searched(
            project: str | None, sql: str, params: Any, planner: str | None, guessed: Any = None
        ) -> Any:
            # The version (if read), the guessed words' lexemes (if any), then the search.
            stmts = [(VERSION_SQL, {"p": project})] if project is not None else []
            stmts += [(_OWN_LEXEMES, {"words": list(guessed)})] if guessed else []
            return self._timed(
                [*stmts, (sql, params)],
                planner,
                lambda: versioned(project, sql, params, planner, guessed),
            )

        store._read = one  # type: ignore[method-assign]
        store._read_versioned = searched  # type: ignore[method-assign]
        store._read_many = many  # type: ignore[method-assign]

    def _timed(self, stmts: list[tuple[str, Any]], planner: str | None, fn: Any) -> Any:
        t = time.perf_counter()
        out = fn()
        ms = (time.perf_counter() - t) * 1000
        self.trips.append(
            ((t - self.t0) * 1000, ms, threading.current_thread().name, stmts, planner)
        )
        return out

    def start(self) -> None:
        self.trips.clear()
        self.t0 = time.perf_counter()


def explain(conn: Any, sql: str, params: Any, planner: str | None) -> list[str]:
    """The statement's plan with the server's times, its parameters inlined as the store sent
    them, and its planner setting (if any) for the rest of the transaction open on `conn`: the
    statements of a round trip are explained in one transaction, in their order, the last with
    the trip's setting."""
    text = psycopg.ClientCursor(conn).mogrify(sql, params)
    if planner:
        set_planner(conn, planner)
    return [r[0] for r in conn.execute(f"EXPLAIN (ANALYZE, BUFFERS) {text}").fetchall()]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--dir", required=True, help="a bench/postgres.py --dir with its store")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--plans", action="store_true", help="print every plan in full")
    args = parser.parse_args()
    with built(args.dir, args.records) as (url, store):
        engine = Engine(store)
        reqs = _requests(10 + args.calls)
        warm_up([engine], reqs, False)
        rec = Recorder(store)
        with psycopg.connect(take_pool_option(url)[0]) as conn:
            for agent, task, day in reqs[10:]:
                rec.start()
                engine.assemble(PROJECT, agent, task, BUDGET, session=f"{agent}-{day}")
                total = (time.perf_counter() - rec.t0) * 1000
                trips = sorted(rec.trips)
                print(f"== {agent}: {task!r}: {total:.2f} ms, {len(trips)} round trips")
                for start, ms, thread, stmts, planner in trips:
                    print(f"  +{start:7.2f} ms  waited {ms:6.2f} ms  {thread}")
                    with conn.transaction():
                        for k, (sql, params) in enumerate(stmts):
                            last = k == len(stmts) - 1
                            plan = explain(conn, sql, params, planner if last else None)
                            server_ms = sum(
                                float(line.split(":")[1].split()[0])
                                for line in plan
                                if line.startswith(("Planning Time", "Execution Time"))
                            )
                            text = " ".join(sql.split())[:100]
                            print(f"      server {server_ms:6.2f} ms  {text}")
                            if args.plans:
                                print("\n".join(f"        {line}" for line in plan))
        engine.close()


if __name__ == "__main__":
    main()
