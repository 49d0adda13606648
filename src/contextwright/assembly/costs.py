"""What a candidate costs in a rendered window: the packer's prices (packing.py) and the session
window's (sessions/window.py), close to exact and verified after packing against `render`'s own
count of the window."""

from __future__ import annotations

from ..ports import Tokenizer
from ..records import Record
from .candidates import Candidate
from .render import (
    ANTHROPIC_PER_BLOCK,
    ANTHROPIC_PER_MESSAGE,
    INDENT,
    NO_RESULT,
    PER_MESSAGE,
    PER_NAME,
    REPLY_PRIMING,
    TOOL_CALL_OVERHEAD,
    header,
    is_own,
    quoted,
    record_head,
    safe_name,
    section_heading,
    tool_call_id,
    tool_call_parts,
)


def shown_count(counter: Tokenizer, head: str, r: Record, shown: str, stored: bool) -> int:
    """The count of `shown`, the line `head + " " + r.content` as quoted() shows it: from the
    record's stored count where it is `counter`'s (`stored`, stored_counts.py) and the counter
    can take it from there (TokenCounter.count_shown: exact), else counted. A cold call's
    search hits are records no window showed yet; counting each of their lines word by word
    was most of what packing them cost."""
    derive = getattr(counter, "count_shown", None) if stored else None
    n = None if derive is None else derive(shown, head, r.content, r.tokens, INDENT)
    return counter.count(shown) if n is None else int(n)


def unit_cost(c: Candidate, fmt: str, agent: str, counter: Tokenizer, stored: bool = False) -> int:
    """Tokens one candidate adds to the rendered window (close to exact; verified after packing).
    `stored`: the records' stored counts are `counter`'s (`shown_count`)."""
    body = c.tokens
    recs = c.records
    if c.section != "history":
        if len(recs) <= 1:  # a folded chain's tokens are its quoted text's already
            text = c.text
            shown = quoted(text)
            if shown is not text:
                head = record_head(text, recs[0]) if recs else None
                if head is not None:
                    body = shown_count(counter, head, recs[0], shown, stored)
                else:
                    body = counter.count(shown)
        return body + 1  # its line's newline
    call = bool(recs) and recs[0].kind == "tool_call"
    others = fmt == "anthropic" and not call and not (recs and is_own(recs[0], agent))
    if fmt == "markdown" or others:  # the turns that render quotes
        shown = quoted(c.text)
        if shown is not c.text:
            body = counter.count(shown)
    if fmt == "markdown":
        who = recs[0].author if recs else "context"
        extra = 6 + counter.count(who)
        if recs and recs[0].kind == "tool_call":
            name, args = tool_call_parts(recs[0])
            extra += 6 + counter.count(name) + counter.count(args)
        return body + extra
    if recs and recs[0].kind == "tool_call":
        name, args = tool_call_parts(recs[0])
        call_cost = counter.count(name) + counter.count(args)
        if len(recs) == 1:  # rendered with a placeholder result, not its own text
            body = counter.count(NO_RESULT)
        if fmt == "openai":
            return (
                2 * (PER_MESSAGE + 1)  # two messages, each with a one-token role
                + TOOL_CALL_OVERHEAD
                + call_cost
                + counter.count(tool_call_id(recs[0]))
                + body
            )
        return 2 * (ANTHROPIC_PER_MESSAGE + ANTHROPIC_PER_BLOCK) + call_cost + 8 + body
    if fmt == "openai":
        if recs and is_own(recs[0], agent):
            return PER_MESSAGE + 1 + body
        who = safe_name(recs[0].author if recs else "context")
        return PER_MESSAGE + 1 + PER_NAME + counter.count(who) + body
    who = recs[0].author if recs else "context"
    return ANTHROPIC_PER_MESSAGE + ANTHROPIC_PER_BLOCK + counter.count(f"[{who}] ") + body


def fixed_cost(agent: str, fmt: str, counter: Tokenizer) -> int:
    """Tokens the format spends before any item: the header and the message envelope."""
    base = counter.count(header(agent))
    if fmt == "openai":
        return base + REPLY_PRIMING + PER_MESSAGE + 1
    if fmt == "anthropic":
        return base + ANTHROPIC_PER_MESSAGE + ANTHROPIC_PER_BLOCK + 8
    return base


def heading_cost(section: str, counter: Tokenizer) -> int:
    return counter.count(section_heading(section))
