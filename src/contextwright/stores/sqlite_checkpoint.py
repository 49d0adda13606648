"""WAL checkpoints made on a thread of their own, so that few commits have one to make.

SQLite checkpoints in the commit that finds the write-ahead log at `wal_autocheckpoint` pages
(1,000 by default): that commit copies the log into the file and syncs both while the writers of
the process wait for it, and then every commit after it checkpoints again until the log is caught
up and starts over. This thread runs a passive checkpoint a moment after writes: it copies what the
log holds beside the writers and readers, waits for none of them, and gives the GIL up while SQLite
works. A commit checkpoints only past NET_PAGES (`Connections`): beside 8 assembler threads, at
1,000 pages one commit in 20 took over 5 ms (add p99 92-129 ms, bench/contention.py); at 10,000,
one in 70-200 (add p99 0.49-0.75x, in turns). SQLite's own checkpoint stays, as that net, because
it is the one that ends with the log caught up (it runs inside the write lock, so no writer of the
process appends meanwhile), after which the next write starts the log over, in every process of
the file; a checkpoint beside the writers never caught up, and without the commit's the log grew by
40 MB a second of adds. The log thus reaches about 40 MB before it starts over, where it reached
4-20 MB (22 MB under bench/load.py with two server processes).
What is committed is unchanged: a commit is durable in the log, as before.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading

from .sqlite_docs import connect

# How long after a write the checkpoint runs: the writes of that moment share one checkpoint (and
# one sync of the file) instead of one each, and the commit's own finds at most that moment's
# pages to copy.
DELAY_S = 0.1
# The thread ends after this long without writes (a store never closed leaves no thread behind).
IDLE_S = 5.0
# The log length at which a commit checkpoints (`PRAGMA wal_autocheckpoint`; SQLite's default is
# 1,000 pages), as a net: the thread has copied most of what the log holds by then.
NET_PAGES = 10_000


class Checkpointer:
    def __init__(self, path: str) -> None:
        self.path = path
        self.runs = 0  # checkpoints made, for tests
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    def written(self) -> None:
        """A write was committed: checkpoint soon."""
        with self._lock:  # with the idle thread's exit, so that no write is left unchecked
            self._wake.set()
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._loop, name="cw-checkpoint", daemon=True
                )
                self._thread.start()

    def _loop(self) -> None:
        conn = connect(self.path)
        try:
            while True:
                if not self._wake.wait(IDLE_S):
                    with self._lock:
                        if not self._wake.is_set():
                            self._thread = None
                            return
                if self._closed:
                    return
                self._wake.clear()
                # Asleep, so that the writes of the next moment join this checkpoint; a close
                # wakes it at once.
                self._stop.wait(DELAY_S)
                if self._closed:
                    return
                self.checkpoint(conn)
        finally:
            conn.close()

    def checkpoint(self, conn: sqlite3.Connection) -> None:
        # Another process's checkpoint in progress, or a locked file: the next write tries again;
        # the log is still whole and is read as the file's newest pages meanwhile.
        with contextlib.suppress(sqlite3.Error):
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            self.runs += 1

    def close(self) -> None:
        """Stop the thread; the store's last connection to close checkpoints what is left."""
        with self._lock:
            self._closed = True
            thread = self._thread
        self._stop.set()
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)
