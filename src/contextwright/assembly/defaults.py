"""The default sources of an engine, in one list (the Engine adds its features' sources to it):
the store steps of the packaged pipeline definitions (default_pipelines.json, retrieval.py)."""

from __future__ import annotations

from .definitions import default_pipelines
from .retrieval import build_sources, store_providers
from .sources import Source


def default_sources() -> list[Source]:
    return build_sources(default_pipelines(), store_providers())
