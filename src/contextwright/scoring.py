"""Scores that explain themselves: every candidate's score is a weighted sum of named components,
and the trace shows each one. Pure functions; the weights are configuration."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from .candidates import Candidate
from .records import Record
from .roles import RoleProfile

DAY = 86_400.0


@dataclass(frozen=True)
class ScoringConfig:
    half_life_days: float = 3.0
    weights: Mapping[str, float] = field(
        default_factory=lambda: {
            "relevance": 3.0,  # full text / vectors, fused, 0..1
            "recency": 1.0,  # exp decay by half-life, 0..1
            "addressed": 2.0,  # @mention or direct message to this agent
            "open": 1.0,  # unresolved task or outstanding question
            "role": 1.0,  # role profile's weight for the kind
            "prior": 1.0,  # the source's prior (history and pins are certain)
            "scope": 0.5,  # same milestone / session
            "resolved": -1.0,  # a question already answered drops in weight
            "boost": 1.0,  # context rules
        }
    )

    def with_weights(self, **weights: float) -> ScoringConfig:
        return replace(self, weights={**self.weights, **weights})


def recency(created_at: float, now: float, half_life_days: float) -> float:
    age = max(now - created_at, 0.0)
    return math.exp(-math.log(2) * age / (half_life_days * DAY))


def score(c: Candidate, config: ScoringConfig) -> float:
    w = config.weights
    return sum(w.get(name, 1.0) * value for name, value in c.components.items())


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
    """Add the components every candidate shares (recency, role, addressed, open), then score."""
    r = c.record
    if r is not None:
        comps = c.components
        comps["recency"] = round(recency(r.created_at, now, config.half_life_days), 6)
        comps["role"] = role.kind_weight(r.kind)
        if agent in r.to or agent in r.mentions:
            comps["addressed"] = 1.0
        if r.status == "open":
            comps["open"] = 1.0
        if (milestone and r.milestone == milestone) or (session and r.session == session):
            comps["scope"] = 1.0
    c.score = score(c, config) * role.source_weight(c.source)
    return c


def item_prefix(r: Record) -> str:
    when = datetime.fromtimestamp(r.created_at, UTC).strftime("%Y-%m-%d")
    status = f" · {r.status}" if r.status in ("open", "resolved", "superseded", "completed") else ""
    return f"- [{r.kind} · {r.author} · {when}{status}]"
