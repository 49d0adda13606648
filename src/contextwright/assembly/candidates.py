"""What flows through the assemble pipeline: candidates from sources, and the items packed from them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..budget import SECTIONS as SECTIONS  # the section names, re-exported for the pipeline
from ..ports import Tokenizer
from ..records import Record

SECTION_RANK = {name: i for i, name in enumerate(SECTIONS)}


@dataclass(slots=True)
class Candidate:
    """One thing a source proposes for the window: a record (or a tool call with its result), or a
    synthetic item (the task, a warning, a KV value) with `key` as its identity."""

    key: str
    section: str
    source: str
    text: str
    records: tuple[Record, ...] = ()
    score: float = 0.0
    components: dict[str, float] = field(default_factory=dict)
    # Tuples, not lists: a candidate's reasons and sources are set, rarely extended, never edited
    # in place, and a tuple of strings is one object the collector stops tracking (see `one`).
    reasons: tuple[str, ...] = ()
    pinned: bool = False
    tokens: int = 0
    created_at: float = 0.0
    content_hash: str = ""
    sources: tuple[str, ...] = ()
    # The record this one is shown beside (a superseded decision beside its replacement).
    beside: str | None = None
    # The text is one record's dated line (`item_prefix`): knowledge and suggestions may show it
    # without its date, under its day's line (render.DATED_SECTIONS). False for a folded chain or
    # a synthetic item, which keep their text as it is.
    dated_line: bool = False
    # Found past the fixed depth of a list that grows with the budget (sources.budget_depth): it
    # is read only where the other candidates leave the window room (selection.deep_room).
    deep: bool = False

    @property
    def record(self) -> Record | None:
        return self.records[0] if self.records else None

    @property
    def record_ids(self) -> list[str]:
        return [r.id for r in self.records]


_ONE: dict[str, tuple[str]] = {}


def one(text: str) -> tuple[str]:
    """`(text,)`, the same tuple for the same text: a source gives each of its ~180 candidates a
    call the same reason and source name, and a tuple made per candidate is one more object for
    the cyclic GC to count toward its next collection. Bounded: reasons may name authors."""
    t = _ONE.get(text)
    if t is None:
        if len(_ONE) >= 4096:
            _ONE.clear()
        t = _ONE[text] = (text,)
    return t


# Candidates as the source cache keeps them (cache.py), column by column: a tuple per field, the
# records of all candidates in one flat tuple, and components, reasons and sources as tuples of
# plain values. Every entry outlives many calls, so what it holds is walked by each full garbage
# collection: this way an entry is about three objects that the collector tracks, not four per
# candidate. Every missed full-text read freezes its candidates.
Frozen = tuple[tuple[Any, ...], ...]


def freeze(found: Sequence[Candidate]) -> Frozen:
    return (
        tuple([c.key for c in found]),
        tuple([c.section for c in found]),
        tuple([c.source for c in found]),
        tuple([c.text for c in found]),
        tuple([len(c.records) for c in found]),
        tuple([r for c in found for r in c.records]),
        tuple([c.score for c in found]),
        tuple([tuple(c.components.items()) for c in found]),
        tuple([c.reasons for c in found]),
        tuple([c.pinned for c in found]),
        tuple([c.tokens for c in found]),
        tuple([c.created_at for c in found]),
        tuple([c.content_hash for c in found]),
        tuple([c.sources for c in found]),
        tuple([c.beside for c in found]),
        tuple([c.dated_line for c in found]),
        tuple([c.deep for c in found]),
    )


def thaw(f: Frozen) -> list[Candidate]:
    """Candidates of their own (scoring writes into them) from frozen ones."""
    keys, sections, srcs, texts, counts, records, scores, comps, reasons = f[:9]
    pinned, tokens, created, hashes, sources, beside, dated_line, deep = f[9:]
    out: list[Candidate] = []
    at = 0
    for i, n in enumerate(counts):
        # By position, in the order of Candidate's fields: half the time of keywords (80
        # candidates in 40 us, not 88), and a copy is made on every cached read.
        c = Candidate(
            keys[i],
            sections[i],
            srcs[i],
            texts[i],
            records[at : at + n],
            scores[i],
            dict(comps[i]),
            reasons[i],
            pinned[i],
            tokens[i],
            created[i],
            hashes[i],
            sources[i],
            beside[i],
            dated_line[i],
            deep[i],
        )
        out.append(c)
        at += n
    return out


@dataclass(slots=True)
class Item:
    """A candidate that made it into the window, possibly truncated."""

    candidate: Candidate
    text: str
    tokens: int
    truncated: bool = False
    omitted: int = 0
    # The day this item is shown under (render.DATED_SECTIONS), or None.
    day: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """`to_json` with lists where it hands the candidate's tuples on."""
        d = self.to_json()
        for key in ("sources", "record_ids", "reasons"):
            d[key] = list(d[key])
        return d

    def to_json(self) -> dict[str, Any]:
        """`to_dict`'s values, ready for a JSON encoder, built for the HTTP answer of every
        assemble (~110 items, ~1 ms as `to_dict`, holding the GIL): the candidate's tuples go as
        they are (a tuple encodes as the list would), the record is looked up once, and a
        component's round is skipped for the whole numbers most components are (the same
        value). The encoded JSON is byte for byte `to_dict`'s (tests/test_assembly_json.py)."""
        c = self.candidate
        recs = c.records
        comps = c.components
        r = recs[0] if recs else None
        return {
            "key": c.key,
            "section": c.section,
            "source": c.source,
            "sources": c.sources or (c.source,),
            "record_ids": (recs[0].id,) if len(recs) == 1 else tuple([x.id for x in recs]),
            "kind": "synthetic" if r is None else r.kind,
            "author": None if r is None else r.author,
            "text": self.text,
            "tokens": self.tokens,
            "score": round(c.score, 4),
            "components": rounded_components(comps) if comps else {},
            "reasons": c.reasons,
            "truncated": self.truncated,
            "omitted_tokens": self.omitted,
            "day": self.day,
        }


def round4(v: float) -> float:
    """`round(v, 4)`, the same value of the same type: a component as the HTTP answer and the
    trace show it. round goes through a decimal string (~0.2 us); a whole float (a prior of
    2.0, a role of 1.0) is its own rounding, and the others repeat (a history turn's rank, a
    length's `substance`, a role's weight): each is rounded once and looked up after (`_ROUNDED`,
    bounded). ~850 components a call between the answer's items and the trace's."""
    if type(v) is not float:
        return round(v, 4)
    hit = _ROUNDED.get(v)
    if hit is None:
        if v.is_integer():
            return v  # its own rounding; and -0.0, equal to 0.0 as a key, stays as it is
        if len(_ROUNDED) >= 16_384:
            _ROUNDED.clear()
        hit = _ROUNDED[v] = round(v, 4)
    return hit


# Non-whole floats and their 4-digit rounding (round4). Only non-whole floats go in: a key equal
# to another of another type or sign (1 and 1.0, 0.0 and -0.0) is whole, and never looked up.
_ROUNDED: dict[float, float] = {}


def rounded_components(
    comps: dict[str, float], rnd: Callable[[float], float] = round4
) -> dict[str, float]:
    """The components as shown (trace, HTTP answer): by name, each rounded (`rnd`: `round4`, or
    a stored trace's, which also reads null). The names' order is sorted once per set of names
    (a source gives all its candidates the same)."""
    names = tuple(comps)
    order = _ORDER.get(names)
    if order is None:
        if len(_ORDER) >= 4096:
            _ORDER.clear()
        order = _ORDER[names] = tuple(sorted(names))
    return {k: rnd(comps[k]) for k in order}


_ORDER: dict[tuple[str, ...], tuple[str, ...]] = {}


def synthetic(
    counter: Tokenizer, task: str, warnings: Sequence[str], working: Sequence[str]
) -> list[Candidate]:
    """The items no source returns: the task itself (state), warnings, and the per-turn scratchpad."""
    out = []
    if task.strip():
        text = f"- Task: {task.strip()}"
        out.append(
            Candidate(
                key="task",
                section="state",
                source="request",
                text=text,
                tokens=counter.count(text),
                pinned=True,
                reasons=("the current task",),
                components={"source": 10.0},
                score=10.0,
            )
        )
    for i, w in enumerate(warnings):
        text = f"- ⚠ {w}"
        out.append(
            Candidate(
                key=f"warning:{i}",
                section="warnings",
                source="validate",
                text=text,
                tokens=counter.count(text),
                pinned=True,
                reasons=("validation",),
                components={"source": 5.0},
                score=5.0 - i * 0.01,
            )
        )
    for i, w in enumerate(working):
        text = f"- {w}"
        out.append(
            Candidate(
                key=f"working:{i}",
                section="working_memory",
                source="request",
                text=text,
                tokens=counter.count(text),
                reasons=("per-turn scratchpad",),
                score=1.0 - i * 0.001,
            )
        )
    return out
