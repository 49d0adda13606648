"""The small tables beside `records` in SQLiteStore: status facts, edges and key-values."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .sql import edges_sql


class SQLiteFacts:
    _conn: Callable[[], sqlite3.Connection]
    _write: Callable[[Callable[[sqlite3.Connection], Any]], Any]
    _bump: Callable[[sqlite3.Connection, Iterable[str]], dict[str, int]]

    def set_status(
        self, project: str, record_id: str, status: str, by: str, at: float, note: str = ""
    ) -> None:
        self.set_status_many(project, [record_id], status, by, at, note)

    def set_status_many(
        self,
        project: str,
        record_ids: Sequence[str],
        status: str,
        by: str,
        at: float,
        note: str = "",
    ) -> None:
        ids = list(dict.fromkeys(record_ids))

        def write(conn: sqlite3.Connection) -> None:
            changed = False
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                marks = ", ".join("?" * len(chunk))
                found = {
                    row[0]
                    for row in conn.execute(
                        f"SELECT id FROM records WHERE project = ? AND id IN ({marks})",
                        [project, *chunk],
                    )
                }
                conn.executemany(
                    "INSERT INTO status_facts (project, record_id, status, by, at, note) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    [(project, rid, status, by, at, note) for rid in chunk if rid in found],
                )
                conn.executemany(
                    "UPDATE records SET current_status = ? WHERE project = ? AND id = ?",
                    [(status, project, rid) for rid in chunk if rid in found],
                )
                changed = changed or bool(found)
            if changed:
                self._bump(conn, [project])

        if ids:
            self._write(write)

    def status_history(self, project: str, record_id: str) -> list[dict[str, Any]]:
        rows = self._conn().execute(
            "SELECT status, by, at, note FROM status_facts WHERE project = ? AND record_id = ? "
            "ORDER BY seq",
            (project, record_id),
        )
        return [{"status": s, "by": b, "at": a, "note": n} for s, b, a, n in rows]

    def add_edges(self, project: str, edges: Iterable[tuple[str, str, str]]) -> None:
        rows = [(project, s, d, k) for s, d, k in edges]

        def write(conn: sqlite3.Connection) -> None:
            conn.executemany("INSERT OR IGNORE INTO edges VALUES (?, ?, ?, ?)", rows)
            self._bump(conn, [project])

        if rows:
            self._write(write)

    def edges(
        self,
        project: str,
        *,
        src: str | None = None,
        dst: str | None = None,
        kind: str | None = None,
    ) -> list[tuple[str, str, str]]:
        sql, params = edges_sql(project, src, dst, kind, "?")
        return [(s, d, k) for s, d, k in self._conn().execute(sql, params)]

    def kv_set(self, project: str, key: str, value: str, at: float) -> None:
        def write(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO kv VALUES (?, ?, ?, ?) ON CONFLICT(project, key) "
                "DO UPDATE SET value = excluded.value, at = excluded.at",
                (project, key, value, at),
            )
            self._bump(conn, [project])

        self._write(write)

    def kv_get(self, project: str, key: str) -> str | None:
        row = (
            self._conn()
            .execute("SELECT value FROM kv WHERE project = ? AND key = ?", (project, key))
            .fetchone()
        )
        return None if row is None else str(row[0])

    def kv_list(self, project: str, prefix: str = "") -> dict[str, str]:
        rows = self._conn().execute(
            "SELECT key, value FROM kv WHERE project = ? AND substr(key, 1, ?) = ? ORDER BY key",
            (project, len(prefix), prefix),
        )
        return {k: v for k, v in rows}

    def _status(
        self,
        conn: sqlite3.Connection,
        project: str,
        record_id: str,
        status: str,
        by: str,
        at: float,
        note: str,
    ) -> None:
        found = conn.execute(
            "SELECT 1 FROM records WHERE project = ? AND id = ?", (project, record_id)
        ).fetchone()
        if found is None:
            return  # a fact about no record of the project (as in the memory store): none kept
        conn.execute(
            "INSERT INTO status_facts (project, record_id, status, by, at, note) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (project, record_id, status, by, at, note),
        )
        conn.execute(
            "UPDATE records SET current_status = ? WHERE project = ? AND id = ?",
            (status, project, record_id),
        )
