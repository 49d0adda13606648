"""Greedy priority packing under a token budget. Same input, same output.

Sections are filled in priority order (state first, working_memory last); inside a section the
pinned items come first, then by score, newest first on ties. Items are cut at record boundaries:
an item that does not fit is dropped and smaller ones after it may still fit. Only a single
oversized item (the first of its section, pinned, or state) is cut, at a sentence boundary, with
`[truncated, N tokens omitted]`; the task never is (a budget too small for it is a BudgetError). Nothing here does I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..errors import BudgetError
from ..ports import Tokenizer
from .candidates import SECTIONS, Candidate, Item
from .caps import charged_source
from .costs import fixed_cost, heading_cost, shown_count, unit_cost
from .lines import Lines, line_cost, undated_line
from .render import DATED_SECTIONS, PER_MESSAGE, TOOL_CALL_OVERHEAD, day_heading, quoted

MIN_TRUNCATE = 24
_BOUNDARY = re.compile(r"(?<=[.!?])\s+|\n+")


@dataclass(slots=True)
class Decision:
    candidate: Candidate
    kept: bool
    reason: str
    tokens: int
    truncated: bool = False


# A history turn's least cost beside its text: its message's envelope (openai: 4; the other
# formats' is larger).
LEAST_HISTORY_COST = PER_MESSAGE + 1
# `least_cost` is at most a candidate's own count and this (a tool call's two messages), for the
# candidates of the sources: pack asks for the bound only where the room is below that.
MOST_LEAST = 2 * LEAST_HISTORY_COST + TOOL_CALL_OVERHEAD + 1


@dataclass(slots=True)
class Unpriced:
    """A drop whose cost (and so its reason) is counted when the trace is built, not on the call:
    a candidate that met less room than it costs at least (`least_cost`). What the reason needs is
    kept as it was at that point of the packing."""

    decision: Decision
    section: str
    src_left: int | None
    src_cap: int | None
    room: int
    cap: int | None
    used_here: int


@dataclass
class Packed:
    sections: dict[str, list[Item]]
    # Every decision in packing order; the unpriced drops' reasons and costs are filled in by
    # `settle` (`decisions` settles first; the call hands the trace builder these and `settle`).
    pending: list[Decision]
    used: int
    available: int
    section_tokens: dict[str, int] = field(default_factory=dict)
    unpriced: list[Unpriced] = field(default_factory=list)
    # What `settle` counts with: the format, the agent, the counter, and whether stored counts hold.
    pricing: tuple[str, str, Tokenizer | None, bool] = ("openai", "", None, False)

    @property
    def decisions(self) -> list[Decision]:
        self.settle()
        return self.pending

    def settle(self) -> None:
        """Count the cost of each unpriced drop and write its reason, as `pack` would have on
        the call. Safe to call more than once, and from two threads at once (both write the
        same values)."""
        todo = self.unpriced
        if not todo:
            return
        fmt, agent, counter, stored = self.pricing
        assert counter is not None
        for u in todo:
            d = u.decision
            cost = unit_cost(d.candidate, fmt, agent, counter, stored)
            d.reason = drop_reason(
                d.candidate, u.section, cost, u.src_left, u.src_cap, u.room, u.cap, u.used_here
            )
            d.tokens = cost
        self.unpriced = []


def least_cost(c: Candidate, section: str, dated: bool, fmt: str) -> int:
    """A lower bound of what `pack` counts for `c` in `section` (`fit_cost`), from the counts
    that `c` carries and the constants of its layout alone, for any tokenizer: a candidate that
    meets less room is dropped before its cost is counted."""
    recs = c.records
    if section == "history":
        if fmt != "openai":
            return LEAST_HISTORY_COST
        if recs and recs[0].kind == "tool_call":  # two messages; the result's text if any
            return 2 * LEAST_HISTORY_COST + TOOL_CALL_OVERHEAD + (c.tokens if len(recs) > 1 else 0)
        return LEAST_HISTORY_COST + c.tokens
    if dated and c.dated_line:  # the record's count, its line's space and newline
        r = recs[0]
        return r.tokens + 2 if r.content.isprintable() else 1
    if len(recs) > 1 or c.text.isprintable():  # no line to indent: the text's own count
        return c.tokens + 1
    return 1


def fit_cost(
    c: Candidate,
    dated: bool,
    days: set[str],
    fmt: str,
    agent: str,
    counter: Tokenizer,
    stored_counts: bool,
    lines: Lines | None = None,
) -> tuple[int, str | None, str]:
    """What `c` costs where `pack` meets it, the day it is shown under (or None) and its line: in
    a dated section a record's line without its date, under its day's line (paid once per day:
    `days` are those paid for already), else `unit_cost`. `lines`: the records' lines kept
    across calls (lines.py)."""
    if not (dated and c.dated_line):
        return unit_cost(c, fmt, agent, counter, stored_counts), None, c.text
    r = c.records[0]
    m = undated_line(r, counter, lines)
    day, prefix, line, cost = m.day, m.prefix, m.short, m.cost
    assert day is not None and prefix is not None and line is not None
    if cost is None:
        shown = quoted(line)
        if shown is line:  # not printable, but one line all the same
            cost = line_cost(prefix, r, counter)
        else:  # its further lines are indented (render.quoted)
            cost = shown_count(counter, prefix, r, shown, stored_counts) + 1
    return cost + (0 if day in days else day_cost(day, counter)), day, line


def drop_reason(
    c: Candidate,
    section: str,
    cost: int,
    src_left: int | None,
    src_cap: int | None,
    room: int,
    cap: int | None,
    used_here: int,
) -> str:
    """Why a candidate of `cost` tokens was dropped, given what its source, its section and the
    budget had left."""
    if src_left is not None and src_cap is not None and cost > src_left and cost <= room:
        return f"source cap: {c.source} already used {src_cap - src_left} of {src_cap} tokens"
    if cap is not None and cost > cap - used_here:
        return f"section cap: {section} limited to {cap} tokens"
    return f"budget exhausted: needs {cost} tokens, {max(room, 0)} left"


def marker(omitted: int) -> str:
    return f" [truncated, {omitted} tokens omitted]"


def truncate_text(text: str, max_tokens: int, counter: Tokenizer) -> tuple[str, int, int]:
    """Cut `text` to at most `max_tokens` tokens (marker included), at a sentence boundary when one
    lies in the last half of what fits. Returns (text, its tokens, tokens omitted)."""
    ids = counter.encode(text)
    total = len(ids)
    if total <= max_tokens:
        return text, total, 0
    room = max(max_tokens - counter.count(marker(total)) - 1, 1)
    head = counter.decode(ids[:room])
    cut = None
    for m in _BOUNDARY.finditer(head):
        if m.start() >= len(head) // 2:
            cut = m.start()
    if cut is None:
        space = head.rfind(" ")
        cut = space if space >= len(head) // 2 else len(head)
    # A cut inside a multi-byte character decodes to U+FFFD; never show half a character.
    head = head[:cut].rstrip().rstrip("\ufffd").rstrip()
    omitted = total - counter.count(head)
    out = head + marker(omitted)
    # A cut mid-token can re-tokenize longer; shave words (or tokens, for text without spaces)
    # until it fits.
    while counter.count(out) > max_tokens and head:
        if " " in head:
            head = head[: head.rfind(" ")].rstrip()
        else:
            head = counter.decode(counter.encode(head)[:-1]).rstrip("\ufffd")
        omitted = total - counter.count(head)
        out = head + marker(omitted)
    return out, counter.count(out), omitted


def day_cost(day: str, counter: Tokenizer) -> int:
    """Tokens of a day's line in a dated section (render.day_heading)."""
    return counter.count(day_heading(day))


def order_key(c: Candidate) -> tuple[int, float, float, str]:
    # The task goes first: nothing else in `state` may crowd it out.
    return (-1 if c.key == "task" else 0 if c.pinned else 1, -c.score, -c.created_at, c.key)


def pack(
    candidates: Sequence[Candidate],
    *,
    available: int,
    agent: str,
    fmt: str,
    counter: Tokenizer,
    source_caps: Mapping[str, int] | None = None,
    section_caps: Mapping[str, int] | None = None,
    stored_counts: bool = False,
    lines: Lines | None = None,
) -> Packed:
    """`stored_counts`: the records' stored counts are `counter`'s (stored_counts.py), so a line
    of several is counted from them (`shown_count`) instead of word by word. `lines`: the
    records' lines kept across calls (lines.py), made for `counter`."""
    source_caps = source_caps or {}
    section_caps = section_caps or {}
    remaining = available - fixed_cost(agent, fmt, counter)
    if remaining < 0:
        raise BudgetError(
            f"the budget leaves {available} tokens, fewer than the {fmt} format's own envelope "
            f"needs ({available - remaining}); raise budget.window or lower budget.reserve",
            available=available,
            needed=available - remaining,
        )
    by_section: dict[str, list[Candidate]] = {name: [] for name in SECTIONS}
    for c in candidates:
        by_section[c.section].append(c)
    sections: dict[str, list[Item]] = {name: [] for name in SECTIONS}
    decisions: list[Decision] = []
    unpriced: list[Unpriced] = []
    source_used: dict[str, int] = {}
    section_tokens: dict[str, int] = {}
    for name in SECTIONS:
        cap = section_caps.get(name)
        used_here = 0
        has_heading = not (name == "history" and fmt != "markdown")
        head = heading_cost(name, counter) if has_heading else 0
        items = sections[name]
        dated = name in DATED_SECTIONS
        days: set[str] = set()  # days whose line this section already pays for
        for c in sorted(by_section[name], key=order_key):
            extra = 0 if items else head
            src_cap = source_caps.get(c.source)
            if (
                src_cap is not None
                and len(c.sources) > 1
                and charged_source(c, source_caps) is None
            ):
                src_cap = None  # another source without a cap found it too (caps.py)
            src_left = None if src_cap is None else src_cap - source_used.get(c.source, 0)
            room = remaining - extra
            if cap is not None:
                room = min(room, cap - used_here)
            room_src = min(room, src_left) if src_left is not None and not c.pinned else room
            # Only an oversized item is cut to fit; any other is kept whole or dropped.
            oversized = not items or c.pinned or name == "state"
            if (
                not oversized
                and room_src < c.tokens + MOST_LEAST  # else it may well fit: no bound to compute
                and room_src < least_cost(c, name, dated, fmt)
            ):
                # It cannot fit, and only an oversized item is cut: its cost and reason are
                # counted off the call (Packed.settle). Once the budget is nearly spent, this is
                # most candidates left (a quarter of a cold call's at 100k records).
                d = Decision(c, False, "", 0)
                decisions.append(d)
                unpriced.append(Unpriced(d, name, src_left, src_cap, room, cap, used_here))
                continue
            cost, day, line = fit_cost(c, dated, days, fmt, agent, counter, stored_counts, lines)
            if cost <= room_src:
                items.append(Item(c, line, cost, day=day))
                if day is not None:
                    days.add(day)
                decisions.append(Decision(c, True, "fits", cost))
            else:
                if day is not None:  # a line that is cut keeps its own date
                    cost = unit_cost(c, fmt, agent, counter, stored_counts)
                overhead = cost - c.tokens
                # The task is never cut: a window without the whole task is a budget error.
                if oversized and c.key != "task" and room_src - overhead >= MIN_TRUNCATE:
                    text, body, omitted = truncate_text(c.text, room_src - overhead, counter)
                    cost = body + overhead
                    sections[name].append(Item(c, text, cost, truncated=True, omitted=omitted))
                    decisions.append(
                        Decision(c, True, f"truncated: {omitted} tokens omitted", cost, True)
                    )
                else:
                    if name == "state" and c.key == "task":
                        raise BudgetError(
                            f"the budget leaves {remaining} tokens, too few for even the state "
                            f"section (the task needs {cost}); raise budget.window or lower budget.reserve",
                            available=available,
                            needed=cost,
                        )
                    reason = drop_reason(c, name, cost, src_left, src_cap, room, cap, used_here)
                    decisions.append(Decision(c, False, reason, cost))
                    continue
            remaining -= cost + extra
            used_here += cost + extra
            if src_cap is not None:
                source_used[c.source] = source_used.get(c.source, 0) + cost
        if sections[name]:
            section_tokens[name] = used_here
    # History reads in time order; it was packed newest first.
    sections["history"].sort(key=lambda i: (i.candidate.created_at, i.candidate.key))
    return Packed(
        sections, decisions, available - remaining, available, section_tokens,
        unpriced, (fmt, agent, counter, stored_counts),
    )  # fmt: skip


def drop_last(packed: Packed, reason: str) -> bool:
    """Remove the lowest-priority kept item (last section, last item); False if nothing is left
    but the task. Used when the exact count of the rendered window exceeds the budget."""
    for name in reversed(SECTIONS):
        items = packed.sections[name]
        for i in range(len(items) - 1, -1, -1):
            if items[i].candidate.key == "task":
                continue
            item = items.pop(i)
            for d in packed.pending:  # a kept item's decision is priced already
                if d.candidate is item.candidate:
                    d.kept, d.reason = False, reason
            return True
    return False
