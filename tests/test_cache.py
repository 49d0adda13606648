"""The TTL cache for source results: keyed by source, query, scope and store version; a write to
the project invalidates it; hits and misses show in the trace; the window is the same with the
cache on or off."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright import Engine, ValidationError
from contextwright.assembly.cache import SourceCache
from contextwright.ports import Store
from contextwright.stores import open_store
from contextwright.testing import ScriptedSource

NOW = 1_800_000_000.0


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _cache_of(result: Any) -> dict[str, str]:
    return {s["name"]: s["cache"] for s in result.trace.sources}


def _seed(engine: Engine) -> None:
    engine.add(project="p", author="alice", content="the payment webhook retries three times")
    engine.add(project="p", author="carol", content="payment refunds go through the ledger")
    engine.add(project="p", author="bob", content="looking at payments now", session="s1")


def test_hit_after_miss_and_off_for_other_sources(store: Store) -> None:
    engine = Engine(store, clock=lambda: NOW)
    _seed(engine)
    first, kept, second = (
        engine.assemble("p", "bob", "payment webhook retries", budget=2000) for _ in range(3)
    )
    # The first miss notes the key, the second keeps the result (see cache.py), the third hits.
    assert _cache_of(first)["fulltext"] == _cache_of(kept)["fulltext"] == "miss"
    assert _cache_of(second)["fulltext"] == "hit"
    assert _cache_of(second)["history"] == "off"
    assert engine.cache.stats.hits == 1 and engine.cache.stats.misses == 2
    # The stored trace keeps the cache status.
    stored = engine.trace("p", second.trace.id)
    assert {s["name"]: s["cache"] for s in stored.sources}["fulltext"] == "hit"
    engine.close()


def test_one_version_read_per_call(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = Engine(store, clock=lambda: NOW)
    _seed(engine)
    reads: list[str] = []
    version = store.version
    monkeypatch.setattr(store, "version", lambda project: reads.append(project) or version(project))
    with_doc = getattr(store, "doc_with_version", None)
    if with_doc is not None:  # PostgreSQL reads it with the agent's document (one round trip)
        monkeypatch.setattr(
            store, "doc_with_version", lambda c, p, *a: reads.append(p) or with_doc(c, p, *a)
        )
    for _ in range(2):
        engine.assemble("p", "bob", "payment webhook retries", budget=2000)
    again = engine.assemble("p", "bob", "payment webhook retries", budget=2000)
    # The source cache's key and the names left out of the search share the call's one read.
    assert reads == ["p", "p", "p"]
    assert _cache_of(again)["fulltext"] == "hit"
    engine.close()


def test_a_write_to_the_project_invalidates(store: Store) -> None:
    engine = Engine(store, clock=lambda: NOW)
    _seed(engine)
    engine.assemble("p", "bob", "payment webhook", budget=2000)
    engine.add(project="p", author="alice", content="the payment webhook now retries five times")
    after = engine.assemble("p", "bob", "payment webhook", budget=2000)
    assert _cache_of(after)["fulltext"] == "miss"
    assert any("five times" in i.text for i in after.sections["knowledge"])
    # A KV write and a status change are writes too.
    engine.assemble("p", "bob", "payment webhook", budget=2000)
    engine.kv_set("p", "payment.provider", "acme-pay")
    assert _cache_of(engine.assemble("p", "bob", "payment webhook", budget=2000))["fulltext"] == (
        "miss"
    )
    # A write to another project does not.
    engine.assemble("p", "bob", "payment webhook", budget=2000)
    engine.assemble("p", "bob", "payment webhook", budget=2000)  # kept from its second miss
    engine.add(project="other", author="zed", content="payment webhook elsewhere")
    assert _cache_of(engine.assemble("p", "bob", "payment webhook", budget=2000))["fulltext"] == (
        "hit"
    )
    engine.close()


def test_entries_expire_after_the_ttl(store: Store) -> None:
    clock = FakeClock()
    engine = Engine(store, clock=lambda: NOW)
    engine.cache = SourceCache(ttl_s=30, clock=clock)
    _seed(engine)
    engine.assemble("p", "bob", "payment ledger", budget=2000)
    engine.assemble("p", "bob", "payment ledger", budget=2000)
    clock.t = 29.0
    assert (
        _cache_of(engine.assemble("p", "bob", "payment ledger", budget=2000))["fulltext"] == "hit"
    )
    clock.t = 30.0
    assert _cache_of(engine.assemble("p", "bob", "payment ledger", budget=2000))["fulltext"] == (
        "miss"
    )
    assert engine.cache.stats.expired == 1
    engine.close()


def test_the_scope_keeps_agents_apart(store: Store) -> None:
    """A private record cached for its author must never reach another agent."""
    engine = Engine(store, clock=lambda: NOW)
    _seed(engine)
    engine.add(
        project="p", author="alice", content="payment secret: rotate keys", visibility="private"
    )
    mine = engine.assemble("p", "alice", "payment secret", budget=2000)
    theirs = engine.assemble("p", "bob", "payment secret", budget=2000)
    assert any("rotate keys" in i.text for items in mine.sections.values() for i in items)
    assert _cache_of(theirs)["fulltext"] == "miss"
    assert not any("rotate keys" in i.text for items in theirs.sections.values() for i in items)
    # Another task, another entry.
    assert _cache_of(engine.assemble("p", "alice", "refunds", budget=2000))["fulltext"] == "miss"
    engine.close()


def test_cache_off_and_opt_in_sources(store: Store) -> None:
    plain = ScriptedSource("plain", ["a plain fact"])
    opted = ScriptedSource("opted", ["an opted fact"], cacheable=True)
    engine = Engine(store, sources=[plain, opted], clock=lambda: NOW)
    engine.register_agent("p", "bob")
    for _ in range(4):
        result = engine.assemble("p", "bob", "facts", budget=1000)
    assert _cache_of(result) == {"plain": "off", "opted": "hit"}
    assert (plain.runs, opted.runs) == (4, 2)
    off = Engine(store, sources=[plain, opted], cache_ttl_s=0, clock=lambda: NOW)
    assert _cache_of(off.assemble("p", "bob", "facts", budget=1000)) == {
        "plain": "off",
        "opted": "off",
    }
    engine.close()
    off.close()


def test_cached_candidates_are_copies(store: Store) -> None:
    """Scoring writes into candidates; a hit must not see the previous call's writes."""
    engine = Engine(store, clock=lambda: NOW)
    _seed(engine)
    a = engine.assemble("p", "bob", "payment ledger refunds", budget=2000)
    engine.assemble("p", "bob", "payment ledger refunds", budget=2000)  # kept, written into
    b = engine.assemble("p", "bob", "payment ledger refunds", budget=2000)
    assert _cache_of(b)["fulltext"] == "hit"
    assert [i.to_dict() for i in a.sections["knowledge"]] == [
        i.to_dict() for i in b.sections["knowledge"]
    ]
    engine.close()


@pytest.mark.parametrize(
    "kwargs",
    [{"ttl_s": -1}, {"ttl_s": "soon"}, {"ttl_s": True}, {"max_entries": 0}],
)
def test_bad_cache_settings(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as err:
        SourceCache(**kwargs)
    assert err.value.fix


def test_lru_bound() -> None:
    cache = SourceCache(ttl_s=60, max_entries=2)
    for i in range(3):
        cache.put(("k", i), [])
    assert len(cache) == 2 and cache.stats.evictions == 1
    assert cache.get(("k", 0)) is None and cache.get(("k", 2)) == []


def test_a_first_miss_keeps_only_the_key(store: Store) -> None:
    """A result is copied and kept from the second miss of its key within the TTL: the first
    costs no copy (cold calls and an agent loop's calls never repeat a key)."""
    clock = FakeClock()
    src = ScriptedSource("opted", ["an opted fact"], cacheable=True)
    engine = Engine(store, sources=[src], clock=lambda: NOW)
    engine.cache = SourceCache(ttl_s=30, max_entries=2, clock=clock)
    engine.register_agent("p", "bob")

    def status(task: str) -> str:
        return _cache_of(engine.assemble("p", "bob", task, budget=1000))["opted"]

    assert status("facts") == "miss" and len(engine.cache) == 0
    assert status("facts") == "miss" and len(engine.cache) == 1
    assert status("facts") == "hit" and src.runs == 2
    # A key noted once and not missed again within the TTL starts over.
    assert status("other") == "miss"
    clock.t = 31.0
    assert status("other") == "miss"  # noted again, not kept: the note had expired
    assert [status("other"), status("other")] == ["miss", "hit"]
    # The noted keys are bounded as the entries are.
    for i in range(5):
        engine.cache.admit(("k", i))
    assert len(engine.cache._seen) == 2
    engine.close()


def test_expired_entries_leave_when_new_ones_come() -> None:
    """An entry whose key never comes again does not stay past its TTL: the next put drops it."""
    clock = FakeClock()
    cache = SourceCache(ttl_s=30, clock=clock)
    cache.put(("k", 0), [])
    clock.t = 31.0
    cache.put(("k", 1), [])
    assert len(cache) == 1 and cache.stats.expired == 1
    assert cache.get(("k", 1)) == []


def _window(result: Any) -> Any:
    return (
        result.messages,
        result.tokens,
        {
            n: [(i.text, i.tokens, i.to_dict()["score"]) for i in items]
            for n, items in result.sections.items()
        },
        [(d["key"], d["decision"], d["reason"]) for d in result.trace.items],
    )


words = st.sampled_from(["payment", "ledger", "webhook", "retry", "login", "token", "refund"])


@settings(max_examples=30, deadline=None)
@given(
    texts=st.lists(st.lists(words, min_size=1, max_size=6).map(" ".join), min_size=1, max_size=12),
    tasks=st.lists(st.lists(words, min_size=1, max_size=3).map(" ".join), min_size=1, max_size=4),
    budget=st.integers(min_value=300, max_value=1500),
)
def test_same_window_with_cache_on_or_off(texts: list[str], tasks: list[str], budget: int) -> None:
    store = open_store("memory://")
    on = Engine(store, clock=lambda: NOW, workers=1)
    off = Engine(store, clock=lambda: NOW, workers=1, cache_ttl_s=0)
    on.register_agent("p", "bob")
    for i, text in enumerate(texts):
        on.add(project="p", author=["alice", "bob"][i % 2], content=text, created_at=NOW - i * 60)
    for task in tasks + tasks + tasks:  # the third round is served from the cache
        assert _window(on.assemble("p", "bob", task, budget=budget)) == _window(
            off.assemble("p", "bob", task, budget=budget)
        )
    assert on.cache.stats.hits >= len(tasks)
    on.close()
    off.close()
