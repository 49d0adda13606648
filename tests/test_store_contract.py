"""One contract that every store passes, written against `ports.Store` only.

The `store` fixture (tests/conftest.py) is parametrized over every store kind; a new adapter joins
by adding itself there. The SQLite-only checks at the end (migrations table, WAL) are marked.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from contextwright import Engine, StoreError, ValidationError
from contextwright.ports import Query, Store
from contextwright.records import Record, build_record
from contextwright.stores import open_store
from contextwright.stores.sqlite import MIGRATIONS, SQLiteStore
from contextwright.tokens.counter import default_counter

T0 = 1_750_000_000.0


def rec(**fields: Any) -> Record:
    data: dict[str, Any] = {"project": "p", "author": "alice", "content": "hello", "created_at": T0}
    data.update(fields)
    return build_record(data, default_counter().count)


def seed(store: Store) -> dict[str, Record]:
    """A small project where every filter has something to find and something to skip."""
    rows = [
        rec(id="m1", content="the login flow is broken", session="s1", created_at=T0 + 1),
        rec(
            id="m2",
            author="bob",
            content="@alice I can reproduce the login bug",
            session="s1",
            created_at=T0 + 2,
        ),
        rec(
            id="d1",
            author="bob",
            content="secret plan for carol",
            visibility="direct",
            to=["carol"],
            created_at=T0 + 3,
        ),
        rec(
            id="v1",
            author="carol",
            content="my private notes on caching",
            visibility="private",
            created_at=T0 + 4,
        ),
        rec(
            id="t1",
            kind="task",
            content="fix the login bug",
            to=["bob"],
            milestone="m1",
            created_at=T0 + 5,
        ),
        rec(
            id="q1",
            author="bob",
            kind="question",
            content="which database?",
            tags=["DB"],
            created_at=T0 + 6,
        ),
        rec(id="c1", kind="constraint", content="never log tokens", pinned=True, created_at=T0 + 7),
        rec(id="x1", project="other", content="login in another project", created_at=T0 + 8),
    ]
    stored = store.add_many(rows)
    return {r.id: r for r in stored}


def ids(records: list[Record]) -> list[str]:
    return [r.id for r in records]


def test_add_and_get_round_trip(store: Store) -> None:
    r = rec(
        id="full",
        milestone="m",
        session="s",
        kind="decision",
        to=["bob"],
        visibility="direct",
        tags=["x"],
        refs=["a.py"],
        supersedes=None,
        reply_to="q",
        pinned=True,
        content="@bob decided: use WAL.",
        meta={"k": [1, "v"]},
    )
    assert store.add_many([r]) == [r]
    assert store.get_many("p", ["full"]) == [r]
    assert store.get_many("p", ["nope"]) == []
    assert store.add_many([]) == []


def test_get_many_keeps_the_order_asked(store: Store) -> None:
    seed(store)
    assert ids(store.get_many("p", ["q1", "m1", "missing", "t1"])) == ["q1", "m1", "t1"]


def test_add_is_idempotent_by_id(store: Store) -> None:
    first = rec(id="same", content="first")
    store.add_many([first])
    v = store.version("p")
    # A retry (the same write, later) gets the stored record back and writes nothing.
    again = store.add_many([rec(id="same", content="first", created_at=T0 + 9)] * 2)
    assert [(r.content, r.created_at) for r in again] == [("first", T0), ("first", T0)]
    assert store.count("p") == 1
    assert store.version("p") == v  # nothing new was written


def test_a_repeated_id_with_other_content_refuses_the_whole_batch(store: Store) -> None:
    store.add_many([rec(id="same", content="first")])
    v = store.version("p")
    with pytest.raises(ValidationError) as err:
        store.add_many([rec(id="fresh", content="new"), rec(id="same", content="second")])
    assert err.value.field == "id" and err.value.value == "same"
    assert "new id" in err.value.fix
    assert store.get_many("p", ["fresh"]) == []  # nothing of the batch
    assert store.version("p") == v
    assert [h.record.id for h in store.search_text("p", None, "second", 5)] == []
    with pytest.raises(ValidationError):  # twice in one batch, differently
        store.add_many([rec(id="twin", content="a"), rec(id="twin", content="b")])
    assert store.get_many("p", ["twin"]) == []


# -- identity is (project, id): nothing crosses projects ------------------------------------------


def two_projects(store: Store) -> tuple[Record, Record]:
    """The same ids in projects alpha and beta, with different content."""
    a = [
        rec(project="alpha", id="note-1", content="alpha secret", visibility="private"),
        rec(project="alpha", id="q-1", kind="question", content="alpha question"),
        rec(project="alpha", id="ans", content="alpha answer", reply_to="q-1"),
        rec(project="alpha", id="dec", kind="decision", content="alpha decision"),
    ]
    b = [
        rec(project="beta", id="note-1", author="eve", content="beta note"),
        rec(project="beta", id="q-1", kind="question", author="eve", content="beta question"),
    ]
    stored = store.add_many([*a, *b])
    assert [r.content for r in stored] == [r.content for r in [*a, *b]]
    return a[0], b[0]


def test_the_same_id_in_two_projects_is_two_records(store: Store) -> None:
    alpha, beta = two_projects(store)
    assert store.get_many("alpha", ["note-1"]) == [alpha]
    assert store.get_many("beta", ["note-1"]) == [beta]
    assert store.get_many("beta", ["ans", "dec"]) == []  # alpha's ids read as missing
    assert store.count("alpha") == 4 and store.count("beta") == 2
    # Writing beta's id again answers beta's record, never alpha's.
    again = store.add_many([rec(project="beta", id="note-1", author="eve", content="beta note")])
    assert again == [beta]
    # alpha's id in beta is a new record of beta: nothing says alpha has one.
    assert (
        store.add_many([rec(project="beta", id="ans", author="eve", content="x")])[0].content == "x"
    )
    with pytest.raises(ValidationError) as err:
        store.add_many([rec(project="beta", id="note-1", author="eve", content="other")])
    assert "alpha" not in str(err.value.to_dict())
    assert store.get_many("alpha", ["note-1"]) == [alpha]


def test_reads_see_only_their_project(store: Store) -> None:
    two_projects(store)
    got = store.query(Query("beta", None, limit=100))
    assert {r.content for r in got} == {"beta note", "beta question"}
    assert [h.record.content for h in store.search_text("beta", None, "alpha", 10)] == []
    assert store.replies_to("beta", ["q-1"], None) == []
    assert [r.content for r in store.replies_to("alpha", ["q-1"], None)] == ["alpha answer"]
    store.add_many([rec(project="alpha", id="dec2", kind="decision", supersedes="dec")])
    assert store.superseded_by("beta", ["dec"]) == {}
    assert store.superseded_by("alpha", ["dec"]) == {"dec": "dec2"}


def test_status_changes_stay_in_their_project(store: Store) -> None:
    two_projects(store)
    store.set_status("beta", "q-1", "resolved", "eve", T0 + 1)
    store.set_status_many("beta", ["note-1", "dec", "ans"], "compacted", "eve", T0 + 2)
    assert store.get_many("alpha", ["q-1"])[0].status == "open"
    assert store.get_many("alpha", ["note-1", "dec", "ans"])[0].status is None
    assert store.get_many("alpha", ["dec"])[0].status == "active"
    assert store.status_history("alpha", "q-1") == []
    assert store.status_history("alpha", "note-1") == []
    assert [f["status"] for f in store.status_history("beta", "q-1")] == ["resolved"]
    assert store.status_history("beta", "dec") == []  # no such record in beta: no fact
    v = store.version("alpha")
    store.set_status("beta", "dec", "resolved", "eve", T0 + 3)
    assert store.version("alpha") == v


def test_supersedes_marks_only_the_writers_project(store: Store) -> None:
    two_projects(store)
    # A store given a link across projects (the engine refuses it first) changes nothing there.
    store.add_many([rec(project="beta", id="b-dec", kind="decision", supersedes="dec")])
    assert store.get_many("alpha", ["dec"])[0].status == "active"
    assert store.status_history("alpha", "dec") == []
    assert store.edges("alpha", dst="dec") == []
    assert store.superseded_by("alpha", ["dec"]) == {}


def test_edges_kv_and_docs_stay_in_their_project(store: Store) -> None:
    two_projects(store)
    store.add_edges("alpha", [("note-1", "q-1", "about")])
    assert store.edges("beta", src="note-1") == []
    store.kv_set("alpha", "k", "alpha value", T0)
    assert store.kv_get("beta", "k") is None and store.kv_list("beta") == {}
    store.put_doc("agents", "d1", "alpha", {"owner": "alpha"}, T0)
    assert store.get_doc("agents", "beta", "d1") is None
    store.put_doc("agents", "d1", "beta", {"owner": "beta"}, T0 + 1)  # changes nothing
    assert store.get_doc("agents", "alpha", "d1") == {"owner": "alpha"}
    assert store.get_doc("agents", "beta", "d1") is None
    assert store.list_docs("agents", "beta") == []


def test_vectors_stay_in_their_project(store: Store) -> None:
    np = pytest.importorskip("numpy")
    from contextwright.ports import VectorStore

    if not all(hasattr(store, m) for m in ("put_vectors", "vector_search", "unembedded")):
        pytest.skip("this store keeps no vectors")
    vs: VectorStore = store  # type: ignore[assignment]
    two_projects(store)
    v = np.ones(8, dtype=np.float32) / np.sqrt(8)
    vs.put_vectors("m", [("beta", "dec", v), ("alpha", "dec", v)])  # beta has no "dec"
    assert [h.record.content for h in vs.vector_search("alpha", None, v, 5, "m")] == [
        "alpha decision"
    ]
    assert vs.vector_search("beta", None, v, 5, "m") == []
    vs.put_vectors("m", [("beta", "note-1", v)])
    found = vs.vector_search("beta", None, v, 5, "m")
    assert [(h.record.project, h.record.content) for h in found] == [("beta", "beta note")]


def test_count_projects_agents(store: Store) -> None:
    seed(store)
    assert store.count() == 8
    assert store.count("p") == 7
    assert store.count("nobody") == 0
    assert store.projects() == ["other", "p"]
    assert store.agents("p") == ["alice", "bob", "carol"]


def test_query_orders_by_time_and_limits(store: Store) -> None:
    seed(store)
    newest = store.query(Query("p", None, limit=3))
    assert ids(newest) == ["c1", "q1", "t1"]
    oldest = store.query(Query("p", None, limit=2, newest_first=False))
    assert ids(oldest) == ["m1", "m2"]


def test_same_timestamp_orders_by_insertion(store: Store) -> None:
    store.add_many([rec(id=f"z{i}", content=f"n {i}") for i in (3, 1, 2)])
    assert ids(store.query(Query("p", None, newest_first=False))) == ["z3", "z1", "z2"]
    assert ids(store.query(Query("p", None))) == ["z2", "z1", "z3"]


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"kinds": ("task", "question")}, ["q1", "t1"]),
        ({"kinds": ()}, []),
        ({"session": "s1"}, ["m2", "m1"]),
        ({"author": "bob"}, ["q1", "d1", "m2"]),
        ({"statuses": ("open",)}, ["q1", "t1"]),
        ({"addressed_to": "bob"}, ["t1"]),
        ({"addressed_to": "alice"}, ["m2"]),
        ({"pinned": True}, ["c1"]),
        ({"tag": "db"}, ["q1"]),
        ({"milestone": "m1"}, ["t1"]),
        ({"since": T0 + 6}, ["c1", "q1"]),
        ({"before": T0 + 2}, ["m1"]),
        ({"since": T0 + 2, "before": T0 + 4, "author": "bob"}, ["d1", "m2"]),
    ],
)
def test_query_filters(store: Store, filters: dict[str, Any], expected: list[str]) -> None:
    seed(store)
    assert ids(store.query(Query("p", None, **filters))) == expected


@pytest.mark.parametrize(
    ("agent", "sees", "never"),
    [
        ("alice", {"m1", "m2", "t1", "q1", "c1"}, {"d1", "v1"}),
        ("bob", {"m1", "m2", "d1", "t1", "q1", "c1"}, {"v1"}),  # bob wrote d1
        ("carol", {"m1", "m2", "d1", "v1", "t1", "q1", "c1"}, set()),  # d1 is to carol; v1 hers
        ("dave", {"m1", "m2", "t1", "q1", "c1"}, {"d1", "v1"}),
    ],
)
def test_visibility_on_every_read(
    store: Store, agent: str, sees: set[str], never: set[str]
) -> None:
    seed(store)
    assert set(ids(store.query(Query("p", agent, limit=100)))) == sees
    words = "login bug secret plan private notes caching database tokens"
    found = {h.record.id for h in store.search_text("p", agent, words, 50)}
    assert found and not found & never
    replies = store.replies_to("p", ["anything"], agent)
    assert not {r.id for r in replies} & never


def test_search_text_ranks_matches_and_stays_in_the_project(store: Store) -> None:
    seed(store)
    hits = store.search_text("p", None, "login bug", 10)
    assert hits and {h.record.id for h in hits} <= {"m1", "m2", "t1"}
    assert hits[0].record.id in ("m2", "t1")  # both words match
    assert all(h.score > 0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert "x1" not in {h.record.id for h in hits}
    assert store.search_text("p", None, "zebra", 10) == []
    assert store.search_text("p", None, "the and of", 10) == []  # stopwords only
    assert store.search_text("p", None, "", 10) == []
    assert len(store.search_text("p", None, "login", 1)) == 1


def test_search_text_finds_a_project_crowded_out_by_others(store: Store) -> None:
    """Another project with many better matches must not push this project's match out."""
    noisy = [
        rec(id=f"n{i:03d}", project="noisy", content=f"login login login bug {i}")
        for i in range(400)
    ]
    store.add_many(
        [*noisy, rec(id="quiet", project="q", content="a long note that mentions login once")]
    )
    hits = store.search_text("q", None, "login bug", 5)
    assert [h.record.id for h in hits] == ["quiet"]


def test_search_text_survives_query_syntax(store: Store) -> None:
    seed(store)
    for text in [
        '"login',
        "login AND OR NOT",
        "login*",
        "(bug",
        "col:login",
        "'; DROP TABLE records; --",
    ]:
        hits = store.search_text("p", None, text, 5)
        assert all(h.record.project == "p" for h in hits)
    assert store.count() == 8


def test_status_facts_are_appended(store: Store) -> None:
    seed(store)
    v = store.version("p")
    store.set_status("p", "q1", "resolved", "alice", T0 + 10, "postgres")
    store.set_status("p", "q1", "open", "bob", T0 + 11)
    assert store.version("p") > v
    assert store.get_many("p", ["q1"])[0].status == "open"
    assert store.status_history("p", "q1") == [
        {"status": "resolved", "by": "alice", "at": T0 + 10, "note": "postgres"},
        {"status": "open", "by": "bob", "at": T0 + 11, "note": ""},
    ]
    store.set_status("p", "q1", "resolved", "alice", T0 + 12)
    assert ids(store.query(Query("p", None, statuses=("open",)))) == ["t1"]
    assert ids(store.query(Query("p", None, statuses=("resolved",)))) == ["q1"]
    assert store.status_history("p", "m1") == []
    store.set_status("p", "missing", "resolved", "a", T0)  # no record: no fact
    assert store.status_history("p", "missing") == []


def test_status_for_many_records_is_one_write(store: Store) -> None:
    seed(store)
    v = store.version("p")
    store.set_status_many(
        "p", ["m1", "m2", "missing", "m1"], "compacted", "cw", T0 + 20, "summary s"
    )
    assert store.version("p") == v + 1
    assert [r.status for r in store.get_many("p", ["m1", "m2"])] == ["compacted", "compacted"]
    assert store.status_history("p", "m1") == [
        {"status": "compacted", "by": "cw", "at": T0 + 20, "note": "summary s"}
    ]
    assert store.status_history("p", "missing") == []
    store.set_status_many("p", [], "resolved", "cw", T0 + 21)
    assert store.version("p") == v + 1


def test_supersedes(store: Store) -> None:
    old = rec(id="old", kind="decision", content="use mysql", created_at=T0)
    store.add_many([old])
    new = rec(
        id="new",
        author="bob",
        kind="decision",
        content="use postgres",
        supersedes="old",
        created_at=T0 + 5,
    )
    newer = rec(
        id="newer", kind="decision", content="use sqlite", supersedes="old", created_at=T0 + 9
    )
    store.add_many([new, newer])
    assert store.get_many("p", ["old"])[0].status == "superseded"
    assert store.status_history("p", "old")[0] == {
        "status": "superseded",
        "by": "bob",
        "at": T0 + 5,
        "note": "by new",
    }
    assert store.superseded_by("p", ["old", "new"]) == {"old": "newer"}
    assert store.superseded_by("p", []) == {}
    assert ("new", "old", "supersedes") in store.edges("p", kind="supersedes")
    active = store.query(Query("p", None, kinds=("decision",), statuses=("active",)))
    assert ids(active) == ["newer", "new"]


def test_supersedes_a_record_later_in_the_same_batch(store: Store) -> None:
    store.add_many(
        [
            rec(id="b", kind="decision", content="use b", supersedes="a", created_at=T0 + 1),
            rec(id="a", kind="decision", content="use a", created_at=T0),
        ]
    )
    assert store.get_many("p", ["a"])[0].status == "superseded"
    assert [f["status"] for f in store.status_history("p", "a")] == ["superseded"]


def test_replies(store: Store) -> None:
    seed(store)
    store.add_many(
        [
            rec(id="a1", author="bob", content="postgres", reply_to="q1", created_at=T0 + 20),
            rec(
                id="a2",
                author="carol",
                content="secret answer",
                reply_to="q1",
                visibility="private",
                created_at=T0 + 21,
            ),
            rec(id="a3", author="dave", content="also mysql", reply_to="t1", created_at=T0 + 19),
        ]
    )
    assert ids(store.replies_to("p", ["q1"], None)) == ["a1", "a2"]
    assert ids(store.replies_to("p", ["q1"], "alice")) == ["a1"]
    # In insertion order, not by created_at: a3 says it is older, but was stored last.
    assert ids(store.replies_to("p", ["q1", "t1"], "carol")) == ["a1", "a2", "a3"]
    assert store.replies_to("p", [], None) == []


def test_edges(store: Store) -> None:
    v = store.version("p")
    store.add_edges(
        "p", [("t1", "t0", "depends_on"), ("t1", "auth", "touches"), ("t2", "t1", "depends_on")]
    )
    store.add_edges("p", [("t1", "t0", "depends_on")])  # a duplicate is ignored
    store.add_edges("q", [("t1", "zz", "depends_on")])
    assert store.version("p") > v
    assert store.edges("p", src="t1") == [("t1", "t0", "depends_on"), ("t1", "auth", "touches")]
    assert store.edges("p", dst="t1") == [("t2", "t1", "depends_on")]
    assert store.edges("p", kind="touches") == [("t1", "auth", "touches")]
    assert len(store.edges("p")) == 3
    assert store.edges("q") == [("t1", "zz", "depends_on")]
    before = store.version("p")
    store.add_edges("p", [])
    assert store.version("p") == before


def test_kv(store: Store) -> None:
    assert store.kv_get("p", "deploy") is None
    v = store.version("p")
    store.kv_set("p", "deploy", "staging", T0)
    store.kv_set("p", "deploy", "prod", T0 + 1)
    store.kv_set("p", "db.url", "sqlite", T0)
    store.kv_set("q", "deploy", "other", T0)
    assert store.version("p") > v
    assert store.kv_get("p", "deploy") == "prod"
    assert store.kv_list("p") == {"db.url": "sqlite", "deploy": "prod"}
    assert store.kv_list("p", prefix="db.") == {"db.url": "sqlite"}
    assert store.kv_list("p", prefix="%") == {}  # a prefix, not a pattern


def test_docs(store: Store) -> None:
    assert store.get_doc("traces", "p", "t1") is None
    store.put_doc("traces", "t1", "p", {"n": 1, "items": [{"a": "b"}]}, T0, key="bob")
    store.put_doc("traces", "t2", "p", {"n": 2}, T0 + 1, key="alice")
    store.put_doc("traces", "t3", "p", {"n": 3}, T0 + 2, key="bob")
    store.put_doc("traces", "t4", "q", {"n": 4}, T0 + 3, key="bob")
    store.put_doc("agents", "t1", "p", {"n": 9}, T0)
    assert store.get_doc("traces", "p", "t1") == {"n": 1, "items": [{"a": "b"}]}
    doc = store.get_doc("traces", "p", "t1")
    assert doc is not None
    doc["n"] = 100  # a returned document is a copy
    assert store.get_doc("traces", "p", "t1") == {"n": 1, "items": [{"a": "b"}]}
    assert [d["n"] for d in store.list_docs("traces", "p")] == [3, 2, 1]
    assert [d["n"] for d in store.list_docs("traces", "p", key="bob")] == [3, 1]
    assert [d["n"] for d in store.list_docs("traces", "p", limit=1)] == [3]
    store.put_doc("traces", "t1", "p", {"n": 10}, T0 + 5, key="bob")
    assert store.get_doc("traces", "p", "t1") == {"n": 10}
    assert [d["n"] for d in store.list_docs("traces", "p")] == [10, 3, 2]


def test_version_increases_with_every_write(store: Store) -> None:
    assert store.version("p") == 0
    seen = [store.version("p")]
    store.add_many([rec(id="a")])
    seen.append(store.version("p"))
    store.set_status("p", "a", "resolved", "x", T0)
    seen.append(store.version("p"))
    store.kv_set("p", "k", "v", T0)
    seen.append(store.version("p"))
    store.add_edges("p", [("a", "b", "c")])
    seen.append(store.version("p"))
    assert seen == sorted(set(seen))
    other = store.version("other")
    store.add_many([rec(id="b", project="p")])
    assert store.version("other") == other


def test_a_bad_batch_stores_nothing(store: Store) -> None:
    engine = Engine(store, workers=1)
    engine.add(project="p", author="a", content="already here", id="keep")
    before = (store.count(), store.version("p"), store.query(Query("p", None, limit=100)))
    good = {"project": "p", "author": "a", "content": "good"}
    with pytest.raises(ValidationError) as info:
        engine.add_many([good, dict(good, id="g2"), {"project": "p", "author": "a", "content": ""}])
    assert info.value.field == "records[2].content"
    assert (store.count(), store.version("p"), store.query(Query("p", None, limit=100))) == before


def test_reopening_a_file_keeps_everything(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'team.db'}"
    s = open_store(url)
    seed(s)
    s.kv_set("p", "k", "v", T0)
    s.close()
    again = open_store(url)
    try:
        assert again.count() == 8
        assert again.kv_get("p", "k") == "v"
        assert [h.record.id for h in again.search_text("p", None, "caching", 5)] == ["v1"]
    finally:
        again.close()


# -- SQLite only -----------------------------------------------------------------------------------


def test_sqlite_records_its_migrations_once(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    s = SQLiteStore(str(path))
    assert s.applied_migrations() == [name for name, _ in MIGRATIONS]
    s.close()
    s = SQLiteStore(str(path))  # opening again applies nothing twice
    assert s.applied_migrations() == [name for name, _ in MIGRATIONS]
    s.close()
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT name, applied_at FROM migrations").fetchall()
    conn.close()
    assert [r[0] for r in rows] == [name for name, _ in MIGRATIONS]
    assert all(r[1] for r in rows)


def test_sqlite_a_new_migration_is_applied_and_recorded(tmp_path: Path) -> None:
    path = str(tmp_path / "m.db")
    SQLiteStore(path).close()
    extra = [*MIGRATIONS, ("m999_test_column", "CREATE TABLE test_extra (x INTEGER);")]
    s = SQLiteStore(path, migrations=extra)
    assert s.applied_migrations()[-1] == "m999_test_column"
    s.close()


def test_sqlite_refuses_a_file_a_newer_version_migrated(tmp_path: Path) -> None:
    # Its writes would miss what the newer migration changed (as m007's triggers write rows
    # that an older writer would write a second time).
    path = str(tmp_path / "m.db")
    SQLiteStore(path, migrations=[*MIGRATIONS, ("m999_future", "CREATE TABLE f (x);")]).close()
    with pytest.raises(StoreError, match="m999_future unknown here"):
        SQLiteStore(path)
    s = SQLiteStore(path, migrations=[*MIGRATIONS, ("m999_future", "")])  # a version that knows it
    assert s.applied_migrations()[-1] == "m999_future"
    s.close()


def test_sqlite_a_failing_migration_is_rolled_back(tmp_path: Path) -> None:
    path = str(tmp_path / "m.db")
    bad = [*MIGRATIONS, ("m999_bad", "CREATE TABLE ok_part (x); CREATE TABLE records (x);")]
    with pytest.raises(StoreError):
        SQLiteStore(path, migrations=bad)
    s = SQLiteStore(path)
    assert "m999_bad" not in s.applied_migrations()
    conn = sqlite3.connect(path)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    conn.close()
    assert "ok_part" not in tables
    s.close()


def test_sqlite_uses_wal(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    s = SQLiteStore(str(path))
    s.add_many([rec(id="a")])
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    s.close()


def test_sqlite_reads_through_mmap_unless_told_not_to(tmp_path: Path) -> None:
    """Every connection that reads records maps the file (`mmap_mb`, 1 GB by default); 0 turns
    it off; either way the reads are the same."""
    path = str(tmp_path / "m.db")
    mapped = SQLiteStore(path)
    mapped.add_many([rec(id=f"a{i}", content=f"mapped read {i}") for i in range(50)])
    assert mapped._conn().execute("PRAGMA mmap_size").fetchone()[0] == 1024 << 20
    plain = SQLiteStore(path, mmap_mb=0)
    assert plain._conn().execute("PRAGMA mmap_size").fetchone()[0] == 0
    small = SQLiteStore(path, mmap_mb=8)
    assert small._conn().execute("PRAGMA mmap_size").fetchone()[0] == 8 << 20
    for q in (Query("p", "bob", limit=20), Query("p", None, newest_first=False, limit=7)):
        assert mapped.query(q) == plain.query(q) == small.query(q)
    assert [h.record.id for h in mapped.search_text("p", "bob", "read", 10)] == [
        h.record.id for h in plain.search_text("p", "bob", "read", 10)
    ]
    for s in (mapped, plain, small):
        s.close()


@pytest.mark.parametrize("bad", [-1, 65537, 1.5, "256", True, None])
def test_sqlite_rejects_a_bad_mmap_size(tmp_path: Path, bad: Any) -> None:
    path = tmp_path / "bad.db"
    with pytest.raises(ValidationError) as err:
        SQLiteStore(str(path), mmap_mb=bad)
    assert err.value.field == "mmap_mb" and "0 to 65536" in str(err.value)
    assert not path.exists()  # nothing was opened or made


def test_sqlite_a_file_of_the_old_schema_migrates_to_project_scoped_identity(
    tmp_path: Path,
) -> None:
    """m006_record_identity rebuilds the records table of a file made by the migrations before
    it, with data: every row keeps its rid, so full text, tags, addressing and status read back."""
    path = str(tmp_path / "old.db")
    old = [m for m in MIGRATIONS if m[0] < "m006"]
    assert [n for n, _ in old][-1] == "m005_addressed_by_time"
    s = SQLiteStore(path, migrations=old)
    conn = s._conn()
    # Written as the old code wrote: ids unique over the file, facts without a project.
    s.add_many(
        [
            rec(project="alpha", id="q-1", kind="question", content="which database engine"),
            rec(project="alpha", id="m-1", content="@bob sqlite for now", to=["bob"], tags=["db"]),
            rec(project="alpha", id="d-1", kind="decision", content="use sqlite"),
        ]
    )
    conn.execute(
        "INSERT INTO status_facts (record_id, status, by, at, note) "
        "VALUES ('q-1', 'resolved', 'alice', 1.0, '')"
    )
    conn.execute("UPDATE records SET current_status = 'resolved' WHERE id = 'q-1'")
    rids = dict(conn.execute("SELECT id, rid FROM records").fetchall())
    s.close()

    s = SQLiteStore(path)
    try:
        assert s.applied_migrations()[len(old)] == "m006_record_identity"
        conn = s._conn()
        assert dict(conn.execute("SELECT id, rid FROM records").fetchall()) == rids
        assert [r.status for r in s.get_many("alpha", ["q-1"])] == ["resolved"]
        assert [f["status"] for f in s.status_history("alpha", "q-1")] == ["resolved"]
        assert [h.record.id for h in s.search_text("alpha", None, "database", 5)] == ["q-1"]
        assert [r.id for r in s.query(Query("alpha", "bob", addressed_to="bob"))] == ["m-1"]
        assert [r.id for r in s.query(Query("alpha", None, tag="db"))] == ["m-1"]
        # The same ids in another project are other records now.
        s.add_many([rec(project="beta", id="q-1", content="beta words", author="eve")])
        assert s.get_many("beta", ["q-1"])[0].content == "beta words"
        assert s.get_many("alpha", ["q-1"])[0].content == "which database engine"
        assert s.status_history("beta", "q-1") == []
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.execute("INSERT INTO records_fts(records_fts) VALUES ('integrity-check')")
    finally:
        s.close()
