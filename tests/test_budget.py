"""Budget: window − reserve = available, the model's margin applied, and bad budgets rejected."""

from __future__ import annotations

import pytest

from contextwright import Budget, ValidationError
from contextwright.tokens.counter import model_spec


def test_available_is_window_minus_reserve_for_an_exact_tokenizer() -> None:
    b = Budget(model="gpt-4", window=8000, reserve=1000)
    assert b.available == 7000


def test_margin_shrinks_what_is_available() -> None:
    b = Budget(model="gpt-4o", window=8000, reserve=1000)
    assert b.available == int(7000 / 1.05) == 6666
    c = Budget(model="claude-sonnet-4", window=8000, reserve=1000)
    assert c.available == int(7000 / 1.2)
    assert c.available < b.available < 7000


def test_defaults_come_from_the_registry() -> None:
    b = Budget(model="gpt-4o")
    spec = model_spec("gpt-4o")
    assert (b.window, b.reserve) == (spec.window, spec.reserve)
    small = Budget(model="gpt-4o", window=1000)
    assert small.reserve == 250  # never more than a quarter of a small window


def test_coerce() -> None:
    assert Budget.coerce(5000) == Budget(model="cl100k", window=5000, reserve=0)
    assert Budget.coerce(5000).available == 5000
    assert Budget.coerce({"model": "gpt-4", "window": 4000, "reserve": 500}).available == 3500
    b = Budget(model="gpt-4", window=4000)
    assert Budget.coerce(b) is b


def test_to_dict() -> None:
    d = Budget(model="gpt-4o", window=8000, reserve=1000, section_caps={"history": 500}).to_dict()
    assert d == {
        "model": "gpt-4o",
        "window": 8000,
        "reserve": 1000,
        "available": 6666,
        "margin": 0.05,
        "section_caps": {"history": 500},
    }


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"model": "gpt-9"}, "model"),
        ({"window": -1}, "budget.window"),
        ({"window": 0}, "budget.window"),
        ({"window": 1.5}, "budget.window"),
        ({"window": True}, "budget.window"),
        ({"window": 10_000_000}, "budget.window"),
        ({"window": 1000, "reserve": 1000}, "budget.reserve"),
        ({"window": 1000, "reserve": "x"}, "budget.reserve"),
        ({"section_caps": {"gossip": 10}}, "budget.section_caps"),
        ({"section_caps": {"history": -1}}, "budget.section_caps.history"),
        ({"section_caps": [1]}, "budget.section_caps"),
    ],
)
def test_bad_budgets(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        Budget(**kwargs)  # type: ignore[arg-type]
    assert info.value.field == field
    assert info.value.fix in info.value.message


@pytest.mark.parametrize("bad", [0, -5, True, "8000", 3.5, [8000], {"model": "gpt-4o", "size": 1}])
def test_bad_coerce(bad: object) -> None:
    with pytest.raises(ValidationError) as info:
        Budget.coerce(bad)
    assert info.value.field.startswith("budget")
