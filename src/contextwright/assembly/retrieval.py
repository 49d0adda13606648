"""Retrieval pipelines as sources: a definition (definitions.py) becomes the Source that runs it.

A retrieval step is one of the sources of sources.py (or a feature's: vector, graph, session),
run as it is, with the step's `limit` or `topK` passed through `ctx.limit`; a filter or cap step
narrows the candidates of the steps before it. Narrowing only removes candidates, and every
retrieval step reads through the store's visibility filter as before, so no definition can show
an agent a record it may not see.

A pipeline that is exactly what its source does by default (one retrieval step of the same name,
its default size, no narrowing) is that source itself, unwrapped: the default definitions build
the very sources the engine always ran, and a call on them is the call it always was.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from ..traces.trace import Trace
from .candidates import Candidate, one
from .definitions import (
    RETRIEVAL_STEPS,
    Pipeline,
    Pipelines,
    Step,
    default_pipelines,
    digest,
)
from .definitions import PipelinesArg as PipelinesArg  # the engine's argument, re-exported
from .definitions import coerce_pipelines as coerce_pipelines
from .kv_source import KVSource
from .request import defined_names
from .sources import (
    AddressedSource,
    DecisionsSource,
    FullTextSource,
    HistorySource,
    OpenItemsSource,
    PinnedSource,
    Source,
    SourceContext,
)

# What runs a retrieval step: a source, or None while it is not there (vectors still loading).
Provider = Callable[[], Source | None]

STORE_STEPS: dict[str, Callable[[], Source]] = {
    "history": HistorySource,
    "addressed": AddressedSource,
    "open_items": OpenItemsSource,
    "fulltext": FullTextSource,
    "pinned": PinnedSource,
    "decisions": DecisionsSource,
    "kv": KVSource,
}
DAY_S = 86_400.0


def _inline_rank(value: object) -> int:
    return 2 if value is True else 1 if value == "local" else 0


class PipelineSource:
    """A pipeline of several steps, or of one step that differs from its source's defaults."""

    def __init__(self, pipeline: Pipeline, providers: Sequence[Provider | None]) -> None:
        self.name = pipeline.name
        self.pipeline = pipeline
        self._steps = list(zip(pipeline.steps, providers, strict=True))
        resolved = [p() if p is not None else None for s, p in self._steps if s.retrieves]
        known = [src for src in resolved if src is not None]
        late = len(known) < len(resolved)  # a feature's source that is not there yet
        # As inline as its least inline step (pipeline.py decides where a source runs): a step
        # that is not there yet is taken for the vector source, a bounded read of a local store.
        ranks = [_inline_rank(getattr(s, "inline", False)) for s in known]
        rank = min([*ranks, 1] if late else ranks, default=2)
        self.inline: bool | str = True if rank == 2 else "local" if rank == 1 else False
        # The cache keys on the request, not the clock: an age filter's answer changes with time.
        self.cacheable = (
            bool(known)
            and not late
            and all(getattr(s, "cacheable", False) for s in known)
            and not any(s.max_age_days is not None for s in pipeline.steps)
        )
        preparing = [s for s in known if hasattr(s, "prepare")]
        self.prepare_weight = float(
            getattr(preparing[0], "prepare_weight", 1.0) if preparing else 1.0
        )

    def _inner(self) -> list[tuple[Step, Source | None]]:
        return [(s, p() if p is not None else None) for s, p in self._steps]

    def _ctx(self, ctx: SourceContext, step: Step, src: Source, first: bool) -> SourceContext:
        """The context `src` runs in: its size from the step (or from the call's limit for this
        pipeline), and only work prepared for it (another pipeline may run the same source with
        another size)."""
        limit = ctx.limits.get(self.name, step.limit)
        limits = ctx.limits if limit is None else {**ctx.limits, src.name: limit}
        fut = ctx.prepared.get(self.name) if first else None
        # The call's search started ahead is its own full-text source's: a pipeline's runs on the
        # pool, where waiting for another pool thread's search could hold every thread.
        prepared = {} if fut is None else {src.name: fut}
        return replace(ctx, limits=limits, prepared=prepared, ahead=None)

    def applies(self, ctx: SourceContext) -> bool:
        for step, src in self._inner():
            if src is None or not step.retrieves:
                continue
            applies = getattr(src, "applies", None)
            if applies is None or applies(self._ctx(ctx, step, src, False)):
                return True
        return False

    def prepare(self, ctx: SourceContext) -> Callable[[], Any] | None:
        """The first retrieval step's own `prepare` work, if it has any."""
        for step, src in self._inner():
            if src is not None and step.retrieves and hasattr(src, "prepare"):
                work: Callable[[], Any] | None = src.prepare(self._ctx(ctx, step, src, False))
                return work
        return None

    def run(self, ctx: SourceContext) -> list[Candidate]:
        out: list[Candidate] = []
        prepared_done = False
        for step, src in self._inner():
            if step.retrieves:
                if src is None:
                    continue
                first = not prepared_done and hasattr(src, "prepare")
                prepared_done = prepared_done or first
                found = src.run(self._ctx(ctx, step, src, first))
                if src.name != self.name:
                    for c in found:  # the pipeline is the source: caps, weights, the trace
                        c.source, c.sources = self.name, one(self.name)
                out.extend(found)
            elif step.step == "filter":
                out = [c for c in out if keeps(step, c, ctx.now)]
            else:
                out = capped(step, out)
        return out


def matches(step: Step, c: Candidate, now: float) -> bool:
    """Does `c` match every field a filter step gives? A candidate without a record (a KV
    value) has no kind, author or tags to match."""
    r = c.records[0] if c.records else None
    if step.kind and (r is None or r.kind not in step.kind):
        return False
    if step.author and (r is None or r.author not in step.author):
        return False
    if step.tags and (r is None or not any(t in step.tags for t in r.tags)):
        return False
    return step.max_age_days is None or now - c.created_at <= step.max_age_days * DAY_S


def keeps(step: Step, c: Candidate, now: float) -> bool:
    return matches(step, c, now) != step.exclude


def capped(step: Step, found: list[Candidate]) -> list[Candidate]:
    """The first candidates, in order, that fit `items` and `tokens`."""
    kept: list[Candidate] = []
    used = 0
    for c in found:
        if step.items is not None and len(kept) >= step.items:
            break
        if step.tokens is not None and used + c.tokens > step.tokens:
            continue
        kept.append(c)
        used += c.tokens
    return kept


# The size each source reads when nothing says otherwise (its `ctx.limit(name, default)`): a step
# of this size needs no wrapper. tests/test_pipelines.py checks these against the sources.
SOURCE_LIMITS = {
    "history": 60,
    "addressed": 25,
    "open_items": 20,
    "fulltext": 40,
    "pinned": 40,
    "decisions": 15,
    "kv": 20,
    "vector": 40,
}


def is_late(p: Pipeline) -> bool:
    """Runs only once the embedder is there: every retrieval step is a vector search."""
    return bool(p.retrieval) and all(s.step == "vector" for s in p.retrieval)


def build_source(p: Pipeline, providers: Mapping[str, Provider]) -> Source | None:
    """The source that runs `p`; None when its one step's source is not there (yet)."""
    steps = p.steps
    if len(steps) == 1 and RETRIEVAL_STEPS[steps[0].step] == p.name:
        limit = steps[0].limit
        if limit is None or limit == SOURCE_LIMITS.get(steps[0].step):
            provider = providers.get(steps[0].step)
            return provider() if provider is not None else None
    return PipelineSource(p, [providers.get(s.step) if s.retrieves else None for s in steps])


def store_providers() -> dict[str, Provider]:
    """One source of each store step, shared by the pipelines that run it (they keep no state)."""

    def provider(src: Source) -> Provider:
        return lambda: src

    return {name: provider(make()) for name, make in STORE_STEPS.items()}


def build_sources(pipelines: Pipelines, providers: Mapping[str, Provider]) -> list[Source]:
    """The sources of every enabled pipeline, in order, but those not there yet."""
    out = []
    for p in pipelines.enabled:
        src = build_source(p, providers)
        if src is not None:
            out.append(src)
    return out


class HasSource(Protocol):
    """A feature of the engine with its source (TaskBoard, SessionManager, Vectors)."""

    @property
    def source(self) -> Source | None: ...


class Assembles(Protocol):
    sources: list[Source]
    notes: list[Any]
    call_pipelines: Callable[[Any], tuple[Any, list[Source]]] | None
    limit_names: frozenset[str]


Join = Callable[..., None]  # Vectors.join(assembler, before=..., wrap=...)


def install(pipelines: Pipelines, assembler: Assembles, join: Join, **features: HasSource) -> None:
    """Run `pipelines` in `assembler`: their sources now, the vector search pipelines once the
    embedder is ready (`join`), and a note in every trace of which definition produced what.
    `features` are the engine's parts that run the `graph`, `session` and `vector` steps."""
    providers = {name: _feature(f) for name, f in features.items()}
    now, before, joined = pipeline_sources(pipelines, providers)
    assembler.sources[:] = now
    assembler.notes.append(PipelineNotes(pipelines))
    assembler.limit_names = defined_names(pipelines)
    join(assembler, before=before, wrap=joined)

    def for_call(given: PipelinesArg) -> tuple[Pipelines, list[Source]]:
        resolved = coerce_pipelines(given)
        return resolved, call_sources(resolved, {**store_providers(), **providers})

    assembler.call_pipelines = for_call


def call_sources(pipelines: Pipelines, providers: Mapping[str, Provider]) -> list[Source]:
    """The sources of a call's own pipelines, in their order; the vector search ones only when
    the embedder is ready (as the engine's join it then)."""
    vector = providers.get("vector")
    ready = vector is not None and vector() is not None
    out = []
    for p in pipelines.enabled:
        if is_late(p) and not ready:
            continue
        src = build_source(p, providers)
        if src is not None:
            out.append(src)
    return out


def _feature(f: HasSource) -> Provider:
    return lambda: f.source


def pipeline_sources(
    pipelines: Pipelines, features: Mapping[str, Provider]
) -> tuple[list[Source], list[Source], Callable[[Source], list[Source]]]:
    """The sources to run now, of the store's steps and the features'; those that the vector
    search pipelines go before, once the embedder is ready (`Vectors.join`); and what those
    pipelines are, given the vector source."""
    providers = {**store_providers(), **features}
    on = pipelines.enabled
    built = [(p, None if is_late(p) else build_source(p, providers)) for p in on]
    late = [p for p in on if is_late(p)]
    first = on.index(late[0]) if late else len(on)

    def joined(vector: Source) -> list[Source]:
        given = {**providers, "vector": lambda: vector}
        return [s for s in (build_source(p, given) for p in late) if s is not None]

    now = [s for _, s in built if s is not None]
    return now, [s for _, s in built[first:] if s is not None], joined


class PipelineNotes:
    """Every trace says which definition produced each source's candidates (its digest), and
    keeps the definitions that differ from the packaged ones, so that replay runs them again."""

    def __init__(self, pipelines: Pipelines) -> None:
        self.pipelines = pipelines
        # Worked out once: the note is written on every call.
        self._digest = pipelines.digest
        self._of = {p.name: (p.digest, _defined(p)) for p in pipelines.enabled}

    def warnings(self) -> list[str]:
        return []

    def annotate(self, trace: Trace) -> None:
        ran = [s.get("name") for s in trace.sources]
        given = trace.request.get("pipelines")
        if isinstance(given, list):  # the call's own, kept whole in the request
            defs = {p.get("name"): p for p in given if isinstance(p, dict)}
            trace.notes["pipelines"] = {
                "digest": digest({"pipelines": given}),
                "sources": {n: digest(defs[n]) for n in ran if isinstance(n, str) and n in defs},
                "defined": {},
                "from": "request",
            }
            return
        used = [(n, self._of[n]) for n in ran if isinstance(n, str) and n in self._of]
        trace.notes["pipelines"] = {
            "digest": self._digest,
            "sources": {n: d for n, (d, _) in used},
            "defined": {n: dict(own) for n, (_, own) in used if own is not None},
        }


def _defined(p: Pipeline) -> dict[str, Any] | None:
    """`p` whole, with its file, if it is another definition than the packaged one of its name
    (a copy of that is not)."""
    base = default_pipelines().get(p.name)
    if base is not None and base.digest == p.digest:
        return None
    return {"file": p.file, **p.to_dict()}
