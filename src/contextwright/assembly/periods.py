"""Time-aware retrieval: a task that names a date asks about what was said then.

"What did Maria donate in December 2023?", "what did we decide on 3 June?": full text and
vectors read the date as a few more words (or not at all), and the records of that day say
"yesterday" or nothing about the date. Records are dated, so the date is a filter we can apply
exactly: the relevance candidates said inside the period the task names get the component
`period` (1), and those said within a week after it get half of it, because people talk about
what they did in the days after doing it ("I ran a charity race last Saturday").

Only dates written out are read: a day ("13 October 2023", "October 13, 2023", "2023-10-13"), a
month ("May 2023", "in June": the latest June up to now), a year ("in 2023"). Relative phrases
("last week") are left to the text searches: in a record they are relative to when it was said,
and in a task they are as often quoted from a record as meant from today. Days are UTC days, as
the window shows them (`25 May 2023`). Pure functions: no I/O, so the component changes only the
order of what the sources found, never what the agent may see.
"""

from __future__ import annotations

import calendar
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from .candidates import Candidate

DAY = 86_400.0
# Said within this long after a period, a record is likely about it ("last weekend", "on Friday").
AFTERWARDS = 7 * DAY
AFTERWARDS_SHARE = 0.5
RELEVANCE_SECTIONS = ("knowledge", "suggestions")

_MONTHS = {
    name.lower(): i
    for i in range(1, 13)
    for name in (calendar.month_name[i], calendar.month_abbr[i])
}
_MONTHS["sept"] = 9
# Capitalized as written in English ("May", "Sept."), whatever the case of the rest of the task.
_M = (
    "(?-i:(?P<m>" + "|".join(sorted((m.title() for m in _MONTHS), key=len, reverse=True)) + r"))\.?"
)
_Y = r"(?P<y>(?:19|20)\d\d)"
_D = r"(?P<d>[0-3]?\d)(?:st|nd|rd|th)?"
_SEP = r"[\s,]+"
# Month names are matched capitalized ("May 2023", not "may"); a month alone needs a preposition
# before it ("in June"), and a year alone too ("in 2023"), so that "May I ..." or "2023 items"
# name no period.
_PATTERNS = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"\b(?P<y>(?:19|20)\d\d)-(?P<m>[01]\d)-(?P<d>[0-3]\d)\b",
        rf"\b{_D}(?:\s+of)?\s+{_M}{_SEP}{_Y}\b",
        rf"\b{_M}\s+{_D}{_SEP}{_Y}\b",
        rf"\b{_M}{_SEP}(?:of\s+)?{_Y}\b",
        rf"\b{_D}(?:\s+of)?\s+{_M}(?![\w-])",
        rf"\b{_M}\s+{_D}(?![\w:-])",
        rf"\b(?:in|during|since|of|early|late|mid|last)\s+{_M}(?![\w-])",
        rf"\b(?:in|during|of)\s+{_Y}\b",
    )
]


@dataclass(frozen=True, slots=True)
class Period:
    """[start, end) in epoch seconds (UTC), and the words of the task that named it."""

    start: float
    end: float
    text: str

    def weight(self, t: float) -> float:
        """1 inside the period, AFTERWARDS_SHARE in the week after it, else 0."""
        if self.start <= t < self.end:
            return 1.0
        if self.end <= t < self.end + AFTERWARDS:
            return AFTERWARDS_SHARE
        return 0.0


def task_periods(task: str, now: float) -> list[Period]:
    """The periods the task names, in the order it names them (at most one per span of text)."""
    if not task or (not any(ch.isdigit() for ch in task) and not _has_month(task)):
        return []
    return list(_periods(task, int(now // DAY)))


@functools.lru_cache(maxsize=1024)
def _periods(task: str, today: int) -> tuple[Period, ...]:
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, Period]] = []
    for pattern in _PATTERNS:
        for m in pattern.finditer(task):
            if any(m.start() < b and a < m.end() for a, b in taken):
                continue  # a longer form already read this text ("13 May 2023", not "13 May")
            period = _period(m.groupdict(), today * DAY, m.group(0))
            if period is not None:
                taken.append((m.start(), m.end()))
                found.append((m.start(), period))
    return tuple(p for _, p in sorted(found, key=lambda f: f[0]))


def _period(g: dict[str, str | None], now: float, text: str) -> Period | None:
    m, d, y = g.get("m"), g.get("d"), g.get("y")
    month = (int(m) if m.isdigit() else _MONTHS[m.lower()]) if m else None
    day = int(d) if d else None
    year = int(y) if y else None
    today = datetime.fromtimestamp(now, UTC)
    try:
        if year is None:
            # "in June", "3 June": the latest one up to today.
            assert month is not None
            year = today.year
            if (month, day or 1) > (today.month, today.day):
                year -= 1
        if month is None:
            start, end = datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
        elif day is None:
            start = datetime(year, month, 1, tzinfo=UTC)
            end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
        else:
            start = datetime(year, month, day, tzinfo=UTC)
            end = start + timedelta(days=1)
    except ValueError:
        return None  # "31 June": no such day, so no period
    return Period(start.timestamp(), end.timestamp(), " ".join(text.split()))


def _has_month(task: str) -> bool:
    return any(w.lower().rstrip(".") in _MONTHS for w in re.findall(r"[A-Z][a-z]+\.?", task))


def mark_periods(candidates: Sequence[Candidate], periods: Sequence[Period]) -> None:
    """Set `period` on the relevance candidates said in (or just after) a period the task
    names: the best of the periods for each."""
    if not periods:
        return
    for c in candidates:
        if c.record is None or c.section not in RELEVANCE_SECTIONS:
            continue
        t = c.record.created_at
        value = max(p.weight(t) for p in periods)
        if value > 0:
            c.components["period"] = value
