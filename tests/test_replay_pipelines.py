"""Replay with other pipelines, the spec's troubleshooting loop ("add a filter step", switch a
default off, then replay): a stored request names every source that ran, so a pipeline added in
the replay did not run, and one switched off was refused as `sources='decisions' is not valid`,
a field the caller never sent. Found by replaying each pipeline change over HTTP."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from contextwright import Engine
from contextwright.server import create_app
from contextwright.settings import Settings
from servers import auth, running

MINE = {"name": "mine", "steps": [{"step": "fulltext", "topK": 3}]}
OFF = {"name": "decisions", "enabled": False, "steps": [{"step": "decisions"}]}


def ran(summary: str) -> list[str]:
    """The source names a trace summary lists ("...; sources: history 0.1ms/0, ...")."""
    return [part.split()[0] for part in summary.split("sources: ", 1)[1].split(", ")]


def original(engine: Engine) -> str:
    engine.add(project="acme", author="bob", kind="decision", content="use jwt for the login")
    return engine.assemble("acme", "bob", "login", 2000).trace.id


def test_a_replay_runs_the_pipelines_it_adds_and_not_those_it_switches_off(
    engine: Engine,
) -> None:
    trace = original(engine)
    added = engine.replay("acme", trace, "bob", pipelines=[MINE])
    assert "mine" in ran(added.trace.summary())
    assert "mine" in ran(
        engine.assemble("acme", "bob", "login", 2000, pipelines=[MINE]).trace.summary()
    )
    off = engine.replay("acme", trace, "bob", pipelines=[OFF])
    assert "decisions" not in ran(off.trace.summary()) and "fulltext" in ran(off.trace.summary())
    # Sources the replay names itself are the ones that run.
    named = engine.replay("acme", trace, "bob", pipelines=[MINE], sources=["history"])
    assert ran(named.trace.summary()) == ["history"]


def test_a_replay_with_other_pipelines_drops_those_of_the_old_call(engine: Engine) -> None:
    """A call made with pipelines=[p1] replayed with pipelines=[p2] failed with
    `sources='p1' is not valid`; a packaged pipeline the old call redefined still runs."""
    engine.add(project="acme", author="bob", kind="decision", content="use jwt for the login")
    fulltext = {"name": "fulltext", "steps": [{"step": "fulltext", "topK": 2}]}
    trace = engine.assemble("acme", "bob", "login", 2000, pipelines=[MINE, fulltext]).trace.id
    other = {"name": "other", "steps": [{"step": "fulltext", "topK": 2}]}
    names = ran(engine.replay("acme", trace, "bob", pipelines=[other]).trace.summary())
    assert "other" in names and "mine" not in names and "fulltext" in names
    kept = ran(engine.replay("acme", trace, "bob", pipelines=[MINE]).trace.summary())
    assert "mine" in kept and "fulltext" in kept


@pytest.mark.parametrize(
    ("pipelines", "present", "absent"),
    [([MINE], "mine", None), ([OFF], "fulltext", "decisions"), ([MINE, OFF], "mine", "decisions")],
    ids=["added", "switched off", "both"],
)
def test_http_replay_with_changed_pipelines(
    tmp_path: Any, pipelines: list[dict[str, Any]], present: str, absent: str | None
) -> None:
    key = "acme-key-0000000"
    with Engine.open(f"sqlite:///{tmp_path / 'r.db'}") as engine:
        trace = original(engine)
        engine.flush()
        app = create_app(engine, Settings(api_keys={key: ["acme"]}))
        with running(app) as base, httpx.Client(base_url=base, headers=auth(key)) as client:
            r = client.post(
                f"/v1/projects/acme/traces/{trace}/replay", json={"pipelines": pipelines}
            )
            assert r.status_code == 200, r.text
            names = [s["name"] for s in r.json()["trace"]["sources"]]
            assert present in names and (absent is None or absent not in names)
