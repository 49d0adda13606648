"""SQLiteStore's group commit (add_many): batches queued while another writer holds the write
lock are stored together, each in a savepoint of its own, so that a refused batch is rolled back
alone and every caller gets its own answer."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from contextwright import ValidationError
from contextwright.records import Record, build_record
from contextwright.stores.sqlite import SQLiteStore

P = "gc"


def rec(rid: str, content: str) -> Record:
    data: dict[str, Any] = {"id": rid, "project": P, "author": "ann", "content": content,
                            "created_at": 1.0}  # fmt: skip
    return build_record(data, lambda text: len(text.split()))


def test_queued_batches_share_one_commit_and_a_refused_one_fails_alone(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "g.db"))
    store.add_many([rec("taken", "first words")])
    writes = store._writes
    results: dict[int, Any] = {}

    def add(n: int) -> None:
        batch = [rec(f"r{n}-{k}", f"batch {n} record {k}") for k in range(3)]
        if n == 3:  # the same id with other content: refused, with nothing of its batch stored
            batch.append(rec("taken", "other words"))
        try:
            results[n] = [r.id for r in store.add_many(batch)]
        except ValidationError as exc:
            results[n] = exc

    threads = [threading.Thread(target=add, args=(n,)) for n in range(8)]
    with store._write_lock:  # another writer's transaction: the eight queue behind it
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while len(store._pending) < 8 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(store._pending) == 8
    for t in threads:
        t.join()
    assert isinstance(results[3], ValidationError) and results[3].field == "id"
    for n in (0, 1, 2, 4, 5, 6, 7):
        assert results[n] == [f"r{n}-{k}" for k in range(3)]
    stored = {r.id for r in store.get_many(P, [f"r{n}-{k}" for n in range(8) for k in range(3)])}
    assert stored == {f"r{n}-{k}" for n in range(8) if n != 3 for k in range(3)}
    assert store.get_many(P, ["taken"])[0].content == "first words"
    assert store._writes == writes + 1  # one transaction for all eight
    assert store.version(P) == 8  # the first add and the seven stored batches, not the refused
    store.close()


def test_a_batch_alone_is_its_own_transaction(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "a.db"))
    assert [r.id for r in store.add_many([rec("a", "one")])] == ["a"]
    with pytest.raises(ValidationError):
        store.add_many([rec("b", "two"), rec("a", "changed")])
    assert store.get_many(P, ["b"]) == []
    store.close()
