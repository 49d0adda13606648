"""m007_written_by_trigger: SQLite writes a record's full-text, addressing and tag rows within the
record's own INSERT. An add is then a few statements inside the write lock (each one a GIL
handover), the rows are the ones the store wrote statement by statement before, and a file made
before the migration, holding data, takes it and reads the same."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextwright import ValidationError
from contextwright.ports import Query
from contextwright.records import Record, build_record
from contextwright.stores.sqlite import SQLiteStore
from contextwright.stores.sqlite_inserts import ROWS
from contextwright.stores.sqlite_schema import MIGRATIONS
from contextwright.tokens.counter import default_counter

P = "wt"
OLD = [m for m in MIGRATIONS if m[0] < "m007"]
# Everything a record's write leaves in the file, row by row: the full-text index as its terms'
# every instance (fts5vocab), so that two indexes compare however their segments were merged.
DUMPS = {
    "records": "SELECT rid, * FROM records ORDER BY rid",
    "addressing": "SELECT * FROM addressing ORDER BY 1, 2, 3",
    "addressed_time": "SELECT * FROM addressed_time ORDER BY 1, 2, 3",
    "record_tags": "SELECT * FROM record_tags ORDER BY 1, 2",
    "project_versions": "SELECT * FROM project_versions ORDER BY 1",
    "fts": "SELECT term, doc, col, offset FROM fts_terms ORDER BY 1, 2, 3, 4",
}


def rec(rid: str, content: str, at: float = 1.0, **fields: Any) -> Record:
    data: dict[str, Any] = {"id": rid, "project": P, "author": "ann", "content": content,
                            "created_at": at, **fields}  # fmt: skip
    return build_record(data, default_counter().count)


def dump(path: str) -> dict[str, list[tuple[Any, ...]]]:
    conn = sqlite3.connect(path)
    try:
        conn.execute(
            "CREATE VIRTUAL TABLE temp.fts_terms USING fts5vocab(main, records_fts, instance)"
        )
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.execute("INSERT INTO records_fts(records_fts) VALUES ('integrity-check')")
        return {name: conn.execute(sql).fetchall() for name, sql in DUMPS.items()}
    finally:
        conn.close()


def written(path: str, batches: list[list[Record]], migrations: Any = MIGRATIONS) -> Any:
    store = SQLiteStore(path, migrations=migrations)
    try:
        for batch in batches:
            store.add_many(batch)
    finally:
        store.close()
    return dump(path)


def sample() -> list[list[Record]]:
    """Batches of every shape: alone, many (past one INSERT's ROWS), repeated ids, recipients,
    mentions and tags, and a record superseding one before it."""
    big = [
        rec(f"b{i}", f"bulk note {i} about the parser", 2.0 + i / 1000, tags=["bulk", f"t{i % 3}"])
        for i in range(ROWS + 7)
    ]
    # Repeated within the batch and from before it, the same write each time.
    again = rec("d", "use postgres", 4.0, kind="decision", supersedes="c")
    repeats = [rec("e", "twice"), again, rec("e", "twice"), rec("f", "once")]
    return [
        [rec("a", "@bob the login form is broken", to=["carol", "bob"], tags=["Bug", "ui"])],
        big,
        [
            rec("a", "@bob the login form is broken", to=["carol", "bob"], tags=["Bug", "ui"]),
            rec("c", "direct word 😀 for @dee", 3.0, to="dee", visibility="direct"),
        ],
        [rec("d", "use postgres", 4.0, kind="decision", supersedes="c")],
        repeats,
    ]


def test_a_trigger_written_file_holds_the_rows_written_by_hand(tmp_path: Path) -> None:
    batches = sample()
    by_hand = written(str(tmp_path / "hand.db"), batches, OLD)
    triggered = written(str(tmp_path / "trigger.db"), batches)
    assert by_hand["fts"] and by_hand["addressing"] and by_hand["record_tags"]
    assert triggered == by_hand


def test_an_add_is_four_statements_inside_the_write_lock(tmp_path: Path) -> None:
    """BEGIN, one INSERT, the version, COMMIT: a record with recipients, a mention and tags took
    ten statements, each a wait for the GIL under load."""
    store = SQLiteStore(str(tmp_path / "s.db"))
    store.add_many([rec("first", "before")])
    statements: list[str] = []
    conn = store._conn()
    conn.set_trace_callback(statements.append)
    store.add_many([rec("a", "@bob look", to=["carol"], tags=["x", "y"])])
    conn.set_trace_callback(None)
    ours = [s[:25] for s in statements if not s.startswith("-- ")]
    # The trigger's statements are traced under the INSERT's own text, once each.
    runs = [s for n, s in enumerate(ours) if n == 0 or s != ours[n - 1]]
    assert [s.split(" ")[0] for s in runs] == ["BEGIN", "INSERT", "INSERT", "COMMIT"]
    assert runs[1].startswith("INSERT INTO records (")
    assert runs[2].startswith("INSERT INTO project_vers")
    assert [r.id for r in store.query(Query(P, "carol", addressed_to="bob"))] == ["a"]
    assert [r.id for r in store.query(Query(P, None, tag="y"))] == ["a"]
    assert [h.record.id for h in store.search_text(P, None, "look", 5)] == ["a"]
    store.close()


def test_an_old_file_holding_data_takes_the_trigger(tmp_path: Path) -> None:
    """A file written before m007 (statement by statement) migrates on open, keeps every row,
    and then stores and finds records as one written by the trigger from the start would."""
    path = str(tmp_path / "old.db")
    first, *rest = sample()
    old = SQLiteStore(path, migrations=OLD)
    assert not old._triggered
    old.add_many(first)
    old.close()
    before = dump(path)

    store = SQLiteStore(path)
    try:
        assert store.applied_migrations()[-1] == "m007_written_by_trigger"
        assert store._triggered
        assert dump(path) == before  # the migration itself rewrites nothing
        for batch in rest:
            store.add_many(batch)
        assert [r.id for r in store.query(Query(P, "bob", addressed_to="bob"))] == ["a"]
        tagged = {r.id for r in store.query(Query(P, None, tag="t1", limit=500))}
        assert tagged == {f"b{i}" for i in range(ROWS + 7) if i % 3 == 1}
        assert [h.record.id for h in store.search_text(P, None, "login", 5)] == ["a"]
        assert [h.record.id for h in store.search_text(P, "dee", "postgres", 5)] == ["d"]
    finally:
        store.close()
    assert dump(path) == written(str(tmp_path / "new.db"), sample())


def test_a_refused_batch_leaves_no_row_of_the_trigger(tmp_path: Path) -> None:
    path = str(tmp_path / "r.db")
    store = SQLiteStore(path)
    store.add_many([rec("a", "first words", tags=["keep"])])
    before = dump(path)
    try:
        store.add_many([rec("b", "new words @bob", tags=["gone"]), rec("a", "changed words")])
    except ValidationError as exc:
        assert exc.field == "id"
    else:
        raise AssertionError("a changed write of a stored id was accepted")
    finally:
        store.close()
    assert dump(path) == before


NAMES = st.text(min_size=1, max_size=6).filter(lambda s: s.strip() == s and "," not in s)
WORDS = st.lists(st.sampled_from(["login", "form", "parser", "@bob", "@dee", "😀", "déjà"]))


@st.composite
def batches(draw: st.DrawFn) -> list[list[Record]]:
    out: list[list[Record]] = []
    for b in range(draw(st.integers(1, 4))):
        batch = []
        for i in range(draw(st.integers(1, 60))):
            rid = draw(st.sampled_from([f"r{b}-{i}", f"r{b}-{i}", "same"]))
            words, at = " ".join(draw(WORDS)) or "x", float(draw(st.integers(0, 5)))
            to = draw(st.lists(NAMES, max_size=3))
            tags = draw(st.lists(st.sampled_from(["a", "B", "c.d"]), max_size=3))
            try:
                batch.append(rec(rid, words, at, to=to, tags=tags))
            except ValidationError:
                continue  # a name the records refuse: not the store's to write
        out.append(batch)
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches())
def test_trigger_and_hand_write_the_same_rows(groups: list[list[Record]]) -> None:
    with tempfile.TemporaryDirectory() as d:
        outcomes = []
        for name, migrations in (("hand", OLD), ("trigger", MIGRATIONS)):
            store = SQLiteStore(f"{d}/{name}.db", migrations=migrations)
            answers: list[Any] = []
            for batch in groups:
                try:
                    answers.append([r.id for r in store.add_many(batch)])
                except ValidationError as exc:
                    answers.append(exc.field)
            store.close()
            outcomes.append((answers, dump(f"{d}/{name}.db")))
        assert outcomes[0] == outcomes[1]
