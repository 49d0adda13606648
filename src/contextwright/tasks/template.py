"""The spec's injection format, "## Context (Computed)", rendered from a template users can override.

The template language is the small part of Handlebars the spec uses: `{{name}}`, `{{a.b}}`,
`{{#if name}}…{{else}}…{{/if}}` and `{{#each name}}…{{/each}}` (inside `each`, names resolve
against the item first, then outward). A line holding only a block tag disappears, as in Mustache.
No escaping: the output is markdown for a model, not HTML. Text, not code: nothing is evaluated.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import ValidationError


class ComputedView(Protocol):
    """What rendering reads of a computed context (computed.ComputedContext has it); a Protocol
    so that the context can render itself without this module importing it back."""

    @property
    def task_id(self) -> str: ...
    @property
    def complexity(self) -> str: ...
    @property
    def limits(self) -> Any: ...
    @property
    def stats(self) -> Any: ...
    @property
    def patterns_to_follow(self) -> Sequence[Any]: ...
    @property
    def warnings(self) -> Sequence[Any]: ...
    @property
    def relevant_decisions(self) -> Sequence[Any]: ...
    @property
    def prior_work(self) -> Sequence[Any]: ...
    @property
    def code_references(self) -> Sequence[Any]: ...
    @property
    def blocking_questions(self) -> Sequence[Any]: ...
    @property
    def related_tasks(self) -> Sequence[Any]: ...


DEFAULT_TEMPLATE = """\
## Context (Computed)

### Patterns to Follow
{{#if patterns_to_follow}}
{{#each patterns_to_follow}}
- **{{pattern}}** {{#if location}}(see: {{location}}){{/if}}
{{/each}}
{{else}}
No specific patterns identified for this task.
{{/if}}

### Warnings
{{#if warnings}}
{{#each warnings}}
- ⚠️ **{{severity}}**: {{issue}}
{{/each}}
{{else}}
No known gotchas for this task area.
{{/if}}

### Relevant Decisions
{{#if relevant_decisions}}
{{#each relevant_decisions}}
- {{decision}}
{{/each}}
{{/if}}

### Prior Work
{{#each prior_work}}
#### {{task}}
{{summary}}

**Files Created:**
{{#each files_created}}
- `{{file}}`: {{reason}}
{{/each}}
{{/each}}

### Code References
{{#if code_references}}
| Location | Component | Notes |
|----------|-----------|-------|
{{#each code_references}}
| `{{file}}` | {{component}} | {{notes}} |
{{/each}}
{{else}}
Explore the codebase as needed. No specific references pre-identified.
{{/if}}

### Open Questions (Blocking)
{{#if blocking_questions}}
⚠️ The following questions need resolution:
{{#each blocking_questions}}
- **{{question}}**
  - Context: {{context}}
  - Recommendation: {{recommendation}}
{{/each}}
{{/if}}
"""

_TAG = re.compile(r"\{\{\s*(#if|#each|/if|/each|else)?\s*([A-Za-z_][\w.]*)?\s*\}\}")
_STANDALONE = re.compile(
    r"^[ \t]*(\{\{\s*(?:#if|#each|/if|/each)\s*[\w.]*\s*\}\}|\{\{\s*else\s*\}\})[ \t]*\n",
    re.MULTILINE,
)


@dataclass
class _Block:
    kind: str  # "root", "if", "each"
    name: str = ""
    body: list[Any] = field(default_factory=list)
    other: list[Any] = field(default_factory=list)
    in_else: bool = False


@dataclass(frozen=True)
class _Var:
    name: str


def compile_template(source: str) -> _Block:
    """Parse once; a template with unbalanced blocks raises ValidationError with the position."""
    if not isinstance(source, str):
        raise ValidationError("template", source, "give the template as text")
    text = _STANDALONE.sub(lambda m: m.group(1), source)
    stack = [_Block("root")]
    pos = 0
    for m in _TAG.finditer(text):
        top = stack[-1]
        target = top.other if top.in_else else top.body
        if m.start() > pos:
            target.append(text[pos : m.start()])
        pos = m.end()
        op, name = m.group(1), m.group(2) or ""
        line = text.count("\n", 0, m.start()) + 1
        if op in ("#if", "#each"):
            if not name:
                raise ValidationError("template", m.group(0), f"name what {op} tests (line {line})")
            block = _Block(op[1:], name)
            target.append(block)
            stack.append(block)
        elif op in ("/if", "/each"):
            if top.kind != op[1:]:
                raise ValidationError(
                    "template",
                    m.group(0),
                    f"close {{{{#{top.kind}}}}} before {m.group(0)} (line {line})",
                    problem="closes the wrong block",
                )
            stack.pop()
        elif op == "else":
            if top.kind != "if" or top.in_else:
                raise ValidationError(
                    "template",
                    "{{else}}",
                    f"use {{{{else}}}} once inside {{{{#if}}}} (line {line})",
                )
            top.in_else = True
        else:
            if not name:
                raise ValidationError("template", m.group(0), f"name a field (line {line})")
            target.append(_Var(name))
    if len(stack) != 1:
        raise ValidationError(
            "template",
            f"{{{{#{stack[-1].kind} {stack[-1].name}}}}}",
            f"close it with {{{{/{stack[-1].kind}}}}}",
            problem="is never closed",
        )
    top = stack[0]
    if pos < len(text):
        top.body.append(text[pos:])
    return top


def _lookup(scopes: Sequence[Any], name: str) -> Any:
    head, *rest = name.split(".")
    for scope in reversed(scopes):
        if isinstance(scope, Mapping) and head in scope:
            value = scope[head]
            for part in rest:
                value = value.get(part) if isinstance(value, Mapping) else None
            return value
    return None


def _emit(nodes: Sequence[Any], scopes: list[Any], out: list[str]) -> None:
    for node in nodes:
        if isinstance(node, str):
            out.append(node)
        elif isinstance(node, _Var):
            value = _lookup(scopes, node.name)
            out.append("" if value is None else str(value))
        elif node.kind == "if":
            _emit(node.body if _lookup(scopes, node.name) else node.other, scopes, out)
        else:
            for item in _lookup(scopes, node.name) or ():
                scopes.append(item)
                _emit(node.body, scopes, out)
                scopes.pop()


def render_template(source: str, data: Mapping[str, Any]) -> str:
    out: list[str] = []
    _emit(compile_template(source).body, [data], out)
    return "".join(out)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def template_data(c: ComputedView) -> dict[str, Any]:
    """The names the template sees (the spec's), one level of plain data."""
    return {
        "task_id": c.task_id,
        "complexity": c.complexity,
        "patterns_to_follow": [
            {"pattern": p.pattern, "location": p.location, "relevance": p.relevance}
            for p in c.patterns_to_follow
        ],
        "warnings": [
            {"issue": w.issue, "severity": w.severity, "relevance": w.relevance} for w in c.warnings
        ],
        "relevant_decisions": [
            {"decision": d.decision, "rationale": d.rationale, "relevance": d.relevance}
            for d in c.relevant_decisions
        ],
        "prior_work": [
            {
                "task": p.task,
                "task_id": p.task_id,
                "summary": p.summary,
                "files_created": [{"file": f.file, "reason": f.reason} for f in p.files_created],
            }
            for p in c.prior_work
        ],
        "code_references": [
            {"file": _cell(r.file), "component": _cell(r.component), "notes": _cell(r.notes)}
            for r in c.code_references
        ],
        "blocking_questions": [
            {"question": q.question, "context": q.context, "recommendation": q.recommendation}
            for q in c.blocking_questions
        ],
        "related_tasks": [{"task_id": t.task_id, "summary": t.summary} for t in c.related_tasks],
    }


def render_computed(computed: ComputedView, template: str | None = None) -> str:
    return render_template(template or DEFAULT_TEMPLATE, template_data(computed))
