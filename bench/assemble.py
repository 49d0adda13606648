"""Benchmark of the assemble hot path on SQLite: latency (p50/p99), batched ingest rate, file size
and peak RSS, at several project sizes, with baselines measured in the same run.

    .venv/bin/python bench/assemble.py [--sizes 10000,100000] [--calls 200] [--loop-sessions 20]
        [--vectors] [--settle-heap] [--json]

Each size runs in its own child process, so that its peak RSS is its own. The machine may be
noisy (other processes), so two baselines are measured beside the engine in the same process:

- `queries`: the bare store reads that the default sources make, run one after another, with no
  scoring, packing, rendering or trace;
- `last_n`: a naive window, the newest 60 records the agent may see, joined into one text.

A third measure is the machine's own speed, `cpu_reference_ms`: a fixed piece of pure-Python work
timed after each request. On this VM the same work takes up to 1.8 times as long at one moment as
at another, so `assemble_per_reference` (the cold calls' p50 over the reference's p50) is what to
compare between runs made in different spells. The full collections of the cyclic GC during the
cold calls are counted too (`full_collections`): where one lands in a timed call, it is the p99.
`--settle-heap` calls `gc.collect()` then `gc.freeze()` after the warm-up, as `contextwright serve`
and `contextwright mcp` do before they answer: what start-up made is then left out of every full
collection (`frozen_objects` says how many objects).

The same calls also run through an engine with `locality=False`, to show what that pass costs, and
through one with `workers=1`, where every source runs on the calling thread (no pool). Each engine
and the baselines read through a store and a token counter of their own, so that none is timed on
caches that another warmed for the same request.

Two workloads. The cold calls give every call a new task, agent and session at random: nothing
that one call read or counted helps the next, the worst case. The agent loop (`agent_loop`) is
how an agent works: one task and one session over ten turns, the agent's reply written to the
store between two calls, so that every call follows a write (no source result is ever reused). It
runs twice: back to back, and with the CPU left idle for 100 ms before each call, as it is while
an agent waits for its model (on this shared VM that alone costs a call 2-3 ms).

Each call is timed from the call to its return, and its result is freed after the clock stops
(`call_ms`): freeing a result (its items, messages and trace, a few thousand objects) is the
caller's, whenever it lets go of it, and `result_release_ms` times it apart. Until 22 Nov 2026,
17:15 UTC the timings held the freeing of the previous call's result (0.2-0.45 ms at 100k).

After the cold calls, the same requests run again with a word added to each task (`seen p50`):
no source result is reused, but every record is already decoded and every line already counted,
so the difference with the cold calls is what a call pays for records the process has not seen.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any, TypeVar

from contextwright import Budget, Engine
from contextwright.ports import Query
from contextwright.stores.sqlite import SQLiteStore, store_files
from contextwright.tokens.counter import TokenCounter

PROJECT = "bench"
AGENTS = [
    ("rhea", "researcher"),
    ("dev", "developer"),
    ("dana", "developer"),
    ("rex", "reviewer"),
    ("pam", "pm"),
    ("ops", "default"),
    ("quinn", "reviewer"),
    ("ravi", "researcher"),
]
TOPICS = [
    "login flow",
    "session tokens",
    "rate limiter",
    "billing export",
    "search index",
    "onboarding email",
    "audit log",
    "cache invalidation",
    "payment webhook",
    "dark mode",
    "csv import",
    "password reset",
    "retry policy",
    "feature flags",
    "database migration",
    "mobile layout",
    "api pagination",
    "error budget",
    "release notes",
    "load test",
]
VERBS = ["fix", "review", "ship", "investigate", "document", "refactor", "measure", "test"]
DETAILS = [
    "The p95 went up after the last deploy.",
    "We need a decision before Friday.",
    "Customers on the EU cluster see it first.",
    "The fix touches two services and the shared client.",
    "I could not reproduce it locally with the seed data.",
    "The old behaviour is still behind a flag.",
    "Logs show a timeout at the gateway after 30 seconds.",
    "This blocks the release checklist.",
    "The spec says the token must rotate on every refresh.",
    "We agreed to keep backwards compatibility for one minor version.",
]
TOOLS = ["run_tests", "grep", "read_file", "http_get", "sql_query"]
BUDGET = Budget(model="gpt-4o", window=8000, reserve=1000)


SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ten",
    "ras",
    "vo",
    "pel",
    "dri",
    "zun",
    "fa",
    "gor",
    "bi",
    "shu",
    "nex",
]


def _vocabulary(size: int = 4000, seed: int = 3) -> list[str]:
    """Pseudo-words standing in for a real team's long tail (names of services, tables, flags)."""
    rng = random.Random(seed)
    words: dict[str, None] = {}
    while len(words) < size:
        words.setdefault("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))), None)
    return list(words)


VOCAB = _vocabulary()
# Zipf weights: a few words are everywhere, most are rare, as in real text.
ZIPF = [1.0 / (rank + 10) for rank in range(len(VOCAB))]
# Summed once: `choices(weights=...)` sums them again on every call, which took ten of the
# thirteen minutes of a 1M-record run. The same cumulative weights draw the same words.
ZIPF_CUM = list(itertools.accumulate(ZIPF))


def _words(rng: random.Random, k: int) -> str:
    return " ".join(rng.choices(VOCAB, cum_weights=ZIPF_CUM, k=k))


def _sentence(rng: random.Random) -> str:
    topic = rng.choice(TOPICS)
    return (
        f"{rng.choice(VERBS).capitalize()} the {topic} in {_words(rng, 2)}: "
        f"{rng.choice(DETAILS)} See {_words(rng, 3)}."
    )


def run_child(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    """Run one measuring process; if it fails, show its own error and stop with its code."""
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(out.stderr or out.stdout)
        sys.exit(
            f"{os.path.basename(cmd[1])}: the run `{' '.join(cmd[2:])}` failed (exit {out.returncode})"
        )
    return out


def generate(n: int, seed: int = 7) -> list[dict[str, Any]]:
    """`n` records of a team's month: messages, tool calls with large results, questions,
    decisions (some superseding older ones), tasks, handoffs and pinned constraints."""
    rng = random.Random(seed)
    start = 1_760_000_000.0
    step = 30 * 86_400 / n
    out: list[dict[str, Any]] = []
    decisions: list[str] = []
    names = [a for a, _ in AGENTS]
    for i in range(n):
        author = rng.choice(names)
        at = start + i * step
        rid = f"b{i:07d}"
        session = f"{author}-d{int(i * step // 86_400)}"
        base: dict[str, Any] = {
            "id": rid,
            "project": PROJECT,
            "author": author,
            "created_at": at,
            "session": session,
        }
        roll = rng.random()
        if i < 12:
            base.update(kind="constraint", pinned=True, content=f"Always: {_sentence(rng)}")
        elif roll < 0.08 and out and out[-1]["kind"] != "tool_call":
            tool = rng.choice(TOOLS)
            base.update(
                kind="tool_call",
                content=f"{tool} {rng.choice(TOPICS)}",
                meta={"name": tool, "arguments": {"q": rng.choice(TOPICS)}},
            )
        elif out and out[-1]["kind"] == "tool_call":
            lines = [f"{k:03d} {_sentence(rng)}" for k in range(rng.randint(10, 40))]
            base.update(
                kind="tool_result",
                author=out[-1]["author"],
                session=out[-1]["session"],
                reply_to=out[-1]["id"],
                content="\n".join(lines),
            )
        elif roll < 0.13:
            base.update(kind="question", content=f"Question: how should we {_sentence(rng)}?")
        elif roll < 0.17:
            base["kind"] = "decision"
            base["content"] = f"Decision: {_sentence(rng)}"
            if decisions and rng.random() < 0.4:
                base["supersedes"] = decisions.pop(rng.randrange(len(decisions)))
            decisions.append(rid)
        elif roll < 0.20:
            base.update(kind="task", content=f"Task: {_sentence(rng)}", to=[rng.choice(names)])
        elif roll < 0.22:
            peer = rng.choice(names)
            base.update(
                kind="handoff",
                to=[peer],
                content=f"@{peer} handing off the {rng.choice(TOPICS)}. {_sentence(rng)}",
            )
        elif roll < 0.30:
            peer = rng.choice(names)
            base.update(kind="message", to=[peer], visibility="direct", content=f"{_sentence(rng)}")
        elif roll < 0.40:
            peer = rng.choice(names)
            base.update(kind="message", content=f"@{peer} {_sentence(rng)} {_sentence(rng)}")
        else:
            base.update(kind=rng.choice(["message", "message", "note"]), content=_sentence(rng))
        out.append(base)
    return out


T = TypeVar("T")


def call_ms(fn: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[T, float]:
    """`fn(*args, **kwargs)` and its milliseconds, the result handed back so that the caller
    frees it after the clock has stopped. An assemble result is a few thousand objects (items,
    messages, the trace); a loop that rebinds its variable, or drops the value of a bare call,
    frees the last one inside the measurement: 0.2-0.45 ms at 100k records that are not
    assemble's (run_one times the freeing apart, as `result_release_ms`)."""
    t = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, (time.perf_counter() - t) * 1000


def assemble_ms(engine: Engine, *args: Any, **kwargs: Any) -> float:
    """The milliseconds of `engine.assemble(*args, **kwargs)`, its result freed once the clock
    has stopped (`call_ms`), for callers that need only the time."""
    return call_ms(engine.assemble, *args, **kwargs)[1]


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return round(ordered[k], 3)


def _stats(values: list[float]) -> dict[str, float]:
    return {
        "p50": _pct(values, 50),
        "p99": _pct(values, 99),
        "mean": round(statistics.fmean(values), 3),
    }


def _requests(calls: int, seed: int = 11) -> list[tuple[str, str, str]]:
    rng = random.Random(seed)
    return [
        (
            rng.choice(AGENTS)[0],
            f"{rng.choice(VERBS)} the {rng.choice(TOPICS)} in {_words(rng, 2)}",
            f"d{rng.randrange(30)}",
        )
        for _ in range(calls)
    ]


def _baseline_queries(engine: Engine, agent: str, task: str, session: str) -> None:
    s = engine.store
    s.query(Query(PROJECT, agent, kinds=("message", "tool_call", "tool_result"), session=session))
    s.query(Query(PROJECT, agent, addressed_to=agent, limit=25))
    s.query(Query(PROJECT, agent, kinds=("task", "question"), statuses=("open",), limit=20))
    s.search_text(PROJECT, agent, task, 40)
    s.query(Query(PROJECT, agent, pinned=True, limit=40))
    s.query(Query(PROJECT, agent, kinds=("constraint", "state"), limit=40))
    s.query(Query(PROJECT, agent, kinds=("decision",), statuses=("active",), limit=15))


# The machine's speed, measured beside the calls (`cpu_reference_ms`).
_REFERENCE_WORDS = [f"w{i}" for i in range(400)]


def tree_cpu_seconds(pid: int, exited: bool = False) -> float:
    """CPU time (user + system) of a process and of all its descendants alive now (Linux /proc;
    0.0 elsewhere): a server's side of the cost (uvicorn's workers, PostgreSQL's backends).
    `exited`: also that of its children that have exited (the root's cutime and cstime), as a
    PostgreSQL backend that served one connection has."""
    total, todo = 0.0, [pid]
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            own = 15 if exited and p == pid else 13  # utime, stime[, cutime, cstime]
            total += sum(int(x) for x in fields[11:own]) / tick
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except (OSError, ValueError, IndexError):
            continue
    return total


def cpu_reference_ms() -> float:
    """The machine's speed at this moment: the same pure-Python work every time (a dict of word
    counts and a sort, ~1 ms; no I/O), timed alone. On this shared VM the same work takes up to
    1.8 times as long at one moment as at another, with no steal time recorded, so each run
    reports it beside the calls it measured: `assemble_per_reference` (a p50 divided by this
    p50) compares runs made in different spells."""
    t = time.perf_counter()
    counts: dict[str, int] = {}
    for i in range(6000):
        word = _REFERENCE_WORDS[(i * 7) % 400]
        counts[word] = counts.get(word, 0) + len(word)
    sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return (time.perf_counter() - t) * 1000


def per_reference(values: list[float], reference: list[float]) -> float:
    """The p50 of `values` in units of the p50 of `cpu_reference_ms` timed beside them."""
    return round(_pct(values, 50) / _pct(reference, 50), 2)


class FullCollections:
    """The full (generation 2) collections of the cyclic GC while it is on, and how long each
    took: at 100k records one comes every ~60 cold calls and takes 15-25 ms, which is the p99
    (docs/benchmarks.md). Use as a context manager."""

    def __init__(self) -> None:
        self.ms: list[float] = []
        self._start = 0.0

    def _observe(self, phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.ms.append((time.perf_counter() - self._start) * 1000)

    def __enter__(self) -> FullCollections:
        gc.callbacks.append(self._observe)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._observe)

    def report(self) -> dict[str, float]:
        return {"count": len(self.ms), "max_ms": round(max(self.ms, default=0.0), 2)}


def _baseline_last_n(engine: Engine, agent: str) -> str:
    return "\n".join(r.content for r in engine.store.query(Query(PROJECT, agent, limit=60)))


def fill(engine: Engine, records: list[dict[str, Any]]) -> float:
    """Register the team and add `records` in `add_many` batches of 1,000; returns the seconds
    the adds took (the ingest rate every benchmark here reports). A SQLite store's WAL is then
    checkpointed (not timed), so that every benchmark reads the file as it would be at rest."""
    for name, role in AGENTS:
        engine.register_agent(PROJECT, name, role)
    t0 = time.perf_counter()
    for i in range(0, len(records), 1000):
        engine.add_many(records[i : i + 1000])
    seconds = time.perf_counter() - t0
    checkpoint(engine)
    return seconds


def checkpoint(engine: Engine) -> None:
    """Fold a SQLite store's WAL into its file (its size on disk, and reads as at rest)."""
    if isinstance(engine.store, SQLiteStore):
        engine.store._conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")


def bench_store(path: str, records: int) -> str:
    """`path`, filled with `generate(records)` unless it is there already (a benchmark run again
    on the same `--dir` reuses it)."""
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)  # a new --dir
        with Engine.open(f"sqlite:///{path}", persist_traces=False, embedder=None) as engine:
            fill(engine, generate(records))
    return path


def seen_calls(engine: Engine, reqs: list[tuple[str, str, str]]) -> list[float]:
    """The milliseconds of `reqs` asked again after the cold calls, each task with a word added so
    that no source result is reused: every record they read and every line they count is now
    known to the process. What this saves on the cold calls is what a call pays for records the
    process has never seen."""
    out: list[float] = []
    for agent, task, day in reqs:
        out.append(
            assemble_ms(engine, PROJECT, agent, f"{task} again", BUDGET, session=f"{agent}-{day}")
        )
        engine.flush()
    return out


def agent_loop(
    engine: Engine,
    *,
    sessions: int = 20,
    turns: int = 10,
    seed: int = 13,
    between: Callable[[], object] | None = None,
) -> list[float]:
    """Agents at work: each of `sessions` agents keeps one task and one session for `turns`
    turns. A turn is an assemble call (timed), then the agent's reply added to the store (not
    timed: in real use it comes after the model call, and so does `between()`, if given). The
    first call of each session is left out: it is a new task, which the cold calls measure.
    Returns the milliseconds of the other calls."""
    rng = random.Random(seed)
    out: list[float] = []
    for agent, task, day in _requests(sessions, seed=seed):
        session = f"loop-{agent}-{day}"
        for turn in range(turns):
            ms = assemble_ms(engine, PROJECT, agent, task, BUDGET, session=session)
            if turn:
                out.append(ms)
            engine.flush()
            engine.add(project=PROJECT, author=agent, content=_sentence(rng), session=session)
            if between is not None:
                between()
    return out


def run_one(
    n: int, calls: int, workdir: str, loop_sessions: int = 20, settle: bool = False
) -> dict[str, Any]:
    path = os.path.join(workdir, f"bench-{n}.db")
    for f in store_files(path):  # the store, its traces, and their logs
        if os.path.exists(f):
            os.remove(f)
    # Without vectors (Engine.open turns them on by default): bench/vectors.py measures them.
    engine = Engine.open(f"sqlite:///{path}", embedder=None)
    ingest_s = fill(engine, generate(n))
    size = os.path.getsize(path)

    # The same file through an engine without the locality pass (records said near strong
    # matches), to show what that pass costs; all run on every request, interleaved.
    # Each engine (and the baselines) has a store and a token counter of its own, so that none
    # runs on caches that another warmed for the same request (records decoded, lines counted).
    no_loc = Engine(SQLiteStore(path), locality=False, counter=TokenCounter())
    # And through one without a pool: every source on the calling thread, one after another.
    serial = Engine(SQLiteStore(path), workers=1, counter=TokenCounter())
    bare = Engine(SQLiteStore(path), counter=TokenCounter())
    reqs = _requests(calls)
    for agent, task, day in reqs[:10]:  # warm the page cache and the token cache
        for eng in (engine, no_loc, serial):
            eng.assemble(PROJECT, agent, task, BUDGET, session=f"{agent}-{day}")
            eng.flush()
        _baseline_queries(bare, agent, task, f"{agent}-{day}")
    bare.flush()  # its store's word counts are read before the measured calls, as the others'
    if settle:  # as `contextwright serve` does before it answers (docs/assembly.md)
        from contextwright.heap import settle_heap

        settle_heap()
    full: list[float] = []
    without: list[float] = []
    no_pool: list[float] = []
    queries: list[float] = []
    last_n: list[float] = []
    tokens: list[int] = []
    stages: dict[str, list[float]] = {}
    items: list[int] = []
    trace_kb: list[float] = []
    written: list[float] = []
    released: list[float] = []
    reference: list[float] = []
    collections = FullCollections()
    with collections:  # during the cold calls and everything measured beside them
        for agent, task, day in reqs:
            session = f"{agent}-{day}"
            result, ms = call_ms(engine.assemble, PROJECT, agent, task, BUDGET, session=session)
            full.append(ms)
            # The trace is written by a background thread; an agent's next turn comes after its LLM
            # call, so the write happens in between. Wait for it here, timed apart, so that it does
            # not land in the next measurement.
            t = time.perf_counter()
            engine.flush()
            written.append((time.perf_counter() - t) * 1000)
            tokens.append(result.tokens)
            for stage, ms in result.trace.timings_ms.items():
                stages.setdefault(stage, []).append(ms)
            # Counted and sized as the writer encodes it, without building the items a reader
            # gets (lists, kept on the trace): reading them would add GC work no caller does.
            kept, _, dropped = result.trace.decision_counts()
            items.append(kept + dropped)
            trace_kb.append(len(json.dumps(result.trace.to_json_dict(), default=str)) / 1000)
            assert result.tokens <= result.available
            # Freeing the result (its items, messages and trace), timed apart: it is the caller's,
            # whenever it lets the result go, not the call's.
            t = time.perf_counter()
            del result
            released.append((time.perf_counter() - t) * 1000)
            without.append(assemble_ms(no_loc, PROJECT, agent, task, BUDGET, session=session))
            no_loc.flush()
            no_pool.append(assemble_ms(serial, PROJECT, agent, task, BUDGET, session=session))
            serial.flush()
            t = time.perf_counter()
            _baseline_queries(bare, agent, task, session)
            queries.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            _baseline_last_n(bare, agent)
            last_n.append((time.perf_counter() - t) * 1000)
            reference.append(cpu_reference_ms())
    seen = seen_calls(engine, reqs)
    # The agent loop writes: it runs after the cold calls, which read the file as built.
    loop = agent_loop(engine, sessions=loop_sessions)
    # The same loop with the CPU idle for 100 ms before each call, as after a model call: on a
    # shared VM the first call after an idle spell runs slower (caches, clock, scheduling).
    idle = agent_loop(engine, sessions=loop_sessions, seed=15, between=lambda: time.sleep(0.1))
    rss_now = rss_parts()  # with every engine still open
    no_loc.close()
    serial.close()
    bare.close()
    engine.close()
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "records": n,
        "calls": calls,
        "assemble_ms": _stats(full),
        "assemble_seen_ms": _stats(seen),
        "assemble_loop_ms": _stats(loop),
        "assemble_loop_after_idle_ms": _stats(idle),
        "assemble_no_locality_ms": _stats(without),
        "assemble_no_pool_ms": _stats(no_pool),
        "baseline_queries_ms": _stats(queries),
        "baseline_last_n_ms": _stats(last_n),
        "cpu_reference_ms": _stats(reference),
        "assemble_per_reference": per_reference(full, reference),
        "full_collections": collections.report(),
        # Objects left out of every full collection by `--settle-heap` (gc.freeze), or 0.
        "frozen_objects": gc.get_freeze_count(),
        "stages_ms_p50": {k: _pct(v, 50) for k, v in stages.items()},
        "trace_items_p50": int(statistics.median(items)),
        "trace_kb_p50": round(statistics.median(trace_kb), 1),
        "trace_write_ms": _stats(written),
        "result_release_ms": _stats(released),
        "window_tokens_p50": int(statistics.median(tokens)),
        "available": BUDGET.available,
        "ingest_records_per_s": round(n / ingest_s),
        "ingest_s": round(ingest_s, 2),
        "file_mb": round(size / 1e6, 1),
        "peak_rss_mb": round(rss_kb / 1024, 1),
        # What the RSS holds at the end: the process's own memory, and the file pages it has
        # mapped (the store is read through mmap: the OS's page cache, shared, counted once per
        # connection that maps it; docs/stores.md).
        "rss_anon_mb": rss_now.get("RssAnon"),
        "rss_file_mb": rss_now.get("RssFile"),
    }


def one_engine_memory(n: int, calls: int, workdir: str) -> dict[str, Any]:
    """The memory of what a user runs: one engine with the defaults (vectors aside, as in every
    call here) in a fresh process on the store `run_one` built, after the same cold calls. The
    process that built the store holds four engines and the generator's freed heap, so its RSS
    says little about a deployment."""
    path = os.path.join(workdir, f"bench-{n}.db")
    reqs = _requests(calls)
    full: list[float] = []
    reference: list[float] = []
    with Engine.open(f"sqlite:///{path}", embedder=None) as engine:
        for agent, task, day in reqs[:10]:  # the warm-up run_one gives its engines
            engine.assemble(PROJECT, agent, task, BUDGET, session=f"{agent}-{day}")
            engine.flush()
        with FullCollections() as collections:
            for agent, task, day in reqs:
                session = f"{agent}-{day}"
                full.append(assemble_ms(engine, PROJECT, agent, task, BUDGET, session=session))
                engine.flush()
                reference.append(cpu_reference_ms())
        gc.collect()
        now = rss_parts()
    return {
        # The same cold calls with this engine alone in its process: no other engine's caches
        # and objects beside it (run_one interleaves three more engines and the baselines).
        "assemble_ms": _stats(full),
        "cpu_reference_ms": _stats(reference),
        "assemble_per_reference": per_reference(full, reference),
        "full_collections": collections.report(),
        "rss_mb": round(now.get("RssAnon", 0.0) + now.get("RssFile", 0.0), 1),
        "rss_anon_mb": now.get("RssAnon"),
        "rss_file_mb": now.get("RssFile"),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def rss_parts() -> dict[str, float]:
    """RssAnon and RssFile of this process in MB, from /proc/self/status (Linux; else {})."""
    out: dict[str, float] = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(("RssAnon:", "RssFile:")):
                    out[line.split(":")[0]] = round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return out


def cpu_info(path: str = "/proc/cpuinfo") -> dict[str, str]:
    """The first CPU's model name, family, model and stepping from `path` (Linux; else
    "unknown"). A VM may name every host "AMD EPYC": the family and model tell two hosts apart
    (family 26 is Zen 5, 25 Zen 3 and 4), which a run's speed can depend on more than on its code."""
    fields = {
        "model name": "cpu",
        "cpu family": "cpu_family",
        "model": "cpu_model",
        "stepping": "cpu_stepping",
    }
    out = dict.fromkeys(fields.values(), "unknown")
    try:
        with open(path) as f:
            for line in f:
                if not line.strip():
                    break  # the first CPU's block ends
                name, _, value = line.partition(":")
                key = fields.get(name.strip())
                if key is not None:
                    out[key] = value.strip()
    except OSError:
        pass
    return out


def machine() -> dict[str, Any]:
    return {
        "nproc": os.cpu_count(),
        **cpu_info(),
        "python": platform.python_version(),
        "sqlite": __import__("sqlite3").sqlite_version,
        "platform": platform.platform(),
    }


def _print(report: dict[str, Any]) -> None:
    m = report["machine"]
    print(
        f"machine: {m['nproc']} cpu · {m['cpu']} (family {m['cpu_family']}, model "
        f"{m['cpu_model']}) · python {m['python']} · sqlite {m['sqlite']}"
    )
    head = (
        f"{'records':>8} {'p50 ms':>8} {'p99 ms':>8} {'seen p50':>9} {'loop p50':>9} "
        f"{'idle p50':>9} "
        f"{'no-loc p50':>11} "
        f"{'no-pool p50':>12} "
        f"{'queries p50':>12} "
        f"{'last-N p50':>11} {'cpu ref':>8} {'full GCs':>12} {'ingest/s':>9} {'file MB':>8} "
        f"{'RSS MB':>7} {'anon MB':>8}"
    )
    print(head)
    for r in report["results"]:
        n, longest = r["full_collections"]["count"], r["full_collections"]["max_ms"]
        gcs = f"{n}, ≤{longest:.0f} ms" if n else "0"
        print(
            f"{r['records']:>8} {r['assemble_ms']['p50']:>8.2f} {r['assemble_ms']['p99']:>8.2f} "
            f"{r['assemble_seen_ms']['p50']:>9.2f} {r['assemble_loop_ms']['p50']:>9.2f} "
            f"{r['assemble_loop_after_idle_ms']['p50']:>9.2f} "
            f"{r['assemble_no_locality_ms']['p50']:>11.2f} "
            f"{r['assemble_no_pool_ms']['p50']:>12.2f} "
            f"{r['baseline_queries_ms']['p50']:>12.2f} {r['baseline_last_n_ms']['p50']:>11.2f} "
            f"{r['cpu_reference_ms']['p50']:>8.2f} {gcs:>12} "
            f"{r['ingest_records_per_s']:>9} {r['file_mb']:>8.1f} {r['peak_rss_mb']:>7.1f} "
            f"{r['rss_anon_mb'] or 0:>8.1f}"
        )
    print("one engine alone in a fresh process, the same cold calls:")
    print(
        f"{'records':>8} {'p50 ms':>8} {'p99 ms':>8} {'per ref':>8} {'cpu ref':>8} "
        f"{'full GCs':>12} {'RSS MB':>7} {'anon MB':>8} {'file MB':>8}"
    )
    for r in report["results"]:
        one = r["one_engine"]
        n, longest = one["full_collections"]["count"], one["full_collections"]["max_ms"]
        gcs = f"{n}, ≤{longest:.0f} ms" if n else "0"
        print(
            f"{r['records']:>8} {one['assemble_ms']['p50']:>8.2f} {one['assemble_ms']['p99']:>8.2f} "
            f"{one['assemble_per_reference']:>8.2f} {one['cpu_reference_ms']['p50']:>8.2f} "
            f"{gcs:>12} {one['rss_mb']:>7.1f} {one['rss_anon_mb'] or 0:>8.1f} "
            f"{one['rss_file_mb'] or 0:>8.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated record counts")
    parser.add_argument("--calls", type=int, default=200, help="assemble calls per size")
    parser.add_argument(
        "--loop-sessions", type=int, default=20, help="agent-loop sessions of 10 turns each"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--memory", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--dir", help="where the database files go (default: a temp dir)")
    parser.add_argument(
        "--vectors", action="store_true", help="also run bench/vectors.py at each size"
    )
    parser.add_argument(
        "--settle-heap",
        action="store_true",
        help="gc.collect() then gc.freeze() after the warm-up, as the servers do",
    )
    args = parser.parse_args()
    if args.memory:
        print(json.dumps(one_engine_memory(args.memory, args.calls, args.dir)))
        return
    if args.one:
        report = run_one(args.one, args.calls, args.dir, args.loop_sessions, args.settle_heap)
        print(json.dumps(report))
        return
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    results = []
    with tempfile.TemporaryDirectory(prefix="cw-bench-") as tmp:
        workdir = args.dir or tmp
        os.makedirs(workdir, exist_ok=True)
        for n in sizes:
            cmd = [sys.executable, __file__, "--one", str(n), "--calls", str(args.calls)]
            cmd += ["--loop-sessions", str(args.loop_sessions)]
            cmd += ["--settle-heap"] if args.settle_heap else []
            out = run_child([*cmd, "--dir", workdir])
            results.append(json.loads(out.stdout.strip().splitlines()[-1]))
            cmd = [sys.executable, __file__, "--memory", str(n), "--calls", str(args.calls)]
            out = run_child([*cmd, "--dir", workdir])
            results[-1]["one_engine"] = json.loads(out.stdout.strip().splitlines()[-1])
            if not args.json:
                print(f"... {n} records done", file=sys.stderr)
    report: dict[str, Any] = {"machine": machine(), "results": results}
    if args.vectors:  # vectors on vs off, the same calls (bench/vectors.py)
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vectors.py")
        report["vectors"] = []
        for n in sizes:
            cmd = [sys.executable, script, "--records", str(n), "--calls", str(args.calls)]
            out = run_child([*cmd, "--json"])
            report["vectors"].append(json.loads(out.stdout))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print(report)
        for v in report.get("vectors", []):
            w, wo = v["assemble_with_vectors_ms"], v["assemble_without_vectors_ms"]
            print(
                f"vectors {v['records']:>8}: p50 {w['p50']:.2f} ms (p99 {w['p99']:.2f}) with, "
                f"{wo['p50']:.2f} ms (p99 {wo['p99']:.2f}) without; query embedding p50 "
                f"{v['query_embedding_ms']['p50']:.2f} ms, search p50 "
                f"{v['vector_search_ms']['p50']:.2f} ms; agent loop p50 "
                f"{v['assemble_loop_with_vectors_ms']['p50']:.2f} ms with, "
                f"{v['assemble_loop_without_vectors_ms']['p50']:.2f} ms without"
            )


if __name__ == "__main__":
    main()
