"""Numbers a rules or pipelines document can carry that the checks let through: JSON's NaN literal (Python's
parser takes it, in a rules file and in an HTTP body alike) as a boost passed `abs(by) > 10` and
made every boosted item's score NaN (null in the answer), while /v1/rules/validate called the rule
valid; a number of 4,300+ digits in a rules file raised a bare ValueError, a 500 on
POST /v1/rules/reload and an "unexpected ValueError" in `contextwright rules check`."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from contextwright import Engine, RuleError
from contextwright.cli import cli
from contextwright.rules.loading import check_rules
from contextwright.rules.ruleset import parse_document
from contextwright.server import create_app
from contextwright.settings import Settings
from servers import auth, running

KEY = "admin-key-000000"


def boost(by: str) -> str:
    return (
        '{"rules": [{"name": "auth-first", "when": {"field": "task", "contains": "login"},'
        ' "then": [{"boost": {"tag": "auth"}, "by": ' + by + "}]}]}"
    )


@pytest.mark.parametrize("by", ["NaN", "Infinity", "-Infinity", "1e400", "11"])
def test_a_boost_that_is_not_a_number_in_range_is_refused(by: str) -> None:
    rules, errors = parse_document(json.loads(boost(by)), "<test>")
    assert rules == [] and [e.field for e in errors] == ["rules[0].then[0].by"]


def test_http_a_nan_boost_is_invalid_and_no_score_is_nan(tmp_path: Path) -> None:
    with Engine.open(f"sqlite:///{tmp_path / 'r.db'}") as engine:
        for i in range(4):
            engine.add(
                project="acme", author="Ada Lovelace", content=f"login form {i}", tags=["auth"]
            )
        trace = engine.assemble("acme", "Ada Lovelace", "login form").trace.id
        engine.flush()
        app = create_app(engine, Settings(api_keys={KEY: ["*"]}))
        headers = {**auth(KEY), "content-type": "application/json"}
        with running(app) as base, httpx.Client(base_url=base, headers=headers) as c:
            valid = c.post("/v1/rules/validate", content=boost("NaN")).json()
            assert (
                valid["valid"] is False and valid["problems"][0]["field"] == "rules[0].then[0].by"
            )
            r = c.post(f"/v1/projects/acme/traces/{trace}/replay", content=boost("NaN")[:-1] + "}")
            assert r.status_code == 422 and r.json()["field"] == "rules[0].then[0].by", r.text


def test_a_rules_file_with_a_huge_number_is_a_rule_error_naming_the_file(tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    bad = rules / "huge.json"
    bad.write_text(boost("9" * 5_000))
    errors = check_rules(rules)
    assert len(errors) == 1 and errors[0].file == str(bad) and "4,300 digits" in errors[0].fix
    with pytest.raises(RuleError):
        Engine.open("memory://", rules=str(rules))
    result = CliRunner().invoke(cli, ["rules", "check", str(rules)])
    assert (
        result.exit_code == 1 and "unexpected" not in result.output and "huge.json" in result.output
    )


def test_http_reload_of_a_rules_file_with_a_huge_number_is_a_422(tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    with Engine.open(f"sqlite:///{tmp_path / 'r.db'}", rules=str(rules)) as engine:
        app = create_app(engine, Settings(api_keys={KEY: ["*"]}, rules_dir=str(rules)))
        (rules / "huge.json").write_text(boost("9" * 5_000))
        with running(app) as base:
            r = httpx.post(f"{base}/v1/rules/reload", headers=auth(KEY))
            assert r.status_code == 422, r.text
            assert "huge.json" in r.json()["detail"]
            assert engine.rules.rules == ()  # the old (empty) rules stay


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_pipeline_with_a_non_finite_number_is_refused_naming_it(value: float) -> None:
    """A call's pipelines arrive parsed (HTTP, MCP, Python): NaN passed the schema's range check
    and a NaN `max_age_days` silently dropped every candidate of the pipeline."""
    steps = [{"step": "fulltext"}, {"step": "filter", "max_age_days": value}]
    with Engine.open("memory://") as engine:
        engine.add(project="acme", author="bob", content="login form")
        with pytest.raises(RuleError) as err:
            engine.assemble("acme", "bob", "login", pipelines=[{"name": "mine", "steps": steps}])
    assert err.value.field == "pipelines[0].steps[1].max_age_days"
    assert "at most 36500" in str(err.value)  # the schema's range, whichever check refused it


def test_http_a_nan_in_a_calls_pipeline_is_a_422(tmp_path: Path) -> None:
    body = (
        '{"agent": "bob", "task": "login", "pipelines": [{"name": "mine", "steps": '
        '[{"step": "fulltext"}, {"step": "filter", "max_age_days": NaN}]}]}'
    )
    with Engine.open(f"sqlite:///{tmp_path / 'p.db'}") as engine:
        engine.add(project="acme", author="bob", content="login form")
        app = create_app(engine, Settings(api_keys={KEY: ["*"]}))
        headers = {**auth(KEY), "content-type": "application/json"}
        with running(app) as base:
            r = httpx.post(f"{base}/v1/projects/acme/assemble", content=body, headers=headers)
            assert r.status_code == 422, r.text
            assert r.json()["field"] == "pipelines[0].steps[1].max_age_days"
