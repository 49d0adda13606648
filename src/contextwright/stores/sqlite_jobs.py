"""How the SQLite store writes a group of queued batches (SQLiteStore.add_many, groups.Groups):
in one transaction, as one batch where that stores the same, else each batch in a savepoint of
its own; each caller gets its own answer or its own error."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence

from ..errors import StoreError, ValidationError
from ..ports import Written
from ..records import Record
from .groups import Job, joinable, share


def answer(job: Job, url: str) -> list[Record]:
    """`job`'s answer, its driver's errors as the store's: a StoreError, or a ValidationError
    for text SQLite cannot store."""
    exc = job.error
    if isinstance(exc, sqlite3.Error):
        raise StoreError(f"cannot write {url}: {exc}") from exc
    if isinstance(exc, UnicodeEncodeError):
        raise ValidationError(
            "input", "<text>", "send valid UTF-8 text (no lone surrogates)",
            problem="cannot be stored",
        ) from exc  # fmt: skip
    return job.result()


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
    supersedes another (groups.joinable), nor when a batch is refused."""
    if not joinable(jobs):
        return False
    conn.execute("SAVEPOINT together")
    try:
        out, written = add_batch(conn, [r for job in jobs for r in job.records])
    except Exception:
        conn.execute("ROLLBACK TO together")
        conn.execute("RELEASE together")
        return False
    conn.execute("RELEASE together")
    share(jobs, out, written)
    return True


def steps(
    before: Mapping[str, int], after: Mapping[str, int], fresh: Sequence[Record]
) -> tuple[Written, ...]:
    """The version steps of a batch that stored `fresh`, per project (ports.Written)."""
    stored: dict[str, list[Record]] = {p: [] for p in before}
    for r in fresh:
        stored[r.project].append(r)
    return tuple(
        Written(p, before[p], after[p], frozenset(r.author for r in stored[p]), tuple(stored[p]))
        for p in sorted(before)
    )
