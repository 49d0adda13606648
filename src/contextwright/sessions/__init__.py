"""Sessions: contextwright owns each agent's running session (spec 2, "context management").

Layers and budget breakdown, diagnostics, compaction, tool-result pruning, memory flushes, session
reset and overflow recovery, all on top of the one assemble pipeline. Use it as `engine.sessions`.
"""

from .accounting import Calibration
from .compaction import Compaction
from .config import SessionConfig
from .diagnostics import Breakdown, FileReport, Gauge
from .flush import MemoryFlush, Note
from .manager import SessionManager
from .overflow import LADDER, ProviderOverflow, parse_provider_error
from .pruning import is_evidence, one_line
from .reset import Reset
from .turns import Turn, build_turns, is_correction, is_instruction
from .undo import CompactionReport, Undo
from .window import SessionWindow

__all__ = [
    "LADDER",
    "Breakdown",
    "Calibration",
    "Compaction",
    "CompactionReport",
    "FileReport",
    "Gauge",
    "MemoryFlush",
    "Note",
    "ProviderOverflow",
    "Reset",
    "SessionConfig",
    "SessionManager",
    "SessionWindow",
    "Turn",
    "Undo",
    "build_turns",
    "is_correction",
    "is_evidence",
    "is_instruction",
    "one_line",
    "parse_provider_error",
]
