"""Context rules: JSON documents in a rules directory; the first match applies; include,
suppress, pin, boost and cap; every invalid rule is reported with the file, the field and the fix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright import Engine, RuleError
from contextwright.ports import Store
from contextwright.rules.loading import check_rules, load_rules, rules_from, schema
from contextwright.rules.ruleset import Facts, parse_document, task_kind

NOW = 1_800_000_000.0


def write(d: Path, name: str, doc: Any) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    path = d / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc, indent=2))
    return path


def facts(task: str = "", agent: str = "bob", role: str = "developer", kind: str = "") -> Facts:
    return Facts(task, agent, role, "p", kind or task_kind(task))


@pytest.fixture
def eng(store: Store) -> Engine:
    e = Engine(store, clock=lambda: NOW)
    e.register_agent("p", "bob", "developer")
    e.register_agent("p", "rita", "reviewer")
    return e


def _all_text(result: Any) -> str:
    return "\n".join(i.text for items in result.sections.values() for i in items)


# -- conditions and order -----------------------------------------------------------------------


def test_files_in_name_order_and_first_match_applies(tmp_path: Path) -> None:
    d = tmp_path / ".contextwright" / "rules"
    write(
        d,
        "20-general.json",
        {"rules": [{"name": "any-task", "then": [{"pin": {"kind": "decision"}}]}]},
    )
    write(
        d,
        "10-auth.json",
        {
            "rules": [
                {
                    "name": "auth",
                    "when": {"field": "task", "contains": "AUTH"},
                    "then": [{"include": "kv:auth"}],
                },
                {
                    "name": "auth-2",
                    "when": {"field": "task", "contains": "auth"},
                    "then": [{"include": "kv:x"}],
                },
            ]
        },
    )
    write(d, "README.md", "not a rule")
    rules = load_rules(d)
    assert [r.name for r in rules.rules] == ["auth", "auth-2", "any-task"]
    assert rules.root == tmp_path.resolve()
    hit = rules.first_match(facts("fix the auth flow"))
    assert hit is not None and hit.name == "auth"
    other = rules.first_match(facts("write the changelog"))
    assert other is not None and other.name == "any-task"


@pytest.mark.parametrize(
    ("cond", "f", "expected"),
    [
        ({"field": "task", "contains": "Refactor"}, facts("refactor the parser"), True),
        (
            {"field": "task", "contains": "Refactor", "case_sensitive": True},
            facts("refactor it"),
            False,
        ),
        ({"field": "agent", "equals": "bob"}, facts(), True),
        ({"field": "agent", "equals": "bo"}, facts(), False),
        ({"field": "role", "in": ["reviewer", "pm"]}, facts(role="reviewer"), True),
        ({"field": "role", "in": ["reviewer", "pm"]}, facts(), False),
        ({"field": "task", "regex": r"\bPR[- ]?\d+"}, facts("look at pr-42"), True),
        ({"field": "project", "equals": "p"}, facts(), True),
        ({"field": "kind", "equals": "bug"}, facts("fix the crash on save"), True),
        ({"field": "kind", "equals": "review"}, facts("please review the diff"), True),
        ({"field": "kind", "equals": "review"}, facts("anything", kind="review"), True),
        ({"not": {"field": "role", "equals": "pm"}}, facts(), True),
        (
            {
                "all": [
                    {"field": "task", "contains": "db"},
                    {"not": {"field": "agent", "in": ["bob"]}},
                ]
            },
            facts("db migration"),
            False,
        ),
        (
            {"any": [{"field": "task", "contains": "db"}, {"field": "agent", "equals": "bob"}]},
            facts("nothing"),
            True,
        ),
    ],
)
def test_conditions(cond: dict[str, Any], f: Facts, expected: bool) -> None:
    rules = rules_from([{"name": "r", "when": cond, "then": [{"pin": {"kind": "task"}}]}])
    assert (rules.first_match(f) is not None) is expected


def test_task_kinds() -> None:
    assert task_kind("Please review PR 12") == "review"
    assert task_kind("the export crashes") == "bug"
    assert task_kind("refactor the cache") == "refactor"
    assert task_kind("implement the search page") == "feature"
    assert task_kind("hello") == "task"


@settings(max_examples=50, deadline=None)
@given(
    words=st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta"]), min_size=1, max_size=4),
    task=st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta", "x"]), max_size=5).map(
        " ".join
    ),
)
def test_first_match_is_the_first_rule_that_matches(words: list[str], task: str) -> None:
    docs = [
        {"name": f"r{i}", "when": {"field": "task", "contains": w}, "then": [{"pin": w}]}
        for i, w in enumerate(words)
    ]
    hit = rules_from([{"rules": docs}]).first_match(facts(task))
    expected = next((f"r{i}" for i, w in enumerate(words) if w in task), None)
    assert (hit.name if hit else None) == expected


# -- actions in assemble ------------------------------------------------------------------------


def test_include_pin_boost_suppress_cap(eng: Engine, tmp_path: Path) -> None:
    arch = eng.add(
        project="p", author="alice", kind="decision", content="the parser is a Pratt parser"
    )
    noisy = eng.add(project="p", author="alice", kind="note", content="parser note: lunch at noon")
    eng.add(
        project="p",
        author="carol",
        kind="artifact",
        content="parser benchmark results",
        tags=["perf"],
    )
    eng.add(
        project="p",
        author="carol",
        kind="message",
        content="parser legacy code path",
        tags=["legacy"],
    )
    eng.kv_set("p", "style", "use black, 100 columns")
    root = tmp_path / "ws"
    write(root / "docs", "parser.md", "# Parser\nPrecedence climbing lives in parse_expr.")
    d = root / ".contextwright" / "rules"
    write(
        d,
        "rules.json",
        {
            "rules": [
                {
                    "name": "parser-work",
                    "when": {
                        "all": [
                            {"field": "task", "contains": "parser"},
                            {"field": "role", "equals": "developer"},
                        ]
                    },
                    "then": [
                        {"include": f"rec:{arch.id}"},
                        {"include": "kv:style"},
                        {"include": "file:docs/parser.md"},
                        {"pin": arch.id},
                        {"suppress": {"kind": "note"}},
                        {"suppress": {"tag": "legacy"}},
                        {"boost": {"tag": "perf"}, "by": 2.5},
                        {"cap": "fulltext", "tokens": 0},
                    ],
                }
            ]
        },
    )
    eng.rules = load_rules(d)
    result = eng.assemble("p", "bob", "refactor the parser", budget=3000)
    text = _all_text(result)
    assert "Pratt parser" in text and "use black, 100 columns" in text
    assert "Precedence climbing lives in parse_expr." in text
    assert "lunch at noon" not in text and "legacy code path" not in text
    rule = result.trace.notes["rule"]
    assert rule["name"] == "parser-work" and rule["file"].endswith("rules.json")
    assert result.trace.notes["task_kind"] == "refactor"
    items = {d["preview"][:40]: d for d in result.trace.items}
    pinned = next(i for i in result.sections["knowledge"] if i.candidate.key == arch.id)
    assert pinned.candidate.pinned and "rule parser-work: pinned" in pinned.candidate.reasons
    suppressed = [
        d for d in result.trace.items if d["reason"].startswith("suppressed by rule parser-work")
    ]
    assert {d["record_ids"][0] for d in suppressed} >= {noisy.id}
    perf = next(d for d in result.trace.items if "benchmark" in d["preview"])
    assert perf["components"]["boost"] == 2.5
    assert perf["decision"] == "dropped" and perf["reason"].startswith("source cap: fulltext")
    assert items  # the trace lists every candidate
    # A reviewer does not match the rule: nothing suppressed, no rule in the trace.
    other = eng.assemble("p", "rita", "refactor the parser", budget=3000)
    assert other.trace.notes["rule"] is None and "lunch at noon" in _all_text(other)


def test_unresolved_include_is_a_warning(eng: Engine) -> None:
    rules = [
        {
            "name": "r",
            "then": [
                {"include": "rec:NOPE"},
                {"include": "kv:absent"},
                {"include": "file:no/such.md"},
            ],
        }
    ]
    result = eng.assemble("p", "bob", "anything", budget=2000, rules=rules)
    assert len(result.warnings) == 3
    assert all(w.startswith("rule 'r'") and "does not resolve" in w for w in result.warnings)
    assert len(result.sections["warnings"]) == 3


def test_include_never_reveals_a_record_the_agent_may_not_see(eng: Engine) -> None:
    secret = eng.add(project="p", author="alice", content="salary data", visibility="private")
    result = eng.assemble(
        "p", "bob", "x", budget=2000, rules=[{"name": "r", "then": [{"include": secret.id}]}]
    )
    assert "salary" not in _all_text(result)
    assert any("does not resolve" in w for w in result.warnings)


def test_file_include_cannot_escape_the_workspace(eng: Engine, tmp_path: Path) -> None:
    write(tmp_path, "outside.txt", "outside secret")
    d = tmp_path / "ws" / ".contextwright" / "rules"
    write(d, "r.json", {"name": "r", "then": [{"include": "file:../outside.txt"}]})
    eng.rules = load_rules(d)
    result = eng.assemble("p", "bob", "x", budget=2000)
    assert "outside secret" not in _all_text(result)
    assert any("does not resolve" in w for w in result.warnings)


def test_rule_can_ask_for_superseded(eng: Engine) -> None:
    old = eng.add(
        project="p", author="a", kind="decision", content="retries: 3", created_at=NOW - 100
    )
    eng.add(
        project="p",
        author="a",
        kind="decision",
        content="retries: 5",
        supersedes=old.id,
        created_at=NOW - 50,
    )
    rules = [
        {
            "name": "history",
            "when": {"field": "task", "contains": "why"},
            "then": [{"include": "superseded"}],
        }
    ]
    with_rule = eng.assemble("p", "bob", "why retries", budget=2000, rules=rules)
    assert "retries: 3" in _all_text(with_rule)
    without = eng.assemble("p", "bob", "retries", budget=2000, rules=rules)
    assert "retries: 3" not in _all_text(without)


def test_engine_takes_a_directory_and_reloads(store: Store, tmp_path: Path) -> None:
    d = tmp_path / "rules"
    write(d, "a.json", {"name": "one", "then": [{"pin": {"kind": "task"}}]})
    eng = Engine(store, rules=d)
    assert [r.name for r in eng.rules.rules] == ["one"]
    write(d, "b.json", {"name": "two", "then": [{"pin": {"kind": "task"}}]})
    assert [r.name for r in eng.reload_rules().rules] == ["one", "two"]
    write(d, "c.json", "{broken")
    with pytest.raises(RuleError):
        eng.reload_rules()
    assert [r.name for r in eng.rules.rules] == ["one", "two"]  # the old rules stay
    with pytest.raises(RuleError) as err:
        Engine(store, rules=tmp_path / "missing")
    assert err.value.field == "(directory)"


# -- bad input ----------------------------------------------------------------------------------


def test_malformed_json_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.json", '{\n  "rules": [\n    {"name": "x",}\n  ]\n}')
    errors = check_rules(tmp_path)
    assert len(errors) == 1
    e = errors[0]
    assert e.file == str(path) and e.field.startswith("line 3 column")
    assert "fix the JSON syntax" in e.fix
    assert str(path) in str(e) and "line 3" in str(e)
    with pytest.raises(RuleError):
        load_rules(tmp_path)


@pytest.mark.parametrize(
    ("rule", "field", "fix_has"),
    [
        (
            {"name": "r", "then": [{"explode": "x"}]},
            "rules[0].then[0]",
            "include, suppress, pin, boost, cap",
        ),
        (
            {"name": "r", "when": {"field": "task", "regex": "(unclosed"}, "then": [{"pin": "x"}]},
            "rules[0].when.regex",
            "valid regular expression",
        ),
        (
            {"name": "r", "when": {"field": "weather", "equals": "sunny"}, "then": [{"pin": "x"}]},
            "rules[0].when.field",
            "task, agent, role, project, kind",
        ),
        (
            {
                "name": "r",
                "when": {"field": "task", "contains": "a", "equals": "b"},
                "then": [{"pin": "x"}],
            },
            "rules[0].when",
            "exactly one of",
        ),
        (
            {"name": "r", "when": {"field": "role", "in": "dev"}, "then": [{"pin": "x"}]},
            "rules[0].when.in",
            "list of strings",
        ),
        (
            {"name": "r", "when": {"all": []}, "then": [{"pin": "x"}]},
            "rules[0].when.all",
            "non-empty list",
        ),
        (
            {"name": "r", "when": {"not": {"field": "task"}}, "then": [{"pin": "x"}]},
            "rules[0].when.not",
            "exactly one of",
        ),
        ({"name": "r", "then": []}, "rules[0].then", "non-empty list"),
        ({"then": [{"pin": "x"}]}, "rules[0].name", "give the rule a name"),
        (
            {"name": "r", "then": [{"suppress": {"kind": "gossip"}}]},
            "rules[0].then[0].suppress.kind",
            "use one of",
        ),
        (
            {"name": "r", "then": [{"suppress": {"colour": "red"}}]},
            "rules[0].then[0].suppress.colour",
            "remove it",
        ),
        (
            {"name": "r", "then": [{"boost": {"tag": "x"}, "by": 99}]},
            "rules[0].then[0].by",
            "from -10 to 10",
        ),
        ({"name": "r", "then": [{"cap": "fulltext"}]}, "rules[0].then[0].tokens", "whole number"),
        (
            {"name": "r", "then": [{"include": "http://x"}]},
            "rules[0].then[0].include",
            "unknown prefix",
        ),
        (
            {"name": "r", "then": [{"include": {"kind": "note"}}]},
            "rules[0].then[0].include",
            "give a reference",
        ),
        (
            {"name": "r", "then": [{"suppress": "superseded"}]},
            "rules[0].then[0].suppress",
            "only with include",
        ),
        ({"name": "r", "priority": 3, "then": [{"pin": "x"}]}, "rules[0].priority", "remove it"),
    ],
)
def test_invalid_rules_name_the_field_and_the_fix(
    tmp_path: Path, rule: dict[str, Any], field: str, fix_has: str
) -> None:
    path = write(tmp_path, "r.json", {"rules": [rule]})
    errors = check_rules(tmp_path)
    assert [(e.file, e.field) for e in errors] == [(str(path), field)], errors
    assert fix_has in errors[0].fix
    # The schema agrees that the document is invalid.
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"rules": [rule]}, schema(), format_checker=jsonschema.FormatChecker())


def test_check_reports_every_problem_in_every_file(tmp_path: Path) -> None:
    write(
        tmp_path,
        "a.json",
        {
            "rules": [
                {"name": "a", "then": [{"nope": 1}, {"cap": 3, "tokens": -1}]},
                {"name": "dup", "then": [{"pin": "x"}]},
            ]
        },
    )
    write(tmp_path, "b.json", "[1, 2")
    write(tmp_path, "c.json", {"rules": [{"name": "dup", "then": [{"pin": "x"}]}]})
    write(tmp_path, "d.json", [1, 2])
    errors = check_rules(tmp_path)
    where = [(Path(e.file).name, e.field) for e in errors]
    assert where == [
        ("a.json", "rules[0].then[0]"),
        ("a.json", "rules[0].then[1].cap"),
        ("a.json", "rules[0].then[1].tokens"),
        ("b.json", "line 1 column 6"),
        ("d.json", "(document)"),
        ("c.json", "rules[0].name"),  # a duplicate name, found once all files are read
    ]
    with pytest.raises(RuleError) as err:
        load_rules(tmp_path)
    assert err.value.file.endswith("a.json")
    assert err.value.to_dict()["type"] == "rule_error"


def test_valid_examples_pass_the_published_schema() -> None:
    docs = [
        {"name": "one", "then": [{"include": "superseded"}]},
        {
            "$schema": "https://contextwright.dev/schemas/rule.schema.json",
            "rules": [
                {
                    "name": "all-actions",
                    "description": "every action",
                    "when": {
                        "any": [
                            {"field": "kind", "in": ["bug", "review"]},
                            {"not": {"field": "task", "regex": "^x"}},
                        ]
                    },
                    "then": [
                        {"include": "rec:01ABC"},
                        {"include": "kv:deploy.target"},
                        {"include": "file:docs/a.md"},
                        {"suppress": {"kind": "tool_result"}},
                        {"suppress": {"tag": "legacy"}},
                        {"suppress": {"ref": "01ABC"}},
                        {"pin": "kv:style"},
                        {"boost": {"tag": "auth"}, "by": 2},
                        {"cap": "fulltext", "tokens": 400},
                    ],
                }
            ],
        },
    ]
    for doc in docs:
        jsonschema.validate(doc, schema())
        rules, errors = parse_document(doc, "<test>")
        assert errors == [] and rules


def test_the_schema_ships_in_the_package() -> None:
    from importlib import resources

    path = resources.files("contextwright").joinpath("schemas/rule.schema.json")
    assert json.loads(path.read_text())["title"] == "contextwright context rules file"
