"""Data commands: add, import, assemble, task create|complete|context, trace show|list|replay|diff."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ..assembly.render import FORMATS as RENDER_FORMATS
from ..assembly.request import AssembleRequest
from ..budget import Budget
from ..errors import ValidationError
from ..importers import FORMATS, SAMPLE, check_rows, import_rows, read_rows
from ..records import KINDS, VISIBILITIES
from ..tasks.limits import COMPLEXITIES
from . import State, cli, emit, pass_state

json_option = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")


@cli.command()
@click.option("--project", "-p", required=True, help="Project name.")
@click.option("--author", "-a", required=True, help="Agent or person who wrote it.")
@click.option("--kind", "-k", type=click.Choice(KINDS), default="message", show_default=True)
@click.option("--to", multiple=True, help="Recipient (repeat for several).")
@click.option("--visibility", type=click.Choice(VISIBILITIES), default=None)
@click.option("--tag", "tags", multiple=True, help="Tag (repeat for several).")
@click.option("--session", default=None)
@click.option("--pinned", is_flag=True)
@click.argument("content", required=False)
@json_option
@pass_state
def add(
    state: State,
    project: str,
    author: str,
    kind: str,
    to: tuple[str, ...],
    visibility: str | None,
    tags: tuple[str, ...],
    session: str | None,
    pinned: bool,
    content: str | None,
    as_json: bool,
) -> None:
    """Store one record. CONTENT is the text ('-' or nothing reads stdin)."""
    if content is None or content == "-":
        # The newline that ends the piped text (echo, a file's last line) is not part of it.
        content = sys.stdin.read().removesuffix("\n").removesuffix("\r")
    fields: dict[str, Any] = {
        "project": project,
        "author": author,
        "kind": kind,
        "content": content,
        "to": list(to) or None,
        "visibility": visibility,
        "tags": list(tags) or None,
        "session": session,
        "pinned": pinned,
    }
    record = state.engine.add(**{k: v for k, v in fields.items() if v is not None})
    emit(record.to_dict(), as_json, record.id)


@cli.command("import")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option(
    "--project",
    "-p",
    required=True,
    help=f"Project to import into; with --format locomo, {SAMPLE} in it (e.g. 'loco-{SAMPLE}') "
    "puts each sample in a project of its own.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="jsonl",
    show_default=True,
    help="jsonl (one record per line), openai (chat export) or locomo.",
)
@click.option("--batch", default=500, show_default=True, type=click.IntRange(1, 10_000))
@click.option(
    "--skip-invalid",
    is_flag=True,
    help="Store the valid rows and report the others (default: a bad row stores nothing).",
)
@json_option
@pass_state
def import_(
    state: State, path: str, project: str, fmt: str, batch: int, skip_invalid: bool, as_json: bool
) -> None:
    """Import records from a file, with a progress bar; report what was stored, skipped and
    refused. A row that cannot be stored refuses the whole file unless --skip-invalid."""
    rows = read_rows(path, fmt, project)
    if not skip_invalid and check_rows(rows):
        import_rows(state.engine, rows)  # raises before the bar is drawn, naming the first row
    with click.progressbar(
        length=len(rows), label=f"importing {len(rows)} rows", file=sys.stderr
    ) as bar:
        report = import_rows(
            state.engine, rows, batch=batch, skip_invalid=skip_invalid, progress=bar.update
        )
    emit(report.to_dict(), as_json, report.summary())


def _budget(budget: str | None, model: str | None, reserve: int | None) -> Budget | int | None:
    """A bare --budget is the tokens available for the window, as in the library, HTTP and MCP
    (docs/tokens.md); --model and --reserve instead give the model's window minus a reserve."""
    if budget is None:
        return (
            None if model is None and reserve is None else Budget(model or "gpt-4o", None, reserve)
        )
    try:
        available = int(budget)
    except ValueError:
        raise ValidationError("--budget", budget, "give the tokens available, e.g. 4000") from None
    if model is not None or reserve is not None:
        raise ValidationError(
            "--budget",
            budget,
            "give either --budget (the tokens available for the window) or --model/--reserve "
            "(the model's window less the reserve), not both",
        )
    return available


@cli.command()
@click.option("--project", "-p", required=True)
@click.option("--agent", "-a", required=True)
@click.option("--task", "-t", default="", help="What the agent is about to do.")
@click.option(
    "--budget", "-b", default=None, help="Tokens available for the window (default: the role's)."
)
@click.option("--model", default=None, help="Budget by this model's window (instead of -b).")
@click.option("--reserve", type=int, default=None, help="Tokens reserved for the response.")
@click.option("--format", "fmt", type=click.Choice(RENDER_FORMATS), default="markdown")
@click.option("--session", default=None, help="The session pipeline's window for this session.")
@click.option(
    "--task-id",
    default=None,
    help="A task (see 'task create'): adds its computed context; its objective is the task "
    "when --task is empty.",
)
@json_option
@pass_state
def assemble(
    state: State,
    project: str,
    agent: str,
    task: str,
    budget: str | None,
    model: str | None,
    reserve: int | None,
    fmt: str,
    session: str | None,
    task_id: str | None,
    as_json: bool,
) -> None:
    """Assemble an agent's context window and print it (then its warnings and trace summary on
    stderr)."""
    request = AssembleRequest.build(
        project, agent, task, _budget(budget, model, reserve), fmt, session=session, task_id=task_id
    )
    result = state.engine.window(request)  # the session pipeline when a session is named
    if as_json:
        emit(result.to_dict(), True)
        return
    if fmt == "markdown":
        click.echo(result.text)
    else:
        click.echo(json.dumps(result.payload, indent=2, ensure_ascii=False))
    # What the call ran on instead of its configuration: a session window's receipts (overflow
    # steps, a summarizer down) are in no format's text, only in the warnings.
    for said in result.warnings:
        click.echo(f"warning: {said}", err=True)
    click.echo(result.trace.summary(), err=True)


@cli.group()
def trace() -> None:
    """Inspect assembly traces."""


@trace.command("show")
@click.argument("trace_id")
@click.option("--project", "-p", required=True, help="The trace's project.")
@click.option("--agent", "-a", default=None, help="Read it as this agent (its own traces only).")
@json_option
@pass_state
def trace_show(state: State, trace_id: str, project: str, agent: str | None, as_json: bool) -> None:
    """Show one trace of a project: sources, what was kept or dropped, and why."""
    t = state.engine.trace(project, trace_id, agent)
    if as_json:
        emit(t.to_dict(), True)
        return
    lines = [t.summary(), f"task: {t.request.get('task', '')!r}", "sections:"]
    lines += [f"  {name:<15} {tokens:>6} tokens" for name, tokens in t.sections.items()]
    lines.append("items:")
    for item in t.items:
        comps = " ".join(f"{k}={v}" for k, v in item["components"].items())
        lines.append(
            f"  {item['decision']:<9} {item['section']:<13} {item['tokens']:>5}t "
            f"score={item['score']:<7} {item['reason']}  [{comps}]  {item['preview'][:60]!r}"
        )
    click.echo("\n".join(lines))


@trace.command("list")
@click.option("--project", "-p", required=True)
@click.option("--agent", "-a", default=None)
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 1000))
@json_option
@pass_state
def trace_list(state: State, project: str, agent: str | None, limit: int, as_json: bool) -> None:
    """List recent traces of a project (optionally one agent's)."""
    traces = state.engine.traces(project, agent, limit)
    emit(
        [
            {"id": t.id, "agent": t.agent, "tokens": t.tokens, "task": t.request.get("task")}
            for t in traces
        ],
        as_json,
        "\n".join(t.summary() for t in traces) or "no traces",
    )


@trace.command("replay")
@click.argument("trace_id")
@click.option("--project", "-p", required=True, help="The trace's project.")
@click.option("--agent", "-a", default=None, help="Read it as this agent (its own traces only).")
@click.option(
    "--budget", "-b", default=None, help="Other tokens available (default: the trace's budget)."
)
@click.option("--model", default=None, help="Budget by this model's window (instead of -b).")
@click.option("--reserve", type=int, default=None, help="Tokens reserved for the response.")
@click.option("--format", "fmt", type=click.Choice(RENDER_FORMATS), default=None)
@click.option("--source", "sources", multiple=True, help="Run only these sources (repeat).")
@click.option("--task", "-t", default=None, help="Another task text.")
@json_option
@pass_state
def trace_replay(
    state: State,
    trace_id: str,
    project: str,
    agent: str | None,
    budget: str | None,
    model: str | None,
    reserve: int | None,
    fmt: str | None,
    sources: tuple[str, ...],
    task: str | None,
    as_json: bool,
) -> None:
    """Run a stored assembly again, with another budget, format, sources or task; prints the new
    window (or, with --json, the result with its trace)."""
    result = state.engine.replay(
        project,
        trace_id,
        agent,
        budget=_budget(budget, model, reserve),
        format=fmt,
        sources=list(sources) or None,
        task=task,
    )
    emit(
        {**result.to_dict(), "trace": result.trace.to_dict()},
        as_json,
        f"{result.trace.summary()}\nreplay of {trace_id}: new trace {result.trace.id}",
    )


@trace.command("diff")
@click.argument("a")
@click.argument("b")
@click.option("--project", "-p", required=True, help="The traces' project.")
@click.option("--agent", "-a", default=None, help="Read them as this agent (its own traces only).")
@json_option
@pass_state
def trace_diff(
    state: State, a: str, b: str, project: str, agent: str | None, as_json: bool
) -> None:
    """Compare two traces: request changes, tokens per section, and every item whose fate differs."""
    d = state.engine.diff(project, a, b, agent)
    tokens = d["tokens"]
    lines = [f"{a} -> {b}: {tokens['before']} -> {tokens['after']} tokens ({tokens['delta']:+d})"]
    lines += [f"request {k}: {v}" for k, v in (d.get("request") or {}).items()]
    lines += [
        f"  {c.get('before'):<9} -> {c.get('after'):<9} {c.get('key')}"
        for c in d.get("changes") or []
    ]
    emit(d, as_json, "\n".join(lines))


@cli.group()
def task() -> None:
    """Tasks, their completion with a handoff, and their computed context."""


@task.command("create")
@click.option("--project", "-p", required=True)
@click.option("--name", "-n", required=True, help="A short name.")
@click.option("--objective", "-o", required=True, help="What the task must achieve.")
@click.option("--criterion", "criteria", multiple=True, help="An acceptance criterion (repeat).")
@click.option("--type", "type_", default="feature", show_default=True, help="feature, bugfix, ...")
@click.option("--complexity", type=click.Choice(COMPLEXITIES), default="normal", show_default=True)
@click.option("--depends-on", "dependencies", multiple=True, help="A task id (repeat).")
@click.option("--author", default="planner", show_default=True)
@click.option("--assignee", default=None, help="The agent the task is addressed to.")
@json_option
@pass_state
def task_create(
    state: State,
    project: str,
    name: str,
    objective: str,
    criteria: tuple[str, ...],
    type_: str,
    complexity: str,
    dependencies: tuple[str, ...],
    author: str,
    assignee: str | None,
    as_json: bool,
) -> None:
    """Create a task (status open); prints its id."""
    record = state.engine.tasks.create(
        project,
        name,
        objective,
        list(criteria),
        type_,
        complexity,
        list(dependencies),
        author,
        assignee,
    )
    emit(record.to_dict(), as_json, record.id)


@task.command("complete")
@click.argument("task_id")
@click.argument("handoff", type=click.File("r", encoding="utf-8"), default="-")
@click.option("--project", "-p", required=True)
@click.option("--by", default=None, help="Who completes it (default: the assignee or author).")
@json_option
@pass_state
def task_complete(
    state: State, task_id: str, handoff: Any, project: str, by: str | None, as_json: bool
) -> None:
    """Complete a task with its handoff: HANDOFF is a YAML or JSON file ('-' or nothing: stdin)."""
    done = state.engine.tasks.complete(project, task_id, handoff.read(), by=by)
    emit(
        done.to_dict(),
        as_json,
        f"completed {done.task.id}: handoff {done.handoff.id}, {len(done.nodes)} nodes, "
        f"{len(done.files)} file entries",
    )


@task.command("context")
@click.argument("task_id")
@click.option("--project", "-p", required=True)
@click.option("--agent", "-a", default=None, help="As this agent may see it (default: all).")
@click.option("--complexity", type=click.Choice(COMPLEXITIES), default=None)
@click.option(
    "--debug",
    is_flag=True,
    help="Append '## Context Debug' (also on with CONTEXTWRIGHT_DEBUG_CONTEXT=true).",
)
@json_option
@pass_state
def task_context(
    state: State,
    task_id: str,
    project: str,
    agent: str | None,
    complexity: str | None,
    debug: bool,
    as_json: bool,
) -> None:
    """A task's computed context: patterns, warnings, decisions, prior work, code references and
    blocking questions, as markdown (or JSON)."""
    computed = state.engine.tasks.computed_context(
        project, task_id, complexity, debug or state.settings.debug_context, agent=agent
    )
    markdown = computed.render(state.engine.tasks.template)
    emit({**computed.to_dict(), "markdown": markdown}, as_json, markdown.rstrip("\n"))
