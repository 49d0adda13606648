"""Run the demo: `python -m contextwright.demo` (what `make demo` does). See the package docstring
for how the acts work and how to add one."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..budget import Budget
from ..engine import Engine
from ..stores.sqlite import store_files
from . import scenario, session_act, tasks_act
from .show import Console, make_console, show_budget, show_trace, show_window

Act = Callable[[Engine, Console], None]


@dataclass(frozen=True)
class View:
    """One agent's turn to be shown: who, doing what, in which format."""

    agent: str
    task: str
    format: str


VIEWS = [
    View("dev", "Fix the refresh race when two browser tabs refresh at once", "openai"),
    View("rex", "Review PR #42: opaque session tokens instead of JWTs", "anthropic"),
    View(
        "pam", "Write the release status update: tokens, webhook retries, EU invoices", "markdown"
    ),
]
BUDGET = Budget(model="gpt-4o", window=6000, reserve=1000)
FULL = False  # set by --full: print windows without clipping


def act_team_week(engine: Engine, console: Console) -> None:
    """Replay the week and say what was written."""
    console.rule("A product team's week, replayed into the store")
    t0 = time.perf_counter()
    out = scenario.replay(engine)
    ms = (time.perf_counter() - t0) * 1000
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(out.kinds.items(), key=lambda kv: -kv[1]))
    console.text(
        f"{out.records} records from {', '.join(f'{a} ({r})' for a, r in scenario.TEAM.items())} "
        f"over {scenario.DAYS} days, written in {ms:.0f} ms to {engine.store.url}"
    )
    console.text(f"kinds: {kinds}")
    console.text(
        f"superseded decisions: {', '.join(out.superseded)}; private notes: {len(out.private)}; "
        f"direct messages: {len(out.direct)}"
    )


def act_three_windows(engine: Engine, console: Console) -> None:
    """Each view's window, its budget breakdown and its trace summary."""
    for view in VIEWS:
        agent = engine.agent(scenario.PROJECT, view.agent)
        console.rule(f"{view.agent} ({agent.role}): {view.task}")
        result = engine.assemble(
            scenario.PROJECT,
            view.agent,
            view.task,
            BUDGET,
            format=view.format,
            session=f"{view.agent}-day5",
        )
        show_window(console, f"Window for {view.agent}", result, full=FULL)
        show_budget(console, result)
        show_trace(console, engine.trace(scenario.PROJECT, result.trace.id, view.agent))


def act_computed_context(engine: Engine, console: Console) -> None:
    """A project of tasks with handoffs, and the computed context a later task receives."""
    console.rule("Computed context for a task (spec 3)")
    tasks_act.run(engine, console)


def act_long_session(engine: Engine, console: Console) -> None:
    """One long session compacted, with the gauge before and after."""
    session_act.run(engine, console)


ACTS: list[Act] = [act_team_week, act_three_windows, act_computed_context, act_long_session]


def open_fresh(directory: str) -> Engine:
    """A new SQLite file in `directory` (any earlier demo file is deleted first)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "team.db")
    for f in store_files(path):  # the store, its traces, and their logs
        if os.path.exists(f):
            os.remove(f)
    # Full text alone: the acts assemble right after adding, and with vectors each window would
    # depend on how far the background embedder had got (vectors.py); the printout must not.
    return Engine.open(f"sqlite:///{path}", clock=scenario.clock, embedder=None)


def main(argv: list[str] | None = None) -> None:
    global FULL
    parser = argparse.ArgumentParser(prog="python -m contextwright.demo", description=__doc__)
    parser.add_argument("--out", default="demo-out", help="directory for team.db (recreated)")
    parser.add_argument("--plain", action="store_true", help="plain text, even if rich is there")
    parser.add_argument("--full", action="store_true", help="print windows without clipping")
    args = parser.parse_args(argv)
    FULL = args.full
    console = make_console(plain=args.plain)
    t0 = time.perf_counter()
    with open_fresh(args.out) as engine:
        for act in ACTS:
            act(engine, console)
    console.rule(f"Done in {time.perf_counter() - t0:.1f} s; the store is {args.out}/team.db")


if __name__ == "__main__":
    main()
