"""Operations commands: session gauge|compact|reset, rules check, bench recall."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from . import State, cli, emit, pass_state

json_option = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
session_args = [
    click.option("--project", "-p", required=True),
    click.option("--agent", "-a", required=True),
    click.argument("session"),
]


def with_session_args(fn: Any) -> Any:
    for decorate in reversed(session_args):
        fn = decorate(fn)
    return fn


@cli.group()
def session() -> None:
    """An agent's running session: gauge, compact (undo, list compactions), reset."""


@session.command("gauge")
@with_session_args
@click.option(
    "--budget", "-b", type=click.IntRange(1), default=None, help="Tokens available for the window."
)
@json_option
@pass_state
def session_gauge(
    state: State, project: str, agent: str, session: str, budget: int | None, as_json: bool
) -> None:
    """Tokens the session uses against its window, with the 70% compaction hint."""
    g = state.engine.sessions.gauge(project, agent, session, budget)
    emit(g.to_dict(), as_json, g.bar())


@session.command("compact")
@with_session_args
@click.option("--keep", type=click.IntRange(4, 8), default=None, help="Turns kept verbatim.")
@json_option
@pass_state
def session_compact(
    state: State, project: str, agent: str, session: str, keep: int | None, as_json: bool
) -> None:
    """Flush memory, then summarize all but the last turns of the session."""
    done = state.engine.sessions.compact(project, agent, session, keep=keep)
    data = done.to_dict()
    emit(
        data,
        as_json,
        done.skipped
        or f"compacted {data.get('replaced', 0)} records: {data.get('tokens_before')} -> "
        f"{data.get('tokens_after')} tokens (summary {data.get('summary_id')})",
    )


@session.command("undo")
@with_session_args
@json_option
@pass_state
def session_undo(state: State, project: str, agent: str, session: str, as_json: bool) -> None:
    """Undo the newest compaction: the window is the one before it."""
    done = state.engine.sessions.undo_compaction(project, agent, session)
    emit(
        done.to_dict(),
        as_json,
        f"restored {len(done.restored)} records; {done.remaining} compactions left to undo",
    )


@session.command("compactions")
@with_session_args
@json_option
@pass_state
def session_compactions(
    state: State, project: str, agent: str, session: str, as_json: bool
) -> None:
    """What each compaction replaced and what its summaries kept, newest first."""
    done = [c.to_dict() for c in state.engine.sessions.compactions(project, agent, session)]
    lines = [
        f"{c['trigger']}: {s['id']} ({s['scope']}, {s['tokens']} tokens) replaced "
        f"{len(s['replaced'])} records ({s['replaced_tokens']} tokens)"
        for c in done
        for s in c["summaries"]
    ]
    emit({"compactions": done}, as_json, "\n".join(lines) or "no compactions to show")


@session.command("reset")
@with_session_args
@click.option("--new-session", default=None, help="Name of the new session.")
@json_option
@pass_state
def session_reset(
    state: State, project: str, agent: str, session: str, new_session: str | None, as_json: bool
) -> None:
    """Start a new session with a transfer summary of this one."""
    done = state.engine.sessions.reset(project, agent, session, new_session=new_session)
    data = done.to_dict()
    emit(data, as_json, f"new session {data.get('new_session')}")


@cli.group()
def rules() -> None:
    """Context rules."""


@rules.command("check")
@click.argument("directory", type=click.Path(file_okay=False))
@json_option
def rules_check(directory: str, as_json: bool) -> None:
    """Check every rules file in DIRECTORY; lists every problem with its file, field and fix."""
    from ..errors import ValidationError
    from ..rules.loading import check_rules, load_rules

    if not os.path.isdir(directory):
        raise ValidationError("DIRECTORY", directory, "give an existing directory of *.json rules")
    problems = check_rules(directory)
    if problems:
        emit(
            [p.to_dict() for p in problems],
            as_json,
            "\n".join(p.message for p in problems),
        )
        sys.exit(1)
    loaded = load_rules(directory)
    emit(
        {"rules": [r.to_dict() for r in loaded.rules], "problems": []},
        as_json,
        f"{len(loaded)} rules OK in {directory}",
    )


@cli.group()
def pipelines() -> None:
    """Retrieval pipelines: the sources an assemble call runs, as data (docs/pipelines.md)."""


@pipelines.command("check")
@click.argument("path", type=click.Path())
@json_option
def pipelines_check(path: str, as_json: bool) -> None:
    """Check a pipelines file (or a directory of them) and print the pipelines an engine would
    run with it: the defaults as PATH replaces and extends them. Every problem is listed with
    its file, field and fix."""
    from ..assembly.definitions import check_pipelines, load_pipelines

    problems = check_pipelines(path)
    if problems:
        emit([p.to_dict() for p in problems], as_json, "\n".join(p.message for p in problems))
        sys.exit(1)
    loaded = load_pipelines(path)
    data = {
        "pipelines": [{**p.to_dict(), "file": p.file, "digest": p.digest} for p in loaded],
        "digest": loaded.digest,
        "problems": [],
    }
    emit(data, as_json, f"{len(loaded)} pipelines OK with {path}:\n" + show_pipelines(loaded))


@pipelines.command("default")
def pipelines_default() -> None:
    """Print the packaged default pipelines: a file to copy and edit."""
    from importlib import resources

    text = resources.files("contextwright").joinpath("assembly/default_pipelines.json")
    click.echo(text.read_text(encoding="utf-8"), nl=False)


def show_pipelines(loaded: Any) -> str:
    lines = []
    for p in loaded:
        steps = " -> ".join(
            " ".join([s.step, *(f"{k} {v}" for k, v in s.to_dict().items() if k != "step")])
            for s in p.steps
        )
        off = " (off)" if not p.enabled else ""
        lines.append(f"  {p.name}{off}: {steps}   [{p.file}]")
    return "\n".join(lines)


@cli.group()
def bench() -> None:
    """Benchmarks (recall on real conversations)."""


@bench.command("recall")
@click.option("--dataset", type=click.Choice(["locomo"]), default="locomo", show_default=True)
@click.option("--path", required=True, type=click.Path(dir_okay=False), help="The dataset file.")
@click.option("--budgets", default="500,1000,2000,4000", show_default=True)
@click.option("--methods", default=None, help="Comma-separated (default: all).")
@click.option(
    "--embedder",
    default="auto",
    show_default=True,
    help="auto (the engine's default: minilm where the vectors extra is installed), minilm, "
    "hash or none.",
)
@click.option("--conversations", type=click.IntRange(1), default=None)
@click.option("--questions", type=click.IntRange(1), default=None, help="Per conversation.")
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also draw recall against budget into this PNG (needs the bench extra).",
)
@json_option
def bench_recall(
    dataset: str,
    path: str,
    budgets: str,
    methods: str | None,
    embedder: str,
    conversations: int | None,
    questions: int | None,
    plot_path: str | None,
    as_json: bool,
) -> None:
    """Recall of evidence turns inside the window, per budget, against baselines: tokens used,
    recall per question category, and the share of questions whose evidence fits the budget."""
    from ..evals import recall

    kwargs: dict[str, Any] = {
        "embedder": None if embedder == "none" else embedder,
        "conversations": conversations,
        "questions": questions,
        "progress": recall.bar,
    }
    if methods:
        kwargs["methods"] = [m.strip() for m in methods.split(",") if m.strip()]
    from ..errors import ValidationError

    if plot_path is not None and not plot_path.lower().endswith(".png"):
        raise ValidationError("--plot", plot_path, "give a file name ending in .png")
    report = recall.run_recall(path, budgets, **kwargs)
    if plot_path is not None:
        report["plot"] = str(recall.plot(report, plot_path))
    emit(report, as_json, recall.table(report))
