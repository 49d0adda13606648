"""Validation: @references in the task that do not resolve become items in the `warnings`
section, never dropped silently."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextwright import Engine
from contextwright.assembly.references import looks_like_path, validate_refs
from contextwright.ports import Store


@pytest.fixture
def eng(store: Store) -> Engine:
    e = Engine(store)
    e.register_agent("p", "bob", "developer")
    return e


def _warned(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [i.text for i in result.sections.get("warnings", [])]


def test_every_unresolved_reference_is_a_warning_item(eng: Engine) -> None:
    task = "fix @src/auth.ts using @kv:auth.mode, see @rec:01NOPE and ask @nobody (mail a@b.com)"
    result = eng.assemble("p", "bob", task, budget=2000)
    assert result.warnings == [
        "@src/auth.ts: no file or artifact 'src/auth.ts' is known in project 'p'; "
        "add it as a record (kind='file', tags=['src/auth.ts']) or fix the path",
        "@kv:auth.mode: no KV key 'auth.mode' in project 'p'; "
        "set it with kv_set('p', 'auth.mode', ...) or fix the key",
        "@rec:01NOPE: no record '01NOPE' in project 'p' that bob may see; "
        "check the id (records(...) lists them)",
        "@nobody: not an agent, KV key or record id in project 'p'; "
        "check the spelling, or write @kv:KEY, @rec:ID or @file:PATH",
    ]
    assert _warned(result) == [f"- ⚠ {w}" for w in result.warnings]
    assert all(i.candidate.pinned for i in result.sections["warnings"])
    assert eng.trace("p", result.trace.id).warnings == result.warnings


def test_references_that_resolve_raise_no_warning(eng: Engine) -> None:
    eng.add(project="p", author="alice", content="hello")
    rec = eng.add(project="p", author="alice", kind="decision", content="use argon2")
    eng.add(project="p", author="alice", kind="file", content="auth module", tags=["src/auth.ts"])
    eng.kv_set("p", "auth.mode", "oauth")
    task = f"with @alice check @src/auth.ts, @kv:auth.mode, @auth.mode, @rec:{rec.id} and @{rec.id}"
    result = eng.assemble("p", "bob", task, budget=2000)
    assert result.warnings == []
    assert "warnings" not in {n for n, items in result.sections.items() if items}


def test_references_in_messages_to_the_agent_are_checked(eng: Engine) -> None:
    """What a peer asks the agent to read must exist: a missing key or file in a message
    addressed to it is a warning, as in its task; references of messages to others are not its
    business (and reading them would tell what those messages say)."""
    eng.kv_set("p", "deploy.url", "https://example.test")
    eng.add(project="p", author="alice", to=["bob"], visibility="direct",
            content="@bob deploy with @kv:deploy.url and @kv:deploy.token, see @docs/deploy.md")  # fmt: skip
    eng.add(project="p", author="alice", to=["carol"], visibility="direct",
            content="@carol read @kv:carol.secret")  # fmt: skip
    result = eng.assemble("p", "bob", "deploy the service", budget=2000)
    assert result.warnings == [
        "@kv:deploy.token: no KV key 'deploy.token' in project 'p' (in a message from alice); "
        "set it with kv_set('p', 'deploy.token', ...) or fix the key",
        "@docs/deploy.md: no file or artifact 'docs/deploy.md' is known in project 'p' "
        "(in a message from alice); add it as a record (kind='file', tags=['docs/deploy.md']) "
        "or fix the path",
    ]
    assert eng.trace("p", result.trace.id).warnings == result.warnings
    eng.kv_set("p", "deploy.token", "t0k3n")
    eng.add(
        project="p", author="alice", kind="file", content="how to deploy", tags=["docs/deploy.md"]
    )
    assert eng.assemble("p", "bob", "deploy the service", budget=2000).warnings == []


def test_a_record_the_agent_may_not_see_reads_as_missing(eng: Engine) -> None:
    secret = eng.add(project="p", author="alice", content="the root password", visibility="private")
    other = eng.add(project="q", author="alice", content="another project")
    result = eng.assemble("p", "bob", f"see @rec:{secret.id} and @rec:{other.id}", budget=2000)
    assert len(result.warnings) == 2
    assert all("that bob may see" in w for w in result.warnings)
    assert "root password" not in result.text


def test_workspace_files_resolve_under_the_rules_root(store: Store, tmp_path: Path) -> None:
    rules = tmp_path / ".contextwright" / "rules"
    rules.mkdir(parents=True)
    (rules / "r.json").write_text(
        json.dumps(
            {"name": "noop", "when": {"field": "task", "equals": "-"}, "then": [{"pin": "x"}]}
        )
    )
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "api.md").write_text("# API")
    eng = Engine(store, rules=rules)
    eng.register_agent("p", "bob")
    result = eng.assemble(
        "p", "bob", "read @docs/api.md and @file:docs/api.md, not @docs/gone.md", budget=2000
    )
    assert [w.split(":")[0] for w in result.warnings] == ["@docs/gone.md"]
    escape = eng.assemble("p", "bob", "read @file:../secret.txt", budget=2000)
    assert len(escape.warnings) == 1


def test_warnings_survive_a_tight_budget(eng: Engine) -> None:
    for i in range(30):
        eng.add(project="p", author="alice", content=f"filler about the login page number {i}")
    result = eng.assemble("p", "bob", "login page @missing/file.py", budget=300)
    assert any("missing/file.py" in t for t in _warned(result))


def test_pure_helpers(store: Store) -> None:
    assert looks_like_path("src/a.ts") and looks_like_path("README.md")
    assert not looks_like_path("deploy") and not looks_like_path(".env")
    assert [u.ref for u in validate_refs(store, "p", "bob", "no refs here, mail me@x.org")] == []
