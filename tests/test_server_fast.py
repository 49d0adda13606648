"""The fast path of adds and assembles (server/fast.py), over real uvicorn on real SQLite files:
every request, well formed or not, is answered as the app answers it with the fast path turned
off (status and body, but for ids and times), the well-formed ones do go the fast way, and the
metrics count them under their route."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextwright import Engine
from contextwright.server import create_app, fast
from contextwright.server.fast import FastRoutes
from contextwright.settings import Settings
from servers import ADMIN_KEY, auth, running

ALICE_KEY = "alice-key-0000"
KEYS: dict[str, Any] = {ADMIN_KEY: ["*"], ALICE_KEY: {"project": "acme", "agents": ["alice"]}}
# Fields that differ between two runs of the same request.
VOLATILE = {"id", "created_at", "trace_id", "trace", "content_hash"}
ULID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")  # record ids, in keys and texts

JSON = {"content-type": "application/json"}
REQUESTS: list[tuple[str, str, dict[str, str], bytes]] = [
    # (key, path, headers, body)
    (ADMIN_KEY, "/v1/projects/acme/records", JSON,
     b'{"author": "alice", "content": "alice fixes the login token refresh"}'),
    (ADMIN_KEY, "/v1/projects/acme/records", JSON,
     b'{"author": "bob", "kind": "decision", "content": "@alice use rotating tokens",'
     b' "tags": ["Auth"], "meta": {"n": 123456789012345678901234567890, "f": 0.1}}'),
    (ADMIN_KEY, "/v1/projects/acme/records", {"content-type": "application/json; charset=utf-8"},
     b'{"author": "carol", "content": "carol reviews the login flow", "created_at": 5}'),
    (ADMIN_KEY, "/v1/projects/acme/assemble", JSON,
     b'{"agent": "alice", "task": "login token", "budget": 2000}'),
    (ADMIN_KEY, "/v1/projects/acme/assemble", JSON,
     b'{"agent": "bob", "task": "login", "budget": {"model": "gpt-4o", "window": 3000},'
     b' "format": "markdown"}'),
    (ADMIN_KEY, "/v1/projects/acme/assemble", JSON,
     b'{"agent": "alice", "task": "login", "format": "anthropic", "limits": {"history": 3}}'),
    # Not plainly well formed: the app's own answers.
    (ADMIN_KEY, "/v1/projects/acme/records", JSON, b'{"author": "alice", "content": "x", "zz": 1}'),
    (ADMIN_KEY, "/v1/projects/acme/records", JSON, b'{"author": "alice", "content": 5}'),
    (ADMIN_KEY, "/v1/projects/acme/records", JSON, b'{"content": "no author"}'),
    (ADMIN_KEY, "/v1/projects/acme/records", JSON, b'{"author": "alice", "content": "x"'),
    (ADMIN_KEY, "/v1/projects/acme/records", JSON, b""),
    (ADMIN_KEY, "/v1/projects/acme/records", JSON, b"[1, 2]"),
    (ADMIN_KEY, "/v1/projects/acme/records", {"content-type": "text/plain"},
     b'{"author": "alice", "content": "x"}'),
    (ADMIN_KEY, "/v1/projects/acme/records", {},  # no content type: not JSON to FastAPI
     b'{"author": "alice", "content": "x"}'),
    (ADMIN_KEY, "/v1/projects/acme/records", JSON, b'{"author": "alice", "content": "a\\ud800b"}'),
    (ADMIN_KEY, "/v1/projects/acme/records", JSON, b'{"author": "al\\nice", "content": "x"}'),
    (ADMIN_KEY, "/v1/projects/acme/records", JSON,
     b'{"author": "alice", "content": "x", "project": "beta"}'),
    (ADMIN_KEY, "/v1/projects/acme/records", JSON,
     b'{"author": "alice", "content": "x", "meta": {"f": NaN}}'),
    (ADMIN_KEY, "/v1/projects/-bad/records", JSON, b'{"author": "alice", "content": "x"}'),
    (ADMIN_KEY, "/v1/projects/acme/assemble", JSON, b'{"agent": "alice", "budget": true}'),
    (ADMIN_KEY, "/v1/projects/acme/assemble", JSON, b'{"agent": "alice", "format": "yaml"}'),
    (ADMIN_KEY, "/v1/projects/acme/assemble", JSON, b'{"agent": "alice", "budget": -5}'),
    ("", "/v1/projects/acme/records", JSON, b'{"author": "alice", "content": "x"}'),
    ("wrong-key-00000", "/v1/projects/acme/assemble", JSON, b'{"agent": "alice"}'),
    (ALICE_KEY, "/v1/projects/beta/records", JSON, b'{"author": "alice", "content": "x"}'),
    # Past the key and the body, refused by the route itself: the app's handler answers.
    (ALICE_KEY, "/v1/projects/acme/records", JSON, b'{"author": "bob", "content": "as bob"}'),
    (ALICE_KEY, "/v1/projects/acme/assemble", JSON, b'{"agent": "bob", "task": "login"}'),
    (ALICE_KEY, "/v1/projects/acme/records", JSON, b'{"author": "alice", "content": "mine"}'),
]  # fmt: skip


def stable(value: Any) -> Any:
    """`value` without what differs from run to run."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


@pytest.fixture
def switch(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Turns the fast path on and off, and counts the requests it answered."""
    state: dict[str, Any] = {"on": True, "answered": 0}
    match, hop = FastRoutes._match, fast.run_in_threadpool

    def switched(self: FastRoutes, scope: Any) -> Any:
        return match(self, scope) if state["on"] else None

    async def counted(func: Any, *args: Any) -> Any:
        state["answered"] += 1
        return await hop(func, *args)

    monkeypatch.setattr(FastRoutes, "_match", switched)
    monkeypatch.setattr(fast, "run_in_threadpool", counted)
    yield state


def answers(tmp_path: Path, name: str, requests: list[Any]) -> list[tuple[int, Any]]:
    engine = Engine.open(f"sqlite:///{tmp_path / name}.db", embedder=None)
    app = create_app(engine, Settings(api_keys=KEYS))
    out = []
    with running(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        for key, path, headers, body in requests:
            head = {**headers, **(auth(key) if key else {})}
            r = client.post(path, content=body, headers=head)
            try:
                data: Any = stable(json.loads(ULID.sub("ID", r.text)))
            except json.JSONDecodeError:
                data = r.text
            out.append((r.status_code, data))
    engine.close()
    return out


def test_every_request_is_answered_as_the_app_answers_it(
    tmp_path: Path, switch: dict[str, Any]
) -> None:
    # Each route's first request teaches the fast path the route: send it twice over.
    requests = REQUESTS[:1] + REQUESTS[3:4] + REQUESTS
    switch["on"] = False
    slow = answers(tmp_path, "slow", requests)
    assert switch["answered"] == 0
    switch["on"] = True
    quick = answers(tmp_path, "quick", requests)
    for req, a, b in zip(requests, slow, quick, strict=True):
        assert a == b, req
    statuses = [s for s, _ in quick]
    assert statuses.count(201) == 5 and statuses.count(200) == 4, statuses
    # After each route's first request: the 3 adds and 3 assembles; the 4 bodies that the model
    # takes and the engine refuses (another project, a newline in a name, a NaN, a budget < 0);
    # alice's key acting as bob twice, and as herself.
    assert switch["answered"] == 3 + 3 + 4 + 2 + 1


def test_fast_requests_are_counted_under_their_route(
    tmp_path: Path, switch: dict[str, Any]
) -> None:
    engine = Engine.open(f"sqlite:///{tmp_path / 'm.db'}", embedder=None)
    app = create_app(engine, Settings(api_keys=KEYS))
    with running(app) as base, httpx.Client(base_url=base, headers=auth(ADMIN_KEY)) as client:
        for i in range(4):
            r = client.post("/v1/projects/acme/records", json={"author": "a", "content": f"n{i}"})
            assert r.status_code == 201
        r = client.post("/v1/projects/acme/assemble", json={"agent": "a", "budget": 1000})
        r = client.post("/v1/projects/acme/assemble", json={"agent": "a", "budget": 1000})
        assert r.status_code == 200 and "n3" in json.dumps(r.json()["messages"])
        metrics = client.get("/metrics").text
    engine.close()
    assert switch["answered"] == 3 + 1
    assert (
        'contextwright_requests_total{method="POST",route="/v1/projects/{project}/records",'
        'status="201"} 4.0' in metrics
    )
    assert (
        'contextwright_requests_total{method="POST",route="/v1/projects/{project}/assemble",'
        'status="200"} 2.0' in metrics
    )


def test_a_body_sent_in_pieces_is_read_whole(tmp_path: Path, switch: dict[str, Any]) -> None:
    engine = Engine.open(f"sqlite:///{tmp_path / 'p.db'}", embedder=None)
    app = create_app(engine, Settings(api_keys=KEYS))
    body = json.dumps({"author": "alice", "content": "in three pieces"}).encode()

    for pieces in ([body], [body[:7], body[7:20], body[20:]]):
        sent = asyncio.run(sent_for(app, pieces))
        assert sent[0]["status"] == 201
        assert json.loads(sent[1]["body"])["content"] == "in three pieces"
    assert switch["answered"] == 1  # the first taught the route
    assert engine.store.count("acme") == 2
    engine.close()


FIELDS = ["content", "author", "kind", "project", "id", "milestone", "session", "to",
          "visibility", "tags", "refs", "status", "supersedes", "reply_to", "pinned",
          "created_at", "meta", "extra"]  # fmt: skip
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
# What a lax validation would take for another type (the app's is strict).
COERCIBLE = st.sampled_from(["1", 1, 0, "true", 1.0, "yes", "12.5", ["a"], ("b",)])
SAMPLES = {
    "content": st.text(max_size=30), "author": st.sampled_from(["alice", "bob", "", "a\nb", "Zoë"]),
    "kind": st.sampled_from(["message", "decision", "task", "nope"]),
    "project": st.sampled_from(["acme", "beta"]), "id": st.sampled_from(["r-1", "r-2", "bad id"]),
    "visibility": st.sampled_from(["project", "direct", "private", "public"]),
    "to": st.lists(st.sampled_from(["bob", "carol", ""]), max_size=2),
    "tags": st.lists(st.text(max_size=6), max_size=3), "pinned": st.booleans(),
    "created_at": st.floats(min_value=0, max_value=2e9) | st.integers(0, 2_000_000_000),
    "status": st.sampled_from(["open", "resolved", "weird"]),
}  # fmt: skip


@st.composite
def record_bodies(draw: st.DrawFn) -> bytes:
    """A body for the records route: mostly well formed, often not."""
    keys = draw(st.lists(st.sampled_from(FIELDS), unique=True, max_size=6))
    body = {"author": "alice", "content": "hello"} if draw(st.booleans()) else {}
    for key in keys:
        body[key] = draw(SAMPLES.get(key, JSON_VALUES) | JSON_VALUES | COERCIBLE)
    return json.dumps(body).encode()


@given(bodies=st.lists(record_bodies(), min_size=1, max_size=4))
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_any_record_body_is_answered_as_the_app_answers_it(
    bodies: list[bytes], switch: dict[str, Any]
) -> None:
    """Each arm on a store of its own, in memory, sent the same bodies in the same order."""

    async def arm(on: bool) -> list[tuple[int, Any]]:
        switch["on"] = on
        engine = Engine.open("memory://", embedder=None)
        app = create_app(engine, Settings(api_keys=KEYS))
        out = []
        for body in [b'{"author": "alice", "content": "first"}', *bodies]:  # the first teaches
            status, text = await post(app, body)
            out.append((status, stable(json.loads(ULID.sub("ID", text)))))
        engine.close()
        return out

    before = switch["answered"]
    slow = asyncio.run(arm(False))
    assert switch["answered"] == before
    assert asyncio.run(arm(True)) == slow
    # Every body the app stored, the fast path answered (and maybe some it refused).
    stored = sum(1 for status, _ in slow[1:] if status < 300)
    assert switch["answered"] - before >= stored


async def sent_for(app: Any, pieces: list[bytes]) -> list[dict[str, Any]]:
    """What `app` sends for a POST of an add whose body arrives in `pieces`, over plain ASGI."""
    sent: list[dict[str, Any]] = []
    messages = [
        {"type": "http.request", "body": p, "more_body": i < len(pieces) - 1}
        for i, p in enumerate(pieces)
    ]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/v1/projects/acme/records", "query_string": b"",
        "raw_path": b"/v1/projects/acme/records", "root_path": "",
        "headers": [(b"authorization", f"Bearer {ADMIN_KEY}".encode()),
                    (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80),
    }  # fmt: skip
    await app(scope, receive, send)
    return sent


async def post(app: Any, body: bytes) -> tuple[int, str]:
    sent = await sent_for(app, [body])
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:]).decode()


def test_overridden_dependencies_are_the_apps_to_solve(switch: dict[str, Any]) -> None:
    from contextwright.server.access import Access, get_access, resolve

    engine = Engine.open("memory://", embedder=None)
    app = create_app(engine, Settings(api_keys=KEYS))
    calls: list[int] = []

    async def anyone() -> Access:  # every caller an admin, whatever key it sent
        calls.append(1)
        return resolve(Settings(), None)

    app.dependency_overrides[get_access] = anyone
    for i in range(3):  # after the first, these would go the fast way but for the override
        status, _ = asyncio.run(post(app, b'{"author": "alice", "content": "hi %d"}' % i))
        assert status == 201
    assert switch["answered"] == 0 and len(calls) == 3
    engine.close()
