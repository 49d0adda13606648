"""Benchmark of long sessions: compaction and pruning of a 1,000-turn session with the extractive
summarizer, p50 and p99, with baselines measured in the same run.

    .venv/bin/python bench/sessions.py [--turns 1000] [--rounds 12] [--json]

A session of `--turns` turns (user message, tool call with a large result, assistant reply: 4,000
records at 1,000 turns) is written once to a SQLite file. Then:

- `compact`: the whole `engine.sessions.compact()` (memory flush, extractive summary of every turn
  but the last 6, the summary record, one status fact per replaced record), each round on a fresh
  copy of the file;
- `summarize`: the extractive summary of those turns alone (no I/O);
- `prune`: pruning every tool result of the session (cap at 8k tokens, one-line summaries for
  turns older than the keep window), with the prune cache cleared;
- `window`: `engine.sessions.window()` on the compacted session (steady state);
- baselines: `tokenize` (counting every tool result's tokens, the floor of any pruning), and
  `last_n` (a naive window: the newest records joined until 8k tokens, no summary, no pairing).
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contextwright import Budget, Engine
from contextwright.sessions import SessionConfig, build_turns
from contextwright.sessions.compaction import select
from contextwright.sessions.layers import Plan, build_candidates
from contextwright.sessions.pruning import one_line
from contextwright.sessions.turns import turn_text
from contextwright.stores.sqlite import store_files
from contextwright.summarizers import ExtractiveSummarizer

P, A, S = "bench", "dev", "s1"
BUDGET = Budget(model="gpt-4o", window=32_000)


def build(path: Path, turns: int) -> None:
    engine = Engine.open(f"sqlite:///{path}", workers=1, persist_traces=False, embedder=None)
    s = engine.sessions
    for i in range(turns):
        text = f"Please refactor src/mod{i}.py; we decided to keep f{i} pure."
        if i % 50 == 7:
            text = f"Actually, I meant module {i + 1}, not {i}."
        s.append(P, A, S, "user", text)
        call = s.append(
            P, A, S, "tool_call", "read", tool="read_file", arguments={"path": f"src/mod{i}.py"}
        )
        lines = (20, 80, 300, 40, 700)[i % 5]
        body = "\n".join(f"def f{i}_{j}(x): return x * {j}  # line {j}" for j in range(lines))
        s.append(P, A, S, "tool_result", body, reply_to=call.id)
        s.append(P, A, S, "assistant", f"Updated src/mod{i}.py and added {lines} lines of tests.")
    engine.close()


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    k = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[k]


def timed(fn: Callable[[], Any], rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="cw-bench-sessions-"))
    base = tmp / "base.db"
    t0 = time.perf_counter()
    build(base, args.turns)
    build_s = time.perf_counter() - t0
    results: dict[str, list[float]] = {}

    # compact(): each round on a fresh copy of the uncompacted session.
    compact_ms = []
    replaced = 0
    for r in range(max(args.rounds // 2, 3)):
        copy = tmp / f"round{r}.db"
        for src, dst in zip(store_files(str(base)), store_files(str(copy)), strict=True):
            if Path(src).exists():
                shutil.copy(src, dst)
        engine = Engine.open(f"sqlite:///{copy}", workers=1, persist_traces=False, embedder=None)
        t = time.perf_counter()
        c = engine.sessions.compact(P, A, S)
        compact_ms.append((time.perf_counter() - t) * 1000)
        replaced = len(c.replaced)
        engine.close()
    results["compact (whole, SQLite)"] = compact_ms

    engine = Engine.open(f"sqlite:///{base}", workers=1, persist_traces=False, embedder=None)
    sessions = engine.sessions
    turns = build_turns(sessions.live_records(P, A, S))
    sel = select(turns, 6)
    texts = [
        turn_text(t, A, one_line(t.head, t.result) if t.is_tool else None) for t in sel.replace
    ]
    summarizer = ExtractiveSummarizer(engine.counter)
    results["summarize (extractive, pure)"] = timed(
        lambda: summarizer.summarize(texts, max_tokens=800), args.rounds
    )

    def prune() -> None:
        plan = Plan(project=P, agent=A, session=S, turns=turns, keep=6)
        build_candidates(plan, engine.counter, SessionConfig().tool_result_cap, {})

    results["prune (every tool result)"] = timed(prune, args.rounds)
    bodies = [t.result.content for t in turns if t.result is not None]
    results["baseline: tokenize every tool result"] = timed(
        lambda: [engine.counter.count(b) for b in bodies], min(args.rounds, 3)
    )
    records = sessions.live_records(P, A, S)

    def last_n() -> str:
        out, used = [], 0
        for r in reversed(records):
            if used + r.tokens > 8_000:
                break
            out.append(r.content)
            used += r.tokens
        return "\n".join(reversed(out))

    results["baseline: last_n naive window"] = timed(last_n, args.rounds)
    sessions.compact(P, A, S)
    results["window (compacted session)"] = timed(
        lambda: sessions.window(P, A, S, budget=BUDGET, system="You are dev."), args.rounds
    )
    engine.close()
    shutil.rmtree(tmp, ignore_errors=True)
    rows = {
        name: {
            "p50_ms": round(statistics.median(v), 2),
            "p99_ms": round(pct(v, 0.99), 2),
            "n": len(v),
        }
        for name, v in results.items()
    }
    meta = {
        "turns": args.turns,
        "records": args.turns * 4,
        "tool_result_tokens": sum(engine.counter.count(b) for b in bodies),
        "replaced_by_compaction": replaced,
        "build_s": round(build_s, 1),
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    if args.json:
        json.dump({"meta": meta, "results": rows}, sys.stdout, indent=2)
        return
    print(
        f"{args.turns} turns, {meta['records']} records, {meta['tool_result_tokens']:,} tool-result tokens; "
        f"compaction replaced {replaced} records; built in {meta['build_s']} s"
    )
    print("| measure | p50 ms | p99 ms | n |")
    print("|---|---|---|---|")
    for name, row in rows.items():
        print(f"| {name} | {row['p50_ms']} | {row['p99_ms']} | {row['n']} |")


if __name__ == "__main__":
    main()
