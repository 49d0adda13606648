"""The deep end of a hit list that grows with the budget (sources.budget_depth): read where the
other candidates leave the window room, left out (with a decision in the trace) where they fill
it twice over (selection.deep_room)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from contextwright import Engine
from contextwright.assembly.candidates import Candidate
from contextwright.assembly.selection import DEEP_ROOM, deep_room
from contextwright.stores import open_store

T0 = 1_700_000_000.0


def _c(i: int, tokens: int, deep: bool, sources: tuple[str, ...] = ("vector",)) -> Candidate:
    return Candidate(
        key=f"k{i}", section="knowledge", source=sources[0], text="x", tokens=tokens,
        sources=list(sources), deep=deep,
    )  # fmt: skip


@given(
    st.lists(st.tuples(st.integers(1, 400), st.booleans(), st.booleans()), max_size=40),
    st.one_of(st.none(), st.integers(1, 4000)),
)
def test_deep_room_drops_only_single_source_deep_hits_and_all_or_none(
    spec: list[tuple[int, bool, bool]], budget: int | None
) -> None:
    cands = [
        _c(i, t, deep, ("vector", "fulltext") if both else ("vector",))
        for i, (t, deep, both) in enumerate(spec)
    ]
    kept, dropped = deep_room(cands, budget)
    lone = [c for c in cands if c.deep and len(c.sources) == 1]
    others = [c for c in cands if c not in lone]
    assert len(kept) + len(dropped) == len(cands)
    assert all(c in kept for c in others)  # what is not the deep end alone always stays
    assert [d.candidate for d in dropped] in ([], lone)
    if dropped:
        assert budget is not None and sum(c.tokens for c in others) >= DEEP_ROOM * budget
        assert all(not d.kept and "fill the window" in d.reason for d in dropped)


def test_deep_hits_fill_a_sparse_window_and_leave_a_crowded_one(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'd.db'}")
    filler = " ".join(f"word{k}" for k in range(60))
    with Engine(store, clock=lambda: T0, embedder="hash") as e:
        for project, tail in (("short", ""), ("long", filler)):
            e.register_agent(project, "bob", "developer")
            for i in range(200):
                e.add(project=project, author="ann", content=f"login form note {i} {tail}",
                      created_at=T0 - i)  # fmt: skip
        assert e.wait_for_embeddings(60)

        def deep(project: str) -> list[dict[str, object]]:
            a = e.assemble(project, "bob", "login form", 2000)  # the vector list grows to 80
            vec = next(s["candidates"] for s in a.trace.sources if s["name"] == "vector")
            assert vec == 80
            return [i for i in a.trace.items if "fill the window" in str(i["reason"])]

        # Short notes: the first 40 of each list cannot fill the window twice; the deep end stays.
        assert deep("short") == []
        # Long notes fill it twice over without the deep end, which is left out, and says so.
        dropped = deep("long")
        assert dropped and all(i["decision"] == "dropped" for i in dropped)
