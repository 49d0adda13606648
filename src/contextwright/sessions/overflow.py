"""Overflow recovery: the spec's ladder, and reading a provider's "context too long" error.

When the window would still overflow, the manager climbs the ladder one rung at a time and records
each rung in the trace:
1. emergency compaction of all but the last 2 turns;
2. purge of tool results (every result a one-line summary);
3. drop of workspace file contents (a tool can read them again);
4. session reset, with a transfer summary.
If the top rung does not help, `ContextOverflow` (error type `context_overflow`) carries the
breakdown. A provider may also reject a window it counts differently; `parse_provider_error`
reads OpenAI's and Anthropic's error shapes and returns the limit the provider reported.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..budget import Budget

LADDER = ("emergency_compaction", "purge_tool_results", "drop_files", "session_reset")
EMERGENCY_KEEP = 2

_OPENAI = re.compile(
    r"maximum context length is (?P<limit>\d[\d,]*) tokens"
    r"(?:.*?(?:resulted in|requested) (?P<used>\d[\d,]*) tokens)?",
    re.IGNORECASE | re.DOTALL,
)
_ANTHROPIC = re.compile(
    r"prompt is too long:\s*(?P<used>\d[\d,]*) tokens\s*>\s*(?P<limit>\d[\d,]*)", re.IGNORECASE
)
_GENERIC = re.compile(
    r"(context(_length_exceeded| length| window)|too many tokens|prompt is too long)", re.I
)


@dataclass(frozen=True)
class ProviderOverflow:
    """What a provider said: its limit, and its count of the rejected prompt when it gave one."""

    provider: str
    limit: int | None
    used: int | None
    message: str


def _int(text: str | None) -> int | None:
    return int(text.replace(",", "")) if text else None


def _message_and_code(error: object) -> tuple[str, str, int | None]:
    """Pull (message, code or type, HTTP status) out of a dict body, a JSON string, an SDK
    exception (`.status_code`, `.body`, `.response`) or plain text."""
    status = getattr(error, "status_code", None)
    body: Any = getattr(error, "body", None)
    if body is None and isinstance(error, Mapping):
        body = error
    if body is None and isinstance(error, str | bytes):
        try:
            body = json.loads(error)
        except ValueError:
            body = None
    if body is None:
        response = getattr(error, "response", None)
        if response is not None:
            try:
                body = response.json()
            except Exception:
                body = None
            status = status or getattr(response, "status_code", None)
    if isinstance(body, Mapping):
        status = body.get("status", status)
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            code = str(inner.get("code") or inner.get("type") or "")
            return str(inner.get("message", "")), code, status
        return str(inner), "", status
    text = error.decode() if isinstance(error, bytes) else str(error)
    return text, "", status if isinstance(status, int) else None


def parse_provider_error(error: object) -> ProviderOverflow | None:
    """A ProviderOverflow when `error` is a context-length error, else None."""
    message, code, _ = _message_and_code(error)
    m = _ANTHROPIC.search(message)
    if m:
        return ProviderOverflow("anthropic", _int(m["limit"]), _int(m["used"]), message)
    m = _OPENAI.search(message)
    if m:
        return ProviderOverflow("openai", _int(m["limit"]), _int(m["used"]), message)
    if code == "context_length_exceeded" or _GENERIC.search(message):
        return ProviderOverflow("unknown", None, None, message)
    return None


def retarget(
    bud: Budget, parsed: ProviderOverflow, sent_tokens: int | None
) -> tuple[Budget, dict[str, Any]]:
    """The budget to rebuild with after a provider rejected a window: its reported limit, shrunk
    by how much more it counted than we did (when both counts are known), and the trace step."""
    assert bud.window is not None and bud.reserve is not None
    limit = min(parsed.limit or int(bud.window * 0.9), bud.window)
    ratio = max(parsed.used / sent_tokens, 1.0) if parsed.used and sent_tokens else 1.0
    reserve = min(bud.reserve, limit // 4)
    window = reserve + int((limit - reserve) / ratio)
    if window >= bud.window and ratio <= 1.0:
        window = reserve + int((bud.window - reserve) * 0.9)  # it said too long: believe it
    step = {
        "step": "provider_overflow",
        "provider": parsed.provider,
        "limit": parsed.limit,
        "provider_count": parsed.used,
        "our_count": sent_tokens,
        "retargeted_window": window,
    }
    budget = Budget(
        model=bud.model, window=window, reserve=reserve, section_caps=dict(bud.section_caps)
    )
    return budget, step


def receipts(steps: Sequence[Mapping[str, Any]], session: str) -> list[str]:
    """What the recovery steps that changed a window of `session` say in its warnings: what did
    not fit and what ran instead. Nothing for a step that changed nothing (skipped) or that is
    the configured behaviour (the auto compaction at the threshold)."""
    out = []
    for step in steps:
        name = step.get("step")
        if name == "provider_overflow":  # smaller, whether its compaction was skipped or not
            told = (("its limit", "limit"), ("its count", "provider_count"), ("ours", "our_count"))
            counts = ", ".join(f"{say} {step[k]}" for say, k in told if step.get(k) is not None)
            out.append(
                f"the {step.get('provider')} provider rejected the window as too long"
                f"{f' ({counts})' if counts else ''}: rebuilt for a "
                f"{step.get('retargeted_window')}-token window"
            )
            continue
        if step.get("skipped") or name not in LADDER:
            continue
        if name == "session_reset":
            new = step.get("new_session")
            out.append(
                f"session {session} was reset to {new}: the window overflowed after compaction, "
                f"the tool-result purge and dropping files; a transfer summary carries it over; "
                f"post the next turns to {new}"
            )
            continue
        left = ", ".join(str(k) for k in step.get("missing_before", [])[:3])
        why = f"the window did not fit (left out: {left}): "
        if name == "emergency_compaction":
            what = f"an emergency compaction summarized all but the last {EMERGENCY_KEEP} turns"
        elif name == "purge_tool_results":
            what = "every tool result was cut to a one-line summary (call the tool again)"
        else:
            what = "the workspace files' contents were dropped (read them again with a tool)"
        out.append(why + what)
    return out
