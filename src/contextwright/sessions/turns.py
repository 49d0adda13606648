"""Turns: the units a session is kept, pruned and compacted in.

A turn is one message, or one tool call together with its result. Counting a call with its result
as one unit is what guarantees that no compaction, prune or keep window ever splits a pair (a
provider rejects a `tool` message whose call is missing). This module also decides which turns
must never be summarized away: corrections and pinned instructions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ValidationError
from ..records import Record

ROLES = ("user", "assistant", "tool_call", "tool_result", "note", "instruction", "correction")

# Kinds that make up a session's conversation (the history layer).
SESSION_KINDS = ("message", "tool_call", "tool_result", "summary", "note")

# A correction is marked (tag or meta) or says so in its first words, or anywhere with an explicit
# "correction:" / "no, I meant". Cheap, deterministic and tested; false positives only cost a few
# verbatim tokens, a false negative could lose what the user fixed.
CORRECTION_TAGS = frozenset({"correction", "fix", "amend"})
_CORRECTION_START = re.compile(
    r"^\s*(actually[\s,:]|no[,!.]?\s+(i|we)\s+meant\b|(i|we)\s+meant\b|correction\b|"
    r"scratch that\b|wait,?\s+(no|actually)\b|that'?s\s+(wrong|not right|incorrect)\b|"
    r"not\s+\S+,\s+but\b|to correct\b|i was wrong\b)",
    re.IGNORECASE,
)
_CORRECTION_ANYWHERE = re.compile(
    r"\b(correction:|no,\s+i\s+meant\b|i\s+meant\s+to\s+say\b|please\s+correct\b)", re.IGNORECASE
)
INSTRUCTION_TAGS = frozenset({"instruction", "pinned", "rule"})


def is_correction(record: Record) -> bool:
    """True for a message that corrects something said earlier (see module docstring)."""
    if record.kind not in ("message", "note"):
        return False
    if CORRECTION_TAGS.intersection(record.tags) or record.meta.get("correction") is True:
        return True
    text = record.content
    return bool(_CORRECTION_START.match(text) or _CORRECTION_ANYWHERE.search(text))


def is_instruction(record: Record) -> bool:
    """A pinned instruction: pinned, a standing constraint, or tagged as an instruction."""
    return (
        record.pinned
        or record.kind == "constraint"
        or bool(INSTRUCTION_TAGS.intersection(record.tags))
    )


@dataclass(frozen=True)
class Turn:
    """One unit: a message, a summary, or a tool call with its result (`result` may be pending)."""

    records: tuple[Record, ...]

    @property
    def head(self) -> Record:
        return self.records[0]

    @property
    def key(self) -> str:
        return self.head.id

    @property
    def ids(self) -> list[str]:
        return [r.id for r in self.records]

    @property
    def created_at(self) -> float:
        return max(r.created_at for r in self.records)

    @property
    def is_tool(self) -> bool:
        return self.head.kind == "tool_call"

    @property
    def call(self) -> Record | None:
        return self.head if self.is_tool else None

    @property
    def result(self) -> Record | None:
        return self.records[1] if self.is_tool and len(self.records) > 1 else None

    @property
    def pending(self) -> bool:
        """A tool call whose result has not arrived: never compacted, or the pair would split."""
        return self.is_tool and self.result is None

    @property
    def is_summary(self) -> bool:
        return self.head.kind == "summary"

    @property
    def protected(self) -> bool:
        """Corrections and pinned instructions stay verbatim; pending calls stay whole."""
        return self.pending or any(is_correction(r) or is_instruction(r) for r in self.records)

    @property
    def tokens(self) -> int:
        return sum(r.tokens for r in self.records)


def build_turns(records: Iterable[Record]) -> list[Turn]:
    """Group records (any order) into turns, oldest first. A result joins its call; a result whose
    call is not among `records` stands alone as a message-like unit (it is never split further)."""
    ordered = sorted(records, key=lambda r: (r.created_at, r.id))
    results: dict[str, Record] = {}
    for r in ordered:
        if r.kind == "tool_result" and r.reply_to:
            results.setdefault(r.reply_to, r)
    call_ids = {r.id for r in ordered if r.kind == "tool_call"}
    turns: list[Turn] = []
    for r in ordered:
        if r.kind == "tool_result" and r.reply_to in call_ids:
            continue  # joined to its call
        if r.kind == "tool_call":
            result = results.get(r.id)
            turns.append(Turn((r, result) if result is not None else (r,)))
        else:
            turns.append(Turn((r,)))
    return turns


def split_keep(turns: Sequence[Turn], keep: int) -> tuple[list[Turn], list[Turn]]:
    """(older, kept): the last `keep` conversational turns are kept; summaries are never counted
    as turns and always fall in `older` (a new summary replaces them)."""
    convo = [t for t in turns if not t.is_summary]
    kept = convo[-keep:] if keep > 0 else []
    kept_keys = {t.key for t in kept}
    older = [t for t in turns if t.key not in kept_keys]
    return older, kept


def turn_text(turn: Turn, agent: str, one_line: str | None = None) -> str:
    """The text a summarizer sees for one turn: who said it, and what (a tool pair as one line)."""
    head = turn.head
    if turn.is_tool:
        return one_line or head.content
    if head.kind == "summary":
        return head.content
    who = "assistant" if head.author == agent else head.author
    return f"{who}: {head.content}"


def call_text(tool: str, arguments: Mapping[str, Any] | str | None) -> str:
    """`search({"q": "auth"})`: the text of a tool call given only as tool= and arguments=."""
    if arguments is None:
        return f"{tool}()"
    if isinstance(arguments, str):
        return f"{tool}({arguments})"
    # default=str: a value JSON cannot hold is refused by the meta check, with its field.
    return f"{tool}({json.dumps(arguments, ensure_ascii=False, sort_keys=True, default=str)})"


def check_turn(role: object, tool: object, arguments: object, reply_to: object) -> None:
    """A turn's role, and no field its role does not keep: `reply_to` belongs to a tool_result,
    `tool` and `arguments` to a tool_call; on another turn they would be dropped unsaid."""
    if role not in ROLES:
        raise ValidationError("role", role, f"use one of {', '.join(ROLES)}")
    if reply_to is not None and role != "tool_result":
        raise ValidationError(
            "reply_to",
            reply_to,
            f"give reply_to only with role tool_result (this turn is {role}), or leave it out",
            problem=f"is not kept on a {role} turn",
        )
    for name, value in (("tool", tool), ("arguments", arguments)):
        if value is not None and role != "tool_call":
            raise ValidationError(
                name,
                value,
                f"give {name} only with role tool_call (this turn is {role}), or leave it out",
                problem=f"is not kept on a {role} turn",
            )
