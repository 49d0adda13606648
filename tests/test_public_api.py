"""The public API is what `contextwright.__all__` lists, and nothing else is promised.

Adding a name is a decision: add it here in the same change. Removing or renaming one breaks users.
What a custom store or source needs is in it: the extension tests below use nothing else.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import contextwright
from contextwright import (
    Budget,
    BudgetError,
    ContextOverflow,
    ContextwrightError,
    Engine,
    MissingExtra,
    NotFound,
    RuleError,
    StoreError,
    ValidationError,
)

PUBLIC = {
    "KINDS",
    "MODELS",
    "SECTIONS",
    "Agent",
    "Assembly",
    "Budget",
    "BudgetError",
    "Candidate",
    "ContextOverflow",
    "ContextwrightError",
    "Embedder",
    "Engine",
    "Handoff",
    "Hit",
    "MissingExtra",
    "NotFound",
    "Pipelines",
    "Query",
    "Record",
    "RoleProfile",
    "RuleError",
    "RuleSet",
    "ScoringConfig",
    "SessionConfig",
    "Settings",
    "Source",
    "SourceContext",
    "Store",
    "StoreError",
    "Summarizer",
    "TokenCounter",
    "Trace",
    "ValidationError",
    "check_pipelines",
    "check_rules",
    "load_pipelines",
    "load_rules",
    "open_store",
    "register_model",
}


def test_all_is_pinned() -> None:
    assert set(contextwright.__all__) == PUBLIC
    assert len(contextwright.__all__) == len(PUBLIC)  # no duplicates
    assert contextwright.__all__ == sorted(
        contextwright.__all__, key=lambda n: (not n.isupper(), n)
    )


def test_every_public_name_is_importable_and_documented() -> None:
    for name in contextwright.__all__:
        obj = getattr(contextwright, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert obj.__module__.startswith("contextwright."), name


def test_star_import_gives_the_public_names_only() -> None:
    namespace: dict[str, object] = {}
    exec("from contextwright import *", namespace)
    assert set(namespace) - {"__builtins__"} == PUBLIC


def test_a_custom_source_needs_only_public_names(tmp_path: Path) -> None:
    """A source of one's own, written against `contextwright` alone: its candidate is packed
    into its section and named in the trace."""

    class Pinboard:
        name = "pinboard"

        def run(self, ctx: contextwright.SourceContext) -> list[contextwright.Candidate]:
            text = f"- Board note for @{ctx.agent}: deploys freeze on Friday"
            return [
                contextwright.Candidate(
                    key="pinboard:1",
                    section="constraints",
                    source=self.name,
                    text=text,
                    tokens=ctx.counter.count(text),
                    pinned=True,
                    reasons=("on the board",),
                )
            ]

    source: contextwright.Source = Pinboard()
    assert "constraints" in contextwright.SECTIONS
    store: contextwright.Store = contextwright.open_store(f"sqlite:///{tmp_path / 'x.db'}")
    engine = Engine(store=store, sources=[source])
    engine.add(project="p", author="ann", content="the release is next week")
    result = engine.assemble(project="p", agent="ann", task="plan the release", budget=2000)
    assert "deploys freeze on Friday" in result.text
    assert [run["name"] for run in result.trace.to_dict()["sources"]] == ["pinboard"]
    engine.close()


def test_a_custom_store_needs_only_public_names() -> None:
    """The Store port's types are public: a store that wraps another one runs with `Record`,
    `Query` and `Hit` from `contextwright`, and the engine ranks through its `search_text`."""

    class Counting:
        def __init__(self, inner: contextwright.Store) -> None:
            self.inner, self.searches = inner, 0

        def __getattr__(self, name: str) -> object:
            return getattr(self.inner, name)

        def search_text(
            self, project: str, agent: str | None, text: str, limit: int
        ) -> list[contextwright.Hit]:
            self.searches += 1
            return self.inner.search_text(project, agent, text, limit)

    store = Counting(contextwright.open_store("memory://"))
    engine = Engine(store=store)
    stored = engine.add(project="p", author="ann", content="the cache is warmed at boot")
    assert isinstance(stored, contextwright.Record)
    assert [r.id for r in store.query(contextwright.Query(project="p", agent=None))] == [stored.id]
    engine.assemble(project="p", agent="ann", task="why is the cache warm", budget=2000)
    assert store.searches >= 1


def test_a_capability_is_checked_per_class_except_through_a_wrapper(tmp_path: Path) -> None:
    """`ports.capable` remembers a class's answer, but a wrapper that forwards attribute reads
    has what it wraps: the same wrapper class over SQLite ranks here, over memory it does not."""
    from contextwright.ports import RanksHere, capable

    class Wrapper:
        def __init__(self, inner: object) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> object:
            return getattr(self.inner, name)

    sqlite = contextwright.open_store(f"sqlite:///{tmp_path / 'w.db'}")
    memory = contextwright.open_store("memory://")
    assert capable(sqlite, RanksHere) and capable(sqlite, RanksHere)
    assert not capable(memory, RanksHere)
    assert capable(Wrapper(sqlite), RanksHere)
    assert not capable(Wrapper(memory), RanksHere)
    sqlite.close()


def test_one_exception_tree() -> None:
    for err in (
        ValidationError,
        NotFound,
        BudgetError,
        ContextOverflow,
        RuleError,
        StoreError,
        MissingExtra,
    ):
        assert issubclass(err, ContextwrightError)
    assert issubclass(ContextwrightError, Exception)


def test_the_python_surface_of_issue_2(tmp_path: Path) -> None:
    engine = Engine.open(f"sqlite:///{tmp_path / 'team.db'}")
    stored = engine.add(
        project="p",
        author="alice",
        kind="message",
        content="@bob can you check the auth flow?",
        session="s1",
        to=["bob"],
        visibility="direct",
    )
    assert stored.id and stored.mentions == ("bob",)
    many = engine.add_many(
        [
            {"project": "p", "author": "bob", "content": "on it", "session": "s1"},
            {"project": "p", "author": "carol", "kind": "decision", "content": "JWT for auth."},
        ]
    )
    assert len(many) == 2
    result = engine.assemble(
        project="p",
        agent="bob",
        task="fix the login bug",
        budget=Budget(model="gpt-4o", window=8000, reserve=1000),
        format="openai",
    )
    assert result.messages and result.sections and 0 < result.tokens <= result.available
    assert engine.trace("p", result.trace.id).id == result.trace.id
    engine.close()
