"""Computed context: graph queries, dependency filtering, context map scoring, limits, the
injection template, debug output, and the `computed` source inside assemble."""

from __future__ import annotations

from typing import Any

import pytest

from contextwright import Budget, Engine, ValidationError
from contextwright.tasks import DEFAULT_LIMITS, TaskBoard, debug_enabled, render_template
from contextwright.tasks.context_map import ContextEntry, filter_context_map, infer_component
from contextwright.tasks.signals import extract_task_signals


def _task(
    engine: Engine, name: str, objective: str, deps: list[str] | None = None, **kw: Any
) -> str:
    return engine.tasks.create(
        "p", name=name, objective=objective, dependencies=deps or [], **kw
    ).id


def _auth_project(engine: Engine) -> dict[str, str]:
    ids = {}
    ids["jwt"] = _task(engine, "JWT middleware", "Add JWT auth middleware to src/api/app.ts")
    engine.complete_task(
        "p",
        ids["jwt"],
        {
            "summary": "JWT middleware checks the Authorization header.",
            "files_created": [
                {"path": "src/auth/jwt.ts", "lines": "1-80", "purpose": "verifies auth tokens"}
            ],
            "patterns_discovered": [
                {"pattern": "Wrap handlers with requireAuth()", "applies_to": ["auth", "login"]}
            ],
            "gotchas": [
                {"issue": "Tokens expire after 15 minutes", "severity": "high"},
                {"issue": "Logs are noisy", "severity": "low"},
            ],
            "open_questions": [
                {
                    "question": "Cookies or storage?",
                    "blocking": True,
                    "context": "XSS",
                    "recommendation": "cookie",
                },
                {"question": "Rename header?", "blocking": False},
            ],
            "decisions": [
                {
                    "decision": "Use RS256 JWTs",
                    "rationale": "key rotation",
                    "applies_to": ["jwt", "auth"],
                }
            ],
        },
    )
    ids["open"] = _task(engine, "Session store", "Move the session store to Redis")
    ids["login"] = _task(
        engine, "Login page", "Build the login form page for auth", [ids["jwt"], ids["open"]]
    )
    return ids


def test_only_completed_dependencies_and_the_spec_filters(engine: Engine) -> None:
    ids = _auth_project(engine)
    # The open dependency has a handoff-shaped record nobody should see: it is not completed.
    c = engine.tasks.computed_context("p", ids["login"])
    assert [p.task_id for p in c.prior_work] == [ids["jwt"]]
    assert c.stats.dependencies_skipped == {ids["open"]: "not completed (status open)"}
    issues = [w.issue for w in c.warnings]
    assert "Tokens expire after 15 minutes" in issues
    assert "Logs are noisy" not in [w.issue for w in c.warnings if w.inherited_from]
    assert [q.question for q in c.blocking_questions] == ["Cookies or storage?"]
    assert [p.pattern for p in c.patterns_to_follow] == ["Wrap handlers with requireAuth()"]
    assert [d.decision for d in c.relevant_decisions] == ["Use RS256 JWTs"]
    assert c.prior_work[0].files_created[0].file == "src/auth/jwt.ts"
    # Inherited and graph copies of one gotcha appear once.
    assert len(issues) == len(set(issues))


def test_resolving_a_blocking_question_removes_it(engine: Engine) -> None:
    ids = _auth_project(engine)
    q = engine.tasks.computed_context("p", ids["login"]).blocking_questions[0]
    assert q.record_id
    engine.resolve("p", q.record_id, by="lead", note="cookie it is")
    assert engine.tasks.computed_context("p", ids["login"]).blocking_questions == []


def test_superseded_decisions_are_excluded(engine: Engine) -> None:
    ids = _auth_project(engine)
    old = engine.tasks.computed_context("p", ids["login"]).relevant_decisions[0]
    later = _task(engine, "Rotate keys", "Switch JWT signing")
    engine.complete_task(
        "p",
        later,
        {
            "summary": "s",
            "decisions": [
                {
                    "decision": "Use EdDSA JWTs",
                    "rationale": "smaller",
                    "applies_to": ["jwt", "auth"],
                    "supersedes": old.record_id,
                }
            ],
        },
    )
    decisions = [
        d.decision for d in engine.tasks.computed_context("p", ids["login"]).relevant_decisions
    ]
    assert decisions == ["Use EdDSA JWTs"]
    assert engine.store.edges("p", kind="supersedes")


def test_nodes_of_a_reopened_task_are_not_offered(engine: Engine) -> None:
    ids = _auth_project(engine)
    engine.set_status("p", ids["jwt"], "open", by="lead", note="reopened")
    c = engine.tasks.computed_context("p", ids["login"])
    assert c.prior_work == [] and c.warnings == [] and c.patterns_to_follow == []
    assert c.relevant_decisions == [] and c.code_references == [] and c.blocking_questions == []


def test_graph_limits_relevance_order_and_related_tasks(engine: Engine) -> None:
    done = _task(engine, "Seed", "Seed the cache layer")
    engine.complete_task(
        "p",
        done,
        {
            "summary": "s",
            "patterns_discovered": [
                {
                    "pattern": f"cache pattern {i}",
                    "applies_to": ["cache"] + (["redis"] if i % 2 else []),
                }
                for i in range(9)
            ],
            "gotchas": [
                {"issue": f"cache gotcha {i}", "severity": "low", "applies_to": ["cache"]}
                for i in range(5)
            ]
            + [{"issue": "cache stampede", "severity": "high", "applies_to": ["cache"]}],
        },
    )
    t = _task(engine, "Redis cache", "Put a Redis cache in front of the API")
    c = engine.tasks.computed_context("p", t)
    assert len(c.patterns_to_follow) == 5
    reasons = [p.reason for p in c.patterns_to_follow]
    assert ["redis" in r for r in reasons] == [True] * 4 + [False]  # two tags beat one
    assert len(c.warnings) == 3 and c.warnings[0].issue == "cache stampede"
    assert [r.task_id for r in c.related_tasks] == [done]
    assert c.stats.nodes_matched["pattern"] == 9
    easy = engine.tasks.computed_context("p", t, complexity="easy")
    assert len(easy.patterns_to_follow) == 3 and len(easy.warnings) == 2
    custom = engine.tasks.computed_context("p", t, limits={"max_patterns": 1})
    assert len(custom.patterns_to_follow) == 1


def test_dependency_gotchas_are_never_cut_by_the_gotcha_limit(engine: Engine) -> None:
    dep = _task(engine, "dep", "Build the thing")
    engine.complete_task(
        "p",
        dep,
        {
            "summary": "s",
            "gotchas": [{"issue": f"must know {i}", "severity": "medium"} for i in range(4)],
        },
    )
    t = _task(engine, "next", "Use the thing", [dep], complexity="easy")
    c = engine.tasks.computed_context("p", t)
    assert DEFAULT_LIMITS["easy"].max_gotchas == 2
    assert sorted(w.issue for w in c.warnings) == [f"must know {i}" for i in range(4)]


def test_context_map_scoring_is_the_spec() -> None:
    s = extract_task_signals("Fix login in src/auth/login.ts", [])
    entries = [
        ContextEntry("auth", "src/auth/login.ts:1-40", "login form handler for auth"),
        ContextEntry("billing", "src/billing/pay.ts", "payments"),
        ContextEntry("ui", "src/ui/login-button.tsx", "button"),
    ]
    scored = filter_context_map(s, entries)
    assert [x.entry.component for x in scored] == ["auth", "ui"]
    top = scored[0]
    # 'auth' in component +2 and in location +1; 'login' in location +1;
    # 'src/auth/login.ts' in location +1 and mentioned +3; domain auth in notes +1
    assert top.relevance == 2 + 1 + 1 + 1 + 3 + 1
    assert "mentions src/auth/login.ts +3" in top.reason
    assert filter_context_map(s, entries, take=1) == scored[:1]


@pytest.mark.parametrize(
    ("path", "component"),
    [
        ("src/auth/jwt.ts", "auth"),
        ("src/app.ts", "app"),
        ("tests/test_x.py", "tests"),
        ("README.md", "README"),
    ],
)
def test_infer_component(path: str, component: str) -> None:
    assert infer_component(path) == component


def test_template_renders_the_spec_format_and_empty_sections(engine: Engine) -> None:
    t = _task(engine, "alone", "Something unrelated entirely")
    text = engine.tasks.render("p", t)
    assert text.startswith("## Context (Computed)\n")
    for heading in (
        "Patterns to Follow",
        "Warnings",
        "Relevant Decisions",
        "Prior Work",
        "Code References",
        "Open Questions (Blocking)",
    ):
        assert f"### {heading}" in text
    assert "No specific patterns identified for this task." in text
    assert "No known gotchas for this task area." in text
    assert "Explore the codebase as needed. No specific references pre-identified." in text
    assert "{{" not in text


def test_template_full_and_overridable(engine: Engine) -> None:
    ids = _auth_project(engine)
    c = engine.tasks.computed_context("p", ids["login"])
    text = c.render()
    assert "- **Wrap handlers with requireAuth()** " in text
    assert "- ⚠️ **high**: Tokens expire after 15 minutes" in text
    assert "#### JWT middleware" in text and "- `src/auth/jwt.ts`: verifies auth tokens" in text
    assert "| `src/auth/jwt.ts:1-80` | auth | verifies auth tokens |" in text
    assert "- **Cookies or storage?**\n  - Context: XSS\n  - Recommendation: cookie" in text
    mine = "{{#each warnings}}{{severity}}={{issue}};{{/each}}{{#if nothing}}x{{else}}none{{/if}}"
    assert c.render(mine) == "high=Tokens expire after 15 minutes;none"
    board = TaskBoard(engine, template="{{task_id}}")
    assert board.render("p", ids["login"]) == ids["login"]


@pytest.mark.parametrize(
    "bad",
    [
        "{{#if x}}open",
        "{{#each x}}{{/if}}",
        "{{else}}",
        "{{#if}}{{/if}}",
        "{{#if a}}{{else}}{{else}}{{/if}}",
    ],
)
def test_bad_template_is_a_validation_error(bad: str) -> None:
    with pytest.raises(ValidationError) as info:
        render_template(bad, {})
    assert info.value.field == "template"


def test_template_lookup_walks_outward_and_dots() -> None:
    out = render_template(
        "{{#each xs}}{{name}}/{{top}}/{{o.k}} {{/each}}",
        {"xs": [{"name": "a"}, {"name": "b"}], "top": "T", "o": {"k": 1}},
    )
    assert out == "a/T/1 b/T/1 "


def test_debug_block(engine: Engine) -> None:
    ids = _auth_project(engine)
    plain = engine.tasks.render("p", ids["login"])
    assert "## Context Debug" not in plain
    text = engine.tasks.render("p", ids["login"], debug=True)
    block = text.split("## Context Debug", 1)[1]
    for line in (
        "- Keywords: [login, page, build, form, auth]",
        "- Domains: [auth, ui]",
        "- Patterns found: 1",
        f"- Task IDs: [{ids['jwt']}]",
        "- Patterns inherited: 1",
        "- Warnings inherited: 1",
        f"- Skipped {ids['open']}: not completed (status open)",
        "- Total entries: 1",
        "- Entries after filter: 1",
        "- Top relevance score:",
    ):
        assert line in block, line
    assert debug_enabled({"CONTEXTWRIGHT_DEBUG_CONTEXT": "true"})
    assert not debug_enabled({"CONTEXTWRIGHT_DEBUG_CONTEXT": "0"}) and not debug_enabled({})


def test_assemble_with_task_id_fills_sections_with_reasons(engine: Engine) -> None:
    ids = _auth_project(engine)
    engine.register_agent("p", "dev")
    a = engine.assemble(
        "p", "dev", task_id=ids["login"], budget=Budget(window=6000, reserve=500), format="markdown"
    )
    assert a.tokens <= a.available
    assert "- Task: Build the login form page for auth" in a.text  # the objective by default
    mine = [i for i in a.trace.items if "computed" in i["sources"]]
    by_section: dict[str, list[str]] = {}
    for i in mine:
        assert i["reasons"], i
        by_section.setdefault(i["section"], []).append(i["preview"])
    assert any("Pattern to follow" in p for p in by_section["constraints"])
    assert any("Tokens expire" in p for p in by_section["warnings"])
    assert any("Blocking question" in p for p in by_section["warnings"])
    assert any("Prior work" in p for p in by_section["knowledge"])
    assert "state" in by_section  # code references
    assert a.trace.request["task_id"] == ids["login"]
    assert a.trace.notes["computed"]["dependencies_processed"] == [ids["jwt"]]
    stored = engine.trace("p", a.trace.id)
    assert stored.notes["computed"]["warnings_inherited"] == 1


def test_assemble_packs_computed_items_under_a_small_budget(engine: Engine) -> None:
    ids = _auth_project(engine)
    engine.register_agent("p", "dev")
    a = engine.assemble("p", "dev", task_id=ids["login"], budget=Budget(window=400, reserve=100))
    assert a.tokens <= a.available
    kept = {
        i["reasons"][0]
        for i in a.trace.items
        if "computed" in i["sources"] and i["decision"] != "dropped"
    }
    assert any("blocking question" in r for r in kept)  # pinned: packed first in warnings


def test_assemble_rejects_a_task_of_another_project(engine: Engine) -> None:
    t = engine.tasks.create("other", name="t", objective="o").id
    engine.register_agent("p", "dev")
    with pytest.raises(ValidationError) as info:
        engine.assemble("p", "dev", task_id=t)
    assert info.value.field == "task_id"


def test_without_task_id_the_computed_source_adds_nothing(engine: Engine) -> None:
    _auth_project(engine)
    engine.register_agent("p", "dev")
    a = engine.assemble("p", "dev", task="login form")
    assert not [i for i in a.trace.items if i["source"] == "computed"]
    assert "computed" in [s["name"] for s in a.trace.sources]


def test_refreshed_snapshot_equals_a_full_load(engine: Engine) -> None:
    ids = _auth_project(engine)
    engine.tasks.computed_context("p", ids["login"])  # full load
    more = _task(engine, "Login errors", "Show login form errors from the auth API", [ids["jwt"]])
    engine.complete_task(
        "p",
        more,
        {
            "summary": "s",
            "files_modified": [
                {"path": "src/auth/jwt.ts", "lines": "5-9", "purpose": "auth error codes"}
            ],
            "gotchas": [
                {"issue": "Auth errors are localized", "severity": "medium", "applies_to": ["auth"]}
            ],
        },
    )
    engine.add(project="p", author="dev", content="chatter that moves the version")
    engine.set_status("p", ids["open"], "completed", by="lead")
    target = _task(
        engine, "Login form v2", "Login form with auth errors", [ids["jwt"], more, ids["open"]]
    )
    refreshed = engine.tasks.computed_context("p", target)
    assert engine.tasks.graph.refreshes >= 1
    fresh = TaskBoard(engine).computed_context("p", target)
    assert refreshed.to_dict() == fresh.to_dict()
    assert [r.notes for r in refreshed.code_references] == ["auth error codes"]  # UPDATE_OR_ADD


def test_a_status_set_by_hand_on_a_node_is_seen_after_a_full_reload(engine: Engine) -> None:
    _auth_project(engine)
    board = TaskBoard(engine)
    board.graph.full_reload_s = 0  # every version change reloads fully
    later = _task(engine, "Token UI", "Show the auth token expiry")
    before = board.computed_context("p", later).warnings
    gotcha = next(w for w in before if w.issue == "Tokens expire after 15 minutes")
    assert gotcha.record_id
    engine.resolve("p", gotcha.record_id, by="lead")
    after = [w.issue for w in board.computed_context("p", later).warnings]
    assert "Tokens expire after 15 minutes" not in after
    assert board.graph.misses == 2


def test_the_debug_flag_turns_the_block_on_at_the_edges(engine: Engine) -> None:
    """CONTEXTWRIGHT_DEBUG_CONTEXT=true, read once by Settings.from_env, turns "## Context Debug"
    on in the server's task context (the CLI's is tested in test_cli.py); ?debug= overrides it."""
    from fastapi.testclient import TestClient

    from contextwright.server import create_app
    from contextwright.settings import Settings

    task = engine.tasks.create("p", name="Login", objective="Fix the login form in src/login.ts")
    path = f"/v1/projects/p/tasks/{task.id}/context"
    on = Settings.from_env(environ={"CONTEXTWRIGHT_DEBUG_CONTEXT": "true"})
    assert on.debug_context and not Settings.from_env(environ={}).debug_context
    with TestClient(create_app(engine, on)) as client:
        assert "## Context Debug" in client.get(path).json()["markdown"]
        assert (
            "## Context Debug" not in client.get(path, params={"debug": "false"}).json()["markdown"]
        )
    with TestClient(create_app(engine, Settings())) as client:
        assert "## Context Debug" not in client.get(path).json()["markdown"]
        assert "## Context Debug" in client.get(path, params={"debug": "true"}).json()["markdown"]
