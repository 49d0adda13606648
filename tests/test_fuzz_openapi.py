"""Schemathesis over the app's own OpenAPI, in process (ASGI) on a real SQLite store: requests
generated from every operation's schema, and from its negation, with a fixed seed and a bounded
number of examples. No answer is a 5xx; every answer's status and content type is documented
(errors as application/problem+json); and an error answer is problem details."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from contextwright import Engine
from contextwright.server import create_app
from contextwright.server.problems import MEDIA_TYPE
from contextwright.settings import Settings

KEY = "fuzz-admin-key-0000"
AUTH = f"Bearer {KEY}"
# About 30 operations x this many examples: well under two minutes on two busy cores.
EXAMPLES = 25


def fuzzed_app(tmp_path: Path) -> tuple[Engine, Any]:
    engine = Engine.open(f"sqlite:///{tmp_path / 'fuzz.db'}")
    # Something to find: generated ids will mostly miss, but names like "a" and "p" may hit.
    engine.add(project="p", author="a", content="@b the login is broken", id="a")
    engine.assemble("p", "a", "login")
    engine.kv_set("p", "a", "v")
    engine.tasks.create("p", name="t", objective="add auth")
    return engine, create_app(engine, Settings(api_keys={KEY: ["*"]}, max_body_bytes=256 * 1024))


@schemathesis.check
def problem_details(ctx: Any, response: Any, case: Any) -> bool | None:
    """An error answer is RFC 9457 problem details, whatever the route."""
    if response.status_code < 400:
        return None
    assert response.headers.get("content-type", [""])[0].startswith(MEDIA_TYPE), response.headers
    body = response.json()
    assert body["status"] == response.status_code and body["title"] and body["detail"], body
    return True


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    problem_details,
]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_no_5xx_and_every_error_is_documented_problem_details(tmp_path: Path) -> None:
    engine, app = fuzzed_app(tmp_path)
    try:
        api = schemathesis.openapi.from_asgi("/openapi.json", app)
        operations = [result.ok() for result in api.get_all_operations()]
        assert len(operations) >= 25, [op.label for op in operations]
        failures: list[str] = []
        for op in operations:
            for mode in GenerationMode:
                strategy = op.as_strategy(generation_mode=mode, headers={"Authorization": AUTH})

                @given(case=strategy)
                @settings(
                    max_examples=EXAMPLES,
                    deadline=None,
                    derandomize=True,  # a fixed seed: the same requests on every run
                    suppress_health_check=list(HealthCheck),
                    database=None,
                    phases=[Phase.generate],
                )
                def run(case: Any) -> None:
                    case.call_and_validate(checks=CHECKS)

                try:
                    run()
                except Unsatisfiable:
                    continue  # nothing to negate: an operation without parameters or body
                except Exception as exc:
                    failures.append(f"{op.label} ({mode.value}): {exc}")
    finally:
        engine.close()
    assert not failures, "\n\n".join(failures)
