"""contextwright: a context engine for LLM agents.

Every model call gets a context window computed from scratch out of independent records, packed into
a token budget by section priority, with a trace of what went in and why.

The public API is what `__all__` lists, imported from here: the engine and its results, records,
budgets, the errors, the configuration objects, and the ports a custom store, source, summarizer
or embedder implements. Every other name, and every module path below this package, is internal
and may change without notice.
"""

from .assembly.candidates import SECTIONS, Candidate
from .assembly.definitions import Pipelines, check_pipelines, load_pipelines
from .assembly.result import Assembly
from .assembly.scoring import ScoringConfig
from .assembly.sources import Source, SourceContext
from .budget import Budget
from .engine import Engine
from .errors import (
    BudgetError,
    ContextOverflow,
    ContextwrightError,
    MissingExtra,
    NotFound,
    RuleError,
    StoreError,
    ValidationError,
)
from .ports import Embedder, Hit, Query, Store, Summarizer
from .records import KINDS, Record
from .roles import Agent, RoleProfile
from .rules.loading import check_rules, load_rules
from .rules.ruleset import RuleSet
from .sessions import SessionConfig
from .settings import Settings
from .stores import open_store
from .tasks import Handoff
from .tokens.counter import MODELS, TokenCounter, register_model
from .traces.trace import Trace

__all__ = [
    "KINDS",
    "MODELS",
    "SECTIONS",
    "Agent",
    "Assembly",
    "Budget",
    "BudgetError",
    "Candidate",
    "ContextOverflow",
    "ContextwrightError",
    "Embedder",
    "Engine",
    "Handoff",
    "Hit",
    "MissingExtra",
    "NotFound",
    "Pipelines",
    "Query",
    "Record",
    "RoleProfile",
    "RuleError",
    "RuleSet",
    "ScoringConfig",
    "SessionConfig",
    "Settings",
    "Source",
    "SourceContext",
    "Store",
    "StoreError",
    "Summarizer",
    "TokenCounter",
    "Trace",
    "ValidationError",
    "check_pipelines",
    "check_rules",
    "load_pipelines",
    "load_rules",
    "open_store",
    "register_model",
]
__version__ = "0.1.0"
