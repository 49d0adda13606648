"""The long-session simulation and the session invariants as property tests.

1,000 turns with large tool results, corrections and pinned instructions: every window stays in
its budget, keeps the last N turns verbatim, never splits a tool call from its result, keeps every
pinned instruction and correction, and the store loses no record.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextwright import Budget, Engine
from contextwright.assembly.render import count_openai
from contextwright.sessions import SessionConfig, SessionWindow

P, A, S = "sim", "dev", "s1"


def tool_output(i: int, lines: int) -> str:
    return "\n".join(f"def f{i}_{j}(x): return x * {j}  # line {j}" for j in range(lines))


def assert_pairs_whole(messages: Sequence[dict[str, Any]]) -> None:
    """Every assistant tool_calls message is followed by the tool message that answers it, and
    no tool message appears without its call."""
    for k, m in enumerate(messages):
        if m.get("tool_calls"):
            nxt = messages[k + 1]
            assert nxt["role"] == "tool"
            assert nxt["tool_call_id"] == m["tool_calls"][0]["id"]
        if m["role"] == "tool":
            assert messages[k - 1].get("tool_calls"), "a tool result without its call"


def contents(win: SessionWindow) -> list[str]:
    return [str(m.get("content") or "") for m in win.messages]


@pytest.fixture
def sim_engine(tmp_path: Path) -> Iterator[Engine]:
    e = Engine.open(f"sqlite:///{tmp_path / 'sim.db'}", workers=1, persist_traces=False)
    yield e
    e.close()


@pytest.mark.slow
def test_thousand_turn_session(sim_engine: Engine, tmp_path: Path) -> None:
    engine = sim_engine
    sessions = engine.sessions
    sessions.config = SessionConfig(
        keep_turns=6, tool_result_cap=800, summary_tokens=500, workspace=tmp_path / "ws"
    )
    budget = Budget(model="gpt-4", window=8_192)
    appended: dict[str, str] = {}
    instructions: list[str] = []
    corrections: list[str] = []
    session = S
    max_used = 0
    compactions = 0

    def add(role: str, content: str, **kw: Any) -> str:
        r = sessions.append(P, A, session, role, content, **kw)
        appended[r.id] = r.content
        return r.id

    for i in range(1_000):
        if i % 97 == 5:
            text = f"Rule {i}: always run the linter before committing module {i}."
            add("instruction", text)
            instructions.append(text)
        elif i % 41 == 7:
            text = f"Actually, I meant module {i + 1}, not module {i}."
            add("user", text)
            corrections.append(text)
        else:
            add("user", f"Please refactor src/mod{i}.py so that f{i} handles empty input.")
        evidence = i % 25 == 0
        call = add(
            "tool_call",
            "run",
            tool="pytest" if evidence else "read_file",
            arguments={"path": f"src/mod{i}.py"},
        )
        size = (10, 40, 120, 20, 300)[i % 5]
        add(
            "tool_result",
            f"{i % 7 + 3} passed" if evidence else tool_output(i, size),
            reply_to=call,
        )
        add("assistant", f"Updated src/mod{i}.py; we decided to use guard clauses for f{i}.")

        win = sessions.window(
            P, A, session, budget=budget, system="You are dev, a careful engineer."
        )
        assert win.session == session  # this budget never needs the last rung
        compactions += len(win.compactions)
        assert win.tokens <= win.assembly.available
        assert win.tokens == count_openai(win.messages, engine.counter)
        max_used = max(max_used, win.tokens)
        assert_pairs_whole(win.messages)
        text = "\n".join(contents(win))
        for kept in instructions + corrections:
            assert kept in text
        # The last N turns are verbatim (a tool result over the cap carries the marker).
        last = sessions.turns(P, A, session)[-6:]
        for t in last:
            if t.is_tool:
                assert t.result is not None
                body = t.result.content
                assert body in text or "tokens omitted]" in text
            else:
                assert t.head.content in text
    assert compactions >= 10
    assert max_used <= budget.available
    # No record was lost: every appended record is still in the store, unchanged.
    stored = engine.store.get_many(P, list(appended))
    assert len(stored) == len(appended)
    assert all(r.content == appended[r.id] for r in stored)
    # Compaction changes views, not records: no appended record got a status.
    assert {r.status for r in stored} == {None}
    # Memory was flushed to the workspace on the way.
    assert (tmp_path / "ws" / "memory.md").is_file()


turn_kinds = st.sampled_from(["user", "assistant", "tool", "correction", "instruction", "big"])


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    script=st.lists(st.tuples(turn_kinds, st.integers(1, 400)), min_size=1, max_size=60),
    keep=st.integers(4, 8),
    window=st.integers(3_000, 8_192),
)
def test_session_invariants(script: list[tuple[str, int]], keep: int, window: int) -> None:
    engine = Engine.open("memory://", workers=1)
    try:
        sessions = engine.sessions
        sessions.config = SessionConfig(keep_turns=keep, tool_result_cap=600, summary_tokens=300)
        budget = Budget(model="gpt-4", window=window)
        ids: list[str] = []
        protected: list[str] = []
        for n, (kind, size) in enumerate(script):
            words = " ".join(f"w{n}x{k}" for k in range(size))
            if kind == "tool" or kind == "big":
                c = sessions.append(
                    P, A, S, "tool_call", "call", tool="read_file", arguments={"path": f"f{n}.py"}
                )
                body = words * (8 if kind == "big" else 1)
                r = sessions.append(P, A, S, "tool_result", body, reply_to=c.id)
                ids += [c.id, r.id]
                continue
            if kind == "correction":
                content = f"Correction: item {n} is {size}."
            elif kind == "instruction":
                content = f"Pinned rule {n}: keep answers short."
            else:
                content = f"{kind} turn {n}: {words[:300]}"
            role = {"correction": "user", "instruction": "instruction"}.get(kind, kind)
            rec = sessions.append(P, A, S, role, content)
            ids.append(rec.id)
            if kind in ("correction", "instruction"):
                protected.append(content)
        before = engine.store.count(P)
        win = sessions.window(P, A, S, budget=budget)
        assert win.tokens <= win.assembly.available
        assert_pairs_whole(win.messages)
        assert engine.store.count(P) >= before
        assert len(engine.store.get_many(P, ids)) == len(ids)
        text = "\n".join(contents(win))
        if win.reset is None:
            for p in protected:
                assert p in text
            kept_n = 2 if any(s["step"] == "emergency_compaction" for s in win.steps) else keep
            for t in sessions.turns(P, A, S)[-kept_n:]:
                if not t.is_tool and not t.is_summary:
                    assert t.head.content in text
        json.dumps(win.to_dict(), default=str)
    finally:
        engine.close()
