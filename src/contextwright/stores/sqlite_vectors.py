"""The vector half of SQLiteStore: a `vectors` table (int8 + scale per row) and search over an
in-process int8 matrix that catches up with the table by sequence number (see _vectors.py)."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, cast

import numpy as np

from ..ports import Hit, hits_for
from ..records import Record
from ._vectors import Access, VectorMatrix, dequantize, quantize
from .rows import COLUMNS, row_to_record

M003_VECTORS = """
        CREATE TABLE vectors (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            rid INTEGER NOT NULL UNIQUE,
            project TEXT NOT NULL, model TEXT NOT NULL, scale REAL NOT NULL, data BLOB NOT NULL
        );
        CREATE INDEX vectors_project_seq ON vectors(project, model, seq);
"""

LOAD_CHUNK = 10_000
_SELECT = "SELECT " + ", ".join(f"r.{c.strip()}" for c in COLUMNS.split(","))
_MISSING = "NOT EXISTS (SELECT 1 FROM vectors v WHERE v.rid = r.rid AND v.model = :model)"
_NOT_STAGED = "r.project || char(31) || r.id NOT IN (SELECT value FROM json_each(:staged))"


class Written(NamedTuple):
    """A vector as put_vectors wrote it."""

    project: str
    id: str
    access: Access  # who may see its record
    data: bytes  # int8
    scale: float
    seq: int


class SQLiteVectors:
    _conn: Callable[[], sqlite3.Connection]
    _write: Callable[[Callable[[sqlite3.Connection], Any]], Any]
    _get_many: Callable[[sqlite3.Connection, str, Sequence[str]], list[Record]]

    def _vec(self) -> tuple[threading.Lock, dict[Any, Any]]:
        state: tuple[threading.Lock, dict[Any, Any]] | None = getattr(self, "_vec_state", None)
        if state is None:
            # Matrices by (project, model); "cursors" by model; "loading" serializes loads.
            state = (threading.Lock(), {"loading": threading.Lock(), "cursors": {}})
            self._vec_state = state
        return state

    def _cursor(self, model: str) -> int:
        # Every record at or below the cursor has a vector from `model`, as far as we know.
        return int(self._vec()[1]["cursors"].get(model, 0))

    def _staged(self, model: str) -> dict[tuple[str, str], tuple[bytes, float, Access]]:
        """Vectors of `model` held in this process's matrices but not yet in the table
        (`stage_vectors`), by (project, record id)."""
        staged: dict[str, dict[tuple[str, str], tuple[bytes, float, Access]]]
        staged = self._vec()[1].setdefault("staged", {})
        return staged.setdefault(model, {})

    def stage_vectors(self, model: str, records: Sequence[Record], vectors: Any) -> bool:
        """Make the records' vectors searchable in this process at once, and write them to the
        table later (`flush_vectors`): a write made on another thread's connection makes every
        other connection drop its page cache when it next reads (sqlite_docs.py), which cost
        the next assemble call 2-2.5 ms at 100k records (bench/vectors.py's agent loop, where
        the worker embeds each reply between two turns). They count as embedded here
        (`unembedded`, `unembedded_count`); a process that dies before the write loses them,
        and they are embedded again. False, and nothing staged, unless the matrix of each
        record's project is loaded (a search has run): the caller writes them instead."""
        lock, state = self._vec()
        with lock:
            if any(state.get((r.project, model)) is None for r in records):
                return False
        staged = self._staged(model)
        with self._vec_loading():  # never beside a catch-up from the table, as _append
            for r, vec in zip(records, vectors, strict=True):
                data, scale = quantize(vec)
                with lock:
                    m: VectorMatrix = state[(r.project, model)]
                if len(data) != m.dim:
                    continue
                access = Access(r.author, r.visibility, tuple(r.to))
                m.add_quantized(
                    [r.id],
                    np.frombuffer(data, dtype=np.int8).reshape(1, m.dim),
                    np.asarray([scale], dtype=np.float32),
                    [access],
                )
                with lock:
                    staged[(r.project, r.id)] = (data, scale, access)
        return True

    def staged_count(self, model: str) -> int:
        return len(self._staged(model))

    def _staged_keys(self, model: str) -> set[tuple[str, str]]:
        lock, _ = self._vec()
        with lock:  # the worker stages while calls read
            return set(self._staged(model))

    def flush_vectors(self, model: str) -> None:
        """Write the staged vectors of `model` to the table (they stay in the matrices)."""
        lock, _ = self._vec()
        staged = self._staged(model)
        with lock:
            held = list(staged.items())
        if not held:
            return
        self.put_vectors(model, [(p, rid, dequantize(d, sc)) for (p, rid), (d, sc, _) in held])
        with lock:
            for key, _ in held:
                staged.pop(key, None)

    def unembedded(self, model: str, limit: int) -> list[Record]:
        cur = self._cursor(model)
        staged = self._staged_keys(model)
        rows = (
            self._conn()
            .execute(
                f"{_SELECT}, r.rid FROM records r WHERE r.rid > :cur AND {_MISSING} "
                "ORDER BY r.rid LIMIT :limit",
                {"cur": cur, "model": model, "limit": limit + len(staged)},
            )
            .fetchall()
        )
        if rows:
            nxt = int(rows[0][-1]) - 1
        else:
            top = self._conn().execute("SELECT max(rid) FROM records").fetchone()[0]
            nxt = int(top or 0)
        lock, state = self._vec()
        with lock:
            state["cursors"][model] = max(cur, nxt)
        out = [row_to_record(row[:-1]) for row in rows]
        if staged:
            out = [r for r in out if (r.project, r.id) not in staged][:limit]
        return out

    def unembedded_count(self, model: str) -> int:
        params: dict[str, Any] = {"cur": self._cursor(model), "model": model}
        sql = f"SELECT count(*) FROM records r WHERE r.rid > :cur AND {_MISSING}"
        staged = self._staged_keys(model)
        if staged:
            sql += f" AND {_NOT_STAGED}"
            params["staged"] = json.dumps([f"{p}\x1f{rid}" for p, rid in staged])
        row = self._conn().execute(sql, params).fetchone()
        return int(row[0])

    def put_vectors(self, model: str, rows: Sequence[tuple[str, str, Any]]) -> None:
        packed = [(project, rid, *quantize(vec)) for project, rid, vec in rows]
        if not packed:
            return
        before: dict[str, int] = {}  # each project's last seq for `model` before this write

        def write(conn: sqlite3.Connection) -> list[Written]:
            written = []
            for project_of, rid, data, scale in packed:
                found = conn.execute(
                    "SELECT rid, project, author, visibility, recipients FROM records "
                    "WHERE project = ? AND id = ?",
                    (project_of, rid),
                )
                row = found.fetchone()
                if row is None:
                    continue
                project = row[1]
                if project not in before:
                    last = conn.execute(
                        "SELECT max(seq) FROM vectors WHERE project = ? AND model = ?",
                        (project, model),
                    ).fetchone()[0]
                    before[project] = int(last or 0)
                conn.execute("DELETE FROM vectors WHERE rid = ?", (row[0],))
                seq = conn.execute(
                    "INSERT INTO vectors (rid, project, model, scale, data) VALUES (?, ?, ?, ?, ?)",
                    (row[0], project, model, scale, data),
                ).lastrowid
                access = Access.of_row(row[2], row[3], row[4])
                written.append(Written(project, rid, access, data, scale, seq or 0))
            return written

        written: list[Written] = self._write(write)
        self._append(model, before, written)

    def _append(
        self,
        model: str,
        before: dict[str, int],
        written: Sequence[Written],
    ) -> None:
        """Vectors this process just wrote, added to the matrices it holds, so that the next
        search need not read them back from the table (in the agent loop, where the worker
        embeds each reply between two turns, that read was on every call). A matrix takes them
        only if it held every row of its project up to this write (its `seq` is the project's
        last before it); otherwise its next search catches up from the table, as before."""
        lock, state = self._vec()
        with self._vec_loading():  # never beside a catch-up from the table
            for project, last in before.items():
                mine = [w for w in written if w.project == project]
                with lock:
                    m: VectorMatrix | None = state.get((project, model))
                if m is None or m.seq != last or any(len(w.data) != m.dim for w in mine):
                    continue
                data = np.frombuffer(b"".join(w.data for w in mine), dtype=np.int8)
                m.add_quantized(
                    [w.id for w in mine],
                    data.reshape(len(mine), m.dim),
                    np.asarray([w.scale for w in mine], dtype=np.float32),
                    [w.access for w in mine],
                )
                m.seq = max(w.seq for w in mine)

    def _matrix(self, project: str, model: str) -> VectorMatrix | None:
        conn = self._conn()
        top = conn.execute(
            "SELECT max(seq) FROM vectors WHERE project = ? AND model = ?", (project, model)
        ).fetchone()[0]
        lock, state = self._vec()
        with lock:
            m: VectorMatrix | None = state.get((project, model))
        if top is None:
            return m
        if m is not None and m.seq >= top:
            return m
        with self._vec_loading():  # one loader at a time; the others wait, then find it done
            with lock:
                m = cast("VectorMatrix | None", state.get((project, model)))
            after = m.seq if m is not None else 0
            if m is not None and after >= top:
                return m
            cur = conn.execute(
                "SELECT v.seq, r.id, r.author, r.visibility, r.recipients, v.scale, v.data "
                "FROM vectors v JOIN records r ON r.rid = v.rid "
                "WHERE v.project = ? AND v.model = ? AND v.seq > ? ORDER BY v.seq",
                (project, model, after),
            )
            while rows := cur.fetchmany(LOAD_CHUNK):
                dim = len(rows[0][6])
                data = np.frombuffer(b"".join(row[6] for row in rows), dtype=np.int8)
                scales = np.asarray([row[5] for row in rows], dtype=np.float32)
                with lock:
                    m = state.get((project, model))
                    if m is None or m.dim != dim:
                        m = VectorMatrix(dim)
                        if after == 0:
                            m.reserve(self._vec_rows(project, model))
                        state[(project, model)] = m
                m.add_quantized(
                    [row[1] for row in rows],
                    data.reshape(len(rows), dim),
                    scales,
                    [Access.of_row(row[2], row[3], row[4]) for row in rows],
                )
                m.seq = max(m.seq, int(rows[-1][0]))
        return m

    def _vec_loading(self) -> threading.Lock:
        _, state = self._vec()
        loading: threading.Lock = state["loading"]
        return loading

    def _vec_rows(self, project: str, model: str) -> int:
        row = (
            self._conn()
            .execute(
                "SELECT count(*) FROM vectors WHERE project = ? AND model = ?", (project, model)
            )
            .fetchone()
        )
        return int(row[0])

    def vector_nearest(
        self, project: str, agent: str | None, vector: Any, limit: int, model: str
    ) -> list[tuple[str, float]]:
        """The ids and cosines of `vector_search`, without reading the records: numpy work on the
        matrix held in this process, which the vector source runs on the pool (vectors.py)."""
        m = self._matrix(project, model)
        return [] if m is None else m.search(vector, agent, limit)

    def vector_search(
        self, project: str, agent: str | None, vector: Any, limit: int, model: str
    ) -> list[Hit]:
        found = self.vector_nearest(project, agent, vector, limit, model)
        return hits_for(self, project, found)  # type: ignore[arg-type]
