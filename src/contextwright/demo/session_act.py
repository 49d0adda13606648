"""Demo act: one long session, compacted. A developer agent works through 60 turns of a landing
page with large tool results, a correction and a pinned instruction; the gauge climbs past the
70% hint, the next window compacts it, and the gauge is shown again, with the summary that
replaced the older turns and proof that the correction and the instruction survived.

    from contextwright.demo.session_act import run
    run(Engine.open("memory://"), console=None)
"""

from __future__ import annotations

from typing import Any

from ..budget import Budget
from ..engine import Engine
from ..sessions import SessionConfig

PROJECT = "landing-page"
AGENT = "dev"
SESSION = "long-session"
SYSTEM = "You are dev, a frontend engineer. Keep changes small and tested."
BUDGET = Budget(model="gpt-4", window=8_192)


def _say(console: Any, kind: str, *args: Any) -> None:
    if console is None:
        print(*args)
    else:
        getattr(console, kind)(*args)


def _work(engine: Engine) -> None:
    s = engine.sessions
    s.append(
        PROJECT, AGENT, SESSION, "instruction", "Always use Tailwind classes; never inline styles."
    )
    for i in range(60):
        if i == 12:
            s.append(
                PROJECT, AGENT, SESSION, "user", "Actually, I meant a three-column footer, not two."
            )
        s.append(
            PROJECT,
            AGENT,
            SESSION,
            "user",
            f"Step {i}: update section {i} of src/routes/+page.svelte.",
        )
        call = s.append(
            PROJECT,
            AGENT,
            SESSION,
            "tool_call",
            "read",
            tool="read_file",
            arguments={"path": f"src/lib/Section{i}.svelte"},
        )
        body = "\n".join(f'<div class="grid gap-{j % 8}">item {j}</div>' for j in range(60 + i * 3))
        s.append(PROJECT, AGENT, SESSION, "tool_result", body, reply_to=call.id)
        s.append(
            PROJECT,
            AGENT,
            SESSION,
            "assistant",
            f"Updated src/lib/Section{i}.svelte with {60 + i * 3} items.",
        )
    test = s.append(
        PROJECT, AGENT, SESSION, "tool_call", "test", tool="pytest", arguments={"args": "-q"}
    )
    s.append(PROJECT, AGENT, SESSION, "tool_result", "42 passed in 3.1s", reply_to=test.id)


def run(engine: Engine, console: Any) -> None:
    engine.sessions.config = SessionConfig(keep_turns=6, tool_result_cap=1_500)
    _say(console, "rule", "One long session, compacted (spec 2: context management)")
    _work(engine)
    demand = engine.sessions.gauge(PROJECT, AGENT, SESSION, budget=BUDGET, system=SYSTEM)
    before = engine.sessions.breakdown(PROJECT, AGENT, SESSION, budget=BUDGET, system=SYSTEM)
    _say(console, "text", f"before: {demand.bar()}  (the whole session, uncompacted)")
    _say(
        console,
        "table",
        "Tokens per layer in a window built before compaction (older turns fall off)",
        ["layer", "tokens"],
        [[k, str(v)] for k, v in before.layers.items() if v],
    )
    win = engine.sessions.window(PROJECT, AGENT, SESSION, budget=BUDGET, system=SYSTEM)
    _say(console, "text", f"after:  {win.gauge.bar()}")
    for step in win.steps:
        _say(console, "text", f"step: {step['step']} ({step.get('replaced', 0)} records replaced)")
    for c in win.compactions:
        if c.summary is not None:
            _say(
                console,
                "panel",
                f"{c.summary.kind} {c.summary.id} ({c.trigger})",
                c.summary.content[:1_200],
            )
            _say(
                console,
                "text",
                f"history tokens {c.tokens_before:,} -> {c.tokens_after:,}; "
                f"{len(c.replaced)} records left the window and stay in the store, marked compacted",
            )
    text = "\n".join(str(m.get("content") or "") for m in win.messages)
    kept = [
        ("pinned instruction", "never inline styles" in text),
        ("correction", "three-column footer, not two" in text),
        ("test evidence", "42 passed" in text),
    ]
    _say(
        console,
        "table",
        "Still in the window",
        ["what", "kept"],
        [[k, "yes" if v else "NO"] for k, v in kept],
    )
    _say(
        console,
        "text",
        f"window: {win.tokens:,} tokens in {len(win.messages)} messages "
        f"(budget {win.assembly.available:,}); trace {win.assembly.trace.id}",
    )
