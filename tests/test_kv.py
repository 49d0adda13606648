"""KV memory: keys and values per project, as a source; an @mention of a key pulls in its value."""

from __future__ import annotations

import pytest

from contextwright import Engine, NotFound, ValidationError


def _kv_items(result) -> dict[str, list[str]]:  # type: ignore[no-untyped-def]
    return {
        i.candidate.key: list(i.candidate.reasons)
        for i in result.sections["knowledge"]
        if i.candidate.key.startswith("kv:")
    }


def test_mention_in_the_task_pulls_the_value(engine: Engine) -> None:
    engine.register_agent("p", "bob", "developer")
    engine.kv_set("p", "deploy.target", "eu-west-1 behind the blue load balancer")
    engine.kv_set("p", "unrelated", "never mentioned")
    result = engine.assemble("p", "bob", "ship the hotfix to @deploy.target today", budget=2000)
    items = _kv_items(result)
    assert items == {"kv:deploy.target": ["@deploy.target"]}
    text = next(
        i.text for i in result.sections["knowledge"] if i.candidate.key == "kv:deploy.target"
    )
    assert text == "- [kv · deploy.target] eu-west-1 behind the blue load balancer"
    assert result.warnings == []
    assert any(s["name"] == "kv" and s["candidates"] == 1 for s in result.trace.sources)


def test_prefixed_form_and_updates(engine: Engine) -> None:
    engine.register_agent("p", "bob")
    engine.kv_set("p", "branch", "release-2.3")
    first = engine.assemble("p", "bob", "merge into @kv:branch", budget=2000)
    assert "kv:branch" in _kv_items(first)
    engine.kv_set("p", "branch", "release-2.4")
    second = engine.assemble("p", "bob", "merge into @kv:branch", budget=2000)
    texts = [i.text for i in second.sections["knowledge"]]
    assert "- [kv · branch] release-2.4" in texts
    assert not any("release-2.3" in t for t in texts)


def test_mention_in_a_record_addressed_to_the_agent(engine: Engine) -> None:
    engine.kv_set("p", "api.base", "https://api.internal:8443")
    engine.add(project="p", author="alice", content="@bob please call @api.base for the sync")
    result = engine.assemble("p", "bob", "do the sync", budget=2000)
    assert _kv_items(result) == {"kv:api.base": ["@api.base (in alice's message)"]}


def test_keys_are_per_project(engine: Engine) -> None:
    engine.register_agent("p", "bob")
    engine.kv_set("other", "secret.key", "other project's value")
    result = engine.assemble("p", "bob", "use @kv:secret.key", budget=2000)
    assert _kv_items(result) == {}
    assert any("no KV key 'secret.key'" in w for w in result.warnings)
    assert any("secret.key" in i.text for i in result.sections["warnings"])


def test_unknown_key_is_a_warning_not_silence(engine: Engine) -> None:
    engine.register_agent("p", "bob")
    result = engine.assemble("p", "bob", "read @kv:missing.key first", budget=2000)
    assert result.warnings == [
        "@kv:missing.key: no KV key 'missing.key' in project 'p'; "
        "set it with kv_set('p', 'missing.key', ...) or fix the key"
    ]


def test_bad_kv_input_leaves_the_store_as_it_was(engine: Engine) -> None:
    engine.kv_set("p", "k", "v")
    version = engine.store.version("p")
    with pytest.raises(ValidationError) as err:
        engine.kv_set("p", "k", 42)  # type: ignore[arg-type]
    assert err.value.field == "value"
    with pytest.raises(ValidationError) as err:
        engine.kv_set("p", "", "v")
    assert err.value.field == "key"
    with pytest.raises(NotFound):
        engine.kv_get("p", "nope")
    assert engine.kv_get("p", "k") == "v"
    assert engine.store.version("p") == version
    assert engine.store.kv_list("p") == {"k": "v"}
