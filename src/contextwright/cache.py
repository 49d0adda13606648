"""A per-process TTL cache for source results, so that repeated assemble calls on the same topic
within a few seconds do not re-run identical searches.

The key is (source, query, scope, store version): the query is everything the source reads from
the request (task, limit, role), the scope is project, agent, session and milestone, and the
version is `store.version(project)`, read once per assemble call (`SourceContext.version`), which
every write to the project raises. A write therefore invalidates every entry of its project at
once, without a message bus; the short TTL bounds how long a process may hold results at all.
Candidates are copied in and out, because scoring writes into them. Only sources that opt in
(`cacheable = True`, e.g. full text) are cached.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

from .candidates import Candidate
from .errors import ValidationError
from .sources import Source, SourceContext

CacheKey = tuple[Hashable, ...]


# Cached candidates, column by column (candidates.FIELDS): a tuple per field, the records of all
# candidates in one flat tuple, and components, reasons and sources as tuples of plain values.
# Every entry outlives many calls, so what it holds is walked by each full garbage collection:
# this way an entry is about three objects that the collector tracks, not four per candidate.
Frozen = tuple[tuple[Any, ...], ...]


def freeze(found: Sequence[Candidate]) -> Frozen:
    return (
        tuple(c.key for c in found),
        tuple(c.section for c in found),
        tuple(c.source for c in found),
        tuple(c.text for c in found),
        tuple(len(c.records) for c in found),
        tuple(r for c in found for r in c.records),
        tuple(c.score for c in found),
        tuple(tuple(c.components.items()) for c in found),
        tuple(tuple(c.reasons) for c in found),
        tuple(c.pinned for c in found),
        tuple(c.tokens for c in found),
        tuple(c.created_at for c in found),
        tuple(c.content_hash for c in found),
        tuple(tuple(c.sources) for c in found),
        tuple(c.beside for c in found),
        tuple(c.dated_line for c in found),
    )


def thaw(f: Frozen) -> list[Candidate]:
    """Candidates of their own (scoring writes into them) from frozen ones."""
    keys, sections, srcs, texts, counts, records, scores, comps, reasons = f[:9]
    pinned, tokens, created, hashes, sources, beside, dated_line = f[9:]
    out: list[Candidate] = []
    at = 0
    for i, n in enumerate(counts):
        c = Candidate(
            keys[i], sections[i], srcs[i], texts[i], records[at : at + n], scores[i],
            dict(comps[i]), list(reasons[i]), pinned[i], tokens[i], created[i], hashes[i],
            list(sources[i]), beside[i], dated_line[i],
        )  # fmt: skip
        out.append(c)
        at += n
    return out


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
        self.put(key, found)
        return found, "miss"

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
