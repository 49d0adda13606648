"""Components as the trace and the HTTP answer show them (candidates.round4, rounded_components):
`round(v, 4)` exactly, value, type and sign, however often a value is rounded (the rounded
values are kept and looked up), in sorted order of the names."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from contextwright.assembly.candidates import round4, rounded_components

numbers = st.one_of(
    st.floats(allow_nan=False),
    st.integers(-(10**6), 10**6),
    st.sampled_from([0.0, -0.0, 1.0, 2.0, 0.5, 1 / 3, 2 / 3, 1e-9, -1e-9, math.inf]),
)


def same(a: float, b: float) -> bool:
    return type(a) is type(b) and a == b and math.copysign(1, a) == math.copysign(1, b)


@given(st.lists(numbers, min_size=1, max_size=20))
def test_round4_is_round_to_four_digits_every_time(values: list[float]) -> None:
    for v in values + values:  # the second time from what was kept
        assert same(round4(v), round(v, 4)), v


@given(st.dictionaries(st.sampled_from(["recency", "role", "bm25", "prior", "nearby"]), numbers))
def test_rounded_components_are_sorted_and_rounded(comps: dict[str, float]) -> None:
    for _ in range(2):
        shown = rounded_components(comps)
        assert list(shown) == sorted(comps)
        assert all(same(shown[k], round(v, 4)) for k, v in comps.items())
