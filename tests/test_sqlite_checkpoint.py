"""SQLite's WAL copied into the file on a thread of the store's own, so that a commit checkpoints
only past NET_PAGES of log (stores/sqlite_checkpoint.py)."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from contextwright.records import Record, build_record
from contextwright.stores.sqlite import SQLiteStore
from contextwright.stores.sqlite_checkpoint import NET_PAGES

P = "ck"
PAGE = 4096
FRAME = 24 + PAGE  # a page in the log, with its header


def batch(n: int, size: int = 200) -> list[Record]:
    def one(k: int) -> Record:
        data: dict[str, Any] = {"id": f"r{n}-{k}", "project": P, "author": "ann",
                                "content": f"record {n} {k} " + "words of text " * 40,
                                "created_at": 1.0 + k}  # fmt: skip
        return build_record(data, lambda text: len(text.split()))

    return [one(k) for k in range(size)]


def wal_bytes(path: Path) -> int:
    wal = Path(f"{path}-wal")
    return wal.stat().st_size if wal.exists() else 0


def test_sqlites_own_checkpoint_still_bounds_the_log(tmp_path: Path) -> None:
    """The thread copies ahead, and the commit that finds NET_PAGES of log still checkpoints
    (the one checkpoint that ends with the log caught up, in every process of the file, so that
    the next write starts the log over). Without it, a checkpoint beside the writers of another
    process never caught up, and the log grew to 280 MB in 8 s of adds."""
    path = tmp_path / "w.db"
    store = SQLiteStore(str(path))
    store._checkpoints.close()  # nothing copied ahead
    assert store._conn().execute("PRAGMA wal_autocheckpoint").fetchone()[0] == NET_PAGES
    store.add_many(batch(0))
    each = wal_bytes(path)  # the log one batch writes
    n = 2 * NET_PAGES * PAGE // each  # the log written twice over the net
    for k in range(1, n):
        store.add_many(batch(k))
        assert wal_bytes(path) < 1.1 * NET_PAGES * FRAME
    other = sqlite3.connect(path)
    assert other.execute("SELECT count(*) FROM records").fetchone()[0] == n * 200
    other.close()
    store.close()


def test_the_checkpoint_thread_copies_the_log_into_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    store = SQLiteStore(str(path))
    for n in range(12):
        store.add_many(batch(n))
    deadline = time.monotonic() + 60
    while store._checkpoints.runs == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store._checkpoints.runs > 0
    # Nothing left to copy: everything committed before the checkpoint is in the file.
    conn = sqlite3.connect(path)
    busy, log, done = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    assert busy == 0 and log == done
    conn.close()
    store.close()
    assert not any(t.name == "cw-checkpoint" for t in threading.enumerate())
    assert not os.path.exists(f"{path}-wal")  # the last connection to close checkpointed the rest
    reopened = SQLiteStore(str(path))
    assert reopened.count(P) == 12 * 200
    reopened.close()
