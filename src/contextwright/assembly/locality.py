"""Locality: records said near strong matches are likely to matter too.

Full text and vectors judge each record alone, but meaning is spread over a conversation: the
answer follows the question, a plan spans several turns of one session. After relevance is fused,
the sessions that hold the strongest matches lift the candidates in them, and the records said
just before and after each strong match join as candidates, lifted by a share of its relevance.
A reply by someone else to a strong match that asks something is lifted by all of its relevance:
the answer is about what the question asked, in words the question's search may not share ("what
got you into running?" / "my doctor said ..."); so is the reply to a weaker match that asks
something (`askers`), the only neighbour of such a match that is read. On LoCoMo (dev) locality
adds about 6 points of turn recall at 1,000 tokens, the answers' lift 0.9 of them, the weaker
questions' answers 0.3 more (docs/recall.md). The lift is a score component, `nearby`, so the
trace shows it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from ..ports import BatchNeighbours, Query, capable
from ..records import Record
from .candidates import Candidate
from .reads import Near, kept_read
from .scoring import ScoringConfig, fused
from .sources import KNOWLEDGE_AT, SourceContext, record_candidate

SPREAD_SECTIONS = ("knowledge", "suggestions")
# A neighbours read: (session, time) of a match, and the records said before it and at or after it.
Anchor = tuple[str | None, float]
Sides = tuple[list[Record], list[Record]]


@dataclass(frozen=True, slots=True)
class LocalityConfig:
    top: int = 10  # strongest matches: they vote for their sessions and fetch their neighbours
    sessions: int = 6  # sessions lifted
    session_weight: float = 0.3  # lift of a record in the best session, in relevance units
    neighbour_weight: float = 0.2  # share of the best neighbour's relevance
    answer_weight: float = 1.0  # share of a question's relevance that the reply to it inherits
    # Matches ranked after the strongest `top` whose replies are read when they ask something:
    # an answer is about its question wherever the question ranks.
    askers: int = 30


def spread(
    candidates: Sequence[Candidate],
    ctx: SourceContext,
    config: ScoringConfig,
    locality: LocalityConfig | None = None,
    read_before: Mapping[Anchor, Sides] | None = None,
) -> list[Candidate]:
    """Add the `nearby` component (and the strong matches' neighbours) after `fuse_relevance`.
    `read_before`: neighbours read beforehand by anchor (`likely_anchors`, chains.read_links),
    used where they hold every anchor the call needs.

    Cost: two indexed one-row reads per strong match (its neighbours by time in its session),
    whatever the size of the store.
    """
    cfg = locality or LocalityConfig()
    out = list(candidates)
    by_key = {c.key: c for c in out}
    rel = _relevance(out)
    ranked = _ranked(rel)
    votes: defaultdict[str, float] = defaultdict(float)
    adjacent: defaultdict[str, set[str]] = defaultdict(set)
    answered: dict[str, float] = {}  # reply id -> the relevance of the question it follows
    strong, matches, askers, reads = _picked(ranked, by_key, cfg.top, cfg.askers)
    # The weaker questions' neighbours in the same read as the strong matches': which they are
    # is known before either is read, and on PostgreSQL each read is a round trip.
    near = _all_neighbours(reads, ctx, read_before)
    for key, match in zip(strong, matches, strict=True):
        if not match.session:
            continue
        votes[match.session] += rel[key]
        asks = asks_something(match.content)
        for n in near[match.id]:
            adjacent[n.id].add(match.id)
            adjacent[match.id].add(n.id)
            if asks and n.created_at >= match.created_at and n.author != match.author:
                answered[n.id] = max(answered.get(n.id, 0.0), rel[key])
            if n.id not in by_key:
                fresh = _nearby(n, ctx, match)
                by_key[n.id] = fresh
                out.append(fresh)
    _answers(askers, near, by_key, rel, answered, out, ctx)
    if not votes:
        return out
    lifted = sorted(votes, key=lambda s: (-votes[s], s))[: cfg.sessions]
    best = votes[lifted[0]]
    shares: dict[str | None, float] = {s: cfg.session_weight * votes[s] / best for s in lifted}
    w_rel = config.weights.get("relevance", 1.0) / max(config.weights.get("nearby", 1.0), 1e-9)
    for c in out:
        if c.section not in SPREAD_SECTIONS or not c.records:
            continue
        r = c.records[0]
        lift = shares.get(r.session, 0.0)
        closest: float | None = None  # the best neighbour's relevance (a loop: no generator)
        for nid in adjacent.get(r.id, ()):
            value = rel.get(nid, 0.0)
            if closest is None or value > closest:
                closest = value
        nb = cfg.neighbour_weight * (0.0 if closest is None else closest)
        if r.id in answered:
            nb = max(nb, cfg.answer_weight * answered[r.id])
        if lift <= 0 and nb <= 0:
            continue
        c.components["nearby"] = round(w_rel * (lift + nb), 6)
        total = c.components.get("relevance", 0.0) + lift + nb
        c.section = "knowledge" if total >= KNOWLEDGE_AT else "suggestions"
    return out


def _relevance(candidates: Sequence[Candidate]) -> dict[str, float]:
    return {
        c.key: c.components.get("relevance", 0.0)
        for c in candidates
        if c.section in SPREAD_SECTIONS and c.records
    }


def _ranked(rel: Mapping[str, float]) -> list[str]:
    return sorted((k for k, v in rel.items() if v > 0), key=lambda k: (-rel[k], k))


def _picked(
    ranked: Sequence[str], by_key: Mapping[str, Candidate], top: int, askers: int
) -> tuple[list[str], list[Record], list[tuple[str, Record]], list[Record]]:
    """The strong matches (keys, records), the weaker ones that ask something, and the records
    whose neighbours are read: the strong in a session, then the askers, each once."""
    strong = list(ranked[:top])
    matches = [by_key[key].records[0] for key in strong]
    asking = _askers(ranked[top : top + askers], by_key)
    reads = [*(m for m in matches if m.session), *(m for _, m in asking)]
    return strong, matches, asking, list({m.id: m for m in reads}.values())


def likely_anchors(
    current: Sequence[Candidate],
    droppable: Sequence[Candidate],
    config: ScoringConfig,
    locality: LocalityConfig | None = None,
) -> tuple[Anchor, ...]:
    """The anchors of `spread`'s neighbours read, before chains.py has folded answers into their
    questions: `current` are the candidates it keeps whatever the replies, `droppable` those of
    them it may drop (answers shown beside their question). Dropping a candidate moves each later
    one up the ranking by one place at most, so the anchors of the `len(droppable)` places after
    each range hold the call's own; with none droppable they are the call's own anchors (where
    the relevance of a candidate does not depend on the others', as in the default fusion).
    The candidates are not changed: they are scored later, after the chains."""
    cfg = locality or LocalityConfig()
    ranked = _ranked(_fused(current, config))
    gone = {c.key for c in droppable}
    extra = sum(1 for k in ranked[: cfg.top + cfg.askers + len(gone)] if k in gone)
    by_key = {c.key: c for c in current}
    *_, reads = _picked(ranked, by_key, cfg.top + extra, cfg.askers)
    return _anchors(reads)


def _fused(candidates: Sequence[Candidate], config: ScoringConfig) -> dict[str, float]:
    """`_relevance` of the candidates as `fuse_relevance` would leave them, without setting it."""
    values = {c.key: v for c, v in fused(candidates, config)}
    return {key: values.get(key, v) for key, v in _relevance(candidates).items()}


def _anchors(reads: Sequence[Record]) -> tuple[Anchor, ...]:
    return tuple((m.session, m.created_at) for m in reads)


def _askers(keys: Sequence[str], by_key: Mapping[str, Candidate]) -> list[tuple[str, Record]]:
    """The matches `keys` that ask something, in a session: their replies are read."""
    return [
        (k, m) for k in keys if (m := by_key[k].records[0]).session and asks_something(m.content)
    ]


def _answers(
    askers: Sequence[tuple[str, Record]],
    near: dict[str, list[Record]],
    by_key: dict[str, Candidate],
    rel: dict[str, float],
    answered: dict[str, float],
    out: list[Candidate],
    ctx: SourceContext,
) -> None:
    """The replies to the weaker matches that ask something (`askers`, their neighbours in
    `near`) join `answered` (and the candidates). Only questions, and only the reply: the other
    neighbours of a weaker match are mostly noise, and an answer that shares no word with the
    task is found no other way."""
    for k, m in askers:
        for n in near[m.id]:
            if n.created_at < m.created_at or n.author == m.author:
                continue
            answered[n.id] = max(answered.get(n.id, 0.0), rel[k])
            if n.id not in by_key:
                fresh = _nearby(n, ctx, m)
                by_key[n.id] = fresh
                out.append(fresh)


# Question marks: Latin and most scripts, fullwidth (Chinese, Japanese), Arabic.
QUESTION_MARKS = ("?", "\uff1f", "\u061f")


def asks_something(text: str) -> bool:
    """The record asks something: it has a question mark."""
    return any(q in text for q in QUESTION_MARKS)


def _all_neighbours(
    matches: Sequence[Record], ctx: SourceContext, read_before: Mapping[Anchor, Sides] | None = None
) -> dict[str, list[Record]]:
    """`_neighbours` of every match (distinct: `_picked`); in one statement when the store can
    (SQLite, PostgreSQL), or none where `read_before` holds them all."""
    if not matches:
        return {}
    if not capable(ctx.store, BatchNeighbours):
        return {m.id: _neighbours(m, ctx) for m in matches}
    out: dict[str, list[Record]] = {}
    store = cast(BatchNeighbours, ctx.store)
    anchors = _anchors(matches)

    def read() -> list[Sides]:
        if read_before is not None and all(a in read_before for a in anchors):
            return [read_before[a] for a in anchors]
        return store.neighbours(ctx.project, ctx.agent, anchors)

    # Kept for the calls after this one at its store version (reads.py): the agent loop asks
    # for the same matches' neighbours on every turn.
    sides = kept_read(ctx.shared, ctx.version, Near(ctx.project, ctx.agent, anchors), read)
    for m, (before, after) in zip(matches, sides, strict=True):
        out[m.id] = _keep([*before, *[a for a in after if a.id != m.id][:1]])
    return out


def _keep(found: list[Record]) -> list[Record]:
    return [
        n for n in found if n.kind not in ("tool_call", "tool_result") and n.status != "superseded"
    ]


def _neighbours(r: Record, ctx: SourceContext) -> list[Record]:
    """The records said just before and just after `r` in its session, that the agent may see."""
    before = ctx.store.query(
        Query(ctx.project, ctx.agent, session=r.session, before=r.created_at, limit=1)
    )
    after = ctx.store.query(
        Query(
            ctx.project,
            ctx.agent,
            session=r.session,
            since=r.created_at,
            limit=2,
            newest_first=False,
        )
    )
    return _keep([*before, *[a for a in after if a.id != r.id][:1]])


def _nearby(r: Record, ctx: SourceContext, beside: Record) -> Candidate:
    reason = f"said next to a strong match ({beside.id}) in session {r.session}"
    return record_candidate(r, ctx, "nearby", "knowledge", reason)
