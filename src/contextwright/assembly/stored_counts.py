"""Whose token counts a project's records carry, so that a window may be counted from them.

Every record carries the count of its content (`Record.tokens`), made by the tokenizer of the
engine that stored it. The renderer counts a window's record lines from those counts instead of
counting each line anew (render.remember_counts, docs/tokens.md); that is exact only when they
were made by the tokenizer that counts the window, and the exact count is what keeps a window
within its budget. So each project keeps a note of the tokenizer that counted its records (a doc
in the store, collection `counts`): the first engine to store a record there writes its
tokenizer's name, and an engine with another tokenizer turns the note into `mixed` before it
writes. An engine takes a project's stored counts only when the note names its own tokenizer.
A project that has records but no note (written before notes were kept) gets `mixed` too, since
no one knows whose counts its records carry: its lines are counted one by one, as before.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..ports import Query, Store, Tokenizer

COLLECTION = "counts"
MIXED = "mixed"  # more than one tokenizer, or one unknown: never taken


def tokenizer_name(counter: Tokenizer) -> str:
    """A tokenizer's `name` (TokenCounter: its encoding), or its class for one without."""
    name = getattr(counter, "name", None)
    return str(name) if name else f"{type(counter).__module__}.{type(counter).__qualname__}"


class StoredCounts:
    """The engine's side of the note: `declare` before storing records, `trusted` when
    assembling."""

    def __init__(self, store: Store, counter: Tokenizer) -> None:
        self.store = store
        self.name = tokenizer_name(counter)
        self._declared: set[str] = set()
        # project -> (store version when the note was read, whether it names this tokenizer)
        self._trusted: dict[str, tuple[int, bool]] = {}

    def _note(self, project: str) -> str | None:
        doc = self.store.get_doc(COLLECTION, project, project)
        return None if doc is None else str(doc.get("tokenizer"))

    def declare(self, projects: Iterable[str], at: float) -> None:
        """Before this engine stores records in `projects`: note its tokenizer there, or `mixed`
        where another one counted records already. Read once per project and engine."""
        for project in sorted(set(projects) - self._declared):
            note = self._note(project)
            if note is None:
                older = self.store.query(Query(project, None, limit=1))  # before notes were kept
                self._write(project, MIXED if older else self.name, at)
            elif note not in (self.name, MIXED):
                self._write(project, MIXED, at)
            self._declared.add(project)
            # A note written here changes no version: what was read before it is read again.
            self._trusted.pop(project, None)

    def _write(self, project: str, value: str, at: float) -> None:
        self.store.put_doc(COLLECTION, project, project, {"tokenizer": value}, at)

    def carry(self, project: str, before: int, after: int) -> None:
        """This engine's own write of records took `project` from version `before` to `after`
        (ports.Written): what was read at `before` holds at `after`, since the note changes only
        in `declare`, and the records this engine stores carry its own tokenizer's counts."""
        hit = self._trusted.get(project)
        if hit is not None and hit[0] == before:
            self._trusted[project] = (after, hit[1])

    def trusted(self, project: str, version: int) -> bool:
        """May this engine count `project`'s record lines from their stored counts? Read again
        whenever the project's version changed (a note changes only with a write of records)."""
        hit = self._trusted.get(project)
        if hit is None or hit[0] != version:
            if len(self._trusted) >= 4096:  # bounded: a server may see any number of projects
                self._trusted.clear()
            hit = self._trusted[project] = (version, self._note(project) == self.name)
        return hit[1]
