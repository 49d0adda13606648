"""The assembly trace: which sources ran and how long each took, every candidate with its score
components and what became of it (kept, dropped, truncated) and why, tokens per section, and the
total latency. It also keeps the request, so that an assembly can be replayed with another budget
or other rules. Persisted in the store's `traces` collection; read back by id."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .rows import ITEM_ROWS, row_counts, row_item, tally


@dataclass
class SourceRun:
    name: str
    ms: float
    candidates: int
    error: str | None = None
    cache: str = "off"  # "hit", "miss" or "off"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ms": round(self.ms, 3),
            "candidates": self.candidates,
            "error": self.error,
            "cache": self.cache,
        }


@dataclass
class Trace:
    id: str
    project: str
    agent: str
    created_at: float
    request: dict[str, Any]
    budget: dict[str, Any]
    sources: list[dict[str, Any]] = field(default_factory=list)
    items: list[dict[str, Any]] = field(default_factory=list)
    sections: dict[str, int] = field(default_factory=dict)
    tokens: int = 0
    warnings: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    latency_ms: float = 0.0
    notes: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return self._dict(self.items)

    def _dict(self, items: list[Any], items_key: str = "items") -> dict[str, Any]:
        return {
            "id": self.id,
            "project": self.project,
            "agent": self.agent,
            "created_at": self.created_at,
            "request": self.request,
            "budget": self.budget,
            "sources": self.sources,
            items_key: items,
            "sections": self.sections,
            "tokens": self.tokens,
            "warnings": self.warnings,
            "timings_ms": self.timings_ms,
            "latency_ms": self.latency_ms,
            "notes": self.notes,
        }

    def to_json_dict(self) -> dict[str, Any]:
        """What the trace writer stores: `to_dict`, or a document that `from_dict` reads back
        as it (a PendingTrace's items as rows, rows.py)."""
        return self.to_dict()

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trace:
        """A trace from its stored document: its items as stored, or built from its rows
        (rows.py) on their first read, so that a listing's summaries build none."""
        rows = d.get(ITEM_ROWS)
        fields = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        if rows is None or "items" in d:
            return cls(**fields)
        return PendingTrace(lambda: [row_item(r) for r in rows], row_counts(rows), **fields)

    @property
    def kept(self) -> list[dict[str, Any]]:
        return [i for i in self.items if i["decision"] != "dropped"]

    @property
    def dropped(self) -> list[dict[str, Any]]:
        return [i for i in self.items if i["decision"] == "dropped"]

    def decision_counts(self) -> tuple[int, int, int]:
        """How many items were kept (truncated ones included), truncated, and dropped."""
        return tally([i["decision"] for i in self.items])

    def summary(self) -> str:
        kept, truncated, dropped = self.decision_counts()
        srcs = ", ".join(f"{s['name']} {s['ms']:.1f}ms/{s['candidates']}" for s in self.sources)
        return (
            f"trace {self.id}: {self.tokens}/{self.budget.get('available')} tokens, "
            f"{kept} kept ({truncated} truncated), {dropped} dropped, {self.latency_ms:.1f} ms; "
            f"sources: {srcs}"
        )


class PendingTrace(Trace):
    """A trace whose items are built on first read: `assemble` hands over the packer's decisions
    and returns, and whoever reads `items` first turns them into the ~180 item dicts (~0.4 ms at
    100k records) off the call. The background writer (writer.py) stores the same items as rows
    (rows.py), and does not keep them (`to_json_dict`, build.decision_row). The decisions are
    not changed after the call, so the items are the same whoever builds them."""

    def __init__(
        self,
        build: Callable[[], list[dict[str, Any]]],
        counts: tuple[int, int, int] | None = None,
        build_rows: Callable[[], list[tuple[object, ...]]] | None = None,
        **fields: Any,
    ) -> None:
        super().__init__(**fields)
        self._lock = threading.Lock()
        self._build: Callable[[], list[dict[str, Any]]] | None = build
        self._counts = counts
        # The same items as rows for the writer to store, not kept (rows.py, build.py).
        self._build_rows = build_rows

    def to_json_dict(self) -> dict[str, Any]:
        build_rows = self._build_rows
        if build_rows is None or self.__dict__.get("_build") is None:
            return self.to_dict()  # the items were read (or set): store those
        return self._dict(build_rows(), ITEM_ROWS)

    def decision_counts(self) -> tuple[int, int, int]:
        # The summary that every HTTP answer carries must not build the items on the call.
        if self._counts is not None and self.__dict__.get("_build") is not None:
            return self._counts
        return super().decision_counts()

    @property
    def items(self) -> list[dict[str, Any]]:
        if self.__dict__.get("_build") is not None:
            with self._lock:
                build = self._build
                if build is not None:
                    self._items = build()
                    self._build = None
        return self._items

    @items.setter
    def items(self, value: list[dict[str, Any]]) -> None:
        self._items = value
        self.__dict__["_build"] = None
