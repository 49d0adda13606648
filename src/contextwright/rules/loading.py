"""Reading rules: a directory of JSON files, a list of documents, or a RuleSet as it is; and the
published JSON Schema. Parsing and matching are in ruleset.py."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import RuleError
from .ruleset import DEFAULT_RULES_DIR, Rule, RuleSet, parse_document


def read_file(path: Path) -> tuple[list[Rule], list[RuleError]]:
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return [], [RuleError(name, "(file)", f"make it a readable UTF-8 file ({exc})")]
    try:
        doc = json.loads(text)
    except RecursionError:
        return [], [RuleError(name, "(document)", "nest the JSON less deeply")]
    except json.JSONDecodeError as exc:
        return [], [
            RuleError(
                name, f"line {exc.lineno} column {exc.colno}", f"fix the JSON syntax: {exc.msg}"
            )
        ]
    except ValueError:  # a number of 4,300+ digits: Python's int conversion limit
        return [], [RuleError(name, "(document)", "write numbers of fewer than 4,300 digits")]
    return parse_document(doc, name)


def _files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.suffix == ".json" and p.is_file())


def _scan(directory: str | Path) -> tuple[list[Rule], list[RuleError], Path]:
    d = Path(directory)
    if not d.is_dir():
        return (
            [],
            [RuleError(str(d), "(directory)", "create the directory or pass one that exists")],
            d,
        )
    rules: list[Rule] = []
    errors: list[RuleError] = []
    for path in _files(d):
        found, errs = read_file(path)
        rules.extend(found)
        errors.extend(errs)
    seen: dict[str, Rule] = {}
    for r in rules:
        first = seen.setdefault(r.name, r)
        if first is not r:
            errors.append(
                RuleError(
                    r.file,
                    f"rules[{r.index}].name",
                    f"{r.name!r} is already the name of a rule in {first.file}; rename one",
                )
            )
    return rules, errors, d


def check_rules(directory: str | Path = DEFAULT_RULES_DIR) -> list[RuleError]:
    """Every problem in every rules file of `directory`; empty when all rules are valid."""
    return _scan(directory)[1]


def _workspace_root(directory: Path) -> Path:
    d = directory.resolve()
    if d.name == "rules" and d.parent.name == ".contextwright":
        return d.parent.parent
    return d


def load_rules(directory: str | Path = DEFAULT_RULES_DIR, root: Path | None = None) -> RuleSet:
    """The rules of `directory` in evaluation order; raises the first RuleError if any is
    invalid (run check_rules to see them all)."""
    rules, errors, d = _scan(directory)
    if errors:
        raise errors[0]
    return RuleSet(tuple(rules), directory=d, root=root or _workspace_root(d))


def rules_from(docs: Iterable[Any], name: str = "<rules>") -> RuleSet:
    """A RuleSet from parsed JSON documents, for code and tests that keep rules in memory."""
    rules: list[Rule] = []
    for i, doc in enumerate(docs):
        # A list of rule objects (a request's `rules`): problems read rules[i].when...
        found, errors = parse_document(doc, f"{name}[{i}]", f"rules[{i}]")
        if errors:
            raise errors[0]
        rules.extend(found)
    return RuleSet(tuple(rules))


def coerce_rules(value: RuleSet | str | Path | Sequence[Any] | None) -> RuleSet:
    if value is None:
        return RuleSet()
    if isinstance(value, RuleSet):
        return value
    if isinstance(value, str | Path):
        return load_rules(value)
    if isinstance(value, Sequence):
        return rules_from(value)
    raise RuleError(
        "<rules>", "rules", "give a RuleSet, a rules directory or a list of rule objects"
    )


def schema() -> dict[str, Any]:
    """The published JSON Schema of a rules file."""
    text = resources.files("contextwright").joinpath("schemas/rule.schema.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data
