"""The write lock that every process writing one SQLite file shares (`FileLock`), taken around
each write transaction of the store.

SQLite lets one connection write at a time; a connection of another process that finds the file
locked gets SQLITE_BUSY, and the busy timeout retries it after sleeps of 1, 2, 5, 10, 15, 20, 25...
ms, whenever the lock came free meanwhile. Two server processes on one file (`contextwright serve`'s
default on two cores) thus waited for each other's writes by those steps: with 8 writers and 4
assemblers in each of two processes, BEGIN IMMEDIATE waited 50-72 ms at p99 and 3.6-3.8 s of every
8 s in all, against 9 ms and 1.3 s in one process alone (add p99 240-250 ms against 68). An
exclusive `flock` on a file beside the store (`lock_path`) is taken before BEGIN IMMEDIATE and
given back after COMMIT: a process that waits for it sleeps in the kernel, without the GIL, and is
woken the moment the holder lets go. The processes of one store all take it, so BEGIN IMMEDIATE
finds the file free; a writer that does not (the `sqlite3` shell, an older version) still meets
SQLite's own lock and busy timeout, as before. The kernel lets the lock go when its process ends.
Where `flock` is missing (Windows) or refused, writes rely on SQLite's lock alone.
"""

from __future__ import annotations

import contextlib
import os
import threading
from types import TracebackType

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: SQLite's busy timeout alone
    fcntl = None  # type: ignore[assignment]


# The lock files each thread holds: a thread that writes through a second store of the same file
# while its first store's transaction is open meets SQLite's busy timeout, as before (an error
# after 10 s), instead of waiting for itself for ever.
_held = threading.local()


def lock_path(path: str) -> str:
    """The file that the writers of the store at `path` lock: `team.db` -> `team.db-lock`."""
    return f"{path}-lock"


class FileLock:
    """`with lock:` holds the exclusive lock on `lock_path(path)` against every other process
    (and every other FileLock of the file), the caller's own threads being kept out by the
    store's write lock, which is taken first. Opened on first use in each process: a process
    forked from one that held it would otherwise share its lock, not wait for it."""

    def __init__(self, path: str) -> None:
        self.path = lock_path(os.path.abspath(path))
        self._fd: int | None = None
        self._pid = 0
        self._off = fcntl is None or path == ":memory:"

    def _file(self) -> int | None:
        if self._off:
            return None
        if self._pid != os.getpid():
            self._fd, self._pid = None, os.getpid()  # a parent's descriptor is the parent's lock
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError:
                self._off = True  # a directory we may not write to: SQLite's lock alone
        return self._fd

    def __enter__(self) -> None:
        # Per thread, the lock files held and, for each `with` open, whether it took its lock.
        held: set[str] = _held.__dict__.setdefault("paths", set())
        took: list[bool] = _held.__dict__.setdefault("took", [])
        fd = self._file()
        if fd is not None and self.path not in held:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                held.add(self.path)
                took.append(True)
                return
            except OSError:
                self._off = True  # a file system without flock: SQLite's lock alone
                self.close()
        took.append(False)

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if _held.took.pop():
            _held.paths.discard(self.path)
            if self._fd is not None:
                with contextlib.suppress(OSError):
                    fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None and self._pid == os.getpid():
            with contextlib.suppress(OSError):
                os.close(fd)
