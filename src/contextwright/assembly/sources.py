"""Sources: retrieval pipelines that each return scored candidates for one section.

A source reads the store and nothing else, and says why it picked each candidate. Each is a small
class so that a role profile, a rule or a caller can switch one off by name. How they run (on the
calling thread, on the pool, under a deadline) is pipeline.py's business.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeGuard, TypeVar, cast

from ..errors import ValidationError
from ..ports import Hit, Query, RanksHere, ReadsMany, Store, Tokenizer, WarmHere, capable
from ..records import Record
from ..roles import RoleProfile
from .candidates import Candidate, one
from .lines import Lines, dated_line
from .reads import ReadCache, kept_read, kept_replies

T = TypeVar("T")

HISTORY_KINDS = ("message", "tool_call", "tool_result", "summary", "note")
SECTION_BY_KIND = {
    "state": "state",
    "constraint": "constraints",
    "pattern": "constraints",
    "preference": "constraints",
    "gotcha": "warnings",
}


# A window of B tokens holds about B / TOKENS_PER_LINE short records (a chat line and its prefix);
# a hit list that grows with the budget can fill it, up to MAX_DEPTH hits. Every hit read costs a
# call about 16 us (read, scored, packed or dropped) whether it is kept or not, so the list stops
# growing at twice the fixed 40 (the windows of 2,000 tokens that the growth is for), and its deep
# end is left out where the other candidates crowd the window (selection.deep_room).
TOKENS_PER_LINE = 25
MAX_DEPTH = 80


def budget_depth(budget: int | None, default: int) -> int:
    """How many hits a relevance list reads for a window of `budget` tokens: `default`, or as
    many as the window could hold lines when that is more (at most MAX_DEPTH). A fixed list of 40
    cannot fill a larger window, however good its ranking: on LoCoMo (dev), the vector list at 80
    hits instead of 40 took turn recall at 2,000 tokens from 0.902 to 0.911 and at 4,000 from
    0.922 to 0.946 (docs/recall.md)."""
    if budget is None:
        return default
    return max(default, min(MAX_DEPTH, budget // TOKENS_PER_LINE))


@dataclass
class SourceContext:
    store: Store
    counter: Tokenizer
    project: str
    agent: str
    role: RoleProfile
    task: str
    session: str | None
    now: float
    milestone: str | None = None
    terms: Sequence[str] = ()
    # The task without the names of the project's people (scoring.topic): what the relevance
    # sources (full text, vectors) search for. Empty means the whole task.
    topic: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    limits: dict[str, int] = field(default_factory=dict)
    # Reads shared by the sources of one call (addressed and kv read the same records).
    reads: dict[Query, list[Record]] = field(default_factory=dict, repr=False)
    # The project's store version when the call began (read once per call); None: ask the store.
    version: int | None = None
    # Work that sources started before any source ran (`Source.prepare`), by source name.
    prepared: dict[str, Future[Any]] = field(default_factory=dict, repr=False)
    deadline: float | None = None  # perf_counter time by which every source must be done
    # The tokens the window may hold (the budget's `available`); None where no budget applies.
    budget: int | None = None
    # Reads kept from earlier calls at `version` (reads.py); None: every read goes to the store.
    shared: ReadCache | None = field(default=None, repr=False)
    lines: Lines | None = field(default=None, repr=False)  # kept across calls (lines.py)
    ahead: Callable[[str, str, str, int], list[Hit]] | None = None  # full text's (ahead.py)

    @property
    def query_text(self) -> str:
        return self.topic or self.task

    def limit(self, source: str, default: int) -> int:
        return int(self.limits.get(source, default))

    def depth(self, source: str, default: int) -> int:
        """`limit`, but a list the call does not size grows with the budget (`budget_depth`)."""
        if self.grows(source):
            return budget_depth(self.budget, default)
        return int(self.limits[source])

    def grows(self, source: str) -> bool:
        """Does `depth` size `source`'s list by the budget (the call and pipeline did not)?"""
        return self.limits.get(source) is None

    def prepared_result(self, source: str, work: Callable[[], T]) -> T:
        """What `source`'s `prepare` started on the pool, waited for until the call's deadline;
        `work()` on the calling thread when nothing was started (no pool)."""
        fut = self.prepared.get(source)
        if fut is None:
            return work()
        left = None if self.deadline is None else max(self.deadline - time.perf_counter(), 0.0)
        return cast(T, fut.result(timeout=left))

    def query(self, q: Query) -> list[Record]:
        """`store.query(q)`, read once per call (records are immutable, so sharing is safe), and
        once per store version where earlier calls read it (`shared`, reads.py)."""
        found = self.reads.get(q)
        if found is None:
            read = self.store.query
            found = self.reads[q] = kept_read(self.shared, self.version, q, lambda: read(q))
        return found

    def records_read(self) -> dict[str, Record]:
        """The records this call's sources read so far (`query`), by id: a search whose hits
        are among them need not read those again (they are this call's, status included)."""
        project = self.project
        return {r.id: r for found in self.reads.values() for r in found if r.project == project}

    def prefetch(self, queries: Sequence[Query]) -> None:
        """Read `queries` not read yet into `reads` with one `query_many`, where the store answers
        many in one round trip (`ReadsMany`); elsewhere `query` reads each when asked (and looks
        for what earlier calls read at this version)."""
        store = self.store
        if not capable(store, ReadsMany):
            return
        shared, version = self.shared, self.version
        wanted = list(dict.fromkeys(q for q in queries if q not in self.reads))
        if shared is not None and version is not None:
            for q in wanted:  # what earlier calls read at this version
                hit = shared.get(q, version)
                if hit is not None:
                    self.reads[q] = hit
            wanted = [q for q in wanted if q not in self.reads]
        if not wanted:
            return
        found = cast(ReadsMany, store).query_many(wanted)
        self.reads.update(zip(wanted, found, strict=True))
        if shared is not None and version is not None:
            for q, rows in zip(wanted, found, strict=True):
                shared.put(q, version, rows)


class Source(Protocol):
    """A source may also have `inline = True` (a short bounded read: run on the calling thread),
    `queries(ctx)` (the `Query`s its `run` reads with `ctx.query`: an inline source's are read
    for it beforehand, all sources' in one round trip where the store can: `ctx.prefetch`),
    `cacheable = True` (its results go through the TTL cache), `applies(ctx)` (false: nothing to
    add to this call) and `prepare(ctx) -> Callable[[], Any]`: work that holds no GIL (embedding
    the query) which the pipeline starts on the pool before any source runs, and which `run` then
    reads with `ctx.prepared_result`; `prepare_weight` (about how many milliseconds that work
    takes, 1.0 if not given) decides whose work gets the spare cores when there are too few."""

    name: str

    def run(self, ctx: SourceContext) -> list[Candidate]: ...


def record_candidate(
    r: Record, ctx: SourceContext, source: str, section: str, reason: str, **components: float
) -> Candidate:
    if section == "history":
        text, tokens = r.content, r.tokens
    else:
        text, tokens = dated_line(r, ctx.counter, ctx.lines)
    # `components` is this call's own dict already (keyword arguments).
    return Candidate(
        key=r.id,
        section=section,
        source=source,
        text=text,
        records=(r,),
        components=components,
        reasons=one(reason),
        pinned=r.pinned,
        tokens=tokens,
        created_at=r.created_at,
        content_hash=r.content_hash,
        sources=one(source),
        dated_line=section != "history",
    )


def section_for(r: Record, default: str) -> str:
    return SECTION_BY_KIND.get(r.kind, default)


# Relevance (0..1) at or above this puts a record in `knowledge`, below it in `suggestions`: a
# search hit's own (scaled over its search's hits), and the fused one (locality.py).
KNOWLEDGE_AT = 0.35


def hit_candidates(
    hits: Sequence[Hit],
    rels: Sequence[float],
    ctx: SourceContext,
    source: str,
    signal: str,
    reason: str,
    skip: tuple[str, ...],
    fixed: int | None = None,
) -> list[Candidate]:
    """The candidates of a search's hits, in order, but those of a kind in `skip`. `rels` is
    each hit's relevance scaled over the hits (0..1), kept as the component `signal`, which
    scoring.fuse_relevance fuses; `reason` says why with the raw score in its `{:.2f}`. With
    `fixed`, the hits past the first `fixed` of a list that grew with the budget (the call and
    its pipeline did not size it: `budget_depth`) are marked `deep`."""
    out = []
    deep_from = fixed if fixed is not None and ctx.grows(source) else len(hits)
    for i, (h, rel) in enumerate(zip(hits, rels, strict=True)):
        r = h.record
        if r.kind in skip:
            continue
        section = section_for(r, "knowledge" if rel >= KNOWLEDGE_AT else "suggestions")
        why = reason.format(h.score)
        c = record_candidate(r, ctx, source, section, why, **{signal: round(rel, 6)})
        c.deep = i >= deep_from
        out.append(c)
    return out


class HistorySource:
    """The agent's session: its recent turns, with each tool call joined to its result."""

    name = "history"
    inline = True  # a short indexed read: runs on the calling thread (pipeline.py)

    def queries(self, ctx: SourceContext) -> list[Query]:
        limit = ctx.limit(self.name, 60)
        if ctx.session:
            q = Query(ctx.project, ctx.agent, kinds=HISTORY_KINDS, session=ctx.session, limit=limit)
        else:
            q = Query(ctx.project, ctx.agent, kinds=HISTORY_KINDS, author=ctx.agent, limit=limit)
        return [q]

    def run(self, ctx: SourceContext) -> list[Candidate]:
        (q,) = self.queries(ctx)
        return pair_tool_calls(session_view(ctx.query(q), ctx.agent), ctx, self.name)


SESSION_SUMMARY_TAG = "session-summary"  # written by compaction and reset (sessions/)


def session_view(records: Sequence[Record], agent: str) -> list[Record]:
    """An agent's view of a session's records: its own session summaries stand in for what they
    replace (`meta.replaces`) until the compaction is undone (the summary is then `cancelled`),
    and another agent's session summaries stay out. One agent's compaction thus changes only
    that agent's view; no record changes status for it (docs/compaction.md)."""
    summaries = [r for r in records if r.kind == "summary" and SESSION_SUMMARY_TAG in r.tags]
    undone = {r.id for r in summaries if r.status == "cancelled"}  # stands in for nothing
    hidden = {
        i for r in summaries if r.author == agent and r.id not in undone for i in _replaces(r)
    }
    hidden.update(r.id for r in summaries if r.author != agent or r.id in undone)
    return [r for r in records if r.status != "compacted" and r.id not in hidden]


def _replaces(summary: Record) -> list[str]:
    ids = summary.meta.get("replaces")
    return [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else []


def pair_tool_calls(records: list[Record], ctx: SourceContext, source: str) -> list[Candidate]:
    """Tool call + result become one candidate (never split); a result whose call is outside the
    window fetches its call; a call without a result stays a call alone."""
    calls = {r.id: r for r in records if r.kind == "tool_call"}
    results = {r.reply_to: r for r in records if r.kind == "tool_result" and r.reply_to}
    missing = [cid for cid in results if cid not in calls]
    if missing:
        # get_many reads by id without a visibility filter: apply it here.
        calls.update(
            {
                r.id: r
                for r in ctx.store.get_many(ctx.project, missing)
                if r.kind == "tool_call" and r.project == ctx.project and r.visible_to(ctx.agent)
            }
        )
    unanswered = [cid for cid in calls if cid not in results]
    if unanswered:
        # A result outside the window still travels with its call (read once a store version).
        for r in kept_replies(
            ctx.store, ctx.shared, ctx.version, ctx.project, ctx.agent, unanswered
        ):
            if r.kind == "tool_result" and r.project == ctx.project and r.reply_to:
                results.setdefault(r.reply_to, r)
    n = len(records)
    out: list[Candidate] = []
    for rank, r in enumerate(records):  # newest first
        recency_rank = 1.0 - rank / max(n, 1)
        if r.kind == "tool_result" and r.reply_to in calls:
            continue  # joined to its call below
        if r.kind == "tool_call":
            result = results.get(r.id)
            c = record_candidate(
                r, ctx, source, "history", "recent turn in this session", history=recency_rank
            )
            if result is not None:
                c.records = (r, result)
                c.text, c.tokens = result.content, result.tokens
                c.created_at = max(r.created_at, result.created_at)
                c.pinned = r.pinned or result.pinned
                c.content_hash = result.content_hash
            else:
                c.text, c.tokens = f"{r.content}", r.tokens
            out.append(c)
            continue
        reason = "recent turn in this session"
        out.append(record_candidate(r, ctx, source, "history", reason, history=recency_rank))
    for c in out:
        c.components["prior"] = 2.0
    return out


class AddressedSource:
    """Records that @mention this agent or were sent to it directly, from any peer."""

    name = "addressed"
    inline = True  # a short indexed read: runs on the calling thread (pipeline.py)

    def queries(self, ctx: SourceContext) -> list[Query]:
        return [
            Query(ctx.project, ctx.agent, addressed_to=ctx.agent, limit=ctx.limit(self.name, 25))
        ]

    def run(self, ctx: SourceContext) -> list[Candidate]:
        out = []
        for r in ctx.query(self.queries(ctx)[0]):
            if r.author == ctx.agent or r.kind in ("tool_call", "tool_result"):
                continue
            how = "direct message to you" if ctx.agent in r.to else f"@mentions {ctx.agent}"
            out.append(
                record_candidate(r, ctx, self.name, section_for(r, "knowledge"), how, prior=1.0)
            )
        return out


class OpenItemsSource:
    """Unresolved tasks and outstanding questions in the project."""

    name = "open_items"
    inline = True  # a short indexed read: runs on the calling thread (pipeline.py)

    def queries(self, ctx: SourceContext) -> list[Query]:
        q = Query(
            ctx.project,
            ctx.agent,
            kinds=("task", "question"),
            statuses=("open",),
            limit=ctx.limit(self.name, 20),
        )
        return [q]

    def run(self, ctx: SourceContext) -> list[Candidate]:
        out = []
        for r in ctx.query(self.queries(ctx)[0]):
            mine = ctx.agent in r.to or ctx.agent in r.mentions
            section = "state" if r.kind == "task" and mine else "knowledge"
            reason = f"open {r.kind}" + (" assigned to you" if mine else " in the project")
            out.append(record_candidate(r, ctx, self.name, section, reason, prior=0.5))
        return out


def ranks_here(store: object) -> TypeGuard[RanksHere]:
    """The store ranks full text in this process, in SQL that holds no GIL while it works, and
    reads the hits apart (`ranking_plan`, `ranking_rows`, `ranking_result`, `ranked_hits`:
    SQLite)."""
    return capable(store, RanksHere)


class FullTextSource:
    """BM25 full-text relevance to the task text; weak matches become suggestions. Leaves the
    `bm25` signal (score / best score) that scoring.fuse_relevance turns into `relevance`."""

    name, LIMIT = "fulltext", 40  # LIMIT: its hits where the request sets no limit (ahead.py too)
    cacheable = True  # the most expensive read: its results go through the TTL cache
    # A bounded read (sqlite_text.py) run from the calling thread: two threads reading SQLite
    # rows in one process slow each other down, the sqlite3 module handing the GIL over on every
    # row (docs/assembly.md). Where the store ranks here (`ranks_here`), the ranking (one row)
    # starts on the pool as `prepare` work; elsewhere the source runs on the pool (pipeline.py).
    inline = "local"
    prepare_weight = 1.0  # about a millisecond of SQL: a query embedding takes the pool first

    def prepare(self, ctx: SourceContext) -> Callable[[], Callable[[], Any]] | None:
        if not ctx.task.strip() or not ranks_here(ctx.store):
            return None
        if capable(ctx.store, WarmHere) and cast(WarmHere, ctx.store).warm_here():
            # This thread just wrote: its page cache is the only warm one, so `run` ranks here.
            # In the agent loop (a reply written before every call) that was 16% of a call.
            return None
        return self._ranking(ctx)

    def _ranking(self, ctx: SourceContext) -> Callable[[], Callable[[], Any]]:
        """The ranking's statement as work for the pool, planned here and read back here
        (sqlite_text.py's three steps): a pool thread that ran Python beside this one would take
        the GIL from it at each of its statements."""
        store = ctx.store
        assert ranks_here(store)  # prepare and run ask it first
        limit = ctx.limit(self.name, self.LIMIT)
        plan = store.ranking_plan(ctx.project, ctx.agent, ctx.query_text, limit)

        def work() -> Callable[[], Any]:
            found = store.ranking_rows(plan)
            return lambda: store.ranking_result(plan, found)

        return work

    def run(self, ctx: SourceContext) -> list[Candidate]:
        if not ctx.task.strip():
            return []
        store = ctx.store
        if ranks_here(store):
            # What `prepare` started, or (no pool, or no core to spare) all of it here.
            ranked = ctx.prepared_result(self.name, lambda: self._ranking(ctx)())()
            hits: list[Hit] = store.ranked_hits(ranked)
        else:
            search = ctx.ahead or store.search_text
            hits = search(ctx.project, ctx.agent, ctx.query_text, ctx.limit(self.name, self.LIMIT))
        if not hits:
            return []
        top = hits[0].score or 1.0
        rels = [max(h.score, 0.0) / top for h in hits]
        # A tool result alone would split it from its call; history pairs them.
        skip = ("tool_call", "tool_result")
        why = "matches the task (bm25 {:.2f})"
        return hit_candidates(hits, rels, ctx, self.name, "bm25", why, skip)


class PinnedSource:
    """Pinned records and standing constraints and state: always considered, packed first."""

    name = "pinned"
    inline = True  # a short indexed read: runs on the calling thread (pipeline.py)

    def queries(self, ctx: SourceContext) -> list[Query]:
        limit = ctx.limit(self.name, 40)
        return [
            Query(ctx.project, ctx.agent, pinned=True, limit=limit),
            Query(ctx.project, ctx.agent, kinds=("constraint", "state"), limit=limit),
        ]

    def run(self, ctx: SourceContext) -> list[Candidate]:
        seen: dict[str, Record] = {}
        for q in self.queries(ctx):  # pinned first: a record in both keeps its first place
            for r in ctx.query(q):
                seen.setdefault(r.id, r)
        out = []
        for r in seen.values():
            if r.status in ("superseded", "resolved", "cancelled"):
                continue
            if r.kind in ("tool_call", "tool_result"):
                continue  # pinned tool pairs come whole through history, never one half alone
            section = section_for(r, "constraints")
            reason = "pinned" if r.pinned else f"standing {r.kind}"
            out.append(record_candidate(r, ctx, self.name, section, reason, prior=2.0))
        return out


class DecisionsSource:
    """The project's decisions in force (superseded ones are left out by the status filter)."""

    name = "decisions"
    inline = True  # a short indexed read: runs on the calling thread (pipeline.py)

    def queries(self, ctx: SourceContext) -> list[Query]:
        q = Query(
            ctx.project,
            ctx.agent,
            kinds=("decision",),
            statuses=("active",),
            limit=ctx.limit(self.name, 15),
        )
        return [q]

    def run(self, ctx: SourceContext) -> list[Candidate]:
        return [
            record_candidate(r, ctx, self.name, "knowledge", "decision in force", prior=0.5)
            for r in ctx.query(self.queries(ctx)[0])
        ]


def pick_sources(sources: Sequence[Source], names: Sequence[str] | None) -> list[Source]:
    """The sources a request names, in its order; all of `sources` when it names none."""
    if names is None:
        return list(sources)
    if isinstance(names, str) or not isinstance(names, Sequence):
        raise ValidationError("sources", names, "give a list of source names")
    by_name = {s.name: s for s in sources}
    for n in names:
        if n not in by_name:
            raise ValidationError("sources", n, f"use source names: {', '.join(by_name)}")
    return [by_name[n] for n in names]
