"""Scoring that explains itself: named components in the trace (role, scope, recency, relevance,
addressed, open, resolved), reply chains, and superseded decisions shown only when asked for."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright import Engine, ValidationError
from contextwright.assembly.candidates import Candidate
from contextwright.assembly.scoring import (
    DAY,
    ScoringConfig,
    finish_all,
    fuse_relevance,
    item_prefix,
    mark_named,
    recency,
    scope_component,
    score,
    substance,
    topic,
)
from contextwright.ports import Store
from contextwright.records import Record
from contextwright.roles import RoleProfile

NOW = 1_800_000_000.0


@pytest.fixture
def eng(store: Store) -> Engine:
    e = Engine(store, clock=lambda: NOW)
    return e


def _item(result: Any, needle: str) -> dict[str, Any]:
    for d in result.trace.items:
        if needle in d["preview"]:
            return d  # type: ignore[no-any-return]
    raise AssertionError(f"{needle!r} not in the trace")


def _texts(result: Any, section: str) -> list[str]:
    return [i.text for i in result.sections.get(section, [])]


def test_components_are_named_in_the_trace(eng: Engine) -> None:
    eng.register_agent("p", "bob", "developer")
    eng.add(
        project="p",
        author="alice",
        kind="decision",
        content="@bob tokens are refreshed by the gateway",
        created_at=NOW - DAY,
        milestone="m1",
    )
    result = eng.assemble("p", "bob", "token refresh gateway", budget=2000, milestone="m1")
    d = _item(result, "tokens are refreshed")
    comps = d["components"]
    assert {"bm25", "relevance", "recency", "role", "addressed", "scope", "prior"} <= set(comps)
    assert comps["recency"] == pytest.approx(0.5 ** (1 / 3), abs=1e-3)  # 1 day, half-life 3 days
    assert comps["role"] == 0.9  # the developer profile's weight for decisions
    assert comps["addressed"] == 1.0 and comps["scope"] == 1.0
    assert comps["relevance"] == comps["bm25"] == 1.0  # no embedder: full text alone
    assert "matches the task" in " ".join(d["reasons"])
    assert "decision in force" in d["reasons"]


def test_score_is_the_weighted_sum_of_its_components(eng: Engine) -> None:
    eng.register_agent("p", "bob", "reviewer")
    for i in range(8):
        eng.add(
            project="p",
            author=["alice", "carol"][i % 2],
            kind=["message", "decision", "task", "question"][i % 4],
            content=f"cache layer note {i} about invalidation @bob" if i % 3 else f"cache {i}",
            created_at=NOW - i * 3600,
        )
    result = eng.assemble("p", "bob", "cache invalidation", budget=3000)
    w = eng.scoring.weights
    for d in result.trace.items:
        if d["kind"] == "synthetic":
            continue
        comps = d["components"]
        total = sum(w.get(k, 1.0) * v for k, v in comps.items() if k != "role_source")
        assert d["score"] == pytest.approx(total * comps.get("role_source", 1.0), abs=2e-3)


def test_reviewer_and_developer_see_different_things(eng: Engine) -> None:
    for i in range(6):
        at = NOW - i * 600
        eng.add(
            project="p",
            author="alice",
            kind="file",
            content=f"auth/session_{i}.py handles login tokens",
            created_at=at,
        )
        eng.add(
            project="p",
            author="carol",
            kind="artifact",
            content=f"review notes {i}: login tokens handled",
            created_at=at,
        )
    eng.register_agent("p", "dev", "developer")
    eng.register_agent("p", "rev", "reviewer")
    dev = eng.assemble("p", "dev", "login tokens", budget=4000, sources=["fulltext"])
    rev = eng.assemble("p", "rev", "login tokens", budget=4000, sources=["fulltext"])

    def kinds(result: Any) -> list[str]:
        items = result.sections["knowledge"] + result.sections.get("suggestions", [])
        return [i.candidate.record.kind for i in items][:6]

    assert kinds(dev) == ["file"] * 6
    assert kinds(rev) == ["artifact"] * 6
    # Under a tight budget, each keeps what matters to its role.
    small_dev = eng.assemble("p", "dev", "login tokens", budget=240, sources=["fulltext"])
    small_rev = eng.assemble("p", "rev", "login tokens", budget=240, sources=["fulltext"])
    dev_kept = {
        d["kind"]
        for d in small_dev.trace.items
        if d["decision"] == "kept" and d["kind"] != "synthetic"
    }
    rev_kept = {
        d["kind"]
        for d in small_rev.trace.items
        if d["decision"] == "kept" and d["kind"] != "synthetic"
    }
    assert dev_kept == {"file"} and rev_kept == {"artifact"}


def test_a_role_can_switch_a_source_off(eng: Engine) -> None:
    eng.register_agent("p", "pm", "pm", profile={"name": "pm", "source_weights": {"fulltext": 0.0}})
    eng.add(project="p", author="alice", content="the billing export runs nightly")
    result = eng.assemble("p", "pm", "billing export", budget=2000, sources=["fulltext"])
    d = _item(result, "billing export runs")
    assert d["components"]["role_source"] == 0.0 and d["score"] == 0.0


def test_recency_half_life_is_configurable(store: Store) -> None:
    assert recency(NOW - 2 * DAY, NOW, 2.0) == pytest.approx(0.5)
    assert recency(NOW + 10, NOW, 2.0) == 1.0  # the future is not fresher than now
    e = Engine(store, clock=lambda: NOW, scoring=ScoringConfig(half_life_days=7))
    e.register_agent("p", "bob")
    e.add(
        project="p",
        author="alice",
        content="old but relevant: the queue drains at midnight",
        created_at=NOW - 14 * DAY,
    )
    e.add(project="p", author="alice", content="yesterday: lunch menu", created_at=NOW - DAY)
    result = e.assemble("p", "bob", "when does the queue drain", budget=2000)
    old = _item(result, "queue drains")
    assert old["components"]["recency"] == pytest.approx(0.25, abs=1e-3)
    # Recent weighs more, but not exclusively: the relevant old record still ranks first.
    assert _texts(result, "knowledge")[0].endswith("old but relevant: the queue drains at midnight")
    with pytest.raises(ValidationError):
        ScoringConfig(half_life_days=0)
    with pytest.raises(ValidationError):
        ScoringConfig(fusion="average")


def test_project_scope_prefers_the_milestone(eng: Engine) -> None:
    eng.register_agent("p", "bob")
    eng.add(project="p", author="a", content="schema migration plan for m2", milestone="m2")
    eng.add(project="p", author="a", content="schema migration plan for m1", milestone="m1")
    eng.add(project="p", author="a", content="schema migration plan, general")
    eng.add(project="q", author="a", content="schema migration plan in another project")
    result = eng.assemble("p", "bob", "schema migration plan", budget=2000, milestone="m2")
    assert _item(result, "for m2")["components"]["scope"] == 1.0
    assert _item(result, "general")["components"]["scope"] == 0.5
    assert _item(result, "for m1")["components"]["scope"] == 0.0
    assert not any("another project" in d["preview"] for d in result.trace.items)
    order = [t for t in _texts(result, "knowledge") if "schema" in t]
    assert order[0].endswith("for m2")


def test_addressed_and_open_items(eng: Engine) -> None:
    eng.add(
        project="p", author="alice", kind="task", content="@bob migrate the cron jobs", to=["bob"]
    )
    eng.add(project="p", author="alice", kind="question", content="who owns the cron host?")
    result = eng.assemble("p", "bob", "cron", budget=2000)
    task = _item(result, "migrate the cron")
    assert task["components"]["addressed"] == 1.0 and task["components"]["open"] == 1.0
    assert task["section"] == "state"  # an open task assigned to you is state
    q = _item(result, "who owns the cron")
    assert q["components"]["open"] == 1.0 and "addressed" not in q["components"]


def test_a_question_is_shown_with_its_answer(eng: Engine) -> None:
    eng.register_agent("p", "bob")
    q1 = eng.add(
        project="p",
        author="alice",
        kind="question",
        content="which port does the cache listen on?",
        created_at=NOW - 60,
    )
    eng.add(
        project="p",
        author="carol",
        content="the cache listens on 6380",
        reply_to=q1.id,
        created_at=NOW - 30,
    )
    eng.add(
        project="p",
        author="alice",
        kind="question",
        content="which port does the cache proxy use?",
        created_at=NOW - 60,
    )
    result = eng.assemble("p", "bob", "cache port", budget=3000)
    texts = _texts(result, "knowledge")
    answered = next(t for t in texts if "listen on?" in t)
    assert "\n  ↳ answer by carol: carol (" in answered and "listens on 6380" in answered
    # The answer is not shown a second time on its own.
    assert (
        sum(
            "listens on 6380" in t
            for items in result.sections.values()
            for t in [i.text for i in items]
        )
        == 1
    )
    a = _item(result, "listen on?")
    b = _item(result, "proxy use?")
    assert a["components"]["resolved"] == 1.0 and "open" not in a["components"]
    assert b["components"]["open"] == 1.0
    assert a["score"] < b["score"]  # an answered question drops in weight
    assert len(a["record_ids"]) == 2
    dropped = [d for d in result.trace.items if d["reason"].startswith("shown beside question")]
    assert all(d["decision"] == "dropped" for d in dropped)


def test_a_resolved_question_drops_in_weight(eng: Engine) -> None:
    eng.register_agent("p", "bob")
    q = eng.add(project="p", author="alice", kind="question", content="is the cdn purge automatic?")
    eng.add(project="p", author="alice", kind="question", content="is the cdn warmup automatic?")
    eng.resolve(q.project, q.id, by="alice")
    result = eng.assemble("p", "bob", "cdn automatic", budget=2000)
    assert _item(result, "purge")["components"]["resolved"] == 1.0
    assert _item(result, "purge")["score"] < _item(result, "warmup")["score"]


def _decisions(eng: Engine) -> tuple[Any, Any]:
    eng.register_agent("p", "bob", "developer")
    old = eng.add(
        project="p",
        author="alice",
        kind="decision",
        content="we store sessions in redis",
        created_at=NOW - 7200,
    )
    new = eng.add(
        project="p",
        author="alice",
        kind="decision",
        content="we store sessions in postgres",
        supersedes=old.id,
        created_at=NOW - 60,
    )
    return old, new


def test_a_superseded_decision_never_appears_by_default(eng: Engine) -> None:
    _old, new = _decisions(eng)
    result = eng.assemble("p", "bob", "store sessions redis", budget=3000)
    all_text = "\n".join(i.text for items in result.sections.values() for i in items)
    assert "in redis" not in all_text and "in postgres" in all_text
    assert _item(result, "in redis")["reason"] == f"superseded by {new.id}"


def test_a_superseded_decision_appears_beside_its_replacement_when_asked(eng: Engine) -> None:
    old, new = _decisions(eng)
    result = eng.assemble("p", "bob", "store sessions", budget=3000, include_superseded=True)
    texts = [t for t in _texts(result, "knowledge") if "sessions" in t]
    assert len(texts) == 1  # one item: the decision in force with the old one beside it
    assert texts[0].startswith("- alice (decision, ")
    assert "we store sessions in postgres" in texts[0]
    assert f"\n  ↳ superseded by {new.id}: alice (decision, " in texts[0]
    assert texts[0].index("postgres") < texts[0].index("redis")
    assert _item(result, "postgres")["record_ids"] == [new.id, old.id]
    # Found only through the old text, the replacement is fetched and shown with it.
    only_old = eng.assemble(
        "p", "bob", "redis", budget=3000, include_superseded=True, sources=["fulltext"]
    )
    texts = [t for t in _texts(only_old, "knowledge") if "sessions" in t]
    assert len(texts) == 1 and "postgres" in texts[0] and "redis" in texts[0]


def test_a_chain_of_supersessions(eng: Engine) -> None:
    a = eng.add(
        project="p", author="x", kind="decision", content="deploys on fridays", created_at=NOW - 300
    )
    b = eng.add(
        project="p",
        author="x",
        kind="decision",
        content="deploys on thursdays",
        supersedes=a.id,
        created_at=NOW - 200,
    )
    c = eng.add(
        project="p",
        author="x",
        kind="decision",
        content="deploys any weekday",
        supersedes=b.id,
        created_at=NOW - 100,
    )
    result = eng.assemble("p", "x", "deploys", budget=3000, include_superseded=True)
    text = next(t for t in _texts(result, "knowledge") if "weekday" in t)
    assert f"superseded by {c.id}: " in text and f"superseded by {b.id}: " in text
    assert text.index("thursdays") < text.index("fridays")


def _cand(key: str, **components: float) -> Candidate:
    return Candidate(
        key=key, section="knowledge", source="t", text=key, components=dict(components)
    )


def test_fusion_without_vectors_is_full_text() -> None:
    cands = [_cand("a", bm25=1.0), _cand("b", bm25=0.4), _cand("c", prior=1.0)]
    fuse_relevance(cands, ScoringConfig())
    assert [c.components.get("relevance") for c in cands] == [1.0, 0.4, None]


@pytest.mark.parametrize(
    ("fusion", "expected"),
    [
        ("sum", {"a": 0.5, "b": 0.7, "c": 0.45}),
        ("max", {"a": 1.0, "b": 0.8, "c": 0.9}),
    ],
)
def test_fusion_of_bm25_and_vector(fusion: str, expected: dict[str, float]) -> None:
    cands = [_cand("a", bm25=1.0), _cand("b", bm25=0.6, vector=0.8), _cand("c", vector=0.9)]
    equal = {"bm25": 1.0, "vector": 1.0}
    fuse_relevance(cands, ScoringConfig(fusion=fusion, signal_weights=equal))
    assert {c.key: c.components["relevance"] for c in cands} == pytest.approx(expected)


def test_default_fusion_leans_on_full_text() -> None:
    cands = [_cand("a", bm25=1.0), _cand("b", bm25=0.6, vector=0.8), _cand("c", vector=0.9)]
    fuse_relevance(cands, ScoringConfig())  # bm25 1, vector 0.75: weighted mean
    got = {c.key: c.components["relevance"] for c in cands}
    assert got == pytest.approx({"a": 1 / 1.75, "b": 1.2 / 1.75, "c": 0.675 / 1.75}, abs=1e-6)


def test_rrf_fusion_ranks() -> None:
    cands = [_cand("a", bm25=1.0), _cand("b", bm25=0.6, vector=0.8), _cand("c", vector=0.9)]
    equal = {"bm25": 1.0, "vector": 1.0}
    fuse_relevance(cands, ScoringConfig(fusion="rrf", rrf_k=60, signal_weights=equal))
    rel = {c.key: c.components["relevance"] for c in cands}
    # b is ranked in both lists, so it beats a and c, each first in one list only.
    assert rel["b"] > rel["a"] == pytest.approx(rel["c"])
    assert rel["a"] == pytest.approx((1 / 61) / (2 / 61))


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {},
            optional={
                "bm25": st.floats(0, 1),
                "vector": st.floats(0, 1),
            },
        ),
        min_size=1,
        max_size=8,
    ),
    st.sampled_from(["sum", "rrf", "max"]),
)
def test_fused_relevance_stays_in_0_1(signals: list[dict[str, float]], fusion: str) -> None:
    cands = [_cand(str(i), **s) for i, s in enumerate(signals)]
    fuse_relevance(cands, ScoringConfig(fusion=fusion))
    for c in cands:
        rel = c.components.get("relevance")
        if c.components.keys() & {"bm25", "vector"}:
            assert rel is not None and -1e-9 <= rel <= 1 + 1e-6
            assert not math.isnan(rel)
        else:
            assert rel is None


def test_score_multiplies_role_source() -> None:
    c = _cand("x", relevance=1.0, recency=0.5, role_source=0.5)
    cfg = ScoringConfig()
    w = cfg.weights
    assert score(c, cfg) == pytest.approx((w["relevance"] * 1.0 + w["recency"] * 0.5) * 0.5)


def test_bad_selection_options(eng: Engine) -> None:
    eng.register_agent("p", "bob")
    with pytest.raises(ValidationError) as err:
        eng.assemble("p", "bob", "x", budget=1000, include_superseded="yes")  # type: ignore[arg-type]
    assert err.value.field == "include_superseded"
    with pytest.raises(ValidationError) as err:
        eng.assemble("p", "bob", "x", budget=1000, task_kind="")
    assert err.value.field == "task_kind"


@settings(max_examples=25, deadline=None)
@given(
    links=st.lists(st.integers(min_value=-1, max_value=8), min_size=1, max_size=9),
    include=st.booleans(),
)
def test_superseded_records_only_ever_appear_beside_a_replacement(
    links: list[int], include: bool
) -> None:
    """Decision i supersedes decision links[i] when that is an earlier one; whatever the chains,
    a superseded text is never its own item, and appears only when asked for."""
    from contextwright.stores import open_store

    e = Engine(open_store("memory://"), clock=lambda: NOW, workers=1)
    e.register_agent("p", "bob")
    ids: list[str] = []
    for i, target in enumerate(links):
        sup = ids[target] if 0 <= target < i and target < len(ids) else None
        r = e.add(
            project="p",
            author="a",
            kind="decision",
            content=f"policy number {i} for retries",
            supersedes=sup,
            created_at=NOW - 1000 + i,
        )
        ids.append(r.id)
    superseded = {r.id for r in e.store.get_many("p", ids) if r.status == "superseded"}
    result = e.assemble("p", "bob", "policy retries", budget=4000, include_superseded=include)
    for items in result.sections.values():
        for item in items:
            recs = item.candidate.record_ids
            if not recs:
                continue
            assert recs[0] not in superseded  # an item leads with a record in force
            extra = set(recs[1:]) & superseded
            assert include or not extra
    e.close()


def test_item_prefix_names_author_date_and_only_the_kind_and_status_worth_saying(
    eng: Engine,
) -> None:
    may_25 = 1685016000.0  # 2023-05-25 12:00 UTC
    msg = eng.add(project="p", author="Caroline", content="hi", created_at=may_25)
    assert item_prefix(msg) == "- Caroline (25 May 2023):"
    q = eng.add(project="p", author="alice", kind="question", content="port?", created_at=may_25)
    assert item_prefix(q) == "- alice (question, 25 May 2023, open):"
    d = eng.add(project="p", author="rex", kind="decision", content="use pg", created_at=may_25)
    assert item_prefix(d) == "- rex (decision, 25 May 2023):"


def test_topic_leaves_out_the_names_of_the_projects_people() -> None:
    names = {"Melanie", "Caroline", "rex"}
    assert topic("What books has Melanie read?", names) == "What books has read?"
    assert topic("What did Caroline's grandma give her?", names) == "What did grandma give her?"
    assert topic("ask @rex and REX about the cache", names) == "ask @ and about the cache"
    # A word that only contains a name is not a name; a task of names alone stays as it is.
    assert topic("the rexford migration", names) == "the rexford migration"
    assert topic("see docs/rex.md and rex.", names) == "see docs/rex.md and ."
    assert topic("Melanie and Caroline?", names) == "Melanie and Caroline?"
    assert topic("Melanie?", names) == "Melanie?"
    assert topic("no names here", set()) == "no names here"


@settings(max_examples=50, deadline=None)
@given(st.data())
def test_topic_never_returns_an_empty_search_for_a_task_with_words(data: st.DataObject) -> None:
    names = data.draw(st.lists(st.text(min_size=1, max_size=8), max_size=4))
    words = st.sampled_from([*names, "fix", "the", "cache", "of", "?", "docs/x.md"])
    task = data.draw(st.one_of(st.text(max_size=80), st.lists(words, max_size=8).map(" ".join)))
    out = topic(task, names)
    if any(ch.isalnum() for ch in task):
        assert any(ch.isalnum() for ch in out)
    lowered = out.lower()
    for n in names:
        if out != task and n.strip() and n.isalpha():
            # Every occurrence of a name standing alone between spaces is gone.
            assert re.search(rf"(?<!\S){re.escape(n.lower())}(?!\S)", lowered) is None


def test_full_text_searches_the_topic_and_the_trace_says_so(eng: Engine) -> None:
    eng.register_agent("p", "bot")
    eng.add(project="p", author="melanie", kind="message", content="melanie here, hi melanie")
    eng.add(project="p", author="caroline", kind="message", content="I read Charlotte's Web")
    result = eng.assemble("p", "bot", "what books has melanie read", 2000, format="markdown")
    assert result.trace.notes["search_text"] == "what books has read"
    # A new author is a name from the next call on (the cache follows the store version).
    eng.add(project="p", author="books", kind="message", content="a person named books")
    again = eng.assemble("p", "bot", "what books has melanie read", 2000, format="markdown")
    assert again.trace.notes["search_text"] == "what has read"


@pytest.mark.parametrize(
    "task,named",
    [
        ("what did Rex say about the cache?", True),
        ("Rex's review of the cache", True),
        ("ask @rex about the cache", True),
        ("the rexford cache", False),
        ("see docs/rex.md for the cache", False),
        ("", False),
    ],
)
def test_named_marks_records_whose_author_the_task_names(task: str, named: bool) -> None:
    from contextwright.records import build_record

    r = build_record({"project": "p", "author": "rex", "content": "the cache"}, len)
    c = Candidate(key=r.id, section="knowledge", source="t", text=r.content, records=(r,))
    mark_named([c], task)
    assert ("named" in c.components) is named
    # The same definition of a name decides what the search leaves out.
    assert (topic(task, {"rex"}) != task) is named


def _reference_components(
    c: Candidate, now: float, agent: str, role: RoleProfile, cfg: ScoringConfig, session: str | None
) -> dict[str, float]:
    """What finish_all adds, spelled out with the module's own helpers (it inlines them)."""
    comps = dict(c.components)
    r = c.records[0]
    comps["recency"] = round(recency(r.created_at, now, cfg.half_life_days), 6)
    comps["role"] = role.kind_weight(r.kind)
    if agent in r.to or agent in r.mentions:
        comps["addressed"] = 1.0
    answered = comps.get("resolved", 0.0) > 0
    if r.status == "resolved" and r.kind == "question":
        comps["resolved"] = 1.0
        answered = True
    if r.status == "open" and not answered:
        comps["open"] = 1.0
    scope = scope_component(r, None, session)
    if scope is not None:
        comps["scope"] = scope
    if c.section in ("knowledge", "suggestions"):
        comps["substance"] = round(substance(r.tokens), 6)
    if role.source_weight(c.source) != 1.0:
        comps["role_source"] = role.source_weight(c.source)
    return comps


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(NOW - 90 * DAY, NOW + DAY),
            st.sampled_from(["message", "question", "decision", "task"]),
            st.sampled_from([None, "open", "resolved", "active"]),
            st.sampled_from(["knowledge", "suggestions", "history", "open_items"]),
            st.sampled_from(["fulltext", "history", "addressed"]),
            st.sampled_from([None, "s1", "s2"]),
            st.integers(0, 200),
            st.booleans(),
            st.fixed_dictionaries({}, optional={"bm25": st.floats(0, 1), "resolved": st.just(1.0)}),
        ),
        min_size=1,
        max_size=12,
    ),
    st.sampled_from([None, "s1"]),
)
def test_finish_all_scores_as_score_does(rows: list[tuple[Any, ...]], session: str | None) -> None:
    """finish_all inlines `recency`, `scope_component`, `substance` and `score` (it runs for
    every candidate of every call): its components and scores are theirs, to the bit."""
    role = RoleProfile("r", kind_weights={"decision": 0.9}, source_weights={"history": 0.5})
    cfg = ScoringConfig()
    cands = []
    for i, (at, kind, status, section, source, sess, tokens, mention, comps) in enumerate(rows):
        r = Record(
            id=f"r{i}", project="p", author="a", kind=kind, content="x", created_at=at,
            tokens=tokens, content_hash=f"h{i}", session=sess, status=status,
            mentions=("bob",) if mention else (),
        )  # fmt: skip
        cands.append(
            Candidate(key=r.id, section=section, source=source, text="x", records=(r,),
                      components=dict(comps))
        )  # fmt: skip
    expected = [_reference_components(c, NOW, "bob", role, cfg, session) for c in cands]
    finish_all(cands, now=NOW, agent="bob", role=role, config=cfg, session=session)
    for c, comps in zip(cands, expected, strict=True):
        assert c.components == comps
        assert c.score == score(c, cfg)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.floats(0, 1)), min_size=1, max_size=10))
def test_fusion_of_full_text_alone_is_the_weighted_mean(bm25: list[float | None]) -> None:
    """With one signal, fuse_relevance takes a shortcut; it gives what the general sum gives."""
    cands = [_cand(str(i), **({} if v is None else {"bm25": v})) for i, v in enumerate(bm25)]
    cfg = ScoringConfig(signal_weights={"bm25": 0.7, "vector": 0.75})
    fuse_relevance(cands, cfg)
    for c, v in zip(cands, bm25, strict=True):
        assert c.components.get("relevance") == (None if v is None else round(0.7 * v / 0.7, 6))
