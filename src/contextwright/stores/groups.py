"""A store's group commit (SQLite's and PostgreSQL's `add_many`): the batches that threads of one
process add while another writes are queued, stored together by the writer, in one transaction
(one commit), and each caller gets its own answer or its own error. How a group is stored is the
store's (sqlite_jobs.write_group, PostgresWrites._store_jobs); who writes it, and when each
caller is answered, is here."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

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

    def result(self) -> list[Record]:
        """The batch's answer, or its error raised (a store turns its driver's errors into
        StoreError or ValidationError before: sqlite_jobs.answer)."""
        if self.error is not None:
            raise self.error
        assert self.out is not None
        return self.out


def joinable(jobs: Sequence[Job]) -> bool:
    """Whether the batches stored as one batch would store what they store one after another:
    not when a record supersedes another (one batch would mark a record queued after the one
    superseding it, which alone would not have been there yet)."""
    return not any(r.supersedes for job in jobs for r in job.records)


def share(jobs: Sequence[Job], out: list[Record], written: tuple[Written, ...] = ()) -> None:
    """Give each job its slice of `out`, the answer of their records stored as one batch (one
    record per record given, in the jobs' order), and the write's version steps."""
    start = 0
    for job in jobs:
        job.out, start = out[start : start + len(job.records)], start + len(job.records)
        job.written = written


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
        """Queue `job`; back once it is stored (by this caller, holding `lock`, or another).
        `store` sets each job's answer or error; if it raises, every job it was given gets
        that error."""
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
                try:
                    store(jobs)
                except BaseException as exc:  # the transaction failed: nothing of any is stored
                    for queued in jobs:
                        queued.error, queued.out = exc, None
                for queued in jobs:
                    queued.done = True
        finally:
            with self._lock:
                if not jobs:  # interrupted before it wrote: its caller raises
                    self.pending.remove(job)
                self.writing = False
                waiting = self.pending[:1]
            for queued in waiting + jobs:  # the next writer first
                queued.turn.set()
