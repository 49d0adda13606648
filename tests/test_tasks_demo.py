"""The computed-context demo act runs offline and shows what the later task receives."""

from __future__ import annotations

import pytest

from contextwright import Engine
from contextwright.demo.tasks_act import TASKS, run


def test_demo_act_prints_the_computed_context(capsys: pytest.CaptureFixture[str]) -> None:
    with Engine.open("memory://") as engine:
        run(engine, None)
        tasks = engine.tasks.find("notes-app")
    out = capsys.readouterr().out
    assert len(TASKS) >= 10 and len(tasks) == len(TASKS)
    assert sum(t.status == "completed" for t in tasks) == 10
    assert "## Context (Computed)" in out and "## Context Debug" in out
    assert "PATCH must ignore owner_id" in out  # a high gotcha of a completed dependency
    assert "not completed (status open)" in out  # the open dependency is skipped
    assert "Packed into an assembly" in out
