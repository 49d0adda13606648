"""The small tables beside `records` in PostgresStore: status facts, edges, key-values and
documents (as sqlite_facts.py is for SQLiteStore)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .postgres_schema import ADD_EDGES, KV_SET, PUT_DOC, SET_STATUS
from .sql import docs_sql, edges_sql


class PostgresFacts:
    _read: Callable[..., list[Any]]
    _run: Callable[[str, Any], list[Any]]
    _piped: Callable[..., Any]

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
        if ids:
            params = {
                "project": project, "ids": ids, "status": status, "by": by, "at": at,
                "note": note,
            }  # fmt: skip
            self._run(SET_STATUS, params)

    def status_history(self, project: str, record_id: str) -> list[dict[str, Any]]:
        rows = self._read(
            "SELECT status, by, at, note FROM status_facts WHERE project = %s AND record_id = %s "
            "ORDER BY seq",
            (project, record_id),
        )
        return [{"status": s, "by": b, "at": a, "note": n} for s, b, a, n in rows]

    # -- edges, kv, docs ------------------------------------------------------------------------

    def add_edges(self, project: str, edges: Iterable[tuple[str, str, str]]) -> None:
        rows = list(edges)
        if rows:
            src, dst, kind = (list(col) for col in zip(*rows, strict=True))
            self._run(ADD_EDGES, {"project": project, "src": src, "dst": dst, "kind": kind})

    def edges(
        self,
        project: str,
        *,
        src: str | None = None,
        dst: str | None = None,
        kind: str | None = None,
    ) -> list[tuple[str, str, str]]:
        sql, params = edges_sql(project, src, dst, kind, "%s")
        return [(s, d, k) for s, d, k in self._read(sql, params)]

    def kv_set(self, project: str, key: str, value: str, at: float) -> None:
        self._run(KV_SET, {"project": project, "key": key, "value": value, "at": at})

    def kv_get(self, project: str, key: str) -> str | None:
        rows = self._read("SELECT value FROM kv WHERE project = %s AND key = %s", (project, key))
        return None if not rows else str(rows[0][0])

    def kv_list(self, project: str, prefix: str = "") -> dict[str, str]:
        rows = self._read(
            "SELECT key, value FROM kv WHERE project = %s AND left(key, %s) = %s ORDER BY key",
            (project, len(prefix), prefix),
        )
        return {k: v for k, v in rows}

    def put_doc(
        self, collection: str, doc_id: str, project: str, data: dict[str, Any], at: float,
        key: str | None = None,
    ) -> None:  # fmt: skip
        # One statement in autocommit, where put_docs would wrap it in BEGIN and COMMIT.
        self._run(PUT_DOC, (collection, doc_id, project, key, at, _payload(data)))

    def put_docs(
        self,
        collection: str,
        docs: Sequence[tuple[str, str, dict[str, Any], float, str | None]],
        *,
        durable: bool = True,
    ) -> None:
        """`put_doc` of each, in one transaction sent in one round trip (ports.PutsDocs)."""
        rows = [
            (collection, doc_id, project, key, at, _payload(data))
            for doc_id, project, data, at, key in docs
        ]
        if not rows:
            return

        def write(conn: Any) -> None:
            with conn.cursor() as cur:
                cur.executemany(PUT_DOC, rows)

        self._piped(write, durable=durable)

    def get_doc(self, collection: str, project: str, doc_id: str) -> dict[str, Any] | None:
        rows = self._read(
            "SELECT data FROM docs WHERE collection = %s AND id = %s AND project = %s",
            (collection, doc_id, project),
        )
        return None if not rows else dict(json.loads(rows[0][0]))

    def list_docs(
        self, collection: str, project: str, *, key: str | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        rows = self._read(*docs_sql(collection, project, key, limit, "%s"))
        return [dict(json.loads(r[0])) for r in rows]


def _payload(data: dict[str, Any]) -> str:
    """A document as stored in `docs.data`: compact JSON, values it cannot hold as their str."""
    return json.dumps(data, separators=(",", ":"), default=str)
