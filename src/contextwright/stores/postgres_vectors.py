"""The vector half of PostgresStore: one pgvector row per (record, model), searched exactly by
cosine distance inside the database, with the visibility rule in the same WHERE clause, so that a
record the agent may not see never takes a place in the top `limit`.

Exact search, no approximate index: the SQLite store is exact too, and the two must return the
same records for the same data. A project with millions of vectors would want an HNSW index
(`CREATE INDEX ... USING hnsw (embedding vector_cosine_ops)`), which trades that for speed.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..ports import Hit
from ..records import Record
from .rows import row_to_record

M003_VECTORS = """
        CREATE EXTENSION IF NOT EXISTS vector;
        CREATE TABLE vectors (
            rid BIGINT NOT NULL, model TEXT NOT NULL, project TEXT NOT NULL,
            embedding vector NOT NULL, PRIMARY KEY (rid, model)
        );
        CREATE INDEX vectors_project ON vectors(project, model);
"""

_MISSING = (
    "NOT EXISTS (SELECT 1 FROM vectors v WHERE v.project = r.project AND v.rid = r.rid "
    "AND v.model = %(model)s)"
)


class Vector:
    """A vector as pgvector's binary form (its `vector_recv`: the dimension and a zero as 16-bit
    integers, then each float32, all big-endian), sent as a binary parameter: the server decodes
    it without parsing text. Writing the text form took 0.3-0.65 ms of Python
    per 384-float vector (nine significant digits each, to keep float32 exact), holding the GIL:
    each embedded record and each assemble's query vector."""

    __slots__ = ("data",)

    def __init__(self, vec: Any) -> None:
        v = np.asarray(vec, dtype=">f4").ravel()
        self.data = struct.pack(">hh", v.size, 0) + v.tobytes()


@functools.cache
def _vector_dumper() -> type:
    from psycopg.adapt import Dumper  # the postgres extra: imported when a store uses it
    from psycopg.pq import Format

    class VectorDumper(Dumper):
        format = Format.BINARY

        def dump(self, obj: Any) -> bytes:
            data: bytes = obj.data
            return data

    return VectorDumper


def binary_vectors(conn: Any) -> None:
    """Have `conn` send `Vector` parameters in binary: once per connection (the pool's
    `configure`), so that no read or write registers it again. The dumper names no type (oid
    0): the server takes it from the statement's `::vector` cast, so no per-database oid is
    looked up."""
    conn.adapters.register_dumper(Vector, _vector_dumper())


class PostgresVectors:
    """Mixed into PostgresStore, which supplies the reads and the write transaction."""

    _read: Callable[..., list[Any]]
    _piped: Callable[..., Any]
    _select: str
    _cols: str
    _visible: str

    def unembedded(self, model: str, limit: int) -> list[Record]:
        sql = f"{self._select} WHERE {_MISSING} ORDER BY r.rid LIMIT %(limit)s"
        return [row_to_record(row) for row in self._read(sql, {"model": model, "limit": limit})]

    def unembedded_count(self, model: str) -> int:
        sql = f"SELECT count(*) FROM records r WHERE {_MISSING}"
        return int(self._read(sql, {"model": model})[0][0])

    def put_vectors(self, model: str, rows: Sequence[tuple[str, str, Any]]) -> None:
        # One statement per vector, sent as one pipelined batch; ids that are gone match nothing.
        params = [(model, Vector(vec), project, rid) for project, rid, vec in rows]
        if not params:
            return

        def write(conn: Any) -> None:
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO vectors (rid, model, project, embedding) "
                    "SELECT rid, %s, project, %s::vector FROM records WHERE project = %s AND id = %s "
                    "ON CONFLICT (project, rid, model) DO UPDATE SET embedding = excluded.embedding",
                    params,
                )

        # One round trip, and a commit that waits for no flush of the write-ahead log: vectors
        # are derived, and a crash of the database server that loses the last ones leaves their
        # records without one, which the embedding worker reads (`unembedded`) and embeds again.
        self._piped(write, durable=False)

    def vector_search(
        self, project: str, agent: str | None, vector: Any, limit: int, model: str
    ) -> list[Hit]:
        if limit <= 0:
            return []
        visible = f" AND {self._visible}" if agent is not None else ""
        sql = (
            f"SELECT {self._cols}, 1 - (v.embedding <=> %(vec)s::vector) AS score FROM vectors v "
            "JOIN records r ON r.project = v.project AND r.rid = v.rid "
            f"WHERE v.project = %(project)s AND v.model = %(model)s{visible} "
            "ORDER BY v.embedding <=> %(vec)s::vector, r.rid LIMIT %(limit)s"
        )
        params = {
            "vec": Vector(vector),
            "project": project,
            "model": model,
            "agent": agent,
            "limit": limit,
        }
        return [Hit(row_to_record(row[:-1]), float(row[-1])) for row in self._read(sql, params)]
