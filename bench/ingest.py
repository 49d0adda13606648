"""Batched ingest alone, in one process: `add_many` in batches of 1,000 into a new SQLite file, the
records of bench/assemble.py's generator. Seconds, not minutes: for comparing two versions of
the write path (run it under each, in turns) where bench/assemble.py builds a whole store.

    .venv/bin/python bench/ingest.py [--records 20000] [--rounds 3] [--json]

Prints records/s of wall time and per CPU second of the process (the machine is shared: the
second moves less with the load), the CPU reference and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from assemble import cpu_reference_ms, fill, generate

from contextwright import Engine


def one_round(records: list[dict[str, object]]) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        engine = Engine.open(f"sqlite:///{tmp}/ingest.db", embedder=None, persist_traces=False)
        c0 = time.process_time()
        seconds = fill(engine, records)
        cpu = time.process_time() - c0  # the checkpoint after the adds is in it; it is small
        engine.close()
    return len(records) / seconds, len(records) / cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    records = generate(args.records)
    rounds = [one_round(records) for _ in range(args.rounds)]
    report = {
        "records": args.records,
        "records_per_s": [round(w) for w, _ in rounds],
        "records_per_cpu_s": [round(c) for _, c in rounds],
        "median_per_s": round(statistics.median(w for w, _ in rounds)),
        "cpu_reference_ms": round(statistics.median(cpu_reference_ms() for _ in range(31)), 3),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(
        f"ingest {report['records']} records in batches of 1,000: {report['records_per_s']} "
        f"records/s (per CPU second {report['records_per_cpu_s']}); cpu ref "
        f"{report['cpu_reference_ms']} ms; load average {report['load_average']}"
    )


if __name__ == "__main__":
    main()
