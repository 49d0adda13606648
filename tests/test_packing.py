"""Greedy priority packing, tested as the pure function it is: priority order, record boundaries,
caps, truncation at a sentence boundary with its marker, and the budget error."""

from __future__ import annotations

import pytest

from contextwright import SECTIONS, BudgetError, Candidate
from contextwright.assembly.costs import fixed_cost, heading_cost
from contextwright.assembly.packing import MIN_TRUNCATE, marker, pack, truncate_text
from contextwright.assembly.render import render
from contextwright.tokens.counter import default_counter

C = default_counter()


def cand(
    key: str,
    section: str,
    text: str,
    *,
    score: float = 1.0,
    source: str = "s",
    pinned: bool = False,
    created_at: float = 0.0,
) -> Candidate:
    return Candidate(
        key=key,
        section=section,
        source=source,
        text=text,
        tokens=C.count(text),
        score=score,
        pinned=pinned,
        created_at=created_at,
    )


def kept_keys(packed: object) -> list[str]:
    return [i.candidate.key for items in packed.sections.values() for i in items]  # type: ignore[attr-defined]


def test_sections_fill_in_priority_order() -> None:
    cs = [cand(f"k-{s}", s, f"- item for {s}") for s in reversed(SECTIONS) if s != "history"]
    p = pack(cs, available=1000, agent="bob", fmt="markdown", counter=C)
    assert kept_keys(p) == [f"k-{s}" for s in SECTIONS if s != "history"]


def test_lower_priority_goes_first_when_the_budget_is_short() -> None:
    text = "- " + "word " * 40
    cs = [
        cand("state", "state", text),
        cand("know", "knowledge", text),
        cand("sugg", "suggestions", text),
    ]
    base = fixed_cost("bob", "markdown", C)
    one = C.count(text) + 1 + heading_cost("state", C)
    p = pack(cs, available=base + 2 * one + 5, agent="bob", fmt="markdown", counter=C)
    assert kept_keys(p) == ["state", "know"]
    dropped = [d for d in p.decisions if not d.kept]
    assert [d.candidate.key for d in dropped] == ["sugg"]
    assert dropped[0].reason.startswith("budget exhausted")


def test_order_inside_a_section_pinned_then_score_then_newest() -> None:
    cs = [
        cand("low", "knowledge", "- a", score=1.0, created_at=5),
        cand("high", "knowledge", "- b", score=3.0),
        cand("pin", "knowledge", "- c", score=0.1, pinned=True),
        cand("tie-new", "knowledge", "- d", score=1.0, created_at=9),
    ]
    p = pack(cs, available=500, agent="bob", fmt="markdown", counter=C)
    assert kept_keys(p) == ["pin", "high", "tie-new", "low"]


def test_the_task_goes_first_in_state_even_against_higher_scores() -> None:
    task = cand("task", "state", "- Task: fix the login flow", score=10.0, pinned=True)
    big = cand("st", "state", "- " + "state " * 60, score=99.0, pinned=True)
    room = fixed_cost("bob", "markdown", C) + heading_cost("state", C) + task.tokens + 1 + 10
    p = pack([big, task], available=room, agent="bob", fmt="markdown", counter=C)
    assert kept_keys(p)[0] == "task"


def test_items_are_cut_at_record_boundaries_smaller_ones_still_fit() -> None:
    cs = [
        cand("first", "knowledge", "- short one", score=3),
        cand("huge", "knowledge", "- " + "big " * 300, score=2),
        cand("small", "knowledge", "- tiny", score=1),
    ]
    avail = fixed_cost("bob", "markdown", C) + heading_cost("knowledge", C) + 30
    p = pack(cs, available=avail, agent="bob", fmt="markdown", counter=C)
    assert kept_keys(p) == ["first", "small"]
    assert all(not i.truncated for items in p.sections.values() for i in items)


def test_a_single_oversized_item_is_truncated_with_a_marker() -> None:
    text = " ".join(f"Sentence number {i} explains one more detail." for i in range(100))
    c = cand("big", "knowledge", "- " + text)
    avail = fixed_cost("bob", "markdown", C) + heading_cost("knowledge", C) + 120
    p = pack([c], available=avail, agent="bob", fmt="markdown", counter=C)
    (item,) = p.sections["knowledge"]
    assert item.truncated and item.omitted > 0
    assert item.text.endswith(marker(item.omitted))
    body = item.text[: -len(marker(item.omitted))]
    assert body.endswith("detail.")  # a sentence boundary
    assert p.used <= avail
    assert render(p.sections, "bob", "markdown", C).tokens <= avail
    (d,) = p.decisions
    assert d.truncated and d.reason == f"truncated: {item.omitted} tokens omitted"


def test_too_little_room_to_truncate_drops_instead() -> None:
    c = cand("big", "knowledge", "- " + "word " * 400)
    avail = fixed_cost("bob", "markdown", C) + heading_cost("knowledge", C) + MIN_TRUNCATE - 2
    p = pack([c], available=avail, agent="bob", fmt="markdown", counter=C)
    assert kept_keys(p) == []
    assert p.decisions[0].reason.startswith("budget exhausted")


@pytest.mark.parametrize("budget", [30, 45, 80, 200])
def test_truncate_text_fits_and_counts_what_it_omitted(budget: int) -> None:
    text = "First point. Second point is longer! Third: a question? " * 30
    out, tokens, omitted = truncate_text(text, budget, C)
    assert tokens == C.count(out) <= budget
    assert out.endswith(marker(omitted))
    head = out[: -len(marker(omitted))]
    assert text.startswith(head)
    assert omitted == C.count(text) - C.count(head)


def test_truncate_text_without_spaces_or_boundaries_still_fits() -> None:
    for text in ("x" * 5000, "日本語のテキスト" * 300, "🚀" * 800):
        out, tokens, omitted = truncate_text(text, 40, C)
        assert tokens == C.count(out) <= 40
        assert "\ufffd" not in out
        assert omitted > 0


def test_truncate_text_leaves_short_text_alone() -> None:
    assert truncate_text("fits fine.", 10, C) == ("fits fine.", C.count("fits fine."), 0)


def test_source_caps_limit_a_source_but_not_pins() -> None:
    cs = [
        cand(f"f{i}", "knowledge", f"- fulltext item {i}", source="fulltext", score=10 - i)
        for i in range(6)
    ]
    cs.append(cand("pin", "knowledge", "- pinned fulltext", source="fulltext", pinned=True))
    one = cs[0].tokens + 1
    p = pack(
        cs,
        available=2000,
        agent="bob",
        fmt="markdown",
        counter=C,
        source_caps={"fulltext": 3 * one},
    )
    kept = kept_keys(p)
    assert "pin" in kept
    assert len([k for k in kept if k.startswith("f")]) == 2  # the pin used a third of the cap
    reasons = [d.reason for d in p.decisions if not d.kept]
    assert reasons and all(r.startswith("source cap: fulltext") for r in reasons)


def test_section_caps() -> None:
    cs = [cand(f"h{i}", "knowledge", f"- knowledge item {i}", score=10 - i) for i in range(5)]
    cap = heading_cost("knowledge", C) + 2 * (cs[0].tokens + 1)
    p = pack(
        cs, available=2000, agent="bob", fmt="markdown", counter=C, section_caps={"knowledge": cap}
    )
    assert kept_keys(p) == ["h0", "h1"]
    assert all(d.reason.startswith("section cap") for d in p.decisions if not d.kept)


def test_a_budget_below_the_task_is_a_budget_error() -> None:
    task = cand(
        "task", "state", "- Task: " + "a long task description " * 20, pinned=True, score=10
    )
    with pytest.raises(BudgetError) as info:
        pack(
            [task],
            available=fixed_cost("bob", "openai", C) + 30,
            agent="bob",
            fmt="openai",
            counter=C,
        )
    assert "state section" in info.value.message and "budget.window" in info.value.message


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "markdown"])
def test_a_budget_below_the_envelope_is_a_budget_error(fmt: str) -> None:
    with pytest.raises(BudgetError):
        pack([], available=fixed_cost("bob", fmt, C) - 1, agent="bob", fmt=fmt, counter=C)


def test_same_input_same_output() -> None:
    cs = [
        cand(f"k{i}", SECTIONS[i % 7], f"- item {i} " * (i % 4 + 1), score=float(i % 3))
        for i in range(40)
    ]
    a = pack(cs, available=300, agent="bob", fmt="markdown", counter=C)
    b = pack(list(reversed(cs)), available=300, agent="bob", fmt="markdown", counter=C)
    assert kept_keys(a) == kept_keys(b)
    assert [(d.candidate.key, d.kept, d.reason) for d in a.decisions] == [
        (d.candidate.key, d.kept, d.reason) for d in b.decisions
    ]


def test_a_record_an_uncapped_source_found_too_is_not_charged_to_a_capped_one() -> None:
    """Full text is capped; what vectors found as well is not full text crowding out the rest
    (caps.py), so it neither counts against the cap nor is dropped by it."""
    both = [
        cand(f"b{i}", "knowledge", f"- found by both {i}", source="fulltext", score=10 - i)
        for i in range(4)
    ]
    for c in both:
        c.sources = ("fulltext", "vector")
    alone = [
        cand(f"f{i}", "knowledge", f"- full text alone {i}", source="fulltext", score=5 - i)
        for i in range(4)
    ]
    one = alone[0].tokens + 1
    p = pack(
        [*both, *alone],
        available=2000,
        agent="bob",
        fmt="markdown",
        counter=C,
        source_caps={"fulltext": 2 * one},
    )
    kept = kept_keys(p)
    assert {"b0", "b1", "b2", "b3"} <= set(kept)  # uncharged: all four, past the cap of two
    assert len([k for k in kept if k.startswith("f")]) == 2  # the cap holds for the rest
