"""The follow-up reads of an assemble call on PostgresStore, known together once the sources have
answered: the replies to the candidate questions, the replacements of the superseded candidates
and the records said around the likely strong matches (assembly/chains.py `read_links`), sent in
one pipeline. Each alone was a round trip, one after the other."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..records import Record
from .rows import row_to_record


class PostgresLinks:
    """Mixed into PostgresStore, which supplies `_read_many` and the SELECT pieces."""

    _read_many: Callable[[Sequence[tuple[str, Any]]], list[list[Any]]]
    _neighbours_sql: Callable[[str, str, Sequence[tuple[str | None, float]]], tuple[str, Any]]
    _neighbour_sides: Callable[[Sequence[Any], int], list[tuple[list[Record], list[Record]]]]
    _select: str
    _visible: str

    def _replies_sql(self, project: str, ids: Sequence[str], agent: str | None) -> tuple[str, Any]:
        visible = f" AND {self._visible}" if agent is not None else ""
        # In insertion order (rid): the store's own time, which no writer's created_at can move.
        sql = (
            f"{self._select} WHERE r.project = %(project)s AND r.reply_to = ANY(%(ids)s)"
            f"{visible} ORDER BY r.rid"
        )
        return sql, {"project": project, "ids": list(ids), "agent": agent}

    @staticmethod
    def _replaced_sql(project: str, ids: Sequence[str]) -> tuple[str, Any]:
        sql = (
            "SELECT supersedes, id FROM records WHERE project = %s AND supersedes = ANY(%s) "
            "ORDER BY created_at, rid"
        )
        return sql, (project, list(ids))

    def follow_ups(
        self,
        project: str,
        agent: str,
        replied: Sequence[str],
        replaced: Sequence[str],
        anchors: Sequence[tuple[str | None, float]],
    ) -> tuple[list[Record], dict[str, str], list[tuple[list[Record], list[Record]]]]:
        """`replies_to(project, replied, agent)`, `superseded_by(project, replaced)` and
        `neighbours(project, agent, anchors)`, the non-empty ones sent together and answered
        together (one round trip); an empty list is a read not made, answered empty."""
        statements: list[tuple[str, Any]] = []
        if replied:
            statements.append(self._replies_sql(project, replied, agent))
        if replaced:
            statements.append(self._replaced_sql(project, replaced))
        if anchors:
            statements.append(self._neighbours_sql(project, agent, anchors))
        if not statements:
            return [], {}, []
        found = iter(self._read_many(statements))
        replies = [row_to_record(row) for row in next(found)] if replied else []
        by = {old: new for old, new in next(found)} if replaced else {}
        sides = self._neighbour_sides(next(found), len(anchors)) if anchors else []
        return replies, by, sides
