"""contextwright: a context engine for LLM agents.

Every model call gets a context window computed from scratch out of independent records, packed into
a token budget by section priority, with a trace of what went in and why.
"""

from .assembly import Assembly
from .budget import Budget
from .candidates import SECTIONS, Candidate, Item
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
from .ports import Query
from .records import KINDS, Record
from .replay import diff_traces
from .roles import Agent, RoleProfile
from .rules import RuleSet, check_rules, load_rules
from .scoring import ScoringConfig
from .sessions import SessionConfig, SessionManager
from .tasks import Handoff, TaskBoard
from .tokens import MODELS, ModelSpec, TokenCounter, register_model
from .trace import Trace

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
    "Engine",
    "Handoff",
    "Item",
    "MissingExtra",
    "ModelSpec",
    "NotFound",
    "Query",
    "Record",
    "RoleProfile",
    "RuleError",
    "RuleSet",
    "ScoringConfig",
    "SessionConfig",
    "SessionManager",
    "StoreError",
    "TaskBoard",
    "TokenCounter",
    "Trace",
    "ValidationError",
    "check_rules",
    "diff_traces",
    "load_rules",
    "register_model",
]
__version__ = "0.1.0"
