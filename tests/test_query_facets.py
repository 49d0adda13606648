"""Query facets in the full-text source: a record that matches only one word of the task is still
found when the whole-task window is crowded by records that match the task's other words."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright import Engine
from contextwright.roles import profile_for
from contextwright.sources import FullTextSource, SourceContext, facet_terms, fuse_facet

T0 = 1_800_000_000.0
TASK = "alice city river bob"


def _ctx(engine: Engine, limit: int) -> SourceContext:
    return SourceContext(
        store=engine.store,
        counter=engine.counter,
        project="p",
        agent="bob",
        role=profile_for("developer"),
        task=TASK,
        session="s1",
        now=T0,
        limits={"fulltext": limit},
    )


def _fill(engine: Engine) -> str:
    for i in range(40):
        engine.add(project="p", author="carol", kind="memory", content=f"filler note {i} weather")
    for i in range(8):
        engine.add(
            project="p", author="carol", kind="memory", content=f"alice city river crowd {i}"
        )
    return engine.add(project="p", author="carol", kind="memory", content="bob likes lasagna").id


def test_a_rare_facet_is_found_when_the_whole_task_window_is_crowded(engine: Engine) -> None:
    target = _fill(engine)
    whole = engine.store.search_text("p", "bob", TASK, 5)
    assert target not in {h.record.id for h in whole}  # the crowd fills the whole-task window
    found = {c.record.id: c for c in FullTextSource().run(_ctx(engine, 5)) if c.record}
    assert target in found
    assert found[target].components["bm25"] == fuse_facet(0)
    assert found[target].reason == "matches a task facet"
    crowd = [c for c in found.values() if "crowd" in c.text]
    assert len(crowd) == 5 and all(c.components["bm25"] > 0 for c in crowd)


def test_facets_are_the_words_the_hits_cover_least() -> None:
    hits = ["alice city", "Alice city"]
    assert facet_terms("Alice city Bob river", hits) == ["bob", "river"]
    assert facet_terms("Alice city Bob river", hits, n=1) == ["bob"]  # names first among ties
    assert facet_terms("bob", hits) == []  # one word: nothing to decompose
    assert facet_terms("the of and it", hits) == []  # stopwords are no facets


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(alphabet="abcdeXYZ ", max_size=12), max_size=6), st.text(max_size=40))
def test_facets_are_few_task_words(contents: list[str], task: str) -> None:
    terms = facet_terms(task, contents)
    assert len(terms) <= 3 and len(set(terms)) == len(terms)
    assert all(t in task.lower() and len(t) >= 3 for t in terms)


@given(st.integers(min_value=0, max_value=1000))
def test_facet_scores_decay_by_rank_below_a_whole_task_top_hit(rank: int) -> None:
    assert 0 < fuse_facet(rank + 1) < fuse_facet(rank) <= fuse_facet(0) < 1.0
