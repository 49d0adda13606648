"""Test doubles shipped with the library, for the I/O seams that users inject: a scripted source
that returns fixed candidates, one that is slow, one that fails, a scripted summarizer and one that is down, and a tokenizer
that counts words. The sources are real Sources (the engine runs them on its thread pool under
its deadline), only with scripted behaviour.

    engine = Engine(store, sources=[*default_sources(), SlowSource("slow", delay_s=2.0)])
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

from .assembly.candidates import Candidate
from .assembly.sources import SourceContext
from .embedders.hashing import HashEmbedder as HashEmbedder  # deterministic, no model
from .records import content_hash


class ScriptedSource:
    """Returns the same synthetic items on every run: each text becomes a candidate in
    `section`. Counts its runs (thread-safe), so tests can tell a cache hit from a miss."""

    def __init__(
        self,
        name: str,
        texts: Sequence[str] = (),
        *,
        section: str = "knowledge",
        cacheable: bool = False,
    ) -> None:
        self.name = name
        self.texts = list(texts)
        self.section = section
        self.cacheable = cacheable
        self.runs = 0
        self._lock = threading.Lock()

    def run(self, ctx: SourceContext) -> list[Candidate]:
        with self._lock:
            self.runs += 1
        out = []
        for i, text in enumerate(self.texts):
            line = f"- {text}"
            out.append(
                Candidate(
                    key=f"{self.name}:{i}",
                    section=self.section,
                    source=self.name,
                    text=line,
                    tokens=ctx.counter.count(line),
                    components={"prior": 1.0 - i * 0.01},
                    reasons=(f"scripted by {self.name}",),
                    content_hash=content_hash(text),
                    sources=(self.name,),
                )
            )
        return out


class SlowSource(ScriptedSource):
    """Waits `delay_s` before answering, to trip the engine's deadline. `release()` ends the
    wait early so a test does not leave a thread sleeping behind it."""

    def __init__(self, name: str, texts: Sequence[str] = (), *, delay_s: float = 5.0) -> None:
        super().__init__(name, texts)
        self.delay_s = delay_s
        self._done = threading.Event()

    def run(self, ctx: SourceContext) -> list[Candidate]:
        self._done.wait(self.delay_s)
        return super().run(ctx)

    def release(self) -> None:
        self._done.set()


class FailingSource:
    """Raises `error` on every run, as a broken retrieval pipeline would."""

    def __init__(self, name: str, error: Exception | None = None) -> None:
        self.name = name
        self.error = error or RuntimeError(f"{name} is broken")
        self.runs = 0

    def run(self, ctx: SourceContext) -> list[Candidate]:
        self.runs += 1
        raise self.error


class ScriptedSummarizer:
    """A Summarizer that returns scripted replies in order (the last one repeats), and records
    every request it received: what to summarize, the token bound and the instructions. With no
    replies it returns one bullet per input text, so a test can see exactly what was summarized.
    """

    name = "scripted"

    def __init__(self, replies: Sequence[str] = ()) -> None:
        self.replies = list(replies)
        self.calls: list[dict[str, object]] = []
        self._lock = threading.Lock()

    def summarize(self, texts: Sequence[str], *, max_tokens: int, instructions: str = "") -> str:
        with self._lock:
            self.calls.append(
                {"texts": list(texts), "max_tokens": max_tokens, "instructions": instructions}
            )
            n = len(self.calls)
        if not self.replies:
            return "\n".join(f"- {t.splitlines()[0][:80]}" for t in texts if t.strip())
        return self.replies[min(n, len(self.replies)) - 1]


class FailingSummarizer:
    """A Summarizer that is down: every call raises `error` (a ConnectionError by default), and
    is counted in `calls`."""

    name = "failing"

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error or ConnectionError("the summarizer is down")
        self.calls = 0

    def summarize(self, texts: Sequence[str], *, max_tokens: int, instructions: str = "") -> str:
        self.calls += 1
        raise self.error


class WordTokenizer:
    """A Tokenizer that counts whitespace-separated words: another tokenizer than the default,
    for tests of stores whose records were counted by one tokenizer and read by another. Its
    ids are the words' numbers in the order it first saw them."""

    name = "words"

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._words: list[str] = []

    def count(self, text: str) -> int:
        return len(text.split())

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [self.count(t) for t in texts]

    def encode(self, text: str) -> list[int]:
        out = []
        for word in text.split():
            if word not in self._ids:
                self._ids[word] = len(self._words)
                self._words.append(word)
            out.append(self._ids[word])
        return out

    def decode(self, ids: Iterable[int]) -> str:
        return " ".join(self._words[i] for i in ids)
