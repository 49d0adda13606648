"""Tool-result hygiene: tool outputs are the largest thing in a long session, so they are cut first.

Three rules, all pure (no I/O) and applied to the window only (the stored record stays whole):
- a result over the cap keeps its head and its tail, with `[truncated, N tokens omitted]` between
  (a run's verdict, "1200 passed" or the final error, is at its end);
- a result older than the keep window becomes one line derived from the call and the result,
  e.g. `[tool: read_file("src/app.ts") → 247 lines, TypeScript]`;
- verification evidence (test output, build logs, screenshots) is never turned into a line.
A call and its result are always one unit, so nothing here can split a pair.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from ..assembly.packing import marker
from ..assembly.render import tool_call_parts
from ..ports import Tokenizer
from ..records import Record

EVIDENCE_TAGS = frozenset(
    {"evidence", "verification", "test", "tests", "test-output", "build", "build-log", "screenshot"}
)
_EVIDENCE_TOOLS = re.compile(
    r"(pytest|jest|vitest|mocha|test|build|compile|lint|screenshot|ci)", re.I
)
_EVIDENCE_TEXT = re.compile(
    r"(\b\d+ (passed|failed)\b|\bran \d+ tests?\b|\btests? (passed|failed)\b|\bFAILED\b|"
    r"\bBUILD (SUCCESS|SUCCESSFUL|FAILED)\b|\bbuild succeeded\b|\bcompiled successfully\b|"
    r"^ok\s+\S+\s+\d|\berror TS\d+\b|\bnpm ERR!|data:image/|\bscreenshot saved\b)",
    re.IGNORECASE | re.MULTILINE,
)
_EVIDENCE_WORDS = (
    "pass",
    "fail",
    "ran ",
    "build",
    "compiled",
    "error ts",
    "npm err",
    "data:image",
    "screenshot",
    "ok ",
)

LANGUAGES = {
    ".py": "Python",
    ".ts": "TypeScript",
    ".tsx": "React component",
    ".js": "JavaScript",
    ".jsx": "React component",
    ".svelte": "Svelte component",
    ".vue": "Vue component",
    ".go": "Go",
    ".rs": "Rust",
    ".java": "Java",
    ".rb": "Ruby",
    ".c": "C",
    ".h": "C header",
    ".cpp": "C++",
    ".cs": "C#",
    ".md": "Markdown",
    ".json": "JSON",
    ".yaml": "YAML",
    ".yml": "YAML",
    ".toml": "TOML",
    ".html": "HTML",
    ".css": "CSS",
    ".sql": "SQL",
    ".sh": "shell script",
}
_PATH = re.compile(r"[\w.\-]+(/[\w.\-]+)*\.[A-Za-z0-9]{1,8}")


def is_evidence(call: Record | None, result: Record | None) -> bool:
    """Verification evidence: marked by tag or meta, or a test/build/screenshot tool, or output
    that reads like a test run or a build log."""
    for r in (call, result):
        if r is None:
            continue
        if EVIDENCE_TAGS.intersection(r.tags) or r.meta.get("evidence") is True:
            return True
    if call is not None:
        name, _ = tool_call_parts(call)
        if _EVIDENCE_TOOLS.search(name):
            return True
    if result is None:
        return False
    text = result.content
    # A run's verdict is at its end, a build's banner at its start: look at both ends only.
    sample = text if len(text) <= 6_000 else text[:2_000] + "\n" + text[-4_000:]
    lowered = sample.lower()
    if not any(word in lowered for word in _EVIDENCE_WORDS):
        return False  # the regex is slow on long text; most results have none of these words
    return bool(_EVIDENCE_TEXT.search(sample))


def _first_arg(call: Record) -> str:
    args = call.meta.get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return args[:60]
    if isinstance(args, dict):
        for value in args.values():
            if isinstance(value, str | int | float) and not isinstance(value, bool):
                text = str(value)
                return text if len(text) <= 60 else text[:57] + "..."
        return ""
    text = call.content.strip().splitlines()[0] if call.content.strip() else ""
    return text if len(text) <= 60 else text[:57] + "..."


def describe_result(arg: str, result: Record | None) -> str:
    """A few words about a result: lines and language for a file, a count for a list, the line
    itself when it is short, the first error line for a failure."""
    if result is None:
        return "no result yet"
    text = result.content.strip()
    lines = text.count("\n") + 1 if text else 0
    first = text.splitlines()[0].strip() if text else ""
    if re.match(r"^(error|exception|traceback|fatal)\b", first, re.IGNORECASE):
        return f"error: {first[:80]}"
    if text.startswith("["):
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, list):
            return f"{len(parsed)} results"
    if lines == 1 and len(first) <= 80:
        return first
    suffix = PurePosixPath(arg).suffix.lower() if _PATH.fullmatch(arg or "") else ""
    if suffix in LANGUAGES:
        return f"{lines} lines, {LANGUAGES[suffix]}"
    return f"{lines} lines: {first[:60]}"


def one_line(call: Record, result: Record | None) -> str:
    """`[tool: name("first argument") → what came back]`, derived from the call and the result."""
    name, _ = tool_call_parts(call)
    arg = _first_arg(call)
    shown = json.dumps(arg, ensure_ascii=False) if arg else ""
    return f"[tool: {name}({shown}) → {describe_result(arg, result)}]"


def truncate_middle(text: str, max_tokens: int, counter: Tokenizer) -> tuple[str, int, int]:
    """Cut `text` to at most `max_tokens` tokens (marker included) by leaving out its middle:
    the head says what ran, the tail how it ended. Cuts fall on line breaks when one lies near
    the cut (else on a space). Returns (text, its tokens, tokens omitted)."""
    ids = counter.encode(text)
    total = len(ids)
    if total <= max_tokens:
        return text, total, 0
    room = max(max_tokens - counter.count(_middle_marker(total)), 2)
    head = _cut_head(text, counter.decode(ids[: room // 2]))
    tail = _cut_tail(text, counter.decode(ids[total - (room - room // 2) :]))
    while True:
        omitted = counter.count(text[len(head) : len(text) - len(tail)])
        out = head + _middle_marker(omitted) + tail
        tokens = counter.count(out)
        if tokens <= max_tokens or not (head or tail):
            return out, tokens, omitted
        # A cut mid-token can re-tokenize longer: shave a word off the longer end until it fits.
        if len(head) >= len(tail):
            space = head.rfind(" ")
            head = head[:space].rstrip() if space > 0 else ""
        else:
            space = tail.find(" ")
            tail = tail[space + 1 :].lstrip() if space >= 0 else ""


def _middle_marker(omitted: int) -> str:
    return "\n" + marker(omitted).strip() + "\n"


def _cut_head(text: str, head: str) -> str:
    """The longest prefix of `text` within `head` that ends at a line break in its last half (else a
    space), never half a character."""
    head = head.rstrip("\ufffd")
    if not text.startswith(head):  # a decode that is not a prefix: keep what matches
        n = 0
        while n < len(head) and head[n] == text[n]:
            n += 1
        head = head[:n]
    cut = head.rfind("\n")
    if cut < len(head) // 2:
        cut = head.rfind(" ")
    return head[: cut if cut >= len(head) // 2 else len(head)].rstrip()


def _cut_tail(text: str, tail: str) -> str:
    """The longest suffix of `text` within `tail` that starts after a line break in its first half
    (else a space), never half a character."""
    tail = tail.lstrip("\ufffd")
    if not text.endswith(tail):
        n = 0
        while n < len(tail) and tail[-1 - n] == text[-1 - n]:
            n += 1
        tail = tail[len(tail) - n :]
    cut = tail.find("\n")
    if cut < 0 or cut > len(tail) // 2:
        cut = tail.find(" ")
    return tail[cut + 1 if 0 <= cut <= len(tail) // 2 else 0 :].lstrip()


@dataclass(frozen=True)
class Pruned:
    """What the window shows for one tool result, and why."""

    text: str
    tokens: int
    how: str  # "verbatim", "truncated", "one_line"
    omitted: int = 0


def prune_result(
    call: Record,
    result: Record,
    *,
    stale: bool,
    purge: bool,
    cap: int,
    counter: Tokenizer,
) -> Pruned:
    """The window's text for a tool result. `stale`: older than the keep window. `purge`: the
    overflow ladder's tool-result purge (every result a line, evidence in the keep window aside)."""
    evidence = is_evidence(call, result)
    if (purge and not (evidence and not stale)) or (stale and not evidence):
        line = one_line(call, result)
        return Pruned(line, counter.count(line), "one_line")
    if result.tokens > cap:
        text, tokens, omitted = truncate_middle(result.content, cap, counter)
        return Pruned(text, tokens, "truncated", omitted)
    return Pruned(result.content, result.tokens, "verbatim")
