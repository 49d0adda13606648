"""The store reads of assemble calls, kept by (query, store version) for the calls after them.

The bounded reads of the sources (pinned records, decisions in force, open items, what is
addressed to an agent) are the same for every call of a project at one store version: every
write to the project raises it (`store.version`, read once per call), so a result read at a
version is the result of that read for as long as the version holds. Without this each call read
them again: five statements and their rows, about a tenth of a cold call at 100k records.

An engine's own write of records (`carry`, from RecordBook through `Assembler.written`) keeps
the results that no record of the write can enter, at the write's new version: a record enters a
read only if it matches the read's filters, and a write of records changes no stored record but
the one a record `supersedes`. In the agent loop (a reply written before every call) the
project-wide reads then survive the reply. Any other write (another engine or process, a status
change) moves the version without a `carry`, and the next call reads again.

The records of the vector source's hits (`ById`, vectors.py) are kept the same way: the agent loop
asks the same task every turn, its hits are mostly those of the turn before, and a write of new
records changes none of them.

The records said around the strongest matches (locality.py's `neighbours` read, keyed `Near`)
and the replies to the questions among the candidates (chains.py, `Replies`) are kept the same
way: a record may change the first only if it is in one of their sessions, the second only if
it replies to one of the questions.

Entries are also dropped after the source cache's TTL (cache.py; `cache_ttl_s=0` turns both
off), so that a store whose `version` never moves cannot serve old reads for long.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any, TypeVar, cast

from ..ports import Hit, Query, Store, hits_for
from ..records import Record


@dataclass(frozen=True, slots=True)
class Near:
    """The read of the records said around `anchors` (session, time) in their sessions, as
    `agent` may see them (ports.BatchNeighbours, locality.py)."""

    project: str
    agent: str
    anchors: tuple[tuple[str | None, float], ...]


@dataclass(frozen=True, slots=True)
class Replies:
    """The read of the replies to `ids` that `agent` may see (Store.replies_to, chains.py)."""

    project: str
    agent: str
    ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ById:
    """The records of `project` that the vector source's last call read by id (vectors.py),
    by id: a write of new records changes none of them (records are immutable; a status change
    or a `supersedes` is a write that no `carry` links across)."""

    project: str


Key = Query | Near | Replies | ById
Group = OrderedDict[Key, tuple[float, Any]]
T = TypeVar("T")


def may_change(key: Key, r: Record) -> bool:
    """Could storing `r` change what the read `key` returns?"""
    if isinstance(key, Near):
        return r.project == key.project and any(r.session == s for s, _ in key.anchors)
    if isinstance(key, Replies):
        return r.project == key.project and r.reply_to in key.ids
    if isinstance(key, ById):
        return False  # a new record is none of those read, and a stored one never changes here
    return may_enter(key, r)


def may_enter(q: Query, r: Record) -> bool:
    """Could the read `q` return `r`? False only where one of `q`'s filters leaves `r` out
    whatever else is stored (visibility aside: a record the agent may not see counts as one it
    might)."""
    return q.admits(r)


def headed(q: Key, found: Sequence[Record], written: Sequence[Record]) -> list[Record] | None:
    """What the newest-first read `q` returns once `written` (records stored since it returned
    `found`, each of which it admits) are stored, where that follows from `found`: one record
    written, that the agent may not see (`found` as it was) or that is newer than all of `found`
    (it heads them, the oldest one past the limit goes). That is the session's history read in
    the agent loop, where the agent's reply is the newest turn. None where it does not follow:
    the read goes to the store. The record is the one the write stored, so it must be the one
    the store gives back: no meta that a store might not give back as it is (`_plain`)."""
    if (
        not isinstance(q, Query)
        or not q.newest_first
        or q.addressed_to is not None  # ordered by when it was addressed, not said
        or q.limit < 1
        or len(written) != 1
    ):
        return None
    (r,) = written
    if q.agent is not None and not r.visible_to(q.agent):
        return list(found)
    if (found and r.created_at <= found[0].created_at) or not _plain(r.meta):
        return None
    return [r, *found[: max(q.limit - 1, 0)]]


def _plain(meta: Mapping[str, Any]) -> bool:
    """Does every store give `meta` back as it is? Strings, whole numbers, booleans and null
    (not floats: JSON in PostgreSQL may give a float back as a whole number)."""
    return all(
        isinstance(k, str) and (v is None or isinstance(v, str | int)) for k, v in meta.items()
    )


class ReadCache:
    """Read results by project and store version, then by query; at most `groups` versions (one
    per project but for calls still running at an older one, and the versions an own write
    links to the newest) and `per_group` reads each, the least recently used going first: at
    most 1,024 reads of at most a source's limit of records each, records that the store's
    record cache mostly holds anyway.

    An own write is carried lazily: `carry` records the step (the versions and the records
    written), and a read asked at the newer version is looked for at the older ones the steps
    link it to, and kept there only if no record written since may change it. So a write costs
    nothing per kept read (checking every kept read at each write cost an add 0.37 ms), and a
    call checks only the reads it asks for, against the few records written since."""

    STEPS = 16  # own writes a read is carried across at most

    def __init__(
        self,
        ttl_s: float,
        per_group: int = 128,
        groups: int = 8,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_s = ttl_s
        self.per_group = per_group
        self.groups = groups
        self.clock = clock
        self._lock = threading.Lock()
        self._groups: OrderedDict[tuple[str, int], Group] = OrderedDict()
        # (project, after) -> (before, the records that write stored): own writes (`carry`).
        self._steps: OrderedDict[tuple[str, int], tuple[int, tuple[Record, ...]]] = OrderedDict()

    def get(self, q: Key, version: int) -> Any:
        """What the read `q` returned at `version`, or None."""
        with self._lock:
            group = self._groups.get((q.project, version))
            entry = group.get(q) if group is not None else None
            if entry is None:
                entry = self._carried(q, version)
            if entry is None:
                return None
            if self.clock() >= entry[0]:
                if group is not None:
                    group.pop(q, None)
                return None
            self._keep(self._group(q.project, version), q, entry)
        return entry[1]

    def put(self, q: Key, version: int, found: Any) -> None:
        if self.ttl_s <= 0:
            return
        with self._lock:
            self._keep(self._group(q.project, version), q, (self.clock() + self.ttl_s, found))

    def _keep(self, group: Group, q: Key, entry: tuple[float, Any]) -> None:
        group[q] = entry
        group.move_to_end(q)
        while len(group) > self.per_group:
            group.popitem(last=False)

    def _back(self, project: str, version: int) -> Iterator[tuple[int, tuple[Record, ...]]]:
        """The steps own writes took to `version`, newest first: each older version and the
        records written since it was the newest (at most STEPS)."""
        v = version
        for _ in range(self.STEPS):
            step = self._steps.get((project, v))
            if step is None:
                return
            v = step[0]
            yield step

    def _carried(self, q: Key, version: int) -> tuple[float, Any] | None:
        """The entry of `q` at an older version that own writes link to `version`, if none of
        the records written since may change it, or if the one that may is its new head
        (`headed`)."""
        written: list[Record] = []
        for v, records in self._back(q.project, version):
            written.extend(records)
            group = self._groups.get((q.project, v))
            entry = group.get(q) if group is not None else None
            if entry is not None:
                # `headed` takes one record at most: two are as good as all of them.
                changing = list(islice((r for r in written if may_change(q, r)), 2))
                if not changing:
                    return entry
                found = headed(q, entry[1], changing)
                return None if found is None else (entry[0], found)
        return None

    def _group(self, project: str, version: int) -> Group:
        key = (project, version)
        group = self._groups.get(key)
        if group is None:
            # A project's older versions are read by no call to come (its version only grows),
            # but a call still running, and the ones own writes link to this one (`_carried`).
            linked = {v for v, _ in self._back(project, version)}
            for old in [k for k in self._groups if k[0] == project and k[1] < version]:
                if old[1] not in linked:
                    del self._groups[old]
            group = self._groups[key] = OrderedDict()
            while len(self._groups) > self.groups:
                self._groups.popitem(last=False)
        return group

    def carry(self, project: str, before: int, after: int, written: Sequence[Record]) -> None:
        """A write of `written` took `project` from `before` to `after`: the reads at `before`
        that none of them may enter hold at `after` (see the module's doc and `_carried`)."""
        with self._lock:
            if any(r.supersedes for r in written):  # a stored record changed: nothing holds
                self._groups.pop((project, before), None)
                return
            self._steps[(project, after)] = (before, tuple(written))
            while len(self._steps) > self.groups * self.STEPS:
                self._steps.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._groups.clear()
            self._steps.clear()

    def __len__(self) -> int:
        with self._lock:
            return sum(len(g) for g in self._groups.values())


def kept_read(shared: ReadCache | None, version: int | None, key: Key, read: Callable[[], T]) -> T:
    """`read()`, the read `key` names, or what an earlier call read at `version` (`shared`)."""
    if shared is None or version is None:
        return read()
    found = cast(T | None, shared.get(key, version))
    if found is None:
        found = read()
        shared.put(key, version, found)
    return found


def kept_replies(
    store: Store,
    shared: ReadCache | None,
    version: int | None,
    project: str,
    agent: str,
    ids: Sequence[str],
    before: list[Record] | None = None,
) -> list[Record]:
    """`store.replies_to(project, ids, agent)`, or what an earlier call read at `version`
    (`Replies`). `before`: that read made beforehand (chains.py's `Links`), taken as the read."""
    key = Replies(project, agent, tuple(ids))
    return kept_read(
        shared,
        version,
        key,
        lambda: store.replies_to(project, list(key.ids), agent) if before is None else before,
    )


def kept_hits(
    store: Store,
    shared: ReadCache | None,
    version: int | None,
    project: str,
    found: Sequence[tuple[str, float]],
    known: dict[str, Record],
) -> list[Hit]:
    """`hits_for(store, project, found, known)`, also taking the records that the last call
    read this way at `version`, or before own writes of new records (`ById`): the agent loop's
    hits are mostly the turn before's. Only the others are read from the store."""
    if shared is None or version is None:
        return hits_for(store, project, found, known)
    key = ById(project)
    before: dict[str, Record] | None = shared.get(key, version)
    hits = hits_for(store, project, found, {**before, **known} if before else known)
    shared.put(key, version, {h.record.id: h.record for h in hits})
    return hits
