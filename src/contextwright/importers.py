"""Importers: turn files people already have into record fields, for `engine.add_many`.

Three formats, each a generator of plain dicts (validated later by `build_record`, in batches):

- JSONL: one record object per line (the fields of `engine.add`).
- OpenAI chat exports: ChatGPT's `conversations.json` (a `mapping` tree per conversation), or
  chat-completions style `{"messages": [{"role", "content"}]}` objects, one per conversation.
- LoCoMo: the long-conversation benchmark's JSON (samples with `session_N` lists of turns).

`import_file` stores them in batches of `batch` records, each batch all-or-nothing, and reports
progress through a callback so the CLI can draw a bar without this module knowing about it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ValidationError
from .records import build_record

if TYPE_CHECKING:
    from .engine import Engine

FORMATS = ("jsonl", "openai", "locomo")
_SAFE = re.compile(r"[^A-Za-z0-9_.:/\-]+")


def _slug(text: str, fallback: str) -> str:
    slug = _SAFE.sub("-", text.strip()).strip("-")[:120]
    return slug if slug and slug[0].isalnum() else fallback


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValidationError(
            "path", str(path), f"the file is not JSON (line {exc.lineno}: {exc.msg})"
        ) from None
    except (ValueError, RecursionError) as exc:  # a number of 4,300+ digits, nesting too deep
        raise ValidationError("path", str(path), f"the file is not usable JSON ({exc})") from None


def read_jsonl(path: Path, project: str) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValidationError(f"line {n}", line[:60], f"fix the JSON: {exc.msg}") from None
            except (ValueError, RecursionError) as exc:
                raise ValidationError(f"line {n}", line[:60], f"fix the JSON: {exc}") from None
            if not isinstance(item, dict):
                raise ValidationError(f"line {n}", item, "each line must be a record object")
            item.setdefault("project", project)
            yield item


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        parts = content.get("parts")
        if isinstance(parts, list):
            return "\n".join(p for p in parts if isinstance(p, str))
        return str(content.get("text", ""))
    if isinstance(content, list):  # content blocks: [{"type": "text", "text": ...}]
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, Mapping))
    return ""


def _chatgpt_messages(conv: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Walk a ChatGPT export's `mapping` from `current_node` back to the root (the shown branch)."""
    mapping = conv.get("mapping") or {}
    node_id = conv.get("current_node")
    chain: list[Mapping[str, Any]] = []
    seen: set[str] = set()
    while node_id and node_id in mapping and node_id not in seen:
        seen.add(node_id)
        node = mapping[node_id]
        if node.get("message"):
            chain.append(node["message"])
        node_id = node.get("parent")
    if not chain:  # no current_node: fall back to insertion order
        chain = [n["message"] for n in reversed(list(mapping.values())) if n.get("message")]
    return list(reversed(chain))


def read_openai(path: Path, project: str) -> Iterator[dict[str, Any]]:
    data = _load_json(path)
    convs = data if isinstance(data, list) else [data]
    for ci, conv in enumerate(convs):
        if not isinstance(conv, Mapping):
            raise ValidationError(f"conversations[{ci}]", conv, "each conversation is an object")
        session = _slug(str(conv.get("id") or conv.get("title") or ""), f"conversation-{ci}")
        base = float(conv.get("create_time") or 0) or None
        if "mapping" in conv:
            messages: list[Mapping[str, Any]] = [
                {
                    "role": (m.get("author") or {}).get("role", "user"),
                    "content": _text_of(m.get("content")),
                    "create_time": m.get("create_time"),
                }
                for m in _chatgpt_messages(conv)
            ]
        elif isinstance(conv.get("messages"), list):
            messages = conv["messages"]
        else:
            raise ValidationError(
                f"conversations[{ci}]", list(conv)[:5], "give a 'mapping' or a 'messages' list"
            )
        for mi, msg in enumerate(messages):
            if not isinstance(msg, Mapping):
                raise ValidationError(f"conversations[{ci}].messages[{mi}]", msg, "give an object")
            text = _text_of(msg.get("content"))
            role = str(msg.get("role") or "user")
            if not text.strip() or (role == "system" and not text.strip()):
                continue
            item: dict[str, Any] = {
                "project": project,
                "session": session,
                "author": _slug(str(msg.get("name") or role), role),
                "kind": "tool_result" if role == "tool" else "message",
                "content": text,
                "meta": {"role": role},
            }
            at = msg.get("create_time") or (base + mi if base else None)
            if isinstance(at, int | float):
                item["created_at"] = float(at)
            yield item


def _locomo_time(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        dt = datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")
    except ValueError:
        return None
    return dt.replace(tzinfo=UTC).timestamp()


def read_locomo(path: Path, project: str) -> Iterator[dict[str, Any]]:
    data = _load_json(path)
    samples = data if isinstance(data, list) else [data]
    for si, sample in enumerate(samples):
        conv = sample.get("conversation") if isinstance(sample, Mapping) else None
        if not isinstance(conv, Mapping):
            raise ValidationError(f"samples[{si}].conversation", None, "give a LoCoMo sample")
        sample_id = _slug(str(sample.get("sample_id") or ""), f"sample-{si}")
        n = 1
        while f"session_{n}" in conv:
            start = _locomo_time(conv.get(f"session_{n}_date_time")) or float(n * 86400)
            for ti, turn in enumerate(conv[f"session_{n}"]):
                text = str(turn.get("text") or "")
                if turn.get("blip_caption"):
                    text += f" [shares an image: {turn['blip_caption']}]"
                if not text.strip():
                    continue
                dia = str(turn.get("dia_id") or f"D{n}:{ti + 1}")
                yield {
                    "project": project,
                    "id": _slug(f"{sample_id}:{dia}", f"{sample_id}-{n}-{ti}"),
                    "session": f"{sample_id}:session_{n}",
                    "author": _slug(str(turn.get("speaker") or "speaker"), "speaker"),
                    "kind": "message",
                    "content": text,
                    "created_at": start + ti * 30.0,
                    "meta": {"dia_id": dia, "sample_id": sample_id},
                }
            n += 1


READERS: dict[str, Callable[[Path, str], Iterator[dict[str, Any]]]] = {
    "jsonl": read_jsonl,
    "openai": read_openai,
    "locomo": read_locomo,
}


def read_file(path: str | Path, fmt: str, project: str) -> list[dict[str, Any]]:
    if fmt not in READERS:
        raise ValidationError("format", fmt, f"use one of {', '.join(FORMATS)}")
    p = Path(path)
    if not p.is_file():
        raise ValidationError("path", str(path), "give an existing file")
    return list(READERS[fmt](p, project))


def validate_rows(rows: list[dict[str, Any]]) -> None:
    """Raise the first row's problem as `item N: field`, before anything is stored."""
    for i, row in enumerate(rows):
        try:
            build_record(row, len, now=0.0)
        except ValidationError as exc:
            raise ValidationError(f"item {i + 1}: {exc.field}", exc.value, exc.fix) from None


def store_rows(
    engine: Engine,
    rows: list[dict[str, Any]],
    *,
    batch: int = 500,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Validate every row first (a malformed file stores nothing), then store them in batches."""
    validate_rows(rows)
    stored = 0
    for i in range(0, len(rows), batch):
        chunk = rows[i : i + batch]
        engine.add_many(chunk)
        stored += len(chunk)
        if progress is not None:
            progress(len(chunk))
    return stored


def import_file(
    engine: Engine,
    path: str | Path,
    fmt: str,
    project: str,
    *,
    batch: int = 500,
    progress: Callable[[int], None] | None = None,
) -> int:
    return store_rows(engine, read_file(path, fmt, project), batch=batch, progress=progress)
