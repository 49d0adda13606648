"""Locality: records said near strong matches are likely to matter too.

Full text and vectors judge each record alone, but meaning is spread over a conversation: the
answer follows the question, a plan spans several turns of one session. After relevance is fused,
the sessions that hold the strongest matches lift every record in them, and each record is lifted
by its best direct neighbour in time. Records of those sessions that no source returned join as
`nearby` candidates. On LoCoMo (dev) this adds about 4 points of turn recall at 1,000 tokens
(docs/recall.md). The lift is a score component, `nearby`, so the trace shows it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from .candidates import Candidate
from .ports import Query
from .records import Record
from .scoring import ScoringConfig
from .sources import SourceContext, record_candidate

# Fused relevance at or above this (0..1) puts a record in `knowledge`, below it in `suggestions`.
KNOWLEDGE_AT = 0.35
SPREAD_SECTIONS = ("knowledge", "suggestions")


@dataclass(frozen=True)
class LocalityConfig:
    top: int = 10  # strongest matches that vote for their session
    sessions: int = 6  # sessions lifted
    session_weight: float = 0.6  # lift of a record in the best session, in relevance units
    neighbour_weight: float = 0.2  # share of the best neighbour's relevance
    session_limit: int = 400  # records read per lifted session


def spread(
    candidates: Sequence[Candidate],
    ctx: SourceContext,
    config: ScoringConfig,
    locality: LocalityConfig | None = None,
) -> list[Candidate]:
    """Add the `nearby` component (and nearby records) after `fuse_relevance` has run."""
    cfg = locality or LocalityConfig()
    out = list(candidates)
    rel = {
        c.key: c.components.get("relevance", 0.0)
        for c in out
        if c.record is not None and c.section in SPREAD_SECTIONS
    }
    strong = sorted((k for k, v in rel.items() if v > 0), key=lambda k: (-rel[k], k))[: cfg.top]
    if not strong:
        return out
    by_key = {c.key: c for c in out}
    votes: defaultdict[str, float] = defaultdict(float)
    for key in strong:
        session = by_key[key].records[0].session
        if session:
            votes[session] += rel[key]
    if not votes:
        return out
    lifted = sorted(votes, key=lambda s: (-votes[s], s))[: cfg.sessions]
    best = votes[lifted[0]]
    w_rel = config.weights.get("relevance", 1.0) / max(config.weights.get("nearby", 1.0), 1e-9)
    for session in lifted:
        members = ctx.store.query(
            Query(
                ctx.project,
                ctx.agent,
                session=session,
                limit=cfg.session_limit,
                newest_first=False,
            )
        )
        lift = cfg.session_weight * votes[session] / best
        for i, r in enumerate(members):
            if r.kind in ("tool_call", "tool_result") or r.status == "superseded":
                continue
            near = [members[j].id for j in (i - 1, i + 1) if 0 <= j < len(members)]
            nb = max((rel.get(n, 0.0) for n in near), default=0.0)
            c = by_key.get(r.id)
            if c is None:
                c = _nearby(r, ctx, session)
                by_key[r.id] = c
                out.append(c)
            elif c.section not in SPREAD_SECTIONS:
                continue
            value = w_rel * (lift + cfg.neighbour_weight * nb)
            c.components["nearby"] = round(value, 6)
            total = c.components.get("relevance", 0.0) + value / max(w_rel, 1e-9)
            c.section = "knowledge" if total >= KNOWLEDGE_AT else "suggestions"
    return out


def _nearby(r: Record, ctx: SourceContext, session: str) -> Candidate:
    reason = f"said in session {session} beside strong matches"
    return record_candidate(r, ctx, "nearby", "knowledge", reason)
