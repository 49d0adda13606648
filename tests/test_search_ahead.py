"""The full-text search started before an assemble call's first read (assembly/ahead.py,
`PostgresStore.search_ahead`): its hits are those `search_text` gives at the version read with
them, the call takes them only where its own search would be the same, and the window is the one
made without it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from contextwright import Engine
from contextwright.assembly import ahead, pipeline
from contextwright.assembly.request import AssembleRequest
from contextwright.assembly.sources import SourceContext
from contextwright.ports import Hit
from contextwright.roles import profile_for
from contextwright.stores.memory import MemoryStore
from contextwright.stores.postgres import PostgresStore

P = "sa"
T0 = 1_750_000_000.0
TASK = "fix the parquet export for ann"

pytestmark = pytest.mark.postgres


def _fill(engine: Engine) -> None:
    engine.register_agent(P, "ann", "developer")
    engine.register_agent(P, "bob", "reviewer")
    rows: list[dict[str, Any]] = [
        {"project": P, "author": "bob" if i % 2 else "ann", "kind": "message",
         "content": f"turn {i}: the {'parquet' if i % 3 else 'csv'} export of table {i}",
         "session": "s1", "created_at": T0 + i}
        for i in range(30)
    ]  # fmt: skip
    rows.append({"project": P, "author": "bob", "kind": "message", "content": "parquet for bob",
                 "to": ["bob"], "visibility": "direct", "created_at": T0 + 40})  # fmt: skip
    engine.add_many(rows)


def _items(items: list[dict[str, Any]]) -> list[list[tuple[str, str]]]:
    return [sorted((k, repr(v)) for k, v in i.items()) for i in items]


def _hits(hits: list[Hit]) -> list[tuple[str, float]]:
    return [(h.record.id, round(h.score, 9)) for h in hits]


@pytest.fixture
def engine(pg_url: str) -> Iterator[Engine]:
    e = Engine(PostgresStore(pg_url), cache_ttl_s=0)
    _fill(e)
    yield e
    e.close()


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(2) as p:
        yield p


def test_its_hits_are_search_texts_at_the_version_read(engine: Engine) -> None:
    store = engine.store
    assert isinstance(store, PostgresStore)
    for agent in ("ann", "bob", None):
        version, hits = store.search_ahead(P, agent, "parquet export", 10)
        assert version == store.version(P) > 0
        assert _hits(hits) == _hits(store.search_text(P, agent, "parquet export", 10)) != []
    assert store.search_ahead(P, "ann", "the", 10) == (store.version(P), [])
    assert store.search_ahead("elsewhere", "ann", "parquet", 10) == (0, [])


def _early(engine: Engine, pool: ThreadPoolExecutor, **kw: Any) -> ahead.Early:
    request = AssembleRequest(project=P, agent="ann", task=TASK, budget=4000, **kw)
    people = {P: (0, frozenset({"ann", "bob"}))}
    early = ahead.start(
        engine.store, pool, engine.assembler.sources, people, request, ahead.Answered()
    )
    assert early is not None
    early.deadline = time.perf_counter() + 5.0  # as the call's sources start (run.py)
    early.future.result()  # sent and answered before what the test does next
    return early


def test_a_newer_version_than_the_searchs_is_searched_again(
    engine: Engine, pool: ThreadPoolExecutor
) -> None:
    store = engine.store
    before = store.version(P)
    early = _early(engine, pool)
    assert early.key == (P, "ann", "fix the parquet export for", 40)  # ann is one of the people
    new = engine.add(project=P, author="bob", content="parquet export fixed", created_at=T0 + 50)
    early.version = before  # the call read the version the search read: its hits are taken
    assert new.id not in {h.record.id for h in early(*early.key)}
    early.version = store.version(P)  # a write came between: searched again, the write in it
    again = early(*early.key)
    assert new.id in {h.record.id for h in again}
    assert _hits(again) == _hits(store.search_text(P, "ann", *early.key[2:]))


def test_another_text_or_limit_is_searched_for_itself(
    engine: Engine, pool: ThreadPoolExecutor
) -> None:
    store = engine.store
    early = _early(engine, pool)
    early.version = store.version(P)
    for text, limit in (("csv export", 40), (early.key[2], 3)):
        assert _hits(early(P, "ann", text, limit)) == _hits(
            store.search_text(P, "ann", text, limit)
        )


def test_nothing_is_started_where_the_call_is_not_known_yet(
    engine: Engine, pool: ThreadPoolExecutor
) -> None:
    store, sources = engine.store, engine.assembler.sources
    people = {P: (0, frozenset({"ann"}))}

    def started(**kw: Any) -> bool:
        request = AssembleRequest(**{"project": P, "agent": "ann", "task": TASK, **kw})
        return ahead.start(store, pool, sources, people, request, ahead.Answered()) is not None

    assert started()
    assert not started(task_id="t1")  # the task's text is read from the store
    assert not started(sources=["history"])
    assert not started(project="other")  # its people never read
    assert not started(task="  ")
    request = AssembleRequest(project=P, agent="ann", task=TASK)
    assert ahead.start(store, None, sources, people, request, ahead.Answered()) is None


def test_the_search_is_sent_before_the_calls_first_read_and_the_window_is_the_same(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = engine.store
    assert isinstance(store, PostgresStore)
    engine.assemble(P, "ann", TASK, 4000, session="s1")  # the project's people are known
    sent = threading.Event()
    search_ahead, doc_with_version = store.search_ahead, store.doc_with_version
    waited: list[bool] = []

    def searching(*args: Any) -> tuple[int, list[Hit]]:
        sent.set()
        return search_ahead(*args)

    def first_read(*args: Any) -> Any:
        waited.append(sent.wait(timeout=30))  # never set: the search waits for this read
        return doc_with_version(*args)

    monkeypatch.setattr(store, "search_ahead", searching)
    monkeypatch.setattr(store, "doc_with_version", first_read)
    early = engine.assemble(P, "ann", TASK, 4000, session="s1")
    assert waited == [True]
    monkeypatch.setattr(store, "doc_with_version", doc_with_version)
    monkeypatch.setattr(ahead, "start", lambda *a: None)
    sent.clear()
    late = engine.assemble(P, "ann", TASK, 4000, session="s1")
    assert not sent.is_set()
    assert early.text == late.text and "parquet" in early.text
    assert _items(early.trace.items) == _items(late.trace.items)


def test_the_source_waits_on_the_calling_thread_and_the_deadline_cuts_it_off(
    engine: Engine, pool: ThreadPoolExecutor
) -> None:
    store = engine.store
    fulltext = next(s for s in engine.assembler.sources if s.name == "fulltext")
    ctx = SourceContext(store=store, counter=engine.counter, project=P, agent="ann",
                        role=profile_for("developer"), task=TASK, session=None, now=T0)  # fmt: skip
    assert not pipeline.is_inline(fulltext, ctx)  # its search runs on the pool
    release = threading.Event()

    def stuck() -> tuple[int, list[Hit]]:
        release.wait(timeout=30)
        return 0, []

    early = ahead.Early(store, pool, (P, "ann", TASK, 40))
    early.future = pool.submit(stuck)
    early.version, early.deadline = 0, time.perf_counter() + 0.05
    ctx.ahead = early
    assert pipeline.is_inline(fulltext, ctx)  # no pool thread held waiting for another
    found, runs = pipeline.run_sources([fulltext], ctx, pool, 5.0)
    release.set()
    assert found == [] and runs[0].error is not None and "deadline" in runs[0].error


def test_nothing_is_started_for_a_call_the_source_cache_likely_answers(pg_url: str) -> None:
    engine = Engine(PostgresStore(pg_url), cache_ttl_s=60)
    _fill(engine)
    store = engine.store
    assert isinstance(store, PostgresStore)
    sent: list[str] = []
    search_ahead = store.search_ahead

    def searching(*args: Any) -> tuple[int, list[Hit]]:
        sent.append(args[2])
        return search_ahead(*args)

    store.search_ahead = searching  # type: ignore[method-assign]
    texts = []
    for _ in range(5):  # the third and later are answered by the cache (cache.py)
        result = engine.assemble(P, "ann", TASK, 4000, session="s1")
        texts.append(result.text)
        runs = {r["name"]: r for r in result.trace.sources}
    assert runs["fulltext"]["cache"] == "hit"
    # The first call knew no people, the second and third searched; the fourth saw the third hit.
    assert len(sent) == 2
    assert len(set(texts)) == 1
    engine.add(project=P, author="bob", content="parquet export fixed", created_at=T0 + 50)
    # The next call, taken for one the cache answers (the last version seen), searches itself;
    # the one after it knows the new version, and is searched ahead again.
    for n in (2, 3):
        assert "parquet export fixed" in engine.assemble(P, "ann", TASK, 4000, session="s1").text
        assert len(sent) == n
    engine.close()


def test_the_first_read_carries_no_word_counts_when_the_search_counts_its_own(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = engine.store
    assert isinstance(store, PostgresStore)
    doc_with_version = store.doc_with_version
    words: list[tuple[str, ...]] = []

    def first_read(collection: str, project: str, doc_id: str, w: Any = ()) -> Any:
        words.append(tuple(w))
        return doc_with_version(collection, project, doc_id, w)

    monkeypatch.setattr(store, "doc_with_version", first_read)
    engine.assemble(P, "ann", TASK, 4000, session="s1")  # the people unknown: nothing ahead
    engine.assemble(P, "ann", TASK, 4000, session="s1")
    assert words[0] and words[1:] == [()]


class _SlowRemote(MemoryStore):
    """A store whose searches wait on a server (20 ms each) and which searches ahead."""

    remote = True

    def search_text(self, project: str, agent: str | None, text: str, limit: int) -> list[Hit]:
        time.sleep(0.02)
        return super().search_text(project, agent, text, limit)

    def search_ahead(
        self, project: str, agent: str, text: str, limit: int
    ) -> tuple[int, list[Hit]]:
        return self.version(project), self.search_text(project, agent, text, limit)


def test_a_pipelines_full_text_never_waits_on_the_pool_for_the_calls_search() -> None:
    """A pipeline's full-text step (another limit) runs on the pool: had it taken the call's
    search started ahead, it would have searched again on the pool and waited there, and
    concurrent calls would hold every pool thread waiting for searches queued behind them,
    until the deadline cut the sources off."""
    pipelines = [{"name": "narrow", "steps": [{"step": "fulltext", "topK": 5}]}]
    # A deadline far past what six calls' searches take on two threads even on a loaded machine
    # (~0.25 s): only threads that wait for each other reach it.
    engine = Engine(
        _SlowRemote(), workers=2, cache_ttl_s=0, assemble_slots=0, pipelines=pipelines,
        deadline_ms=5000,
    )  # fmt: skip
    engine.register_agent("p", "ann", "developer")
    engine.add_many(
        [{"project": "p", "author": "ann", "content": f"parquet export {i}", "created_at": T0 + i}
         for i in range(20)]
    )  # fmt: skip
    engine.assemble(project="p", agent="ann", task="parquet export", budget=2000)  # people known
    failed: list[list[str]] = []

    def call() -> None:
        window = engine.assemble(project="p", agent="ann", task="parquet export", budget=2000)
        failed.append([s["name"] for s in window.trace.sources if s.get("error")])

    threads = [threading.Thread(target=call) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    engine.close()
    assert failed == [[]] * 6
