"""Complexity limits: how much computed context a task of each complexity receives.

The defaults are the spec's table (easy/normal/complex ≈ Haiku/Sonnet/Opus). They are plain data,
so a caller can pass its own table to `TaskBoard(limits=...)` or override one field per call.

The limits cap what the knowledge graph and the context map *offer*. They never cut what a
completed dependency *obliges*: its high- and medium-severity gotchas and its blocking questions
are always kept (see `apply_context_limits` in computed.py and docs/computed-context.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from ..errors import ValidationError

COMPLEXITIES = ("easy", "normal", "complex")


@dataclass(frozen=True)
class ContextLimits:
    max_patterns: int = 5
    max_gotchas: int = 3
    max_code_refs: int = 10
    max_prior_tasks: int = 4
    # Not in the spec's table: its graph query takes 3 decisions and 5 related tasks at any level.
    max_decisions: int = 3
    max_related_tasks: int = 5

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    def override(self, changes: Mapping[str, Any]) -> ContextLimits:
        known = {f.name for f in fields(self)}
        for key, value in changes.items():
            if key not in known:
                raise ValidationError(
                    f"limits.{key}", value, f"use one of {', '.join(sorted(known))}"
                )
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 1000:
                raise ValidationError(f"limits.{key}", value, "give a whole number from 0 to 1000")
        return replace(self, **dict(changes))


DEFAULT_LIMITS: Mapping[str, ContextLimits] = {
    "easy": ContextLimits(max_patterns=3, max_gotchas=2, max_code_refs=5, max_prior_tasks=2),
    "normal": ContextLimits(max_patterns=5, max_gotchas=3, max_code_refs=10, max_prior_tasks=4),
    "complex": ContextLimits(max_patterns=10, max_gotchas=5, max_code_refs=20, max_prior_tasks=8),
}


def check_complexity(value: object, field: str = "complexity") -> str:
    if value not in COMPLEXITIES:
        raise ValidationError(field, value, f"use one of {', '.join(COMPLEXITIES)}")
    return str(value)


def limits_table(
    overrides: Mapping[str, ContextLimits | Mapping[str, Any]] | None = None,
) -> dict[str, ContextLimits]:
    """The default table with any level replaced or partly overridden."""
    table = dict(DEFAULT_LIMITS)
    for level, value in (overrides or {}).items():
        check_complexity(level, "limits")
        table[level] = value if isinstance(value, ContextLimits) else table[level].override(value)
    return table
