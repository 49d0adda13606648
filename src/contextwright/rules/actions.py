"""What a fired context rule does to one assembly: step 3 of the pipeline.

`includes` reads the store (and the workspace, for `file:` references) to add candidates before
merge; `apply` suppresses, pins and boosts the merged candidates (pure); `caps` gives per-source
token caps for the packer. Every candidate a rule touches carries `rule <name>: ...` in its
reasons, and the trace names the rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..assembly.candidates import Candidate
from ..assembly.kv_source import kv_candidate
from ..assembly.packing import Decision
from ..assembly.references import file_record, visible_record, workspace_file
from ..assembly.sources import SourceContext, record_candidate, section_for
from ..records import content_hash
from .ruleset import SUPERSEDED, Rule, Target

MAX_FILE_CHARS = 20_000


def include_superseded(rule: Rule | None) -> bool:
    return rule is not None and any(
        a.name == "include" and a.target.ref == SUPERSEDED for a in rule.then
    )


def caps(rule: Rule | None) -> dict[str, int]:
    if rule is None:
        return {}
    return {a.source: a.tokens for a in rule.then if a.name == "cap"}


def _file_candidate(ctx: SourceContext, path: str, root: Path | None, why: str) -> Candidate | None:
    r = file_record(ctx.store, ctx.project, ctx.agent, path)
    if r is not None:
        return record_candidate(r, ctx, "rules", section_for(r, "knowledge"), why, prior=2.0)
    found = workspace_file(root, path)
    if found is None:
        return None
    try:
        body = found.read_text(encoding="utf-8", errors="replace")[:MAX_FILE_CHARS]
    except OSError:
        return None
    text = f"- [file · {path}]\n{body}"
    return Candidate(
        key=f"file:{path}",
        section="knowledge",
        source="rules",
        text=text,
        tokens=ctx.counter.count(text),
        components={"prior": 2.0},
        reasons=(why,),
        content_hash=content_hash(body),
        sources=("rules",),
    )


def resolve(ctx: SourceContext, ref: str, root: Path | None, why: str) -> Candidate | None:
    """A candidate for one reference (rec:ID, kv:KEY, file:PATH or a bare record id)."""
    if ref.startswith("kv:"):
        value = ctx.store.kv_get(ctx.project, ref[3:])
        if value is None:
            return None
        c = kv_candidate(ctx, ref[3:], value, why, "rules")
        c.components["prior"] = 2.0
        return c
    if ref.startswith("file:"):
        return _file_candidate(ctx, ref[5:], root, why)
    r = visible_record(ctx.store, ctx.project, ctx.agent, ref.removeprefix("rec:"))
    if r is None:
        return None
    return record_candidate(r, ctx, "rules", section_for(r, "knowledge"), why, prior=2.0)


def includes(
    rule: Rule | None, ctx: SourceContext, root: Path | None
) -> tuple[list[Candidate], list[str]]:
    """Candidates for the rule's include (and pin-by-reference) actions, and a warning for each
    reference that does not resolve."""
    if rule is None:
        return [], []
    found: list[Candidate] = []
    warnings: list[str] = []
    for a in rule.then:
        ref = a.target.ref
        if a.name not in ("include", "pin") or ref is None or ref == SUPERSEDED:
            continue
        c = resolve(ctx, ref, root, f"rule {rule.name}: {a.name} {ref}")
        if c is None:
            warnings.append(
                f"rule {rule.name!r} ({Path(rule.file).name}): {a.name} {ref} does not resolve "
                f"in project {ctx.project!r}; fix the reference or the rule"
            )
            continue
        c.pinned = c.pinned or a.name == "pin"
        found.append(c)
    return found, warnings


def matches(c: Candidate, t: Target) -> bool:
    if t.ref is not None:
        ref = t.ref.removeprefix("rec:")
        return c.key in (t.ref, ref) or ref in c.record_ids
    if t.kind is not None:
        return any(r.kind == t.kind for r in c.records)
    if t.tag is not None:
        return any(t.tag in r.tags for r in c.records)
    return False


def apply(
    rule: Rule | None, candidates: Sequence[Candidate]
) -> tuple[list[Candidate], list[Decision]]:
    """Suppress, pin and boost, in the rule's order. Returns what is kept and what was
    suppressed."""
    if rule is None:
        return list(candidates), []
    kept = list(candidates)
    dropped: list[Decision] = []
    for a in rule.then:
        if a.name == "suppress":
            stay = []
            for c in kept:
                if matches(c, a.target):
                    reason = f"suppressed by rule {rule.name} ({a.target})"
                    dropped.append(Decision(c, False, reason, c.tokens))
                else:
                    stay.append(c)
            kept = stay
        elif a.name in ("pin", "boost"):
            for c in kept:
                if not matches(c, a.target):
                    continue
                if a.name == "pin":
                    c.pinned = True
                    note = f"rule {rule.name}: pinned"
                else:
                    c.components["boost"] = round(c.components.get("boost", 0.0) + a.by, 6)
                    note = f"rule {rule.name}: boost {a.by:+g}"
                if note not in c.reasons:
                    c.reasons = (*c.reasons, note)
    return kept, dropped
