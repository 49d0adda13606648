"""A body the JSON parser cannot read at all (bytes that are not UTF-8, nesting past the parser's
recursion) is a 400 that names the body and says how to fix it, on every route, the fast path's
included, over a real server; before, it was FastAPI's bare "There was an error parsing the
body", with no field and no fix. Nothing is stored."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from contextwright import Engine
from contextwright.server import create_app
from contextwright.settings import Settings
from servers import auth, running

KEY = "acme-key-0000000"
BODIES = {
    "not UTF-8": b'{"author": "Jos\xe9", "content": "x"}',
    "nested 5000 deep": (
        '{"author": "a", "content": "x", "meta": ' + '{"a": ' * 5_000 + "1" + "}" * 5_001
    ).encode(),
    "a 5000-digit number": (
        '{"author": "a", "content": "x", "meta": {"k": ' + "9" * 5_000 + "}}"
    ).encode(),
    "lists nested 100000 deep": (
        '{"agent": "a", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    ).encode(),
}
PATHS = [
    "/v1/projects/acme/records",
    "/v1/projects/acme/assemble",
    "/v1/projects/acme/records/batch",
    "/v1/projects/acme/tasks",
    "/v1/projects/acme/sessions/s1/turns",
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Engine]]:
    engine = Engine.open(f"sqlite:///{tmp_path_factory.mktemp('b') / 'b.db'}")
    engine.add(project="acme", author="a", content="hello")
    app = create_app(engine, Settings(api_keys={KEY: ["acme"]}))
    with running(app) as base, httpx.Client(base_url=base, headers=auth(KEY)) as client:
        for path in PATHS[:2]:  # the fast path learns its routes from a first request
            client.post(
                path,
                json={"author": "a", "content": "warm"} if "records" in path else {"agent": "a"},
            )
        yield client, engine
    engine.close()


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("what", list(BODIES))
def test_an_unreadable_body_is_a_400_naming_the_body_with_its_fix(
    served: tuple[httpx.Client, Engine], path: str, what: str
) -> None:
    client, engine = served
    before = engine.store.count("acme")
    r = client.post(path, content=BODIES[what], headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    problem = r.json()
    assert problem["field"] == "body" and "UTF-8" in problem["fix"], problem
    assert problem["detail"].startswith("body: ")
    assert engine.store.count("acme") == before
