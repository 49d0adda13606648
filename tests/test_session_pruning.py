"""Pure parts of sessions: turns, correction detection, pruning, provider errors, summaries."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright.records import Record, build_record
from contextwright.sessions import (
    build_turns,
    is_correction,
    is_evidence,
    one_line,
    parse_provider_error,
)
from contextwright.sessions.compaction import format_summary, select
from contextwright.sessions.pruning import prune_result, truncate_middle
from contextwright.tokens.counter import default_counter

COUNTER = default_counter()
_T = [1_700_000_000.0]


def rec(kind: str = "message", content: str = "hello", **fields: object) -> Record:
    _T[0] += 1
    data = {"project": "p", "author": "dev", "kind": kind, "content": content, "created_at": _T[0]}
    data.update(fields)
    return build_record(data, COUNTER.count)


def pair(
    name: str, args: dict[str, object], result: str, **result_fields: object
) -> tuple[Record, Record]:
    call = rec("tool_call", f"{name} call", meta={"name": name, "arguments": args})
    res = rec("tool_result", result, reply_to=call.id, **result_fields)
    return call, res


@pytest.mark.parametrize(
    "text",
    [
        "Actually, use PostgreSQL instead.",
        "actually: the port is 8080",
        "No, I meant the footer, not the header.",
        "I meant the blue one.",
        "Correction: the deadline is Friday.",
        "Scratch that, keep the old name.",
        "That's wrong, the API is v2.",
        "Fine. But correction: it is 3 columns.",
        "Ok no, I meant the second file",
    ],
)
def test_corrections_are_detected(text: str) -> None:
    assert is_correction(rec(content=text, author="user"))


@pytest.mark.parametrize(
    "text",
    [
        "Please add a footer.",
        "The factual answer is 42.",
        "I am actually happy with it",
        "Meaning of life",
    ],
)
def test_ordinary_messages_are_not_corrections(text: str) -> None:
    assert not is_correction(rec(content=text, author="user"))


def test_correction_by_tag_or_meta() -> None:
    assert is_correction(rec(content="use tabs", tags=["correction"]))
    assert is_correction(rec(content="use tabs", meta={"correction": True}))
    assert not is_correction(rec("tool_result", "Actually, nothing"))


def test_one_line_summaries_are_derived_from_call_and_result() -> None:
    call, res = pair("read_file", {"path": "src/app.ts"}, "\n".join(["x"] * 247))
    assert one_line(call, res) == '[tool: read_file("src/app.ts") → 247 lines, TypeScript]'
    call, res = pair("read_file", {"path": "src/components/App.tsx"}, "\n".join(["x"] * 500))
    assert one_line(call, res) == (
        '[tool: read_file("src/components/App.tsx") → 500 lines, React component]'
    )
    call, res = pair(
        "search_web", {"q": "react hooks best practices"}, "[" + ",".join(['{"a":1}'] * 8) + "]"
    )
    assert one_line(call, res) == '[tool: search_web("react hooks best practices") → 8 results]'
    call, res = pair("write_file", {"path": "src/hooks/useAuth.ts"}, "file written successfully")
    assert one_line(call, res).endswith("→ file written successfully]")
    call, res = pair("run", {"cmd": "make"}, "Error: missing target\nmore")
    assert "error: Error: missing target" in one_line(call, res)


def test_evidence_is_detected_by_tag_tool_and_text() -> None:
    assert is_evidence(*pair("run", {"cmd": "x"}, "whatever", tags=["evidence"]))
    assert is_evidence(*pair("pytest", {"args": "-q"}, "all good"))
    assert is_evidence(*pair("shell", {"cmd": "x"}, "===== 12 passed in 0.3s ====="))
    assert is_evidence(*pair("shell", {"cmd": "x"}, "BUILD SUCCESSFUL in 4s"))
    assert is_evidence(*pair("take_screenshot", {"url": "http://x"}, "saved"))
    assert not is_evidence(*pair("read_file", {"path": "a.py"}, "print('hi')"))


def test_pruning_caps_lines_stale_results_and_keeps_evidence() -> None:
    big = " ".join(f"word{i}" for i in range(3000))
    call, res = pair("read_file", {"path": "notes.txt"}, big)
    fresh = prune_result(call, res, stale=False, purge=False, cap=500, counter=COUNTER)
    assert fresh.how == "truncated" and fresh.tokens <= 500
    assert f"[truncated, {fresh.omitted} tokens omitted]" in fresh.text
    stale = prune_result(call, res, stale=True, purge=False, cap=500, counter=COUNTER)
    assert stale.how == "one_line" and stale.text.startswith("[tool: read_file(")
    ecall, eres = pair("pytest", {"args": "-q"}, "12 passed")
    kept = prune_result(ecall, eres, stale=True, purge=False, cap=500, counter=COUNTER)
    assert kept.how == "verbatim" and kept.text == "12 passed"
    purged = prune_result(call, res, stale=False, purge=True, cap=500, counter=COUNTER)
    assert purged.how == "one_line"


def test_turns_pair_calls_with_results_and_select_keeps_last_n() -> None:
    records = [rec(content="u1", author="user")]
    c1, r1 = pair("read_file", {"path": "a.py"}, "x")
    records += [c1, r1, rec(content="Actually, use b.py", author="user")]
    records += [rec(content=f"turn {i}") for i in range(6)]
    pending = rec("tool_call", "pending", meta={"name": "ls"})
    records.append(pending)
    turns = build_turns(reversed(records))
    assert [len(t.records) for t in turns][:2] == [1, 2]
    sel = select(turns, 4)
    assert [t.head.content for t in sel.kept] == ["turn 3", "turn 4", "turn 5", "pending"]
    assert [t.head.content for t in sel.protected] == ["Actually, use b.py"]
    replaced = {rid for t in sel.replace for rid in t.ids}
    assert {c1.id, r1.id} <= replaced


def test_format_summary_is_the_spec_shape() -> None:
    text = format_summary("* one\n- two\nthree\n\n## heading")
    assert text == "## Session Summary (compacted)\n- one\n- two\n- three"


def test_provider_errors_are_parsed() -> None:
    openai = {
        "error": {
            "message": "This model's maximum context length is 8192 tokens. However, your "
            "messages resulted in 9013 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }
    got = parse_provider_error(openai)
    assert got is not None and (got.provider, got.limit, got.used) == ("openai", 8192, 9013)
    anthropic = (
        '{"type":"error","error":{"type":"invalid_request_error",'
        '"message":"prompt is too long: 208,123 tokens > 200000 maximum"}}'
    )
    got = parse_provider_error(anthropic)
    assert got is not None and (got.provider, got.limit, got.used) == ("anthropic", 200000, 208123)
    assert (
        parse_provider_error({"error": {"message": "rate limited", "code": "rate_limit"}}) is None
    )
    bare = parse_provider_error({"error": {"message": "x", "code": "context_length_exceeded"}})
    assert bare is not None and bare.limit is None


@settings(max_examples=50, deadline=None)
@given(
    kinds=st.lists(st.sampled_from(["msg", "pair", "pending", "correction", "pin"]), max_size=40),
    keep=st.integers(2, 8),
)
def test_select_partitions_turns_and_never_splits_a_pair(kinds: list[str], keep: int) -> None:
    records: list[Record] = []
    for i, k in enumerate(kinds):
        if k in ("pair", "pending"):
            call = rec("tool_call", f"call {i}", meta={"name": "read_file"})
            records.append(call)
            if k == "pair":
                records.append(rec("tool_result", f"result {i}", reply_to=call.id))
        elif k == "correction":
            records.append(rec(content=f"Actually, I meant {i}.", author="user"))
        else:
            records.append(rec(content=f"message {i}", pinned=k == "pin"))
    turns = build_turns(records)
    sel = select(turns, keep)
    parts = [*sel.replace, *sel.summaries, *sel.protected, *sel.kept]
    assert sorted(t.key for t in parts) == sorted(t.key for t in turns)
    assert sorted(r for t in parts for r in t.ids) == sorted(r.id for r in records)
    for t in parts:
        if t.is_tool and t.result is not None:
            assert t.result.reply_to == t.head.id
    assert [t.key for t in sel.kept] == [t.key for t in turns][-keep:] if turns else True
    assert not any(t.protected for t in sel.replace)


@settings(max_examples=50, deadline=None)
@given(
    texts=st.lists(st.text(min_size=1, max_size=300), max_size=30),
    bound=st.integers(1, 300),
)
def test_extractive_summary_stays_within_its_bound(texts: list[str], bound: int) -> None:
    from contextwright.summarizers import ExtractiveSummarizer

    s = ExtractiveSummarizer(COUNTER)
    out = s.summarize(texts, max_tokens=bound)
    assert COUNTER.count(out) <= bound
    assert out == s.summarize(texts, max_tokens=bound)


def test_a_capped_test_log_keeps_its_head_and_its_verdict() -> None:
    lines = [f"tests/test_{i}.py::test_case_{i} PASSED" for i in range(1_200)]
    log = "\n".join(["============ test session starts ============", *lines])
    log += "\n============ 1200 passed in 12.31s ============"
    call, res = pair("shell", {"cmd": "pytest"}, log)
    assert res.tokens > 16_000
    out = prune_result(call, res, stale=False, purge=False, cap=8_000, counter=COUNTER)
    assert out.how == "truncated" and out.tokens <= 8_000
    assert out.text.startswith("============ test session starts ============\n")
    assert out.text.endswith("============ 1200 passed in 12.31s ============")
    head, sep, tail = out.text.partition(f"\n[truncated, {out.omitted} tokens omitted]\n")
    assert sep and log.startswith(head) and log.endswith(tail)
    assert out.omitted == COUNTER.count(log[len(head) : len(log) - len(tail)])
    assert out.omitted > 7_000


@settings(max_examples=60, deadline=None)
@given(text=st.text(min_size=1, max_size=1_500), cap=st.integers(16, 300))
def test_truncate_middle_keeps_a_head_and_a_tail_within_the_cap(text: str, cap: int) -> None:
    out, tokens, omitted = truncate_middle(text, cap, COUNTER)
    assert tokens == COUNTER.count(out)
    if COUNTER.count(text) <= cap:
        assert (out, omitted) == (text, 0)
        return
    assert tokens <= cap
    head, sep, tail = out.partition(f"\n[truncated, {omitted} tokens omitted]\n")
    assert sep and text.startswith(head) and text.endswith(tail)
    assert len(head) + len(tail) <= len(text)
    assert omitted == COUNTER.count(text[len(head) : len(text) - len(tail)])
