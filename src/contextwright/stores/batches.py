"""A batch write's plan: records by identity, grouped by project."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from ..records import Record, changed_write, same_write

RecordId = tuple[str, str]  # (project, id): a record's identity


def plan_batch(
    records: Sequence[Record], stored: dict[RecordId, Record]
) -> tuple[list[Record], list[Record]]:
    """What `add_many` answers, and the records it must insert, given the records of the batch's
    (project, id)s already `stored`. A repeat with the same write answers the first (stored or
    earlier in the batch); with another write the whole batch is refused (ValidationError)."""
    out: list[Record] = []
    fresh: dict[RecordId, Record] = {}
    for r in records:
        key = (r.project, r.id)
        before = stored.get(key) or fresh.get(key)
        if before is None:
            fresh[key] = r
            out.append(r)
        elif same_write(before, r):
            out.append(before)
        else:
            raise changed_write(r)
    return out, list(fresh.values())


def by_project(pairs: Iterable[RecordId]) -> dict[str, list[str]]:
    """(project, id) pairs as each project's ids, in order, once each."""
    out: dict[str, dict[str, None]] = {}
    for project, rid in pairs:
        out.setdefault(project, {})[rid] = None
    return {p: list(ids) for p, ids in out.items()}


def stored_of(
    get_many: Callable[[str, Sequence[str]], list[Record]], keys: Iterable[RecordId]
) -> dict[RecordId, Record]:
    """The stored records of `keys`, read per project by `get_many(project, ids)`: what
    `plan_batch` is given."""
    return {
        (r.project, r.id): r
        for project, ids in by_project(keys).items()
        for r in get_many(project, ids)
    }
