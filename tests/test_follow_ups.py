"""The follow-up reads of an assemble call (chains.read_links): the replies to the candidate
questions, the replacements of superseded candidates and the neighbours of the likely strong
matches (locality.likely_anchors), read in one round trip where the store can (PostgreSQL's
`follow_ups`), and the window the same as read one by one."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import contextwright.assembly.selection as selection
from contextwright import Engine
from contextwright.assembly.candidates import Candidate
from contextwright.assembly.locality import (
    LocalityConfig,
    _anchors,
    _fused,
    _picked,
    _ranked,
    _relevance,
    likely_anchors,
)
from contextwright.assembly.scoring import ScoringConfig, fuse_relevance
from contextwright.ports import BatchNeighbours, Query, ReadsFollowUps, Store, capable
from contextwright.records import Record

NOW = 1_800_000_000.0

_cand = st.tuples(
    st.sampled_from([0.0, 0.1, 0.2, 0.5, 0.7, 0.9, 1.0]),  # bm25 (ties on purpose)
    st.sampled_from(["s1", "s2", None]),  # session
    st.booleans(),  # asks something
    st.booleans(),  # an answer the chains may drop
    st.booleans(),  # and does
)


def _candidates(specs: list[tuple[float, str | None, bool, bool, bool]]) -> list[Candidate]:
    out = []
    for i, (bm25, session, asks, _, _) in enumerate(specs):
        r = Record(
            id=f"r{i:03d}", project="p", author="a", kind="message",
            content="why?" if asks else "because", created_at=NOW + i, tokens=2,
            content_hash=str(i), session=session,
        )  # fmt: skip
        comps = {"bm25": bm25} if bm25 else {}
        out.append(Candidate(r.id, "knowledge", "fulltext", r.content, (r,), components=comps))
    return out


def _own_anchors(kept: list[Candidate], cfg: LocalityConfig) -> set[Any]:
    """The anchors `spread` reads for the candidates the chains kept."""
    copies = [dataclasses.replace(c, components=dict(c.components)) for c in kept]
    fuse_relevance(copies, ScoringConfig())
    by_key = {c.key: c for c in copies}
    *_, reads = _picked(_ranked(_relevance(copies)), by_key, cfg.top, cfg.askers)
    return set(_anchors(reads))


@settings(max_examples=300, deadline=None)
@given(st.lists(_cand, max_size=40), st.integers(1, 6), st.integers(0, 8))
def test_likely_anchors_hold_the_calls_own_whichever_answers_are_dropped(
    specs: list[tuple[float, str | None, bool, bool, bool]], top: int, askers: int
) -> None:
    cfg = LocalityConfig(top=top, askers=askers)
    current = _candidates(specs)
    droppable = [c for c, s in zip(current, specs, strict=True) if s[3]]
    dropped = {c.key for c, s in zip(current, specs, strict=True) if s[3] and s[4]}
    likely = likely_anchors(current, droppable, ScoringConfig(), cfg)
    kept = [c for c in current if c.key not in dropped]
    assert _own_anchors(kept, cfg) <= set(likely)
    if not droppable:  # exactly the call's own, in its order: the read cache's key
        assert set(likely) == _own_anchors(current, cfg)
    assert all(not c.components.get("relevance") for c in current)  # scored on copies only


_signals = st.fixed_dictionaries(
    {},
    optional={
        "bm25": st.floats(0, 1),
        "vector": st.floats(0, 1),
        "relevance": st.floats(0, 1),  # set by a source itself
    },
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(_signals, st.sampled_from(["knowledge", "suggestions", "history"]))),
    st.sampled_from(["sum", "max", "rrf"]),
)
def test_the_likely_ranking_is_fuse_relevances(
    specs: list[tuple[dict[str, float], str]], fusion: str
) -> None:
    """`likely_anchors` ranks by the relevance `fuse_relevance` would give, without setting it."""
    config = ScoringConfig(fusion=fusion)
    current = [
        Candidate(f"r{i}", section, "x", "t", (_record(i),), components=dict(comps))
        for i, (comps, section) in enumerate(specs)
    ]
    before = [dict(c.components) for c in current]
    fused = _fused(current, config)
    assert [c.components for c in current] == before
    fuse_relevance(current, config)
    assert fused == _relevance(current)


def _record(i: int) -> Record:
    return Record(
        id=f"r{i}", project="p", author="a", kind="message", content="c", created_at=NOW + i,
        tokens=1, content_hash=str(i), session="s",
    )  # fmt: skip


def _conversation(eng: Engine) -> None:
    eng.register_agent("p", "assistant", "default")
    turns = [
        ("ann", "What got you into marathon running?"),
        ("bob", "My doctor said my heart needed it, so I trained every morning."),
        ("ann", "Which shoes do you run the marathon in?"),
        ("bob", "Light trail shoes, the marathon ones hurt."),
        ("cy", "the park by the river is good for running"),
        ("ann", "Where do we keep the running club's sessions, MySQL?"),
        ("bob", "Postgres, since March."),
        ("cy", "running the export job nightly now"),
    ]
    for s in range(3):
        for i, (author, content) in enumerate(turns):
            eng.add(
                project="p", author=author, kind="question" if "?" in content else "message",
                content=f"{content} ({s})", session=f"s{s}", created_at=NOW - 36_000 + 100 * s + i,
            )  # fmt: skip
    for s in range(3):  # each answer also as a reply, so the chains fold it into its question
        question = eng.store.query(Query("p", None, session=f"s{s}", newest_first=False, limit=1))[
            0
        ]
        eng.add(
            project="p", author="dee", kind="message", reply_to=question.id,
            content=f"running keeps me sane ({s})", session=f"s{s}",
            created_at=NOW - 36_000 + 100 * s + 50,
        )  # fmt: skip
    old = eng.add(project="p", author="ann", kind="decision", content="running club on MySQL",
                  created_at=NOW - 30_000)  # fmt: skip
    eng.add(project="p", author="ann", kind="decision", content="running club on Postgres",
            supersedes=old.id, created_at=NOW - 29_000)  # fmt: skip


TASKS = [
    "why did bob take up marathon running?",
    "which shoes for the marathon",
    "where are the running club sessions kept",
    "running",
    "what did dee say about running",
]


def _windows(eng: Engine) -> list[tuple[Any, ...]]:
    out = []
    for task in TASKS:
        r = eng.assemble(project="p", agent="assistant", task=task, budget=3000)
        out.append(
            (r.text, [(i["record_ids"], i["decision"], i["reason"], i["score"])
                      for i in r.trace.items])
        )  # fmt: skip
    return out


@pytest.mark.parametrize("fusion", ["sum", "rrf"])
def test_the_window_is_the_one_read_one_by_one(
    store: Store, monkeypatch: pytest.MonkeyPatch, fusion: str
) -> None:
    """With `rrf` (a fusion that ranks the whole set) the likely anchors may miss one: `spread`
    then reads its own, and the window is still the one read step by step."""
    eng = Engine(store, clock=lambda: NOW, cache_ttl_s=0, scoring=ScoringConfig(fusion=fusion))
    _conversation(eng)
    calls: list[str] = []
    cls = type(store)
    for name in ("neighbours", "follow_ups", "replies_to", "superseded_by"):
        if hasattr(cls, name):
            own = getattr(cls, name)
            monkeypatch.setattr(
                cls, name, lambda *a, __n=name, __f=own, **k: calls.append(__n) or __f(*a, **k)
            )
    together = _windows(eng)
    if capable(store, ReadsFollowUps) and fusion == "sum":
        # Every follow-up read of every call in the one round trip: none read on its own.
        assert set(calls) == {"follow_ups"}
    assert any("sane" in text for text, _ in together)
    # Answers folded beside their questions: the chains dropped candidates after the reads.
    assert any(
        reason.startswith("shown beside question")
        for _, items in together
        for *_, reason, _ in items
    )
    calls.clear()
    monkeypatch.setattr(selection, "read_links", lambda *a: None)
    assert _windows(eng) == together
    assert "follow_ups" not in calls


def test_neighbours_read_before_are_used_only_when_they_hold_every_anchor(store: Store) -> None:
    from contextwright.assembly import locality
    from contextwright.assembly.sources import SourceContext
    from contextwright.roles import profile_for
    from contextwright.tokens.counter import default_counter

    if not capable(store, BatchNeighbours):
        pytest.skip("reads each match's neighbours with its own queries")
    eng = Engine(store, clock=lambda: NOW)
    _conversation(eng)
    ctx = SourceContext(
        store=store, counter=default_counter(), project="p", agent="assistant",
        role=profile_for("default"), task="t", session=None, now=NOW,
    )  # fmt: skip
    a, b = store.query(Query("p", None, session="s1", newest_first=False, limit=2))
    fake = (a.session, a.created_at)
    own = locality._all_neighbours([a, b], ctx)
    # Every anchor read before: those are used (here a made-up answer, to tell them apart).
    before = {fake: ([], [b]), (b.session, b.created_at): ([], [])}
    assert locality._all_neighbours([a, b], ctx, before) == {a.id: [b], b.id: []}
    # One missing: the store is read, and what was read before is not used.
    assert locality._all_neighbours([a, b], ctx, {fake: ([], [])}) == own
