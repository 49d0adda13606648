"""Context rules: JSON documents that say, for a kind of request, what to include, suppress, pin,
boost or cap. A team writes them once in `.contextwright/rules/` instead of tuning code.

    {"rules": [{
        "name": "refactors-see-the-architecture",
        "when": {"all": [{"field": "task", "contains": "refactor"},
                         {"not": {"field": "role", "equals": "pm"}}]},
        "then": [{"include": "kv:architecture"}, {"suppress": {"kind": "tool_result"}},
                 {"boost": {"tag": "auth"}, "by": 2}, {"cap": "fulltext", "tokens": 400}]
    }]}

Files are read in name order (`*.json` only), rules in file order, and the first rule whose
condition matches the request applies. Conditions match the fields in `FIELDS` with `contains`,
`equals`, `regex` or `in`, combined with `all`, `any` and `not`. A `regex` runs on RE2 (linear
time, whatever the pattern and the text), so a rule sent by any caller cannot stall the server;
patterns RE2 cannot run in linear time (backreferences, lookarounds) or that pass the size limits
are refused when the rule is read. Every problem is reported with
the file, the field path and the fix; `check_rules` reports them all, `load_rules` raises the
first. The published JSON Schema is `schemas/rule.schema.json`. Matching is a pure function; the
actions are applied by actions.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import RuleError, ValidationError
from ..records import KINDS, check_json_text, check_name

DEFAULT_RULES_DIR = Path(".contextwright") / "rules"
FIELDS = ("task", "agent", "role", "project", "kind", "milestone", "session")
OPS = ("contains", "equals", "regex", "in")
ACTIONS = ("include", "suppress", "pin", "boost", "cap")
TARGET_KEYS = ("ref", "kind", "tag")
REF_PREFIXES = ("rec:", "kv:", "file:")
SUPERSEDED = "superseded"
MAX_BOOST = 10.0
# A regex condition: its pattern, the memory RE2 may spend compiling it (a bigger program is
# refused, e.g. `(a{100}){100}`), and the text it looks at (the task is at most 20,000 characters
# already; names far fewer).
MAX_REGEX_CHARS = 1_000
MAX_REGEX_MEMORY = 1 << 20
MAX_MATCH_CHARS = 20_000
# A document's nesting: conditions nest 16 deep, two JSON levels each, inside rules[i].when.
MAX_RULE_DEPTH = 40

# Task kinds, guessed from the task's words when the caller does not give one (`task_kind`).
_TASK_KINDS = (
    ("review", re.compile(r"\b(review|audit|approve|pr|pull request)\b", re.I)),
    ("bug", re.compile(r"\b(bugs?|fix\w*|errors?|crash\w*|broken|fail\w*|regression)\b", re.I)),
    ("refactor", re.compile(r"\b(refactor|clean ?up|rename|restructure|simplify)\b", re.I)),
    ("test", re.compile(r"\b(tests?|coverage|pytest|spec)\b", re.I)),
    ("docs", re.compile(r"\b(docs?|documentation|readme|document)\b", re.I)),
    ("research", re.compile(r"\b(research|investigate|compare|evaluate|explore)\b", re.I)),
    ("feature", re.compile(r"\b(add|implement|build|create|support|feature)\b", re.I)),
)


def task_kind(task: str) -> str:
    """The kind of work a task asks for: review, bug, refactor, test, docs, research, feature,
    or task when no word says."""
    for name, pattern in _TASK_KINDS:
        if pattern.search(task):
            return name
    return "task"


def given_task_kind(task: str, given: str | None) -> str:
    """The kind rules match (`kind`): the caller's, checked as a name, or guessed from the task."""
    if given is None:
        return task_kind(task)
    return check_name("task_kind", given)


@dataclass(frozen=True)
class Facts:
    """What a condition can look at: the request."""

    task: str
    agent: str
    role: str
    project: str
    kind: str
    milestone: str = ""
    session: str = ""

    def get(self, name: str) -> str:
        return str(getattr(self, name))


# -- conditions ---------------------------------------------------------------------------------

Condition = Callable[[Facts], bool]


@dataclass(frozen=True)
class Target:
    """What an action points at: one reference, or every candidate of a kind or with a tag."""

    ref: str | None = None
    kind: str | None = None
    tag: str | None = None

    def to_dict(self) -> dict[str, str]:
        return {k: v for k, v in (("ref", self.ref), ("kind", self.kind), ("tag", self.tag)) if v}

    def __str__(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.to_dict().items())


@dataclass(frozen=True)
class Action:
    name: str  # include, suppress, pin, boost, cap
    target: Target = field(default_factory=Target)
    by: float = 1.0  # boost
    source: str = ""  # cap
    tokens: int = 0  # cap

    def to_dict(self) -> dict[str, Any]:
        if self.name == "cap":
            return {"cap": self.source, "tokens": self.tokens}
        out: dict[str, Any] = {self.name: self.target.to_dict()}
        if self.name == "boost":
            out["by"] = self.by
        return out


@dataclass(frozen=True)
class Rule:
    name: str
    file: str
    index: int
    when: Condition
    then: tuple[Action, ...]
    doc: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def matches(self, facts: Facts) -> bool:
        return self.when(facts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "file": self.file,
            "index": self.index,
            "then": [a.to_dict() for a in self.then],
        }


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[Rule, ...] = ()
    directory: Path | None = None
    # The workspace that `file:` references are read from (the folder holding `.contextwright`).
    root: Path | None = None

    def first_match(self, facts: Facts) -> Rule | None:
        for rule in self.rules:
            if rule.matches(facts):
                return rule
        return None

    def __len__(self) -> int:
        return len(self.rules)


# -- parsing ------------------------------------------------------------------------------------


class _Errors:
    def __init__(self, file: str) -> None:
        self.file = file
        self.found: list[RuleError] = []

    def add(self, path: str, fix: str) -> None:
        self.found.append(RuleError(self.file, path, fix))


def _always(facts: Facts) -> bool:
    return True


def _leaf(doc: Mapping[str, Any], path: str, errs: _Errors) -> Condition | None:
    name = doc.get("field")
    unknown = sorted(set(doc) - {"field", "case_sensitive", *OPS})
    for key in unknown:
        errs.add(f"{path}.{key}", f"remove it; a match has field, one of {', '.join(OPS)}")
    if name not in FIELDS:
        errs.add(f"{path}.field", f"got {name!r}; use one of {', '.join(FIELDS)}")
        return None
    ops = [op for op in OPS if op in doc]
    if len(ops) != 1:
        errs.add(path, f"give exactly one of {', '.join(OPS)} (found {len(ops)})")
        return None
    op = ops[0]
    value = doc[op]
    case = doc.get("case_sensitive", False)
    if not isinstance(case, bool):
        errs.add(f"{path}.case_sensitive", "use true or false")
        return None
    fold: Callable[[str], str] = (lambda s: s) if case else str.casefold
    if op == "in":
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            errs.add(f"{path}.in", "give a non-empty list of strings")
            return None
        allowed = {fold(v) for v in value}
        return lambda f: fold(f.get(name)) in allowed
    if not isinstance(value, str) or (op != "equals" and not value):
        errs.add(f"{path}.{op}", "give a non-empty string")
        return None
    if op == "regex":
        search = _regex(value, case, f"{path}.regex", errs)
        return None if search is None else (lambda f: search(f.get(name)))
    want = fold(value)
    if op == "equals":
        return lambda f: fold(f.get(name)) == want
    return lambda f: want in fold(f.get(name))


def _regex(
    pattern: str, case_sensitive: bool, path: str, errs: _Errors
) -> Callable[[str], bool] | None:
    """A search on RE2: linear in the text whatever the pattern, so no rule can stall a call."""
    if len(pattern) > MAX_REGEX_CHARS:
        errs.add(
            path,
            f"got a pattern of {len(pattern)} characters; keep it under {MAX_REGEX_CHARS}",
        )
        return None
    import re2  # google-re2, a core dependency; imported here as only regex rules need it

    options = re2.Options()
    options.log_errors = False  # the error goes into the RuleError, not to stderr
    options.case_sensitive = case_sensitive
    options.max_mem = MAX_REGEX_MEMORY
    try:
        compiled = re2.compile(pattern, options=options)
    except re2.error as exc:
        arg = exc.args[0] if exc.args else str(exc)
        reason = arg.decode("utf-8", "replace") if isinstance(arg, bytes) else str(arg)
        errs.add(
            path,
            f"got {_shown(pattern)}: {reason}; use a valid regular expression that RE2 accepts "
            "(no backreferences such as \\1, no lookarounds such as (?=...) or (?<!...), "
            "repetition counts up to 1000)",
        )
        return None

    def search(text: str) -> bool:
        return compiled.search(text[:MAX_MATCH_CHARS]) is not None

    return search


def _shown(value: str, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 15] + f"...({len(text)} chars)"


def parse_condition(doc: Any, path: str, errs: _Errors, depth: int = 0) -> Condition | None:
    if depth > 16:
        errs.add(path, "nest conditions at most 16 deep")
        return None
    if not isinstance(doc, Mapping):
        errs.add(path, 'give an object: {"field": ..., "contains": ...} or all / any / not')
        return None
    combos = [k for k in ("all", "any", "not") if k in doc]
    if not combos:
        return _leaf(doc, path, errs)
    if len(doc) != 1:
        errs.add(path, f"put {combos[0]!r} alone in its object; wrap siblings in all or any")
        return None
    key = combos[0]
    if key == "not":
        inner = parse_condition(doc["not"], f"{path}.not", errs, depth + 1)
        return None if inner is None else (lambda f: not inner(f))
    items = doc[key]
    if not isinstance(items, list) or not items:
        errs.add(f"{path}.{key}", "give a non-empty list of conditions")
        return None
    parts = [parse_condition(c, f"{path}.{key}[{i}]", errs, depth + 1) for i, c in enumerate(items)]
    if any(p is None for p in parts):
        return None
    conds = [p for p in parts if p is not None]
    if key == "all":
        return lambda f: all(c(f) for c in conds)
    return lambda f: any(c(f) for c in conds)


def _ref(value: Any, path: str, errs: _Errors, *, allow_superseded: bool = False) -> str | None:
    if not isinstance(value, str) or not value.strip():
        errs.add(path, "give a reference: rec:ID, kv:KEY, file:PATH or a record id")
        return None
    if value == SUPERSEDED and not allow_superseded:
        errs.add(path, "'superseded' works only with include")
        return None
    if ":" in value and not value.startswith(REF_PREFIXES) and value != SUPERSEDED:
        prefix = value.split(":", 1)[0]
        errs.add(path, f"unknown prefix {prefix + ':'!r}; use rec:, kv: or file:")
        return None
    return value


def _target(value: Any, path: str, errs: _Errors, action: str) -> Target | None:
    if isinstance(value, str):
        ref = _ref(value, path, errs, allow_superseded=action == "include")
        return None if ref is None else Target(ref=ref)
    if action == "include" or not isinstance(value, Mapping):
        what = "a reference" if action == "include" else "a reference or {kind|tag|ref: ...}"
        errs.add(path, f"give {what}")
        return None
    keys = [k for k in value if k in TARGET_KEYS]
    unknown = sorted(set(value) - set(TARGET_KEYS))
    for k in unknown:
        errs.add(f"{path}.{k}", f"remove it; a target has one of {', '.join(TARGET_KEYS)}")
    if unknown and not keys:
        return None
    if len(keys) != 1:
        errs.add(path, f"give exactly one of {', '.join(TARGET_KEYS)}")
        return None
    k = keys[0]
    v = value[k]
    if k == "ref":
        ref = _ref(v, f"{path}.ref", errs)
        return None if ref is None else Target(ref=ref)
    if k == "kind" and v not in KINDS:
        errs.add(f"{path}.kind", f"got {v!r}; use one of {', '.join(KINDS)}")
        return None
    if not isinstance(v, str) or not v:
        errs.add(f"{path}.{k}", "give a non-empty string")
        return None
    return Target(kind=v) if k == "kind" else Target(tag=v.lower())


def parse_action(doc: Any, path: str, errs: _Errors) -> Action | None:
    if not isinstance(doc, Mapping):
        errs.add(path, f"give an object with one of {', '.join(ACTIONS)}")
        return None
    names = [a for a in ACTIONS if a in doc]
    if len(names) != 1:
        others = sorted(set(doc) - {"by", "tokens"})
        got = f" (got {', '.join(others)})" if others and not names else ""
        errs.add(path, f"give exactly one action of {', '.join(ACTIONS)}{got}")
        return None
    name = names[0]
    extra = {"boost": {"by"}, "cap": {"tokens"}}.get(name, set())
    for k in sorted(set(doc) - {name} - extra):
        errs.add(f"{path}.{k}", f"remove it; {name} takes {', '.join([name, *sorted(extra)])}")
    if name == "cap":
        source, tokens = doc["cap"], doc.get("tokens")
        ok = True
        if not isinstance(source, str) or not source:
            errs.add(f"{path}.cap", "name the source to cap, e.g. 'fulltext'")
            ok = False
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
            errs.add(f"{path}.tokens", "give the cap as a whole number of tokens >= 0")
            ok = False
        return Action("cap", source=str(source), tokens=int(tokens or 0)) if ok else None
    target = _target(doc[name], f"{path}.{name}", errs, name)
    if target is None:
        return None
    by = doc.get("by", 1.0)
    if name == "boost" and (
        # Written as a range, so NaN (JSON's NaN literal, which Python's parser takes) fails it:
        # abs(nan) > MAX_BOOST is False, and a NaN boost made every score it touched NaN.
        not isinstance(by, int | float) or isinstance(by, bool) or not -MAX_BOOST <= by <= MAX_BOOST
    ):
        errs.add(f"{path}.by", f"give a number from -{MAX_BOOST:g} to {MAX_BOOST:g}")
        return None
    return Action(name, target=target, by=float(by))


RULE_KEYS = ("name", "description", "when", "then")


def parse_rule(doc: Any, file: str, index: int, path: str, errs: _Errors) -> Rule | None:
    if not isinstance(doc, Mapping):
        errs.add(path, "give a rule object with name, when and then")
        return None
    for k in sorted(set(doc) - set(RULE_KEYS)):
        errs.add(f"{path}.{k}", f"remove it; a rule has {', '.join(RULE_KEYS)}")
    name = doc.get("name")
    if not isinstance(name, str) or not name.strip():
        errs.add(f"{path}.name", "give the rule a name, e.g. 'refactors-see-architecture'")
    when: Condition | None = _always
    if "when" in doc:
        when = parse_condition(doc["when"], f"{path}.when", errs)
    then = doc.get("then")
    actions: list[Action | None] = []
    if not isinstance(then, list) or not then:
        errs.add(f"{path}.then", f"give a non-empty list of actions ({', '.join(ACTIONS)})")
    else:
        actions = [parse_action(a, f"{path}.then[{i}]", errs) for i, a in enumerate(then)]
    if when is None or not isinstance(name, str) or not actions or None in actions:
        return None
    return Rule(
        name=name,
        file=file,
        index=index,
        when=when,
        then=tuple(a for a in actions if a is not None),
        doc=dict(doc),
    )


def parse_document(
    doc: Any, file: str, rule_path: str = "rule"
) -> tuple[list[Rule], list[RuleError]]:
    """Rules of one parsed JSON document: {"rules": [...]} or a single rule object (whose
    problems are reported under `rule_path`)."""
    errs = _Errors(file)
    try:
        # Rule text reaches traces (the rule is recorded) and the stores: the same text check
        # as every other input, before anything else reads the document.
        check_json_text(
            "" if isinstance(doc, Mapping) and "rules" in doc else rule_path,
            doc,
            max_depth=MAX_RULE_DEPTH,
        )
    except ValidationError as exc:
        shown = _shown(exc.value) if isinstance(exc.value, str) else "the value"
        errs.add(exc.field or "(document)", f"got {shown}, which {exc.problem}: {exc.fix}")
        return [], errs.found
    if isinstance(doc, Mapping) and "rules" in doc:
        for k in sorted(set(doc) - {"rules", "$schema"}):
            errs.add(k, 'remove it; a rules file has "rules" (and optionally "$schema")')
        items = doc["rules"]
        if not isinstance(items, list):
            errs.add("rules", "give a list of rule objects")
            return [], errs.found
        parsed = [parse_rule(d, file, i, f"rules[{i}]", errs) for i, d in enumerate(items)]
    elif isinstance(doc, Mapping):
        parsed = [
            parse_rule({k: v for k, v in doc.items() if k != "$schema"}, file, 0, rule_path, errs)
        ]
    else:
        errs.add("(document)", 'give an object: {"rules": [...]} or one rule')
        return [], errs.found
    return [r for r in parsed if r is not None], errs.found
