"""The default summarizer: extractive and deterministic, so the same history gives the same summary.

It never calls a model. It splits the turns into sentences, scores each by what a later turn will
need (corrections, decisions, preferences, artifacts and file paths, numbers), keeps the best that
fit in the token bound, and returns them as bullets in their original order. A previous summary's
bullets are carried forward with a bonus, so a chain of compactions keeps what mattered early on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..ports import Tokenizer
from ..tokens.counter import default_counter

SUMMARY_HEADING = "## Session Summary (compacted)"
MAX_BULLET_WORDS = 40

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(\[])|\n+")
_CUES: tuple[tuple[float, re.Pattern[str]], ...] = (
    (
        5.0,
        re.compile(
            r"^(\w+:\s+)?(actually\b|no,?\s+i meant\b|correction\b|scratch that\b)|"
            r"\b(correction:|i meant\b)",
            re.I,
        ),
    ),
    (
        4.0,
        re.compile(
            r"\b(decided|decision|chose|choose|going with|go with|settled on|agreed|approved|"
            r"we('ll| will) use|let'?s use|switch(ed)? to|instead of)\b",
            re.I,
        ),
    ),
    (
        3.0,
        re.compile(
            r"\b(prefer|prefers|preference|always|never|please|don'?t|do not|must|should not|"
            r"no emojis|i like|i want)\b",
            re.I,
        ),
    ),
    (
        3.0,
        re.compile(
            r"(`[^`]+`|\b[\w.\-]+/[\w.\-/]+\.\w{1,8}\b|\b[\w\-]+\.(py|ts|tsx|js|md|json|ya?ml|"
            r"toml|html|css|go|rs|sql)\b|\b(created|wrote|added|updated|saved|deployed|renamed|"
            r"deleted|fixed|merged)\b)",
            re.I,
        ),
    ),
    (2.0, re.compile(r"\b(passed|failed|error)\b", re.I)),
    # Reads are how work was done, rarely what a later turn needs: below messages and writes.
    (-2.0, re.compile(r"^\[tool: (read|list|search|get|ls|cat|grep|find|open|view)", re.I)),
    (1.0, re.compile(r"\d")),
    (0.5, re.compile(r"\?\s*$")),
)
_TRIVIAL = re.compile(
    r"^(\w+:\s+)?(ok(ay)?|thanks?( you)?|great|sure|yes|no|got it|done|cool|nice)[.!]*$", re.I
)


@dataclass(frozen=True)
class _Candidate:
    index: int
    text: str
    score: float


def sentences(text: str) -> list[str]:
    """Sentence-ish pieces of one turn; a speaker prefix ("user: ") stays on the first one."""
    return [p.strip() for p in _SENTENCE.split(text) if p and p.strip()]


def score_sentence(text: str) -> float:
    if _TRIVIAL.match(text.strip()):
        return -3.0
    return sum(weight for weight, cue in _CUES if cue.search(text))


def _shorten(text: str) -> str:
    text = " ".join(text.split())
    words = text.split(" ")
    if len(words) <= MAX_BULLET_WORDS:
        return text
    return " ".join(words[:MAX_BULLET_WORDS]) + " …"


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


class ExtractiveSummarizer:
    """Keeps decisions, preferences, artifacts, file paths, numbers and corrections, in bounds."""

    name = "extractive"

    def __init__(self, counter: Tokenizer | None = None) -> None:
        self.counter = counter or default_counter()

    def summarize(self, texts: Sequence[str], *, max_tokens: int, instructions: str = "") -> str:
        candidates: list[_Candidate] = []
        seen: set[str] = set()
        index = 0
        for text in texts:
            carried = text.lstrip().startswith("## ")
            pieces = (
                [ln[2:].strip() for ln in text.splitlines() if ln.startswith("- ")]
                if carried
                else sentences(text)
            )
            for piece in pieces:
                shown = _shorten(piece)
                key = _norm(shown)
                if not key or key in seen:
                    continue
                seen.add(key)
                score = score_sentence(shown) + (2.0 if carried else 0.0)
                if score < 0:
                    continue  # "ok", "thanks": nothing a later turn needs
                candidates.append(_Candidate(index, shown, score))
                index += 1
        if not candidates or max_tokens <= 0:
            return ""
        chosen: list[_Candidate] = []
        used = 0
        for c in sorted(candidates, key=lambda c: (-c.score, c.index)):
            cost = self.counter.count(f"- {c.text}\n")
            if used + cost > max_tokens:
                continue
            chosen.append(c)
            used += cost
        chosen.sort(key=lambda c: c.index)
        out = "".join(f"- {c.text}\n" for c in chosen).rstrip("\n")
        while chosen and self.counter.count(out) > max_tokens:
            chosen.remove(min(chosen, key=lambda c: (c.score, -c.index)))
            out = "".join(f"- {c.text}\n" for c in chosen).rstrip("\n")
        return out
