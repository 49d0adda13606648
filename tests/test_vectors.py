"""Vector search: the embedders, vectors in the stores, the background embedder, the `vector`
source and its fallbacks. Real stores throughout; the real MiniLM embedder runs once per module."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright import Engine, MissingExtra, ValidationError
from contextwright.embedders import HashEmbedder, load_embedder
from contextwright.ports import Query, ReportsWrites, Store, capable
from contextwright.stores import _vectors
from contextwright.stores._vectors import Access, VectorMatrix, dequantize, quantize
from contextwright.stores.sqlite import SQLiteStore

NOTES = [
    ("ann", "the cache lives in redis on port 6379"),
    ("ann", "we chose postgres for the main database"),
    ("bob", "the lunch menu has pasta on fridays"),
]


@pytest.fixture
def vengine(store: Store) -> Iterator[Engine]:
    e = Engine(store, embedder=HashEmbedder())
    yield e
    e.close()


class GatedEmbedder:
    """Embeds only when the test opens the gate: shows that `add` never waits."""

    name = "gated"
    dim = 256

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.inner = HashEmbedder(self.dim)

    def embed(self, texts: Sequence[str]) -> Any:
        if len(texts) > 1 or not self.gate.is_set():
            self.gate.wait(timeout=20)
        return self.inner.embed(texts)


class BrokenEmbedder:
    name = "broken"
    dim = 8

    def embed(self, texts: Sequence[str]) -> Any:
        raise RuntimeError("model file is corrupt")


def add_notes(e: Engine, project: str = "p") -> None:
    for author, text in NOTES:
        e.add(project=project, author=author, kind="note", content=text)


def test_vector_nearest_is_vector_search_without_the_records(vengine: Engine) -> None:
    store: Any = vengine.store
    if getattr(store, "remote", False):  # PostgreSQL searches in the server: vector_search alone
        assert not hasattr(store, "vector_nearest")
        return
    add_notes(vengine)
    vengine.add(
        project="p", author="ann", kind="note", content="private redis", visibility="private"
    )
    assert vengine.wait_for_embeddings(timeout=20)
    model = vengine.vectors.embedder.name  # type: ignore[union-attr]
    query = vengine.vectors.embedder.embed(["redis cache port"])[0]  # type: ignore[union-attr]
    for agent in ("ann", "bob", None):
        found = store.vector_nearest("p", agent, query, 10, model)
        hits = store.vector_search("p", agent, query, 10, model)
        assert found == [(h.record.id, h.score) for h in hits] and found
    assert len(store.vector_nearest("p", "bob", query, 10, model)) == len(NOTES)  # not the private
    assert store.vector_nearest("nope", "bob", query, 10, model) == []


def _count_get_many(store: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids the store is asked for by `get_many` from now on (until monkeypatch undoes it)."""
    asked: list[str] = []
    get_many = store.get_many

    def counting(project: str, ids: Sequence[str]) -> Any:
        asked.extend(ids)
        return get_many(project, ids)

    monkeypatch.setattr(store, "get_many", counting)
    return asked


def test_vector_source_finds_records_and_trace_reports_no_lag(vengine: Engine) -> None:
    add_notes(vengine)
    assert vengine.wait_for_embeddings(timeout=20)
    result = vengine.assemble("p", "bob", "redis cache port", 2000)
    vector_items = [i for i in result.trace.items if "vector" in i["sources"]]
    why = (result.trace.warnings, result.trace.notes, result.trace.sources)  # if it fails
    assert vector_items and "vector" in vector_items[0]["components"], why
    best = max(vector_items, key=lambda i: i["components"]["vector"])
    assert "redis" in best["preview"]
    assert result.trace.notes["vectors"] == {
        "on": True,
        "state": "on",
        "embedder": "hash",
        "fusion": vengine.scoring.fusion,
        "lag": 0,
    }
    assert "relevance" in best["components"]


def test_hits_read_already_in_the_call_are_not_read_again(
    vengine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vector search's hits that another source of the same call read (the session's turns,
    read by history) are taken from that read: the store is asked only for the others, and the
    window is the one reading them all gives."""
    store: Any = vengine.store
    if getattr(store, "remote", False):  # PostgreSQL reads its hits in the search itself
        return
    turns = [vengine.add(project="p", author=a, content=t, session="s1") for a, t in NOTES]
    vengine.add(project="p", author="cy", kind="note", content="redis holds the session cache")
    assert vengine.wait_for_embeddings(timeout=20)
    asked = _count_get_many(store, monkeypatch)
    result = vengine.assemble("p", "bob", "redis cache port", 2000, session="s1")
    found = {i["key"] for i in result.trace.items if "vector" in i["sources"]}
    assert {t.id for t in turns} <= found  # the session's turns are hits too
    assert not {t.id for t in turns} & set(asked)
    monkeypatch.undo()
    vengine.cache.clear()
    fresh = Engine(store, embedder=HashEmbedder(), persist_traces=False)
    try:
        assert fresh.wait_for_embeddings(timeout=20)
        again = fresh.assemble("p", "bob", "redis cache port", 2000, session="s1")
    finally:
        fresh.close()
    assert again.text == result.text


def test_the_loops_hits_are_read_once_across_its_own_writes_and_again_after_a_status_change(
    vengine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent loop asks the same task every turn and writes a reply between turns: the hits
    the turn before read are taken from that read (a write of new records changes none of
    them), and only the new ones are read. A status change is a write no `carry` links across:
    the next call reads every hit again and shows the new status."""
    store: Any = vengine.store
    if getattr(store, "remote", False):  # PostgreSQL reads its hits in the search itself
        return
    if not capable(store, ReportsWrites):  # a write it cannot report moves every read
        return
    add_notes(vengine)
    assert vengine.wait_for_embeddings(timeout=20)
    asked = _count_get_many(store, monkeypatch)
    task = "redis cache port"

    def vector_keys(result: Any) -> set[str]:
        return {i["key"] for i in result.trace.items if "vector" in i["sources"]}

    first = vector_keys(vengine.assemble("p", "bob", task, 2000))
    read = set(asked)  # the hits no other source of the call read
    assert read and read <= first
    asked.clear()
    reply = vengine.add(project="p", author="bob", kind="note", content="redis port is 6380")
    assert vengine.wait_for_embeddings(timeout=20)
    second = vector_keys(vengine.assemble("p", "bob", task, 2000))
    assert reply.id in second and first <= second
    assert not read & set(asked)  # only the new hit, if no other source read it
    asked.clear()
    vengine.resolve("p", reply.id, by="bob")
    third = vengine.assemble("p", "bob", task, 2000)
    assert read | {reply.id} <= set(asked)  # read again
    shown = [i for i in third.trace.items if i["key"] == reply.id]
    assert shown and shown[0]["record_ids"] == [reply.id]
    assert store.get_many("p", [reply.id])[0].status == "resolved"
    fresh = Engine(store, embedder=HashEmbedder(), persist_traces=False)
    try:
        assert fresh.wait_for_embeddings(timeout=20)
        again = fresh.assemble("p", "bob", task, 2000)
    finally:
        fresh.close()
    assert again.text == third.text


@settings(max_examples=12, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("add"), st.sampled_from(["ann", "bob"]), st.integers(0, 5)),
            st.tuples(st.just("resolve"), st.just(""), st.integers(0, 30)),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_a_window_with_kept_hits_is_the_window_read_afresh(ops: list[tuple[str, str, int]]) -> None:
    """Whatever own writes and status changes come between the loop's calls, the window of a
    call that takes the last call's hits (reads.ById) is the one an engine reading everything
    afresh builds."""
    import tempfile

    words = ["redis", "cache", "port", "postgres", "lunch", "deploy"]
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(f"{tmp}/v.db")
        with Engine(store, embedder=HashEmbedder(), persist_traces=False) as e:
            add_notes(e)
            ids = [r.id for r in store.query(Query("p", None, limit=100))]
            assert e.wait_for_embeddings(timeout=20)
            task = "redis cache port"
            e.assemble("p", "bob", task, 2000)
            for op, who, n in ops:
                if op == "add":
                    text = f"{words[n]} note {' '.join(words[: n + 1])}"
                    ids.append(e.add(project="p", author=who, kind="note", content=text).id)
                elif ids:
                    e.resolve("p", ids.pop(n % len(ids)), by="bob")  # once each
                assert e.wait_for_embeddings(timeout=20)
                # Vector hits alone, as well: another source's read of a hit would hide it.
                kept = [e.assemble("p", "bob", task, 2000, sources=s) for s in (["vector"], None)]
                with Engine(store, embedder=HashEmbedder(), persist_traces=False) as fresh:
                    assert fresh.wait_for_embeddings(timeout=20)
                    for s, window in zip((["vector"], None), kept, strict=True):
                        assert fresh.assemble("p", "bob", task, 2000, sources=s).text == window.text
        store.close()


def test_private_records_never_come_back_from_vector_search(vengine: Engine) -> None:
    vengine.register_agent("p", "bob")
    vengine.add(
        project="p",
        author="ann",
        kind="note",
        content="secret redis password",
        visibility="private",
    )
    vengine.add(
        project="p",
        author="ann",
        kind="note",
        content="redis note for carl",
        visibility="direct",
        to=["carl"],
    )
    assert vengine.wait_for_embeddings(timeout=20)
    store: Any = vengine.store
    vec = HashEmbedder().embed(["redis password"])[0]
    for_bob = [h.record.content for h in store.vector_search("p", "bob", vec, 10, "hash")]
    for_carl = [h.record.content for h in store.vector_search("p", "carl", vec, 10, "hash")]
    for_ann = [h.record.content for h in store.vector_search("p", "ann", vec, 10, "hash")]
    assert for_bob == []
    assert for_carl == ["redis note for carl"]
    assert sorted(for_ann) == ["redis note for carl", "secret redis password"]
    window = vengine.assemble("p", "bob", "redis password", 2000)
    assert "secret" not in window.text and "carl" not in window.text


def test_add_never_waits_for_the_embedder_and_the_trace_shows_the_lag(store: Store) -> None:
    embedder = GatedEmbedder()
    with Engine(store, embedder=embedder) as e:
        add_notes(e)  # returns although the embedder is blocked
        found = e.assemble("p", "bob", "redis cache", 2000)
        assert "redis" in found.text  # searchable by full text at once
        assert found.trace.notes["vectors"]["lag"] == 3
        embedder.gate.set()
        assert e.wait_for_embeddings(timeout=20)
        assert e.assemble("p", "bob", "redis cache", 2000).trace.notes["vectors"]["lag"] == 0


def test_without_an_embedder_the_trace_says_full_text_alone(engine: Engine) -> None:
    add_notes(engine)
    result = engine.assemble("p", "bob", "redis cache", 2000)
    assert "redis" in result.text
    assert result.trace.notes["vectors"]["on"] is False
    assert "full text alone" in result.trace.notes["vectors"]["reason"]
    assert engine.wait_for_embeddings(timeout=1)


def test_an_embedder_that_fails_to_load_falls_back_with_a_warning(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("contextwright.embedders.minilm.MODEL_PACKAGE", "no_such_model_package")
    with Engine(store, embedder="minilm") as e:
        add_notes(e)
        result = e.assemble("p", "bob", "redis cache", 2000)
    assert "redis" in result.text
    assert any("failed to load" in w and "contextwright[vectors]" in w for w in result.warnings)
    assert result.trace.notes["vectors"]["on"] is False


def test_an_embedder_that_fails_at_run_time_is_a_warning_not_a_failed_call(store: Store) -> None:
    with Engine(store, embedder=BrokenEmbedder()) as e:
        add_notes(e)
        assert not e.wait_for_embeddings(timeout=0.5)
        result = e.assemble("p", "bob", "redis cache", 2000)
    assert "redis" in result.text
    failed = [s for s in result.trace.sources if s["name"] == "vector"]
    assert failed and "corrupt" in (failed[0]["error"] or "")


def test_missing_extra_and_unknown_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("contextwright.embedders.minilm.MODEL_PACKAGE", "no_such_model_package")
    with pytest.raises(MissingExtra, match=r"pip install 'contextwright\[vectors\]'"):
        load_embedder("minilm")
    with pytest.raises(ValidationError, match="embedder"):
        load_embedder("word2vec")
    with pytest.raises(ValidationError, match="embedder"):
        Engine.open("memory://", embedder="word2vec")
    assert load_embedder("none") is None


def test_sqlite_records_the_vectors_migration_and_keeps_vectors_across_opens(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "v.db")
    with Engine(SQLiteStore(path), embedder=HashEmbedder()) as e:
        add_notes(e)
        assert e.wait_for_embeddings(timeout=20)
    store = SQLiteStore(path)
    assert "m003_vectors" in store.applied_migrations()
    assert store.unembedded("hash", 10) == []
    assert store.unembedded_count("hash") == 0
    assert len(store.unembedded("other-model", 10)) == 3
    hits = store.vector_search("p", "bob", HashEmbedder().embed(["lunch pasta"])[0], 1, "hash")
    assert "pasta" in hits[0].record.content
    store.close()


def test_put_vectors_skips_unknown_ids_and_leaves_records_alone(store: Store) -> None:
    e = Engine(store)
    add_notes(e)
    vs: Any = store
    before = [r.to_dict() for r in store.query(_query())]
    vs.put_vectors("hash", [("p", "no-such-id", np.ones(4, dtype=np.float32))])
    assert [r.to_dict() for r in store.query(_query())] == before
    assert vs.unembedded_count("hash") == 3
    e.close()


def _query() -> Any:
    from contextwright.ports import Query

    return Query("p", None, limit=100)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-1, 1, allow_nan=False, width=32), min_size=8, max_size=64))
def test_int8_quantization_keeps_the_direction(values: list[float]) -> None:
    v = np.asarray(values, dtype=np.float32)
    back = dequantize(*quantize(v))
    assert back.shape == v.shape
    assert np.max(np.abs(back - v)) <= np.max(np.abs(v)) / 127 + 1e-6


def test_preselected_search_above_the_exact_size_agrees_and_masks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_vectors, "EXACT_UP_TO", 50)
    rng = np.random.default_rng(3)
    vecs = rng.standard_normal((600, 32)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    m = VectorMatrix(32)
    access = [Access("x", "private") if i % 7 == 0 else Access("x", "project") for i in range(600)]
    m.add([f"r{i}" for i in range(600)], vecs, access)
    hits = m.search(vecs[1], "y", 5)
    assert hits[0][0] == "r1" and abs(hits[0][1] - 1.0) < 0.02  # rows are kept as int8
    assert all(int(rid[1:]) % 7 for rid, _ in m.search(vecs[7], "y", 20))
    assert m.search(vecs[7], "x", 1)[0][0] == "r7"


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 120),  # rows
    st.integers(1, 150),  # limit: past the rows the agent may see, too
    st.sampled_from([None, "x", "y"]),  # who searches
    st.integers(0, 2**16),
)
def test_exact_search_is_the_brute_force_ranking_of_the_rows_the_agent_may_see(
    n: int, limit: int, who: str | None, seed: int
) -> None:
    """The cosines exactly as a brute-force ranking of the dequantized rows gives them, highest
    first, each beside a row of that cosine, no row twice, and no row the agent may not see,
    even where the limit asks for more rows than it may see (rows of equal cosines may come in
    any order)."""
    rng = np.random.default_rng(seed)
    vecs = rng.standard_normal((n, 16)).astype(np.float32)
    vecs[rng.integers(0, n, n // 4)] = vecs[0]  # ties
    kinds = rng.choice(["project", "private", "direct"], n)
    access = [Access(str(rng.choice(["x", "z"])), str(k), ("y",)) for k in kinds]
    m = VectorMatrix(16)
    m.add([f"r{i}" for i in range(n)], vecs, access)
    q = rng.standard_normal(16).astype(np.float32)
    rows = np.stack([dequantize(*quantize(v)) for v in vecs])
    cosines = [float(c) for c in np.einsum("ij,j->i", rows, q)]  # each row its own sum
    seen = [i for i in range(n) if who is None or access[i].allows(who)]
    ranked = sorted(seen, key=lambda i: -cosines[i])[:limit]
    got = m.search(q, who, limit)
    assert [c for _, c in got] == [cosines[i] for i in ranked]
    assert all(int(rid[1:]) in seen and cosines[int(rid[1:])] == c for rid, c in got)
    assert len({rid for rid, _ in got}) == len(got)
    assert all(type(rid) is str and type(c) is float for rid, c in got)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(1, 200),  # rows in the batch (past 200 rows the search preselects)
            st.sampled_from(["project", "private", "direct"]),
            st.sampled_from(["x", "y", "z"]),  # who searches after the batch
            st.booleans(),  # above the exact size (preselected) or not
        ),
        min_size=1,
        max_size=8,
    ),
    st.integers(0, 2**16),
)
def test_visibility_kept_row_by_row_equals_visibility_built_afresh(
    batches: list[tuple[int, str, str, bool]], seed: int
) -> None:
    """The per-agent masks and the last distances of a query are kept up to date as rows are
    added (not rebuilt): every search answers as a matrix built from scratch with the same rows
    would, and never shows a row the agent may not see. The same query comes back every other
    batch, as an agent's task does turn after turn."""
    rng = np.random.default_rng(seed)
    same = rng.standard_normal(16).astype(np.float32)
    kept = VectorMatrix(16)
    rows: list[tuple[str, np.ndarray[Any, Any], Access]] = []
    for b, (count, visibility, searcher, wide) in enumerate(batches):
        vecs = rng.standard_normal((count, 16)).astype(np.float32)
        authors = rng.choice(["x", "y", "z"], count)
        access = [
            Access(str(a), visibility, ("y",) if visibility == "direct" else ()) for a in authors
        ]
        ids = [f"b{b}r{i}" for i in range(count)]
        # Now and then a row is embedded again, with other access: its row is overwritten.
        if rows and rng.random() < 0.3:
            ids[0] = rows[0][0]
        kept.add(ids, vecs, access)
        rows = [r for r in rows if r[0] not in ids] + list(zip(ids, vecs, access, strict=True))
        fresh = VectorMatrix(16)
        fresh.add([r[0] for r in rows], np.stack([r[1] for r in rows]), [r[2] for r in rows])
        query = same if b % 2 else rng.standard_normal(16).astype(np.float32)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(_vectors, "EXACT_UP_TO", 5 if wide else 10_000)
            got, want = kept.search(query, searcher, 10), fresh.search(query, searcher, 10)
        # The same rows in the same order, with the same cosines to the bit.
        assert [rid for rid, _ in got] == [rid for rid, _ in want]
        assert [c for _, c in got] == [c for _, c in want]
        allowed = {rid for rid, _, acc in rows if acc.allows(searcher)}
        assert {rid for rid, _ in got} <= allowed
        # The preselected rows themselves (ties at the cut included): the same records.
        assert _preselected(kept, query, searcher) == _preselected(fresh, query, searcher)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 9),  # 64-bit words per row (dimensions up to 576)
    st.integers(0, 300),  # rows
    st.integers(0, 2**16),
    st.booleans(),  # a visibility mask or none
    st.integers(0, 40),  # first row counted (rows before it were counted by an earlier search)
    st.integers(0, 600),  # spare capacity: the matrix's rows are a prefix of its arrays
)
def test_hamming_counts_the_distances_bit_by_bit(
    words: int, n: int, seed: int, masked: bool, lo: int, spare: int
) -> None:
    """The distances and histogram `hamming` gives are the differing bits, counted one by one,
    for every word count, offset and mask; a masked-out row is `far`."""
    rng = np.random.default_rng(seed)
    lo = min(lo, n)
    bits = rng.integers(0, 2**64, size=(words, n + spare), dtype=np.uint64)
    qbits = rng.integers(0, 2**64, size=words, dtype=np.uint64)
    mask = rng.random(n - lo) < 0.7 if masked else None
    far = words * 64 + 1
    dist, hist = _vectors.hamming(bits, qbits, lo, n, mask, far)
    want = [
        sum(bin(int(bits[w, row]) ^ int(qbits[w])).count("1") for w in range(words))
        if mask is None or mask[row - lo]
        else far
        for row in range(lo, n)
    ]
    assert dist.dtype == np.uint16 and dist.tolist() == want
    assert len(hist) == far + 1 and hist.tolist() == [want.count(d) for d in range(far + 1)]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**16), st.sampled_from([None, "y"]))
def test_a_query_asked_again_ranks_only_the_rows_added_since(seed: int, who: str | None) -> None:
    """An agent's next turn asks the same query after a row or two was added: while the cut
    stays where it was, only the new rows are ranked, and the answer is the one a matrix built
    afresh gives."""
    rng = np.random.default_rng(seed)
    query = rng.standard_normal(16).astype(np.float32)
    kept = VectorMatrix(16)
    ids: list[str] = []
    vecs: list[np.ndarray[Any, Any]] = []
    access: list[Access] = []

    def add(count: int) -> None:
        new = rng.standard_normal((count, 16)).astype(np.float32)
        if rng.random() < 0.5:  # now and then a row close to the query, inside the cut
            new[0] = query + 0.1 * rng.standard_normal(16).astype(np.float32)
        acc = [Access("x", "private" if rng.random() < 0.2 else "project") for _ in range(count)]
        names = [f"r{len(ids) + i}" for i in range(count)]
        kept.add(names, new, acc)
        ids.extend(names)
        vecs.extend(new)
        access.extend(acc)

    add(300)
    ranked: list[int] = []
    real_dot = kept._dot
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_vectors, "EXACT_UP_TO", 50)
        mp.setattr(kept, "_dot", lambda rows, q: (ranked.append(len(rows)), real_dot(rows, q))[1])
        kept.search(query, who, 10)
        reused = 0
        for _ in range(12):
            add(int(rng.integers(1, 3)))
            ranked.clear()
            got = kept.search(query, who, 10)
            fresh = VectorMatrix(16)
            fresh.add(ids, np.stack(vecs), access)
            want = fresh.search(query, who, 10)
            assert [rid for rid, _ in got] == [rid for rid, _ in want]
            assert [c for _, c in got] == [c for _, c in want]
            assert sum(ranked) <= 2 or sum(ranked) >= 100  # the new rows alone, or all again
            reused += sum(ranked) <= 2
    assert reused >= 6  # the cut moves now and then, not at most turns


@settings(max_examples=25, deadline=None)
@given(
    st.integers(0, 2**16),
    st.sampled_from([None, "y"]),
    st.lists(st.sampled_from(["far", "near", "again", "limit"]), min_size=1, max_size=10),
)
def test_a_query_asked_again_with_no_new_row_near_gets_the_last_answer(
    seed: int, who: str | None, steps: list[str]
) -> None:
    """A row added far from the query (outside the cut) leaves the rows ranked as they were:
    the search answers with its last answer, without ranking again. A row near the query, a
    row embedded again or another limit ranks anew. Every answer is a fresh matrix's."""
    rng = np.random.default_rng(seed)
    query = rng.standard_normal(16).astype(np.float32)
    m = VectorMatrix(16)
    ids: list[str] = []
    vecs: list[np.ndarray[Any, Any]] = []
    access: list[Access] = []

    def add(vec: np.ndarray[Any, Any], rid: str | None = None, private: bool = False) -> None:
        acc = Access("x", "private" if private else "project")  # a private row: far for "y"
        rid = rid or f"r{len(ids)}"
        m.add([rid], vec[None, :], [acc])
        if rid in ids:
            at = ids.index(rid)
            vecs[at], access[at] = vec, acc
        else:
            ids.append(rid), vecs.append(vec), access.append(acc)

    for v in rng.standard_normal((300, 16)).astype(np.float32):
        add(v, private=rng.random() < 0.2)
    limit = 10
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_vectors, "EXACT_UP_TO", 50)
        last = m.search(query, who, limit)
        for step in steps:
            noise = 0.01 * rng.standard_normal(16).astype(np.float32)
            if step == "far":  # every sign bit opposite the query's: past any cut
                add(-np.sign(query) * np.abs(query).mean(), private=rng.random() < 0.5)
            elif step == "near":
                add(query + noise)
            elif step == "again":  # a row embedded again: the kept distances are void
                add(query + noise, rid=ids[int(rng.integers(0, len(ids)))])
            else:
                limit = 15 if limit == 10 else 10
            kept = m._dists[(query.tobytes(), who if m._restricted else None)]
            before = kept.found
            got = m.search(query, who, limit)
            fresh = VectorMatrix(16)
            fresh.add(ids, np.stack(vecs), access)
            want = fresh.search(query, who, limit)
            assert [rid for rid, _ in got] == [rid for rid, _ in want]
            assert [c for _, c in got] == [c for _, c in want]
            now = m._dists[(query.tobytes(), who if m._restricted else None)]
            if step == "far":
                assert got == last and now.found is before  # the last answer, not ranked again
            else:
                assert now.found is not before
            last = got


def test_the_matrix_keeps_its_ids_where_the_cyclic_gc_does_not_walk() -> None:
    """A full collection walks every container it tracks: a list of 100k record ids added 3 ms to
    each one in a process with the vector engine. The ids (an object array) and the rows by id
    (a dict of strings to ints) are not tracked, and still answer as a list would."""
    import gc

    m = VectorMatrix(8)
    ids = [f"rec-{i}" for i in range(3000)]
    vecs = np.random.default_rng(1).standard_normal((3000, 8)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)  # unit rows, as embedders give
    for at in range(0, 3000, 700):  # grown several times
        m.add(
            ids[at : at + 700],
            vecs[at : at + 700],
            [Access("a", "project")] * len(ids[at : at + 700]),
        )
    m.add([ids[5]], vecs[6:7], [Access("a", "project")])  # embedded again: same row
    assert len(m) == 3000 and list(m.ids) == ids and m.row[ids[2999]] == 2999
    assert not gc.is_tracked(m._ids) and not gc.is_tracked(m.row)
    assert m.search(vecs[6], None, 2)[0][0] in (ids[5], ids[6])


def _preselected(m: VectorMatrix, query: np.ndarray[Any, Any], who: str) -> set[str]:
    n = len(m.ids)
    mask = m._masks.get(who) if m._restricted else None
    cut = None if mask is None else mask[:n]
    rows, _, _ = m._scored(query, n, cut, min(100, n - 1), who if cut is not None else None)
    return {m.ids[int(r)] for r in rows}


def test_the_matrix_keeps_int8_rows_and_ranks_as_float32_rows_would() -> None:
    rng = np.random.default_rng(4)
    vecs = rng.standard_normal((300, 48)).astype(np.float32)
    packed = [quantize(v) for v in vecs]
    floats = np.stack([dequantize(d, s) for d, s in packed])  # what a store hands back
    as_float, as_int8 = VectorMatrix(48), VectorMatrix(48)
    ids, access = [f"r{i}" for i in range(300)], [Access("x", "project")] * 300
    as_float.add(ids, floats, access)
    data = np.stack([np.frombuffer(d, dtype=np.int8) for d, _ in packed])
    as_int8.add_quantized(ids, data, np.asarray([s for _, s in packed], np.float32), access)
    query = floats[7] / np.linalg.norm(floats[7])
    exact = floats @ query
    for m in (as_float, as_int8):
        found = m.search(query, None, 10)
        assert [rid for rid, _ in found] == [f"r{i}" for i in np.argsort(-exact)[:10]]
        assert np.allclose([c for _, c in found], np.sort(exact)[::-1][:10], atol=1e-6)
    assert as_int8.nbytes < floats.nbytes / 3  # int8 rows, not float32


def test_the_default_embedder_is_real_and_offline(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime", reason="needs the 'vectors' extra")
    embedder = load_embedder("minilm")
    assert embedder is not None and embedder.dim == 384
    v = embedder.embed(
        ["what food is served?", "where do we keep cached values?", *(t for _, t in NOTES)]
    )
    assert v.shape == (5, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    assert int(np.argmax(v[2:] @ v[0])) == 2  # pasta, with no word in common
    assert int(np.argmax(v[2:] @ v[1])) == 0  # redis
    with Engine(SQLiteStore(str(tmp_path / "m.db")), embedder=embedder) as e:
        add_notes(e)
        assert e.wait_for_embeddings(timeout=60)
        result = e.assemble("p", "ann", "what food is served?", 2000)
    vector = {
        i["preview"]: i["components"]["vector"]
        for i in result.trace.items
        if "vector" in i["components"]
    }
    assert max(vector, key=lambda k: vector[k]).endswith("the lunch menu has pasta on fridays")


@pytest.mark.parametrize("compute", ["int8", "packaged"])
def test_a_query_embeds_the_same_on_its_own_session_as_on_the_batch_session(compute: str) -> None:
    pytest.importorskip("onnx", reason="needs the 'vectors' extra")
    from contextwright.embedders.minilm import MiniLMEmbedder

    own = MiniLMEmbedder(compute=compute)
    shared = MiniLMEmbedder(query_threads=None, compute=compute)
    assert own.compute == shared.compute == compute
    query = "where do we keep cached values?"
    assert np.array_equal(own.embed([query]), shared.embed([query]))
    if compute == "packaged":  # a session for batches and one for queries
        assert own._query_session is not None and shared._query_session is None
        # In a batch, the same text goes through the batch session (padded): the same direction.
        batch = own.embed([query, "the lunch menu"])[0]
        assert float(batch @ own.embed([query])[0]) > 0.999
    else:  # one session, one text at a time: the same vector wherever the text is embedded
        assert own._query_session is None
        assert np.array_equal(own.embed(["the lunch menu", query])[1], own.embed([query])[0])
    # In two steps (the model on the pool, the pooling on the caller): the very same vector.
    for e in (own, shared):
        steps = e.query_steps(query)
        assert np.array_equal(steps.vector(steps.run()), own.embed([query])[0])


def test_the_int8_build_is_made_once_and_points_where_the_packaged_model_does(
    model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("onnx", reason="needs the 'vectors' extra")
    from contextwright.embedders import minilm, quantized

    fast, exact = minilm.MiniLMEmbedder(), minilm.MiniLMEmbedder(compute="packaged")
    assert fast.compute == "int8" and exact.compute == "packaged"
    assert fast.compute_error is None and exact.compute_error is None
    texts = [
        "where do we keep cached values?",
        "what did Caroline say about her adoption plans last summer?",
        "retry the payment webhook",
        "the lunch menu has pasta on fridays",
    ]
    a, b = fast.embed(texts), exact.embed(texts)
    assert not np.array_equal(a, b)  # another model ran ...
    assert (np.sum(a * b, axis=1) > 0.98).all()  # ... and points the same way
    built = list(model_cache.glob("model-*-int8-ort*.onnx"))
    assert len(built) == 1 and built[0].stat().st_size > 10_000_000
    assert not list(model_cache.glob("*.partial"))

    def no_rebuild(source: Path) -> bytes:
        raise AssertionError(f"{source} was built again instead of read from the cache")

    monkeypatch.setattr(quantized, "build_int8", no_rebuild)
    again = minilm.MiniLMEmbedder()
    assert again.compute == "int8" and np.array_equal(again.embed(texts), a)


def test_a_new_build_replaces_the_build_for_another_runtime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("onnx", reason="needs the 'vectors' extra")
    from contextwright.embedders import quantized
    from contextwright.embedders.minilm import model_path

    monkeypatch.setenv("CONTEXTWRIGHT_CACHE", str(tmp_path))
    monkeypatch.setattr(quantized, "build_int8", lambda source: b"an int8 build")
    old = tmp_path / "model-0123456789abcdef-int8-ort0.1.onnx"
    other = tmp_path / "another-model-0123456789abcdef-int8-ort0.1.onnx"
    old.write_bytes(b"a build for another onnxruntime")
    other.write_bytes(b"another model's build")
    with caplog.at_level("INFO", logger="contextwright.embedders"):
        assert quantized.int8_model(model_path()) == b"an int8 build"
    assert "building the int8 build of model.onnx" in caplog.text  # says why it takes seconds
    (new,) = tmp_path.glob("model-*-int8-ort*.onnx")  # this runtime's build alone
    assert new != old and new.read_bytes() == b"an int8 build"
    assert not old.exists() and other.exists()
    caplog.clear()
    with caplog.at_level("INFO", logger="contextwright.embedders"):
        assert quantized.int8_model(model_path()) == b"an int8 build"  # now from the cache
    assert "building" not in caplog.text


def test_the_int8_build_is_used_from_memory_where_the_cache_cannot_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("onnx", reason="needs the 'vectors' extra")
    from contextwright.embedders import minilm

    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the cache directory should be")
    monkeypatch.setenv("CONTEXTWRIGHT_CACHE", str(blocked / "cache"))
    e = minilm.MiniLMEmbedder()
    steps = e.query_steps("where do we keep cached values?")
    v = steps.vector(steps.run())
    assert abs(float(np.linalg.norm(v)) - 1.0) < 1e-4 and e.compute == "int8"
    assert blocked.read_text().startswith("a file")


def test_a_bad_compute_is_named_and_a_missing_quantizer_falls_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("onnxruntime", reason="needs the 'vectors' extra")
    import importlib.util

    from contextwright.embedders import minilm

    with pytest.raises(ValidationError) as err:
        minilm.MiniLMEmbedder(compute="fp16")
    assert "compute" in str(err.value) and "int8" in str(err.value)
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "onnx" else real(name, *a)
    )
    e = minilm.MiniLMEmbedder()
    assert e.compute == "packaged" and "onnx" in (e.compute_error or "")
    assert np.array_equal(
        e.embed(["redis"]), minilm.MiniLMEmbedder(compute="packaged").embed(["redis"])
    )


def test_an_int8_build_that_points_elsewhere_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("onnx", reason="needs the 'vectors' extra")
    from contextwright.embedders import minilm

    fast = minilm.MiniLMEmbedder()  # here the build passes its check ...
    assert fast.compute == "int8" and fast.compute_error is None
    monkeypatch.setattr(minilm, "INT8_MIN_COSINE", 0.9999)  # ... which a saturating CPU fails
    e = minilm.MiniLMEmbedder()
    assert e.compute == "packaged"
    assert e.compute_error is not None and "cosine 0.99" in e.compute_error
    exact = minilm.MiniLMEmbedder(compute="packaged")
    steps = e.query_steps(minilm.PROBES[0])
    assert np.array_equal(steps.vector(steps.run()), exact.embed([minilm.PROBES[0]])[0])
    assert np.array_equal(e.embed(list(minilm.PROBES)), exact.embed(list(minilm.PROBES)))


def test_a_failing_int8_build_leaves_the_packaged_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("onnx", reason="needs the 'vectors' extra")
    from contextwright.embedders import minilm, quantized

    def broken(source: Path) -> bytes:
        raise RuntimeError(f"cannot quantize {source.name}")

    monkeypatch.setenv("CONTEXTWRIGHT_CACHE", str(tmp_path))  # nothing cached: it must build
    monkeypatch.setattr(quantized, "build_int8", broken)
    e = minilm.MiniLMEmbedder()
    assert e.compute == "packaged"
    assert e.compute_error == "RuntimeError: cannot quantize model.onnx"
    steps = e.query_steps("where do we keep cached values?")
    assert np.array_equal(
        steps.vector(steps.run()), e.embed(["where do we keep cached values?"])[0]
    )
    with Engine(SQLiteStore(str(tmp_path / "v.db")), embedder=e) as engine:
        status = engine.vectors.status()
        assert status["compute"] == "packaged"
        assert status["compute_error"] == "RuntimeError: cannot quantize model.onnx"


class StepsEmbedder(HashEmbedder):
    """A HashEmbedder with `query_steps`, recording the threads its steps ran on."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[tuple[str, str]] = []

    def query_steps(self, text: str) -> Any:
        from contextwright.embedders.minilm import QuerySteps

        self.threads.append(("tokenize", threading.current_thread().name))

        def run() -> Any:
            self.threads.append(("model", threading.current_thread().name))
            return self.embed([text])

        def vector(ran: Any) -> Any:
            self.threads.append(("pooling", threading.current_thread().name))
            return ran[0]

        return QuerySteps(run, vector)


def test_the_query_is_embedded_and_searched_on_the_pool_and_its_hits_read_on_the_caller(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedder = StepsEmbedder()
    remote = getattr(store, "remote", False)
    calls: list[tuple[str, str]] = []
    if not remote:  # SQLite and memory search in this process (`vector_nearest`)

        def spy(method: str) -> Any:
            real = getattr(store, method)

            def recorded(*args: Any) -> Any:
                calls.append((method, threading.current_thread().name))
                return real(*args)

            return recorded

        for method in ("vector_nearest", "get_many", "ranking_rows"):
            if hasattr(store, method):  # ranking_rows: full text's ranking (SQLite)
                monkeypatch.setattr(store, method, spy(method))
    with Engine(store, embedder=embedder) as e:
        add_notes(e)
        assert e.wait_for_embeddings(timeout=20)
        embedder.threads.clear()
        calls.clear()
        result = e.assemble("p", "bob", "redis cache port", 2000)
        caller = threading.current_thread().name
        assert [step for step, _ in embedder.threads] == ["tokenize", "model", "pooling"]
        if remote:  # PostgreSQL: the whole source runs on the pool
            assert all(name.startswith("cw-source") for _, name in embedder.threads)
        else:  # tokenized on the calling thread; the model, pooling and search on the pool
            assert embedder.threads[0] == ("tokenize", caller)
            assert all(name.startswith("cw-source") for _, name in embedder.threads[1:])
            searched = [name for m, name in calls if m == "vector_nearest"]
            assert len(searched) == 1 and searched[0].startswith("cw-source")
            assert ("get_many", caller) in calls  # the hits' records, on the calling thread
        assert any("vector" in i["sources"] for i in result.trace.items)
        # Asked again, the query's vector is cached: nothing is embedded, the search (a
        # fraction of a millisecond) runs on the calling thread, and the spare core is left to
        # full text's ranking where the store ranks in this process (no write came between).
        embedder.threads.clear()
        calls.clear()
        again = e.assemble("p", "bob", "redis cache port", 2000)
        assert embedder.threads == [] and again.text == result.text
        if not remote:
            assert [name for m, name in calls if m == "vector_nearest"] == [caller]
            ranked = [name for m, name in calls if m == "ranking_rows"]
            assert all(name.startswith("cw-source") for name in ranked)
            assert ranked or not hasattr(store, "ranking_rows")
        # With no pool, all of it runs on the calling thread, and finds the same.
        steps = StepsEmbedder()
        serial = Engine(store, embedder=steps, workers=1)
        try:
            alone = serial.assemble("p", "bob", "redis cache port", 2000)
            assert steps.threads == [(s, caller) for s in ("tokenize", "model", "pooling")]
            assert alone.text == result.text
            assert [i["key"] for i in alone.trace.items] == [i["key"] for i in result.trace.items]
        finally:  # the store is `e`'s to close
            serial.flush()
            serial.vectors.close()


def test_search_catches_up_with_vectors_written_after_the_first_search(vengine: Engine) -> None:
    add_notes(vengine)
    assert vengine.wait_for_embeddings(timeout=20)
    assert "pasta" in vengine.assemble("p", "bob", "pasta lunch", 2000).text
    vengine.add(project="p", author="cy", kind="note", content="the deploy runs on thursdays")
    assert vengine.wait_for_embeddings(timeout=20)
    found = vengine.assemble("p", "bob", "deploy thursdays", 2000)
    assert any("deploy" in i["preview"] and "vector" in i["sources"] for i in found.trace.items)


def _vector_store_with_notes(path: str) -> tuple[SQLiteStore, list[str]]:
    store = SQLiteStore(path)
    e = Engine(store)
    ids = [e.add(project="p", author=a, kind="note", content=t).id for a, t in NOTES]
    store.put_vectors(
        "hash",
        [
            ("p", i, v)
            for i, v in zip(ids, HashEmbedder().embed([t for _, t in NOTES]), strict=True)
        ],
    )
    return store, ids


def _matrix_seq(store: SQLiteStore) -> int:
    return int(store._vec()[1][("p", "hash")].seq)


def _table_seq(store: SQLiteStore) -> int:
    return int(store._conn().execute("SELECT max(seq) FROM vectors").fetchone()[0])


def test_vectors_written_here_join_the_matrix_without_being_read_back(tmp_path: Path) -> None:
    """What this process's worker writes goes into the matrix it holds at once: the next search
    finds it with nothing to read back from the table (the agent loop's case)."""
    store, _ = _vector_store_with_notes(str(tmp_path / "v.db"))
    emb = HashEmbedder()
    assert store.vector_search("p", None, emb.embed(["pasta"])[0], 1, "hash")  # loads the matrix
    new = Engine(store).add(project="p", author="cy", kind="note", content="deploys run thursdays")
    store.put_vectors("hash", [(new.project, new.id, emb.embed([new.content])[0])])
    assert _matrix_seq(store) == _table_seq(store)  # nothing left for the next search to read
    hits = store.vector_search("p", None, emb.embed([new.content])[0], 1, "hash")
    assert hits[0].record.id == new.id
    store.close()


def test_a_matrix_that_missed_another_writers_vectors_reads_them_from_the_table(
    tmp_path: Path,
) -> None:
    """Two processes on one file: vectors the other one wrote leave a gap, so this process's own
    next write is not appended over it; the next search reads both from the table."""
    path = str(tmp_path / "v.db")
    mine, _ = _vector_store_with_notes(path)
    other = SQLiteStore(path)
    emb = HashEmbedder()
    assert mine.vector_search("p", None, emb.embed(["pasta"])[0], 1, "hash")
    theirs = Engine(other).add(project="p", author="dee", kind="note", content="tea at four")
    other.put_vectors("hash", [(theirs.project, theirs.id, emb.embed([theirs.content])[0])])
    ours = Engine(mine).add(project="p", author="cy", kind="note", content="coffee at nine")
    mine.put_vectors("hash", [(ours.project, ours.id, emb.embed([ours.content])[0])])
    assert _matrix_seq(mine) < _table_seq(mine)  # not appended: it would skip their row
    for rec in (theirs, ours):
        hits = mine.vector_search("p", None, emb.embed([rec.content])[0], 1, "hash")
        assert hits[0].record.id == rec.id
    assert _matrix_seq(mine) == _table_seq(mine)
    other.close()
    mine.close()


def test_static_embedder_loads_a_distilled_table(tmp_path: Path) -> None:
    pytest.importorskip("tokenizers", reason="needs the 'vectors' extra")
    from contextwright.embedders.static import StaticEmbedder

    rng = np.random.default_rng(0)
    path = tmp_path / "table.npz"
    np.savez(
        path,
        table=rng.integers(-127, 128, (30_522, 16), dtype=np.int8),
        scale=np.ones(16, np.float32),
    )
    embedder = load_embedder(f"static:{path}")
    assert isinstance(embedder, StaticEmbedder) and embedder.dim == 16
    v = embedder.embed(["the cache lives in redis", "", "the cache lives in redis"])
    assert v.shape == (3, 16)
    assert np.allclose(np.linalg.norm(v[[0, 2]], axis=1), 1.0, atol=1e-5)
    assert np.array_equal(v[0], v[2]) and not v[1].any()
    with pytest.raises(ValidationError, match="static:PATH"):
        load_embedder(f"static:{tmp_path / 'missing.npz'}")


def test_distill_writes_a_table_from_the_packaged_model(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime", reason="needs the 'vectors' extra")
    from contextwright.embedders.minilm import MiniLMEmbedder
    from contextwright.embedders.static import distill

    out = distill(tmp_path / "small.npz", vocab=64, batch=32)
    with np.load(out) as z:
        assert z["table"].shape == (64, 384) and z["table"].dtype == np.int8
        assert z["scale"].shape == (384,) and (z["scale"] > 0).all()
        scale = z["scale"]
        table = z["table"].astype(np.float32) * scale
    # Row 40 is the packaged model's "[CLS] token-40 [SEP]", to int8 precision.
    x = np.asarray([[101, 40, 102]], dtype=np.int64)
    row = MiniLMEmbedder(compute="packaged").hidden(x, np.ones_like(x)).mean(axis=1)[0]
    assert np.allclose(table[40], row, atol=float(scale.max()))


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.lists(st.floats(-1e6, 1e6, width=32), min_size=8, max_size=8), min_size=1, max_size=6
    )
)
def test_rows_quantize_as_each_vector_does(rows: list[list[float]]) -> None:
    """The in-process matrix and the stores quantize the same way: one row at a time or all at
    once, the same int8 values and scales."""
    m = np.asarray(rows, dtype=np.float32)
    data, scales = _vectors.quantize_rows(m)
    for i, row in enumerate(m):
        assert quantize(row) == (data[i].tobytes(), float(scales[i]))


def test_the_query_cache_keeps_the_size_it_is_given() -> None:
    from contextwright.vectors import VectorSource

    source = VectorSource(HashEmbedder(), cache_size=2)
    for text in ("alpha", "beta", "gamma"):
        source._keep(text, np.zeros(4))
    assert list(source._cache) == ["beta", "gamma"]


def test_access_of_a_stored_row_keeps_only_a_direct_records_recipients() -> None:
    """`Access.of_row`, as both the table's catch-up and this process's own writes build it:
    recipients (stored as JSON) count for a direct record only."""
    direct = Access.of_row("ann", "direct", '["bob", "cy"]')
    assert direct == Access("ann", "direct", ("bob", "cy"))
    assert direct.allows("bob") and direct.allows("ann") and not direct.allows("dee")
    shared = Access.of_row("ann", "project", '["bob"]')
    assert shared == Access("ann", "project", ()) and shared.allows("dee")
    private = Access.of_row("ann", "private", '["bob"]')
    assert private.to == () and not private.allows("bob") and private.allows("ann")


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_the_loops_hits_are_made_candidates_once_and_its_windows_stay_the_same(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent loop asks the same task every turn: from its third call on, hits that are the
    very records and cosines of the call before are not made into candidates again, and every
    window (and trace) is the one an engine that makes them afresh each turn assembles."""
    from contextwright import vector_source
    from contextwright.stores.memory import MemoryStore

    made: list[int] = []
    real_make = vector_source.VectorSource._make
    monkeypatch.setattr(
        vector_source.VectorSource,
        "_make",
        lambda self, hits, ctx: (made.append(len(hits)), real_make(self, hits, ctx))[1],
    )

    def loop(on: Store) -> list[str]:
        now = [1_700_000_000.0]
        e = Engine(on, embedder=HashEmbedder(), persist_traces=False, clock=lambda: now[0])
        for i in range(30):
            author = "ann" if i % 2 else "bob"
            e.add(project="p", author=author, content=f"note {i} on topic {i % 7}", id=f"n{i}")
        e.wait_for_embeddings(timeout=30)
        out = []
        for turn in range(6):
            now[0] += 60
            r = e.assemble("p", "ann", "what is the topic of the notes?", 2000, session="s1")
            trace = r.trace.to_json_dict()
            out.append(repr((r.messages, trace["item_rows"], trace["sections"], trace["tokens"])))
            if turn in (1, 3):  # a reply between two turns
                e.add(
                    project="p", author="ann", content=f"reply {turn}", session="s1", id=f"r{turn}"
                )
                e.wait_for_embeddings(timeout=30)
        e.close()
        return out

    def new_store(name: str) -> Store:
        return MemoryStore() if kind == "memory" else SQLiteStore(str(tmp_path / name))

    windows = loop(new_store("kept.db"))
    turns_made = len(made)
    monkeypatch.setattr(vector_source, "MADE_KEPT", 0)  # nothing kept: made every turn
    made.clear()
    assert loop(new_store("fresh.db")) == windows
    assert len(made) == 6 and turns_made < 6


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text(max_size=4),
            st.sampled_from(["knowledge", "suggestions", "history", "state"]),
            st.integers(0, 2),  # records
            st.floats(allow_nan=False, allow_infinity=False),
            st.dictionaries(st.sampled_from(["vector", "bm25", "relevance"]), st.floats(0, 1)),
            st.booleans(),
            st.integers(0, 500),
            st.one_of(st.none(), st.text(max_size=3)),
            st.booleans(),
        ),
        max_size=6,
    )
)
def test_frozen_candidates_thaw_into_equal_candidates_of_their_own(
    rows: list[tuple[str, str, int, float, dict[str, float], bool, int, str | None, bool]],
) -> None:
    """`thaw(freeze(cs))` gives candidates equal to `cs`, field by field (it builds them by
    position), each with a components dict of its own: the loop's vector hits (vector_source)
    and the source cache hand them to scoring, which writes into them."""
    from contextwright.assembly.candidates import Candidate, freeze, thaw
    from contextwright.records import Record

    made = [
        Candidate(
            key=f"k{i}{key}",
            section=section,
            source=f"s{i}",
            text=f"text {key}",
            records=tuple(
                Record(f"r{i}-{j}", "p", "ann", "note", f"{i}-{j}", float(j), 3, f"c{i}-{j}")
                for j in range(n)
            ),
            score=score,
            components=comps,
            reasons=(f"why {i}",),
            pinned=pinned,
            tokens=tokens,
            created_at=float(i),
            content_hash=f"h{i}",
            sources=(f"s{i}", "vector"),
            beside=beside,
            dated_line=dated,
            deep=not dated,
        )
        for i, (key, section, n, score, comps, pinned, tokens, beside, dated) in enumerate(rows)
    ]
    back = thaw(freeze(made))
    assert back == made
    assert all(a.components is not b.components for a, b in zip(back, made, strict=True))
