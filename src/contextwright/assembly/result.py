"""The result of one assemble call: sections with their items, the rendered window, the trace."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..traces.trace import Trace
from .candidates import SECTIONS, Item


@dataclass
class Assembly:
    format: str
    sections: dict[str, list[Item]]
    messages: list[dict[str, Any]]
    system: str
    text: str
    payload: Any
    tokens: int
    available: int
    trace: Trace
    warnings: list[str] = field(default_factory=list)

    @property
    def section_tokens(self) -> dict[str, int]:
        return dict(self.trace.sections)

    def breakdown(self) -> dict[str, Any]:
        """Tokens per section, used against available, for a terminal or a dashboard."""
        return {
            "sections": {name: self.trace.sections.get(name, 0) for name in SECTIONS},
            "tokens": self.tokens,
            "available": self.available,
            "window": self.trace.budget.get("window"),
            "reserve": self.trace.budget.get("reserve"),
            "used_fraction": round(self.tokens / self.available, 4) if self.available else 0.0,
        }

    def to_dict(self) -> dict[str, Any]:
        return self._fields(
            {n: [i.to_dict() for i in items] for n, items in self.sections.items() if items}
        )

    def to_json(self) -> dict[str, Any]:
        """`to_dict` for a JSON encoder (the HTTP answer): the same JSON, its items' lists left
        as the tuples they are (Item.to_json), in less than half the time."""
        return self._fields(
            {n: [i.to_json() for i in items] for n, items in self.sections.items() if items}
        )

    def _fields(self, sections: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
        return {
            "format": self.format,
            "tokens": self.tokens,
            "available": self.available,
            "sections": sections,
            "messages": self.messages,
            "system": self.system,
            "text": self.text,
            "payload": self.payload,
            "warnings": self.warnings,
            "breakdown": self.breakdown(),
            "trace_id": self.trace.id,
        }
