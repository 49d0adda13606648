"""Time-aware retrieval (periods.py): the dates a task names, and the `period` component that
lifts the records said then, without ever adding a record the agent may not see."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright import Engine
from contextwright.assembly.periods import AFTERWARDS_SHARE, task_periods
from contextwright.ports import Query, Store
from contextwright.stores.memory import MemoryStore

NOW = datetime(2023, 11, 1, 12, tzinfo=UTC).timestamp()


def _ts(y: int, m: int, d: int, h: int = 12) -> float:
    return datetime(y, m, d, h, tzinfo=UTC).timestamp()


def _days(task: str) -> list[tuple[str, str]]:
    return [
        (
            datetime.fromtimestamp(p.start, UTC).date().isoformat(),
            datetime.fromtimestamp(p.end, UTC).date().isoformat(),
        )
        for p in task_periods(task, NOW)
    ]


@pytest.mark.parametrize(
    ("task", "periods"),
    [
        ("What did Gina find on 1 February, 2023?", [("2023-02-01", "2023-02-02")]),
        ("what did she show on October 13, 2023?", [("2023-10-13", "2023-10-14")]),
        ("the 3rd of March, 2022 release", [("2022-03-03", "2022-03-04")]),
        ("what broke on 2023-10-13", [("2023-10-13", "2023-10-14")]),
        ("What setback did she face in September 2023?", [("2023-09-01", "2023-10-01")]),
        ("plans for Sept. 2023", [("2023-09-01", "2023-10-01")]),
        ("December 2023 invoices", [("2023-12-01", "2024-01-01")]),
        ("How often did we deploy in 2023?", [("2023-01-01", "2024-01-01")]),
        # A month alone is the latest one up to now (NOW is 1 November 2023).
        ("When did Melanie go camping in June?", [("2023-06-01", "2023-07-01")]),
        ("In December we froze the API", [("2022-12-01", "2023-01-01")]),
        ("what was said on 3 May and on 2023-10-13?",
         [("2023-05-03", "2023-05-04"), ("2023-10-13", "2023-10-14")]),
        # Words that are not dates.
        ("May I ask what happened to the cache?", []),
        ("the may flag in the build", []),
        ("we shipped 2023 items", []),
        ("Which of the 12 jobs failed?", []),
        ("", []),
    ],
)  # fmt: skip
def test_the_dates_a_task_names(task: str, periods: list[tuple[str, str]]) -> None:
    assert _days(task) == periods


def test_a_day_that_does_not_exist_names_its_month() -> None:
    assert _days("the report of 31 June 2023") == [("2023-06-01", "2023-07-01")]


def test_a_period_weighs_its_records_and_the_week_after() -> None:
    (p,) = task_periods("what happened on 13 October 2023?", NOW)
    assert p.weight(_ts(2023, 10, 13, 0)) == 1.0
    assert p.weight(_ts(2023, 10, 13, 23)) == 1.0
    assert p.weight(_ts(2023, 10, 16)) == AFTERWARDS_SHARE  # "last Friday I ..."
    assert p.weight(_ts(2023, 10, 12, 23)) == 0.0  # before it: not about it
    assert p.weight(_ts(2023, 10, 25)) == 0.0


def test_the_record_said_in_the_named_month_comes_first(store: Store) -> None:
    eng = Engine(store, clock=lambda: NOW, source_caps={})
    eng.register_agent("p", "assistant", "default")
    said = {
        "march": _ts(2023, 3, 10),
        "may": _ts(2023, 5, 20),
        "june": _ts(2023, 6, 3),  # a week after May: about May, perhaps
        "august": _ts(2023, 8, 2),
    }
    for month, t in said.items():
        eng.add(
            project="p", author="melanie", kind="message", created_at=t,
            content=f"I ran a charity race for mental health ({month} edition)",
        )  # fmt: skip
    result = eng.assemble("p", "assistant", "Which charity race did Melanie run in May 2023?", 1000)
    by_month = {m: d for d in result.trace.items for m in said if f"({m} edition)" in d["preview"]}
    assert by_month["may"]["components"]["period"] == 1.0
    assert by_month["june"]["components"]["period"] == AFTERWARDS_SHARE
    assert "period" not in by_month["march"]["components"]
    assert "period" not in by_month["august"]["components"]
    ranked = sorted(by_month, key=lambda m: -by_month[m]["score"])
    assert ranked[:2] == ["may", "june"]
    eng.close()


def test_a_task_without_a_date_scores_as_before(store: Store) -> None:
    eng = Engine(store, clock=lambda: NOW)
    eng.register_agent("p", "assistant", "default")
    eng.add(project="p", author="a", kind="message", content="the charity race", created_at=NOW)
    result = eng.assemble("p", "assistant", "which charity race?", 1000)
    assert all("period" not in d["components"] for d in result.trace.items)
    eng.close()


MONTHS = ("January", "March", "May", "July", "October", "December")


@settings(max_examples=40, deadline=None)
@given(
    writes=st.lists(
        st.tuples(
            st.sampled_from(("ann", "bob", "cid")),  # author
            st.sampled_from(("project", "direct", "private")),
            st.integers(min_value=0, max_value=400),  # days before NOW
        ),
        min_size=1,
        max_size=20,
    ),
    month=st.sampled_from(MONTHS),
    year=st.sampled_from((2022, 2023)),
)
def test_a_named_period_never_brings_in_a_record_the_agent_may_not_see(
    writes: list[tuple[str, str, int]], month: str, year: int
) -> None:
    """The period only re-scores what the sources found under the agent's visibility: every
    record in the window is one the agent may see, and the same records are candidates as for
    the task without its date."""
    eng = Engine(MemoryStore(), clock=lambda: NOW, source_caps={})
    eng.register_agent("p", "bob", "default")
    for i, (author, visibility, days) in enumerate(writes):
        eng.add(
            project="p", author=author, kind="message", visibility=visibility,
            to=["cid"] if visibility == "direct" else [], created_at=NOW - days * 86_400.0,
            content=f"the charity race report number {i}",
        )  # fmt: skip
    visible = {r.id for r in eng.store.query(Query("p", "bob", limit=100))}
    dated = eng.assemble("p", "bob", f"the charity race report in {month} {year}", 4000)
    plain = eng.assemble("p", "bob", "the charity race report", 4000)
    ids = {rid for d in dated.trace.items for rid in d["record_ids"]}
    assert ids <= visible
    assert ids == {rid for d in plain.trace.items for rid in d["record_ids"]}
    lifted = {
        rid for d in dated.trace.items if "period" in d["components"] for rid in d["record_ids"]
    }
    assert lifted <= visible
    eng.close()
