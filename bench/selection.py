"""Benchmark of the selection features on SQLite: assemble latency (p50/p99) with the source
cache off and on (repeated tasks, so the cache can hit), with a directory of context rules, and
with reply chains and superseded decisions shown.

    .venv/bin/python bench/selection.py [--records 20000] [--calls 200] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from contextwright import Engine

TOPICS = ["login flow", "session tokens", "rate limiter", "billing export", "search index"]
WORDS = [
    "cache",
    "retry",
    "webhook",
    "ledger",
    "parser",
    "token",
    "index",
    "shard",
    "queue",
    "schema",
    "replica",
]


def seed(engine: Engine, n: int, rng: random.Random) -> None:
    now = time.time()
    batch: list[dict[str, Any]] = []
    for i in range(n):
        topic = rng.choice(TOPICS)
        kind = rng.choice(["message", "message", "note", "decision", "question", "artifact"])
        text = f"{topic}: " + " ".join(rng.choices(WORDS, k=12))
        batch.append(
            {
                "project": "bench",
                "author": rng.choice(["ana", "bo", "cy", "dev", "rex"]),
                "kind": kind,
                "content": text,
                "created_at": now - (n - i) * 30,
            }
        )
        if len(batch) == 2000:
            engine.add_many(batch)
            batch = []
    if batch:
        engine.add_many(batch)
    engine.register_agent("bench", "dev", "developer")


def rules_dir(root: Path) -> Path:
    d = root / ".contextwright" / "rules"
    d.mkdir(parents=True)
    rules = [
        {
            "name": f"r{i}",
            "when": {"all": [{"field": "task", "contains": w}, {"field": "role", "in": ["pm"]}]},
            "then": [{"boost": {"kind": "decision"}, "by": 1}],
        }
        for i, w in enumerate(WORDS)
    ]
    rules.append(
        {
            "name": "dev",
            "when": {"field": "role", "equals": "developer"},
            "then": [{"suppress": {"kind": "note"}}, {"cap": "fulltext", "tokens": 500}],
        }
    )
    (d / "rules.json").write_text(json.dumps({"rules": rules}))
    return d


def timed(engine: Engine, tasks: list[str], **kw: Any) -> dict[str, float]:
    ms = []
    for t in tasks:
        t0 = time.perf_counter()
        engine.assemble("bench", "dev", t, budget=2000, **kw)
        ms.append((time.perf_counter() - t0) * 1000)
    ms.sort()
    return {
        "p50_ms": round(statistics.median(ms), 2),
        "p99_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        db = f"sqlite:///{root / 'bench.db'}"
        engine = Engine.open(db, persist_traces=False, cache_ttl_s=0, embedder=None)
        seed(engine, args.records, rng)
        # 20 distinct tasks, each asked calls/20 times: a team working on a few topics.
        distinct = [f"{rng.choice(TOPICS)} {' '.join(rng.sample(WORDS, 2))}" for _ in range(20)]
        tasks = [distinct[i % 20] for i in range(args.calls)]
        results: dict[str, Any] = {"records": args.records, "calls": args.calls}
        results["cache_off"] = timed(engine, tasks)
        engine.close()
        cached = Engine.open(db, persist_traces=False, cache_ttl_s=30, embedder=None)
        results["cache_on"] = timed(cached, tasks)
        results["cache_on"]["hit_rate"] = round(
            cached.cache.stats.hits / max(cached.cache.stats.hits + cached.cache.stats.misses, 1), 3
        )
        cached.close()
        ruled = Engine.open(
            db, persist_traces=False, cache_ttl_s=0, rules=rules_dir(root), embedder=None
        )
        results["rules_12"] = timed(ruled, tasks)
        results["include_superseded"] = timed(ruled, tasks, include_superseded=True)
        ruled.close()
    if args.json:
        print(json.dumps(results))
    else:
        for k, v in results.items():
            print(f"{k:20} {v}")


if __name__ == "__main__":
    main()
