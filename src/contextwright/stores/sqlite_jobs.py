"""A caller's batch in the SQLite store's group commit (SQLiteStore.add_many): the writes other
threads queued while one waited for the write lock are stored in one transaction, each batch in
a savepoint of its own, and each caller gets its own answer or its own error."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ..errors import StoreError, ValidationError
from ..records import Record


class Job:
    """One caller's batch in a group commit: its records, then its result or its error."""

    __slots__ = ("done", "error", "out", "records")

    def __init__(self, records: Sequence[Record]) -> None:
        self.records = records
        self.done = False
        self.out: list[Record] | None = None
        self.error: BaseException | None = None

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
