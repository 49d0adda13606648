"""The fast paths of the assemble hot path give the same answers as the plain ones.

SQLite answers some reads with shapes chosen for speed (one index range per kind, a time-ordered
addressing table, a literal for pinned rows, a common-word cutoff in full text), and long texts are
counted line by line through the token cache. The memory store and a direct tiktoken count are the
references here."""

from __future__ import annotations

import gc
import random
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright import Engine
from contextwright.ports import Query
from contextwright.records import build_record
from contextwright.stores import open_store, sqlite_text
from contextwright.stores.sqlite import COMMON_DF, SQLiteStore
from contextwright.stores.sqlite_vocab import Vocabulary
from contextwright.text import query_terms
from contextwright.tokens.counter import _LINE_START, default_counter, split_lines

AGENTS = ["ann", "bob", "cy"]
KINDS = ["message", "note", "constraint", "state", "decision", "task"]


def _records(seed: int, n: int) -> list[dict[str, object]]:
    rng = random.Random(seed)
    out: list[dict[str, object]] = []
    for i in range(n):
        vis = rng.choice(["project", "project", "direct", "private"])
        to = rng.sample(AGENTS, rng.randint(1 if vis == "direct" else 0, 2))
        mention = f" @{rng.choice(AGENTS)}" if rng.random() < 0.3 else ""
        out.append(
            {
                "id": f"r{i:04d}",
                "project": "p",
                "author": rng.choice(AGENTS),
                "kind": rng.choice(KINDS),
                "content": f"item {i} about {rng.choice(['auth', 'billing', 'search'])}{mention}",
                "to": to,
                "visibility": vis,
                "pinned": rng.random() < 0.2,
                "session": rng.choice(["s1", "s2"]),
                # Out of insertion order, with ties: the order must come from created_at, then id.
                "created_at": 1_700_000_000.0 + rng.randint(0, 40) * 60,
            }
        )
    return out


def _ids(rs: list[object]) -> list[str]:
    return [r.id for r in rs]  # type: ignore[attr-defined]


QUERIES = [
    {"kinds": ("constraint", "state")},
    {"kinds": ("constraint", "state", "constraint")},  # a kind named twice counts once
    {"kinds": ("message", "note", "decision"), "newest_first": False},
    {"kinds": ("constraint", "state"), "since": 1_700_000_600.0},
    {"pinned": True},
    {"pinned": False, "limit": 7},
    {"addressed_to": "bob"},
    {"addressed_to": "ann", "kinds": ("message", "note"), "limit": 5},
    {"addressed_to": "cy", "newest_first": False, "limit": 9},
    {"kinds": ("task", "decision"), "statuses": ("open", "active")},
    {"kinds": ("task", "note"), "statuses": ("open",), "newest_first": False, "limit": 3},
]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 60))
def test_sqlite_reads_match_the_memory_store(tmp_path_factory: object, seed: int, n: int) -> None:
    path = Path(tmp_path_factory.mktemp("hot")) / "s.db"  # type: ignore[attr-defined]
    sqlite, memory = open_store(f"sqlite:///{path}"), open_store("memory://")
    try:
        counter = default_counter()
        records = [build_record(r, counter.count) for r in _records(seed, n)]
        sqlite.add_many(records)
        memory.add_many(records)
        for agent in [*AGENTS, None]:
            for extra in QUERIES:
                args = {"limit": 12, **extra}
                q = Query("p", agent, **args)  # type: ignore[arg-type]
                assert _ids(sqlite.query(q)) == _ids(memory.query(q)), (agent, extra)
    finally:
        sqlite.close()
        memory.close()


def test_records_added_after_the_migration_are_addressed_in_time_order(tmp_path: Path) -> None:
    with Engine.open(f"sqlite:///{tmp_path / 'a.db'}") as engine:
        engine.add(project="p", author="ann", content="late @bob", created_at=300.0, id="late")
        engine.add(project="p", author="ann", content="early @bob", created_at=100.0, id="early")
        engine.add(project="p", author="cy", content="mid", to=["bob"], created_at=200.0, id="mid")
        got = engine.records("p", agent="bob", addressed_to="bob")
        assert [r.id for r in got] == ["late", "mid", "early"]


def test_full_text_on_a_large_store_still_finds_the_rare_word(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above COMMON_DF records, common words leave the query; the rare one still finds its record,
    old as it is, among many newer matches of the common words."""
    with Engine.open(f"sqlite:///{tmp_path / 'big.db'}") as engine:
        _large_store(engine)
        hits = engine.store.search_text("p", "bob", "fix the login page PKCE flow", 10)
        # As in Lucene's common-terms query: records with only the common words are not returned
        # while a rarer word is in the query.
        assert [h.record.content for h in hits] == [
            "The PKCE flow replaces implicit grants for the login page."
        ]
        hits_common = engine.store.search_text("p", "bob", "login page tweak", 5)
        assert len(hits_common) == 5  # only common words: the rarest is kept, so it still answers
        # Words are counted only as far as COMMON_DF + 1, or in full when all of them are common:
        # the same words are kept as with every count in full.
        store = engine.store
        store._vocabulary.wait()
        store._vocabulary = Vocabulary(store.path)  # words counted one by one (no read at once)
        store._vocabulary._asked = 10**9
        expectations: dict[str, str] = {}
        for task in TASKS:
            expected = _selective_in_full(store, task)
            assert store._selective_match(query_terms(task)) == expected, task
            expectations[task] = expected
        # The counts kept are bounded: past the bound the cache starts again, and answers the same.
        monkeypatch.setattr(sqlite_text, "WORD_COUNTS_KEPT", 2)
        engine.store._df.clear()
        for task, expected in expectations.items():
            assert engine.store._selective_match(query_terms(task)) == expected, task
            assert len(engine.store._df) <= 2


TASKS = [
    "fix the login page PKCE flow",
    "login page tweak",
    "number 12 tweak",
    "zzz",
    "tweaked pages",
]


def _selective_in_full(store: SQLiteStore, task: str) -> str:
    """The words `_selective_match` keeps, from every word's count in full."""
    terms = query_terms(task)
    conn = store._conn()
    counts = {
        t: conn.execute(
            "SELECT count(*) FROM records_fts WHERE records_fts MATCH ?", (f'content:"{t}"',)
        ).fetchone()[0]
        for t in terms
    }
    keep = [t for t in terms if 0 < counts[t] <= COMMON_DF]
    found = [t for t in terms if counts[t]]
    keep = keep or [min(found, key=lambda t: counts[t])] if found else terms
    return " OR ".join(f'"{t}"' for t in keep)


def _large_store(engine: Engine) -> None:
    engine.add(
        project="p",
        author="ann",
        kind="decision",
        content="The PKCE flow replaces implicit grants for the login page.",
        created_at=1_000.0,
    )
    filler = [
        {
            "project": "p",
            "author": "bob",
            "content": f"login page tweak number {i} for the login flow",
            "created_at": 2_000.0 + i,
        }
        for i in range(COMMON_DF + 300)
    ]
    engine.add_many(filler)


def test_word_counts_read_at_once_keep_the_same_words(tmp_path: Path) -> None:
    """The index's word counts, read at once (sqlite_vocab.py), leave out of the query the same
    words as the word-by-word counts, without a statement per word it knows; a word new since
    the read is counted, so a record written after it is still found by its rare word."""
    with Engine.open(f"sqlite:///{tmp_path / 'big.db'}") as engine:
        _large_store(engine)
        store = engine.store
        store._vocabulary.read()
        counted: list[str] = []
        conn = store._conn()
        conn.set_trace_callback(lambda sql: counted.append(sql) if "count(*)" in sql else None)
        store._df.clear()
        for task in TASKS:
            assert store._selective_match(query_terms(task)) == _selective_in_full(store, task)
        conn.set_trace_callback(None)
        # Only the words the read does not know were counted one by one: those in 20 records or
        # fewer ("pkce", "fix", "12", "zzz"), never the common ones ("login", "tweak", "page").
        assert store._df and {w for w, _ in store._df} <= {"fix", "pkce", "12", "zzz"}
        assert store._vocabulary.known(["login", "tweaked", "pages", "pkce"], COMMON_DF + 301) == {
            "login": COMMON_DF + 301,
            "tweaked": COMMON_DF + 300,  # by its stem, as FTS5 matches it
            "pages": COMMON_DF + 301,
        }
        engine.add(project="p", author="ann", content="Rotate the zyxwq signing key of the login")
        assert store._selective_match(["login", "zyxwq"]) == '"zyxwq"'
        hits = store.search_text("p", "bob", "login zyxwq", 5)
        assert [h.record.content for h in hits] == ["Rotate the zyxwq signing key of the login"]


def test_word_counts_are_read_again_once_the_store_has_grown(tmp_path: Path) -> None:
    with Engine.open(f"sqlite:///{tmp_path / 'big.db'}") as engine:
        _large_store(engine)
        vocab = engine.store._vocabulary
        top = COMMON_DF + 301
        assert vocab.known(["login"], top) == {}  # nothing read yet: a read starts
        engine.flush()  # waits for it, as for the traces
        assert vocab.known(["login"], top) == {"login": top}
        more = [{"project": "p", "author": "bob", "content": f"login {i}"} for i in range(500)]
        engine.add_many(more)
        assert vocab.known(["login"], top + 500) == {}  # outgrown: read again
        vocab.wait()
        assert vocab.known(["login"], top + 500) == {"login": top + 500}


def test_word_counts_of_a_missing_file_are_never_read_nor_retried(tmp_path: Path) -> None:
    path = tmp_path / "gone.db"
    vocab = Vocabulary(str(path))
    assert vocab.known(["login"], 5_000) == {}
    first = vocab._thread
    vocab.wait()
    assert not path.exists()  # the read never creates a file
    assert vocab.known(["login"], 5_000) == {} and vocab._thread is first  # not tried again
    assert vocab.known(["login"], 7_000) == {} and vocab._thread is not first  # grown: again
    vocab.wait()


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "\n",
                "\n\n",
                " ",
                "  ",
                "\t",
                "\r\n",
                "word",
                "'s",
                "-",
                "## ",
                "[x]",
                "1234",
                "é",
                "日本",
                ".",
                "\u00a0",
                "\x85",
                "\u2028",
                ".\n",
                "`",
                "\x1c",
                "Ab",
            ]
        ),
        min_size=60,
        max_size=400,
    )
)
def test_long_texts_are_counted_exactly(parts: list[str]) -> None:
    counter = default_counter()
    text = "".join(parts)
    assert counter.count(text) == len(counter.encode(text))
    assert split_lines(text) == _LINE_START.split(text)


def test_a_status_change_is_seen_through_the_record_cache(tmp_path: Path) -> None:
    """Reads decode each row once and keep the record; the status, the one thing that changes,
    always comes from the read itself. Another store on the same file stands for another
    process."""
    path = str(tmp_path / "c.db")
    cached, other, fresh = SQLiteStore(path), SQLiteStore(path), SQLiteStore(path, record_cache=0)
    try:
        counter = default_counter()
        records = [build_record(r, counter.count) for r in _records(7, 40)]
        cached.add_many(records)
        q = Query("p", "ann", kinds=("task", "note", "message"), limit=40)
        first = cached.query(q)
        assert len(cached.records) >= len(first) > 0
        task = next(r for r in first if r.kind == "task")
        other.set_status(task.project, task.id, "resolved", "bob", 1.0)
        again = {r.id: r for r in cached.query(q)}
        assert again[task.id].status == "resolved"
        assert cached.query(q) == fresh.query(q)
        assert cached.get_many(task.project, [task.id]) == fresh.get_many(task.project, [task.id])
        open_tasks = Query("p", "ann", kinds=("task",), statuses=("open",), limit=40)
        assert task.id not in _ids(cached.query(open_tasks))  # type: ignore[arg-type]
    finally:
        for s in (cached, other, fresh):
            s.close()


def test_the_record_cache_is_bounded_and_drops_the_oldest_first(tmp_path: Path) -> None:
    """Past its size the cache drops its oldest tenth; a status change replaces the cached
    record, and a record read again is the same Record (the hot ones are kept as Records)."""
    path = str(tmp_path / "bounded.db")
    store = SQLiteStore(path, record_cache=30)
    try:
        counter = default_counter()
        store.add_many([build_record(r, counter.count) for r in _records(11, 60)])
        store.get_many("p", ["r0000"])

        def held() -> set[str]:
            return {v[0] for v in store.records._by_rid.values()}

        assert "r0000" in held()
        # Reading the rest fills the cache past its size: the oldest tenth, r0000 first, goes.
        rest = store.get_many("p", [f"r{i:04d}" for i in range(1, 60)])
        assert len(rest) == 59 and len(store.records) <= 30
        assert "r0000" not in held() and "r0059" in held()
        store.set_status("p", "r0059", "resolved", "bob", 1.0)
        (changed,) = store.get_many("p", ["r0059"])
        assert changed.status == "resolved"
        assert store.get_many("p", ["r0059"])[0] is changed  # the cache holds the new one
    finally:
        store.close()


@pytest.mark.skipif(sys.implementation.name != "cpython", reason="CPython's cyclic GC")
def test_the_record_cache_holds_nothing_the_gc_tracks(tmp_path: Path) -> None:
    """The cache keeps field values, not Records: a tuple of strings, numbers and tuples of strings
    is dropped from the cyclic GC's lists, so a full cache adds nothing to a full collection
    (a cached Record is tracked for good). The latest reads' Records are kept too, a bounded few,
    and a record read again while among them is the same Record."""
    path = str(tmp_path / "gc.db")
    store = SQLiteStore(path, record_cache=100)
    store.records.hot = 10
    try:
        counter = default_counter()
        store.add_many([build_record(r, counter.count) for r in _records(5, 60)])
        ids = [f"r{i:04d}" for i in range(60)]
        first = store.get_many("p", ids)
        assert len(store.records) == 60 and 0 < len(store.records._hot) <= 10
        again = store.get_many("p", ids[:40])  # gone from the hot few: made from the values
        assert again == first[:40]
        assert all(
            a.meta == b.meta and a.meta is not b.meta
            for a, b in zip(first[:40], again, strict=True)
        )
        assert store.get_many("p", ids[39:40])[0] is again[39]  # hot: the same Record
        gc.collect()
        assert not any(gc.is_tracked(v) for v in store.records._by_rid.values())
    finally:
        store.close()


def test_full_text_of_a_one_project_store_equals_the_general_search(tmp_path: Path) -> None:
    """A store of one project ranks its full-text window without reading every matching row;
    once a second project exists, the general query runs. Both give the same hits and scores, for
    every agent, private and direct records included."""
    rng = random.Random(5)
    vis = ["project", "project", "direct", "private"]
    with Engine.open(f"sqlite:///{tmp_path / 'one.db'}") as engine:
        engine.add_many(
            {
                "project": "p",
                "author": rng.choice(AGENTS),
                "content": f"login page {rng.choice(['tweak', 'bug', 'flow'])} {i} "
                f"{rng.choice(['pkce', 'oauth', 'saml', 'cookie'])}",
                "visibility": (v := rng.choice(vis)),
                "to": [rng.choice(AGENTS)] if v == "direct" else [],
                "created_at": 1_000.0 + i,
            }
            for i in range(COMMON_DF + 300)
        )
        store = engine.store
        tasks = ["login pkce", "the oauth bug", "saml flow cookie", "page tweak"]

        def hits() -> list[object]:
            return [
                [(h.record.id, h.score) for h in store.search_text("p", agent, task, limit)]
                for task in tasks
                for agent in [*AGENTS, "zed", None]
                for limit in (5, 40)
            ]

        one_project = hits()
        engine.kv_set(
            "q", "k", "v"
        )  # a second project, and not a row more to rank (bm25 counts them)
        assert hits() == one_project
        assert any(one_project)
