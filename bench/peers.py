"""Benchmark of contextwright's assemble, on SQLite and on PostgreSQL, against what a user would
pick instead, in one run on the same records and the same requests: LlamaIndex's `Memory.aget`
(SQLite chat store, token limit 8,000) and LangGraph's `SqliteStore` semantic search (sqlite-vec,
the same MiniLM int8 embedder).

    .venv/bin/python bench/peers.py [--sizes 10000,100000] [--calls 200] [--embed-sample 2000]
        [--vectors] [--no-postgres] [--plot FILE] [--json]

Needs the `bench` extra (llama-index-core, langgraph-checkpoint-sqlite, sqlite-vec through
pysqlite3-binary, matplotlib for `--plot`), and for PostgreSQL the `postgres` extra (psycopg) and
pgserver (in the `test` extra), as bench/postgres.py does. The records are bench/assemble.py's
synthetic team month (`generate`), the requests its `_requests` (agent, task, day) and the budget
its `BUDGET`.

- contextwright: `Engine` on a SQLite file, no embedder (`--vectors` adds a second engine with
  the MiniLM int8 embedder on the same file): `assemble(project, agent, task, budget, session)`,
  which retrieves (session history, addressed records, open tasks, full text, pinned, decisions),
  ranks, packs into 8,000 tokens and renders, with a trace.
- contextwright on PostgreSQL (on by default where psycopg and pgserver import; `--no-postgres`
  leaves it out): the same call on an `Engine` over a local PostgreSQL 16 (bench/postgres.py's
  `start_postgres`: pgserver, Unix socket, default durable settings), no embedder, loaded with the
  same records as the SQLite file, then `VACUUM ANALYZE` (what autovacuum does within a minute of
  a bulk load; bench/postgres.py says why it matters). Each size gets its own server, stopped at
  the end of its run.
- LlamaIndex: one `Memory` per session (the record's `session`, as an agent would keep its
  conversation), all on one `SQLAlchemyChatStore` over `sqlite+aiosqlite`; the records are put
  in order through `aput_messages` in turns of 20, so that the memory archives what falls out of
  its 8,000-token queue as it would in use. Timed: `aget()` of the request's session (it reads
  the active queue and counts its tokens; no retrieval by the task). It never reads the archive,
  so its cost hardly grows with the store: one memory for the whole team measured the same
  (3.1 ms p50 at 10k; the query seeks the `status` index).
- LangGraph: every record an item (namespace `("bench", author)`, value `{"content", "kind"}`),
  the content indexed (dims 384, cosine). Timed: `search(("bench",), query=task, limit=10)`,
  which embeds the task with MiniLM and scans every vector (sqlite-vec's `vec_distance_cosine`),
  no packing. Embedding every record takes this machine ~15 minutes per 100k (115 texts/s), so
  the first `--embed-sample` records get MiniLM's vectors (their rate is reported) and the rest
  random unit vectors, as bench/vectors.py does: the scan reads the same bytes whatever the
  values. Queries are always embedded by MiniLM, inside the timed call.

Each size runs in its own child process. The systems take turns request by request (a noisy
machine slows all alike); the ratios are of p50s from the same run, each over contextwright's on
SQLite. `cpu_reference_ms` is bench/assemble.py's fixed piece of pure-Python work, timed beside
the calls.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from assemble import (
    BUDGET,
    PROJECT,
    _requests,
    _stats,
    call_ms,
    checkpoint,
    cpu_reference_ms,
    fill,
    generate,
    machine,
    run_child,
)
from vectors import store_vectors

from contextwright import Engine
from contextwright.embedders import load_embedder

TOKEN_LIMIT = 8000  # BUDGET.window: the peers pack into what contextwright packs into
TURN = 20  # messages per aput_messages call while filling LlamaIndex's memories
SEARCH_LIMIT = 10  # LangGraph's default


def _text(r: dict[str, Any]) -> str:
    return f"{r['author']}: {r['content']}"


def _returned(result: Any) -> int:
    """Items in an assembled window (all sections), else the length of a peer's list."""
    sections = getattr(result, "sections", None)
    return sum(map(len, sections.values())) if sections is not None else len(result)


class Vectors:
    """LangGraph's embed function: MiniLM for the first `sample` documents and for every query,
    random unit vectors for the rest of the documents (see the module's docstring)."""

    def __init__(self, embedder: Any, sample: int) -> None:
        self.embedder = embedder
        self.left = sample
        self.real_s = 0.0
        self.real_n = 0
        self.documents = 0  # documents MiniLM embedded, and its seconds, set by queries()
        self.documents_s = 0.0
        self.rng = np.random.default_rng(5)

    def __call__(self, texts: Any) -> list[list[float]]:
        texts = list(texts)
        k = min(self.left, len(texts))
        out = np.empty((len(texts), self.embedder.dim), dtype=np.float32)
        if k:
            t = time.perf_counter()
            out[:k] = self.embedder.embed(texts[:k])
            self.real_s += time.perf_counter() - t
            self.real_n += k
            self.left -= k
        if k < len(texts):
            rand = self.rng.standard_normal((len(texts) - k, self.embedder.dim))
            out[k:] = rand / np.linalg.norm(rand, axis=1, keepdims=True)
        return out.tolist()  # type: ignore[no-any-return]

    def queries(self) -> None:
        self.documents, self.documents_s = self.real_n, self.real_s
        self.left = 1 << 62  # from now on every text is a query: MiniLM embeds it


def fill_llamaindex(records: list[dict[str, Any]], path: str, loop: Any) -> tuple[Any, float]:
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.core.memory import Memory
    from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore

    store = SQLAlchemyChatStore(
        table_name="llama_index_memory", async_database_uri=f"sqlite+aiosqlite:///{path}"
    )
    by_session: dict[str, list[Any]] = defaultdict(list)
    for r in records:
        role = "tool" if r["kind"] == "tool_result" else "user"
        by_session[r["session"]].append(ChatMessage(role=role, content=_text(r)))
    memories = {
        s: Memory.from_defaults(session_id=s, token_limit=TOKEN_LIMIT, chat_store=store)
        for s in by_session
    }
    t0 = time.perf_counter()
    for s, messages in by_session.items():
        for i in range(0, len(messages), TURN):
            loop.run_until_complete(memories[s].aput_messages(messages[i : i + TURN]))
    return memories, time.perf_counter() - t0


def fill_langgraph(records: list[dict[str, Any]], path: str, embed: Vectors) -> tuple[Any, float]:
    import pysqlite3.dbapi2 as sqlite3  # Python's sqlite3 here cannot load sqlite-vec
    from langgraph.store.base import PutOp
    from langgraph.store.sqlite import SqliteStore

    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    store = SqliteStore(
        conn,  # type: ignore[arg-type]
        index={"dims": embed.embedder.dim, "embed": embed, "fields": ["content"]},
    )
    store.setup()
    t0 = time.perf_counter()
    for i in range(0, len(records), 1000):
        store.batch(
            [
                PutOp(("bench", r["author"]), r["id"], {"content": _text(r), "kind": r["kind"]})
                for r in records[i : i + 1000]
            ]
        )
    return store, time.perf_counter() - t0


def postgres_available() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("psycopg", "pgserver"))


def start_engine_postgres(workdir: str, n: int) -> tuple[Any, str, Engine]:
    """A fresh local PostgreSQL for this size (its own data directory under `workdir`) and an
    engine on it, no embedder: (server, url, engine)."""
    import psycopg
    from postgres import start_postgres

    os.chmod(workdir, 0o755)  # as root, pgserver's own user must reach the data directory in it
    server, url = start_postgres(os.path.join(workdir, f"pg-{n}"))
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            if conn.execute("SELECT to_regclass('records')").fetchone() != (None,):
                sys.exit(f"{workdir}/pg-{n} holds a store already: give an empty --dir")
        return server, url, Engine.open(url, embedder=None, persist_traces=False)
    except BaseException:
        server.cleanup()
        raise


def run_one(
    n: int, calls: int, workdir: str, sample: int, vectors: bool, postgres: bool
) -> dict[str, Any]:
    if not postgres:
        return _run_one(n, calls, workdir, sample, vectors, None)
    server, url, cwpg = start_engine_postgres(workdir, n)
    try:
        return _run_one(n, calls, workdir, sample, vectors, (cwpg, url))
    finally:
        cwpg.close()
        server.cleanup()  # stops the server (cleanup_mode="stop")


def _run_one(
    n: int, calls: int, workdir: str, sample: int, vectors: bool, pg: tuple[Engine, str] | None
) -> dict[str, Any]:
    records = generate(n)
    embedder: Any = load_embedder("minilm")
    # embedder=None: Engine.open's default ("auto") would load MiniLM and embed every record in
    # the background, during the timed calls; vectors are the --vectors engine's.
    cw = Engine.open(
        f"sqlite:///{os.path.join(workdir, f'cw-{n}.db')}", persist_traces=False, embedder=None
    )
    ingest: dict[str, float] = {"contextwright": n / fill(cw, records)}
    cwpg, pg_url = pg if pg is not None else (None, "")
    if cwpg is not None:
        from postgres import vacuum_analyze

        ingest["contextwright_postgres"] = n / fill(cwpg, records)
        vacuum_analyze(pg_url)
    loop = asyncio.new_event_loop()
    memories, seconds = fill_llamaindex(records, os.path.join(workdir, f"li-{n}.db"), loop)
    ingest["llamaindex"] = n / seconds
    embed = Vectors(embedder, sample)
    lg, seconds = fill_langgraph(records, os.path.join(workdir, f"lg-{n}.db"), embed)
    ingest["langgraph"] = n / seconds
    del records  # the bench's dicts would slow every full GC in the timed calls
    embed.queries()
    systems: dict[str, Any] = {}
    if vectors:  # a second engine on the same file, with vectors for every record
        store_vectors(cw, embedder)  # random unit vectors: a search scans them alike
        checkpoint(cw)
        cwv = Engine(cw.store, embedder=embedder, persist_traces=False)

    def contextwright(agent: str, task: str, session: str) -> Any:
        return cw.assemble(PROJECT, agent, task, BUDGET, session=session)

    def llamaindex(agent: str, task: str, session: str) -> Any:
        memory = memories.get(session)
        return [] if memory is None else loop.run_until_complete(memory.aget())

    def langgraph(agent: str, task: str, session: str) -> Any:
        return lg.search(("bench",), query=task, limit=SEARCH_LIMIT)

    systems = {"contextwright": contextwright}
    if cwpg is not None:
        on_pg = cwpg  # narrowed, for the lambda
        systems["contextwright_postgres"] = lambda agent, task, session: on_pg.assemble(
            PROJECT, agent, task, BUDGET, session=session
        )
    systems |= {"llamaindex": llamaindex, "langgraph": langgraph}
    if vectors:
        systems["contextwright_vectors"] = lambda agent, task, session: cwv.assemble(
            PROJECT, agent, task, BUDGET, session=session
        )
    reqs = _requests(calls + 10, seed=29)
    for agent, task, day in reqs[:10]:  # warm: page cache, plans, the embedder's session
        for fn in systems.values():
            fn(agent, task + " warm", f"{agent}-{day}")
    cw.flush()
    if cwpg is not None:
        cwpg.flush()
    times: dict[str, list[float]] = {name: [] for name in systems}
    returned: dict[str, list[int]] = {name: [] for name in systems}
    reference: list[float] = []
    for k, (agent, task, day) in enumerate(reqs[10:]):
        session = f"{agent}-{day}"
        names = list(systems)
        names = names[k % len(names) :] + names[: k % len(names)]  # who goes first rotates
        for name in names:
            result, ms = call_ms(systems[name], agent, task, session)
            times[name].append(ms)
            # Items in the window, messages in the memory, hits of the search: each did its work.
            returned[name].append(_returned(result))
            del result  # freed after the clock stopped (call_ms)
        reference.append(cpu_reference_ms())
    stats = {name: _stats(v) for name, v in times.items()}
    cw_p50 = stats["contextwright"]["p50"]
    out: dict[str, Any] = {
        "records": n,
        "calls": calls,
        "ms": stats,
        "peer_over_contextwright_p50": {
            name: round(s["p50"] / max(cw_p50, 1e-9), 2)
            for name, s in stats.items()
            if name != "contextwright"
        },
        "returned_p50": {k: sorted(v)[len(v) // 2] for k, v in returned.items()},
        "ingest_records_per_s": {k: round(v) for k, v in ingest.items()},
        "langgraph_embedded": embed.documents,
        "minilm_texts_per_s": (
            round(embed.documents / embed.documents_s, 1) if embed.documents_s else None
        ),
        "cpu_reference_ms": _stats(reference),
    }
    loop.close()
    cw.close()
    return out


def plot(report: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = report["results"]
    sizes = [r["records"] for r in results]
    labels = {
        "contextwright": "contextwright assemble (SQLite)",
        "contextwright_postgres": "contextwright assemble (PostgreSQL)",
        "contextwright_vectors": "contextwright assemble, vectors (SQLite)",
        "llamaindex": "LlamaIndex Memory.aget (SQLite)",
        "langgraph": "LangGraph SqliteStore.search (MiniLM)",
    }
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, label in labels.items():
        if name in results[0]["ms"]:
            ax.plot(sizes, [r["ms"][name]["p50"] for r in results], marker="o", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("records in the store")
    ax.set_ylabel("p50 latency per call (ms)")
    m = report["machine"]
    ax.set_title(f"{m['nproc']} cpu · {m['cpu']}", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _print(report: dict[str, Any]) -> None:
    m = report["machine"]
    print(
        f"machine: {m['nproc']} cpu · {m['cpu']} (family {m['cpu_family']}, model {m['cpu_model']})"
    )
    for r in report["results"]:
        print(
            f"{r['records']} records, {r['calls']} calls, cpu ref p50 "
            f"{r['cpu_reference_ms']['p50']:.2f} ms"
        )
        for name, s in r["ms"].items():
            ratio = r["peer_over_contextwright_p50"].get(name)
            tail = f"  ({ratio:.2f}x contextwright SQLite's p50)" if ratio is not None else ""
            print(f"  {name:<22} p50 {s['p50']:>9.2f} ms  p99 {s['p99']:>9.2f} ms{tail}")
        print(f"  ingest records/s: {r['ingest_records_per_s']}")
    if report.get("plot"):
        print(f"plot: {report['plot']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated record counts")
    parser.add_argument("--calls", type=int, default=200, help="timed calls per system and size")
    parser.add_argument(
        "--embed-sample",
        type=int,
        default=2000,
        help="records LangGraph embeds with MiniLM (the rest get random unit vectors)",
    )
    parser.add_argument(
        "--vectors", action="store_true", help="also time contextwright with the MiniLM embedder"
    )
    parser.add_argument(
        "--postgres",
        action=argparse.BooleanOptionalAction,
        help="also time contextwright on a local PostgreSQL (pgserver); on where psycopg and "
        "pgserver are installed",
    )
    parser.add_argument("--plot", help="write a PNG of p50 against store size here")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.postgres is None:
        args.postgres = postgres_available()
    elif args.postgres and not postgres_available():
        parser.error(
            "--postgres needs psycopg and pgserver: pip install 'contextwright[postgres,test]'"
        )
    if args.one:
        report = run_one(
            args.one, args.calls, args.dir, args.embed_sample, args.vectors, args.postgres
        )
        print(json.dumps(report))
        return
    results = []
    with tempfile.TemporaryDirectory(prefix="cw-peers-") as tmp:
        for n in [int(s) for s in args.sizes.split(",") if s.strip()]:
            cmd = [sys.executable, __file__, "--one", str(n), "--calls", str(args.calls)]
            cmd += ["--embed-sample", str(args.embed_sample), "--dir", tmp]
            cmd += ["--vectors"] if args.vectors else []
            cmd += ["--postgres"] if args.postgres else ["--no-postgres"]
            out = run_child(cmd)
            results.append(json.loads(out.stdout.strip().splitlines()[-1]))
            if not args.json:
                print(f"... {n} records done", file=sys.stderr)
    report: dict[str, Any] = {"machine": machine(), "results": results}
    if args.plot:
        plot(report, args.plot)
        report["plot"] = args.plot
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print(report)


if __name__ == "__main__":
    main()
