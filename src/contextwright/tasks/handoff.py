"""The structured handoff a finished task leaves for the tasks after it, and its validation.

A handoff is given as YAML or JSON text (YAML is a superset of JSON) or as a mapping. `parse_handoff`
turns it into a `Handoff` or raises `ValidationError` naming the exact field (for example
`handoff.gotchas[1].severity`), the value and the fix. Nothing is written before it succeeds, so a
bad handoff leaves the task open.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from ..errors import ValidationError
from ..records import check_json_text

SEVERITIES = ("low", "medium", "high")
MAX_TEXT = 4_000
MAX_ITEMS = 100
MAX_HANDOFF_CHARS = 200_000
TOP_FIELDS = (
    "summary",
    "files_created",
    "files_modified",
    "dependencies_for_next",
    "patterns_discovered",
    "gotchas",
    "open_questions",
    "decisions",
)
EXAMPLE = "summary: Added JWT middleware\ngotchas:\n  - issue: tokens expire in 15 min\n    severity: high"


@dataclass(frozen=True)
class FileChange:
    path: str
    lines: str = ""
    purpose: str = ""
    component: str = ""

    @property
    def location(self) -> str:
        return f"{self.path}:{self.lines}" if self.lines else self.path


@dataclass(frozen=True)
class FileRef:
    """A file the next task should read, and why."""

    file: str
    reason: str = ""


@dataclass(frozen=True)
class PatternFound:
    pattern: str
    applies_to: tuple[str, ...] = ()
    location: str = ""


@dataclass(frozen=True)
class Gotcha:
    issue: str
    severity: str = "medium"
    applies_to: tuple[str, ...] = ()
    location: str = ""


@dataclass(frozen=True)
class OpenQuestion:
    question: str
    blocking: bool = False
    context: str = ""
    recommendation: str = ""


@dataclass(frozen=True)
class DecisionMade:
    decision: str
    rationale: str = ""
    applies_to: tuple[str, ...] = ()
    supersedes: str | None = None


@dataclass(frozen=True)
class Handoff:
    summary: str
    files_created: tuple[FileChange, ...] = ()
    files_modified: tuple[FileChange, ...] = ()
    dependencies_for_next: tuple[FileRef, ...] = ()
    patterns_discovered: tuple[PatternFound, ...] = ()
    gotchas: tuple[Gotcha, ...] = ()
    open_questions: tuple[OpenQuestion, ...] = ()
    decisions: tuple[DecisionMade, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        """Plain data that `parse_handoff` reads back unchanged (stored in the handoff record)."""

        def files(items: Sequence[FileChange]) -> list[dict[str, str]]:
            return [
                {"path": f.path, "lines": f.lines, "purpose": f.purpose, "component": f.component}
                for f in items
            ]

        return {
            "summary": self.summary,
            "files_created": files(self.files_created),
            "files_modified": files(self.files_modified),
            "dependencies_for_next": [
                {"file": r.file, "reason": r.reason} for r in self.dependencies_for_next
            ],
            "patterns_discovered": [
                {"pattern": p.pattern, "applies_to": list(p.applies_to), "location": p.location}
                for p in self.patterns_discovered
            ],
            "gotchas": [
                {
                    "issue": g.issue,
                    "severity": g.severity,
                    "applies_to": list(g.applies_to),
                    "location": g.location,
                }
                for g in self.gotchas
            ],
            "open_questions": [
                {
                    "question": q.question,
                    "blocking": q.blocking,
                    "context": q.context,
                    "recommendation": q.recommendation,
                }
                for q in self.open_questions
            ],
            "decisions": [
                {
                    "decision": d.decision,
                    "rationale": d.rationale,
                    "applies_to": list(d.applies_to),
                    "supersedes": d.supersedes,
                }
                for d in self.decisions
            ],
        }

    def files_to_read(self) -> tuple[FileRef, ...]:
        """What the next task should read: `dependencies_for_next`, else the files created."""
        if self.dependencies_for_next:
            return self.dependencies_for_next
        return tuple(FileRef(f.path, f.purpose) for f in self.files_created)


# -- validation ---------------------------------------------------------------------------------


def _text(value: Any, field: str, *, required: bool, fix: str) -> str:
    if value is None:
        if required:
            raise ValidationError(field, None, fix, problem="is missing")
        return ""
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise ValidationError(
            field, value, fix, problem=f"must be text, not {type(value).__name__}"
        )
    value = value.strip()
    if required and not value:
        raise ValidationError(field, value, fix, problem="is empty")
    if len(value) > MAX_TEXT:
        raise ValidationError(
            field, f"<{len(value)} characters>", f"keep it under {MAX_TEXT} characters"
        )
    return str(value)


def _list(value: Any, field: str, fix: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise ValidationError(
            field, value, fix, problem=f"must be a list, not {type(value).__name__}"
        )
    if len(value) > MAX_ITEMS:
        raise ValidationError(field, f"{len(value)} items", f"give at most {MAX_ITEMS} items")
    return list(value)


def _obj(value: Any, field: str, keys: Sequence[str], fix: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValidationError(
            field, value, fix, problem=f"must be an object, not {type(value).__name__}"
        )
    unknown = sorted(str(k) for k in value if k not in keys)
    if unknown:
        raise ValidationError(
            f"{field}.{unknown[0]}",
            value[unknown[0]],
            f"remove it; the known fields are {', '.join(keys)}",
            problem="is not a known field",
        )
    return value


def _tags(value: Any, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [v for v in value.replace(",", " ").split() if v]
    items = _list(value, field, "give a list of tags, e.g. [auth, jwt]")
    out: dict[str, None] = {}
    for i, item in enumerate(items):
        tag = _text(item, f"{field}[{i}]", required=True, fix="give a short tag such as 'auth'")
        if len(tag) > 100:
            raise ValidationError(f"{field}[{i}]", tag, "keep a tag under 100 characters")
        out.setdefault(tag.lower(), None)
    return tuple(out)


def _file_change(value: Any, field: str) -> FileChange:
    if isinstance(value, str):
        value = {"path": value}
    fix = "give {path: src/x.ts, lines: '10-40', purpose: what it does}"
    data = _obj(value, field, ("path", "lines", "purpose", "component", "description"), fix)
    path = _text(data.get("path"), f"{field}.path", required=True, fix="give the file's path")
    if len(path) > 500 or any(c in path for c in "\n\r\t"):
        raise ValidationError(f"{field}.path", path, "give one path of at most 500 characters")
    lines = _text(data.get("lines"), f"{field}.lines", required=False, fix="give e.g. '10-40'")
    if len(lines) > 50:
        raise ValidationError(f"{field}.lines", lines, "give a line range such as '10-40'")
    purpose = _text(
        data.get("purpose") or data.get("description"),
        f"{field}.purpose",
        required=False,
        fix="say what the file is for",
    )
    component = _text(
        data.get("component"), f"{field}.component", required=False, fix="name the component"
    )
    return FileChange(path=path, lines=lines, purpose=purpose, component=component)


def _file_ref(value: Any, field: str) -> FileRef:
    if isinstance(value, str):
        return FileRef(_text(value, field, required=True, fix="give a path"))
    data = _obj(value, field, ("file", "path", "reason"), "give {file: path, reason: why}")
    path = _text(
        data.get("file") or data.get("path"), f"{field}.file", required=True, fix="give a path"
    )
    reason = _text(data.get("reason"), f"{field}.reason", required=False, fix="say why")
    return FileRef(path, reason)


def _severity(value: Any, field: str) -> str:
    if value is None:
        return "medium"
    if not isinstance(value, str) or value.lower() not in SEVERITIES:
        raise ValidationError(field, value, f"use one of {', '.join(SEVERITIES)}")
    return value.lower()


def _blocking(value: Any, field: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ValidationError(field, value, "use true or false")
    return value


def load_handoff_data(handoff: Any) -> Mapping[str, Any]:
    """YAML/JSON text or a mapping -> a mapping; text that does not parse names the line."""
    if isinstance(handoff, Handoff):
        return handoff.to_dict()
    if isinstance(handoff, str):
        if len(handoff) > MAX_HANDOFF_CHARS:
            raise ValidationError(
                "handoff",
                f"<{len(handoff)} characters>",
                f"keep it under {MAX_HANDOFF_CHARS} characters",
            )
        try:
            handoff = yaml.safe_load(handoff)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            raise ValidationError(
                "handoff",
                "<text>",
                f"give valid YAML or JSON{where}, e.g.\n{EXAMPLE}",
                problem="does not parse",
            ) from exc
    if not isinstance(handoff, Mapping):
        raise ValidationError(
            "handoff",
            handoff,
            f"give an object with at least a summary, e.g.\n{EXAMPLE}",
            problem=f"must be an object, not {type(handoff).__name__}",
        )
    # Its text is stored in records and traces: refused here, by field, when no store could hold it.
    check_json_text("handoff", handoff)
    return handoff


def parse_handoff(handoff: Any) -> Handoff:
    """Validate a handoff; raises ValidationError naming the first bad field and its fix."""
    data = _obj(
        load_handoff_data(handoff), "handoff", TOP_FIELDS, "give the handoff's known fields"
    )
    summary = _text(
        data.get("summary"),
        "handoff.summary",
        required=True,
        fix="say in a sentence or two what the task did",
    )

    def items(name: str, fix: str) -> list[tuple[str, Any]]:
        return [
            (f"handoff.{name}[{i}]", v)
            for i, v in enumerate(_list(data.get(name), f"handoff.{name}", fix))
        ]

    created = tuple(
        _file_change(v, f)
        for f, v in items("files_created", "give a list of {path, lines, purpose}")
    )
    modified = tuple(
        _file_change(v, f)
        for f, v in items("files_modified", "give a list of {path, lines, purpose}")
    )
    next_files = tuple(
        _file_ref(v, f)
        for f, v in items("dependencies_for_next", "give a list of paths or {file, reason}")
    )
    patterns = []
    for f, v in items("patterns_discovered", "give a list of {pattern, applies_to, location}"):
        d = _obj(
            v, f, ("pattern", "applies_to", "location"), "give {pattern, applies_to, location}"
        )
        patterns.append(
            PatternFound(
                pattern=_text(
                    d.get("pattern"), f"{f}.pattern", required=True, fix="state the pattern"
                ),
                applies_to=_tags(d.get("applies_to"), f"{f}.applies_to"),
                location=_text(
                    d.get("location"), f"{f}.location", required=False, fix="give a path"
                ),
            )
        )
    gotchas = []
    for f, v in items("gotchas", "give a list of {issue, severity}"):
        if isinstance(v, str):
            v = {"issue": v}
        d = _obj(
            v,
            f,
            ("issue", "gotcha", "severity", "applies_to", "location"),
            "give {issue, severity}",
        )
        gotchas.append(
            Gotcha(
                issue=_text(
                    d.get("issue") or d.get("gotcha"),
                    f"{f}.issue",
                    required=True,
                    fix="describe what bit you",
                ),
                severity=_severity(d.get("severity"), f"{f}.severity"),
                applies_to=_tags(d.get("applies_to"), f"{f}.applies_to"),
                location=_text(
                    d.get("location"), f"{f}.location", required=False, fix="give a path"
                ),
            )
        )
    questions = []
    for f, v in items(
        "open_questions", "give a list of {question, blocking, context, recommendation}"
    ):
        d = _obj(
            v,
            f,
            ("question", "blocking", "context", "recommendation"),
            "give {question, blocking, context, recommendation}",
        )
        questions.append(
            OpenQuestion(
                question=_text(
                    d.get("question"), f"{f}.question", required=True, fix="ask the question"
                ),
                blocking=_blocking(d.get("blocking"), f"{f}.blocking"),
                context=_text(d.get("context"), f"{f}.context", required=False, fix="give context"),
                recommendation=_text(
                    d.get("recommendation"), f"{f}.recommendation", required=False, fix="recommend"
                ),
            )
        )
    decisions = []
    for f, v in items("decisions", "give a list of {decision, rationale}"):
        d = _obj(
            v,
            f,
            ("decision", "rationale", "applies_to", "supersedes"),
            "give {decision, rationale}",
        )
        supersedes = _text(
            d.get("supersedes"), f"{f}.supersedes", required=False, fix="give a decision record id"
        )
        decisions.append(
            DecisionMade(
                decision=_text(
                    d.get("decision"), f"{f}.decision", required=True, fix="state the decision"
                ),
                rationale=_text(
                    d.get("rationale"),
                    f"{f}.rationale",
                    required=True,
                    fix="say why it was decided",
                ),
                applies_to=_tags(d.get("applies_to"), f"{f}.applies_to"),
                supersedes=supersedes or None,
            )
        )
    return Handoff(
        summary=summary,
        files_created=created,
        files_modified=modified,
        dependencies_for_next=next_files,
        patterns_discovered=tuple(patterns),
        gotchas=tuple(gotchas),
        open_questions=tuple(questions),
        decisions=tuple(decisions),
    )
