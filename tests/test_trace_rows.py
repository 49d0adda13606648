"""The stored form of a trace's items (traces/rows.py): rows of raw values that read back as the
very items a reader of the live trace sees, over every store, and traces stored as item dicts
still read."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright import Engine
from contextwright.assembly.candidates import Candidate
from contextwright.assembly.packing import Decision
from contextwright.ports import Store
from contextwright.records import Record
from contextwright.stores.sqlite_docs import dumps, standard
from contextwright.traces.build import decision_dict, decision_row
from contextwright.traces.rows import ITEM_FIELDS, ITEM_ROWS, row_item
from contextwright.traces.trace import Trace

_text = st.text(max_size=200)
_name = st.text(alphabet="abcdefghij_:.", min_size=1, max_size=12)
_value = st.one_of(
    st.floats(width=64),  # NaN and the infinities too: stored as orjson or json writes them
    st.sampled_from([0.0, -0.0, 1.0, 2.0, 0.5, 1 / 3, 0.123456789]),
    st.integers(min_value=-5, max_value=5),
)


def _record(i: int, kind: str, author: str) -> Record:
    return Record(f"r{i}", "p", author, kind, "x", 1.0, 1, "h")


@st.composite
def _decisions(draw: Any) -> Decision:
    n = draw(st.integers(min_value=0, max_value=3))
    records = tuple(
        _record(i, draw(st.sampled_from(["note", "decision"])), draw(_name)) for i in range(n)
    )
    source = draw(_name)
    c = Candidate(
        key=draw(_name),
        section=draw(st.sampled_from(["state", "knowledge", "history"])),
        source=source,
        text=draw(_text),
        records=records,
        score=draw(_value),
        components=draw(st.dictionaries(_name, _value, max_size=6)),
        reasons=tuple(draw(st.lists(_text, max_size=3))),
        sources=tuple(draw(st.lists(_name, max_size=3))),
    )
    kept = draw(st.booleans())
    return Decision(
        c, kept, draw(_text), draw(st.integers(0, 10_000)), kept and draw(st.booleans())
    )


@settings(max_examples=300, deadline=None)
@given(_decisions())
def test_a_stored_row_reads_back_as_the_item(d: Decision) -> None:
    """Encoded as each store encodes it (orjson for SQLite's traces, the standard encoder for the
    others), a row reads back as the item `decision_dict` builds would, down to the JSON of every
    value."""
    row = decision_row(d)
    assert len(row) == len(ITEM_FIELDS)
    for encode in (dumps, standard):
        want = json.loads(encode({"r": decision_dict(d)}))["r"]
        got = row_item(json.loads(encode({"r": row}))["r"])
        assert json.dumps(got) == json.dumps(want)
        assert list(got) == list(ITEM_FIELDS)


def _seeded(store: Store) -> Engine:
    engine = Engine(store)
    engine.add(project="p", author="alice", content="@bob the login form posts to /api/session")
    engine.add(project="p", author="carol", kind="decision", content="Sessions expire after 1h")
    for i in range(30):
        engine.add(project="p", author="dave", content=f"login form note {i} " + "word " * 40)
    return engine


def test_the_writer_stores_rows_that_every_reader_reads_as_the_items(store: Store) -> None:
    engine = _seeded(store)
    result = engine.assemble("p", "bob", "fix the login form session", budget=1200)
    engine.flush()  # before the items are read: the writer builds its rows from the decisions
    doc = store.get_doc("traces", "p", result.trace.id)
    want = json.loads(json.dumps(result.trace.to_dict()))
    assert {i["decision"] for i in want["items"]} == {"kept", "dropped"}
    assert doc is not None and "items" not in doc and len(doc[ITEM_ROWS]) == len(want["items"])
    assert engine.trace("p", result.trace.id).to_dict() == want
    [listed] = engine.traces("p", "bob")
    assert listed.summary() == Trace.from_dict(want).summary()  # counted from the rows...
    assert listed.__dict__.get("_build") is not None  # ...with no item built
    assert listed.to_dict() == want
    assert listed.decision_counts() == Trace.from_dict(want).decision_counts()
    engine.close()


def test_a_trace_stored_as_item_dicts_still_reads(store: Store) -> None:
    """Traces written before the rows (and a session's trace, stored again with its notes) hold
    their items as dicts."""
    engine = _seeded(store)
    result = engine.assemble("p", "bob", "fix the login form session", budget=1200)
    old = json.loads(json.dumps(result.trace.to_dict()))
    engine.flush()
    store.put_doc("traces", "old", "p", {**old, "id": "old"}, 1.0, key="bob")
    assert engine.trace("p", "old").to_dict() == {**old, "id": "old"}
    assert Trace.from_dict(old).items == old["items"]
    engine.close()
