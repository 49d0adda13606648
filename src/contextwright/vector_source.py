"""The `vector` source: records nearest to the task by the cosine of their embeddings
(docs/vectors.md), searched on the engine's pool beside the other sources' reads where the store
searches in this process. vectors.py owns it (the embedder, the worker, the trace notes)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from .assembly.candidates import Candidate, Frozen, freeze, thaw
from .assembly.reads import kept_hits
from .assembly.sources import SourceContext, hit_candidates
from .ports import Embedder, Hit, KeepsVectors, NearestHere, Tokenizer, capable
from .records import Record

# Agent and task pairs whose last hits and candidates are kept (VectorSource._candidates).
MADE_KEPT = 16


def searches_here(store: object) -> bool:
    """The store searches its vectors in this process (`vector_nearest`: SQLite, memory)."""
    return capable(store, NearestHere)


def supports_vectors(store: object) -> bool:
    return capable(store, KeepsVectors)


class VectorSource:
    """Records nearest to the task by cosine of their embeddings, each with a `vector` signal
    (cosine scaled over the list) that scoring.fuse_relevance fuses with `bm25` into `relevance`;
    the last `cache_size` query embeddings are kept."""

    name, top_k = "vector", 40  # top_k: the hits read where nothing sizes the list
    # On a store that searches in this process (`vector_nearest`: SQLite, memory), the query's
    # embedding and the search run on the pool, started before any source, and the hits are
    # read on the calling thread (pipeline.py): the pool's work holds the GIL little, so it
    # overlaps the other sources' reads. On PostgreSQL (`remote`) all of it runs on the pool.
    inline = "local"
    prepare_weight = 4.0  # a query embedding and the search: the longest work of a call

    def __init__(self, embedder: Embedder, cache_size: int = 256) -> None:
        self.embedder = embedder
        self.cache_size = cache_size
        self._cache: OrderedDict[str, Any] = OrderedDict()
        self._made: OrderedDict[tuple[str, str | None, str], _Made] = OrderedDict()
        self._lock = threading.Lock()

    def _cached(self, text: str) -> Any:
        with self._lock:
            vec = self._cache.get(text)
            if vec is not None:
                self._cache.move_to_end(text)
            return vec

    def _keep(self, text: str, vec: Any) -> Any:
        with self._lock:
            self._cache[text] = vec
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return vec

    def _embedding(self, text: str) -> Callable[[], Callable[[], Any]]:
        """The embedding of `text` as work that returns what is left to do: for an embedder with
        `query_steps` (MiniLM) the text is tokenized now, on the calling thread, the work runs
        the model alone and returns the pooling of its output; otherwise the work does it all."""
        steps = getattr(self.embedder, "query_steps", None)
        if steps is None:

            def whole() -> Callable[[], Any]:
                vec = self.embedder.embed([text])[0]
                return lambda: vec

            return whole
        split = steps(text)

        def model() -> Callable[[], Any]:
            out = split.run()
            return lambda: split.vector(out)

        return model

    def _nearest(self, ctx: SourceContext) -> Callable[[], Callable[[], list[tuple[str, float]]]]:
        """The query's embedding (unless cached) and the search, as one piece of work: on the
        pool beside the other sources' reads, it made calls 0.1-1.1 ms faster at p50 than the
        search on the calling thread after them, in seven paired runs (docs/vectors.md)."""
        text, store = ctx.query_text, cast(NearestHere, ctx.store)  # prepare and run ask first
        vec = self._cached(text)
        embed = None if vec is not None else self._embedding(text)
        project, agent, model = ctx.project, ctx.agent, self.embedder.name
        limit = ctx.depth(self.name, self.top_k)

        def work() -> Callable[[], list[tuple[str, float]]]:
            v = vec if embed is None else self._keep(text, embed()())
            found: list[tuple[str, float]] = store.vector_nearest(project, agent, v, limit, model)
            return lambda: found

        return work

    def applies(self, ctx: SourceContext) -> bool:
        return bool(ctx.task.strip()) and supports_vectors(ctx.store)

    def prepare(self, ctx: SourceContext) -> Callable[[], Callable[[], Any]] | None:
        """Work for the pool while the other sources read: the embedding, and the search where
        the store searches in this process. None for a task asked again (the loop): its search
        (kept distances, half a millisecond of small numpy steps that took the GIL from the
        calling thread on the pool) runs on the caller, and the spare core is left to others."""
        text = ctx.query_text
        if not self.applies(ctx) or self._cached(text) is not None:
            return None
        return self._nearest(ctx) if searches_here(ctx.store) else self._embedding(text)

    def run(self, ctx: SourceContext) -> list[Candidate]:
        store = ctx.store
        if not self.applies(ctx):
            return []
        if searches_here(store):
            # What `prepare` started (or all of it here); hits read already are not read again.
            found = ctx.prepared_result(self.name, lambda: self._nearest(ctx)())()
            hits = kept_hits(store, ctx.shared, ctx.version, ctx.project, found, ctx.records_read())
            return self._candidates(hits, ctx) if hits else []
        text = ctx.query_text
        vec = self._cached(text)
        if vec is None:  # what `prepare` started, or (no pool) all of it here
            finish = ctx.prepared_result(self.name, lambda: self._embedding(text)())
            vec = self._keep(text, finish())
        hits = cast(KeepsVectors, store).vector_search(
            ctx.project, ctx.agent, vec, ctx.depth(self.name, self.top_k), self.embedder.name
        )
        # Read afresh as new records, never the last call's: nothing to copy (`_candidates`).
        return self._make(hits, ctx) if hits else []

    def _make(self, hits: Sequence[Hit], ctx: SourceContext) -> list[Candidate]:
        # Cosines crowd into a narrow band; spread the returned list over 0..1 (min-max),
        # which fused with bm25 measured better than cosine / best (docs/recall.md).
        top, floor = hits[0].score, min(h.score for h in hits) if len(hits) > 1 else 0.0
        span = max(top - floor, 1e-6)
        rels = [(h.score - floor) / span for h in hits]
        why = "close in meaning to the task (cosine {:.2f})"
        return hit_candidates(hits, rels, ctx, self.name, "vector", why, ("tool_call",), self.top_k)

    def _candidates(self, hits: Sequence[Hit], ctx: SourceContext) -> list[Candidate]:
        """The hits' candidates, or a copy of those the last call of the same agent and task
        made of the very same hits (records and cosines) with the same counter and lines: the
        agent loop asks the same task every turn, and its hits are mostly the turn before's
        (reads.ById keeps their records), so making 80 candidates again cost it 0.45 ms. A
        task's first call only notes its hits; its second keeps its candidates (frozen), so
        that new tasks do not pay for keeping them."""
        key = (ctx.project, ctx.agent, ctx.query_text)
        seen = tuple((h.record, h.score) for h in hits)
        grows = ctx.grows(self.name)
        with self._lock:
            last = self._made.get(key)
        if last is not None and last.frozen is not None and last.same(seen, ctx, grows):
            return thaw(last.frozen)
        out = self._make(hits, ctx)
        made = _Made(seen, ctx.counter, ctx.lines, grows, None if last is None else freeze(out))
        with self._lock:
            self._made[key] = made
            self._made.move_to_end(key)
            while len(self._made) > MADE_KEPT:
                self._made.popitem(last=False)
        return out


@dataclass(frozen=True, slots=True)
class _Made:
    """The hits of a task's last call, what they were made with, and (from its second call)
    their candidates, frozen (VectorSource._candidates)."""

    hits: tuple[tuple[Record, float], ...]  # the records themselves: compared by identity
    counter: Tokenizer
    lines: Any
    grows: bool
    frozen: Frozen | None

    def same(self, hits: tuple[tuple[Record, float], ...], ctx: SourceContext, grows: bool) -> bool:
        """Made of the very same records and cosines, with the same counter and lines: the
        candidates would come out the same (records are immutable; another status is another
        object)."""
        if (
            len(hits) != len(self.hits)
            or grows != self.grows
            or ctx.counter is not self.counter
            or ctx.lines is not self.lines
        ):
            return False
        return all(a[0] is b[0] and a[1] == b[1] for a, b in zip(hits, self.hits, strict=True))
