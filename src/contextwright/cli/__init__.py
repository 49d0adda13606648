"""The `contextwright` command: one click group, a thin layer over the Engine.

Every command opens the store named by `--db` (or CONTEXTWRIGHT_DB), calls one engine method and
prints the result; `--json` prints data as JSON. Errors are one line on stderr and a non-zero exit
code, never a traceback: 1 for bad input or a missing id, 2 for usage errors (click's own).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ..engine import Engine
from ..errors import ContextwrightError
from ..settings import Settings


class Group(click.Group):
    """A click group that turns every error, usage errors too, into one line on stderr."""

    def main(  # type: ignore[override]
        self,
        args: list[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else "contextwright"
            click.echo(f"error: {exc.format_message()} (see '{where} --help')", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            click.echo(f"error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("error: aborted", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except ContextwrightError as exc:
            click.echo(f"error: {exc.message}", err=True)
            ctx.exit(1)
        except (OSError, UnicodeDecodeError) as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(1)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(130)
        except Exception as exc:  # a bug; still one line, with what to report
            click.echo(f"error: unexpected {type(exc).__name__}: {exc}", err=True)
            ctx.exit(3)


class State:
    """Lazily opened engine, shared by the commands of one invocation."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._engine: Engine | None = None
        self.serving = False  # serve and mcp: vectors on by default (settings.embedder "auto")

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            options: dict[str, Any] = {}
            if self.settings.rules_dir:
                options["rules"] = self.settings.rules_dir
            if self.settings.pipelines:
                options["pipelines"] = self.settings.pipelines
            embedder = self.settings.embedder
            if embedder == "auto" and not self.serving:
                # A one-shot command exits before a model would load; the server embeds what
                # it stores when it next runs.
                embedder = "none"
            options["embedder"] = None if embedder == "none" else embedder
            options["assemble_slots"] = self.settings.assemble_slots
            self._engine = Engine.open(self.settings.db, **options)
        return self._engine

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None


def emit(data: Any, as_json: bool, text: str | None = None) -> None:
    if as_json or text is None:
        click.echo(json.dumps(data, indent=2, default=str, ensure_ascii=False))
    else:
        click.echo(text)


pass_state = click.make_pass_decorator(State)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--db",
    metavar="URL",
    default=None,
    help="Store URL: sqlite:///file.db (default, or CONTEXTWRIGHT_DB), memory://, postgresql://...",
)
@click.version_option(package_name="contextwright")
@click.pass_context
def cli(ctx: click.Context, db: str | None) -> None:
    """contextwright: context windows for LLM agents, computed from records, with a trace."""
    settings = Settings.from_env()
    if db:
        settings = settings.with_(db=db)
    state = State(settings)
    ctx.obj = state
    ctx.call_on_close(state.close)


def main(argv: list[str] | None = None) -> None:
    """Console entry point (`contextwright = "contextwright.cli:main"`)."""
    cli.main(args=argv if argv is not None else sys.argv[1:], prog_name="contextwright")


from . import commands, ops, service  # noqa: E402  (registers the commands on `cli`)

__all__ = ["cli", "commands", "main", "ops", "service"]
