"""Benchmark of computed context (spec 3) on SQLite: a project of 200 completed tasks with
handoffs, then new normal-complexity tasks that depend on them.

    .venv/bin/python bench/computed.py [--tasks 200] [--probes 40] [--rounds 5] [--no-write]

Measured in the same run, interleaved call by call so that machine noise hits both sides alike:
- the size of the computed context (the rendered "## Context (Computed)" markdown), in tokens;
- `computed_context()` alone: warm (snapshot cached), after a write (refreshed), cold (reloaded);
- `assemble(task=objective)` against `assemble(task_id=...)`: what computing it adds.
The figures are written to a section of docs/benchmarks.md (other sections are left alone).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from contextwright import Budget, Engine

PROJECT = "bench"
COMPONENTS = {
    "auth": ["login", "JWT token", "session", "password reset", "OAuth callback"],
    "api": ["REST endpoint", "GraphQL resolver", "route handler", "request validation"],
    "db": ["schema migration", "query builder", "model", "index"],
    "ui": ["form component", "settings page", "button styles", "modal"],
    "billing": ["invoice export", "payment webhook", "tax rules"],
    "search": ["search index", "ranking", "query parser"],
    "cache": ["Redis cache", "cache invalidation", "TTL policy"],
    "notify": ["email templates", "push notifications", "digest job"],
}
VERBS = ["Add", "Fix", "Refactor", "Harden", "Test", "Document", "Speed up", "Extend"]
SEVERITIES = ["low", "medium", "medium", "high"]
SECTION = "## Computed context"


def task_text(rng: random.Random, comp: str) -> tuple[str, str, list[str]]:
    topic = rng.choice(COMPONENTS[comp])
    other = rng.choice(COMPONENTS[rng.choice(list(COMPONENTS))])
    verb = rng.choice(VERBS)
    path = f"src/{comp}/{topic.split()[0].lower()}.ts"
    objective = f"{verb} the {topic} in {path} so that the {other} keeps working"
    criteria = [f"{topic} covered by tests", f"no regression in {other}"]
    return f"{verb} {topic}", objective, criteria


def handoff(rng: random.Random, i: int, comp: str) -> dict[str, Any]:
    topic = rng.choice(COMPONENTS[comp])
    word = topic.split()[0].lower()
    files = [
        {
            "path": f"src/{comp}/{rng.choice([word, 'index', 'service', 'types', f'part{i % 7}'])}.ts",
            "lines": f"{rng.randint(1, 50)}-{rng.randint(60, 200)}",
            "purpose": f"{topic} {rng.choice(['handler', 'helpers', 'types', 'wiring'])} for {comp}",
        }
        for _ in range(rng.randint(1, 3))
    ]
    tags = [comp, word]
    return {
        "summary": f"Task {i} changed the {topic} of {comp}: {rng.choice(['added', 'fixed', 'reworked'])} "
        f"the {word} flow and left notes for the next task.",
        "files_created": files[:1],
        "files_modified": files[1:],
        "dependencies_for_next": [{"file": files[0]["path"], "reason": f"entry point of {topic}"}],
        "patterns_discovered": [
            {
                "pattern": f"In {comp}, {rng.choice(['wrap', 'validate', 'log', 'cache'])} every {word} call "
                f"through the {comp} service (pattern {i}.{k})",
                "applies_to": tags + rng.sample(["api", "auth", "database", "ui", "testing"], 1),
                "location": files[0]["path"],
            }
            for k in range(rng.randint(1, 2))
        ],
        "gotchas": [
            {
                "issue": f"The {word} {rng.choice(['cache', 'token', 'index', 'queue'])} goes stale after a "
                f"deploy unless it is warmed (gotcha {i}.{k})",
                "severity": rng.choice(SEVERITIES),
                "applies_to": tags,
            }
            for k in range(rng.randint(1, 3))
        ],
        "open_questions": [
            {
                "question": f"Should the {word} limits be per tenant? (question {i})",
                "blocking": rng.random() < 0.4,
                "context": f"{comp} traffic differs a lot between tenants",
                "recommendation": "per tenant, with a global ceiling",
            }
        ]
        if rng.random() < 0.5
        else [],
        "decisions": [
            {
                "decision": f"{comp} keeps {word} state in one place (decision {i})",
                "rationale": "two sources of truth drifted before",
                "applies_to": tags,
            }
        ]
        if rng.random() < 0.4
        else [],
    }


def build(engine: Engine, n_tasks: int, rng: random.Random) -> list[str]:
    ids: list[str] = []
    engine.register_agent(PROJECT, "dev", "developer")
    for i in range(n_tasks):
        comp = rng.choice(list(COMPONENTS))
        name, objective, criteria = task_text(rng, comp)
        deps = rng.sample(ids[-30:], min(len(ids[-30:]), rng.randint(0, 3)))
        t = engine.tasks.create(
            PROJECT,
            name=name,
            objective=objective,
            acceptance_criteria=criteria,
            dependencies=deps,
            assignee="dev",
        )
        ids.append(t.id)
        engine.complete_task(PROJECT, t.id, handoff(rng, i, comp))
        for k in range(3):  # the chatter around a task
            engine.add(
                project=PROJECT, author="dev", content=f"working on {name}: step {k} of {objective}"
            )
    return ids


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p * (len(xs) - 1)))]


def run(n_tasks: int, probes: int, rounds: int) -> dict[str, Any]:
    rng = random.Random(7)
    tmp = tempfile.mkdtemp(prefix="cw-bench-computed-")
    clock = [1_760_000_000.0]

    def tick() -> float:
        clock[0] += 1.0
        return clock[0]

    engine = Engine.open(f"sqlite:///{tmp}/computed.db", clock=tick, workers=4, embedder=None)
    t0 = time.perf_counter()
    done = build(engine, n_tasks, rng)
    build_s = time.perf_counter() - t0
    probe_ids = []
    for _ in range(probes):
        comp = rng.choice(list(COMPONENTS))
        name, objective, criteria = task_text(rng, comp)
        deps = rng.sample(done[-60:], rng.randint(1, 3))
        probe_ids.append(
            engine.tasks.create(
                PROJECT,
                name=name,
                objective=objective,
                acceptance_criteria=criteria,
                dependencies=deps,
                complexity="normal",
                assignee="dev",
            ).id
        )
    budget = Budget(model="gpt-4o", window=16_000, reserve=2_000)
    counter = engine.counter
    tokens, items, cold, warm, base, withc, in_window = [], [], [], [], [], [], []
    base_cpu: list[float] = []
    with_cpu: list[float] = []
    engine.tasks.computed_context(PROJECT, probe_ids[0])  # load the snapshot once
    for pid in probe_ids:
        c = engine.tasks.computed_context(PROJECT, pid)
        tokens.append(counter.count(c.render()))
        items.append(
            len(c.patterns_to_follow)
            + len(c.warnings)
            + len(c.relevant_decisions)
            + len(c.prior_work)
            + len(c.code_references)
            + len(c.blocking_questions)
        )
    for _ in range(rounds):
        for pid in probe_ids:
            objective = str(engine.get(PROJECT, pid).meta["objective"])
            s = time.perf_counter()
            engine.tasks.computed_context(PROJECT, pid)
            warm.append((time.perf_counter() - s) * 1000)
            # ABBA order, so that drift in machine load falls on both sides alike.
            order = ("base", "with") if len(base) % 2 == 0 else ("with", "base")
            for side in order:
                s, p = time.perf_counter(), time.process_time()
                if side == "base":
                    engine.assemble(PROJECT, "dev", task=objective, budget=budget)
                    base.append((time.perf_counter() - s) * 1000)
                    base_cpu.append((time.process_time() - p) * 1000)
                else:
                    a = engine.assemble(PROJECT, "dev", task_id=pid, budget=budget)
                    withc.append((time.perf_counter() - s) * 1000)
                    with_cpu.append((time.process_time() - p) * 1000)
            in_window.append(
                sum(
                    i["tokens"]
                    for i in a.trace.items
                    if "computed" in i["sources"] and i["decision"] != "dropped"
                )
            )
    refreshed = []
    for pid in probe_ids[:15]:  # a write moves the store version: the snapshot is refreshed
        engine.add(project=PROJECT, author="dev", content="a write between calls")
        s = time.perf_counter()
        engine.tasks.computed_context(PROJECT, pid)
        refreshed.append((time.perf_counter() - s) * 1000)
    engine.tasks.graph.full_reload_s = 0
    for pid in probe_ids[:15]:  # cold: a full reload of the snapshot
        engine.add(project=PROJECT, author="dev", content="a write between calls")
        s = time.perf_counter()
        engine.tasks.computed_context(PROJECT, pid)
        cold.append((time.perf_counter() - s) * 1000)
    records = engine.store.count(PROJECT)
    engine.close()
    deltas = [b - a for a, b in zip(base, withc, strict=True)]
    return {
        "tasks": n_tasks,
        "records": records,
        "probes": probes,
        "rounds": rounds,
        "build_s": round(build_s, 1),
        "tokens_mean": round(statistics.mean(tokens)),
        "tokens_min": min(tokens),
        "tokens_max": max(tokens),
        "items_mean": round(statistics.mean(items), 1),
        "in_window_mean": round(statistics.mean(in_window)),
        "computed_warm_p50": round(pct(warm, 0.5), 2),
        "computed_warm_p99": round(pct(warm, 0.99), 2),
        "computed_cold_p50": round(pct(cold, 0.5), 2),
        "computed_refreshed_p50": round(pct(refreshed, 0.5), 2),
        "assemble_p50": round(pct(base, 0.5), 2),
        "assemble_task_id_p50": round(pct(withc, 0.5), 2),
        "added_p50": round(pct(withc, 0.5) - pct(base, 0.5), 2),
        "paired_delta_p50": round(pct(deltas, 0.5), 2),
        "assemble_cpu_p50": round(pct(base_cpu, 0.5), 2),
        "assemble_task_id_cpu_p50": round(pct(with_cpu, 0.5), 2),
        "added_cpu_p50": round(pct(with_cpu, 0.5) - pct(base_cpu, 0.5), 2),
    }


def markdown(r: dict[str, Any]) -> str:
    ok_tokens = 500 <= r["tokens_mean"] <= 2000
    ok_ms = r["added_p50"] <= 5.0
    return f"""{SECTION}

`bench/computed.py` (issue 4): a SQLite project of {r["tasks"]} completed tasks, each with a structured
handoff ({r["records"]} records in all, with chatter), then {r["probes"]} new tasks of normal complexity
that depend on 1–3 of them; {r["rounds"]} rounds, the calls interleaved so that noise hits both sides.
Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs, shared with other jobs.

| measure | value | target |
|---|---|---|
| computed context, rendered template, mean tokens | {r["tokens_mean"]} (min {r["tokens_min"]}, max {r["tokens_max"]}) | 500–2,000 {"✅" if ok_tokens else "❌"} |
| items per computed context, mean | {r["items_mean"]} | |
| computed items kept in the assembled window, mean tokens | {r["in_window_mean"]} | |
| `computed_context()` alone, warm, p50 / p99 | {r["computed_warm_p50"]} / {r["computed_warm_p99"]} ms | |
| `computed_context()` alone, after a write (snapshot refreshed), p50 | {r["computed_refreshed_p50"]} ms | |
| `computed_context()` alone, cold (full snapshot load), p50 | {r["computed_cold_p50"]} ms | |
| `assemble(task=objective)` p50 | {r["assemble_p50"]} ms | |
| `assemble(task_id=...)` p50 | {r["assemble_task_id_p50"]} ms | |
| added by computing it, p50 (difference of p50s) | {r["added_p50"]} ms | ≤ 5 ms {"✅" if ok_ms else "❌"} |
| added, p50 of paired per-call differences | {r["paired_delta_p50"]} ms | |
| CPU time (all threads), `assemble(task=...)` / `assemble(task_id=...)` p50 | {r["assemble_cpu_p50"]} / {r["assemble_task_id_cpu_p50"]} ms | |
| added CPU time, p50 | {r["added_cpu_p50"]} ms | ≤ 5 ms {"✅" if r["added_cpu_p50"] <= 5.0 else "❌"} |

"Warm": the project's graph snapshot (knowledge nodes by tag, tasks, handoffs, questions and
live context-map entries) is cached because the store version has not moved. Any write moves it;
the next call then refreshes the snapshot from the records created since plus the current status
of tasks and questions ("after a write"), and at most every 30 s reloads it whole ("cold"). The
computed source runs concurrently with the other sources, so part of its cost hides behind
theirs; the added figure is what a caller actually waits. The machine was shared with other jobs,
so absolute times are noisy; the with/without comparison is interleaved call by call.
"""


def write_section(path: Path, text: str) -> None:
    """Replace our section (from its heading to the next '## ') or append it; keep the rest."""
    old = path.read_text() if path.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(old):
        new = pattern.sub(lambda _m: text + "\n", old, count=1)
    else:
        new = old.rstrip("\n") + "\n\n" + text
    path.write_text(new.rstrip("\n") + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--probes", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md")
    args = ap.parse_args(argv)
    r = run(args.tasks, args.probes, args.rounds)
    text = markdown(r)
    print(text)
    if not args.no_write:
        write_section(Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
