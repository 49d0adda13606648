"""Invariants of the computed context, over random projects of tasks, handoffs and completions:

- it holds every blocking question and every high- or medium-severity gotcha of every completed
  dependency (the limits never cut those; see computed.py);
- it holds nothing from a dependency that is not completed (never completed, or reopened);
- every list stays within the complexity limits (warnings: max(max_gotchas, inherited gotchas)).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright import Engine
from contextwright.stores import open_store
from contextwright.tasks import COMPLEXITIES
from contextwright.tasks.computed import ComputedContext

TAGS = ("auth", "login", "cache", "schema", "api", "form", "token", "query")
SEVERITIES = ("low", "medium", "high")


@dataclass
class Plan:
    tags: list[str]
    gotchas: list[tuple[str, list[str]]]  # severity, tags
    questions: list[bool]  # blocking?
    patterns: list[list[str]]
    decisions: list[list[str]]
    files: list[str]
    fate: str  # "completed", "open", "reopened"
    deps: list[int]


tag_lists = st.lists(st.sampled_from(TAGS), min_size=1, max_size=3, unique=True)
plans = st.builds(
    Plan,
    tags=tag_lists,
    gotchas=st.lists(st.tuples(st.sampled_from(SEVERITIES), tag_lists), max_size=4),
    questions=st.lists(st.booleans(), max_size=3),
    patterns=st.lists(tag_lists, max_size=4),
    decisions=st.lists(tag_lists, max_size=2),
    files=st.lists(
        st.sampled_from(
            [
                "src/auth/jwt.ts",
                "src/api/app.ts",
                "src/db/schema.sql",
                "src/ui/form.tsx",
                "src/cache.py",
            ]
        ),
        max_size=3,
        unique=True,
    ),
    fate=st.sampled_from(["completed", "completed", "open", "reopened"]),
    deps=st.lists(st.integers(0, 20), max_size=3),
)


def handoff(i: int, p: Plan) -> dict[str, Any]:
    # Every text names its task, so the test can tell where each item came from.
    return {
        "summary": f"summary of t{i}",
        "files_created": [{"path": f, "purpose": f"t{i} {p.tags[0]} {f}"} for f in p.files],
        "gotchas": [
            {"issue": f"t{i} gotcha {j}", "severity": sev, "applies_to": tags}
            for j, (sev, tags) in enumerate(p.gotchas)
        ],
        "open_questions": [
            {"question": f"t{i} question {j}", "blocking": b} for j, b in enumerate(p.questions)
        ],
        "patterns_discovered": [
            {"pattern": f"t{i} pattern {j}", "applies_to": tags}
            for j, tags in enumerate(p.patterns)
        ],
        "decisions": [
            {"decision": f"t{i} decision {j}", "rationale": "r", "applies_to": tags}
            for j, tags in enumerate(p.decisions)
        ],
    }


def texts(c: ComputedContext) -> list[str]:
    return [
        *(p.pattern for p in c.patterns_to_follow),
        *(w.issue for w in c.warnings),
        *(d.decision for d in c.relevant_decisions),
        *(q.question for q in c.blocking_questions),
        *(p.summary for p in c.prior_work),
        *(r.notes for r in c.code_references),
    ]


@settings(max_examples=50, deadline=None)
@given(
    project=st.lists(plans, min_size=1, max_size=7),
    target_deps=st.lists(st.integers(0, 20), min_size=1, max_size=6),
    target_tags=tag_lists,
    complexity=st.sampled_from(COMPLEXITIES),
)
def test_computed_context_invariants(
    project: list[Plan], target_deps: list[int], target_tags: list[str], complexity: str
) -> None:
    engine = Engine(open_store("memory://"), workers=1, persist_traces=False)
    try:
        ids: list[str] = []
        for i, p in enumerate(project):
            deps = sorted({ids[d % len(ids)] for d in p.deps}) if ids else []
            ids.append(
                engine.tasks.create(
                    "p", name=f"t{i}", objective=f"work on {' '.join(p.tags)}", dependencies=deps
                ).id
            )
        for i, p in enumerate(project):
            if p.fate in ("completed", "reopened"):
                engine.complete_task("p", ids[i], handoff(i, p))
            if p.fate == "reopened":
                engine.set_status("p", ids[i], "open", by="lead")
        dep_idx = sorted({d % len(ids) for d in target_deps})
        target = engine.tasks.create(
            "p",
            name="target",
            objective=f"now the {' '.join(target_tags)} part",
            dependencies=[ids[d] for d in dep_idx],
            complexity=complexity,
        )
        c = engine.tasks.computed_context(target.project, target.id)
        lim = engine.tasks.limits[complexity]
        got = set(texts(c))

        completed = [d for d in dep_idx if project[d].fate == "completed"]
        must_gotchas = {
            f"t{d} gotcha {j}"
            for d in completed
            for j, (sev, _) in enumerate(project[d].gotchas)
            if sev != "low"
        }
        must_questions = {
            f"t{d} question {j}" for d in completed for j, b in enumerate(project[d].questions) if b
        }
        assert must_gotchas <= {w.issue for w in c.warnings}
        assert must_questions == {q.question for q in c.blocking_questions}

        not_done = {d for d in range(len(project)) if project[d].fate != "completed"}
        for text in got:
            origin = text.split()[0]
            if origin.startswith("t") and origin[1:].isdigit():
                assert int(origin[1:]) not in not_done, text
        assert {p.task_id for p in c.prior_work} <= {ids[d] for d in completed}

        inherited = [w for w in c.warnings if w.inherited_from is not None]
        assert len(inherited) == len(must_gotchas)
        assert len(c.warnings) <= max(lim.max_gotchas, len(inherited))
        assert len(c.patterns_to_follow) <= lim.max_patterns
        assert len(c.relevant_decisions) <= lim.max_decisions
        assert len(c.code_references) <= lim.max_code_refs
        assert len(c.prior_work) <= lim.max_prior_tasks
        assert len(c.related_tasks) <= lim.max_related_tasks
        assert len(got) == len(texts(c))  # deduplicated
        # Same input, same output.
        again = engine.tasks.computed_context(target.project, target.id)
        assert again.to_dict() == c.to_dict()
    finally:
        engine.close()
