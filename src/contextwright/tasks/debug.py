"""The "## Context Debug" block: how a computed context came to be, for a human reading it.

On with `computed_context(..., debug=True)`. `debug_enabled` (settings.py) reads `CONTEXTWRIGHT_DEBUG_CONTEXT`
from an environment mapping; `Settings.from_env` calls it, and the edges that render a computed
context (`contextwright task context`, `GET .../tasks/{id}/context`) turn the block on when
`Settings.debug_context` is set. The library never reads the environment itself.
"""

from __future__ import annotations

from ..settings import DEBUG_ENV_VAR as ENV_VAR
from ..settings import debug_enabled
from .template import ComputedView

__all__ = ["ENV_VAR", "debug_enabled", "render_debug"]


def _list(items: object) -> str:
    return "[" + ", ".join(str(i) for i in items) + "]" if isinstance(items, list | tuple) else "[]"


def render_debug(c: ComputedView) -> str:
    s = c.stats
    sig = s.signals
    matched = s.nodes_matched
    skipped = "".join(f"\n- Skipped {k}: {v}" for k, v in sorted(s.dependencies_skipped.items()))
    return (
        "## Context Debug\n\n"
        "### Signals Extracted\n"
        f"- Keywords: {_list(sig.keywords)}\n"
        f"- Domains: {_list(sig.domains)}\n"
        f"- Files Mentioned: {_list(sig.files_mentioned)}\n"
        f"- Task Types: {_list(sig.task_types)}\n\n"
        "### Knowledge Graph Query\n"
        f"- Nodes matched: {sum(matched.get(k, 0) for k in ('pattern', 'gotcha', 'decision'))}\n"
        f"- Patterns found: {matched.get('pattern', 0)}\n"
        f"- Gotchas found: {matched.get('gotcha', 0)}\n"
        f"- Decisions found: {matched.get('decision', 0)}\n"
        f"- Related tasks found: {matched.get('task', 0)}\n\n"
        "### Dependencies Processed\n"
        f"- Task IDs: {_list(s.dependencies_processed)}\n"
        f"- Patterns inherited: {s.patterns_inherited}\n"
        f"- Warnings inherited: {s.warnings_inherited}\n"
        f"- Blocking questions inherited: {s.questions_inherited}"
        f"{skipped}\n\n"
        "### Context Map Filtering\n"
        f"- Total entries: {s.map_total}\n"
        f"- Entries after filter: {s.map_matched}\n"
        f"- Entries after limits: {s.map_kept}\n"
        f"- Top relevance score: {s.top_score:g}\n\n"
        "### Limits Applied\n"
        f"- Complexity: {c.complexity} "
        + ", ".join(f"{k}={v}" for k, v in c.limits.to_dict().items())
        + "\n"
    )
