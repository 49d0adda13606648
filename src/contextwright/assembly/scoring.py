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
- `named`: the task names the record's author ("what did Caroline research?").
- `period`: the record was said in a period the task names ("in May 2023"), periods.py.
- `substance`: how much a relevance candidate has to say, by its length on a log scale (a
  one-line "cool, thanks!" matches words of a task but rarely answers it).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from ..errors import ValidationError
from ..records import Record
from ..roles import RoleProfile
from ..text import query_terms
from .candidates import Candidate

DAY = 86_400.0
FUSIONS = ("sum", "rrf", "max")
# Components that multiply the score instead of adding to it.
MULTIPLIERS = ("role_source",)
# Components finish_all sets (keep in step with it): where one of them was set before (chains'
# `resolved`), the candidate's score is `score`'s, summed over its components in their order.
OWN = frozenset(
    ("recency", "role", "addressed", "resolved", "open", "scope", "substance", *MULTIPLIERS)
)


@dataclass(frozen=True, slots=True)
class ScoringConfig:
    half_life_days: float = 3.0
    weights: Mapping[str, float] = field(
        default_factory=lambda: {
            "relevance": 3.0,  # fused full text / vectors, 0..1
            "bm25": 0.0,  # shown in the trace; counted through `relevance`
            "vector": 0.0,  # shown in the trace; counted through `relevance`
            "recency": 0.25,  # exp decay by half-life, 0..1; a tie-breaker next to relevance
            "addressed": 2.0,  # @mention or direct message to this agent
            "open": 1.0,  # unresolved task or outstanding question
            "role": 2.0,  # role profile's weight for the kind
            "prior": 1.0,  # the source's prior (history and pins are certain)
            "scope": 0.5,  # same milestone / session
            "resolved": -1.0,  # a question already answered drops in weight
            "boost": 1.0,  # context rules
            "named": 0.3,  # the task names the record's author
            "period": 1.0,  # said in a period the task names, 0.5 the week after (periods.py)
            "substance": 0.5,  # log-scaled length of a relevance candidate, 0..1
        }
    )
    # How the relevance signals become one `relevance` component (see fuse_relevance).
    fusion: str = "sum"
    signal_weights: Mapping[str, float] = field(
        default_factory=lambda: {"bm25": 1.0, "vector": 0.75}
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


LN2 = math.log(2)


def recency(created_at: float, now: float, half_life_days: float) -> float:
    age = max(now - created_at, 0.0)
    return math.exp(-LN2 * age / (half_life_days * DAY))


def score(c: Candidate, config: ScoringConfig) -> float:
    weights = config.weights
    comps = c.components
    total = 0.0  # the sum of the components in their order, as `sum` adds them
    for name, value in comps.items():
        if name not in MULTIPLIERS:
            total += weights.get(name, 1.0) * value
    for name in MULTIPLIERS:
        total *= comps.get(name, 1.0)
    return total


def fuse_relevance(candidates: Sequence[Candidate], config: ScoringConfig) -> None:
    """Set each candidate's `relevance` from the relevance signals the sources left on it
    (`fused`)."""
    for c, value in fused(candidates, config):
        c.components["relevance"] = value


def fused(
    candidates: Sequence[Candidate], config: ScoringConfig
) -> Iterator[tuple[Candidate, float]]:
    """The relevance of each candidate that carries a signal, from the signals, without setting it.

    A signal is a component named in `config.signal_weights` (`bm25`, `vector`, ...), 0..1, higher
    is better. Only the signals that some candidate carries take part, so a window built without
    an embedder is scored on full text alone. A candidate a signal's source did not return counts
    as 0 (sum) or as unranked (rrf) for it.

    - `sum`: the weighted mean of the normalized signals.
    - `rrf`: reciprocal rank fusion, sum of w / (k + rank), scaled so rank 1 everywhere gives 1.
    - `max`: the best signal.

    A candidate from a source that sets `relevance` itself and carries no signal keeps its value
    (it is not given).
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
    if config.fusion == "sum" and len(present) == 1:  # full text alone: most windows
        (s,) = present
        w = weights[s]
        for c in candidates:
            v = c.components.get(s)
            if v is not None:  # as the loop below computes it, without its generators
                yield c, round((0 + w * v) / total_w, 6)
        return
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
        yield c, round(value, 6)


# Sections whose candidates are there for their relevance to the task.
RELEVANCE_SECTIONS = ("knowledge", "suggestions")
SUBSTANTIAL_TOKENS = 60  # `substance` reaches 1 at this length


def substance(tokens: int) -> float:
    """0..1, log-scaled: 12 tokens give 0.63, 30 give 0.84, 60 and more give 1."""
    return min(1.0, math.log1p(max(tokens, 0)) / math.log1p(SUBSTANTIAL_TOKENS))


# `substance` rounded as the trace shows it, by length: one log per length, not per candidate
# (from SUBSTANTIAL_TOKENS on it is 1).
_SUBSTANCE6 = tuple(round(substance(n), 6) for n in range(SUBSTANTIAL_TOKENS + 1))


def _substance6(tokens: int) -> float:
    if tokens >= SUBSTANTIAL_TOKENS:
        return 1.0
    return _SUBSTANCE6[max(tokens, 0)]


def mark_named(candidates: Sequence[Candidate], task: str) -> None:
    """Set `named` = 1 on the relevance candidates whose author the task names as a word: a
    question about what someone said or did is most often answered in their own words."""
    if not task:
        return
    named: dict[str, bool] = {}
    for c in candidates:
        if c.section not in RELEVANCE_SECTIONS or not c.records:
            continue
        r = c.records[0]
        if not r.author:
            continue
        hit = named.get(r.author)
        if hit is None:
            pattern = _names_pattern(frozenset((r.author,)))
            hit = named[r.author] = pattern is not None and pattern.search(task) is not None
        if hit:
            c.components["named"] = 1.0


@functools.lru_cache(maxsize=1024)
def _names_pattern(names: frozenset[str]) -> re.Pattern[str] | None:
    """Any of `names` as a word or an @mention, possessive included, case-insensitive; the one
    definition of "the task names someone" for `named` and for `topic`."""
    words = sorted((n for n in names if n.strip()), key=lambda n: (-len(n), n))
    if not words:
        return None
    alts = [r"\s+".join(map(re.escape, n.split())) for n in words]
    # People are asked about by their given name ("what did Ada build?" of "Ada Lovelace"): the
    # first word of a multi-word name counts too, capitalized as written, so that "Grace Hopper"
    # is named by "Grace" and not by "grace period".
    given = sorted({p[0] for n in words if len(p := n.split()) > 1 and _given_name(p[0])})
    alts += [f"(?-i:{re.escape(g)})" for g in given]
    alt = "|".join(alts)
    # Not inside a path or a file name (`docs/rex.md`): only a name as a word, or an @mention.
    return re.compile(rf"(?<![\w/.\\])(?:{alt})(?:['’]s)?(?![\w/\\]|\.\w)", re.IGNORECASE)


def _given_name(word: str) -> bool:
    return len(word) > 1 and word.isalpha() and not word[0].islower()  # caseless scripts too


def topic(task: str, names: Iterable[str]) -> str:
    """The task without the names of the project's people: what full text and vectors search for.

    A name is in hundreds of records (everything that person said, and every reply addressed to
    them), so in a query it drowns the words that say what the task is about; "what books has
    Melanie read?" would rank Melanie's chat above the one line about a book. Who said a record is
    scored apart, by `named` (mark_named). On LoCoMo (dev) searching the topic instead of the
    whole question took turn recall at 1,000 tokens from 0.833 to 0.852 (docs/recall.md). A task that
    is nothing but names (and stopwords) is searched as it is."""
    pattern = _names_pattern(frozenset(names))
    if pattern is None or not task:
        return task
    rest = " ".join(pattern.sub(" ", task).split())
    return rest if query_terms(rest) else task


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


def finish_all(
    candidates: Sequence[Candidate],
    *,
    now: float,
    agent: str,
    role: RoleProfile,
    config: ScoringConfig,
    milestone: str | None = None,
    session: str | None = None,
) -> None:
    """Add the components every candidate shares (recency, role, scope, addressed, open), then
    score each (as `score` does, inline: this runs for every candidate of every call). Run
    `fuse_relevance` over the whole candidate list first."""
    span = config.half_life_days * DAY
    exp = math.exp
    kinds: dict[str, float] = {}  # the role's weight per kind, looked up once a call
    sources: dict[str, float] = {}
    wget = config.weights.get
    w_recency, w_role, w_addressed = wget("recency", 1.0), wget("role", 1.0), wget("addressed", 1.0)
    w_resolved, w_open, w_scope = wget("resolved", 1.0), wget("open", 1.0), wget("scope", 1.0)
    w_substance = wget("substance", 1.0)
    for c in candidates:
        comps = c.components
        # The score is the sum of the components in their order (`score`): those set before
        # this step, then the ones it adds, in the order it adds them. Where it sets one that
        # was there already (its place is then the old one), the sum is taken over all at the end.
        total = 0.0
        fresh = True
        for name, value in comps.items():
            if name in OWN:
                fresh = False
                break
            total += wget(name, 1.0) * value
        if c.records:
            r = c.records[0]  # `recency`, inline
            v = comps["recency"] = round(exp(-LN2 * max(now - r.created_at, 0.0) / span), 6)
            total += w_recency * v
            kind = r.kind
            w = kinds.get(kind)
            if w is None:
                w = kinds[kind] = role.kind_weight(kind)
            comps["role"] = w
            total += w_role * w
            if agent in r.to or agent in r.mentions:
                comps["addressed"] = 1.0
                total += w_addressed * 1.0
            status = r.status
            if status is not None:
                answered = comps.get("resolved", 0.0) > 0
                if status == "resolved" and kind == "question":
                    comps["resolved"] = 1.0
                    total += w_resolved * 1.0
                    answered = True
                if status == "open" and not answered:
                    comps["open"] = 1.0
                    total += w_open * 1.0
            if session and r.session == session:  # scope_component, inline
                comps["scope"] = 1.0
                total += w_scope * 1.0
            elif milestone:
                v = comps["scope"] = (
                    1.0 if r.milestone == milestone else 0.5 if r.milestone is None else 0.0
                )
                total += w_scope * v
            if c.section in RELEVANCE_SECTIONS:
                t = r.tokens
                v = comps["substance"] = 1.0 if t >= SUBSTANTIAL_TOKENS else _SUBSTANCE6[max(t, 0)]
                total += w_substance * v
        src = c.source
        sw = sources.get(src)
        if sw is None:
            sw = sources[src] = role.source_weight(src)
        if sw != 1.0:
            comps["role_source"] = sw
        if not fresh:
            c.score = score(c, config)
        else:
            c.score = total * sw if sw != 1.0 else total


@functools.lru_cache(maxsize=4096)
def _utc_date(day: int) -> str:
    d = datetime.fromtimestamp(day * 86_400, UTC)
    return f"{d.day} {d:%b %Y}"  # "25 May 2023": 4 tokens fewer per line than ISO with brackets


STATUSES_SHOWN = ("open", "resolved", "superseded", "completed")


def item_prefix(r: Record, *, dated: bool = True) -> str:
    """`- Caroline (25 May 2023):` for a plain message, `- rex (decision, 2 Mar 2026):` or
    `- alice (question, 20 Nov 2026, open):` otherwise. Short on purpose: the prefix is paid on
    every line, and every token it saves is room for another record (docs/recall.md).
    `dated=False` leaves the date out (`- Caroline:`), for a line shown under its day's line
    (render.DATED_SECTIONS)."""
    status = r.status if r.status in STATUSES_SHOWN else None
    return _prefix(r.author, r.kind, int(r.created_at // 86_400) if dated else None, status)


def day_label(r: Record) -> str:
    """The record's UTC day as the window shows it: `25 May 2023`."""
    return _utc_date(int(r.created_at // 86_400))


@functools.lru_cache(maxsize=8192)
def _prefix(author: str, kind: str, day: int | None, status: str | None) -> str:
    """One format per (author, kind, day, status): a window has ~180 prefixes and few distinct."""
    parts = [] if kind == "message" else [kind]
    if day is not None:
        parts.append(_utc_date(day))
    if status is not None:
        parts.append(status)
    return f"- {author} ({', '.join(parts)}):" if parts else f"- {author}:"
