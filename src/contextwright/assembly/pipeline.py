"""The steps of one assemble call between the sources and the packer: run the sources concurrently
under a deadline, merge and dedupe their candidates, score them, (the trace is built in traces/build.py).
Everything but `run_sources` is pure."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from ..ports import ReadsMany, capable, reads_remotely
from ..traces.trace import SourceRun
from .cache import SourceCache
from .candidates import SECTION_RANK, Candidate, one
from .packing import Decision
from .sources import FullTextSource, Source, SourceContext


def _cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


# Threads for prepared work at once: the cores beside the calling thread's own, at least one.
CORES = _cores()
SPARE_CORES = max(CORES - 1, 1)


def machine_busy() -> bool:
    """Does the machine's load average say every core is taken (other processes)? Then no core
    is spare for prepared work: queued for a core, it waits behind those processes while the
    calling thread, which holds one, would have done it sooner. On the 2-core VM at load 5-9,
    preparing nothing took a cold call's p50 from 1.0 to 0.92 (in-run A/B; bench/assemble.py's
    `no-pool` column shows the same). The 1-minute average lags a spell by up to a minute: the
    pool then stays idle for a while on a machine gone quiet, as with `workers=1`."""
    load = getattr(os, "getloadavg", None)  # Unix only
    try:
        return load is not None and load()[0] >= CORES
    except OSError:  # no load average to be had: assume a core is spare
        return False


# The steps of one source's run, as functions of their own: closures over run_sources' locals
# would make a reference cycle (each call's context, futures and candidates left to the cyclic GC).
Timed = tuple[list[Candidate], float, str]  # candidates, milliseconds, cache status


def _timed(src: Source, ctx: SourceContext, cache: SourceCache | None) -> Timed:
    t0 = time.perf_counter()
    if cache is None:
        found, status = src.run(ctx), "off"
    else:
        found, status = cache.run(src, ctx)
    return found, (time.perf_counter() - t0) * 1000, status


def _done(src: Source, timed: Timed) -> tuple[SourceRun, list[Candidate]]:
    found, ms, status = timed
    return SourceRun(src.name, ms, len(found), cache=status), found


def _failed(
    src: Source, exc: BaseException, deadline_s: float
) -> tuple[SourceRun, list[Candidate]]:
    if isinstance(exc, FutureTimeout):
        error = f"deadline of {deadline_s * 1000:.0f} ms passed"
        return SourceRun(src.name, deadline_s * 1000, 0, error=error), []
    return SourceRun(src.name, 0.0, 0, error=f"{type(exc).__name__}: {exc}"), []


def run_sources(
    sources: Sequence[Source],
    ctx: SourceContext,
    pool: Executor | None,
    deadline_s: float,
    cache: SourceCache | None = None,
) -> tuple[list[Candidate], list[SourceRun]]:
    """Every source runs; a slow or failing one becomes a warning, never a failed call. Sources
    that opt in go through `cache`; each run records "hit", "miss" or "off".

    Where the sources run: SQLite reads on two threads of one process slow each other down (the
    sqlite3 module hands the GIL over on every row: a 300-row read measured 0.16 ms alone and
    1.2 ms beside another), so the bounded store reads (`inline = True`, or "local" on a store in
    this process) run on the calling thread, one after another. The pool runs what holds no GIL:
    the work a source starts with `prepare` (embedding the query, or ranking full text in SQL
    that answers in one row: a core of its own while the reads run; not started when the cache
    will answer; the heaviest by `prepare_weight` first, on at most SPARE_CORES threads at once,
    and none while the machine is busy: `machine_busy`),
    and sources that do not say they are bounded (plugins), so that the deadline can cut them
    off. Sources with prepared work run last on the calling thread, to give that work the most
    time."""
    start = time.perf_counter()
    ctx.deadline = start + deadline_s
    inline = [pool is None or is_inline(src, ctx) for src in sources]
    futures: list[tuple[int, Source, Future[Timed]]] = []
    if pool is not None:
        # One core stays with the calling thread; the heaviest work takes the others, and the
        # rest is done by its own source on the calling thread (`prepared_result`'s fallback):
        # queued behind other work it would finish later than that. So a source is asked to
        # prepare only while a core is left (preparing may cost the calling thread something:
        # the full-text source plans its statement there).
        ready: list[tuple[float, str, Callable[[SourceContext], Any]]] = []
        for i, src in enumerate(sources):
            prepare = getattr(src, "prepare", None)
            if prepare is None or not inline[i] or (cache is not None and cache.holds(src, ctx)):
                continue  # nothing to start, or the cache will answer
            ready.append((-float(getattr(src, "prepare_weight", 1.0)), src.name, prepare))
        spare = 0 if ready and machine_busy() else SPARE_CORES
        for _, name, prepare in sorted(ready, key=lambda r: r[0]):  # ties: the sources' order
            if len(ctx.prepared) >= spare:
                break
            try:
                work = prepare(ctx)
            except Exception:  # `run` does the same work and fails as a source, not as the call
                work = None
            if work is not None:
                ctx.prepared[name] = pool.submit(work)
        futures = [
            (i, src, pool.submit(_timed, src, ctx, cache))
            for i, src in enumerate(sources)
            if not inline[i]
        ]
    _prefetch(sources, inline, ctx, cache)
    slots: list[tuple[SourceRun, list[Candidate]] | None] = [None] * len(sources)
    # Last: the sources that wait for work started before (prepared, or full text's search
    # ahead), so that the work has the most time.
    order = sorted(range(len(sources)), key=lambda i: _waits(sources[i], ctx))
    for i in order:
        if inline[i]:
            src = sources[i]
            try:
                slots[i] = _done(src, _timed(src, ctx, cache))
            except Exception as exc:  # a broken source must not fail the call
                slots[i] = _failed(src, exc, deadline_s)
    for i, src, fut in futures:
        left = max(deadline_s - (time.perf_counter() - start), 0.0)
        try:
            slots[i] = _done(src, fut.result(timeout=left))
        except Exception as exc:
            if isinstance(exc, FutureTimeout):
                fut.cancel()
            slots[i] = _failed(src, exc, deadline_s)
    runs: list[SourceRun] = []
    found: list[Candidate] = []
    for slot in slots:  # in the sources' own order, pooled or not
        if slot is not None:
            runs.append(slot[0])
            found.extend(slot[1])
    return found, runs


def _waits(src: Source, ctx: SourceContext) -> bool:
    return src.name in ctx.prepared or _takes_ahead(src, ctx)


def _takes_ahead(src: Source, ctx: SourceContext) -> bool:
    """Is `src` the call's full-text source, whose search was started ahead (ahead.py)?"""
    return ctx.ahead is not None and isinstance(src, FullTextSource)


def _prefetch(
    sources: Sequence[Source], inline: Sequence[bool], ctx: SourceContext, cache: SourceCache | None
) -> None:
    """The reads of the sources about to run on the calling thread, in one round trip where the
    store can (`SourceContext.prefetch`): on PostgreSQL each read alone waited on the server and
    then on the GIL, one after another. Not for sources the cache will answer."""
    if not capable(ctx.store, ReadsMany):
        return  # each source reads its own when it runs, as it always has
    queries = []
    for i, src in enumerate(sources):
        wants = getattr(src, "queries", None)
        if wants is None or not inline[i] or (cache is not None and cache.holds(src, ctx)):
            continue
        try:
            queries.extend(wants(ctx))
        except Exception:  # `run` asks again and fails as a source, not as the call
            continue
    # On failure each source reads its own, and a failure is that source's warning.
    with contextlib.suppress(Exception):
        ctx.prefetch(queries)


def is_inline(src: Source, ctx: SourceContext | None = None) -> bool:
    """Runs on the calling thread: a short bounded read (`inline = True`), a bounded read of a
    store in this process (`inline = "local"`: on the pool for a store whose reads wait on another
    process, `remote = True`, as PostgreSQL's do, because those overlap), or a source that says it
    has nothing to add to this call (`applies(ctx)` false, e.g. `computed` without a task). The
    full-text source whose search was started before the call's first read (ahead.py) waits for
    it here, holding no pool thread while the search holds one."""
    inline = getattr(src, "inline", False)
    if inline == "local":
        if ctx is None or not reads_remotely(ctx.store):
            return True
        if _takes_ahead(src, ctx):
            return True
    elif inline:
        return True
    applies = getattr(src, "applies", None)
    return ctx is not None and applies is not None and not applies(ctx)


def _absorb(into: Candidate, other: Candidate) -> None:
    for name, value in other.components.items():
        if value > into.components.get(name, float("-inf")):
            into.components[name] = value
    for reason in other.reasons:
        if reason not in into.reasons:
            into.reasons = (*into.reasons, reason)
    for src in other.sources or (other.source,):
        if src not in into.sources:
            into.sources = (*into.sources, src)
    into.pinned = into.pinned or other.pinned


def _prefer(a: Candidate, b: Candidate) -> bool:
    """Does `b` decide the merged candidate's section and text? History keeps a conversation
    whole; otherwise the higher-priority section wins."""
    if a.section == "history" or b.section == "history":
        return b.section == "history" and a.section != "history"
    return SECTION_RANK[b.section] < SECTION_RANK[a.section]


def merge(candidates: Sequence[Candidate]) -> tuple[list[Candidate], list[Decision]]:
    """One candidate per record (and per content hash): components take the best value, reasons
    and sources are unioned. Returns the merged list and the duplicates it dropped."""
    by_key: dict[str, Candidate] = {}
    # record id -> key of the candidate holding it (a tool pair holds two)
    alias: dict[str, str] = {}
    for c in sorted(candidates, key=lambda c: -len(c.records)):
        key = alias.get(c.key, c.key)
        seen = by_key.get(key)
        if seen is None:
            by_key[key] = c
            for rec in c.records:
                alias[rec.id] = key
            if not c.sources:
                c.sources = one(c.source)
            continue
        if _prefer(seen, c) and len(c.records) >= len(seen.records):
            _absorb(c, seen)
            by_key[key] = c
        else:
            _absorb(seen, c)
    merged: list[Candidate] = []
    dropped: list[Decision] = []
    by_hash: dict[str, Candidate] = {}
    for c in sorted(by_key.values(), key=lambda c: (SECTION_RANK[c.section], c.key)):
        if c.content_hash and c.section != "history":
            first = by_hash.get(c.content_hash)
            if first is not None:
                _absorb(first, c)
                dropped.append(Decision(c, False, f"duplicate content of {first.key}", c.tokens))
                continue
            by_hash[c.content_hash] = c
        merged.append(c)
    return merged, dropped
