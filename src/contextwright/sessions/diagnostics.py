"""Diagnostics an operator reads to know when a session needs compaction.

The budget breakdown (spec 2, section 2): the model window, the reserved response, the system
prompt with tools and skills, personalization, and what is left for history and workspace. Then
tokens per layer (the system prompt, tool definitions and skills each their own), a
per-file flag when a workspace file was cut or left out, the session gauge (used against the
limit), and the compaction hint when history passes the threshold (70% by default) of what history
and workspace may use. Every number comes from the rendered window, so the parts add up to the
exact count.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..assembly.result import Assembly
from .layers import LAYERS, Plan, layer_of


@dataclass(frozen=True)
class Gauge:
    used: int
    limit: int
    window: int
    history: int
    history_available: int
    threshold: float

    @property
    def fraction(self) -> float:
        return round(self.used / self.limit, 4) if self.limit else 0.0

    @property
    def history_fraction(self) -> float:
        return round(self.history / self.history_available, 4) if self.history_available else 1.0

    @property
    def compaction_hint(self) -> bool:
        return self.history_fraction > self.threshold

    def bar(self, width: int = 30) -> str:
        """`[#########.....] 9,120 / 15,361 tokens (59%)`, for terminals."""
        filled = min(width, round(width * self.fraction))
        hint = "  ⚑ compaction suggested" if self.compaction_hint else ""
        return (
            f"[{'#' * filled}{'.' * (width - filled)}] {self.used:,} / {self.limit:,} tokens "
            f"({self.fraction:.0%}); history {self.history_fraction:.0%} of "
            f"{self.history_available:,}{hint}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "fraction": self.fraction,
            "history_fraction": self.history_fraction,
            "compaction_hint": self.compaction_hint,
        }


@dataclass(frozen=True)
class FileReport:
    path: str
    layer: str  # "files" or "personalization"
    tokens: int  # in the window (0 when left out)
    original_tokens: int
    truncated: bool
    included: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Breakdown:
    """Tokens per layer, the budget, per-file flags and the gauge, for one rendered window."""

    layers: dict[str, int]
    budget: dict[str, int]
    files: list[FileReport]
    gauge: Gauge
    steps: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "layers": dict(self.layers),
            "budget": dict(self.budget),
            "files": [f.to_dict() for f in self.files],
            "gauge": self.gauge.to_dict(),
            "steps": list(self.steps),
        }


def breakdown(asm: Assembly, plan: Plan, *, threshold: float) -> Breakdown:
    layers = dict.fromkeys(LAYERS, 0)
    in_window: dict[str, tuple[int, bool]] = {}
    for items in asm.sections.values():
        for item in items:
            layer = layer_of(item)
            layers[layer] += item.tokens
            in_window[item.candidate.key] = (item.tokens, item.truncated)
    layers["tools"] = plan.tools_tokens  # beside the messages, not in them
    counted = sum(v for k, v in layers.items() if k not in ("overhead", "tools"))
    layers["overhead"] = max(asm.tokens - counted, 0)
    window = int(asm.trace.budget.get("window") or 0)
    reserve = int(asm.trace.budget.get("reserve") or 0) - plan.tools_tokens
    system = layers["system"] + layers["tools"] + layers["skills"]
    fixed = system + layers["personalization"] + layers["overhead"] + layers["task"]
    history_available = max(asm.available + plan.tools_tokens - fixed, 0)
    files = []
    for layer, group in (("personalization", plan.personal), ("files", plan.files)):
        prefix = "personal:" if layer == "personalization" else "file:"
        for f in group:
            tokens, cut = in_window.get(prefix + f.path, (0, False))
            files.append(
                FileReport(
                    f.path,
                    layer,
                    tokens,
                    f.original_tokens,
                    f.truncated or cut,
                    prefix + f.path in in_window,
                )
            )
    gauge = Gauge(
        used=asm.tokens + plan.tools_tokens,
        limit=asm.available + plan.tools_tokens,
        window=window,
        history=layers["history"] + layers["tool_results"],
        history_available=history_available,
        threshold=threshold,
    )
    budget = {
        "window": window,
        "reserved_response": reserve,
        "available": asm.available + plan.tools_tokens,
        "system": system,  # the spec's "system prompt + tools + skills"
        "personalization": layers["personalization"],
        "available_for_history_and_workspace": history_available,
    }
    return Breakdown(layers, budget, files, gauge, list(plan.steps))
