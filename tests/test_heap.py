"""The servers' cyclic GC (heap.py): start-up's objects frozen, and a young generation large
enough that an assemble call's own objects are freed before a collection comes."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextwright import Engine
from contextwright.heap import THRESHOLDS, settle_heap


@pytest.fixture
def settled() -> Iterator[None]:
    thresholds = gc.get_threshold()
    try:
        settle_heap()
        yield
    finally:
        gc.unfreeze()  # this test process goes on as before
        gc.set_threshold(*thresholds)


def test_settle_heap_freezes_start_up_and_sizes_the_young_generation(settled: None) -> None:
    assert gc.get_freeze_count() > 0  # left out of every later collection
    assert gc.get_threshold() == THRESHOLDS


def test_a_warm_assemble_call_runs_no_collection(tmp_path: Path, settled: None) -> None:
    """At CPython's default (700) a young collection came inside nearly every call, walking the
    call's live objects; once the call's caches are warm, a settled process runs none."""
    engine = Engine.open(f"sqlite:///{tmp_path / 'h.db'}", embedder=None)
    try:
        for i in range(400):
            engine.add(project="p", author=f"agent{i % 4}", content=f"note {i} on the parser")
        for _ in range(3):  # the caches filled, the first calls' garbage collected
            engine.assemble(project="p", agent="agent0", task="fix the parser", budget=8000)
        gc.collect()
        collections: list[int] = []

        def seen(phase: str, info: dict[str, Any]) -> None:
            if phase == "start":
                collections.append(info["generation"])

        gc.callbacks.append(seen)
        try:
            for _ in range(5):
                engine.assemble(project="p", agent="agent0", task="fix the parser", budget=8000)
        finally:
            gc.callbacks.remove(seen)
        assert collections == []
    finally:
        engine.close()
