"""The payloads the OpenAI and Anthropic formats build, checked against the providers' own SDK types
(pydantic over the SDKs' request TypedDicts, unknown keys refused) and against the rules the
types do not carry but the APIs enforce: tool ids (Anthropic: ^[a-zA-Z0-9_-]+$; OpenAI: at most
40 characters), each tool result right after its call, Anthropic's first turn a user turn."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from typing import Any

import pytest
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from pydantic import ConfigDict, TypeAdapter

from contextwright import Candidate, Engine
from contextwright.assembly.candidates import Item
from contextwright.assembly.render import NO_CONVERSATION, OPENING_TURN, render, tool_id
from contextwright.records import Record, build_record
from contextwright.tokens.counter import default_counter
from strategies import AGENTS, PROJECT, record_batches

C = default_counter()
T0 = 1_750_000_000.0
# A TypedDict takes no config of its own; inside a list it takes the list's, unknown keys refused.
FORBID = ConfigDict(extra="forbid")
OPENAI_REQUEST = TypeAdapter(list[CompletionCreateParamsNonStreaming], config=FORBID)
ANTHROPIC_REQUEST = TypeAdapter(list[MessageCreateParamsNonStreaming], config=FORBID)
ANTHROPIC_TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
OPENAI_MESSAGE_NAME = re.compile(r"^[^\s<|\\/>]{1,64}$")
BLOCK_KEYS = {
    "text": {"type", "text"},
    "tool_use": {"type", "id", "name", "input"},
    "tool_result": {"type", "tool_use_id", "content"},
}
ODD_IDS = [
    "run:7/step.1",
    "run/7:step.1",  # the same characters as above, in another order
    "a.b",
    "a_b",
    "x" * 200,
    "x" * 199 + "y",
    "call_abc",
    "hash_0123",
]


def drain(value: Any) -> Any:
    """The SDKs type lists as Iterable, which pydantic validates lazily: walk every one."""
    if isinstance(value, dict):
        return {k: drain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [drain(v) for v in value]
    if isinstance(value, Iterator):
        return [drain(v) for v in value]
    return value


def check_openai(messages: list[dict[str, Any]]) -> None:
    drain(OPENAI_REQUEST.validate_python([{"model": "gpt-4o", "messages": messages}]))
    calls: list[str] = []
    for i, m in enumerate(messages):
        if "name" in m:
            assert OPENAI_MESSAGE_NAME.match(m["name"]), m["name"]
        for call in m.get("tool_calls") or []:
            assert len(call["id"]) <= 40 and ANTHROPIC_TOOL_ID.match(call["id"]), call["id"]
            calls.append(call["id"])
        if m["role"] == "tool":
            prev = messages[i - 1]
            assert prev.get("tool_calls") or prev["role"] == "tool"
            assert m["tool_call_id"] in [c["id"] for c in prev.get("tool_calls") or []] or (
                prev["role"] == "tool"
            )
    assert len(calls) == len(set(calls)), "two calls share an id"


def check_anthropic(payload: dict[str, Any]) -> None:
    request = {"model": "claude-sonnet-4-5", "max_tokens": 1024, **payload}
    drain(ANTHROPIC_REQUEST.validate_python([request]))
    msgs = payload["messages"]
    assert msgs and msgs[0]["role"] == "user"
    uses: list[str] = []
    for i, m in enumerate(msgs):
        assert m["content"], "an empty turn"
        if i:
            assert m["role"] != msgs[i - 1]["role"], "two turns of one role in a row"
        for block in m["content"]:
            # The SDK's union also holds its response blocks, which allow unknown keys.
            assert set(block) == BLOCK_KEYS[block["type"]], block
            if block["type"] == "text":
                assert block["text"].strip()
            if block["type"] == "tool_use":
                assert ANTHROPIC_TOOL_ID.match(block["id"]), block["id"]
                assert isinstance(block["input"], dict)
                uses.append(block["id"])
            if block["type"] == "tool_result":
                before = msgs[i - 1]["content"]
                assert block["tool_use_id"] in [b.get("id") for b in before]
    assert len(uses) == len(set(uses)), "two tool_use blocks share an id"


def record(**fields: Any) -> Record:
    """A record as build_record makes it, then given any id: the renderer must cope with ids
    that the record rules of today refuse (imports, other stores, rules of tomorrow)."""
    rid = fields.pop("id", None)
    data: dict[str, Any] = {"project": "p", "author": "alice", "content": "hi", "created_at": T0}
    data.update(fields)
    r = build_record(data, C.count)
    return dataclasses.replace(r, id=rid) if rid is not None else r


def history_item(*records: Record) -> Item:
    body = records[-1].content
    c = Candidate(
        key=records[0].id,
        section="history",
        source="history",
        text=body,
        records=records,
        tokens=C.count(body),
        created_at=records[-1].created_at,
    )
    return Item(c, body, C.count(body))


def tool_pair(call_id: str, agent: str = "bob", args: Any = None, at: float = T0) -> Item:
    meta: dict[str, Any] = {"name": "grep", "arguments": args or {"pattern": "auth"}}
    meta["call_id"] = "call_shared"  # a provider id that two records may share: never used
    call = record(
        id=call_id, author=agent, kind="tool_call", content="grep", meta=meta, created_at=at
    )
    result = record(
        id=call_id + "#r", author=agent, kind="tool_result", content="auth.py:12", created_at=at
    )
    return history_item(call, result)


def odd_window(agent: str = "bob") -> dict[str, list[Item]]:
    """A multi-agent history whose tool calls have every odd id above, some the agent's own."""
    history = [history_item(record(id="m0", author="carol", content="@bob the login is broken"))]
    for n, rid in enumerate(ODD_IDS):
        who = agent if n % 2 else "team.lead/7"
        history.append(tool_pair(rid, who, at=T0 + n))
        history.append(history_item(record(id=f"t{n}", author="dave", content=f"seen {n}")))
    lonely = record(id="solo:1", author=agent, kind="tool_call", content="ls", created_at=T0 + 99)
    history.append(history_item(lonely))
    return {"history": history}


def uses_of(payload: dict[str, Any]) -> list[str]:
    return [b["id"] for m in payload["messages"] for b in m["content"] if b["type"] == "tool_use"]


def calls_of(messages: list[dict[str, Any]]) -> list[str]:
    return [c["id"] for m in messages for c in m.get("tool_calls") or []]


def test_odd_record_ids_make_valid_distinct_stable_tool_ids() -> None:
    """`run:7/step.1` once became `toolu_call_run:7/step.1`, which Anthropic refuses."""
    sections = odd_window()
    a = render(sections, "bob", "anthropic", C).payload
    o = render(sections, "bob", "openai", C).payload
    check_anthropic(a)
    check_openai(o)
    want = [tool_id(r) for r in [*ODD_IDS, "solo:1"]]
    assert uses_of(a) == want == calls_of(o)  # one id per record, the same in both formats
    assert len(set(want)) == len(want)
    # The same records give the same ids in another call.
    assert uses_of(render(odd_window(), "bob", "anthropic", C).payload) == want
    assert tool_id("call_abc") == "call_call_abc" and tool_id("a_b") == "call_a_b"
    assert tool_id("run:7/step.1").startswith("hash_")


def test_anthropic_tool_input_is_always_an_object() -> None:
    items = [
        tool_pair("c1", args=[1, 2]),
        tool_pair("c2", args="not json {", at=T0 + 1),
        tool_pair("c3", args="7", at=T0 + 2),
    ]
    payload = render({"history": items}, "bob", "anthropic", C).payload
    check_anthropic(payload)
    inputs = [b["input"] for m in payload["messages"] for b in m["content"] if "input" in b]
    assert inputs == [{"input": [1, 2]}, {"input": "not json {"}, {"input": 7}]


def test_anthropic_opening_turn_is_the_documented_one() -> None:
    own = render({"history": [tool_pair("c1")]}, "bob", "anthropic", C).payload
    check_anthropic(own)
    assert own["messages"][0] == {
        "role": "user",
        "content": [{"type": "text", "text": OPENING_TURN}],
    }
    empty = render({}, "bob", "anthropic", C).payload
    check_anthropic(empty)
    assert empty["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": NO_CONVERSATION}]}
    ]
    # A history that starts with another agent's turn needs no opening turn.
    theirs = render(odd_window(), "bob", "anthropic", C).payload
    assert OPENING_TURN not in repr(theirs)


@given(st.text(min_size=1, max_size=300))
def test_tool_id_matches_both_providers_for_any_record_id(rid: str) -> None:
    out = tool_id(rid)
    assert ANTHROPIC_TOOL_ID.match(out) and len(out) <= 40
    assert tool_id(rid) == out


@given(st.text(min_size=1, max_size=80), st.text(min_size=1, max_size=80))
def test_distinct_record_ids_get_distinct_tool_ids(a: str, b: str) -> None:
    assert (tool_id(a) == tool_id(b)) == (a == b)


ID_CHARS = st.characters(blacklist_categories=("Cs",))


@settings(max_examples=40, deadline=None)
@given(
    ids=st.lists(st.text(ID_CHARS, min_size=1, max_size=60), min_size=1, max_size=5, unique=True)
)
def test_windows_with_any_tool_record_ids_validate(ids: list[str]) -> None:
    items = [tool_pair(rid, "bob" if n % 2 else "carol", at=T0 + n) for n, rid in enumerate(ids)]
    sections = {"history": items}
    a = render(sections, "bob", "anthropic", C).payload
    check_anthropic(a)
    o = render(sections, "bob", "openai", C).payload
    check_openai(o)
    assert uses_of(a) == calls_of(o) == [tool_id(r) for r in ids]


def multi_agent_engine() -> Engine:
    """A team's session through the whole engine: messages from four agents, tool calls with
    results (one without), decisions and a constraint outside history."""
    engine = Engine.open("memory://", clock=lambda: T0 + 86_400, workers=1)
    add = engine.add
    add(project="p", author="carol", kind="constraint", pinned=True, content="Never log tokens.")
    add(project="p", author="dave", kind="decision", content="Sessions use JWTs.")
    add(project="p", author="alice", session="s1", content="@bob the login is broken", id="m:1")
    for n, who in enumerate(["bob", "alice", "team.lead/7", "bob"]):
        call = add(
            project="p",
            author=who,
            kind="tool_call",
            session="s1",
            id=f"run:{n}/step.{n}",
            content=f"grep {n}",
            meta={"name": "grep", "arguments": {"pattern": f"auth{n}"}},
        )
        if n != 2:
            add(
                project="p",
                author=who,
                kind="tool_result",
                session="s1",
                reply_to=call.id,
                content=f"auth.py:{n}",
            )
        add(project="p", author="carol", session="s1", content=f"ok {n}, next")
    add(project="p", author="bob", session="s1", content="Fixed in auth.py.")
    return engine


@pytest.mark.parametrize("agent", ["bob", "alice", "carol"])
def test_a_multi_agent_session_validates_in_both_formats(agent: str) -> None:
    with multi_agent_engine() as engine:
        a = engine.assemble("p", agent, "fix the login", 8000, "anthropic", session="s1")
        o = engine.assemble("p", agent, "fix the login", 8000, "openai", session="s1")
        again = engine.assemble("p", agent, "fix the login", 8000, "anthropic", session="s1")
    check_anthropic(a.payload)
    check_openai(o.payload)
    assert a.payload == again.payload  # same records, same payload, ids included
    want = [tool_id(f"run:{n}/step.{n}") for n in range(4)]
    assert uses_of(a.payload) == want == calls_of(o.payload)
    assert o.payload[0]["role"] == "system" and a.payload["system"].startswith("# Context")


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    batch=record_batches(),
    agent=st.sampled_from(AGENTS),
    session=st.sampled_from([None, "s1", "s2"]),
)
def test_any_stored_history_validates(
    batch: list[dict[str, Any]], agent: str, session: str | None
) -> None:
    with Engine.open("memory://", clock=lambda: T0 + 86_400, workers=1) as engine:
        engine.add_many(batch)
        for who in AGENTS:
            engine.register_agent(PROJECT, who)
        a = engine.assemble(PROJECT, agent, "review", 16_000, "anthropic", session=session)
        o = engine.assemble(PROJECT, agent, "review", 16_000, "openai", session=session)
    check_anthropic(a.payload)
    check_openai(o.payload)
