"""What a session derives from its turns (summaries, memory notes, reset transfers) never reaches
an agent who could not read the turns themselves, and one agent's compaction changes only that
agent's view: on every store, over HTTP, and as a property over random multi-agent sessions."""

from __future__ import annotations

import json
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextwright import Budget, Engine
from contextwright.server import create_app
from contextwright.sessions import SessionConfig
from contextwright.settings import Settings
from servers import ACME_KEY, KEYS, auth, running

P, S = "p", "s1"
PRIVATE = "tok-PRIVMARK-41"  # in Alice's private note
DIRECT = "vault-DMMARK-77"  # in Bob's direct message to Alice
BUDGET = Budget(model="gpt-4", window=8192)


def text_of(value: Any) -> str:
    return json.dumps(value, default=str)


def scene(engine: Engine, project: str = P) -> dict[str, str]:
    """Alice's session s1: project turns, her private note, Bob's direct message to her, then
    enough project turns that both fall out of the keep window. Summaries are bounded tightly
    enough that compacting saves tokens (compaction keeps turns a summary would not shorten)."""
    s = engine.sessions
    s.config = replace(s.config, summary_tokens=64)
    for agent in ("alice", "bob", "carol", "dave"):
        engine.register_agent(project, agent)
    ids = {}
    for i in range(3):
        s.append(project, "alice", S, "user", f"Please build page {i} with the header.")
        s.append(project, "alice", S, "assistant", f"We decided to use Tailwind for page {i}.")
    ids["private"] = engine.add(
        project=project,
        author="alice",
        kind="note",
        session=S,
        visibility="private",
        content=f"I prefer to keep my api token {PRIVATE} in the keychain.",
    ).id
    ids["direct"] = engine.add(
        project=project,
        author="bob",
        kind="message",
        session=S,
        visibility="direct",
        to=["alice"],
        content=f"Alice, we decided to use the vault code {DIRECT} for staging.",
    ).id
    for i in range(3, 9):
        s.append(project, "alice", S, "user", f"Please build page {i} with the footer.")
        s.append(
            project,
            "alice",
            S,
            "assistant",
            f"Built page {i}; it is at src/page{i}.tsx, with a sticky footer, three columns of "
            "links, a newsletter form and the copyright line, all in the dark theme.",
        )
    return ids


def views(
    engine: Engine, agent: str, session: str = S, project: str = P, *, window: bool = True
) -> dict[str, str]:
    """Everything `agent` can be answered with: records, search, a plain window, and (unless the
    session was reset) a session window."""
    recs = engine.records(project, agent=agent, limit=1_000)
    hits = engine.store.search_text(project, agent, "token vault keychain staging secret", 50)
    asm = engine.assemble(project, agent, "the api token and the vault", session=session)
    out = {
        "records": text_of([r.to_dict() for r in recs]),
        "search": text_of([h.record.to_dict() for h in hits]),
        "assemble": text_of(asm.messages),
    }
    if window:
        win = engine.sessions.window(project, agent, session, "the api token", budget=BUDGET)
        out["window"] = text_of(win.messages)
    return out


def assert_none_holds(found: dict[str, str], *markers: str) -> None:
    leaks = {(where, m) for where, text in found.items() for m in markers if m in text}
    assert not leaks, f"leaked: {sorted(leaks)}"


def test_compaction_summarizes_each_scope_for_its_own_readers(engine: Engine) -> None:
    ids = scene(engine)
    c = engine.sessions.compact(P, "alice", S, keep=4)
    assert {ids["private"], ids["direct"]} <= set(c.replaced)
    assert_none_holds(views(engine, "carol"), PRIVATE, DIRECT)
    assert_none_holds(views(engine, "bob"), PRIVATE)
    by_vis = {(r.visibility, tuple(r.to)): r for r in c.summaries}
    assert set(by_vis) == {("project", ()), ("direct", ("bob",)), ("private", ())}
    assert PRIVATE in by_vis["private", ()].content
    assert DIRECT in by_vis["direct", ("bob",)].content
    assert PRIVATE not in by_vis["project", ()].content
    assert DIRECT not in by_vis["project", ()].content
    assert ids["private"] in by_vis["private", ()].meta["replaces"]
    assert c.summary is by_vis["project", ()]
    # Alice keeps what she may read, through her own summaries.
    alice = views(engine, "alice")
    assert PRIVATE in alice["window"] and DIRECT in alice["window"]


def test_no_summary_names_a_record_its_readers_may_not_read(engine: Engine) -> None:
    ids = scene(engine)
    late = engine.add(
        project=P, author="alice", kind="note", session=S, visibility="private", content="late"
    )
    c = engine.sessions.compact(P, "alice", S, keep=4)
    assert late.id in {t.key for t in engine.sessions.turns(P, "alice", S)}
    assert late.id in next(s for s in c.summaries if s.visibility == "private").meta["kept"]
    carol = views(engine, "carol")["records"]
    assert not [i for i in (*ids.values(), late.id) if i in carol]


def test_compaction_leaves_another_agents_records_and_view_alone(engine: Engine) -> None:
    ids = scene(engine)
    bob_before = engine.sessions.live_records(P, "bob", S)
    engine.sessions.compact(P, "alice", S, keep=4)
    direct = engine.get(P, ids["direct"])
    assert direct.status is None
    assert all(engine.get(P, r.id).status is None for r in bob_before)
    # Bob's view of the session is what it was: his own record still in it, no summary of Alice's.
    assert engine.sessions.live_records(P, "bob", S) == bob_before
    win = engine.sessions.window(P, "bob", S, budget=BUDGET)
    assert DIRECT in text_of(win.messages)
    asm = engine.assemble(P, "bob", "", session=S, sources=["history"])
    keys = {i.candidate.key for i in asm.sections["history"]}
    assert ids["direct"] in keys
    assert not any(i.candidate.records[0].kind == "summary" for i in asm.sections["history"])
    # Alice's view lost the originals and holds her summaries instead.
    alice = {r.id for r in engine.sessions.live_records(P, "alice", S)}
    assert ids["direct"] not in alice and ids["private"] not in alice


def test_reset_and_flush_keep_scopes(engine: Engine, tmp_path: Path) -> None:
    engine.sessions.config = SessionConfig(workspace=tmp_path / "ws")
    ids = scene(engine)
    flushed = engine.sessions.flush(P, "alice", S)
    notes = {r.content: r for r in flushed.records}
    private = next(r for text, r in notes.items() if PRIVATE in text)
    direct = next(r for text, r in notes.items() if DIRECT in text)
    assert private.visibility == "private"
    assert direct.visibility == "direct" and direct.to == ("bob",)
    memory_md = (tmp_path / "ws" / "memory.md").read_text()
    assert PRIVATE not in memory_md and DIRECT not in memory_md
    assert "Tailwind" in memory_md  # project notes still reach the shared workspace
    done = engine.sessions.reset(P, "alice", S, new_session="s2")
    for agent in ("carol", "dave"):
        assert_none_holds(views(engine, agent, "s2"), PRIVATE, DIRECT)
        assert_none_holds(views(engine, agent, S), PRIVATE, DIRECT)
    assert {t.visibility for t in done.transfers} == {"project", "direct", "private"}
    assert_none_holds(views(engine, "bob", "s2"), PRIVATE)
    alice = views(engine, "alice", "s2")
    assert PRIVATE in alice["window"] and DIRECT in alice["window"]
    assert engine.get(P, ids["direct"]).status is None


def test_session_window_compaction_keeps_scopes(engine: Engine) -> None:
    """The window pipeline's own compaction (auto, at the threshold) keeps scopes too."""
    scene(engine)
    for i in range(40):
        engine.sessions.append(P, "alice", S, "user", f"Step {i}: " + "lorem ipsum " * 40)
    win = engine.sessions.window(P, "alice", S, budget=Budget(model="gpt-4", window=3000))
    assert win.compactions
    assert PRIVATE in text_of(win.messages) or PRIVATE in text_of(
        [s.content for c in win.compactions for s in c.summaries]
    )
    assert_none_holds(views(engine, "carol"), PRIVATE, DIRECT)


def test_compaction_is_idempotent_with_several_scopes(engine: Engine) -> None:
    scene(engine)
    assert engine.sessions.compact(P, "alice", S, keep=4).compacted
    again = engine.sessions.compact(P, "alice", S, keep=4)
    assert not again.compacted


# -- HTTP ----------------------------------------------------------------------------------------


@pytest.fixture
def http(sqlite_engine: Engine, tmp_path: Path) -> Iterator[httpx.Client]:
    sqlite_engine.sessions.config = SessionConfig(summary_tokens=64)
    app = create_app(sqlite_engine, Settings(db=f"sqlite:///{tmp_path / 'x.db'}", api_keys=KEYS))
    with running(app) as base, httpx.Client(base_url=base, headers=auth(ACME_KEY)) as client:
        yield client


def test_compact_route_keeps_scopes(http: httpx.Client) -> None:
    base = "/v1/projects/acme"

    def turn(agent: str, role: str, content: str) -> None:
        r = http.post(
            f"{base}/sessions/s9/turns", json={"agent": agent, "role": role, "content": content}
        )
        assert r.status_code == 201, r.text

    for agent in ("bob", "carol"):
        assert http.put(f"{base}/agents/{agent}", json={}).status_code == 200
    detail = "with a sticky footer, three columns of links, a newsletter form and a dark theme"
    for i in range(3):
        turn("alice", "user", f"Please build page {i}, {detail}.")
    for fields in (
        {"author": "alice", "visibility": "private", "content": f"my api token is {PRIVATE}"},
        {"author": "bob", "visibility": "direct", "to": ["alice"], "content": f"code {DIRECT}"},
    ):
        r = http.post(f"{base}/records", json={"kind": "note", "session": "s9", **fields})
        assert r.status_code == 201, r.text
    for i in range(3, 10):
        turn("alice", "user", f"Please build page {i}, {detail}.")
    done = http.post(f"{base}/sessions/s9/compact", json={"agent": "alice", "keep": 4})
    assert done.status_code == 200, done.text
    carol = {
        "records": http.get(f"{base}/records", params={"agent": "carol", "limit": 500}).text,
        "assemble": http.post(
            f"{base}/assemble", json={"agent": "carol", "task": "token", "session": "s9"}
        ).text,
        "bob": http.post(
            f"{base}/assemble", json={"agent": "bob", "task": "token", "session": "s9"}
        ).text,
    }
    assert "Please build page" in carol["records"]
    assert_none_holds({k: v for k, v in carol.items() if k != "bob"}, PRIVATE, DIRECT)
    assert PRIVATE not in carol["bob"] and DIRECT in carol["bob"]
    assert {s["visibility"] for s in done.json()["summaries"]} == {"project", "private", "direct"}


# -- property ------------------------------------------------------------------------------------

AGENTS = ("alice", "bob", "carol", "dave")
op = st.one_of(
    st.tuples(st.just("say"), st.sampled_from(AGENTS)),
    st.tuples(st.just("private"), st.sampled_from(AGENTS)),
    st.tuples(
        st.just("direct"),
        st.sampled_from(AGENTS),
        st.lists(st.sampled_from(AGENTS), min_size=1, max_size=2, unique=True),
    ),
    st.tuples(st.just("compact"), st.sampled_from(AGENTS)),
    st.tuples(st.just("reset"), st.sampled_from(AGENTS)),
    st.tuples(st.just("flush"), st.sampled_from(AGENTS)),
)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(script=st.lists(op, min_size=4, max_size=40), n_agents=st.integers(3, 4))
def test_no_answer_holds_a_marker_its_agent_may_not_see(
    engine: Engine, script: list[tuple[Any, ...]], n_agents: int
) -> None:
    project = f"v{uuid.uuid4().hex[:10]}"  # the store is shared by every example: one project each
    agents = AGENTS[:n_agents]
    s = engine.sessions
    audience: dict[str, frozenset[str]] = {}  # marker -> who may read it
    current = dict.fromkeys(agents, S)
    for agent in agents:
        engine.register_agent(project, agent)
    with tempfile.TemporaryDirectory() as ws:
        s.config = SessionConfig(keep_turns=4, workspace=Path(ws))
        for n, (kind, who, *rest) in enumerate(script):
            if who not in agents:
                continue
            session = current[who]
            marker = f"mk{n}x{uuid.uuid4().hex[:6]}"
            if kind == "say":
                s.append(project, who, session, "user", f"We decided to use plan {n} for the app.")
            elif kind == "private":
                audience[marker] = frozenset({who})
                engine.add(
                    project=project,
                    author=who,
                    kind="note",
                    session=session,
                    visibility="private",
                    content=f"I prefer secret {marker}; we decided to use it.",
                )
            elif kind == "direct":
                to = [a for a in rest[0] if a in agents] or [a for a in agents if a != who][:1]
                audience[marker] = frozenset({who, *to})
                engine.add(
                    project=project,
                    author=who,
                    kind="message",
                    session=session,
                    visibility="direct",
                    to=to,
                    content=f"We decided to use code {marker} (it lives at src/{marker}.py).",
                )
            elif kind == "compact":
                s.compact(project, who, session, keep=4)
            elif kind == "reset":
                current[who] = s.reset(project, who, session).new_session
            else:
                s.flush(project, who, session)
        for agent in agents:
            found = views(engine, agent, current[agent], project)
            if current[agent] != S:
                old = views(engine, agent, S, project, window=False)
                found.update({f"{k}@{S}": v for k, v in old.items()})
            forbidden = [m for m, who in audience.items() if agent not in who]
            assert_none_holds(found, *forbidden)


def test_a_state_saved_with_one_summary_id_still_loads() -> None:
    from contextwright.sessions.state import SessionState

    old = {"project": P, "agent": "alice", "session": S, "created_at": 1.0, "summary_id": "sum1"}
    assert SessionState.from_dict(old).summary_ids == ["sum1"]
