"""A record's lines as windows show it, and their counts, kept across calls.

Outside history a record is one line: `item_prefix` and its content (`record_candidate`), or,
under its day's line in a dated section, the prefix without the date (`packing.fit_cost`); the
renderer counts each line with its newline (`render.counted_system`). All of it follows from the
record alone, and the calls of an agent show the same records again and again: the agent loop's
next call almost all of them, a cold call at 100k records more than half (the pinned records,
decisions and open items of the same agents). So each is made once per record and counter and
kept here; a call then reads it back instead of building the strings and asking the counter's
cache for each again.

Exact: an entry is used only for the very record object it was made from (records are
immutable; a status change or a record read afresh is another object, and gets its own entry),
and by the counter it was counted with.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..ports import Tokenizer
from ..records import Record
from .scoring import day_label, item_prefix

# render's count of a record's line: (the item's text, its record, render's arguments).
ShownCount = Callable[..., int | None]

# Records kept; past this many the memo starts again (a window shows ~110 records).
LINES_KEPT = 8192


def dated_line(r: Record, counter: Tokenizer, lines: Lines | None) -> tuple[str, int]:
    """A record's line outside history, `item_prefix` and its content, and its count: the
    prefix's, the content's stored count and the space (kept in `lines` where given)."""
    return lines.dated(r) if lines is not None else _dated(r, counter)


def _dated(r: Record, counter: Tokenizer) -> tuple[str, int]:
    prefix = item_prefix(r)
    return f"{prefix} {r.content}", counter.count(prefix) + r.tokens + 1


def undated_line(r: Record, counter: Tokenizer, lines: Lines | None) -> Line:
    """A record's line under its day's line in a dated section: its day, its prefix without the
    date, `short` (`prefix content`) and, where the content is printable (one line that
    render.quoted shows as it is), `cost` (kept in `lines` where given)."""
    return lines.undated(r) if lines is not None else _undated(Line(r), counter)


def line_cost(prefix: str, r: Record, counter: Tokenizer) -> int:
    """What `prefix content` and its newline cost with the content on one line: the prefix's
    count, the content's stored count, the space and the newline."""
    return counter.count(prefix) + r.tokens + 2


def _undated(m: Line, counter: Tokenizer) -> Line:
    r = m.record
    prefix = m.prefix = item_prefix(r, dated=False)
    m.day = day_label(r)
    if r.content.isprintable():
        m.cost = line_cost(prefix, r, counter)
    m.short = f"{prefix} {r.content}"  # last: a thread that finds it takes the rest
    return m


@dataclass(slots=True)
class Line:
    """One record's lines and counts (None: not needed yet, or not derived here)."""

    record: Record
    text: str | None = None  # `prefix content`, a dated line
    tokens: int = 0  # as `dated_line` counts `text`
    day: str | None = None
    prefix: str | None = None  # the prefix without the date, of `short`
    short: str | None = None  # `prefix content`, shown under its day
    cost: int | None = None  # `line_cost`, where the content is printable (one line as it is)
    text_count: int | None = None  # the exact count of `text` and a newline
    short_count: int | None = None  # the exact count of `short` and a newline


class Lines:
    """The `Line` of each record a window showed lately, for one counter."""

    def __init__(self, counter: Tokenizer, size: int = LINES_KEPT) -> None:
        self.counter = counter
        self.size = max(size, 1)
        self._by_id: dict[str, Line] = {}

    def line(self, r: Record) -> Line:
        """`r`'s entry: kept, or new (and kept)."""
        by_id = self._by_id
        m = by_id.get(r.id)
        if m is None or m.record is not r:
            if len(by_id) >= self.size:
                by_id.clear()
            m = by_id[r.id] = Line(r)
        return m

    def dated(self, r: Record) -> tuple[str, int]:
        """`dated_line(r, ...)`, kept."""
        m = self.line(r)
        text = m.text
        if text is None:  # the count first: another thread takes a line once `text` is set
            text, m.tokens = _dated(r, self.counter)
            m.text = text
        return text, m.tokens

    def undated(self, r: Record) -> Line:
        """`undated_line(r, ...)`, kept."""
        m = self.line(r)
        if m.short is None:
            _undated(m, self.counter)
        return m

    def shown_count(self, r: Record, text: str, count: ShownCount, *args: Any) -> int | None:
        """The exact count of `text` and a newline where `text` is `r`'s dated or undated line:
        kept, or `count(text, r, *args)` (render's own) and kept."""
        m = self._by_id.get(r.id)
        if m is None or m.record is not r:
            return count(text, r, *args)
        if text is m.short:
            n = m.short_count
            if n is None:
                n = m.short_count = count(text, r, *args)
            return n
        if text is m.text:
            n = m.text_count
            if n is None:
                n = m.text_count = count(text, r, *args)
            return n
        return count(text, r, *args)

    def __len__(self) -> int:
        return len(self._by_id)
