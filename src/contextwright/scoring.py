"""Scores that explain themselves: every candidate's score is a weighted sum of named components,
and the trace shows each one. Pure functions; the weights are configuration.

The components, each 0..1 unless noted:

- `relevance`: the fusion of the relevance signals (`bm25` from full text, `vector` from a vector
  source) by `fuse_relevance`; the raw signals stay in the trace with weight 0.
- `recency`: exponential decay with a configurable half-life.
- `role`: the role profile's weight for the record's kind; `role_source` multiplies the whole
  score by the profile's weight for the source (0 switches a source off for a role).
- `scope`: 1 for the requested milestone or session, 0.5 for project-wide records, 0 for another
  milestone.
- `addressed`: an @mention of the agent or a direct message to it.
- `open`: an unresolved task or an outstanding question; `resolved` (negative weight): a question
  that is resolved or already answered.
- `prior`: the source's prior (history and pins are near certain); `boost`: context rules.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from .candidates import Candidate
from .errors import ValidationError
from .records import Record
from .roles import RoleProfile

DAY = 86_400.0
FUSIONS = ("sum", "rrf", "max")
# Components that multiply the score instead of adding to it.
MULTIPLIERS = ("role_source",)


@dataclass(frozen=True)
class ScoringConfig:
    half_life_days: float = 3.0
    weights: Mapping[str, float] = field(
        default_factory=lambda: {
            "relevance": 3.0,  # fused full text / vectors, 0..1
            "bm25": 0.0,  # shown in the trace; counted through `relevance`
            "vector": 0.0,  # shown in the trace; counted through `relevance`
            "recency": 1.0,  # exp decay by half-life, 0..1
            "addressed": 2.0,  # @mention or direct message to this agent
            "open": 1.0,  # unresolved task or outstanding question
            "role": 2.0,  # role profile's weight for the kind
            "prior": 1.0,  # the source's prior (history and pins are certain)
            "scope": 0.5,  # same milestone / session
            "resolved": -1.0,  # a question already answered drops in weight
            "boost": 1.0,  # context rules
        }
    )
    # How the relevance signals become one `relevance` component (see fuse_relevance).
    fusion: str = "sum"
    signal_weights: Mapping[str, float] = field(
        default_factory=lambda: {"bm25": 1.0, "vector": 1.0}
    )
    rrf_k: int = 60

    def __post_init__(self) -> None:
        if not (
            isinstance(self.half_life_days, int | float)
            and not isinstance(self.half_life_days, bool)
            and self.half_life_days > 0
        ):
            raise ValidationError(
                "half_life_days", self.half_life_days, "give a positive number of days, e.g. 3"
            )
        if self.fusion not in FUSIONS:
            raise ValidationError("fusion", self.fusion, f"use one of {', '.join(FUSIONS)}")

    def with_weights(self, **weights: float) -> ScoringConfig:
        return replace(self, weights={**self.weights, **weights})


def recency(created_at: float, now: float, half_life_days: float) -> float:
    age = max(now - created_at, 0.0)
    return math.exp(-math.log(2) * age / (half_life_days * DAY))


def score(c: Candidate, config: ScoringConfig) -> float:
    w = config.weights
    total = sum(
        w.get(name, 1.0) * value for name, value in c.components.items() if name not in MULTIPLIERS
    )
    for name in MULTIPLIERS:
        total *= c.components.get(name, 1.0)
    return total


def fuse_relevance(candidates: Sequence[Candidate], config: ScoringConfig) -> None:
    """Set each candidate's `relevance` from the relevance signals the sources left on it.

    A signal is a component named in `config.signal_weights` (`bm25`, `vector`, ...), 0..1, higher
    is better. Only the signals that some candidate carries take part, so a window built without
    an embedder is scored on full text alone. A candidate a signal's source did not return counts
    as 0 (sum) or as unranked (rrf) for it.

    - `sum`: the weighted mean of the normalized signals.
    - `rrf`: reciprocal rank fusion, sum of w / (k + rank), scaled so rank 1 everywhere gives 1.
    - `max`: the best signal.

    A candidate from a source that sets `relevance` itself and carries no signal keeps its value.
    """
    weights = config.signal_weights
    present = [s for s in weights if any(s in c.components for c in candidates)]
    if not present:
        return
    ranks: dict[str, dict[int, int]] = {}
    if config.fusion == "rrf":
        for s in present:
            ordered = sorted(
                (i for i, c in enumerate(candidates) if c.components.get(s, 0.0) > 0),
                key=lambda i: (-candidates[i].components[s], candidates[i].key),
            )
            ranks[s] = {i: rank for rank, i in enumerate(ordered)}
    total_w = sum(weights[s] for s in present) or 1.0
    for i, c in enumerate(candidates):
        if not any(s in c.components for s in present):
            continue
        if config.fusion == "sum":
            value = sum(weights[s] * c.components.get(s, 0.0) for s in present) / total_w
        elif config.fusion == "max":
            value = max(c.components.get(s, 0.0) for s in present)
        else:
            k = config.rrf_k
            value = sum(weights[s] / (k + ranks[s][i] + 1) for s in present if i in ranks[s]) / (
                total_w / (k + 1)
            )
        c.components["relevance"] = round(value, 6)


def scope_component(r: Record, milestone: str | None, session: str | None) -> float | None:
    """1 for the requested milestone or session, 0.5 for a project-wide record, 0 for another
    milestone; None when the request names neither (the component is then left out)."""
    if session and r.session == session:
        return 1.0
    if milestone:
        if r.milestone == milestone:
            return 1.0
        return 0.5 if r.milestone is None else 0.0
    return None


def finish(
    c: Candidate,
    *,
    now: float,
    agent: str,
    role: RoleProfile,
    config: ScoringConfig,
    milestone: str | None = None,
    session: str | None = None,
) -> Candidate:
    """Add the components every candidate shares (recency, role, scope, addressed, open), then
    score. Run `fuse_relevance` over the whole candidate list first."""
    r = c.record
    comps = c.components
    if r is not None:
        comps["recency"] = round(recency(r.created_at, now, config.half_life_days), 6)
        comps["role"] = role.kind_weight(r.kind)
        if agent in r.to or agent in r.mentions:
            comps["addressed"] = 1.0
        answered = comps.get("resolved", 0.0) > 0
        if r.kind == "question" and r.status == "resolved":
            comps["resolved"] = 1.0
            answered = True
        if r.status == "open" and not answered:
            comps["open"] = 1.0
        scope = scope_component(r, milestone, session)
        if scope is not None:
            comps["scope"] = scope
    source_weight = role.source_weight(c.source)
    if source_weight != 1.0:
        comps["role_source"] = source_weight
    c.score = score(c, config)
    return c


@functools.lru_cache(maxsize=4096)
def _utc_date(day: int) -> str:
    return datetime.fromtimestamp(day * 86_400, UTC).strftime("%Y-%m-%d")


def item_prefix(r: Record) -> str:
    when = _utc_date(int(r.created_at // 86_400))  # one strftime per day, not per item
    status = f" · {r.status}" if r.status in ("open", "resolved", "superseded", "completed") else ""
    return f"- [{r.kind} · {r.author} · {when}{status}]"
