"""The stored form of a trace's items: one JSON array per item (`ITEM_ROWS`), its values in the
order of `ITEM_FIELDS`, raw where the item shows them rounded or filled in; `Trace.from_dict`
turns the rows back into the items every reader sees (`row_item`).

Why not the item dicts themselves: the trace writer builds every call's ~180 items on a thread of
the serving process, under the same GIL as the calls. A dict of 14 keys per item, its components
copied, sorted and rounded (~860 a call), the keys encoded 180 times and written: ~0.7 ms of the
~1.1 ms that a persisted trace cost a call at 100k records. A row is a tuple of what the candidate
already holds (its components dict as it is), encoded by orjson without a copy; the rounding,
the sorting and the lists are done when a trace is read, which is rare.

Traces stored as item dicts (`items`, before 28 Nov 2026, and the ones a session writes again
with its notes) read as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..assembly.candidates import round4, rounded_components

# The key under which a trace document holds its rows instead of `items`.
ITEM_ROWS = "item_rows"
# What each value of a row is: the item's keys, in order.
ITEM_FIELDS = (
    "key",
    "record_ids",  # one record's id as a string, else a list of ids
    "kind",
    "author",
    "section",
    "source",
    "sources",  # [] where the item has [source]
    "score",  # unrounded
    "components",  # unrounded, in no particular order
    "reasons",
    "decision",
    "reason",
    "tokens",
    "preview",
)

_DECISION_AT = ITEM_FIELDS.index("decision")


def row_item(row: Sequence[Any]) -> dict[str, Any]:
    """The item a stored row stands for (`build.decision_dict` is this of a live decision)."""
    key, ids, kind, author, section, source, sources, score, comps, reasons, *rest = row
    decision, reason, tokens, preview = rest
    return {
        "key": key,
        "record_ids": [ids] if isinstance(ids, str) else list(ids),
        "kind": kind,
        "author": author,
        "section": section,
        "source": source,
        "sources": list(sources) or [source],
        "score": _round(score),
        "components": rounded_components(comps, _round),
        "reasons": list(reasons),
        "decision": decision,
        "reason": reason,
        "tokens": tokens,
        "preview": preview,
    }


def row_counts(rows: Sequence[Sequence[Any]]) -> tuple[int, int, int]:
    """How many of the rows' items were kept (truncated ones included), truncated, and dropped:
    `Trace.decision_counts` with no item built (a listing's summaries)."""
    return tally([r[_DECISION_AT] for r in rows])


def tally(decisions: Sequence[str]) -> tuple[int, int, int]:
    """How many of `decisions` kept an item (truncated ones included), truncated, dropped one."""
    dropped = decisions.count("dropped")
    return len(decisions) - dropped, decisions.count("truncated"), dropped


def _round(v: Any) -> Any:
    # A NaN or an infinity is stored as null by orjson (as when rounded): it reads back as null.
    return None if v is None else round4(v)
