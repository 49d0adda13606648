"""Records that are shown together: a question with its answers, and a superseded decision beside
the decision that replaced it.

Both are folded into one packing unit (like a tool call and its result), so the packer can never
keep a question and drop its answer, or show an old decision away from the one that replaced it.
A question that is answered or resolved is marked `resolved`, which lowers its score. A
superseded record never enters the window unless the caller asks for it (`include_superseded`,
or a rule's `{"include": "superseded"}`); then it appears inside its replacement's item, marked
"superseded by <id>". Runs after merge and before scoring; it reads the store for replies and
replacements only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

from ..ports import ReadsFollowUps, Store, Tokenizer, capable
from ..records import Record
from .candidates import Candidate
from .locality import Anchor, Sides, likely_anchors
from .packing import Decision
from .reads import Near, Replies, kept_replies
from .render import CHAIN_MARK, quoted
from .scoring import ScoringConfig, item_prefix
from .sources import SourceContext, record_candidate

MAX_ANSWERS = 3
MAX_CHAIN = 8  # how far to follow "superseded by" to the decision in force


def _line(label: str, r: Record, limit: int = 600) -> str:
    body = r.content if len(r.content) <= limit else r.content[:limit].rstrip() + " …"
    # Quoted deeper than the `↳` line, which only the engine writes (render.quoted).
    return f"\n  {CHAIN_MARK} {label} {item_prefix(r)[2:]} {quoted(body, '    ')}"


def _fold(c: Candidate, extra: Sequence[Record], lines: Sequence[str], counter: Tokenizer) -> None:
    # The renderer shows a folded item's text as it is, so it is quoted here, once, around the
    # `↳` lines (render.item_text).
    text = c.text if len(c.records) > 1 else quoted(c.text)
    c.records = (*c.records, *extra)
    c.text = text + "".join(lines)
    c.tokens = counter.count(c.text)
    c.dated_line = False  # several records' lines: each keeps its own date


def _visible(r: Record, ctx: SourceContext) -> bool:
    return r.project == ctx.project and r.visible_to(ctx.agent)


@dataclass(frozen=True, slots=True)
class Links:
    """What `link_superseded`, `link_replies` and locality.py's `spread` would read, read
    beforehand in one round trip: the replies to `replied`, the replacements of `replaced` (ids),
    and the records said around the likely strong matches (`near`, by anchor). An empty tuple is
    a read not made (nothing to read, or kept from an earlier call, reads.py)."""

    replied: tuple[str, ...]
    replies: list[Record]
    replaced: tuple[str, ...]
    replacements: dict[str, str]
    near: dict[Anchor, Sides] = field(default_factory=dict)


def _stale(candidates: Sequence[Candidate]) -> list[Candidate]:
    return [c for c in candidates if c.records and c.records[0].status == "superseded"]


def _questions(candidates: Sequence[Candidate]) -> dict[str, Candidate]:
    return {
        c.records[0].id: c
        for c in candidates
        if c.records and c.records[0].kind == "question" and c.section != "history"
    }


def read_links(
    candidates: list[Candidate],
    ctx: SourceContext,
    include: bool,
    scoring: ScoringConfig | None = None,
) -> Links | None:
    """The reads of `link_superseded`, `link_replies` and, given `scoring` (locality on), of
    `spread`, in one round trip where the store can (`ReadsFollowUps`) and all are known before
    any runs: when superseded records are left out, the questions whose replies are read are
    those of the records in force, known at once, and the neighbours read are those of the likely
    strong matches (locality.likely_anchors; `spread` reads its own where they miss one). On
    PostgreSQL each read alone is a round trip, one after the other."""
    if include or not capable(ctx.store, ReadsFollowUps):
        return None
    stale = _stale(candidates)
    stale_ids = {id(c) for c in stale}
    current = [c for c in candidates if id(c) not in stale_ids]
    replaced = tuple(c.key for c in stale)
    questions = _questions(current)
    replied = tuple(questions)
    if replied and _kept(ctx, Replies(ctx.project, ctx.agent, replied)):
        replied = ()
    anchors: tuple[Anchor, ...] = ()
    if scoring is not None:
        droppable = [
            c for c in current if len(c.records) == 1 and c.records[0].reply_to in questions
        ]
        anchors = likely_anchors(current, droppable, scoring)
        # Where they are the call's own anchors, and kept, `spread` reads nothing. Otherwise they
        # are read when the other reads are made anyway, or when they are the call's own.
        if (anchors and _kept(ctx, Near(ctx.project, ctx.agent, anchors))) or (
            droppable and not replied and not replaced
        ):
            anchors = ()
    if not replied and not replaced and not anchors:
        return None
    replies, by, sides = cast(ReadsFollowUps, ctx.store).follow_ups(
        ctx.project, ctx.agent, replied, replaced, anchors
    )
    return Links(replied, replies, replaced, by, dict(zip(anchors, sides, strict=True)))


def _kept(ctx: SourceContext, key: Near | Replies) -> bool:
    return (
        ctx.shared is not None
        and ctx.version is not None
        and (ctx.shared.get(key, ctx.version) is not None)
    )


def link_replies(
    candidates: list[Candidate], ctx: SourceContext, links: Links | None = None
) -> tuple[list[Candidate], list[Decision]]:
    """Fold each candidate question's answers into it; drop the answers' own candidates.
    `links`: the replies read beforehand (`read_links`), if they are those of these questions."""
    questions = _questions(candidates)
    if not questions:
        return candidates, []
    replies: dict[str, list[Record]] = {}
    # Kept for the calls after this one at its store version (reads.py).
    ids = tuple(questions)
    before = links.replies if links is not None and links.replied == ids else None
    found = kept_replies(ctx.store, ctx.shared, ctx.version, ctx.project, ctx.agent, ids, before)
    for r in found:
        if r.reply_to and _visible(r, ctx) and r.status != "superseded":
            replies.setdefault(r.reply_to, []).append(r)
    folded: dict[str, str] = {}  # answer id -> question id
    for qid, answers in replies.items():
        c = questions[qid]
        shown = answers[-MAX_ANSWERS:]  # the latest answers, in time order
        lines = [_line(f"answer by {a.author}:", a) for a in shown]
        _fold(c, shown, lines, ctx.counter)
        c.components["resolved"] = 1.0
        c.components.pop("open", None)
        c.reasons = (*c.reasons, f"answered by {', '.join(dict.fromkeys(a.author for a in shown))}")
        for a in shown:
            folded[a.id] = qid
    if not folded:
        return candidates, []
    kept: list[Candidate] = []
    dropped: list[Decision] = []
    for c in candidates:
        rec = c.record
        if rec is not None and len(c.records) == 1 and rec.id in folded:
            why = f"shown beside question {folded[rec.id]}"
            dropped.append(Decision(c, False, why, c.tokens))
            continue
        kept.append(c)
    return kept, dropped


def _in_force(store: Store, project: str, start: str) -> list[str]:
    """The chain of ids from `start` to the record in force, following "superseded by"."""
    chain = [start]
    while len(chain) <= MAX_CHAIN:
        nxt = store.superseded_by(project, [chain[-1]]).get(chain[-1])
        if nxt is None or nxt in chain:
            break
        chain.append(nxt)
    return chain


def link_superseded(
    candidates: list[Candidate], ctx: SourceContext, include: bool, links: Links | None = None
) -> tuple[list[Candidate], list[Decision]]:
    """Leave superseded records out (the default), or show each inside the item of the record that
    replaced it, fetching the replacement when no source returned it. `links`: the replacements
    read beforehand (`read_links`), if they are those of these stale records."""
    stale = _stale(candidates)
    if not stale and not include:
        return candidates, []
    stale_ids = {id(c) for c in stale}
    current = [c for c in candidates if id(c) not in stale_ids]
    if not include:
        keys = tuple(c.key for c in stale)
        by = (
            links.replacements
            if links is not None and links.replaced == keys
            else ctx.store.superseded_by(ctx.project, list(keys))
        )
        return current, [
            Decision(c, False, f"superseded by {by.get(c.key, 'a later record')}", c.tokens)
            for c in stale
        ]
    by_id = {c.record.id: c for c in current if c.record is not None}
    olds: dict[str, list[tuple[Record, str]]] = {}  # id in force -> (superseded, replaced by)
    seen: set[str] = set()

    def attach(old: Record) -> None:
        if old.id in seen or not _visible(old, ctx):
            return
        chain = _in_force(ctx.store, ctx.project, old.id)
        head = chain[-1]
        if head == old.id:
            return
        seen.add(old.id)
        olds.setdefault(head, []).append((old, chain[1]))

    for c in stale:
        if c.record is not None:
            attach(c.record)
    # Decisions in force that replaced something: show what they replaced.
    wanted = [c.record.supersedes for c in current if c.record and c.record.supersedes]
    for old in ctx.store.get_many(ctx.project, [w for w in wanted if w]):
        attach(old)
        if old.supersedes:  # and what that one replaced, a few steps back
            for older in ctx.store.get_many(ctx.project, [old.supersedes]):
                attach(older)
    missing = [head for head in olds if head not in by_id]
    for r in ctx.store.get_many(ctx.project, missing):
        if _visible(r, ctx) and r.status != "superseded":
            new = record_candidate(r, ctx, "superseded", "knowledge", "replaced a record asked for")
            new.components["prior"] = 0.5
            current.append(new)
            by_id[r.id] = new
    shown: set[str] = set()
    for head, pairs in olds.items():
        head_c = by_id.get(head)
        if head_c is None:
            continue
        pairs.sort(key=lambda p: -p[0].created_at)
        records = [old for old, _ in pairs]
        lines = [_line(f"superseded by {direct}:", old) for old, direct in pairs]
        _fold(head_c, records, lines, ctx.counter)
        shown.update(old.id for old in records)
        head_c.reasons = (*head_c.reasons, f"shown with the {len(records)} record(s) it superseded")
    dropped = [
        Decision(c, False, "shown beside the record that superseded it", c.tokens)
        for c in stale
        if c.record is not None and c.record.id in shown
    ]
    dropped += [
        Decision(c, False, "superseded; its replacement is not visible", c.tokens)
        for c in stale
        if c.record is not None and c.record.id not in shown
    ]
    return current, dropped
