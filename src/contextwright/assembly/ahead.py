"""The full-text search of an assemble call, started before the call's first read where the store
reads the project's version with it (`ports.SearchesAhead`: PostgreSQL). The search is the
longest read of a call on such a store and waits on the server, not on the GIL: started on the
pool once the version was read, it began a round trip and the call's setup into the call; started
first, it overlaps them.

What it searches for is guessed before the call knows it: the topic (the task without the
project's people, `scoring.topic`) is taken with the people known at the last call, and the limit
from the request. The full-text source takes the hits only where its own search would be the
same (`Early.__call__`): the same project, agent, text and limit, and a version no older than the
call's (a version's records commit with its bump, so a search that saw it holds them all).
Otherwise, or where it failed, the source searches as it does without this (on the pool, under
the call's deadline), so the window is the one it would be. The words' counts the search needs
are read by it, on the pool (the call's first read then carries none: `Assembler._resolve`).
The source runs on the calling thread (`pipeline.is_inline`), which waits for the search until
the sources' deadline (past it, the source fails as one the deadline cut off): a pool thread
waiting for another would hold two of the pool's threads for one search. Only the call's own
full-text source takes it (a pipeline's step runs on the pool: retrieval.py)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor, Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import cast

from ..ports import Hit, SearchesAhead, Store, capable, reads_remotely
from ..traces.trace import SourceRun
from .request import AssembleRequest
from .scoring import topic
from .sources import FullTextSource, Source

NAME = FullTextSource.name
# At most this many calls are remembered by `Answered`; past it, it starts again empty.
ANSWERED_MAX = 4096


class Answered:
    """The calls whose full text the source cache answered, each with the version it answered
    at. A call like one of them at the project's last version is likely answered so again (the
    third and later of identical calls at one version are, cache.py): nothing is started for it,
    whose search the server would run for nothing."""

    def __init__(self) -> None:
        self._at: dict[tuple[object, ...], int] = {}

    @staticmethod
    def _key(request: AssembleRequest) -> tuple[object, ...]:
        return (request.project, request.agent, request.session, request.milestone,
                request.task, tuple(sorted(request.limits.items())))  # fmt: skip

    def note(self, request: AssembleRequest, version: int, runs: Sequence[SourceRun]) -> None:
        """After a call's sources ran: was its full text answered from the cache?"""
        if any(r.name == NAME and r.cache == "hit" for r in runs):
            if len(self._at) >= ANSWERED_MAX:
                self._at.clear()
            self._at[self._key(request)] = version

    def likely(self, request: AssembleRequest, version: int) -> bool:
        return self._at.get(self._key(request)) == version


class Early:
    """The search started ahead, as the full-text source's search: `(project, agent, text,
    limit) -> hits`, `store.search_text`'s signature (`SourceContext.ahead`). `version`: the
    call's, set once the call has read it; `deadline`: the sources', set as they start."""

    __slots__ = ("deadline", "future", "key", "pool", "store", "version")

    def __init__(self, store: Store, pool: Executor, key: tuple[str, str, str, int]) -> None:
        self.store, self.pool, self.key = store, pool, key
        self.future: Future[tuple[int, list[Hit]]] = pool.submit(
            cast(SearchesAhead, store).search_ahead, *key
        )
        self.version: int | None = None
        # perf_counter time past which the search is not waited for: the sources' (run.py sets
        # it as they start); until then the hits are not waited for at all.
        self.deadline = 0.0

    def __call__(self, project: str, agent: str, text: str, limit: int) -> list[Hit]:
        """The hits; past the deadline, FutureTimeout (the source fails as one cut off by it)."""
        if self.version is not None and (project, agent, text, limit) == self.key:
            try:
                version, hits = self.future.result(timeout=self._left())
            except FutureTimeout:
                raise
            except Exception:  # searched again below: a failure there is the source's warning
                pass
            else:
                if version >= self.version:
                    return hits
        # On the pool as without the search ahead, so that the deadline still cuts it off.
        again = self.pool.submit(self.store.search_text, project, agent, text, limit)
        return again.result(timeout=self._left())

    def _left(self) -> float:
        return max(self.deadline - time.perf_counter(), 0.0)


def searches_ahead(store: Store, pool: Executor | None) -> bool:
    """Whether calls on `store` start their search ahead: with a pool, on a store that can and
    whose reads wait on another process (PostgreSQL)."""
    return pool is not None and capable(store, SearchesAhead) and reads_remotely(store)


def start(
    store: Store,
    pool: Executor | None,
    sources: Sequence[Source],
    people: Mapping[str, tuple[int, frozenset[str]]],
    request: AssembleRequest,
    answered: Answered,
) -> Early | None:
    """The call's search, started on `pool`, or None where nothing is started: no pool, a store
    that cannot (`SearchesAhead`, remote), a call whose text or sources are not yet known (a
    task by id, pipelines of its own, the people never read), that has no full-text source, or
    that the source cache likely answers (`Answered`)."""
    if pool is None or not searches_ahead(store, pool):
        return None
    if request.task_id is not None or request.pipelines is not None:
        return None
    known = people.get(request.project)
    named = request.sources
    if known is None or not request.task.strip() or (named is not None and NAME not in named):
        return None
    if not any(s.name == NAME and isinstance(s, FullTextSource) for s in sources):
        return None
    if answered.likely(request, known[0]):
        return None
    text = topic(request.task, known[1]) or request.task
    limit = int(request.limits.get(NAME, FullTextSource.LIMIT))
    return Early(store, pool, (request.project, request.agent, text, limit))
