"""Locality (locality.py): the reply to a strong match that asks something inherits its relevance;
any other neighbour gets a share of it."""

from __future__ import annotations

from typing import Any

import pytest

from contextwright import Engine
from contextwright.assembly.locality import LocalityConfig, asks_something
from contextwright.ports import BatchNeighbours, ReadsFollowUps, Store, capable

NOW = 1_800_000_000.0


def _item(result: Any, needle: str) -> dict[str, Any]:
    for d in result.trace.items:
        if needle in d["preview"]:
            return d  # type: ignore[no-any-return]
    raise AssertionError(f"{needle!r} not in the trace")


@pytest.mark.parametrize(
    ("text", "asks"),
    [
        ("What got you into running?", True),
        ("you ran? cool", True),
        ("你为什么开始跑步？", True),
        ("لماذا بدأت الجري؟", True),
        ("I started running last May.", False),
        ("x = 1;", False),
    ],
)
def test_asks_something(text: str, asks: bool) -> None:
    assert asks_something(text) is asks


def _chat(eng: Engine, turns: list[tuple[str, str]]) -> None:
    eng.register_agent("p", "assistant", "default")
    for i, (author, content) in enumerate(turns):
        eng.add(
            project="p", author=author, kind="message", content=content, session="s1",
            created_at=NOW - 3600 + i,
        )  # fmt: skip


def test_the_reply_to_a_matching_question_inherits_its_relevance(store: Store) -> None:
    eng = Engine(store, clock=lambda: NOW)
    _chat(
        eng,
        [
            ("ann", "the weather was grey all week"),
            ("ann", "What got you into marathon running?"),
            ("bob", "My doctor said my heart needed it, so I trained every morning."),
            ("ann", "Good for you, and the park looks lovely."),
            ("bob", "It does, thanks."),
        ],
    )
    result = eng.assemble("p", "assistant", "why did bob take up marathon running", 2000)
    question = _item(result, "What got you into")
    answer = _item(result, "My doctor said")
    w_rel = 3.0  # relevance's weight over nearby's (ScoringConfig)
    q_rel = question["components"]["relevance"]
    assert q_rel > 0
    # The answer shares no word with the task, but carries the question's relevance in full...
    assert answer["components"]["nearby"] >= w_rel * LocalityConfig().answer_weight * q_rel - 1e-6
    # ... and so ranks above what was said before the question, which only sits next to it.
    before = _item(result, "the weather was grey")
    assert answer["components"]["nearby"] > before["components"]["nearby"]
    assert answer["score"] > before["score"]
    eng.close()


def test_a_statement_lends_its_neighbours_only_a_share(store: Store) -> None:
    eng = Engine(store, clock=lambda: NOW)
    _chat(
        eng,
        [
            ("ann", "the weather was grey all week"),
            ("ann", "I got into marathon running this spring."),
            ("bob", "My doctor said my heart needed it, so I trained every morning."),
        ],
    )
    result = eng.assemble("p", "assistant", "why did ann take up marathon running", 2000)
    match = _item(result, "I got into marathon")
    reply = _item(result, "My doctor said")
    w_rel, share = 3.0, LocalityConfig().neighbour_weight
    # Without a question the reply gets the neighbour's share (plus its session's lift, at most
    # `session_weight`), never the whole of the match's relevance.
    lift = LocalityConfig().session_weight
    m_rel = match["components"]["relevance"]
    assert reply["components"]["nearby"] <= w_rel * (share * m_rel + lift) + 1e-6
    assert reply["components"]["nearby"] < w_rel * (m_rel + lift) - 1e-6
    eng.close()


def test_a_follow_up_by_the_asker_inherits_nothing(store: Store) -> None:
    eng = Engine(store, clock=lambda: NOW)
    _chat(
        eng,
        [
            ("ann", "What got you into marathon running?"),
            ("ann", "Also the dog barked all night, sorry for the noise."),
        ],
    )
    result = eng.assemble("p", "assistant", "marathon running", 2000)
    question = _item(result, "What got you into")
    same = _item(result, "the dog barked")
    lift = LocalityConfig().session_weight
    share = LocalityConfig().neighbour_weight
    q_rel = question["components"]["relevance"]
    assert same["components"]["nearby"] <= 3.0 * (share * q_rel + lift) + 1e-6
    eng.close()


def _weaker_question(store: Store) -> Engine:
    """More strong matches that ask nothing than locality reads, ranked before a question that
    matches less; its reply shares no word with the task."""
    eng = Engine(store, clock=lambda: NOW)
    eng.register_agent("p", "assistant", "default")
    for i in range(LocalityConfig().top + 2):
        eng.add(
            project="p", author="ann", kind="message", content=f"marathon running day {i}",
            session="s1", created_at=NOW - 7200 + i,
        )  # fmt: skip
    _chat(
        eng,
        [
            ("ann", "After the move, the new job and the long winter, were you still running?"),
            ("bob", "My doctor said my heart needed it, so I trained every morning."),
        ],
    )
    return eng


def test_the_reply_to_a_weaker_matching_question_inherits_its_relevance(store: Store) -> None:
    """A question that ranks after the strongest matches still lends its reply its relevance,
    and brings the reply in as a candidate: nothing else would find it (it shares no word with
    the task)."""
    eng = _weaker_question(store)
    top = LocalityConfig().top
    result = eng.assemble("p", "assistant", "bob marathon running", 4000)
    question = _item(result, "were you still running")
    ranked = sorted(
        (d for d in result.trace.items if d["components"].get("relevance", 0) > 0),
        key=lambda d: -d["components"]["relevance"],
    )
    assert ranked.index(question) >= top  # not one of the strongest matches
    answer = _item(result, "My doctor said")
    q_rel = question["components"]["relevance"]
    assert answer["components"]["nearby"] >= 3.0 * LocalityConfig().answer_weight * q_rel - 1e-6
    assert answer["decision"] == "kept"
    eng.close()


def test_the_weaker_questions_neighbours_are_read_with_the_strong_matches(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One batched neighbours read per call, for the strongest matches and the weaker questions
    together: both are known before either is read, and on PostgreSQL each read is a round
    trip (there, with the other follow-up reads: `follow_ups`, chains.read_links)."""
    if not capable(store, BatchNeighbours):
        pytest.skip("reads each match's neighbours with its own queries")
    reads: list[list[tuple[str | None, float]]] = []
    own = type(store).neighbours

    def spy(self: Any, project: str, agent: str, anchors: Any) -> Any:
        reads.append(list(anchors))
        return own(self, project, agent, anchors)

    monkeypatch.setattr(type(store), "neighbours", spy)
    if capable(store, ReadsFollowUps):  # read there with the other follow-up reads
        follow = type(store).follow_ups  # type: ignore[attr-defined]

        def spy_all(
            self: Any, project: str, agent: str, replied: Any, replaced: Any, anchors: Any
        ) -> Any:
            if anchors:
                reads.append(list(anchors))
            return follow(self, project, agent, replied, replaced, anchors)

        monkeypatch.setattr(type(store), "follow_ups", spy_all)
    eng = _weaker_question(store)
    top = LocalityConfig().top
    result = eng.assemble("p", "assistant", "bob marathon running", 4000)
    answer = _item(result, "My doctor said")
    assert answer["components"]["nearby"] > 0 and answer["decision"] == "kept"
    assert len(reads) == 1
    assert len(reads[0]) == top + 1  # the strongest matches and the weaker question
    eng.close()
