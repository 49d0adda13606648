"""A per-process TTL cache for source results, so that repeated assemble calls on the same topic
within a few seconds do not re-run identical searches.

The key is (source, query, scope, store version): the query is everything the source reads from
the request (task, limit, role), the scope is project, agent, session and milestone, and the
version is `store.version(project)`, read once per assemble call (`SourceContext.version`), which
every write to the project raises. A write therefore invalidates every entry of its project at
once, without a message bus; the short TTL bounds how long a process may hold results at all.
Candidates are copied in and out, because scoring writes into them. Only sources that opt in
(`cacheable = True`, e.g. full text) are cached. The store reads of every source are kept apart,
by (query, version), in `reads` (reads.py), under the same TTL.

A result is kept from the second time its key misses within the TTL, not the first: most keys
never come again (every call of an agent loop follows a write, which changes the version; a cold
call has a task of its own), and keeping a result means copying every candidate (~50 us a call at
100k records). The first miss leaves only the key. So the third of three identical calls is the
first hit.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from itertools import islice

from ..errors import ValidationError
from .candidates import Candidate, Frozen, freeze, thaw
from .reads import ReadCache
from .sources import Source, SourceContext

CacheKey = tuple[Hashable, ...]


def is_cacheable(src: Source) -> bool:
    return bool(getattr(src, "cacheable", False))


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    expired: int = 0


class SourceCache:
    """Source results by (source, query, scope, version), each kept for `ttl_s` seconds."""

    def __init__(
        self,
        ttl_s: float = 30.0,
        max_entries: int = 2048,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not isinstance(ttl_s, int | float) or isinstance(ttl_s, bool) or ttl_s < 0:
            raise ValidationError("cache_ttl_s", ttl_s, "give seconds >= 0 (0 turns it off)")
        if not isinstance(max_entries, int) or max_entries < 1:
            raise ValidationError("max_entries", max_entries, "give a whole number >= 1")
        self.ttl_s = float(ttl_s)
        self.max_entries = max_entries
        self.clock = clock
        self.stats = CacheStats()
        self._lock = threading.Lock()
        self._entries: OrderedDict[CacheKey, tuple[float, Frozen]] = OrderedDict()
        # Keys missed once, until when (see the module's doc): the next miss within the TTL keeps
        # its result.
        self._seen: OrderedDict[CacheKey, float] = OrderedDict()
        # The sources' store reads by (query, store version), with the same TTL (reads.py).
        self.reads = ReadCache(self.ttl_s, clock=clock)

    @property
    def enabled(self) -> bool:
        return self.ttl_s > 0

    def key(self, src: Source, ctx: SourceContext) -> CacheKey:
        return (
            src.name,
            ctx.project,
            ctx.agent,
            ctx.session,
            ctx.milestone,
            ctx.role.name,
            ctx.task,
            tuple(sorted(ctx.limits.items())),
            tuple(sorted((k, repr(v)) for k, v in ctx.options.items())),
            ctx.store.version(ctx.project) if ctx.version is None else ctx.version,
        )

    def get(self, key: CacheKey) -> list[Candidate] | None:
        now = self.clock()
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.stats.misses += 1
                return None
            expires, found = entry
            if now >= expires:
                del self._entries[key]
                self.stats.expired += 1
                self.stats.misses += 1
                return None
            self._entries.move_to_end(key)
            self.stats.hits += 1
        return thaw(found)

    def admit(self, key: CacheKey) -> bool:
        """After a miss of `key`: should its result be kept? Yes when the key missed before within
        the TTL; else the key is noted (bounded as the entries are) and nothing is copied."""
        now = self.clock()
        with self._lock:
            until = self._seen.pop(key, None)
            if until is not None and now < until:
                return True
            self._seen[key] = now + self.ttl_s
            while len(self._seen) > self.max_entries:
                self._seen.popitem(last=False)
        return False

    def put(self, key: CacheKey, found: Sequence[Candidate]) -> None:
        now = self.clock()
        entry = (now + self.ttl_s, freeze(found))
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
                self.stats.evictions += 1
            # Expired entries at the old end go now, not when (if ever) their key comes again.
            for old, (expires, _) in list(islice(self._entries.items(), 8)):
                if now < expires:
                    break
                del self._entries[old]
                self.stats.expired += 1

    def holds(self, src: Source, ctx: SourceContext) -> bool:
        """Would `run` answer from the cache now? (Counts neither a hit nor a miss.)"""
        if not self.enabled or not is_cacheable(src):
            return False
        key = self.key(src, ctx)
        with self._lock:
            entry = self._entries.get(key)
        return entry is not None and self.clock() < entry[0]

    def run(self, src: Source, ctx: SourceContext) -> tuple[list[Candidate], str]:
        """Run `src` through the cache: (candidates, "hit" | "miss" | "off")."""
        if not self.enabled or not is_cacheable(src):
            return src.run(ctx), "off"
        key = self.key(src, ctx)
        cached = self.get(key)
        if cached is not None:
            return cached, "hit"
        found = src.run(ctx)
        if self.admit(key):
            self.put(key, found)
        return found, "miss"

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._seen.clear()
        self.reads.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
