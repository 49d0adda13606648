"""The public API is what `contextwright.__all__` lists, and nothing else is promised.

Adding a name is a decision: add it here in the same change. Removing or renaming one breaks users.
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
    "Engine",
    "Handoff",
    "Item",
    "MissingExtra",
    "ModelSpec",
    "NotFound",
    "Query",
    "Record",
    "RoleProfile",
    "RuleError",
    "RuleSet",
    "ScoringConfig",
    "SessionConfig",
    "SessionManager",
    "StoreError",
    "TaskBoard",
    "TokenCounter",
    "Trace",
    "ValidationError",
    "check_rules",
    "diff_traces",
    "load_rules",
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
    assert engine.trace(result.trace.project, result.trace.id).id == result.trace.id
    engine.close()
