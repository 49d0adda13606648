"""Evaluations that measure the engine on public data (see docs/recall.md)."""

from __future__ import annotations

from typing import Any

METHODS = ("contextwright", "recency", "bm25")


def run_recall(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """See contextwright.evals.recall.run_recall (imported on first use)."""
    from .recall import run_recall as run

    return run(*args, **kwargs)


__all__ = ["METHODS", "run_recall"]
