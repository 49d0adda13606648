"""Retrieval pipelines as data (assembly/definitions.py, retrieval.py): the default definitions
are the sources the engine always ran; a user's file changes a step's size or adds filter and cap
steps; every bad file is refused with its file, field and fix, and changes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jsonschema
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextwright import Engine
from contextwright.assembly.defaults import default_sources
from contextwright.assembly.definitions import (
    DEFAULT_FILE,
    Pipelines,
    check_pipelines,
    default_pipelines,
    load_pipelines,
    parse_text,
    pipelines_from,
    schema,
)
from contextwright.assembly.kv_source import KVSource
from contextwright.assembly.retrieval import PipelineSource
from contextwright.assembly.sources import (
    MAX_DEPTH,
    TOKENS_PER_LINE,
    AddressedSource,
    DecisionsSource,
    FullTextSource,
    HistorySource,
    OpenItemsSource,
    PinnedSource,
    SourceContext,
    budget_depth,
)
from contextwright.cli import cli
from contextwright.errors import RuleError
from contextwright.ports import Store
from contextwright.roles import profile_for
from contextwright.stores import open_store

if TYPE_CHECKING:
    import httpx

T0 = 1_700_000_000.0
DAY = 86_400.0
PACKAGED = Path(__file__).parents[1] / "src/contextwright/assembly/default_pipelines.json"
# The sources the engine ran before pipelines were data (assembly/defaults.py as it was).
OLD_DEFAULTS = [
    HistorySource,
    AddressedSource,
    OpenItemsSource,
    FullTextSource,
    PinnedSource,
    DecisionsSource,
    KVSource,
]


def _seed(engine: Engine, n: int = 12) -> None:
    engine.kv_set("p", "deploy.target", "fly.io region ams")
    for i in range(n):
        engine.add(
            project="p", author=["ann", "cy"][i % 2], kind=["note", "decision", "gotcha"][i % 3],
            content=f"login form note {i}: the session cookie expires after {i} hours",
            tags=["auth"] if i % 4 == 0 else [], created_at=T0 - i * DAY,
        )  # fmt: skip
    engine.add(project="p", author="ann", kind="message", content="@bob check @deploy.target",
               to=["bob"], created_at=T0 - 1)  # fmt: skip
    engine.add(project="p", author="bob", kind="message", content="on the login form now",
               session="s1", created_at=T0 - 2)  # fmt: skip
    engine.add(project="p", author="ann", kind="constraint", content="never log the cookie",
               created_at=T0 - 3)  # fmt: skip


def _window(engine: Engine, **kw: Any) -> tuple[str, list[dict[str, Any]]]:
    a = engine.assemble("p", "bob", "login form session cookie", 3000, "markdown", **kw)
    return a.text, [{k: v for k, v in i.items()} for i in a.trace.items]


def _ctx(store: Store, agent: str = "bob", now: float = T0) -> SourceContext:
    from contextwright.tokens.counter import default_counter

    return SourceContext(
        store=store, counter=default_counter(), project="p", agent=agent,
        role=profile_for("developer"), task="login form session cookie", session="s1", now=now,
    )  # fmt: skip


# -- the defaults are the old sources ---------------------------------------------------------


def test_default_definitions_build_the_sources_the_engine_ran() -> None:
    built = default_sources()
    assert [type(s) for s in built] == OLD_DEFAULTS
    assert [s.name for s in built] == [
        "history", "addressed", "open_items", "fulltext", "pinned", "decisions", "kv",
    ]  # fmt: skip


def test_engine_sources_from_the_default_definitions(store: Store) -> None:
    with Engine(store) as e, Engine(store, embedder="hash") as v:
        assert [type(s) for s in e.sources[:7]] == OLD_DEFAULTS
        assert e.sources[7:] == [e.tasks.source, e.sessions.source]
        # The vector source joins where its pipeline stands: before computed and session.
        assert v.vectors.source is not None
        assert v.sources[7:] == [v.vectors.source, v.tasks.source, v.sessions.source]


def test_the_packaged_file_is_valid_and_is_the_default() -> None:
    doc = json.loads(PACKAGED.read_text())
    jsonschema.validate(doc, schema())
    got, errors = parse_text(PACKAGED.read_bytes(), str(PACKAGED))
    assert errors == []
    assert [p.to_dict() for p in got] == default_pipelines().to_dict()["pipelines"]
    assert default_pipelines().files == (DEFAULT_FILE,)


def test_default_windows_unchanged(store: Store, tmp_path: Path) -> None:
    """The engine on its default definitions, on a user's copy of them, and on the sources listed
    by hand as before: the same windows, item for item."""
    with Engine(store, clock=lambda: T0, persist_traces=False) as e:
        _seed(e)
        old = Engine(store, clock=lambda: T0, persist_traces=False,
                     sources=[*(s() for s in OLD_DEFAULTS), e.tasks.source, e.sessions.source])  # fmt: skip
        copy = tmp_path / "pipelines"
        copy.mkdir()
        (copy / "team.json").write_text(PACKAGED.read_text())
        same = Engine(store, clock=lambda: T0, persist_traces=False, pipelines=copy)
        try:
            for kw in ({}, {"session": "s1"}):
                text, items = _window(e, **kw)
                assert _window(old, **kw) == (text, items)
                assert _window(same, **kw) == (text, items)
                assert "fly.io" in text and "never log the cookie" in text
            # A copy of the defaults is the defaults: the same digests, nothing of its own kept.
            notes = [
                x.assemble("p", "bob", "login", 3000).trace.notes["pipelines"] for x in (e, same)
            ]
            assert notes[0] == notes[1] and notes[1]["defined"] == {}
        finally:
            old.close()
            same.close()


# -- a user's definitions ---------------------------------------------------------------------


def _count(engine: Engine, source: str, budget: int = 3000, **kw: Any) -> int:
    a = engine.assemble("p", "bob", "login form session cookie", budget, **kw)
    return next(s["candidates"] for s in a.trace.sources if s["name"] == source)


def test_top_k_changes_how_many_candidates_a_search_returns(store: Store) -> None:
    lower = [{"name": "fulltext", "steps": [{"step": "fulltext", "topK": 3}]}]
    with Engine(store, clock=lambda: T0) as d, Engine(store, pipelines=lower) as e:
        _seed(d)
        assert _count(d, "fulltext") > 5
        assert isinstance(next(s for s in e.sources if s.name == "fulltext"), PipelineSource)
        assert _count(e, "fulltext") == 3
        # The call's own limit for the pipeline still wins over the definition.
        a = e.assemble("p", "bob", "login form session cookie", 3000, limits={"fulltext": 5})
        assert next(s["candidates"] for s in a.trace.sources if s["name"] == "fulltext") == 5


def test_top_k_of_the_vector_step(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'v.db'}")
    with Engine(store, clock=lambda: T0, embedder="hash") as e:
        _seed(e, 60)
        assert e.wait_for_embeddings(60)
        # The source's own size (retrieval.SOURCE_LIMITS) for a window of 1,000 tokens.
        assert _count(e, "vector", 1000) == 40
    ten = [{"name": "vector", "steps": [{"step": "vector", "topK": 10}]}]
    with Engine(open_store(f"sqlite:///{tmp_path / 'v.db'}"), clock=lambda: T0,
                embedder="hash", pipelines=ten) as e:  # fmt: skip
        assert e.wait_for_embeddings(60)
        assert _count(e, "vector") == 10
        assert _count(e, "vector", 20_000) == 10  # a size given is kept at any budget
        names = [s.name for s in e.sources]
        assert names.index("vector") < names.index("computed")


def test_the_default_vector_list_grows_with_the_budget(tmp_path: Path) -> None:
    """A list of 40 hits cannot fill a large window: unless a call or a definition sizes it, the
    vector list reads as many hits as the window holds lines (sources.budget_depth)."""
    store = open_store(f"sqlite:///{tmp_path / 'v.db'}")
    with Engine(store, clock=lambda: T0, embedder="hash") as e:
        _seed(e, 400)
        assert e.wait_for_embeddings(60)
        assert _count(e, "vector", 1000) == 40
        assert _count(e, "vector", 1500) == 1500 // TOKENS_PER_LINE
        assert _count(e, "vector", 100_000) == MAX_DEPTH
        assert _count(e, "vector", 3000, limits={"vector": 7}) == 7
        assert _count(e, "vector", 3000, limits={"vector": 300}) == 300  # a size given is kept


@given(st.integers(0, 10**7), st.integers(0, 10**7), st.integers(1, 1000))
def test_budget_depth_is_monotone_and_bounded(a: int, b: int, default: int) -> None:
    lo, hi = sorted((a, b))
    assert budget_depth(lo, default) <= budget_depth(hi, default)
    assert default <= budget_depth(hi, default) <= max(default, MAX_DEPTH)
    assert budget_depth(None, default) == default


def _run(store: Store, steps: list[dict[str, Any]], agent: str = "bob") -> list[Any]:
    pipes = pipelines_from([{"name": "notes", "steps": steps}])
    p = pipes.get("notes")
    assert p is not None
    from contextwright.assembly.retrieval import build_source, store_providers

    src = build_source(p, store_providers())
    assert src is not None
    found = src.run(_ctx(store, agent))
    assert all(c.source == "notes" and c.sources == ("notes",) for c in found)
    return found


FULLTEXT = {"step": "fulltext", "topK": 100}


@pytest.mark.parametrize(
    ("filter_step", "keep"),
    [
        ({"kind": ["decision"]}, lambda r: r.kind == "decision"),
        ({"kind": ["decision"], "exclude": True}, lambda r: r.kind != "decision"),
        ({"author": ["cy"]}, lambda r: r.author == "cy"),
        ({"tags": ["auth"]}, lambda r: "auth" in r.tags),
        ({"max_age_days": 3.5}, lambda r: T0 - r.created_at <= 3.5 * DAY),
        ({"max_age_days": 3.5, "exclude": True}, lambda r: T0 - r.created_at > 3.5 * DAY),
        ({"author": ["ann"], "kind": ["note"]}, lambda r: r.author == "ann" and r.kind == "note"),
    ],
)
def test_a_filter_step_removes_what_it_should(
    store: Store, filter_step: dict[str, Any], keep: Any
) -> None:
    with Engine(store, clock=lambda: T0) as e:
        _seed(e)
        everything = _run(store, [FULLTEXT])
        kept = _run(store, [FULLTEXT, {"step": "filter", **filter_step}])
    expected = [c.key for c in everything if keep(c.records[0])]
    assert [c.key for c in kept] == expected
    assert 0 < len(expected) < len(everything)  # the filter did something, and not everything


def test_a_cap_step_keeps_the_first_that_fit(store: Store) -> None:
    with Engine(store, clock=lambda: T0) as e:
        _seed(e)
        everything = _run(store, [FULLTEXT])
        four = _run(store, [FULLTEXT, {"step": "cap", "items": 4}])
        budget = sum(c.tokens for c in everything[:3])
        capped = _run(store, [FULLTEXT, {"step": "cap", "tokens": budget}])
    assert [c.key for c in four] == [c.key for c in everything[:4]]
    assert sum(c.tokens for c in capped) <= budget
    assert [c.key for c in capped][:3] == [c.key for c in everything[:3]]


def test_a_filter_step_in_the_engine_changes_the_window(store: Store) -> None:
    """The spec's "add a filter step to the retrieval pipeline": one step, and old notes that
    only full text found are gone from the window."""
    recent = [
        {"name": "fulltext", "steps": [
            {"step": "fulltext", "topK": 40}, {"step": "filter", "max_age_days": 2},
        ]},
    ]  # fmt: skip
    with (
        Engine(store, clock=lambda: T0) as d,
        Engine(store, clock=lambda: T0, pipelines=recent) as e,
    ):
        _seed(d)
        before = d.assemble("p", "bob", "login form session cookie", 3000, sources=["fulltext"])
        after = e.assemble("p", "bob", "login form session cookie", 3000, sources=["fulltext"])
    assert "note 9:" in before.text and "note 9:" not in after.text
    assert "note 1:" in after.text


def test_a_new_pipeline_runs_after_the_others_and_one_can_be_switched_off(store: Store) -> None:
    more = [
        {"name": "auth-notes", "steps": [FULLTEXT, {"step": "filter", "tags": ["auth"]}]},
        {"name": "decisions", "enabled": False, "steps": [{"step": "decisions"}]},
    ]
    with Engine(store, pipelines=more) as e:
        names = [s.name for s in e.sources]
    assert "decisions" not in names
    assert names[-1] == "auth-notes" and names[:3] == ["history", "addressed", "open_items"]


def test_the_trace_names_the_definition_of_each_source(store: Store, tmp_path: Path) -> None:
    f = tmp_path / "recent.json"
    f.write_text(json.dumps({"pipelines": [{"name": "fulltext", "steps": [
        {"step": "fulltext", "topK": 40}, {"step": "filter", "max_age_days": 2}]}]}))  # fmt: skip
    with Engine(store, clock=lambda: T0) as d, Engine(store, clock=lambda: T0, pipelines=f) as e:
        _seed(d)
        plain = d.assemble("p", "bob", "login form", 3000).trace.notes["pipelines"]
        a = e.assemble("p", "bob", "login form", 3000)
        e.flush()
        notes = e.trace("p", a.trace.id, "bob").notes["pipelines"]  # as stored
    assert plain["defined"] == {}
    assert plain["sources"]["fulltext"] == default_pipelines().get("fulltext").digest  # type: ignore[union-attr]
    assert notes["sources"]["fulltext"] != plain["sources"]["fulltext"]
    assert notes["sources"]["history"] == plain["sources"]["history"]
    assert notes["defined"]["fulltext"]["file"] == str(f)
    assert notes["defined"]["fulltext"]["steps"][1] == {"step": "filter", "max_age_days": 2.0}
    assert notes["digest"] != plain["digest"]


# -- visibility: no definition widens it --------------------------------------------------------

AGENTS = ("ann", "bob", "cy")
record_st = st.fixed_dictionaries(
    {
        "author": st.sampled_from(AGENTS),
        "kind": st.sampled_from(("note", "decision", "gotcha", "task", "constraint")),
        "visibility": st.sampled_from(("project", "direct", "private")),
        "to": st.lists(st.sampled_from(AGENTS), max_size=2, unique=True),
        "tags": st.lists(st.sampled_from(("auth", "db")), max_size=2, unique=True),
        "age": st.integers(0, 30),
        "pinned": st.booleans(),
    }
)
filter_st = st.fixed_dictionaries(
    {"step": st.just("filter")},
    optional={
        "kind": st.lists(st.sampled_from(("note", "decision", "task")), min_size=1, unique=True),
        "author": st.lists(st.sampled_from(AGENTS), min_size=1, unique=True),
        "tags": st.lists(st.sampled_from(("auth", "db")), min_size=1, unique=True),
        "max_age_days": st.floats(0.5, 40),
        "exclude": st.booleans(),
    },
).filter(lambda f: len(set(f) - {"step", "exclude"}) > 0)
step_st = st.one_of(
    st.sampled_from(
        [{"step": n} for n in ("history", "addressed", "fulltext", "pinned", "decisions", "kv")]
    ),
    filter_st,
    st.just({"step": "cap", "items": 3}),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(record_st, min_size=1, max_size=12),
    first=st.sampled_from(["history", "addressed", "fulltext", "pinned", "decisions"]),
    steps=st.lists(step_st, max_size=4),
    agent=st.sampled_from(AGENTS),
)
def test_no_pipeline_shows_what_visibility_hides(
    records: list[dict[str, Any]], first: str, steps: list[dict[str, Any]], agent: str
) -> None:
    pipes = [{"name": "mine", "steps": [{"step": first}, *steps]}]
    store = open_store("memory://")
    with Engine(store, clock=lambda: T0, persist_traces=False, workers=1, pipelines=pipes) as e:
        for i, r in enumerate(records):
            e.add(
                project="p", author=r["author"], kind=r["kind"], visibility=r["visibility"],
                to=r["to"] or (["cy"] if r["visibility"] == "direct" else []), tags=r["tags"], pinned=r["pinned"], session="s1",
                content=f"login form item {i} for @{agent}", created_at=T0 - r["age"] * DAY,
            )  # fmt: skip
        a = e.assemble("p", agent, "login form item", 4000, session="s1")
        seen = {rid for item in a.trace.items for rid in item["record_ids"]}
        by_id = {r.id: r for r in e.records("p", limit=100)}
        for rid in seen:
            assert by_id[rid].visible_to(agent), (rid, by_id[rid].visibility)
        # The same call on the defaults sees a superset of what any pipeline's steps let through.
        mine = {rid for item in a.trace.items if "mine" in item["sources"]
                for rid in item["record_ids"]}  # fmt: skip
        assert all(by_id[rid].visible_to(agent) for rid in mine)


# -- bad files: the file, the field, the fix; nothing changed ----------------------------------


def _nest(depth: int) -> Any:
    value: Any = "auth"
    for _ in range(depth):
        value = [value]
    return value


def _doc(*steps: dict[str, Any], name: str = "vector") -> str:
    return json.dumps({"pipelines": [{"name": name, "steps": list(steps)}]})


BAD: list[tuple[str, str | bytes, str, str]] = [
    ("wrong type", _doc({"step": "vector", "topK": "ten"}), "pipelines[0].steps[0].topK",
     "whole number"),
    ("bool for a count", _doc({"step": "vector", "topK": True}), "pipelines[0].steps[0].topK",
     "whole number"),
    ("fractional topK", _doc({"step": "vector", "topK": 10.5}), "pipelines[0].steps[0].topK",
     "whole number"),
    ("unknown step", _doc({"step": "sql", "query": "drop"}), "pipelines[0].steps[0].step",
     "use one of history"),
    ("unknown field", _doc({"step": "vector", "top_k": 10}), "pipelines[0].steps[0].top_k",
     "takes step, topK"),
    ("limit on a search", _doc({"step": "fulltext", "limit": 10}),
     "pipelines[0].steps[0].limit", "takes step, topK"),
    ("missing steps", json.dumps({"pipelines": [{"name": "x"}]}), "pipelines[0].steps",
     "add the field 'steps'"),
    ("missing name", json.dumps({"pipelines": [{"steps": [{"step": "kv"}]}]}),
     "pipelines[0].name", "add the field 'name'"),
    ("missing pipelines", "{}", "pipelines", "add the field 'pipelines'"),
    ("huge topK", _doc({"step": "vector", "topK": 10**12}), "pipelines[0].steps[0].topK",
     "from 1 to 1000"),
    ("negative topK", _doc({"step": "vector", "topK": -1}), "pipelines[0].steps[0].topK",
     "from 1 to 1000"),
    ("zero items", _doc({"step": "kv"}, {"step": "cap", "items": 0}),
     "pipelines[0].steps[1].items", "from 1 to 1000"),
    ("negative age", _doc({"step": "kv"}, {"step": "filter", "max_age_days": -3}),
     "pipelines[0].steps[1].max_age_days", "above 0"),
    ("1e400 is infinite", '{"pipelines": [{"name": "v", "steps": [{"step": "vector", '
     '"topK": 1e400}]}]}', "pipelines[0].steps[0].topK", "whole number"),
    ("NaN", '{"pipelines": [{"name": "v", "steps": [{"step": "kv"}, {"step": "filter", '
     '"max_age_days": NaN}]}]}', "(document)", "finite number"),
    ("Infinity", '{"pipelines": [{"name": "v", "steps": [{"step": "vector", '
     '"topK": Infinity}]}]}', "(document)", "finite number"),
    ("a number of 5000 digits", '{"pipelines": [{"name": "v", "steps": [{"step": "vector", '
     '"topK": ' + "9" * 5000 + "}]}]}", "(document)", "digits"),
    ("empty filter", _doc({"step": "kv"}, {"step": "filter"}), "pipelines[0].steps[1]",
     "at least one of kind, author, tags or max_age_days"),
    ("unknown kind", _doc({"step": "kv"}, {"step": "filter", "kind": ["secret"]}),
     "pipelines[0].steps[1].kind[0]", "use one of message"),
    ("filter first", _doc({"step": "filter", "kind": ["note"]}),
     "pipelines[0].steps[0].step", "start with a retrieval step"),
    ("name with spaces", _doc({"step": "kv"}, name="My Notes"), "pipelines[0].name",
     "lowercase letters"),
    ("repeated name", json.dumps({"pipelines": [
        {"name": "a", "steps": [{"step": "kv"}]}, {"name": "a", "steps": [{"step": "kv"}]}]}),
     "pipelines[1].name", "rename one"),
    ("repeated key", '{"pipelines": [], "pipelines": []}', "(document)", "appears twice"),
    ("lone surrogate in a name", _doc({"step": "kv"}, name="\ud800x"),
     "pipelines[0].name", "lone surrogate"),
    ("lone surrogate in an author", json.dumps({"pipelines": [{"name": "x", "steps": [
        {"step": "kv"}, {"step": "filter", "author": ["\udc80"]}]}]}),
     "pipelines[0].steps[1].author[0]", "lone surrogate"),
    ("NUL in a description", json.dumps({"pipelines": [], "description": "a\x00b"}),
     "description", "\\x00"),
    ("not UTF-8", b'{"pipelines": [{"name": "caf\xe9", "steps": [{"step": "kv"}]}]}', "(file)",
     "UTF-8"),
    ("deeply nested", "[" * 100_000 + "]" * 100_000, "(document)", "nest"),
    ("nested in a field", _doc({"step": "kv"}, {"step": "filter", "tags": _nest(18)}),
     "(document)", "nest"),
    ("JSON syntax", '{"pipelines": [', "line 1 column 16", "fix the JSON syntax"),
    ("too many steps", _doc(*[{"step": "kv"}] * 17), "pipelines[0].steps", "from 1 to 16"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "field", "fix"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_bad_file_names_the_file_the_field_and_the_fix(
    tmp_path: Path, text: str | bytes, field: str, fix: str
) -> None:
    f = tmp_path / "team.json"
    if isinstance(text, bytes):
        f.write_bytes(text)
    else:
        f.write_text(text, encoding="utf-8", errors="surrogatepass")
    problems = check_pipelines(f)
    assert problems, "the file was accepted"
    first = problems[0]
    assert first.file == str(f)
    assert first.field == field, first.message
    assert fix in first.fix, first.message
    assert str(f) in first.message and field in first.message
    with pytest.raises(RuleError) as err:
        load_pipelines(f)
    assert err.value.message == first.message


def test_a_bad_file_leaves_nothing_changed(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'e.db'}"
    with Engine.open(db, embedder=None) as e:
        e.add(project="p", author="ann", kind="note", content="the cache is redis")
        before = [r.id for r in e.records("p")]
    bad = tmp_path / "bad.json"
    bad.write_text(_doc({"step": "vector", "topK": 0}))
    store = open_store(db)
    try:
        with pytest.raises(RuleError, match=r"bad\.json: pipelines\[0\]\.steps\[0\]\.topK"):
            Engine(store, pipelines=bad)
    finally:
        store.close()
    with Engine.open(db, embedder=None) as e:
        assert [r.id for r in e.records("p")] == before
        assert e.traces("p") == []


def test_two_files_may_not_define_one_pipeline(tmp_path: Path) -> None:
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(_doc({"step": "vector", "topK": 5}))
    (problem,) = check_pipelines(tmp_path)
    assert problem.file == str(tmp_path / "b.json") and problem.field == "pipelines[0].name"
    assert "a.json" in problem.fix


def test_a_missing_path_is_an_error(tmp_path: Path) -> None:
    (problem,) = check_pipelines(tmp_path / "nowhere")
    assert "exists" in problem.fix


def test_in_memory_definitions_are_checked_too() -> None:
    with pytest.raises(RuleError, match=r"<pipelines>: pipelines\[0\]\.steps\[0\]\.topK"):
        pipelines_from([{"name": "vector", "steps": [{"step": "vector", "topK": 0}]}])
    assert isinstance(pipelines_from({"pipelines": [{"name": "x", "steps": [{"step": "kv"}]}]}),
                      Pipelines)  # fmt: skip


# -- the CLI ------------------------------------------------------------------------------------


def test_cli_checks_a_file_and_prints_the_resolved_pipelines(tmp_path: Path) -> None:
    f = tmp_path / "team.json"
    f.write_text(_doc({"step": "vector", "topK": 10}))
    out = CliRunner().invoke(cli, ["pipelines", "check", str(f), "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    vector = next(p for p in data["pipelines"] if p["name"] == "vector")
    assert vector["steps"] == [{"step": "vector", "topK": 10}]
    assert vector["file"] == str(f)
    assert [p["name"] for p in data["pipelines"]][:2] == ["history", "addressed"]
    text = CliRunner().invoke(cli, ["pipelines", "check", str(f)])
    assert "vector" in text.output and "topK 10" in text.output


def test_cli_check_lists_every_problem(tmp_path: Path) -> None:
    f = tmp_path / "team.json"
    f.write_text(json.dumps({"pipelines": [
        {"name": "vector", "steps": [{"step": "vector", "topK": 0}]},
        {"name": "x", "steps": [{"step": "nope"}]}]}))  # fmt: skip
    out = CliRunner().invoke(cli, ["pipelines", "check", str(f)])
    assert out.exit_code == 1
    assert f"{f}: pipelines[0].steps[0].topK" in out.output
    assert f"{f}: pipelines[1].steps[0].step" in out.output


def test_cli_prints_the_defaults() -> None:
    out = CliRunner().invoke(cli, ["pipelines", "default"])
    assert out.exit_code == 0
    assert json.loads(out.output) == json.loads(PACKAGED.read_text())


# -- replay runs the same definitions ----------------------------------------------------------


def _fulltext(a: Any) -> int:
    return int(next(s["candidates"] for s in a.trace.sources if s["name"] == "fulltext"))


def test_replay_runs_the_definitions_that_produced_the_trace(store: Store, tmp_path: Path) -> None:
    f = tmp_path / "team.json"
    f.write_text(_doc({"step": "fulltext", "topK": 3}, name="fulltext"))
    with Engine(store, clock=lambda: T0, pipelines=f) as e, Engine(store, clock=lambda: T0) as d:
        _seed(e)
        a = e.assemble("p", "bob", "login form session cookie", 3000)
        assert _fulltext(a) == 3
        e.flush()
        f.write_text(_doc({"step": "fulltext", "topK": 1}, name="fulltext"))  # edited since
        # Replayed by an engine on other definitions (the defaults), the file's ran again.
        again = d.replay("p", a.trace.id, "bob")
        assert _fulltext(again) == 3
        assert again.text == a.text
        got, was = again.trace.notes["pipelines"], a.trace.notes["pipelines"]
        assert got["sources"] == was["sources"]
        # A one-line change, replayed: the call's own definition runs, and the trace says so.
        lower = [{"name": "fulltext", "steps": [{"step": "fulltext", "topK": 2}]}]
        changed = d.replay("p", a.trace.id, "bob", pipelines=lower)
        assert _fulltext(changed) == 2
        assert changed.trace.notes["pipelines"]["from"] == "request"
        assert changed.trace.notes["pipelines"]["sources"]["fulltext"] != was["sources"]["fulltext"]
        d.flush()
        # ... and a replay of that replay runs the call's definitions again.
        assert _fulltext(d.replay("p", changed.trace.id, "bob")) == 2


def test_a_calls_own_pipelines_are_not_served_from_another_definitions_cache(store: Store) -> None:
    with Engine(store, clock=lambda: T0) as e:
        _seed(e)
        task = "login form session cookie"
        counts = [
            _fulltext(e.assemble("p", "bob", task, 3000, pipelines=pipes))
            for pipes in (
                [{"name": "fulltext", "steps": [{"step": "fulltext", "topK": 3}]}],
                [{"name": "fulltext", "steps": [{"step": "fulltext", "topK": 5}]}],
                None,
            )
        ]
        assert counts[:2] == [3, 5] and counts[2] > 5
        with pytest.raises(RuleError, match=r"<pipelines>: pipelines\[0\]\.steps\[0\]\.topK"):
            e.assemble("p", "bob", task, 3000, pipelines=[
                {"name": "fulltext", "steps": [{"step": "fulltext", "topK": 0}]}])  # fmt: skip


def test_the_cli_and_server_engine_read_the_pipelines_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(_doc({"step": "vector", "topK": 0}))
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("CONTEXTWRIGHT_PIPELINES", str(bad))
    out = CliRunner().invoke(cli, ["--db", db, "add", "-p", "acme", "-a", "ann", "hello"])
    assert out.exit_code != 0
    assert f"{bad}: pipelines[0].steps[0].topK" in out.output
    good = tmp_path / "good.json"
    good.write_text(_doc({"step": "fulltext", "topK": 2}, name="fulltext"))
    monkeypatch.setenv("CONTEXTWRIGHT_PIPELINES", str(good))
    for i in range(4):
        args = ["--db", db, "add", "-p", "acme", "-a", "ann", f"@bob login note {i}"]
        assert CliRunner().invoke(cli, args).exit_code == 0
    out = CliRunner().invoke(
        cli, ["--db", db, "assemble", "-p", "acme", "-a", "bob", "-t", "login note", "--json"]
    )
    assert out.exit_code == 0, out.output
    trace_id = json.loads(out.output)["trace_id"]
    out = CliRunner().invoke(cli, ["--db", db, "trace", "show", "-p", "acme", trace_id, "--json"])
    trace = json.loads(out.output)
    assert {s["name"]: s["candidates"] for s in trace["sources"]}["fulltext"] == 2
    assert trace["notes"]["pipelines"]["defined"]["fulltext"]["file"] == str(good)


def test_the_known_default_sizes_are_the_sources_own(tmp_path: Path) -> None:
    """A step at its source's default size runs the source unwrapped (retrieval.SOURCE_LIMITS):
    each size must be what the source reads by itself, and the packaged file must say it."""
    from contextwright.assembly.definitions import Pipeline as Def
    from contextwright.assembly.definitions import Step
    from contextwright.assembly.retrieval import SOURCE_LIMITS, STORE_STEPS

    for p in default_pipelines():
        (step,) = p.steps
        assert step.limit == SOURCE_LIMITS.get(step.step), p.name
    store = open_store(f"sqlite:///{tmp_path / 'sizes.db'}")
    with Engine(store, clock=lambda: T0) as e:
        rows: list[dict[str, Any]] = []
        for i in range(70):
            common = {"project": "p", "created_at": T0 - i}
            rows += [
                {**common, "author": "bob", "kind": "message", "session": "s1",
                 "content": f"login form turn {i}"},
                {**common, "author": "ann", "kind": "note", "content": f"@bob login form {i}"},
                {**common, "author": "ann", "kind": "task", "content": f"open task {i}"},
                {**common, "author": "ann", "kind": "decision", "content": f"decision {i}"},
                {**common, "author": "ann", "kind": "note", "pinned": True,
                 "content": f"pinned {i}"},
            ]  # fmt: skip
        e.add_many(rows)
        for i in range(30):
            e.kv_set("p", f"k{i}", f"value {i}")
        ctx = _ctx(store)
        ctx.task = "login form " + " ".join(f"@k{i}" for i in range(30))
        for name, make in STORE_STEPS.items():
            size = SOURCE_LIMITS[name]
            own = [c.key for c in make().run(ctx)]

            def sized(n: int, name: str = name, make: Any = make) -> list[str]:
                wrapped = PipelineSource(Def("x", (Step(name, limit=n),)), [lambda: make()])
                return [c.key for c in wrapped.run(ctx)]

            assert sized(size) == own, name
            assert sized(size - 1) != own, f"{name}: the store does not reach its size"


# -- over HTTP: a replay with pipelines -----------------------------------------------------------

HOSTILE_REPLAYS: list[tuple[Any, str]] = [
    ([{"name": "fulltext", "steps": [{"step": "fulltext", "topK": 10**9}]}], "steps[0].topK"),
    ([{"name": "x", "steps": [{"step": "sql"}]}], "steps[0].step"),
    ([{"name": "x"}], "pipelines[0].steps"),
    ([{"name": "x", "steps": [{"step": "kv"}, {"step": "filter", "author": ["\ud800"]}]}],
     "author[0]"),
    ([{"name": "x", "steps": [{"step": "kv"}, {"step": "filter", "tags": _nest(40)}]}],
     "nest"),
]  # fmt: skip


@contextmanager
def _acme_over_http(tmp_path: Path) -> Iterator[tuple[Engine, httpx.Client]]:
    """A seeded acme engine on a SQLite file, served by uvicorn, and a client with acme's key."""
    import httpx

    from contextwright.server import create_app
    from contextwright.settings import Settings
    from servers import ACME_KEY, KEYS, auth, running

    engine = Engine.open(f"sqlite:///{tmp_path / 'http.db'}", embedder=None)
    try:
        _seed_acme(engine)
        with (
            running(create_app(engine, Settings(api_keys=KEYS))) as base,
            httpx.Client(base_url=base, headers=auth(ACME_KEY)) as client,
        ):
            yield engine, client
    finally:
        engine.close()


def test_a_replay_over_http_takes_pipelines_and_refuses_bad_ones(tmp_path: Path) -> None:
    with _acme_over_http(tmp_path) as (engine, client):
        a = client.post("/v1/projects/acme/assemble",
                        json={"agent": "bob", "task": "login form", "budget": 3000})  # fmt: skip
        assert a.status_code == 200, a.text
        url = f"/v1/projects/acme/traces/{a.json()['trace_id']}/replay"
        lower = [{"name": "fulltext", "steps": [{"step": "fulltext", "topK": 2}]}]
        r = client.post(url, json={"pipelines": lower})
        assert r.status_code == 200, r.text
        runs = {s["name"]: s["candidates"] for s in r.json()["trace"]["sources"]}
        assert runs["fulltext"] == 2
        assert "pipelines" in r.json()["diff"]["request"]
        engine.flush()
        before = len(engine.traces("acme", limit=100))
        for body, field in HOSTILE_REPLAYS:
            raw = json.dumps({"pipelines": body})  # escapes the lone surrogate as JSON may
            r = client.post(url, content=raw, headers={"content-type": "application/json"})
            assert r.status_code == 422, (field, r.text)
            assert field in r.text and "<pipelines>" in r.text, r.text
        engine.flush()
        assert len(engine.traces("acme", limit=100)) == before  # nothing stored


def test_an_assemble_over_http_takes_pipelines_and_refuses_bad_ones(tmp_path: Path) -> None:

    with _acme_over_http(tmp_path) as (engine, client):
        url = "/v1/projects/acme/assemble?trace=true"
        body: dict[str, Any] = {"agent": "bob", "task": "login form", "budget": 3000}

        def fulltext(r: httpx.Response) -> int:
            assert r.status_code == 200, r.text
            runs = {s["name"]: s["candidates"] for s in r.json()["trace"]["sources"]}
            return int(runs["fulltext"])

        assert fulltext(client.post(url, json=body)) > 2
        for k in (2, 3):
            lower = [{"name": "fulltext", "steps": [{"step": "fulltext", "topK": k}]}]
            r = client.post(url, json={**body, "pipelines": lower})
            assert fulltext(r) == k
            assert r.json()["trace"]["notes"]["pipelines"]["from"] == "request"
        engine.flush()
        before = len(engine.traces("acme", limit=100))
        for bad, field in HOSTILE_REPLAYS:
            raw = json.dumps({**body, "pipelines": bad})
            r = client.post(url, content=raw, headers={"content-type": "application/json"})
            assert r.status_code == 422, (field, r.text)
            assert field in r.text and "<pipelines>" in r.text, r.text
        r = client.post(url, json={**body, "pipelines": {"name": "fulltext"}})
        assert r.status_code == 422 and "pipelines" in r.text, r.text
        engine.flush()
        assert len(engine.traces("acme", limit=100)) == before  # nothing stored


def test_the_mcp_assemble_tool_takes_pipelines_and_refuses_bad_ones() -> None:
    import asyncio

    from mcp import Client

    from contextwright.mcp.server import build_server

    engine = Engine.open("memory://", embedder=None)
    _seed_acme(engine)
    args: dict[str, Any] = {"project": "acme", "agent": "bob", "task": "login form",
                            "budget": 3000}  # fmt: skip

    async def go() -> list[Any]:
        async with Client(build_server(engine)) as client:
            out = []
            for topK in (2, 0):
                lower = [{"name": "fulltext", "steps": [{"step": "fulltext", "topK": topK}]}]
                out.append(await client.call_tool("assemble_context", {**args, "pipelines": lower}))
            return out

    try:
        good, bad = asyncio.run(go())
        assert not good.is_error, good
        engine.flush()
        (trace,) = engine.traces("acme")
        assert trace.notes["pipelines"]["from"] == "request"
        assert {s["name"]: s["candidates"] for s in trace.sources}["fulltext"] == 2
        assert bad.is_error and "pipelines[0].steps[0].topK" in bad.content[0].text
        engine.flush()
        assert len(engine.traces("acme")) == 1  # the refused call stored no trace
    finally:
        engine.close()


def _seed_acme(engine: Engine) -> None:
    engine.register_agent("acme", "bob", "developer")
    for i in range(8):
        engine.add(project="acme", author="ann", kind="note", content=f"login form note {i}")


def test_a_pipeline_whose_vector_step_waits_for_the_embedder(store: Store) -> None:
    """Full text and vectors in one pipeline: with vectors off it runs on full text alone, on
    the pool's terms of the vector source (a bounded local read), and is never cached."""
    both = [{"name": "both", "steps": [{"step": "fulltext", "topK": 5}, {"step": "vector"}]}]
    with Engine(store, clock=lambda: T0, pipelines=both) as e:
        _seed(e)
        src = next(s for s in e.sources if s.name == "both")
        assert isinstance(src, PipelineSource)
        assert src.inline == "local" and not src.cacheable
        assert _count(e, "both") == 5


def test_the_docs_show_the_default_definitions_verbatim() -> None:
    text = (Path(__file__).parents[1] / "docs" / "pipelines.md").read_text()
    section = text.split("## The default definitions", 1)[1]
    block = section.split("```json\n", 1)[1].split("```", 1)[0]
    assert block == PACKAGED.read_text()
