"""The SQLite store keeps traces in a file of their own (stores/sqlite_docs.py), so that writing a
trace leaves the connections that read records their page cache."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

from contextwright import Engine, Record
from contextwright.records import build_record
from contextwright.stores.sqlite import SQLiteStore, store_files, traces_path
from contextwright.stores.sqlite_docs import DOCS_TABLE
from contextwright.tokens.counter import default_counter

T0 = 1_700_000_000.0


def _record(rid: str, content: str) -> Record:
    fields = {"id": rid, "project": "p", "author": "bob", "kind": "message", "content": content}
    return build_record(fields, default_counter().count, now=T0)


def _data_version(store: SQLiteStore) -> int:
    """SQLite's count of commits to the file by other connections, as the calling thread's
    connection sees it: when it moves, that connection's page cache was dropped."""
    return int(store._conn().execute("PRAGMA data_version").fetchone()[0])


def _on_another_thread(fn: object) -> None:
    t = threading.Thread(target=fn)  # type: ignore[arg-type]
    t.start()
    t.join()


def _rows(path: str, collection: str) -> list[tuple[str, str]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(
            "SELECT id, data FROM docs WHERE collection = ? ORDER BY id", (collection,)
        ).fetchall()
    finally:
        conn.close()


def test_traces_path_sits_beside_the_store() -> None:
    assert traces_path("/x/team.db") == "/x/team.traces.db"
    assert traces_path("/x/data.sqlite3") == "/x/data.traces.sqlite3"
    assert traces_path("/x/store") == "/x/store.traces"
    assert traces_path(":memory:") == ":memory:"  # no file made for an in-memory database
    assert store_files("/x/team.db") == [
        "/x/team.db",
        "/x/team.db-wal",
        "/x/team.db-shm",
        "/x/team.traces.db",
        "/x/team.traces.db-wal",
        "/x/team.traces.db-shm",
        "/x/team.db-lock",
    ]


def test_traces_go_to_their_own_file_and_other_docs_stay(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    store = SQLiteStore(path)
    store.put_doc("traces", "t1", "p", {"n": 1}, T0, key="bob")
    store.put_doc("agents", "p/bob", "p", {"id": "bob"}, T0)
    store.close()
    assert _rows(traces_path(path), "traces") == [("t1", '{"n":1}')]
    assert _rows(path, "traces") == []
    assert _rows(path, "agents") == [("p/bob", '{"id":"bob"}')]
    assert _rows(traces_path(path), "agents") == []
    again = SQLiteStore(path)
    assert again.get_doc("traces", "p", "t1") == {"n": 1}
    assert again.list_docs("traces", "p", key="bob") == [{"n": 1}]
    assert again.get_doc("agents", "p", "p/bob") == {"id": "bob"}
    again.close()


def test_a_trace_written_elsewhere_leaves_the_readers_page_cache(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "s.db"))
    store.add_many([_record("r1", "hi")])
    before = _data_version(store)
    # The engine's trace writer writes on a thread (and a connection) of its own.
    _on_another_thread(lambda: store.put_doc("traces", "t1", "p", {"n": 1}, T0))
    assert _data_version(store) == before
    # Any other write from another connection does reset it: what the test would catch.
    _on_another_thread(lambda: store.put_doc("agents", "p/bob", "p", {"id": "bob"}, T0))
    assert _data_version(store) != before
    store.close()


def test_assemble_then_its_trace_write_keep_the_callers_cache(tmp_path: Path) -> None:
    engine = Engine.open(f"sqlite:///{tmp_path / 'e.db'}")
    engine.add_many(
        [
            {
                "id": f"r{i}",
                "project": "p",
                "author": "bob",
                "kind": "message",
                "content": f"login {i}",
            }
            for i in range(20)
        ]
    )
    store = engine.store
    assert isinstance(store, SQLiteStore)
    result = engine.assemble("p", "bob", "login", budget=2000)
    before = _data_version(store)
    engine.flush()  # the trace is written
    assert _data_version(store) == before
    assert engine.trace("p", result.trace.id) is not None
    assert _rows(str(tmp_path / "e.db"), "traces") == []
    engine.close()


def test_traces_kept_in_the_store_file_move_on_open(tmp_path: Path) -> None:
    """A store written before traces had a file of their own: they move there, once, and a trace
    that a move cut short had already copied is kept as copied."""
    path = str(tmp_path / "old.db")
    SQLiteStore(path).close()
    conn = sqlite3.connect(path)
    rows = [("traces", f"t{i}", "p", "bob", T0 + i, json.dumps({"n": i})) for i in range(3)] + [
        ("agents", "p/bob", "p", None, T0, json.dumps({"id": "bob"}))
    ]
    conn.executemany("INSERT INTO docs VALUES (?, ?, ?, ?, ?, ?)", rows)
    conn.commit()
    conn.close()
    moved = sqlite3.connect(traces_path(path))  # a move cut short had copied t1 already
    moved.executescript(DOCS_TABLE)
    moved.execute(
        "INSERT INTO docs VALUES ('traces', 't1', 'p', 'bob', ?, ?)",
        (T0 + 1, json.dumps({"n": 1, "copied": True})),
    )
    moved.commit()
    moved.close()

    store = SQLiteStore(path)
    assert [d["n"] for d in store.list_docs("traces", "p")] == [2, 1, 0]
    assert store.get_doc("traces", "p", "t1") == {"n": 1, "copied": True}  # the copy is kept
    assert store.get_doc("agents", "p", "p/bob") == {"id": "bob"}
    store.close()
    assert _rows(path, "traces") == []
    assert [i for i, _ in _rows(traces_path(path), "traces")] == ["t0", "t1", "t2"]
    # Opening again moves nothing more and loses nothing.
    store = SQLiteStore(path)
    assert [d["n"] for d in store.list_docs("traces", "p")] == [2, 1, 0]
    store.close()


def test_opening_a_store_without_traces_makes_no_traces_file(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    store = SQLiteStore(path)
    store.add_many([_record("r1", "hi")])
    assert [r.id for r in store.get_many("p", ["r1"])] == ["r1"]
    store.close()
    assert not Path(traces_path(path)).exists()


def test_a_trace_reads_back_as_the_standard_encoder_would_have_it(tmp_path: Path) -> None:
    """Traces are encoded by orjson where it is installed; what it would spell otherwise (dates,
    dataclasses) or cannot encode (big integers, keys that are not strings, lone surrogates)
    reads back as the standard encoder's text would."""
    import dataclasses
    import datetime

    from contextwright.stores.sqlite_docs import dumps

    @dataclasses.dataclass
    class Point:
        x: int

    engine = Engine.open(f"sqlite:///{tmp_path / 'd.db'}", embedder=None)
    engine.add_many(
        [{"project": "p", "author": "bob", "content": f"note {i} on the release plan"}
         for i in range(30)]
    )  # fmt: skip
    trace = engine.assemble("p", "bob", "the release plan", 2000).trace.to_dict()
    odd = {"at": datetime.datetime(2026, 1, 2, 3, 4, 5), "point": Point(1), "big": 2**70,
           "keys": {1: "one"}, "text": "é\u2028\ud800", "score": 1e-05}  # fmt: skip
    for data in (trace, odd):
        assert json.loads(dumps(data)) == json.loads(json.dumps(data, default=str))
    engine.close()


def test_put_docs_writes_a_batch_in_one_transaction(tmp_path: Path) -> None:
    """ports.PutsDocs: the trace writer's batch is one commit to the traces file (other
    collections go to the store's file, as put_doc's do)."""
    store = SQLiteStore(str(tmp_path / "s.db"))
    store.put_docs("traces", [], durable=False)
    store.put_docs("traces", [("t1", "p", {"n": 1}, 1.0, "bob")], durable=False)
    sent: list[str] = []
    store._traces.get().set_trace_callback(sent.append)
    store.put_docs(
        "traces", [(f"t{i}", "p", {"n": i}, float(i), "bob") for i in range(2, 5)], durable=False
    )
    store._traces.get().set_trace_callback(None)
    assert [q.split()[0] for q in sent] == ["BEGIN", "INSERT", "INSERT", "INSERT", "COMMIT"]
    assert [d["n"] for d in store.list_docs("traces", "p", key="bob")] == [4, 3, 2, 1]
    store.put_docs("traces", [("t1", "other", {"n": 9}, 9.0, None)])  # another project's id
    assert store.get_doc("traces", "p", "t1") == {"n": 1}
    store.put_docs("agents", [("a1", "p", {"x": 1}, 1.0, None), ("a2", "p", {"x": 2}, 2.0, None)])
    assert _rows(str(tmp_path / "s.db"), "agents") == [("a1", '{"x":1}'), ("a2", '{"x":2}')]
    store.close()
