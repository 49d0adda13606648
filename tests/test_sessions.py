"""Sessions on real stores: layers and diagnostics, compaction, memory flush, reset, overflow
recovery, provider errors and token accounting."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright import Budget, ContextOverflow, Engine, ValidationError
from contextwright.assembly.render import count_openai
from contextwright.ports import Query
from contextwright.sessions import SessionConfig
from contextwright.sessions.layers import tools_tokens
from contextwright.sessions.turns import SESSION_KINDS
from contextwright.testing import ScriptedSummarizer

P, A, S = "acme", "dev", "s1"
SYSTEM = "You are dev. Follow the house rules."


def fill(engine: Engine, turns: int, session: str = S, big: int = 40) -> list[str]:
    s = engine.sessions
    ids = []
    for i in range(turns):
        ids.append(s.append(P, A, session, "user", f"Please build page {i} in src/page{i}.tsx.").id)
        call = s.append(
            P,
            A,
            session,
            "tool_call",
            "read",
            tool="read_file",
            arguments={"path": f"src/page{i}.tsx"},
        )
        body = "\n".join(f"export const line{j} = {j};" for j in range(big))
        ids += [call.id, s.append(P, A, session, "tool_result", body, reply_to=call.id).id]
        ids.append(
            s.append(P, A, session, "assistant", f"We decided to use Tailwind for page {i}.").id
        )
    return ids


def test_append_validates_and_leaves_the_store_untouched(engine: Engine) -> None:
    s = engine.sessions
    s.append(P, A, S, "user", "hello")
    before = engine.store.count(P)
    with pytest.raises(ValidationError) as e:
        s.append(P, A, S, "wizard", "hi")
    assert e.value.field == "role" and "use one of" in e.value.fix
    with pytest.raises(ValidationError) as e:
        s.append(P, A, S, "tool_result", "orphan")
    assert e.value.field == "reply_to"
    with pytest.raises(ValidationError) as e:
        s.append(P, A, S, "tool_call", "x")
    assert e.value.field == "tool"
    with pytest.raises(ValidationError) as e:
        s.append(P, A, S, "user", "   ")
    assert e.value.field == "content"
    with pytest.raises(ValidationError):
        s.compact(P, A, S, keep=3)
    with pytest.raises(ValidationError):
        SessionConfig(keep_turns=9)
    with pytest.raises(ValidationError):
        SessionConfig(threshold=1.5)
    assert engine.store.count(P) == before


def test_tool_result_pairs_with_the_pending_call(engine: Engine) -> None:
    s = engine.sessions
    call = s.append(P, A, S, "tool_call", "ls", tool="ls", arguments={"dir": "."})
    result = s.append(P, A, S, "tool_result", "a.py b.py")
    assert result.reply_to == call.id
    turns = s.turns(P, A, S)
    assert len(turns) == 1 and turns[0].ids == [call.id, result.id]


def test_breakdown_layers_add_up_and_files_are_flagged(engine: Engine, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "soul.md").write_text("Be kind and precise.")
    (ws / "user.md").write_text("The user is Ana; she prefers TypeScript.")
    (ws / "big.py").write_text("\n".join(f"x{i} = {i}  # a long line of code" for i in range(2000)))
    (ws / "small.py").write_text("print('hi')\n")
    engine.sessions.config = SessionConfig(workspace=ws, file_cap=300)
    fill(engine, 3)
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    bd = engine.sessions.breakdown(
        P,
        A,
        S,
        budget=Budget(model="gpt-4", window=8192),
        system=SYSTEM,
        tools=tools,
        skills=["Skill: write tests first."],
        files=["big.py", "small.py"],
    )
    assert bd.layers["system"] > 0 and bd.layers["personalization"] > 0
    assert bd.layers["history"] > 0 and bd.layers["tool_results"] > 0 and bd.layers["files"] > 0
    # The spec's diagnostics count the system prompt, tool definitions and skills apart.
    counter = engine.counter
    assert bd.layers["system"] == counter.count(SYSTEM) + 1
    assert bd.layers["skills"] == counter.count("Skill: write tests first.") + 1
    assert bd.layers["tools"] == tools_tokens(tools, counter) > 0
    assert bd.budget["system"] == bd.layers["system"] + bd.layers["tools"] + bd.layers["skills"]
    assert bd.budget["window"] == 8192 and bd.budget["reserved_response"] == 1024
    assert bd.budget["available_for_history_and_workspace"] < bd.budget["available"]
    flags = {f.path: f for f in bd.files}
    assert flags["big.py"].truncated and flags["big.py"].original_tokens > 300
    assert not flags["small.py"].truncated and flags["small.py"].included
    assert flags["soul.md"].layer == "personalization"
    assert bd.gauge.used <= bd.gauge.limit
    assert sum(v for k, v in bd.layers.items()) == bd.gauge.used


def test_gauge_hint_fires_past_the_threshold(engine: Engine) -> None:
    fill(engine, 2)
    budget = Budget(model="gpt-4", window=8192)
    low = engine.sessions.gauge(P, A, S, budget=budget)
    assert not low.compaction_hint and 0 < low.fraction < 0.5
    fill(engine, 80, big=10)
    high = engine.sessions.gauge(P, A, S, budget=budget)
    assert high.compaction_hint and high.history_fraction > 0.7
    assert "compaction suggested" in high.bar()


def test_compaction_keeps_last_n_and_points_at_what_it_replaced(engine: Engine) -> None:
    s = engine.sessions
    ids = fill(engine, 5)
    s.append(P, A, S, "user", "Actually, I meant page 9, not page 3.")
    s.append(P, A, S, "instruction", "Never touch the payments module.")
    ids += fill(engine, 3)
    before = engine.store.count(P)
    c = s.compact(P, A, S, keep=4)
    assert c.compacted and c.summary is not None
    assert c.summary.content.startswith("## Session Summary (compacted)\n- ")
    assert c.summary.kind == "summary" and set(c.summary.meta["replaces"]) == set(c.replaced)
    assert set(c.replaced) <= set(ids)
    # Originals stay in the store, unchanged (no status either): the replacement is this agent's
    # view only; nothing was deleted.
    assert engine.store.count(P) >= before + 1
    for r in engine.store.get_many(P, c.replaced):
        assert r.status is None
    live = s.turns(P, A, S)
    texts = [t.head.content for t in live]
    assert "Actually, I meant page 9, not page 3." in texts
    assert "Never touch the payments module." in texts
    convo = [t for t in live if not t.is_summary and not t.protected]
    assert len(convo) == 4
    # Pairs stay whole: every live tool call has its result.
    assert all(len(t.records) == 2 for t in live if t.is_tool)
    # The window includes the summary, and the history source skips compacted records too.
    win = s.window(P, A, S, budget=Budget(model="gpt-4", window=8192))
    text = "\n".join(str(m.get("content")) for m in win.messages)
    assert "## Session Summary (compacted)" in text
    asm = engine.assemble(P, A, "", session=S, sources=["history"])
    assert not {i.candidate.key for i in asm.sections["history"]} & set(c.replaced)
    # Compacting again with nothing older than the window is a no-op.
    again = s.compact(P, A, S, keep=8)
    assert not again.compacted


def test_slash_compact_and_scripted_summarizer(engine: Engine) -> None:
    scripted = ScriptedSummarizer(["- User built pages 0-5.\n- Chose Tailwind."])
    engine.sessions.summarizer = scripted
    fill(engine, 6)
    cmd = engine.sessions.append(P, A, S, "user", "/compact")
    assert cmd.status == "compacted"
    assert len(scripted.calls) == 1
    texts = scripted.calls[0]["texts"]
    assert isinstance(texts, list) and any("[tool: read_file(" in t for t in texts)
    summary = engine.store.query(Query(P, A, kinds=("summary",), session=S, limit=5))
    assert summary and "- Chose Tailwind." in summary[0].content
    assert "manual" in summary[0].tags


def test_memory_flush_writes_records_and_files_once(engine: Engine, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    engine.sessions.config = SessionConfig(workspace=ws)
    s = engine.sessions
    s.append(P, A, S, "user", "I prefer concise responses, no emojis.")
    s.append(P, A, S, "assistant", "We decided to use Tailwind over styled-components.")
    s.append(P, A, S, "assistant", "The landing page lives at src/routes/+page.svelte now.")
    s.append(P, A, S, "user", "This repo uses conventional commits.")
    first = s.flush(P, A, S)
    cats = sorted(n.category for n in first.notes)
    assert cats == ["artifact", "decision", "pattern", "preference"]
    assert len(first.records) == 4 and all(r.kind == "memory" for r in first.records)
    memory_md = (ws / "memory.md").read_text()
    assert "- [decision] We decided to use Tailwind over styled-components." in memory_md
    daily = list((ws / "memory").glob("*.md"))
    assert len(daily) == 1 and "conventional commits" in daily[0].read_text()
    again = s.flush(P, A, S)
    assert again.records == [] and again.skipped_duplicates == 4
    assert (ws / "memory.md").read_text() == memory_md
    # Later sessions find them by relevance (they are records, so full text finds them).
    hits = engine.store.search_text(P, A, "tailwind styled components", 5)
    assert any(h.record.kind == "memory" for h in hits)
    win = s.window(
        P, A, "s2", "style the page with tailwind", budget=Budget(model="gpt-4", window=8192)
    )
    assert any("Tailwind over styled-components" in str(m.get("content")) for m in win.messages)


def test_compaction_flushes_memory_first(engine: Engine) -> None:
    s = engine.sessions
    s.append(P, A, S, "assistant", "We decided to use SQLite for the cache.")
    fill(engine, 8)
    c = s.compact(P, A, S)
    assert c.flush is not None
    assert any("SQLite" in n.text for n in c.flush.notes)


def test_reset_transfers_outcome_and_discards_raw_tool_output(engine: Engine) -> None:
    s = engine.sessions
    fill(engine, 4, big=200)
    s.append(P, A, S, "assistant", "We decided to ship the dark theme.")
    r = s.reset(P, A, S)
    assert r.new_session != S
    assert r.transfer.content.startswith(f"## Session Summary (transferred from session {S})")
    assert "export const line150" not in r.transfer.content
    with pytest.raises(ValidationError) as e:
        s.append(P, A, S, "user", "hello?")
    assert r.new_session in e.value.fix
    win = s.window(P, A, r.new_session, budget=Budget(model="gpt-4", window=8192))
    text = "\n".join(str(m.get("content")) for m in win.messages)
    assert "transferred from session" in text and "export const line150" not in text
    with pytest.raises(ValidationError):
        s.reset(P, A, r.new_session, new_session=r.new_session)


def test_overflow_ladder_climbs_and_records_each_step(engine: Engine) -> None:
    s = engine.sessions
    s.config = SessionConfig(tool_result_cap=1_200)
    fill(engine, 12, big=400)
    win = s.window(P, A, S, budget=Budget(model="gpt-4", window=4_000), system=SYSTEM)
    names = [step["step"] for step in win.steps]
    assert "emergency_compaction" in names
    assert win.tokens <= win.assembly.available
    stored = engine.trace(P, win.assembly.trace.id)
    assert [x["step"] for x in stored.notes["session"]["steps"]] == names


def test_a_system_prompt_that_cannot_fit_raises_and_leaves_the_session_open(
    engine: Engine,
) -> None:
    s = engine.sessions
    fill(engine, 8)
    before = [r.id for r in s.live_records(P, A, S)]
    count = engine.store.count(P)
    huge = "Rule: " + " ".join(f"rule{i}" for i in range(5_000))
    with pytest.raises(ContextOverflow) as e:
        s.window(P, A, S, budget=Budget(model="gpt-4", window=2_000), system=huge)
    assert e.value.error_type == "context_overflow"
    assert "system prompt" in e.value.message and "shorten the system prompt" in e.value.message
    assert e.value.breakdown["layers"]["system"] > 1_500 and e.value.breakdown["steps"] == []
    # Nothing was compacted, flushed or reset: the caller's session is as it was, and open.
    assert engine.store.count(P) == count
    assert [r.id for r in s.live_records(P, A, S)] == before
    s.append(P, A, S, "user", "Still here?")
    # A provider's limit that the system prompt alone exceeds does not compact either.
    error = {"error": {"message": "prompt is too long: 9000 tokens > 1000 maximum"}}
    with pytest.raises(ContextOverflow):
        s.handle_provider_error(
            P, A, S, error, budget=Budget(model="gpt-4", window=8_192), system=huge[:20_000]
        )
    assert engine.store.count(P) == count + 1
    assert s.window(P, A, S, budget=Budget(model="gpt-4", window=8_192)).session == S


def test_the_ladder_resets_only_when_the_reset_would_fit(engine: Engine) -> None:
    s = engine.sessions
    system = "Rule: " + " ".join(f"rule{i}" for i in range(700))  # fits, with little room left
    fill(engine, 2)
    correction = "Actually, I meant: " + " ".join(f"thing{i}" for i in range(1_200))
    s.append(P, A, S, "correction", correction)  # required, and too big for any window here
    fill(engine, 6)
    with pytest.raises(ContextOverflow) as e:
        s.window(P, A, S, budget=Budget(model="gpt-4", window=2_000), system=system)
    steps = e.value.breakdown["steps"]
    assert steps[-1]["step"] == "session_reset" and "would not make it fit" in steps[-1]["skipped"]
    assert "a session reset would not make it fit" in e.value.message
    s.append(P, A, S, "user", "The session is still open.")
    # With a small system prompt the transfer summary fits: the ladder resets, as the spec says.
    s.config = SessionConfig(summary_tokens=64)
    win = s.window(P, A, S, budget=Budget(model="gpt-4", window=2_000), system=SYSTEM)
    assert win.reset is not None and win.session == win.reset.new_session != S
    assert [st["step"] for st in win.steps][-1] == "session_reset"


def test_provider_overflow_is_retargeted_to_the_reported_limit(engine: Engine) -> None:
    s = engine.sessions
    fill(engine, 10, big=100)
    budget = Budget(model="gpt-4", window=8192)
    sent = s.window(P, A, S, budget=budget)
    error = {
        "error": {
            "message": f"This model's maximum context length is 4000 tokens. However, your "
            f"messages resulted in {sent.total_tokens + 300} tokens.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    }
    win = s.handle_provider_error(P, A, S, error, budget=budget, sent_tokens=sent.total_tokens)
    assert win.steps[0]["step"] == "provider_overflow" and win.steps[0]["limit"] == 4000
    assert win.total_tokens * (sent.total_tokens + 300) / sent.total_tokens <= 4000 - 0
    anthropic = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 9000 tokens > 6000 maximum",
        },
    }
    win2 = s.handle_provider_error(P, A, S, anthropic, budget=budget)
    assert win2.total_tokens <= 6000
    with pytest.raises(ValidationError) as e:
        s.handle_provider_error(P, A, S, {"error": {"message": "rate limit"}}, budget=budget)
    assert e.value.field == "error"


def test_rendered_count_matches_provider_rule_and_calibration(engine: Engine) -> None:
    s = engine.sessions
    fill(engine, 3)
    win = s.window(P, A, S, budget=Budget(model="gpt-4", window=8192), system=SYSTEM)
    assert win.tokens == count_openai(win.messages, engine.counter)
    cal = s.calibrate(win, {"prompt_tokens": win.total_tokens + 10, "completion_tokens": 5})
    assert cal.delta == 10 and cal.ours == win.total_tokens and cal.samples == 1
    cal2 = s.calibrate(win, {"input_tokens": win.total_tokens})
    assert cal2.samples == 2 and cal2.mean_ratio > 1.0
    with pytest.raises(ValidationError):
        s.calibrate(win, {"completion_tokens": 5})
    assert engine.trace(P, win.assembly.trace.id).notes["session"]["calibration"]["samples"] == 2


def test_compaction_never_grows_history(engine: Engine) -> None:
    s = engine.sessions
    for i in range(12):
        s.append(P, A, S, "user" if i % 2 == 0 else "assistant", f"ok {i}")
    before = [r.id for r in s.live_records(P, A, S)]
    c = s.compact(P, A, S)
    assert not c.compacted and c.tokens_after == c.tokens_before
    assert c.skipped is not None and "kept them as they are" in c.skipped
    assert c.to_dict()["skipped"] == c.skipped
    assert [r.id for r in s.live_records(P, A, S)] == before
    assert not engine.store.query(Query(P, A, kinds=("summary",), session=S, limit=5))
    # The window's own compaction says so in its steps and its trace.
    win = s.window(P, A, S, budget=150)
    skipped = [st for st in win.steps if st.get("skipped")]
    assert skipped and skipped[0]["step"] == "auto_compaction"
    assert [r.id for r in s.live_records(P, A, S)] == before
    assert engine.trace(P, win.assembly.trace.id).notes["session"]["steps"] == win.steps


@settings(max_examples=25, deadline=None)
@given(lengths=st.lists(st.integers(1, 120), min_size=1, max_size=24))
def test_compaction_never_writes_a_longer_history(lengths: list[int]) -> None:
    engine = Engine.open("memory://")
    s = engine.sessions
    for i, n in enumerate(lengths):
        s.append(P, A, S, "user" if i % 2 == 0 else "assistant", " ".join(["page"] * n) + f" {i}")
    c = s.compact(P, A, S, keep=4)
    assert c.tokens_after <= c.tokens_before
    if c.compacted:
        replaced = sum(r.tokens for r in engine.store.get_many(P, c.replaced))
        assert sum(x.tokens for x in c.summaries) < replaced
    engine.close()


def test_undo_restores_the_window_before_compaction_exactly(engine: Engine) -> None:
    s = engine.sessions
    budget = Budget(model="gpt-4o", window=32_000)
    fill(engine, 5)
    s.append(P, A, S, "correction", "Actually, I meant page 9, not page 3.")
    engine.add(
        project=P, author=A, kind="note", session=S, visibility="private", content="my own note"
    )
    fill(engine, 4)

    def window() -> list[dict[str, object]]:
        win = s.window(P, A, S, budget=budget, system=SYSTEM)
        assert not win.compactions  # the budget is wide: nothing compacts on its own
        return win.messages

    before = window()
    first = s.compact(P, A, S, keep=4)
    assert first.compacted and len(first.summaries) == 2  # the project's and the private one
    assert window() != before
    assert s.undo_compaction(P, A, S).restored == first.replaced
    assert window() == before
    # Two compactions, the second folding the first's summaries: undone newest first.
    assert s.compact(P, A, S, keep=4).compacted
    fill(engine, 3)
    middle = window()
    second = s.compact(P, A, S, keep=4)
    assert second.compacted and window() != middle
    # "What was lost": newest first, every replaced record with its kind, author and tokens.
    reports = s.compactions(P, A, S)
    assert [r.trigger for r in reports] == ["manual", "manual"]
    newest = reports[0].to_dict()["summaries"]
    replaced = {x["id"]: x for summary in newest for x in summary["replaced"]}
    assert set(replaced) == set(second.replaced)
    assert {x["kind"] for x in replaced.values()} >= {"summary", "message", "tool_call"}
    assert all(x["tokens"] > 0 and x["author"] for x in replaced.values())
    assert newest[0]["content"] == second.summaries[0].content and newest[0]["kept"]
    # Another agent has no compaction to see or undo, and sees nothing of dev's.
    assert s.compactions(P, "bob", S) == []
    with pytest.raises(ValidationError) as e:
        s.undo_compaction(P, "bob", S)
    assert e.value.field == "session" and "compactions()" in e.value.fix
    undone = s.undo_compaction(P, A, S)
    assert undone.summaries == [x.id for x in second.summaries] and undone.remaining == 1
    assert window() == middle
    s.undo_compaction(P, A, S)
    q = Query(P, A, kinds=SESSION_KINDS, session=S, limit=1_000, newest_first=False)
    every = engine.store.query(q)
    turns = [r.id for r in every if r.kind != "summary" and "command" not in r.tags]
    assert [r.id for r in s.live_records(P, A, S)] == turns
    assert s.compactions(P, A, S) == []
    with pytest.raises(ValidationError):
        s.undo_compaction(P, A, S)


def test_undo_on_the_plain_assemble_path_too(engine: Engine) -> None:
    s = engine.sessions
    fill(engine, 8)
    plain = engine.assemble(P, A, "", session=S, sources=["history"], budget=16_000).messages
    s.compact(P, A, S, keep=4)
    assert (
        engine.assemble(P, A, "", session=S, sources=["history"], budget=16_000).messages != plain
    )
    s.undo_compaction(P, A, S)
    assert (
        engine.assemble(P, A, "", session=S, sources=["history"], budget=16_000).messages == plain
    )
