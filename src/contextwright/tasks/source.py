"""The `computed` source: a task's computed context as assembly candidates, each with its reason.

Patterns go to constraints; gotchas and blocking questions to warnings; decisions and prior work to
knowledge; code references to state. A dependency's gotchas and blocking questions are pinned, so
the packer places them first in their section; everything is packed under the same budget.
It runs only when `assemble(..., task_id=...)` names a task.
"""

from __future__ import annotations

from collections.abc import Callable

from ..assembly.candidates import Candidate
from ..assembly.sources import SourceContext
from ..records import Record
from .computed import ComputedContext

# (project, task id, complexity, agent) -> the task's computed context: TaskBoard.computed_context.
Compute = Callable[[str, str, str | None, str], ComputedContext]

NAME = "computed"


class ComputedSource:
    name = NAME

    def __init__(self, compute: Compute) -> None:
        self.compute = compute

    def applies(self, ctx: SourceContext) -> bool:
        """Only a call that names a task has computed context; any other runs this source on the
        calling thread, where it returns nothing at once (no pool round trip, pipeline.py)."""
        return bool(ctx.options.get("task_id"))

    def run(self, ctx: SourceContext) -> list[Candidate]:
        task_id = ctx.options.get("task_id")
        if not task_id:
            return []
        computed = self.compute(ctx.project, str(task_id), ctx.options.get("complexity"), ctx.agent)
        ctx.options.setdefault("notes", {})["computed"] = computed.stats.to_dict()
        return candidates(computed, ctx)


def candidates(computed: ComputedContext, ctx: SourceContext) -> list[Candidate]:
    out: list[Candidate] = []
    count = ctx.counter.count

    def add(
        key: str,
        section: str,
        text: str,
        reason: str,
        record_id: str | None,
        relevance: float,
        *,
        pinned: bool = False,
        rank: int = 0,
    ) -> None:
        r: Record | None = computed.records.get(record_id) if record_id else None
        out.append(
            Candidate(
                key=r.id if r else key,
                section=section,
                source=NAME,
                text=text,
                records=(r,) if r else (),
                components={"computed": round(relevance, 4), "prior": 1.5 - rank * 0.01},
                reasons=(reason,),
                pinned=pinned,
                tokens=count(text),
                created_at=r.created_at if r else ctx.now,
                content_hash=r.content_hash if r else "",
                sources=(NAME,),
            )
        )

    tid = computed.task_id
    for i, p in enumerate(computed.patterns_to_follow):
        text = f"- Pattern to follow: {p.pattern}" + (f" (see: {p.location})" if p.location else "")
        add(
            f"computed:{tid}:pattern:{i}",
            "constraints",
            text,
            p.reason,
            p.record_id,
            p.relevance,
            rank=i,
        )
    for i, w in enumerate(computed.warnings):
        text = f"- ⚠ {w.severity}: {w.issue}"
        add(
            f"computed:{tid}:warning:{i}",
            "warnings",
            text,
            w.reason,
            w.record_id,
            w.relevance,
            pinned=w.inherited_from is not None,
            rank=i,
        )
    for i, q in enumerate(computed.blocking_questions):
        text = f"- ⚠ Blocking question: {q.question}"
        if q.context:
            text += f"\n  - Context: {q.context}"
        if q.recommendation:
            text += f"\n  - Recommendation: {q.recommendation}"
        add(
            f"computed:{tid}:question:{i}",
            "warnings",
            text,
            q.reason,
            q.record_id,
            1.0,
            pinned=True,
            rank=i,
        )
    for i, d in enumerate(computed.relevant_decisions):
        text = f"- Decision: {d.decision}" + (f" (rationale: {d.rationale})" if d.rationale else "")
        add(
            f"computed:{tid}:decision:{i}",
            "knowledge",
            text,
            d.reason,
            d.record_id,
            d.relevance,
            rank=i,
        )
    for i, pw in enumerate(computed.prior_work):
        lines = [f"- Prior work, {pw.task}: {pw.summary}"]
        lines += [
            f"  - `{f.file}`" + (f": {f.reason}" if f.reason else "") for f in pw.files_created
        ]
        add(
            f"computed:{tid}:prior:{pw.task_id}",
            "knowledge",
            "\n".join(lines),
            pw.reason,
            pw.record_id,
            1.0,
            rank=i,
        )
    for i, c in enumerate(computed.code_references):
        text = f"- Code: `{c.file}` · {c.component}" + (f" · {c.notes}" if c.notes else "")
        add(
            f"computed:{tid}:code:{i}",
            "state",
            text,
            c.reason,
            c.record_id,
            c.relevance / 10,
            rank=i,
        )
    return out
