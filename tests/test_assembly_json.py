"""The HTTP answer of an assemble is built by `Assembly.to_json`, not `to_dict`: the two must encode
to the same bytes, for every format, with the standard encoder and with orjson, on real windows
and on items whose scores and components are any floats."""

from __future__ import annotations

import json
import math
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextwright import Engine
from contextwright.assembly.candidates import Candidate, Item, round4
from contextwright.records import build_record
from test_assemble import seed


def encoded(data: object) -> tuple[bytes, bytes]:
    return json.dumps(data).encode(), orjson.dumps(data)


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "markdown"])
def test_to_json_encodes_as_to_dict(tmp_path: Path, fmt: str) -> None:
    engine = Engine.open(f"sqlite:///{tmp_path / 'e.db'}")
    try:
        seed(engine)
        for agent, budget in (("bob", 4000), ("alice", 600), ("pm", 8000)):
            result = engine.assemble(
                "p", agent, "ship the api", budget, fmt, working_memory=["draft one"]
            )
            items = [i for items in result.sections.values() for i in items]
            assert items, "the seeded project gives every agent a window"
            assert any(i.candidate.records for i in items)
            assert encoded(result.to_json()) == encoded(result.to_dict())
    finally:
        engine.close()


floats = st.one_of(
    st.floats(allow_nan=False),
    st.integers(-(10**6), 10**6).map(float),
    st.integers(-(10**6), 10**6),
    st.sampled_from([0.0, -0.0, 1.0, 2.0, 0.5, 1e-5, 123456.78915, math.inf, -math.inf]),
)


@given(floats)
def testround4_is_round(v: float) -> None:
    got, want = round4(v), round(v, 4)
    assert type(got) is type(want)
    assert json.dumps(got) == json.dumps(want) and orjson.dumps(got) == orjson.dumps(want)


record = build_record({"project": "p", "author": "ann", "kind": "note", "content": "x"}, len)


@given(
    components=st.dictionaries(st.sampled_from(["prior", "recency", "role", "a", "Z"]), floats),
    score=floats,
    n_records=st.integers(0, 3),
    reasons=st.lists(st.text(max_size=5), max_size=3).map(tuple),
    sources=st.lists(st.sampled_from(["kv", "recent"]), max_size=2).map(tuple),
    day=st.none() | st.just("Mon 2 Jun"),
)
def test_item_to_json_encodes_as_to_dict(
    components: dict[str, float],
    score: float,
    n_records: int,
    reasons: tuple[str, ...],
    sources: tuple[str, ...],
    day: str | None,
) -> None:
    c = Candidate(
        key="k",
        section="knowledge",
        source="recent",
        text="- x",
        records=(record,) * n_records,
        score=score,
        components=components,
        reasons=reasons,
        sources=sources,
    )
    item = Item(c, "- x", 2, truncated=bool(n_records % 2), omitted=n_records, day=day)
    assert encoded(item.to_json()) == encoded(item.to_dict())
