"""A filter by a kind or status that no record can have (a typo: "decisons", "opne") answered an
empty list, which reads as "there are none"; it is a ValidationError naming the filter and the
values it takes, in the library, over HTTP (records and tasks) and in the CLI's task list."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from contextwright import Engine, ValidationError
from contextwright.server import create_app
from contextwright.settings import Settings
from servers import auth, running

KEY = "acme-key-0000000"


def test_a_kind_or_status_no_record_can_have_is_refused(engine: Engine) -> None:
    engine.add(project="acme", author="Ada Lovelace", kind="decision", content="use jwt")
    for filters, field, listed in (
        ({"kinds": ["decision", "decisons"]}, "kinds[1]", "decision"),
        ({"kinds": "decisons"}, "kinds[0]", "decision"),
        ({"statuses": ["opne"]}, "statuses[0]", "open"),
    ):
        with pytest.raises(ValidationError) as err:
            engine.records("acme", agent="Ada Lovelace", **filters)
        assert err.value.field == field and listed in err.value.fix
    with pytest.raises(ValidationError) as err:
        engine.tasks.find("acme", "opne")
    assert err.value.field == "status" and "open" in err.value.fix
    assert [r.kind for r in engine.records("acme", agent="Ada Lovelace", kinds=["decision"])] == [
        "decision"
    ]


def test_a_filter_that_is_not_a_list_of_names_is_refused_by_name(engine: Engine) -> None:
    """kinds=5 or kinds=True was a bare TypeError ('bool' object is not iterable)."""
    engine.add(project="acme", author="bob", kind="decision", content="use jwt")
    for key, value in (("kinds", 5), ("kinds", True), ("statuses", 1.5), ("kinds", [5])):
        with pytest.raises(ValidationError) as err:
            engine.records("acme", **{key: value})
        assert err.value.field in (key, f"{key}[0]")
    assert len(engine.records("acme", kinds={"decision"}, statuses=("active", "open"))) == 1


def test_http_filters_with_typos_are_422(tmp_path: Path) -> None:
    with Engine.open(f"sqlite:///{tmp_path / 'f.db'}") as engine:
        engine.add(project="acme", author="bob", kind="decision", content="use jwt")
        with (
            running(create_app(engine, Settings(api_keys={KEY: ["acme"]}))) as base,
            httpx.Client(base_url=f"{base}/v1/projects/acme", headers=auth(KEY)) as c,
        ):
            for path, field in (
                ("/records?agent=bob&kind=decisons", "kinds[0]"),
                ("/records?agent=bob&status=opne", "statuses[0]"),
                ("/tasks?status=opne", "status"),
            ):
                r = c.get(path)
                assert r.status_code == 422 and r.json()["field"] == field, r.text
            assert c.get("/records?agent=bob&kind=decision").json()["count"] == 1
