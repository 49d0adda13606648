"""Between merge and packing: what the fired rule says, which records travel together, and the
score of every candidate. One function, so that the engine's assemble reads as the pipeline.

Order matters: a rule suppresses, pins and boosts first (a suppressed question does not pull in
its answers); superseded records are left out or folded beside their replacements; questions are
folded with their answers; relevance signals are fused over the whole set; records near strong
matches are lifted; the candidates whose author the task names, or said in a period it names,
are marked; then each candidate
gets its shared components and its score.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..roles import RoleProfile
from ..rules import actions
from ..rules.ruleset import Rule
from .candidates import Candidate
from .chains import link_replies, link_superseded, read_links
from .locality import spread
from .packing import Decision
from .periods import mark_periods, task_periods
from .scoring import ScoringConfig, finish_all, fuse_relevance, mark_named
from .sources import SourceContext


def select(
    merged: Sequence[Candidate],
    ctx: SourceContext,
    *,
    rule: Rule | None,
    include_superseded: bool,
    config: ScoringConfig,
    role: RoleProfile,
) -> tuple[list[Candidate], list[Decision]]:
    """The scored candidates for the packer, and the decisions for those left out here."""
    merged, deep = deep_room(merged, ctx.budget)
    kept, dropped = actions.apply(rule, merged)
    show_old = include_superseded or actions.include_superseded(rule)
    locality = bool(ctx.options.get("locality", True))
    links = read_links(kept, ctx, show_old, config if locality else None)
    kept, stale = link_superseded(kept, ctx, show_old, links)
    kept, answers = link_replies(kept, ctx, links)
    fuse_relevance(kept, config)
    if locality:  # nearby records of strong matches (locality.py)
        kept = spread(kept, ctx, config, read_before=None if links is None else links.near)
    mark_named(kept, ctx.task)  # the task names the author (scoring.py)
    mark_periods(kept, task_periods(ctx.task, ctx.now))  # ... or a date (periods.py)
    finish_all(
        kept,
        now=ctx.now,
        agent=ctx.agent,
        role=role,
        config=config,
        milestone=ctx.milestone,
        session=ctx.session,
    )
    return kept, [*dropped, *stale, *answers, *deep]


# The other candidates fill the window this many times over: the deep end of a list is left out.
DEEP_ROOM = 2.0


def deep_room(
    candidates: Sequence[Candidate], budget: int | None
) -> tuple[Sequence[Candidate], list[Decision]]:
    """The candidates without the deep end of a grown list (`Candidate.deep`) when the others
    already offer DEEP_ROOM windows' worth of tokens. Deep hits rank below the rest of their own
    list, so where the others crowd the window they are read, scored and packed only to be
    dropped: in an agent's working call (history, tool results) that cost a call with vectors a
    fifth of its time (docs/recall.md). A deep hit that another source found too stays."""
    if budget is None or not any(c.deep for c in candidates):
        return candidates, []
    others = [c for c in candidates if not c.deep or len(c.sources) > 1]
    if sum(c.tokens for c in others) < DEEP_ROOM * budget:
        return candidates, []
    why = "past the vector list's first 40: the other candidates fill the window twice over"
    return others, [
        Decision(c, False, why, c.tokens) for c in candidates if c.deep and len(c.sources) <= 1
    ]
