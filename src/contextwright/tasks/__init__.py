"""Tasks and computed context (spec 3): task signals, the knowledge graph in the record store,
dependency handoffs, the context map, complexity limits, the injection template and debug output.

`engine.tasks` is a `TaskBoard`; `engine.complete_task(task_id, handoff)` delegates to it, and
`engine.assemble(..., task_id=...)` adds the `computed` source.
"""

from .board import Completion, TaskBoard
from .computed import ComputedContext, apply_context_limits, compute_context
from .debug import debug_enabled, render_debug
from .handoff import Handoff, parse_handoff
from .limits import COMPLEXITIES, DEFAULT_LIMITS, ContextLimits
from .signals import DEFAULT_DOMAINS, TaskSignals, extract_task_signals
from .template import DEFAULT_TEMPLATE, render_computed, render_template

__all__ = [
    "COMPLEXITIES",
    "DEFAULT_DOMAINS",
    "DEFAULT_LIMITS",
    "DEFAULT_TEMPLATE",
    "Completion",
    "ComputedContext",
    "ContextLimits",
    "Handoff",
    "TaskBoard",
    "TaskSignals",
    "apply_context_limits",
    "compute_context",
    "debug_enabled",
    "extract_task_signals",
    "parse_handoff",
    "render_computed",
    "render_debug",
    "render_template",
]
