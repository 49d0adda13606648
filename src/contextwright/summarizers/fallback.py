"""A summary that says which summarizer wrote it. A summary is a convenience, never a reason to
fail a session: when the configured summarizer fails (raises, or is the model-backed one that fell
back on its own: `summarize_noted`), the extractive one writes it instead, and a sentence saying
so is kept for whoever asked (`noting`): the session window puts it in its warnings and trace."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from ..errors import MissingExtra
from ..ports import Summarizer, Tokenizer
from .extractive import ExtractiveSummarizer
from .openai_compatible import SummarizerFallback

# The sentences of the summaries written since `noting` began, in this context (thread, task).
_NOTES: ContextVar[list[str] | None] = ContextVar("summarizer_fallbacks", default=None)


def summarize(
    summarizer: Summarizer,
    texts: Sequence[str],
    *,
    max_tokens: int,
    instructions: str = "",
    counter: Tokenizer | None = None,
) -> tuple[str, str]:
    """`summarizer`'s summary, or the extractive one's where it failed, and the name of the one
    that wrote it. The sentence saying so goes to `noting`'s collector where one is open (a
    session window: its warnings and trace, which the agent reads, so it names the summarizer
    and the kind of failure, never an address, a key or a provider's answer), else to Python's
    warnings as before (a manual compact or reset). A summarizer that is not installed or not
    (MissingExtra) is an error to fix, not a fallback; its own ValidationError falls back like any
    other (it may carry the provider's words)."""
    noted = getattr(summarizer, "summarize_noted", None)
    why: str | None = None
    by = summarizer.name
    try:
        if noted is not None:  # the model-backed one: its own fallback wrote it where it failed
            text, why = noted(texts, max_tokens=max_tokens, instructions=instructions)
            fallback = getattr(summarizer, "fallback", None)
            by = summarizer.name if why is None or fallback is None else fallback.name
        else:
            text = summarizer.summarize(texts, max_tokens=max_tokens, instructions=instructions)
    except MissingExtra:
        raise
    except Exception as exc:  # any summarizer a user plugs in: the session goes on
        why = (
            f"summarizer {summarizer.name!r} failed ({type(exc).__name__}); used the "
            "extractive summarizer instead"
        )
        extractive = ExtractiveSummarizer(counter)
        text = extractive.summarize(texts, max_tokens=max_tokens, instructions=instructions)
        by = extractive.name
    if why is None:
        return text, by
    notes = _NOTES.get()
    if notes is None:
        warnings.warn(why, SummarizerFallback, stacklevel=2)
    elif why not in notes:
        notes.append(why)
    return text, by


@contextmanager
def noting() -> Iterator[list[str]]:
    """The fallbacks of the summaries written inside the block, each said once."""
    notes: list[str] = []
    token = _NOTES.set(notes)
    try:
        yield notes
    finally:
        _NOTES.reset(token)
