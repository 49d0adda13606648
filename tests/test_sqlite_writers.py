"""The lock that the processes writing one SQLite file share (stores/sqlite_writers.py): held
from BEGIN IMMEDIATE to COMMIT, so that another process waits for it in the kernel (woken when it
is let go) instead of retrying SQLite's lock after ever longer sleeps."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from contextwright.errors import StoreError
from contextwright.records import Record, build_record
from contextwright.stores.sqlite import SQLiteStore, store_files
from contextwright.stores.sqlite_writers import FileLock, lock_path

fcntl = pytest.importorskip("fcntl")

# Another process's try at the lock, without waiting: exit 0 when it is held elsewhere.
TRY = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    sys.exit(0)
sys.exit(3)
"""


def held_elsewhere(path: str) -> bool:
    done = subprocess.run([sys.executable, "-c", TRY, lock_path(path)], timeout=60, check=False)
    assert done.returncode in (0, 3), done
    return done.returncode == 0


def rec(rid: str) -> Record:
    return build_record(
        {"id": rid, "project": "p", "author": "ann", "content": f"words {rid}", "created_at": 1.0},
        lambda text: len(text.split()),
    )


def test_a_write_holds_the_file_lock_against_other_processes(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    store = SQLiteStore(path)
    seen: list[bool] = []
    store._write(lambda conn: seen.append(held_elsewhere(path)))
    assert seen == [True]  # inside the transaction another process may not take it
    assert not held_elsewhere(path)  # after COMMIT it may
    store.add_many([rec("a")])
    assert not held_elsewhere(path)
    with pytest.raises(RuntimeError):
        store._write(lambda conn: (_ for _ in ()).throw(RuntimeError("refused")))
    assert not held_elsewhere(path)  # let go after a ROLLBACK too
    store.close()
    assert lock_path(path) in store_files(path)


def test_a_forked_child_waits_for_its_parents_lock(tmp_path: Path) -> None:
    """The lock is a file's open description: a child forked while the parent holds it shares
    it unless it opens the file again, which FileLock does in each process."""
    lock = FileLock(str(tmp_path / "f.db"))
    with lock:
        pid = os.fork()
        if pid == 0:  # the child: its own descriptor, refused while the parent holds the lock
            code = 1
            try:
                fd = lock._file()
                assert fd is not None
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    lock.close()


def test_a_second_store_of_the_file_in_the_writing_thread_errs_instead_of_hanging(
    tmp_path: Path,
) -> None:
    """Writing through another store of the same file inside a write's transaction, on the same
    thread, cannot wait for the lock its own thread holds: it meets SQLite's lock and its busy
    timeout, as it did before the file lock, and the first write goes on."""
    path = str(tmp_path / "n.db")
    first, second = SQLiteStore(path), SQLiteStore(path)
    errors: list[BaseException] = []

    def nested(conn: sqlite3.Connection) -> None:
        second._conn().execute("PRAGMA busy_timeout=50")  # this thread's connection
        try:
            second.add_many([rec("inner")])
        except StoreError as exc:
            errors.append(exc)
        first._add_batch(conn, [rec("outer")])

    worker = threading.Thread(target=first._write, args=(nested,))
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive()
    assert len(errors) == 1 and "locked" in str(errors[0])
    assert [r.id for r in second.get_many("p", ["outer", "inner"])] == ["outer"]
    second.add_many([rec("later")])
    assert [r.id for r in first.get_many("p", ["later"])] == ["later"]
    first.close()
    second.close()


def test_a_path_that_is_no_database_gets_no_lock_file(tmp_path: Path) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("not a database")
    with pytest.raises(StoreError):
        SQLiteStore(str(bad))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
