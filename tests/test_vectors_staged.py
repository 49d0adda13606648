"""The embedding worker beside the calls it serves. Vectors it stages while the engine serves calls (SQLite): searchable in this
process at once, counted as embedded, written to the table later (when the engine has been idle,
when too many are held, when it closes), so that the worker's writes do not make the calling
thread's connection drop its page cache between two turns of an agent."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from contextwright import Engine, vectors
from contextwright.embedders import HashEmbedder
from contextwright.records import Record
from contextwright.stores.sqlite import SQLiteStore

NOTES = [
    ("ann", "the cache lives in redis on port 6379"),
    ("ann", "we chose postgres for the main database"),
    ("bob", "the lunch menu has pasta on fridays"),
]


def _table_rows(path: str, model: str = "hash") -> int:
    """Vectors in the table as another process sees them."""
    conn = sqlite3.connect(path)
    try:
        return int(
            conn.execute("SELECT count(*) FROM vectors WHERE model = ?", (model,)).fetchone()[0]
        )
    finally:
        conn.close()


def _store_with_matrix(path: str) -> tuple[SQLiteStore, list[Record]]:
    """A store whose matrix for project p is loaded (a search ran), and three notes without
    vectors."""
    store = SQLiteStore(path)
    e = Engine(store)
    first = e.add(project="p", author="cy", kind="note", content="deploys run on thursdays")
    store.put_vectors("hash", [("p", first.id, HashEmbedder().embed([first.content])[0])])
    assert store.vector_search("p", None, HashEmbedder().embed(["deploys"])[0], 1, "hash")
    notes = [e.add(project="p", author=a, kind="note", content=t) for a, t in NOTES]
    return store, notes


def test_staged_vectors_are_searchable_counted_as_embedded_and_written_on_flush(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "v.db")
    store, notes = _store_with_matrix(path)
    emb = HashEmbedder()
    assert store.unembedded_count("hash") == 3
    assert store.stage_vectors("hash", notes[:2], emb.embed([n.content for n in notes[:2]]))
    assert store.staged_count("hash") == 2
    assert _table_rows(path) == 1  # nothing written yet
    assert [r.id for r in store.unembedded("hash", 10)] == [notes[2].id]
    assert store.unembedded_count("hash") == 1
    hits = store.vector_search("p", None, emb.embed([notes[1].content])[0], 1, "hash")
    assert hits[0].record.id == notes[1].id
    store.flush_vectors("hash")
    assert store.staged_count("hash") == 0
    assert _table_rows(path) == 3
    assert store.unembedded_count("hash") == 1
    hits = store.vector_search("p", None, emb.embed([notes[1].content])[0], 1, "hash")
    assert hits[0].record.id == notes[1].id
    store.close()
    fresh = SQLiteStore(path)  # another process: reads the flushed rows from the table
    hits = fresh.vector_search("p", None, emb.embed([notes[0].content])[0], 1, "hash")
    assert hits[0].record.id == notes[0].id
    fresh.close()


def test_nothing_is_staged_for_a_project_whose_matrix_is_not_loaded(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "v.db"))
    r = Engine(store).add(project="p", author="ann", kind="note", content="tea at four")
    assert not store.stage_vectors("hash", [r], HashEmbedder().embed([r.content]))
    assert store.staged_count("hash") == 0
    assert store.unembedded_count("hash") == 1
    store.close()


def test_a_staged_private_record_stays_out_of_others_searches(tmp_path: Path) -> None:
    store, _ = _store_with_matrix(str(tmp_path / "v.db"))
    secret = Engine(store).add(
        project="p", author="ann", kind="note", content="the vault code is 4711",
        visibility="private",
    )  # fmt: skip
    vec = HashEmbedder().embed([secret.content])
    assert store.stage_vectors("hash", [secret], vec)
    for_ann = store.vector_search("p", "ann", vec[0], 10, "hash")
    for_bob = store.vector_search("p", "bob", vec[0], 10, "hash")
    assert secret.id in [h.record.id for h in for_ann]
    assert secret.id not in [h.record.id for h in for_bob]
    store.close()


def test_the_worker_stages_while_serving_and_the_engine_writes_them_on_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Serving for the whole test: on a loaded machine the worker's step for the last note could
    # come more than SERVING_S after the add, and it would then write the note (rightly) at once.
    monkeypatch.setattr(vectors, "SERVING_S", 600.0)
    path = str(tmp_path / "v.db")
    with Engine(SQLiteStore(path), embedder=HashEmbedder()) as e:
        e.add(project="p", author="cy", kind="note", content="deploys run on thursdays")
        assert e.wait_for_embeddings(timeout=20)
        e.assemble("p", "cy", "deploys", 2000)  # the engine is serving
        store = e.store
        assert isinstance(store, SQLiteStore)
        # The matrix loaded (staging needs it) whether or not the call's search finished first.
        store.vector_search("p", "cy", HashEmbedder().embed(["deploys"])[0], 1, "hash")
        for a, t in NOTES:
            e.add(project="p", author=a, kind="note", content=t)
        assert e.wait_for_embeddings(timeout=20)
        assert store.staged_count("hash") == 3
        assert _table_rows(path) == 1
        found = e.assemble("p", "cy", "pasta lunch", 2000)
        assert any("pasta" in i["preview"] and "vector" in i["sources"] for i in found.trace.items)
        assert found.trace.notes["vectors"]["lag"] == 0
    assert _table_rows(path) == 4


def test_the_worker_writes_at_once_when_idle_or_holding_too_many(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(tmp_path / "v.db")
    monkeypatch.setattr(vectors, "STAGED_MAX", 2)
    with Engine(SQLiteStore(path), embedder=HashEmbedder()) as e:
        e.add(project="p", author="cy", kind="note", content="deploys run on thursdays")
        assert e.wait_for_embeddings(timeout=20)
        e.assemble("p", "cy", "deploys", 2000)
        worker = e.vectors.worker
        assert worker is not None
        store = e.store
        assert isinstance(store, SQLiteStore)
        notes = [e.add(project="p", author=a, kind="note", content=t) for a, t in NOTES]
        assert e.wait_for_embeddings(timeout=20)
        assert store.staged_count("hash") <= 2
        assert _table_rows(path) + store.staged_count("hash") == 4
        worker.served_at = float("-inf")  # idle: nothing is staged, and a flush writes it all
        assert not worker._stage(notes[:1], np.zeros((1, 64), dtype=np.float32))
        worker.flush()
        assert store.staged_count("hash") == 0
        assert _table_rows(path) == 4


def counting_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[SQLiteStore, list[str]]:
    """A store whose `unembedded_count` notes each call (the model) in the list returned."""
    store = SQLiteStore(str(tmp_path / "v.db"))
    counted: list[str] = []
    count = store.unembedded_count

    def counting(model: str) -> int:
        counted.append(model)
        return count(model)

    monkeypatch.setattr(store, "unembedded_count", counting)
    return store, counted


def settles_without_counting(worker: Any, counted: list[str], timeout: float = 10.0) -> bool:
    """True once the worker, having found nothing left to embed, answers its lag (0) without a
    count: `wait_for_embeddings` returns on a count of 0, and the worker marks itself caught up
    on its next pass, a moment later."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        counted.clear()
        if worker.lag() == 0 and counted == []:
            return True
        time.sleep(0.01)
    return False


class Gated(HashEmbedder):
    """Embeds once `gate` is set; `started` says it was asked to."""

    def __init__(self) -> None:
        super().__init__()
        self.gate, self.started = threading.Event(), threading.Event()

    def embed(self, texts: Sequence[str]) -> Any:
        self.started.set()
        self.gate.wait(20)
        return super().embed(texts)


def test_a_caught_up_worker_reports_no_lag_without_counting_and_counts_after_a_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every assemble call's trace carries the lag: once the worker has found nothing left to
    embed and nothing was written since, it is 0 without an SQL count."""
    store, counted = counting_store(tmp_path, monkeypatch)
    embedder = Gated()
    gate = embedder.gate

    with Engine(store, embedder=embedder) as e:
        worker = e.vectors.worker
        assert worker is not None
        gate.set()
        e.add(project="p", author="ann", kind="note", content="tea at four")
        assert e.wait_for_embeddings(timeout=20)
        assert settles_without_counting(worker, counted)
        gate.clear()  # the next record waits in the embedder: the lag must count it
        e.add(project="p", author="ann", kind="note", content="coffee at nine")
        assert worker.lag() == 1 and counted == ["hash"]
        gate.set()
        assert e.wait_for_embeddings(timeout=20)
        assert settles_without_counting(worker, counted)


def test_a_short_batch_marks_the_worker_caught_up_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the agent loop the worker embeds the reply just written, then rests (the engine is
    serving) before its next pass. The batch held every record left, so the next call's lag is 0
    without an SQL count, rather than counted until that pass."""
    store, counted = counting_store(tmp_path, monkeypatch)

    with Engine(store, embedder=HashEmbedder()) as e:
        worker = e.vectors.worker
        assert worker is not None
        e.add(project="p", author="ann", kind="note", content="lunch at noon")
        assert e.wait_for_embeddings(timeout=20)
        assert settles_without_counting(worker, counted)  # past its rest, waiting for work
        e.assemble("p", "ann", "tea", 500)  # serving: the worker rests after each batch
        monkeypatch.setattr(vectors, "REST_FACTOR", 1e6)  # its next pass: 2 s away
        e.add(project="p", author="ann", kind="note", content="tea at four")
        assert e.wait_for_embeddings(timeout=20)
        # Marked caught up by the batch itself (the moment after it was staged), not by the
        # next pass.
        assert settles_without_counting(worker, counted, timeout=1.0)
        e.add(project="p", author="ann", kind="note", content="coffee at nine")
        assert worker.lag() >= 0 and counted == ["hash"]  # a write since: counted


def test_waiting_for_embeddings_is_not_taken_for_a_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`wait_for_embeddings` called while the worker embeds the last record (as the agent loop
    calls it right after adding its reply) leaves the worker caught up once that batch is done:
    the wait counts the store itself, so the next call's lag takes no count."""
    store, counted = counting_store(tmp_path, monkeypatch)
    embedder = Gated()
    gate, started = embedder.gate, embedder.started

    with Engine(store, embedder=embedder) as e:
        worker = e.vectors.worker
        assert worker is not None
        gate.set()
        e.add(project="p", author="ann", kind="note", content="lunch at noon")
        assert e.wait_for_embeddings(timeout=20)
        assert settles_without_counting(worker, counted)
        e.assemble("p", "ann", "tea", 500)  # serving: the worker rests after each batch
        monkeypatch.setattr(vectors, "REST_FACTOR", 1e6)  # its next pass: 2 s away
        gate.clear()
        started.clear()
        e.add(project="p", author="ann", kind="note", content="tea at four")
        assert started.wait(20)  # the worker has read the record and is embedding it
        threading.Timer(0.05, gate.set).start()
        assert e.wait_for_embeddings(timeout=20)
        assert settles_without_counting(worker, counted, timeout=1.0)
