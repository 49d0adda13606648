"""The vector index, chosen by measurement: the SQLite store's own search against sqlite-vec, on
the same vectors, at 100k rows.

    .venv/bin/python bench/vector_index.py [--rows 100000] [--queries 200] [--k 40] [--json]

Python's own sqlite3 cannot load extensions on this machine, so sqlite-vec runs through the
pysqlite3-binary build (the `bench` extra: pip install -e '.[bench]'). Four searches, each timed
on the same queries, taking turns:

- `store`: `SQLiteStore.vector_search`, what an assemble call with vectors runs: the int8
  matrix held in the process, one sign bit per dimension to preselect 10 x k rows, those ranked by
  cosine, the hits' records read (docs/vectors.md); asked with no agent, so over every row as
  sqlite-vec is (an agent's search also leaves out the rows it may not see);
- `vec0 float32`: a sqlite-vec `vec0` table of float32 vectors, cosine distance, exact k-NN;
- `vec0 int8`: the same with int8 vectors (`vec_quantize_int8`, 'unit');
- `vec0 bit + rerank`: one bit per dimension (`vec_quantize_binary`), its 10 x k nearest by
  Hamming distance ranked again by cosine over the float32 vectors: the store's own method, in
  sqlite-vec.

The vectors are unit vectors around 1,000 random centres (each a topic, as real embeddings
cluster), 384 dimensions as MiniLM's; each query lies near one centre. `agreement` is the share
of the exact top k (float32, numpy) that a search returns.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from assemble import PROJECT, _stats, fill, generate, machine

from contextwright import Engine
from contextwright.embedders.minilm import normalize
from contextwright.ports import Query

DIM = 384
MODEL = "bench-384"


def clustered(rows: int, queries: int, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """`rows` unit vectors around 1,000 random centres, and `queries` near those centres."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((1000, DIM)).astype(np.float32)

    def around(n: int) -> np.ndarray:
        picked = centres[rng.integers(0, 1000, n)]
        return normalize(
            picked + rng.standard_normal((n, DIM)).astype(np.float32) * np.float32(0.7)
        )

    return around(rows), around(queries)


def sqlite_vec_connection(path: str) -> Any:
    """A pysqlite3 connection to `path` with sqlite-vec loaded; SystemExit, saying what to
    install, when either is missing."""
    try:
        import pysqlite3.dbapi2 as sqlite
        import sqlite_vec
    except ImportError as exc:
        raise SystemExit(
            f"bench/vector_index.py needs sqlite-vec and a SQLite that loads extensions ({exc}): "
            "pip install -e '.[bench]'"
        ) from exc
    conn = sqlite.connect(path, isolation_level=None)
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    conn.enable_load_extension(False)
    return conn


def build_vec0(conn: Any, data: np.ndarray) -> dict[str, float]:
    """The three vec0 tables over `data` (rowid = row + 1); the seconds each took to fill."""
    tables = {
        "vf": ("float[384] distance_metric=cosine", "?"),
        "vi": ("int8[384] distance_metric=cosine", "vec_quantize_int8(?, 'unit')"),
        "vb": ("bit[384]", "vec_quantize_binary(?)"),
    }
    seconds: dict[str, float] = {}
    for name, (column, value) in tables.items():
        conn.execute(f"CREATE VIRTUAL TABLE {name} USING vec0(embedding {column})")
        t0 = time.perf_counter()
        conn.execute("BEGIN")
        conn.executemany(
            f"INSERT INTO {name}(rowid, embedding) VALUES (?, {value})",
            ((i + 1, data[i].tobytes()) for i in range(len(data))),
        )
        conn.execute("COMMIT")
        seconds[name] = round(time.perf_counter() - t0, 2)
    return seconds


def vec0_searches(
    conn: Any, data: np.ndarray, k: int
) -> dict[str, Callable[[np.ndarray], list[int]]]:
    """Each sqlite-vec search as a function of the query: the rows it returns, best first."""
    knn = "SELECT rowid FROM {t} WHERE embedding MATCH {q} AND k = ? ORDER BY distance"

    def nearest(table: str, q: str, n: int, vec: np.ndarray) -> list[int]:
        return [r[0] - 1 for r in conn.execute(knn.format(t=table, q=q), (vec.tobytes(), n))]

    def rerank(vec: np.ndarray) -> list[int]:
        rows = nearest("vb", "vec_quantize_binary(?)", 10 * k, vec)
        cos = data[rows] @ vec
        return [rows[i] for i in np.argsort(-cos, kind="stable")[:k]]

    return {
        "vec0 float32": lambda vec: nearest("vf", "?", k, vec),
        "vec0 int8": lambda vec: nearest("vi", "vec_quantize_int8(?, 'unit')", k, vec),
        "vec0 bit + rerank": rerank,
    }


def run(rows: int, queries: int, k: int, workdir: str) -> dict[str, Any]:
    data, near = clustered(rows, queries)
    exact = [list(np.argsort(-(data @ q), kind="stable")[:k]) for q in near]

    # The store: the bench's records (every one the bench project's), a vector each.
    store_path = os.path.join(workdir, "store.db")
    engine = Engine.open(f"sqlite:///{store_path}", persist_traces=False, embedder=None)
    fill(engine, generate(rows))
    ids = [r.id for r in engine.store.query(Query(PROJECT, None, limit=rows, newest_first=False))]
    row_of = {rid: i for i, rid in enumerate(ids)}
    t0 = time.perf_counter()
    for i in range(0, rows, 5000):
        chunk = ids[i : i + 5000]
        rows_ = zip(chunk, data[i : i + len(chunk)], strict=True)
        engine.store.put_vectors(MODEL, [(PROJECT, rid, v) for rid, v in rows_])  # type: ignore[attr-defined]
    store_put_s = round(time.perf_counter() - t0, 2)

    def store_search(vec: np.ndarray) -> list[int]:
        # No agent: every row, as sqlite-vec searches (with one, the rows it may not see go).
        hits = engine.store.vector_search(PROJECT, None, vec, k, MODEL)  # type: ignore[attr-defined]
        return [row_of[h.record.id] for h in hits]

    vec_path = os.path.join(workdir, "vec.db")
    conn = sqlite_vec_connection(vec_path)
    fill_s = build_vec0(conn, data)
    searches: dict[str, Callable[[np.ndarray], list[int]]] = {"store": store_search}
    searches.update(vec0_searches(conn, data, k))
    for search in searches.values():  # the first search loads the store's matrix
        search(near[0])

    times: dict[str, list[float]] = {name: [] for name in searches}
    agree: dict[str, list[float]] = {name: [] for name in searches}
    names = list(searches)
    for j, q in enumerate(near):
        for name in names[j % len(names) :] + names[: j % len(names)]:  # taking turns
            t = time.perf_counter()
            found = searches[name](q)
            times[name].append((time.perf_counter() - t) * 1000)
            agree[name].append(len(set(found) & set(exact[j])) / k)
    conn.close()
    engine.close()
    return {
        "machine": machine(),
        "rows": rows,
        "queries": queries,
        "k": k,
        "search_ms": {name: _stats(v) for name, v in times.items()},
        "agreement": {name: round(float(np.mean(v)), 3) for name, v in agree.items()},
        "fill_s": {"store put_vectors": store_put_s, **{f"vec0 {t}": s for t, s in fill_s.items()}},
        "file_mb": {
            "store (records, index and vectors)": round(os.path.getsize(store_path) / 1e6, 1),
            "sqlite-vec (vectors only, three tables)": round(os.path.getsize(vec_path) / 1e6, 1),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=40)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--dir", help="where the database files go (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        report = run(args.rows, args.queries, args.k, tmp)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{report['rows']} rows, {report['queries']} queries, k = {report['k']}")
    print(f"{'search':<20} {'p50 ms':>8} {'p99 ms':>8} {'agreement':>10}")
    for name, stats in report["search_ms"].items():
        print(
            f"{name:<20} {stats['p50']:>8.2f} {stats['p99']:>8.2f} {report['agreement'][name]:>10.3f}"
        )
    print("fill (s):", report["fill_s"])
    print("files (MB):", report["file_mb"])


if __name__ == "__main__":
    main()
