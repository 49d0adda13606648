"""The I/O of the assemble hot path: traces written off the call (read-your-writes, flush, close),
cheap sources run inline beside the pooled ones, one statement for locality's neighbours."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright import Engine
from contextwright.assembly.defaults import default_sources
from contextwright.assembly.locality import _all_neighbours, _neighbours
from contextwright.assembly.pipeline import is_inline, run_sources
from contextwright.assembly.sources import SourceContext
from contextwright.embedders import HashEmbedder
from contextwright.errors import NotFound
from contextwright.ports import Query, Store
from contextwright.roles import profile_for
from contextwright.stores import open_store
from contextwright.stores.sqlite import SQLiteStore
from contextwright.testing import FailingSource, ScriptedSource
from contextwright.traces.trace import Trace
from contextwright.traces.writer import TraceWriter

T0 = 1_750_000_000.0


def _seed(engine: Engine) -> None:
    engine.add(project="p", author="alice", content="@bob the login form posts to /api/session")
    engine.add(project="p", author="bob", content="I will look at the login form", session="s1")


def test_trace_is_readable_at_once_and_stored_after_flush(tmp_path: Path) -> None:
    engine = Engine.open(f"sqlite:///{tmp_path / 't.db'}")
    _seed(engine)
    result = engine.assemble("p", "bob", "fix the login form", budget=2000)
    # Read-your-writes: pending or written, the trace is there, as the store would return it.
    got = engine.trace("p", result.trace.id)
    assert got.to_dict()["items"] == result.trace.to_dict()["items"]
    assert got is not result.trace
    engine.flush()
    assert engine._traces.pending() == 0
    doc = engine.store.get_doc("traces", "p", result.trace.id)
    assert doc is not None and doc["id"] == result.trace.id
    assert [t.id for t in engine.traces("p", "bob")] == [result.trace.id]
    engine.close()
    # A later process sees it: close() flushed it.
    again = Engine.open(f"sqlite:///{tmp_path / 't.db'}")
    assert again.trace("p", result.trace.id).tokens == result.tokens
    again.close()


def test_traces_lists_pending_ones_in_order(tmp_path: Path) -> None:
    engine = Engine.open(f"sqlite:///{tmp_path / 't.db'}", clock=itertools.count(T0).__next__)
    _seed(engine)
    ids = [engine.assemble("p", "bob", f"task {i}", budget=2000).trace.id for i in range(5)]
    assert [t.id for t in engine.traces("p", "bob", limit=5)] == ids[::-1]
    with pytest.raises(NotFound):
        engine.trace("p", "no-such-trace")
    engine.close()


def test_persist_traces_off_writes_nothing(store: Store) -> None:
    engine = Engine(store, persist_traces=False)
    _seed(engine)
    trace_id = engine.assemble("p", "bob", "login", budget=2000).trace.id
    engine.flush()
    assert store.list_docs("traces", "p", limit=10) == []
    with pytest.raises(NotFound):
        engine.trace("p", trace_id)
    engine.close()


def test_writer_on_a_closed_store_keeps_the_error_and_drops_the_trace(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'w.db'}")
    engine = Engine(store)
    _seed(engine)
    result = engine.assemble("p", "bob", "login", budget=2000)
    engine.flush()
    writer = TraceWriter(store)
    store.close()
    (tmp_path / "gone").mkdir()
    store._conns.path = str(tmp_path / "gone")  # a directory: SQLite cannot open it
    store._traces.path = store._conns.path  # nor the file that traces go to (sqlite_docs.py)
    writer.put(result.trace)
    writer.flush()
    assert writer.pending() == 0
    assert writer.errors and result.trace.id in writer.errors[0]
    writer.close()


def test_writer_retries_a_trace_edited_while_encoded(tmp_path: Path) -> None:
    """Sessions add notes to a returned trace; the writer stores the trace as it is when written."""
    engine = Engine.open(f"sqlite:///{tmp_path / 'e.db'}")
    _seed(engine)
    result = engine.assemble("p", "bob", "login", budget=2000)
    result.trace.notes["session"] = {"steps": ["compact"]}
    engine.flush()
    doc = engine.store.get_doc("traces", "p", result.trace.id)
    assert doc is not None and doc["notes"]["session"] == {"steps": ["compact"]}
    engine.close()


def test_many_threads_assemble_and_every_trace_lands(tmp_path: Path) -> None:
    engine = Engine.open(f"sqlite:///{tmp_path / 'm.db'}")
    _seed(engine)
    ids: list[str] = []
    lock = threading.Lock()

    def work(n: int) -> None:
        for i in range(5):
            tid = engine.assemble("p", "bob", f"login {n} {i}", budget=2000).trace.id
            with lock:
                ids.append(tid)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    engine.flush()
    stored = {d["id"] for d in engine.store.list_docs("traces", "p", limit=100)}
    assert stored == set(ids) and len(ids) == 20
    engine.close()


def test_default_sources_say_which_run_inline() -> None:
    inline = {s.name for s in default_sources() if is_inline(s)}
    assert inline == {"history", "addressed", "open_items", "fulltext", "pinned", "decisions", "kv"}
    assert not is_inline(ScriptedSource("custom"))  # custom sources run on the pool


def test_local_reads_go_to_the_pool_only_for_a_store_in_another_process(store: Store) -> None:
    """Full text and vectors read on the calling thread from SQLite or memory, whose reads on two
    threads would only slow each other down, and on the pool from PostgreSQL, whose reads wait on
    the server and overlap."""
    from contextwright.assembly.sources import FullTextSource
    from contextwright.vectors import VectorSource

    remote = type(store).__name__ == "PostgresStore"
    assert getattr(store, "remote", False) is remote
    ctx = _ctx(Engine(store, workers=1))
    for src in (FullTextSource(), VectorSource(HashEmbedder())):
        assert is_inline(src, ctx) is not remote, src.name
        assert is_inline(src)  # no call yet: what the source says
    assert not is_inline(ScriptedSource("custom"), ctx)


def _ctx(engine: Engine, agent: str = "bob") -> SourceContext:
    return SourceContext(
        store=engine.store,
        counter=engine.counter,
        project="p",
        agent=agent,
        role=profile_for("developer"),
        task="login form",
        session="s1",
        now=T0,
    )


class InlineScripted(ScriptedSource):
    inline = True


class InlineFailing(FailingSource):
    inline = True


def test_inline_and_pooled_sources_keep_their_order(store: Store) -> None:
    from concurrent.futures import ThreadPoolExecutor

    engine = Engine(store, workers=1)
    _seed(engine)
    sources = [
        ScriptedSource("a", ["alpha"]),
        InlineScripted("b", ["beta"]),
        InlineFailing("c"),
        ScriptedSource("d", ["delta"]),
    ]
    with ThreadPoolExecutor(2) as pool:
        found, runs = run_sources(sources, _ctx(engine), pool, 5.0)
    serial, serial_runs = run_sources(sources, _ctx(engine), None, 5.0)
    assert [r.name for r in runs] == ["a", "b", "c", "d"] == [r.name for r in serial_runs]
    assert [c.key for c in found] == ["a:0", "b:0", "d:0"] == [c.key for c in serial]
    assert runs[2].error == "RuntimeError: c is broken" == serial_runs[2].error
    assert [r.error is None for r in runs] == [True, True, False, True]


class PreparedSource(InlineScripted):
    """Inline, with work to start on the pool first; notes where and when things ran."""

    def __init__(self, name: str, texts: list[str], *, delay_s: float = 0.0) -> None:
        super().__init__(name, texts)
        self.delay_s = delay_s
        self.log: list[tuple[str, str]] = []  # (event, thread name)
        self.release = threading.Event()

    def prepare(self, ctx: SourceContext) -> object:
        def work() -> str:
            self.log.append(("work", threading.current_thread().name))
            self.release.wait(self.delay_s)
            return "prepared"

        return work

    def run(self, ctx: SourceContext) -> list:  # type: ignore[type-arg]
        got = ctx.prepared_result(self.name, lambda: "inline")
        self.log.append((f"run:{got}", threading.current_thread().name))
        return super().run(ctx)


class Recording(InlineScripted):
    def __init__(self, name: str, texts: list[str], log: list[tuple[str, str]]) -> None:
        super().__init__(name, texts)
        self.log = log

    def run(self, ctx: SourceContext) -> list:  # type: ignore[type-arg]
        self.log.append((f"run:{self.name}", threading.current_thread().name))
        return super().run(ctx)


def test_prepared_work_starts_on_the_pool_before_any_source_and_its_source_runs_last(
    store: Store,
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    engine = Engine(store, workers=1)
    _seed(engine)
    prepared = PreparedSource("v", ["vec"])
    other = Recording("b", ["beta"], prepared.log)
    with ThreadPoolExecutor(2, thread_name_prefix="pool") as pool:
        found, runs = run_sources([prepared, other], _ctx(engine), pool, 5.0)
    events = [e for e, _ in prepared.log]
    assert events == ["work", "run:b", "run:prepared"]
    threads = dict(prepared.log)
    assert threads["work"].startswith("pool")
    caller = threading.current_thread().name
    assert threads["run:b"] == caller == threads["run:prepared"]
    # The trace and the candidates keep the sources' own order.
    assert [r.name for r in runs] == ["v", "b"] and [c.key for c in found] == ["v:0", "b:0"]
    # Without a pool nothing is started: the source does the work itself.
    serial = PreparedSource("v", ["vec"])
    run_sources([serial], _ctx(engine), None, 5.0)
    assert [e for e, _ in serial.log] == ["run:inline"]


def test_prepared_work_past_the_deadline_is_a_warning_not_a_failed_call(store: Store) -> None:
    from concurrent.futures import ThreadPoolExecutor

    engine = Engine(store, workers=1)
    _seed(engine)
    slow = PreparedSource("v", ["vec"], delay_s=5.0)
    try:
        with ThreadPoolExecutor(2) as pool:
            found, runs = run_sources(
                [slow, InlineScripted("b", ["beta"])], _ctx(engine), pool, 0.05
            )
            slow.release.set()
    finally:
        slow.release.set()
    assert runs[0].error == "deadline of 50 ms passed" and runs[0].candidates == 0
    assert runs[1].error is None and [c.key for c in found] == ["b:0"]


def test_prepared_work_is_not_started_when_the_cache_will_answer(store: Store) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from contextwright.assembly.cache import SourceCache

    engine = Engine(store, workers=1)
    _seed(engine)
    src, cache = PreparedSource("v", ["vec"]), SourceCache(ttl_s=60)
    src.cacheable = True
    ctx = _ctx(engine)
    ctx.version = 1
    with ThreadPoolExecutor(2, thread_name_prefix="pool") as pool:
        first, _ = run_sources([src], ctx, pool, 5.0, cache=cache)
        cache.put(cache.key(src, ctx), first)  # as the second miss of the key would
        again = _ctx(engine)
        again.version = 1
        second, runs = run_sources([src], again, pool, 5.0, cache=cache)
    assert [e for e, _ in src.log] == ["work", "run:prepared"]  # once: the second call hit
    assert runs[0].cache == "hit" and [c.key for c in second] == [c.key for c in first]
    assert not again.prepared


@pytest.mark.parametrize("spare", [1, 2])
def test_prepared_work_beyond_the_spare_cores_is_left_to_its_source(
    store: Store, spare: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With one spare core the heaviest work (`prepare_weight`) takes it and the lighter one is
    done by its own source on the calling thread; with two, both start on the pool."""
    from concurrent.futures import ThreadPoolExecutor

    from contextwright.assembly import pipeline

    monkeypatch.setattr(pipeline, "SPARE_CORES", spare)
    engine = Engine(store, workers=1)
    _seed(engine)
    light, heavy = PreparedSource("light", ["l"]), PreparedSource("heavy", ["h"])
    heavy.prepare_weight = 4.0  # type: ignore[attr-defined]
    with ThreadPoolExecutor(2, thread_name_prefix="pool") as pool:
        found, runs = run_sources([light, heavy], _ctx(engine), pool, 5.0)
    assert [e for e, _ in heavy.log] == ["work", "run:prepared"]
    assert heavy.log[0][1].startswith("pool")
    if spare == 1:
        assert [e for e, _ in light.log] == ["run:inline"]
    else:
        assert [e for e, _ in light.log] == ["work", "run:prepared"]
    assert [r.name for r in runs] == ["light", "heavy"] and all(r.error is None for r in runs)
    assert [c.key for c in found] == ["light:0", "heavy:0"]


def test_no_work_is_prepared_while_the_machine_is_busy(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With every core taken by other processes, the source does its own work on the calling
    thread, as without a pool, and finds the same."""
    from concurrent.futures import ThreadPoolExecutor

    from contextwright.assembly import pipeline

    engine = Engine(store, workers=1)
    _seed(engine)
    quiet = PreparedSource("v", ["vec"])
    with ThreadPoolExecutor(2, thread_name_prefix="pool") as pool:
        found, _ = run_sources([quiet], _ctx(engine), pool, 5.0)
        monkeypatch.setattr(pipeline, "machine_busy", lambda: True)
        busy = PreparedSource("v", ["vec"])
        again, runs = run_sources([busy], _ctx(engine), pool, 5.0)
    assert [e for e, _ in quiet.log] == ["work", "run:prepared"]
    assert busy.log == [("run:inline", threading.current_thread().name)]
    assert runs[0].error is None and [c.key for c in again] == [c.key for c in found]


class BrokenPrepare(InlineScripted):
    def prepare(self, ctx: SourceContext) -> object:
        raise RuntimeError("no GPU today")


def test_a_prepare_that_raises_leaves_the_source_to_run_on_its_own(store: Store) -> None:
    from concurrent.futures import ThreadPoolExecutor

    engine = Engine(store, workers=1)
    _seed(engine)
    with ThreadPoolExecutor(2) as pool:
        found, runs = run_sources([BrokenPrepare("v", ["vec"])], _ctx(engine), pool, 5.0)
    assert runs[0].error is None and [c.key for c in found] == ["v:0"]


def _many_private(engine: Engine, n: int) -> None:
    """`n` matches of "login": every fourth one visible to all, the rest private to alice."""
    engine.add_many(
        {
            "project": "p",
            "author": "alice",
            "content": f"login flow note {i}" + (" oauth" if i % 7 == 0 else ""),
            "visibility": "project" if i % 4 == 0 else "private",
            "created_at": T0 + i,
        }
        for i in range(n)
    )


@pytest.mark.parametrize("agent", ["bob", "alice", None])
@pytest.mark.parametrize("limit", [1, 5, 40])
def test_full_text_ranking_keys_give_the_same_hits_as_search_text(
    tmp_path: Path, agent: str | None, limit: int
) -> None:
    """`text_ranked` (the pooled half) and `ranked_hits` give `search_text`'s hits, also when
    most of the best matches are hidden from the agent (the one-project path looks at the whole
    window then), and a second project changes nothing."""
    from contextwright.stores.sqlite import COMMON_DF

    engine = Engine.open(f"sqlite:///{tmp_path / 'rank.db'}", persist_traces=False)
    _many_private(engine, COMMON_DF + 400)
    store = engine.store
    tasks = ["login oauth", "login flow", "oauth"]

    def hits() -> list[list[tuple[str, float]]]:
        return [
            [(h.record.id, h.score) for h in store.search_text("p", agent, t, limit)] for t in tasks
        ]

    def ranked() -> list[list[tuple[str, float]]]:
        out = []
        for t in tasks:
            keys = store.text_ranked("p", agent, t, limit)  # type: ignore[attr-defined]
            out.append([(h.record.id, h.score) for h in store.ranked_hits(keys)])  # type: ignore[attr-defined]
        return out

    one_project = hits()
    assert ranked() == one_project
    for found in one_project:
        assert len(found) == limit  # enough visible matches in the window for every limit
        assert [s for _, s in found] == sorted((s for _, s in found), reverse=True)
    if agent == "bob":  # bob sees every fourth record only: none of alice's private ones
        visible = {r.id for r in store.query(Query("p", "bob", limit=10_000))}
        assert all(i in visible for found in one_project for i, _ in found)
    engine.kv_set("q", "k", "v")  # a second project: the general path answers the same
    assert hits() == one_project == ranked()
    engine.close()


def test_full_text_runs_on_the_pool_and_gives_the_same_window(tmp_path: Path) -> None:
    """On SQLite the full-text ranking is `prepare` work, started on the pool, unless the
    calling thread wrote last and nothing has ranked since (`SQLiteStore.warm_here`: then its
    page cache is the only warm one, and the ranking runs here); the window is the same
    either way, and with one worker (no pool)."""
    windows = []
    for workers in (4, 1):
        engine = Engine.open(f"sqlite:///{tmp_path / f'w{workers}.db'}", workers=workers)
        _many_private(engine, 300)
        _seed(engine)
        fulltext = next(s for s in engine.sources if s.name == "fulltext")
        ctx = _ctx(engine)
        assert fulltext.prepare(ctx) is None  # type: ignore[attr-defined]  # this thread wrote
        result = engine.assemble("p", "bob", "login form oauth", budget=3000, session="s1")
        assert fulltext.prepare(ctx) is not None  # type: ignore[attr-defined]  # ranked since
        again = engine.assemble("p", "bob", "login form oauth", budget=3000, session="s1")
        assert again.text == result.text
        windows.append(result.text)
        assert any(s["name"] == "fulltext" and s["candidates"] for s in result.trace.sources)
        engine.close()
    assert windows[0] == windows[1]


def test_warm_here_follows_the_last_writer_and_the_last_ranking(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "w.db"))
    assert not store.warm_here()  # nothing written in this process
    engine = Engine(store)
    _seed(engine)
    assert store.warm_here()  # this thread wrote last, and nothing has ranked since
    store.text_ranked("p", "bob", "login", 10)
    assert not store.warm_here()  # a ranking ran since: the pool's cache is as warm
    engine.add(project="p", author="bob", content="login again")
    assert store.warm_here()
    other = threading.Thread(target=lambda: engine.add(project="p", author="al", content="x"))
    other.start()
    other.join()
    assert not store.warm_here()  # another thread wrote last: no cache of this process is warm
    engine.close()


def test_addressed_records_are_read_once_per_call(sqlite_engine: Engine) -> None:
    _seed(sqlite_engine)
    ctx = _ctx(sqlite_engine)
    q = Query("p", "bob", addressed_to="bob", limit=25)
    first = ctx.query(q)
    assert ctx.query(q) is first and [r.author for r in first] == ["alice"]


@settings(max_examples=25, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(["s1", "s2", "s3"]),
            st.sampled_from(["alice", "bob", "carol"]),
            st.sampled_from(["project", "direct", "private"]),
            st.integers(0, 40),
        ),
        min_size=1,
        max_size=30,
    ),
    picks=st.lists(st.integers(0, 29), min_size=1, max_size=12),
)
def test_batched_neighbours_equal_one_query_each(
    tmp_path_factory: pytest.TempPathFactory,
    rows: list[tuple[str, str, str, int]],
    picks: list[int],
) -> None:
    path = tmp_path_factory.mktemp("nb") / "nb.db"
    engine = Engine.open(f"sqlite:///{path}", persist_traces=False)
    engine.add_many(
        {
            "project": "p",
            "author": author,
            "session": session,
            "visibility": vis,
            "to": (["bob"] if i % 2 else ["carol"]) if vis == "direct" else [],
            "content": f"turn {i} of {session}",
            "created_at": T0 + at,  # equal times happen: ties are broken the same way
        }
        for i, (session, author, vis, at) in enumerate(rows)
    )
    records = engine.store.query(Query("p", None, limit=1000))
    matches = [records[i % len(records)] for i in picks]
    ctx = _ctx(engine)
    batched = _all_neighbours(matches, ctx)
    assert batched == {m.id: _neighbours(m, ctx) for m in matches}
    engine.close()


def test_writer_bounds_its_backlog_and_its_thread_ends_when_idle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import time

    from contextwright.traces import writer as trace_writer

    monkeypatch.setattr(trace_writer, "MAX_PENDING", 2)
    monkeypatch.setattr(trace_writer, "IDLE_S", 0.05)
    engine = Engine(open_store("memory://"), persist_traces=False)
    _seed(engine)
    trace = engine.assemble("p", "bob", "login", budget=2000).trace
    writer = TraceWriter(engine.store)
    for i in range(6):
        t = Trace.from_dict({**trace.to_dict(), "id": f"t{i}"})
        writer.put(t)
        assert writer.pending() < 2  # a full backlog is written on the caller's thread
    deadline = time.monotonic() + 5
    while writer._thread is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert writer._thread is None and writer.pending() == 0
    assert {d["id"] for d in engine.store.list_docs("traces", "p")} == {f"t{i}" for i in range(6)}
    writer.put(Trace.from_dict({**trace.to_dict(), "id": "again"}))
    writer.close()  # a new thread was started for it, and close() waited for the write
    assert engine.store.get_doc("traces", "p", "again") is not None
    engine.close()


def test_superseded_by_seeks_its_index(tmp_path: Path) -> None:
    """Which decision replaced which is read through records_supersedes: an ORDER BY the
    (project, created_at) index could serve made SQLite walk the whole project instead (55 ms
    at 100k records, on a quarter of cold calls)."""
    store = SQLiteStore(str(tmp_path / "s.db"))
    engine = Engine(store)
    old = engine.add(project="p", author="a", kind="decision", content="use REST").id
    new = engine.add(
        project="p", author="a", kind="decision", content="use gRPC", supersedes=old
    ).id
    conn = store._conn()
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    assert store.superseded_by("p", [old]) == {old: new}
    conn.set_trace_callback(None)
    [sql] = [s for s in statements if "supersedes IN" in s]
    plan = " ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
    assert "records_supersedes" in plan, plan
    engine.close()


def test_put_wakes_no_thread_and_the_writer_still_stores_the_trace() -> None:
    """`put` hands the trace over without a notify (a woken writer asked for the GIL while the
    call that woke it still ran); the writer finds the trace on its own and stores it."""
    import time

    engine = Engine(open_store("memory://"), persist_traces=False)
    _seed(engine)
    trace = engine.assemble("p", "bob", "login", budget=2000).trace
    writer = TraceWriter(engine.store)
    woken: list[str] = []
    cv = writer._cv
    notify = cv.notify
    cv.notify = lambda n=1: (woken.append("notify"), notify(n))[1]  # type: ignore[method-assign]
    for i in range(3):
        writer.put(Trace.from_dict({**trace.to_dict(), "id": f"w{i}"}))
    assert woken == []
    deadline = time.monotonic() + 10
    while writer.pending() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert writer.pending() == 0  # written by the thread: nobody called flush()
    assert {d["id"] for d in engine.store.list_docs("traces", "p")} == {"w0", "w1", "w2"}
    writer.close()
    engine.close()
