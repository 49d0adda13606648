"""A caller's batch in the SQLite store's group commit (SQLiteStore.add_many): the writes other
threads queued while one waited for the write lock are stored in one transaction, each batch in
a savepoint of its own, and each caller gets its own answer or its own error."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from ..errors import StoreError, ValidationError
from ..ports import Written
from ..records import Record


class Job:
    """One caller's batch in a group commit: its records, then its result or its error. `turn`
    wakes its caller: the batch is stored, or the caller may write the next group."""

    __slots__ = ("done", "error", "out", "records", "turn", "written")

    def __init__(self, records: Sequence[Record]) -> None:
        self.records = records
        self.done = False
        self.turn = threading.Event()
        self.out: list[Record] | None = None
        self.error: BaseException | None = None
        # The version steps of the write that stored this batch (ports.Written): in a group
        # stored as one batch, the whole group's, which holds this batch's records and others'.
        self.written: tuple[Written, ...] = ()

    def result(self, url: str) -> list[Record]:
        exc = self.error
        if isinstance(exc, sqlite3.Error):
            raise StoreError(f"cannot write {url}: {exc}") from exc
        if isinstance(exc, UnicodeEncodeError):
            raise ValidationError(
                "input", "<text>", "send valid UTF-8 text (no lone surrogates)",
                problem="cannot be stored",
            ) from exc  # fmt: skip
        if exc is not None:
            raise exc
        assert self.out is not None
        return self.out


class Groups:
    """The batches waiting to be written, and whose turn it is to write them. A caller that comes
    while a group is written waits on its batch's `turn`, not on the write lock: waiting for the
    lock only to find its batch stored, the slowest 1% of adds (8 assembler threads beside 8
    writers) waited 90 of their 110 ms while later writers took the lock first. The writer wakes
    the callers it stored and the oldest one still queued, which writes the next group unless a
    caller that came meanwhile has begun it."""

    def __init__(self) -> None:
        self.pending: list[Job] = []
        self.writing = False  # a caller is writing a group
        self._lock = threading.Lock()

    def write(
        self,
        job: Job,
        lock: AbstractContextManager[Any],
        store: Callable[[list[Job]], None],
    ) -> None:
        """Queue `job`; back once it is stored (by this caller, holding `lock`, or another)."""
        with self._lock:
            self.pending.append(job)
            lead = not self.writing
            self.writing = True
        while not lead:
            job.turn.wait()
            with self._lock:
                if job.done:  # a writer before this caller stored it with its own
                    return
                job.turn.clear()
                lead = not self.writing
                self.writing = True
        jobs: list[Job] = []
        try:
            with lock:
                with self._lock:
                    jobs, self.pending = self.pending, []
                store(jobs)
        finally:
            with self._lock:
                if not jobs:  # interrupted before it wrote: its caller raises
                    self.pending.remove(job)
                self.writing = False
                waiting = self.pending[:1]
            for queued in waiting + jobs:  # the next writer first
                queued.turn.set()


# The store's batch write inside a transaction: its answer, one record per record given, and
# the version steps it made.
AddBatch = Callable[
    [sqlite3.Connection, Sequence[Record]], tuple[list[Record], tuple[Written, ...]]
]


def write_group(conn: sqlite3.Connection, jobs: Sequence[Job], add_batch: AddBatch) -> None:
    """Store the batches of a group commit in the transaction open on `conn`, each with its
    own answer or error: all of them as one batch when that is what storing them one after
    another would do, else one by one, each in a savepoint (a refused batch rolled back alone)."""
    if _together(conn, jobs, add_batch):
        return
    for job in jobs:
        conn.execute("SAVEPOINT batch")
        try:
            job.out, job.written = add_batch(conn, job.records)
        except Exception as exc:
            conn.execute("ROLLBACK TO batch")
            job.error = exc
        conn.execute("RELEASE batch")


def _together(conn: sqlite3.Connection, jobs: Sequence[Job], add_batch: AddBatch) -> bool:
    """All the batches as one: one statement per table for the whole group. Each statement
    gives the GIL up and takes it back behind the assembling threads (about 2.5 ms each beside
    8 of them), so a savepoint and nine statements per batch held the write lock, and every
    writer queued behind it, for tens of ms. One batch answers as the batches one after another
    would: a record repeated in a later batch answers with the earlier one. Not when any record
    supersedes another (one batch would mark a record queued after the one superseding it,
    which alone would not have been there yet), nor when a batch is refused."""
    if any(r.supersedes for job in jobs for r in job.records):
        return False
    conn.execute("SAVEPOINT together")
    try:
        out, written = add_batch(conn, [r for job in jobs for r in job.records])
    except Exception:
        conn.execute("ROLLBACK TO together")
        conn.execute("RELEASE together")
        return False
    conn.execute("RELEASE together")
    start = 0
    for job in jobs:
        job.out, start = out[start : start + len(job.records)], start + len(job.records)
        job.written = written
    return True


def versions(conn: sqlite3.Connection, projects: Iterable[str]) -> dict[str, int]:
    """The store versions of `projects` as the open transaction sees them (0: none yet)."""
    out = dict.fromkeys(projects, 0)
    rows = conn.execute(
        "SELECT project, version FROM project_versions WHERE project IN "
        "(SELECT value FROM json_each(?))",
        (json.dumps(list(out)),),
    )
    out.update(rows)
    return out


def steps(
    before: Mapping[str, int], after: Mapping[str, int], fresh: Sequence[Record]
) -> tuple[Written, ...]:
    """The version steps of a batch that stored `fresh`, per project (ports.Written)."""
    authors: dict[str, set[str]] = {p: set() for p in before}
    for r in fresh:
        authors[r.project].add(r.author)
    return tuple(Written(p, before[p], after[p], frozenset(authors[p])) for p in sorted(before))
