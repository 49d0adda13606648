"""Terminal output for the demo: the rendered window, the budget breakdown and the trace summary.

Uses `rich` when it is installed (the `cli` extra) and plain text otherwise; both go through the
small `Console` interface below, so an act never needs to know which one it got.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from typing import Any, Protocol, TextIO

from ..assembly.candidates import SECTIONS
from ..assembly.result import Assembly
from ..traces.trace import Trace

WIDTH = 110


class Console(Protocol):
    def rule(self, title: str) -> None: ...

    def text(self, text: str) -> None: ...

    def panel(self, title: str, body: str) -> None: ...

    def table(self, title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None: ...


class PlainConsole:
    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout

    def _w(self, s: str) -> None:
        self.out.write(s + "\n")

    def rule(self, title: str) -> None:
        self._w("")
        self._w(f"== {title} " + "=" * max(WIDTH - len(title) - 4, 4))

    def text(self, text: str) -> None:
        self._w(text)

    def panel(self, title: str, body: str) -> None:
        self._w(f"+-- {title} " + "-" * max(WIDTH - len(title) - 5, 4))
        for line in body.splitlines() or [""]:
            self._w(f"| {line}")
        self._w("+" + "-" * (WIDTH - 1))

    def table(self, title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        widths = [
            max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
            for i, h in enumerate(headers)
        ]
        self._w(title)
        self._w("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
        self._w("  ".join("-" * w for w in widths))
        for r in rows:
            self._w("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))


class RichConsole:
    def __init__(self) -> None:
        from rich.console import Console as _Console

        # A terminal gets its own width; a pipe or a file gets a fixed one.
        self.console = _Console(highlight=False, width=None if sys.stdout.isatty() else WIDTH + 10)

    def rule(self, title: str) -> None:
        from rich.rule import Rule

        self.console.print()
        self.console.print(Rule(f"[bold]{_esc(title)}"))

    def text(self, text: str) -> None:
        self.console.print(_esc(text))

    def panel(self, title: str, body: str) -> None:
        from rich.panel import Panel

        self.console.print(Panel(_esc(body), title=_esc(title), title_align="left"))

    def table(self, title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        from rich.table import Table

        self.console.print(f"[bold]{_esc(title)}")
        t = Table(show_lines=False)
        for h in headers:
            t.add_column(_esc(h), overflow="fold")
        for r in rows:
            t.add_row(*(_esc(c) for c in r))
        self.console.print(t)


def _esc(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def make_console(plain: bool = False) -> Console:
    """Rich when available and wanted, plain text otherwise."""
    if not plain:
        try:
            return RichConsole()
        except ImportError:
            pass
    return PlainConsole()


def clip(text: str, max_lines: int, width: int = WIDTH - 6) -> str:
    lines = text.splitlines()
    out = [ln if len(ln) <= width else ln[: width - 1] + "…" for ln in lines[:max_lines]]
    if len(lines) > max_lines:
        out.append(f"… ({len(lines) - max_lines} more lines)")
    return "\n".join(out)


def window_parts(result: Assembly) -> list[tuple[str, str]]:
    """The rendered window as (label, text) pairs, in the order the model reads them."""
    if result.format == "markdown":
        return [("markdown", result.text)]
    parts = [("system", result.system)]
    if result.format == "openai":
        for m in result.messages[1:]:
            label = m["role"] + (f" ({m['name']})" if m.get("name") else "")
            if m.get("tool_calls"):
                fn = m["tool_calls"][0]["function"]
                parts.append((label, f"→ {fn['name']}({fn['arguments']})"))
            else:
                parts.append((label, str(m.get("content") or "")))
        return parts
    for m in result.messages:
        for block in m["content"]:
            kind = block["type"]
            if kind == "text":
                body = block["text"]
            elif kind == "tool_use":
                body = f"→ {block['name']}({block['input']})"
            else:
                body = str(block["content"])
            parts.append((f"{m['role']} · {kind}", body))
    return parts


def show_window(console: Console, title: str, result: Assembly, *, full: bool = False) -> None:
    lines = []
    for label, body in window_parts(result):
        if full:
            lines.append(f"[{label}]\n{body}")
            continue
        limit = 40 if label in ("system", "markdown") else 3
        lines.append(f"[{label}]\n{clip(body, limit)}")
    console.panel(f"{title} · {result.format} · {result.tokens} tokens", "\n".join(lines))


def bar(fraction: float, width: int = 30) -> str:
    filled = round(max(0.0, min(fraction, 1.0)) * width)
    return "█" * filled + "·" * (width - filled)


def show_budget(console: Console, result: Assembly) -> None:
    b = result.breakdown()
    avail = b["available"] or 1
    rows = [
        [name, str(tokens), f"{tokens / avail:5.1%}", bar(tokens / avail)]
        for name, tokens in b["sections"].items()
        if name in SECTIONS
    ]
    rows.append(
        [
            "total (rendered)",
            str(b["tokens"]),
            f"{b['used_fraction']:5.1%}",
            bar(b["used_fraction"]),
        ]
    )
    budget = result.trace.budget
    console.table(
        f"Budget: {budget.get('model')} window {b['window']} − reserve {b['reserve']} = "
        f"{b['available']} available (margin {budget.get('margin', 0):.0%})",
        ["section", "tokens", "of available", ""],
        rows,
    )


def _pick_dropped(trace: Trace, n: int) -> list[dict[str, Any]]:
    """A few dropped items that show different reasons: superseded first, then the rest."""
    dropped = sorted(
        trace.dropped, key=lambda i: (not i["reason"].startswith("superseded"), -i["score"])
    )
    seen: dict[str, int] = {}
    picked = []
    for item in dropped:
        reason_kind = re.sub(r"[\w-]*\d[\w-]*", "#", item["reason"])  # ids and numbers aside
        if seen.get(reason_kind, 0) >= 2:
            continue
        seen[reason_kind] = seen.get(reason_kind, 0) + 1
        picked.append(item)
        if len(picked) >= n:
            break
    return picked


def show_trace(console: Console, trace: Trace) -> None:
    rows = [
        [
            s["name"],
            f"{s['ms']:.2f}",
            str(s["candidates"]),
            s.get("cache", "off"),
            s.get("error") or "",
        ]
        for s in trace.sources
    ]
    console.table(
        f"Trace {trace.id}: assembled in {trace.latency_ms:.1f} ms; the sources",
        ["source", "ms", "candidates", "cache", "error"],
        rows,
    )
    kept = len(trace.kept)
    truncated = sum(1 for i in trace.items if i["decision"] == "truncated")
    console.text(
        f"kept {kept} items ({truncated} truncated), dropped {len(trace.dropped)}; "
        f"timings: " + ", ".join(f"{k} {v:.1f} ms" for k, v in trace.timings_ms.items())
    )
    picks = _pick_dropped(trace, 6)
    if picks:
        console.table(
            "Some dropped items, with the reason",
            ["kind", "author", "reason", "preview"],
            [
                [
                    str(i["kind"]),
                    str(i["author"] or "-"),
                    str(i["reason"]),
                    clip(str(i["preview"]).replace("\n", " "), 1, 60),
                ]
                for i in picks
            ],
        )
