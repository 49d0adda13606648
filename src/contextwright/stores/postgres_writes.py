"""PostgresStore's record writes, with a group commit: the batches that threads of one process
add while another's transaction is open are stored together, in one transaction, by one
statement, with one commit (one flush of the write-ahead log), and each caller still gets its
own answer or its own error, as if the batches had been stored one after another.

Without it every HTTP add was a transaction of its own: BEGIN, the insert, and a COMMIT that
waited on the WAL flush (synchronous_commit = on), with 16 clients' adds queued on the server's
flushes and the statements' own work (add p50 49 ms, p99 185 ms under bench/load.py)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import StoreError, ValidationError
from ..records import Record
from .batches import RecordId, plan_batch, stored_of
from .groups import Groups, Job, joinable, share
from .postgres_schema import (
    COPY_STAGE,
    INSERT_GROUP,
    INSERT_GROUP_STAGED,
    INSERT_RECORDS,
    INSERT_STAGED,
    STAGE,
    SUPERSEDE,
)
from .rows import record_to_row

# From this many records on, a batch is copied into a staging table (COPY_STAGE) instead of sent
# as parameter arrays: two more round trips, and a fraction of the client's work per record.
COPY_FROM = 64

# A group's version bump, the last statement before its COMMIT and sent with it: each project's
# version counts the writes that stored something in it, as without the group. The group's insert
# bumps nothing (INSERT_GROUP): the row of project_versions that every write to the project
# updates is locked from its update until the commit, and another process's write waits for it;
# here the lock is taken and released by the server within one round trip, where the insert's
# own bump had held it while the client read the insert's answer and waited for the GIL.
BUMP_GROUP = """
    INSERT INTO project_versions (project, version)
    SELECT x.project, x.n FROM unnest(%s::text[], %s::int[]) AS x(project, n) ORDER BY x.project
    ON CONFLICT (project) DO UPDATE SET version = project_versions.version + excluded.version
"""


class PostgresWrites:
    _write: Callable[..., Any]
    _piped: Callable[..., Any]
    _error: Callable[[str, BaseException], StoreError | ValidationError]
    _ours: Callable[[BaseException], bool]
    _get_many: Callable[[Any, str, Sequence[str]], list[Record]]
    _grow_words: Callable[[], None]
    _rid_written: int
    url: str

    def _init_writes(self) -> None:
        # `_write_lock` is held by the thread whose transaction stores the queued batches; the
        # others wait for their batch's turn meanwhile (groups.Groups, as on SQLite).
        self._write_lock = threading.Lock()
        self._groups = Groups()
        self._grouped = 0  # transactions that stored more than one batch (for tests)

    def add_many(self, records: Sequence[Record]) -> list[Record]:
        if not records:
            return []
        # A batch that contradicts itself is refused before it queues, with no SQL sent: queued,
        # it would fail its group's joint insert, and the group would be stored again batch by
        # batch; alone, its transaction's BEGIN would be sent before _insert refused it.
        plan_batch(records, {})
        job = Job(records)
        self._groups.write(job, self._write_lock, self._store_jobs)
        # Outside the group's lock: a partition made under its lock wait would hold up every
        # queued add. Every caller checks (a comparison unless a partition is due); the making
        # is idempotent under its advisory lock.
        self._grow_words()
        return job.result()

    def _store_jobs(self, jobs: list[Job]) -> None:
        if len(jobs) == 1:
            jobs[0].out = self._alone(jobs[0].records)
        elif not self._together(jobs):
            self._write(lambda conn: self._one_by_one(conn, jobs))

    def _alone(self, records: Sequence[Record]) -> list[Record]:
        # One record: the insert stores it or, stored already, nothing, and a changed repeat is
        # refused after an insert that did nothing: one atomic statement in autocommit, one round
        # trip where BEGIN, the insert and COMMIT were three. Else in a transaction: a repeated id
        # with other content refuses the batch after the insert.
        one = len(records) == 1 and not records[0].supersedes
        out: list[Record] = self._write(
            lambda conn: self._insert(conn, records)[0], transaction=not one
        )
        return out

    def _together(self, jobs: Sequence[Job]) -> bool:
        """All the batches as one, if storing them one after another would store the same: one
        insert for the whole group. Not when a record supersedes another (groups.joinable), nor
        when any batch is refused: then the transaction is rolled back, and False.
        A record repeated in a later batch answers with the earlier one, as one batch answers."""
        if not joinable(jobs):
            return False

        records = [r for job in jobs for r in job.records]

        def write(conn: Any) -> list[Record]:
            # BEGIN with the insert in one round trip, the bump with COMMIT in the next.
            out, fresh = self._insert(conn, records, False)
            stored: Counter[str] = Counter()
            seen: set[RecordId] = set()
            for job in jobs:
                keys = {(r.project, r.id) for r in job.records} - seen
                seen |= keys
                stored.update({project for project, rid in keys & fresh})
            if stored:
                conn.execute(BUMP_GROUP, (list(stored), list(stored.values())))
            return out

        try:
            out: list[Record] = self._piped(write, pipeline=len(records) < COPY_FROM)
        except ValidationError:
            # A batch refused (a changed repeat, text the server cannot store). Not a StoreError:
            # a commit whose answer was lost may have stored the group, and then every caller
            # gets the error, as a lone write would, rather than a second try.
            return False
        share(jobs, out)
        self._grouped += 1
        return True

    def _one_by_one(self, conn: Any, jobs: Sequence[Job]) -> None:
        """Each batch in a savepoint of its own, in the transaction open on `conn`: a refused
        batch is rolled back alone and answers with its error."""
        for job in jobs:
            try:
                with conn.transaction():
                    job.out = self._insert(conn, job.records)[0]
            except Exception as exc:
                job.error = exc
                if self._ours(exc):
                    job.error = self._error(f"cannot write {self.url}", exc)
        self._grouped += 1

    def _insert(
        self, conn: Any, records: Sequence[Record], bump: bool = True
    ) -> tuple[list[Record], set[RecordId]]:
        """Store `records` on `conn`: the answer, one record per record given, and the
        (project, id)s this insert stored (the others were stored before). `bump`: False when
        the caller bumps the projects' versions itself (BUMP_GROUP)."""
        _, unique = plan_batch(records, {})  # the first of each (project, id), in batch order
        rows = [record_to_row(r) for r in unique]
        if len(rows) < COPY_FROM:
            params = [list(col) for col in zip(*rows, strict=True)]
            inserted = conn.execute(INSERT_RECORDS if bump else INSERT_GROUP, params).fetchall()
        else:
            conn.execute(STAGE)
            with conn.cursor() as cur, cur.copy(COPY_STAGE) as copy:
                for n, row in enumerate(rows, 1):
                    copy.write_row((n, *row))
            inserted = conn.execute(INSERT_STAGED if bump else INSERT_GROUP_STAGED).fetchall()
        fresh: set[RecordId] = {(p, i) for p, i, _ in inserted}
        self._rid_written = max(self._rid_written, *(rid for *_, rid in inserted), 0)
        old = ((r.project, r.id) for r in unique if (r.project, r.id) not in fresh)
        stored = stored_of(lambda p, ids: self._get_many(conn, p, ids), old)
        # Refused (the transaction rolls back) if a repeated (project, id) says otherwise.
        out, _ = plan_batch(records, stored)
        # After the whole batch, so that a record may supersede one later in the same batch.
        replaced = [
            {"old": r.supersedes, "new": r.id, "by": r.author, "at": r.created_at,
             "project": r.project, "note": f"by {r.id}"}
            for r in unique if r.supersedes and (r.project, r.id) in fresh
        ]  # fmt: skip
        if replaced:
            with conn.cursor() as cur:
                cur.executemany(SUPERSEDE, replaced)
        return out, fresh
