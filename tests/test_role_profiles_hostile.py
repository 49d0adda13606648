"""A role profile's scalar fields over HTTP (PUT .../agents/{agent}) with the numbers JSON bodies
can carry (Python's reader takes NaN and Infinity; 1e400 is infinity): default_window as NaN,
Infinity or 1e400 failed int() (a 500); NaN, infinity or -1 as default_kind_weight, a -1 window
and "nan" as default_model were stored, and failed or misscored only when a window was built.
Each is now a 422 naming the field, and nothing is stored."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from contextwright import Engine, ValidationError
from contextwright.server import create_app
from contextwright.settings import Settings
from servers import auth, running

KEY = "acme-key-0000000"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Engine]]:
    engine = Engine.open(f"sqlite:///{tmp_path_factory.mktemp('r') / 'r.db'}")
    app = create_app(engine, Settings(api_keys={KEY: ["acme"]}))
    headers = {**auth(KEY), "content-type": "application/json"}
    with running(app) as base, httpx.Client(base_url=base, headers=headers) as client:
        yield client, engine
    engine.close()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("default_window", "NaN"),
        ("default_window", "Infinity"),
        ("default_window", "1e400"),
        ("default_window", "-1"),
        ("default_window", "0"),
        ("default_window", "10000000"),
        ("default_window", "true"),
        ("default_kind_weight", "NaN"),
        ("default_kind_weight", "-Infinity"),
        ("default_kind_weight", "-1"),
        ("default_kind_weight", "11"),
        ("default_model", "NaN"),
        ("default_model", '"nope"'),
        ("default_model", "5"),
    ],
)
def test_a_profile_number_out_of_range_is_a_422_and_nothing_is_stored(
    served: tuple[httpx.Client, Engine], field: str, value: str
) -> None:
    client, engine = served
    body = '{"profile": {"name": "r", "kind_weights": {"task": 1}, "' + field + '": ' + value + "}}"
    r = client.put("/v1/projects/acme/agents/Grace%20Hopper", content=body)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == f"profile.{field}"
    assert [a.id for a in engine.agents("acme")] == []


def test_a_profile_in_range_is_stored_and_used(served: tuple[httpx.Client, Engine]) -> None:
    client, _ = served
    body = (
        '{"profile": {"name": "r", "kind_weights": {"task": 1}, "default_kind_weight": 0.2,'
        ' "default_model": "gpt-4", "default_window": 4000}}'
    )
    r = client.put("/v1/projects/acme/agents/Ada%20Lovelace", content=body)
    assert r.status_code == 200, r.text
    window = client.post("/v1/projects/acme/assemble", json={"agent": "Ada Lovelace", "task": "x"})
    assert window.status_code == 200 and window.json()["breakdown"]["window"] == 4000


def test_a_stored_profile_naming_a_model_of_another_process_still_reads(tmp_path: Path) -> None:
    """register_model is per process: a profile stored by a process that registered its model
    is read back by one that did not. Reading it failed engine.agents(project) and every
    engine.agent() of the project; the model is checked when the profile is written."""
    engine = Engine.open(f"sqlite:///{tmp_path / 'p.db'}")
    doc = {
        "id": "bob",
        "role": "custom",
        "profile": {"name": "custom", "default_model": "my-model-8b", "default_window": 12000},
    }
    engine.store.put_doc("agents", "acme/bob", "acme", doc, 1.0, key="bob")
    engine.register_agent("acme", "carol")
    assert [a.id for a in engine.agents("acme")] == ["bob", "carol"]
    assert engine.agent("acme", "bob").profile.default_model == "my-model-8b"
    assert engine.agent("acme", "carol").role == "default"
    with pytest.raises(ValidationError) as err:
        engine.register_agent("acme", "dave", "custom", doc["profile"])
    assert err.value.field == "profile.default_model"
    assert [a.id for a in engine.agents("acme")] == ["bob", "carol"]
    engine.close()
