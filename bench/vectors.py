"""Benchmark of vector search in the engine: assemble latency with vectors on at N records, the
ingest rate with and without embeddings, and the memory and disk that vectors cost.

    .venv/bin/python bench/vectors.py [--records 100000] [--calls 200] [--sample 2000]
        [--embedder minilm|static:PATH] [--json]

The records are bench/assemble.py's synthetic team month, with the same requests and budget.
Embedding 100k texts takes this machine most of an hour, so `--sample` records are embedded by the
real MiniLM embedder (this gives the embedding rate) and the rest get random unit vectors: the
search scans the same bits and reranks the same number of rows whatever the values. Query
embedding is real on every cold call (distinct tasks, so the engine's query cache never hits).
Then bench/assemble.py's agent loop runs with vectors and without: one task over ten turns, a
reply written between turns. With vectors the worker embeds each reply before the next call;
without, the worker is stopped first, as a deployment without an embedder has none.

"Without vectors" is a second engine on the same store, so that neither engine's source cache
holds the other's full-text results; the two take turns going first. `bench/assemble.py
--vectors` runs this benchmark too.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from assemble import (
    BUDGET,
    PROJECT,
    FullCollections,
    _requests,
    _stats,
    agent_loop,
    assemble_ms,
    checkpoint,
    cpu_reference_ms,
    fill,
    generate,
    machine,
    per_reference,
    rss_parts,
)

from contextwright import Engine
from contextwright.embedders import load_embedder
from contextwright.ports import Query
from contextwright.vectors import embed_text


def rss_mb() -> float:
    """The process's own memory (RssAnon), in MB: the store is read through mmap, and the file
    pages a read maps count in VmRSS too (docs/stores.md), which would put the vectors table's
    pages in what the matrix costs."""
    return float(rss_parts().get("RssAnon", 0.0))


def file_mb(path: str) -> float:
    return sum(os.path.getsize(path + s) for s in ("", "-wal") if os.path.exists(path + s)) / 1e6


def store_vectors(engine: Engine, embedder: Any, sample: int = 0) -> tuple[int, float]:
    """A vector for every record of the bench's project, stored: the oldest `sample` embedded by
    `embedder`, random unit vectors (which a search scans alike) for the rest. Returns how many,
    and the seconds the writes took (the embedding not included)."""
    store: Any = engine.store
    ids = [r.id for r in store.query(Query(PROJECT, None, limit=10**9, newest_first=False))]
    real = embedder.embed([embed_text(r) for r in store.get_many(PROJECT, ids[:sample])])
    rng = np.random.default_rng(5)
    t0 = time.perf_counter()
    for i in range(0, len(ids), 5000):
        chunk = ids[i : i + 5000]
        if i + len(chunk) <= sample:
            vecs = real[i : i + len(chunk)]
        else:
            vecs = rng.standard_normal((len(chunk), embedder.dim)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        store.put_vectors(
            embedder.name, [(PROJECT, rid, v) for rid, v in zip(chunk, vecs, strict=True)]
        )
    return len(ids), time.perf_counter() - t0


def run(n: int, calls: int, sample: int, workdir: str, name: str = "minilm") -> dict[str, Any]:
    embedder: Any = load_embedder(name)
    records = generate(n)
    path = os.path.join(workdir, "vectors.db")

    # 1. Ingest without embeddings.
    engine = Engine.open(f"sqlite:///{path}", persist_traces=False, embedder=None)
    plain_rate = n / fill(engine, records)  # checkpointed by fill
    size_plain = file_mb(path)

    # 2. Ingest with embeddings on a fresh file: add returns at once; the worker catches up.
    side = os.path.join(workdir, "embedded.db")
    with Engine.open(f"sqlite:///{side}", embedder=embedder, persist_traces=False) as e2:
        t0 = time.perf_counter()
        for i in range(0, sample, 500):
            e2.add_many(records[i : min(i + 500, sample)])
        add_s = time.perf_counter() - t0
        e2.wait_for_embeddings()
        total_s = time.perf_counter() - t0
    # The generated records are the bench's, not the engine's: kept, their 100k dicts made every
    # full collection of the cyclic GC in the timed calls slower (the p99 read 75-79 ms).
    del records

    # 3. Vectors for every record: the sample's real ones, random unit vectors for the rest.
    stored, put_s = store_vectors(engine, embedder, sample)
    put_rate = stored / put_s
    checkpoint(engine)
    size_vectors = file_mb(path)
    engine.close()

    # 4. Assemble with vectors on, and without, on the same file.
    engine = Engine.open(f"sqlite:///{path}", embedder=embedder, persist_traces=False)
    plain = Engine(engine.store, persist_traces=False)
    probe = embedder.embed(["where is the cache configured"])[0]
    before = rss_mb()
    t0 = time.perf_counter()
    engine.store.vector_search(PROJECT, None, probe, 10, embedder.name)  # type: ignore[attr-defined]
    load_s = time.perf_counter() - t0
    matrix_mb = rss_mb() - before
    matrix = engine.store._vec()[1][(PROJECT, embedder.name)]  # type: ignore[attr-defined]
    exact_mb = matrix.nbytes / 1e6  # int8 rows, scales and sign bits
    reqs = _requests(calls + 10, seed=23)
    for agent, task, day in reqs[:10]:
        for eng in (engine, plain):
            eng.assemble(PROJECT, agent, task + " warm", BUDGET, session=f"{agent}-{day}")
    engine.flush()  # the store's word counts are read before the measured calls
    with_v: list[float] = []
    without_v: list[float] = []
    embed_q: list[float] = []
    embed_packaged: list[float] = []
    search: list[float] = []
    reference: list[float] = []
    packaged = None
    if getattr(embedder, "compute", "packaged") != "packaged":
        packaged = type(embedder)(compute="packaged")

    def embed_query(text: str, e: Any = embedder) -> Any:
        """As assemble embeds a query (its own session), or as `embed` does for other models."""
        steps = getattr(e, "query_steps", None)
        if steps is None:
            return e.embed([text])[0]
        split = steps(text)
        return split.vector(split.run())

    with FullCollections() as collections:  # during the cold calls, as bench/assemble.py
        for k, (agent, task, day) in enumerate(reqs[10:]):
            session = f"{agent}-{day}"
            turns = [(engine, with_v), (plain, without_v)]
            for eng, into in turns if k % 2 == 0 else turns[::-1]:
                into.append(
                    assemble_ms(eng, PROJECT, agent, f"{task} #{k}", BUDGET, session=session)
                )
            t = time.perf_counter()
            q = embed_query(f"{task} @{k}")
            embed_q.append((time.perf_counter() - t) * 1000)
            if packaged is not None:  # the packaged model on one thread: what queries ran before
                t = time.perf_counter()
                embed_query(f"{task} @{k}!", packaged)
                embed_packaged.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            engine.store.vector_search(PROJECT, agent, q, 40, embedder.name)  # type: ignore[attr-defined]
            search.append((time.perf_counter() - t) * 1000)
            reference.append(cpu_reference_ms())  # the VM's speed beside these calls (assemble.py)
    # The agent loop with vectors: between two turns (the model call) the worker embeds the
    # reply just written, as it would in real use.
    loop_with = agent_loop(engine, seed=13, between=engine.wait_for_embeddings)
    lag = engine.vectors.status().get("lag")
    # Without vectors, as a deployment without an embedder runs it: no worker. It is stopped
    # first, or it would embed the loop's replies (the store is the same) beside the calls, or,
    # waited for, leave each call on caches its model had just filled: that waiting made this
    # loop read 3.8-4.0 ms here against 1.7 in bench/assemble.py (docs/benchmarks.md).
    engine.vectors.close()
    loop_without = agent_loop(plain, seed=14)
    plain.close()
    engine.close()
    return {
        "machine": machine(),
        "records": n,
        "calls": calls,
        "embedder": embedder.name,
        "assemble_with_vectors_ms": _stats(with_v),
        "assemble_without_vectors_ms": _stats(without_v),
        "assemble_loop_with_vectors_ms": _stats(loop_with),
        "assemble_loop_without_vectors_ms": _stats(loop_without),
        "compute": getattr(embedder, "compute", None),
        "query_embedding_ms": _stats(embed_q),
        "query_embedding_packaged_model_ms": _stats(embed_packaged) if embed_packaged else None,
        "vector_search_ms": _stats(search),
        "cpu_reference_ms": _stats(reference),
        "with_vectors_per_reference": per_reference(with_v, reference),
        # Full collections of the cyclic GC during the cold calls: where one lands in a timed
        # call, it is the p99 (bench/assemble.py).
        "full_collections": collections.report(),
        "ingest_records_per_s_without_embeddings": round(plain_rate),
        "ingest_add_records_per_s_with_embedder_on": round(sample / add_s),
        "embedded_records_per_s": round(sample / total_s, 1),
        "put_vectors_per_s": round(put_rate),
        "disk_mb_per_100k_vectors": round((size_vectors - size_plain) * 100_000 / n, 1),
        "memory_mb_per_100k_vectors": round(matrix_mb * 100_000 / n, 1),
        "matrix_mb_per_100k_vectors": round(exact_mb * 100_000 / n, 1),
        "matrix_load_s": round(load_s, 2),
        "lag_after_run": lag,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--sample", type=int, default=2000, help="records embedded for real")
    parser.add_argument("--embedder", default="minilm", help="minilm or static:PATH")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--dir", help="where the database files go (default: a temp dir)")
    args = parser.parse_args()
    random.seed(1)
    if args.dir:
        os.makedirs(args.dir, exist_ok=True)  # a new --dir, as bench/assemble.py makes it
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        report = run(args.records, args.calls, min(args.sample, args.records), tmp, args.embedder)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for key, value in report.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items())
        print(f"{key:<42} {value}")


if __name__ == "__main__":
    main()
