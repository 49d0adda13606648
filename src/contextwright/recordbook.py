"""Writing and reading records, key-values and status facts: validated here, stored by the
store. The Engine and the features (sessions, tasks) write through one `RecordBook`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

from .assembly.references import check_links
from .assembly.stored_counts import StoredCounts
from .errors import NotFound, ValidationError, _short
from .ports import Query, ReportsWrites, Store, Tokenizer, Written, capable
from .records import (
    KINDS,
    MAX_CONTENT_CHARS,
    STATUSES,
    Record,
    build_record,
    check_display_name,
    check_identifier,
    check_name,
    check_text,
    check_time,
)

FILTERS = frozenset(
    ("kinds", "session", "author", "statuses", "addressed_to", "pinned", "tag", "milestone",
     "since", "before", "newest_first")
)  # fmt: skip


class RecordBook:
    def __init__(
        self,
        store: Store,
        counter: Tokenizer,
        clock: Callable[[], float],
        counts: StoredCounts,
        on_write: Callable[[], None] = lambda: None,
    ) -> None:
        self.store = store
        self.counter = counter
        self.clock = clock
        self.counts = counts
        self.on_write = on_write  # the vector worker's wake-up
        # Told the version steps of each write where the store reports them (ReportsWrites), each
        # with the records the write stored: the assembler's caches keyed by the version follow
        # its own writes (the engine sets it to run.Assembler.written).
        self.on_written: Callable[[Sequence[Written]], None] = lambda steps: None

    def add(self, **fields: Any) -> Record:
        now = self.clock()  # the write's time, for the record (unless given) and the note
        record = build_record(fields, self.counter.count, now=now)
        check_links(self.store, [record], batch=False)
        self.counts.declare([record.project], now)
        stored = self._store([record])[0]
        self.on_write()
        return stored

    def _store(self, records: Sequence[Record]) -> list[Record]:
        store = self.store
        if not capable(store, ReportsWrites):
            return store.add_many(records)
        stored, steps = cast(ReportsWrites, store).add_many_written(records)
        if steps:
            self.on_written(steps)
        return stored

    def add_many(self, items: Iterable[Mapping[str, Any]]) -> list[Record]:
        return [stored for stored, _ in self.add_batch(items)]

    def add_batch(self, items: Iterable[Mapping[str, Any]]) -> list[tuple[Record, bool]]:
        if isinstance(items, Mapping | str | bytes) or not isinstance(items, Iterable):
            raise ValidationError("records", items, "give a list of record objects")
        now = self.clock()
        items = list(items)
        count = self._batch_counter(items)
        built = []
        for i, item in enumerate(items):
            try:
                built.append(build_record(item, count, now=now))
            except ValidationError as exc:
                # The message reads "{field}={value} {problem}: {fix}"; keep the problem whole.
                start = len(f"{exc.field}={_short(exc.value)} ")
                problem = exc.message[start : len(exc.message) - len(exc.fix) - 2] or None
                raise ValidationError(
                    f"records[{i}].{exc.field}", exc.value, exc.fix, problem=problem
                ) from exc
        check_links(self.store, built, batch=True)
        self.counts.declare([r.project for r in built], now)
        stored = self._store(built)
        self.on_write()
        # A store returns a record it stored as given, the same object (ports.Store.add_many).
        return [(s, s is b) for s, b in zip(stored, built, strict=True)]

    def _batch_counter(self, items: Sequence[Any]) -> Callable[[str], int]:
        """Token counts for a batch's contents in one call (tiktoken encodes a batch on several
        threads); anything not in the batch falls back to counting one by one."""
        texts = [
            c
            for it in items
            if (type(it) is dict or isinstance(it, Mapping))
            and isinstance(c := it.get("content"), str)
            and c
            and not c.isspace()
        ]
        if len(texts) < 8:
            return self.counter.count
        texts = list(dict.fromkeys(texts))  # a content repeated in the batch is counted once
        known = dict(zip(texts, self.counter.count_many(texts), strict=True))

        def count(text: str) -> int:
            n = known.get(text)
            return self.counter.count(text) if n is None else n

        return count

    def get(self, project: str, record_id: str) -> Record:
        check_identifier("project", project)
        check_name("id", record_id)
        found = self.store.get_many(project, [record_id])
        if not found:
            raise NotFound("record", record_id)
        return found[0]

    def records(
        self, project: str, *, agent: str | None = None, limit: int = 50, **filters: Any
    ) -> list[Record]:
        check_identifier("project", project)
        if not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise ValidationError("limit", limit, "give a whole number from 1 to 10000")
        unknown = sorted(set(filters) - FILTERS)
        if unknown:
            name = unknown[0]
            plural = {"kind": "kinds", "status": "statuses"}.get(name)
            fix = (
                f"write {plural}=({filters[name]!r},): the filter takes several"
                if plural
                else f"filter by {', '.join(sorted(FILTERS))}"
            )
            raise ValidationError(name, filters[name], fix, problem="is not a filter")
        for key, allowed in (("kinds", KINDS), ("statuses", STATUSES)):
            value = filters.get(key)
            if value is None:
                continue
            if isinstance(value, str):
                value = (value,)
            elif not isinstance(value, list | tuple | set | frozenset):
                fix = f"give a list of names, e.g. [{allowed[0]!r}]"
                raise ValidationError(key, value, fix)
            filters[key] = tuple(
                check_choice(f"{key}[{i}]", v, allowed) for i, v in enumerate(value)
            )
        for key in ("since", "before"):
            if filters.get(key) is not None:
                check_time(key, filters[key])
        check_texts(("agent", agent), *filters.items())
        return self.store.query(Query(project=project, agent=agent, limit=limit, **filters))

    def set_status(
        self, project: str, record_id: str, status: str, *, by: str, note: str = ""
    ) -> Record:
        if status not in STATUSES:
            raise ValidationError("status", status, f"use one of {', '.join(STATUSES)}")
        check_display_name("by", by)
        check_texts(("note", note))
        record = self.get(project, record_id)
        if not record.visible_to(by):  # a change by whom may not see it, told as a missing id
            raise NotFound("record", record_id)
        self.store.set_status(project, record.id, status, by, self.clock(), note)
        return self.get(project, record_id)

    def kv_set(self, project: str, key: str, value: str) -> None:
        check_identifier("project", project)
        check_name("key", key)
        if not isinstance(value, str):
            raise ValidationError("value", value, "give the value as a string")
        if len(value) > MAX_CONTENT_CHARS:
            raise ValidationError(
                "value", f"<{len(value)} characters>",
                f"keep a value under {MAX_CONTENT_CHARS} characters", problem="is too large",
            )  # fmt: skip
        check_text("value", value)
        self.store.kv_set(project, key, value, self.clock())

    def kv_get(self, project: str, key: str) -> str:
        check_identifier("project", project)
        check_name("key", key)
        value = self.store.kv_get(project, key)
        if value is None:
            raise NotFound("key", key, f"set it with kv_set({project!r}, {key!r}, ...)")
        return value


def check_choice(field: str, value: Any, allowed: Sequence[str]) -> str:
    """A kind or status no record can have is a typo, not a filter that matches nothing."""
    if isinstance(value, str):
        check_text(field, value)  # a NUL or lone surrogate is named as such, not as a typo
    if not isinstance(value, str) or value not in allowed:
        raise ValidationError(field, value, f"use one of {', '.join(allowed)}")
    return value


def check_texts(*pairs: tuple[str, Any]) -> None:
    """Text arguments of a read (filters, names): refused by name rather than by the store."""
    for key, value in pairs:
        if isinstance(value, str):
            check_text(key, value)
        elif isinstance(value, list | tuple):
            for i, item in enumerate(value):
                if isinstance(item, str):
                    check_text(f"{key}[{i}]", item)
