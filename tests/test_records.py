"""Records: every field, time-sortable ids, idempotent client ids, hash, tokens and @mentions at
ingest, validation that names field, value and fix, and status changes as new facts."""

from __future__ import annotations

import copy
import dataclasses
import os
import pickle
import re
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright import KINDS, Engine, Record, ValidationError
from contextwright.assembly.candidates import Candidate, Item
from contextwright.assembly.locality import LocalityConfig
from contextwright.assembly.packing import Decision
from contextwright.assembly.scoring import ScoringConfig
from contextwright.ids import new_id
from contextwright.records import (
    FIELDS,
    MAX_CONTENT_CHARS,
    MENTION_RE,
    _normalized,
    build_record,
    content_hash,
    parse_mentions,
)
from contextwright.roles import Agent, RoleProfile
from contextwright.stores.rows import record_to_row, row_to_record
from contextwright.tokens.counter import default_counter
from strategies import record_dicts

FIXED = 1_750_000_000.0


def full_record(**over: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": "rec-1",
        "project": "acme",
        "milestone": "m1",
        "session": "s1",
        "author": "alice",
        "kind": "decision",
        "to": ["bob", "carol"],
        "visibility": "direct",
        "tags": ["Auth", "login"],
        "refs": ["src/auth.py", "https://example.com/spec"],
        "status": "active",
        "supersedes": "rec-0",
        "reply_to": "rec-q",
        "pinned": True,
        "created_at": FIXED,
        "content": "We use JWT. @bob please review src/auth.py, cc @carol.",
        "meta": {"source": "standup", "weights": [1, 2.5], "nested": {"ok": True}},
    }
    data.update(over)
    return data


def test_every_field_is_kept_and_derived_fields_are_computed() -> None:
    counter = default_counter()
    r = build_record(full_record(), counter.count)
    assert set(FIELDS) == {f.name for f in dataclasses.fields(Record)}
    assert r.id == "rec-1"
    assert (r.project, r.milestone, r.session, r.author) == ("acme", "m1", "s1", "alice")
    assert r.kind == "decision"
    assert r.to == ("bob", "carol")
    assert r.visibility == "direct"
    assert r.tags == ("auth", "login")  # tags are lowercased
    assert r.refs == ("src/auth.py", "https://example.com/spec")
    assert r.status == "active"
    assert (r.supersedes, r.reply_to, r.pinned) == ("rec-0", "rec-q", True)
    assert r.created_at == FIXED
    assert r.mentions == ("bob", "carol")
    assert r.tokens == counter.count(r.content) > 0
    assert r.content_hash == content_hash(r.content)
    assert r.meta == {"source": "standup", "weights": [1, 2.5], "nested": {"ok": True}}
    d = r.to_dict()
    assert set(d) == set(FIELDS)
    assert d["to"] == ["bob", "carol"]


def test_record_is_immutable() -> None:
    r = build_record(full_record(), default_counter().count)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.content = "edited"  # type: ignore[misc]


def test_defaults_for_a_minimal_record() -> None:
    r = build_record({"project": "p", "author": "a", "content": "hi"}, len, now=FIXED)
    assert r.kind == "message"
    assert r.visibility == "project"
    assert r.status is None
    assert r.created_at == FIXED
    assert (r.to, r.tags, r.refs, r.mentions) == ((), (), (), ())
    assert r.pinned is False
    assert r.meta == {}
    assert len(r.id) == 26


def test_meta_defaults_to_an_empty_object_of_its_own() -> None:
    a = Record("i", "p", "a", "message", "hi", FIXED, 1, "h")
    b = Record("i", "p", "a", "message", "hi", FIXED, 1, "h")
    assert a.meta == {} and a.to_dict()["meta"] == {}
    assert a.meta is not b.meta
    assert Record("i", "p", "a", "message", "hi", FIXED, 1, "h", meta={"k": 1}).meta == {"k": 1}


@pytest.mark.parametrize(
    ("kind", "status"),
    [("task", "open"), ("question", "open"), ("decision", "active"), ("note", None)],
)
def test_open_kinds_start_open(kind: str, status: str | None) -> None:
    r = build_record({"project": "p", "author": "a", "content": "x", "kind": kind}, len)
    assert r.status == status


def test_every_kind_is_accepted() -> None:
    for kind in KINDS:
        assert (
            build_record({"project": "p", "author": "a", "content": "x", "kind": kind}, len).kind
            == kind
        )


def test_ids_sort_by_creation_time() -> None:
    times = [FIXED + i * 0.5 for i in range(50)]
    ids = [new_id(int(t * 1000)) for t in times]
    assert ids == sorted(ids)
    same_ms = [new_id(1_750_000_000_000) for _ in range(200)]
    assert same_ms == sorted(same_ms)  # the same millisecond still sorts in creation order
    assert len(set(same_ms)) == 200
    made = [
        build_record({"project": "p", "author": "a", "content": "x"}, len, now=t) for t in times
    ]
    assert [r.id for r in made] == sorted(r.id for r in made)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_forked_child_never_repeats_the_parents_ids() -> None:
    """Server workers may be forked from one parent: the random bytes an id takes are read ahead
    in a pool, which a child must not share with its parent."""
    new_id(5_000)  # the parent has a pool, and a sequence for that millisecond
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.write(write, " ".join(new_id(7_000) for _ in range(20)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        child = f.read().split()
    os.waitpid(pid, 0)
    parent = [new_id(7_000) for _ in range(20)]
    assert len(child) == 20 and not set(parent) & set(child)


def test_engine_ids_follow_the_clock(store: Any) -> None:
    ticks = iter(FIXED + i for i in range(100))
    engine = Engine(store, clock=lambda: next(ticks), workers=1)
    added = [engine.add(project="p", author="a", content=f"m {i}") for i in range(10)]
    assert [r.id for r in added] == sorted(r.id for r in added)
    assert [r.created_at for r in added] == sorted(r.created_at for r in added)


def test_client_id_makes_add_idempotent(engine: Engine) -> None:
    first = engine.add(id="client-1", project="p", author="a", content="original")
    again = engine.add(id="client-1", project="p", author="a", content="original")
    assert again == first
    with pytest.raises(ValidationError) as err:
        engine.add(id="client-1", project="p", author="a", content="a retry with other text")
    assert err.value.field == "id" and "new id" in err.value.fix
    assert engine.get("p", "client-1").content == "original"
    assert engine.store.count("p") == 1
    many = engine.add_many(
        [
            {"id": "client-1", "project": "p", "author": "a", "content": "original"},
            {"id": "client-2", "project": "p", "author": "a", "content": "y"},
            {"id": "client-2", "project": "p", "author": "a", "content": "y"},
        ]
    )
    assert [r.content for r in many] == ["original", "y", "y"]
    assert engine.store.count("p") == 2
    with pytest.raises(ValidationError, match="client-3"):  # the whole batch, or nothing
        engine.add_many(
            [
                {"id": "client-4", "project": "p", "author": "a", "content": "new"},
                {"id": "client-3", "project": "p", "author": "a", "content": "y"},
                {"id": "client-3", "project": "p", "author": "a", "content": "z"},
            ]
        )
    assert engine.store.count("p") == 2


def test_content_hash_ignores_case_and_whitespace() -> None:
    assert content_hash("Hello   World\n") == content_hash("hello world")
    assert content_hash("hello world") != content_hash("hello world!")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("@bob check this", ("bob",)),
        ("ping @bob and @carol, then @bob again", ("bob", "carol")),
        ("see @src/auth/login.py.", ("src/auth/login.py",)),
        ("use @kv:deploy_target and @rec:01ABC", ("kv:deploy_target", "rec:01ABC")),
        ("mail alice@example.com is not a mention", ()),
        ("@x.", ("x",)),
        ("no mentions here", ()),
        ("@@double", ()),
    ],
)
def test_mentions_are_parsed(text: str, expected: tuple[str, ...]) -> None:
    assert parse_mentions(text) == expected


def test_status_changes_are_new_facts(engine: Engine) -> None:
    q = engine.add(project="p", author="alice", kind="question", content="Which DB?")
    assert q.status == "open"
    engine.set_status(q.project, q.id, "active", by="bob", note="looking")
    resolved = engine.resolve(q.project, q.id, by="carol", note="Postgres")
    assert resolved.status == "resolved"
    history = engine.store.status_history(q.project, q.id)
    assert [(h["status"], h["by"], h["note"]) for h in history] == [
        ("active", "bob", "looking"),
        ("resolved", "carol", "Postgres"),
    ]
    # The record itself is unchanged apart from its effective status.
    now = engine.get(q.project, q.id)
    assert dataclasses.replace(now, status=q.status) == q


def test_supersedes_marks_the_old_record_as_a_fact(engine: Engine) -> None:
    old = engine.add(project="p", author="a", kind="decision", content="Use MySQL.")
    new = engine.add(
        project="p", author="b", kind="decision", content="Use Postgres.", supersedes=old.id
    )
    assert engine.get(old.project, old.id).status == "superseded"
    assert engine.get(new.project, new.id).status == "active"
    facts = engine.store.status_history(old.project, old.id)
    assert facts[-1]["status"] == "superseded" and facts[-1]["by"] == "b"
    assert engine.store.superseded_by(old.project, [old.id]) == {old.id: new.id}


def _error(data: Any) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        build_record(data, len)
    return info.value


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        ({"author": "a", "content": "x"}, "project", "missing"),
        ({"project": "p", "content": "x"}, "author", "missing"),
        ({"project": "p", "author": "a"}, "content", "missing"),
        ({"project": "p", "author": "a", "content": "   "}, "content", "empty"),
        ({"project": "p", "author": "a", "content": 42}, "content", "must be a string"),
        ({"project": 7, "author": "a", "content": "x"}, "project", "must be a string"),
        ({"project": "has space", "author": "a", "content": "x"}, "project", "letters, digits"),
        ({"project": "p", "author": "a", "content": "x", "kind": "gossip"}, "kind", "use one of"),
        (
            {"project": "p", "author": "a", "content": "x", "visibility": "secret"},
            "visibility",
            "use one of",
        ),
        (
            {"project": "p", "author": "a", "content": "x", "visibility": "direct"},
            "to",
            "recipient",
        ),
        ({"project": "p", "author": "a", "content": "x", "to": "bob, carol"}, "to", "list"),
        ({"project": "p", "author": "a", "content": "x", "to": 5}, "to", "must be a list"),
        ({"project": "p", "author": "a", "content": "x", "to": [""]}, "to[0]", "non-empty"),
        (
            {"project": "p", "author": "a", "content": "x", "tags": ["ok", 3]},
            "tags[1]",
            "non-empty",
        ),
        ({"project": "p", "author": "a", "content": "x", "status": "done"}, "status", "use one of"),
        (
            {"project": "p", "author": "a", "content": "x", "pinned": "yes"},
            "pinned",
            "true or false",
        ),
        ({"project": "p", "author": "a", "content": "x", "meta": [1]}, "meta", "object"),
        (
            {"project": "p", "author": "a", "content": "x", "meta": {"when": object()}},
            "meta.when",
            "JSON",
        ),
        ({"project": "p", "author": "a", "content": "x", "meta": {1: "a"}}, "meta.1", "text keys"),
        (
            {"project": "p", "author": "a", "content": "x", "meta": {"n": float("nan")}},
            "meta.n",
            "finite",
        ),
        (
            {"project": "p", "author": "a", "content": "x", "created_at": "yesterday"},
            "created_at",
            "seconds",
        ),
        (
            {"project": "p", "author": "a", "content": "x", "created_at": -5},
            "created_at",
            "seconds",
        ),
        (
            {"project": "p", "author": "a", "content": "x", "created_at": True},
            "created_at",
            "seconds",
        ),
        ({"project": "p", "author": "a", "content": "x", "id": ""}, "id", "letters"),
        (
            {"project": "p", "author": "a", "content": "x", "colour": "red"},
            "colour",
            "known fields",
        ),
        (
            {"project": "p", "author": "a", "content": "x", "mentions": ["bob"]},
            "mentions",
            "known fields",
        ),
        ({"project": "p", "author": "a", "content": "x", "tokens": 3}, "tokens", "known fields"),
    ],
)
def test_validation_names_field_value_and_fix(
    data: dict[str, Any], field: str, words: str | None
) -> None:
    err = _error(data)
    assert err.field == field
    assert err.message.startswith(f"{field}=")
    assert err.fix and err.fix in err.message
    if words:
        assert words in err.message
    assert err.to_dict()["type"] == "validation_error"


def test_string_for_a_list_field_is_one_item() -> None:
    r = build_record({"project": "p", "author": "a", "content": "x", "to": "bob"}, len)
    assert r.to == ("bob",)


def test_non_mapping_input() -> None:
    err = _error(["project", "p"])
    assert err.field == "record" and "must be an object" in err.message


def test_huge_content_names_the_limit() -> None:
    err = _error({"project": "p", "author": "a", "content": "x" * (MAX_CONTENT_CHARS + 1)})
    assert err.field == "content"
    assert str(MAX_CONTENT_CHARS) in err.message
    assert len(err.message) < 300  # the value is summarized, not echoed
    ok = build_record({"project": "p", "author": "a", "content": "x" * MAX_CONTENT_CHARS}, len)
    assert len(ok.content) == MAX_CONTENT_CHARS


def test_unknown_fields_of_mixed_key_types_still_give_a_validation_error() -> None:
    err = _error({"project": "p", "author": "a", "content": "x", 1: "a", "zz": "b"})
    assert "known fields" in err.message


def test_duplicate_tags_differing_in_case_are_one_tag() -> None:
    r = build_record({"project": "p", "author": "a", "content": "x", "tags": ["Auth", "auth"]}, len)
    assert r.tags == ("auth",)


def test_meta_is_the_same_in_every_store(store: Any) -> None:
    engine = Engine(store, workers=1)
    r = engine.add(project="p", author="a", content="x", meta={"pair": (1, 2), "ok": None})
    assert r.meta == {"pair": [1, 2], "ok": None}
    assert engine.get(r.project, r.id).meta == {"pair": [1, 2], "ok": None}


def test_created_at_defaults_to_now() -> None:
    before = time.time()
    r = build_record({"project": "p", "author": "a", "content": "x"}, len)
    assert before <= r.created_at <= time.time()


_CANDIDATE = Candidate("k", "knowledge", "fulltext", "text")
# A value for every field of the classes whose __init__ is written out, each unlike its default.
_SAMPLES: dict[type, dict[str, Any]] = {
    Record: {
        "id": "r1", "project": "p", "author": "ann", "kind": "note", "content": "c",
        "created_at": 5.0, "tokens": 3, "content_hash": "h", "milestone": "m1", "session": "s1",
        "to": ("bob",), "visibility": "direct", "mentions": ("cy",), "tags": ("t",),
        "refs": ("f.py",), "status": "open", "supersedes": "r0", "reply_to": "r9",
        "pinned": True, "meta": {"x": 1},
    },
    Candidate: {
        "key": "k", "section": "history", "source": "history", "text": "t",
        "records": (build_record(full_record(), len),), "score": 0.5,
        "components": {"bm25": 1.0}, "reasons": ("why",), "pinned": True, "tokens": 7,
        "created_at": 9.0, "content_hash": "h", "sources": ("fulltext",), "beside": "r2",
        "dated_line": True, "deep": True,
    },
    Item: {"candidate": _CANDIDATE, "text": "t", "tokens": 4, "truncated": True, "omitted": 2,
           "day": "1 May 2023"},
    Decision: {"candidate": _CANDIDATE, "kept": True, "reason": "fits", "tokens": 4,
               "truncated": True},
}  # fmt: skip


@pytest.mark.parametrize("cls", list(_SAMPLES))
def test_data_classes_take_every_declared_field(cls: type) -> None:
    """Record, Candidate, Item and Decision take every field they declare, by name and in order,
    and default as declared, with a fresh dict or list for each object."""
    declared = dataclasses.fields(cls)
    values = _SAMPLES[cls]
    assert [f.name for f in declared] == list(values), "give the new field a sample above"
    by_name = cls(**values)
    by_position = cls(*values.values())
    for f in declared:
        assert getattr(by_name, f.name) == values[f.name], f.name
        assert getattr(by_position, f.name) == values[f.name], f.name
    required = {f.name: values[f.name] for f in declared if _no_default(f)}
    a, b = cls(**required), cls(**required)
    for f in declared:
        if _no_default(f):
            continue
        factory: Any = f.default_factory
        expected = f.default if factory is dataclasses.MISSING else factory()
        assert getattr(a, f.name) == expected, f.name
        if isinstance(expected, dict | list):
            assert getattr(a, f.name) is not getattr(b, f.name), f"{f.name} shared between objects"


def _no_default(f: dataclasses.Field[Any]) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def test_with_status_changes_the_status_alone() -> None:
    r = build_record(full_record(), default_counter().count)
    changed = r.with_status("resolved")
    assert changed.status == "resolved"
    assert dataclasses.replace(changed, status=r.status) == r
    with pytest.raises(dataclasses.FrozenInstanceError):
        changed.status = "open"  # type: ignore[misc]


def test_records_and_candidates_pickle_and_copy() -> None:
    """Slotted (and, for Record, frozen) dataclasses: they pickle and copy field for field."""
    r = build_record(full_record(), default_counter().count)
    for again in (pickle.loads(pickle.dumps(r)), copy.copy(r), copy.deepcopy(r)):
        assert again == r
        assert [getattr(again, f.name) for f in dataclasses.fields(Record)] == [
            getattr(r, f.name) for f in dataclasses.fields(Record)
        ]
    deep = copy.deepcopy(r)
    assert deep.meta == r.meta and deep.meta is not r.meta
    for cls, values in _SAMPLES.items():  # Candidate, Item and Decision too
        obj = cls(**values)
        for again_obj in (pickle.loads(pickle.dumps(obj)), copy.copy(obj), copy.deepcopy(obj)):
            assert again_obj == obj, cls.__name__


@pytest.mark.parametrize(
    "obj",
    [
        RoleProfile("auditor", {"decision": 0.9}, {"fulltext": 0.5}, 0.3, "gpt-4o-mini", 4_000),
        Agent("ann", "auditor", RoleProfile("auditor")),
        ScoringConfig(half_life_days=7.0, fusion="rrf").with_weights(named=0.6),
        LocalityConfig(top=5, sessions=3),
    ],
    ids=lambda o: type(o).__name__,
)
def test_frozen_configs_pickle_and_copy(obj: Any) -> None:
    """The frozen, slotted config classes pickle and copy."""
    for again in (pickle.loads(pickle.dumps(obj)), copy.copy(obj), copy.deepcopy(obj)):
        assert again == obj


@pytest.mark.parametrize("field", ["project", "session", "milestone", "id", "reply_to"])
def test_an_identifier_with_a_trailing_newline_is_refused(field: str) -> None:
    # `$` in the identifier pattern matched before a final newline: "p\n" was a valid project.
    data = {"project": "p", "author": "a", "content": "x", field: "p\n"}
    with pytest.raises(ValidationError) as err:
        build_record(data, len)
    assert err.value.field == field


@settings(max_examples=60, deadline=None)
@given(data=record_dicts(index=3))
def test_a_stored_row_decodes_to_the_record_it_was_made_from(data: dict[str, Any]) -> None:
    """rows.row_to_record sets the slots itself (not through Record's __init__): the record it
    gives is equal, field for field, to the one that was stored, and as immutable."""
    data["meta"] = {"k": [1, "two"]} if data["pinned"] else {}
    r = build_record(data, default_counter().count)
    back = row_to_record((*record_to_row(r), 1))
    assert back == r
    assert {f: getattr(back, f) for f in FIELDS} == {f: getattr(r, f) for f in FIELDS}
    with pytest.raises(dataclasses.FrozenInstanceError):
        back.status = "open"  # type: ignore[misc]
    assert back.with_status("resolved").status == "resolved"


# The text the two fast paths below must treat as the plain definitions do: ASCII whitespace and
# control characters, Unicode spaces and separators, quotes and the characters of a name.
_TRICKY = st.text(
    alphabet=st.sampled_from(list('@@"" \n\t\r\x0b\x0c\x1c\x1fabZ09._-/:é日\u00a0\u2028')),
    max_size=40,
)
_MENTION_BY_DEFINITION = re.compile(
    r'(?<![\w@])@"([^"\r\n]{1,200})"' r"|(?<![\w@])@(\w[\w.\-/:]*[\w/])|(?<![\w@])@(\w)"
)


@settings(max_examples=500, deadline=None)
@given(text=_TRICKY)
def test_content_hash_normalizes_as_split_and_join_do(text: str) -> None:
    """content_hash skips the word list for plain ASCII text; it hashes the same string."""
    assert _normalized(text) == " ".join(text.split()).lower()


@settings(max_examples=500, deadline=None)
@given(text=_TRICKY)
def test_mentions_are_found_where_the_plain_pattern_finds_them(text: str) -> None:
    """MENTION_RE starts with its `@` (searched for fast); it matches what the pattern with the
    look back first matches, at the same places, with the same groups."""
    want = [(m.span(), m.groups()) for m in _MENTION_BY_DEFINITION.finditer(text)]
    assert [(m.span(), m.groups()) for m in MENTION_RE.finditer(text)] == want


@given(record_dicts())
@settings(max_examples=60, deadline=None)
def test_to_dict_is_every_field_in_order_with_lists_and_its_own_meta(data: dict[str, Any]) -> None:
    """What `dataclasses.asdict` gave, which to_dict no longer calls: the fields in their order,
    the tuples as lists, and a `meta` of the answer's own (a change to it leaves the record)."""
    r = build_record(data, len, now=FIXED)
    d = r.to_dict()
    expected = dataclasses.asdict(r)
    for key in ("to", "mentions", "tags", "refs"):
        expected[key] = list(expected[key])
    assert list(d) == list(expected) == list(FIELDS)
    assert d == expected
    assert all(type(d[k]) is list for k in ("to", "mentions", "tags", "refs"))
    d["meta"]["added"] = 1
    assert "added" not in r.meta
