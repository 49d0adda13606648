"""Importers: turn files people already have into record fields, for `engine.add_many`.

Three formats, each a generator of plain dicts (validated later by `build_record`, in batches):

- JSONL: one record object per line (the fields of `engine.add`).
- OpenAI chat exports: ChatGPT's `conversations.json` (a `mapping` tree per conversation), or
  chat-completions style `{"messages": [{"role", "content"}]}` objects, one per conversation.
- LoCoMo: the long-conversation benchmark's JSON (samples with `session_N` lists of turns).

`import_file` checks every row, then stores them in batches of `batch` records, each batch
all-or-nothing, and reports progress through a callback so the CLI can draw a bar without this
module knowing about it. Its `ImportReport` counts what the store returned as new, lists every row
it skipped (the id was already stored) and every row it refused, each with its place in the file
and the reason: a count is never printed for records that were not stored.

Authors come from the file as they are written ("Ada Lovelace", "أحمد", "🦊 fox"): display names
(docs/records.md); only whitespace at their ends is trimmed. Projects and sessions are identifiers
and are made safe for URLs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ValidationError
from .records import Record, build_record, check_time, content_hash

if TYPE_CHECKING:
    from .engine import Engine

FORMATS = ("jsonl", "openai", "locomo")
_SAFE = re.compile(r"[^A-Za-z0-9_.:/\-]+")
# In a LoCoMo import's project name, the sample's id: one project per conversation.
SAMPLE = "{sample}"
Row = tuple[str, dict[str, Any]]  # (where in the file, the record's fields)


def _slug(text: str, fallback: str) -> str:
    slug = _SAFE.sub("-", text.strip()).strip("-")[:120]
    return slug if slug and slug[0].isalnum() else fallback


def _person(name: Any, fallback: str) -> str:
    """A speaker's display name as the file writes it, without the whitespace at its ends."""
    text = " ".join(str(name).split()) if name is not None else ""
    return text or fallback


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValidationError(
            "path", str(path), f"the file is not JSON (line {exc.lineno}: {exc.msg})"
        ) from None
    except (ValueError, RecursionError) as exc:  # a number of 4,300+ digits, nesting too deep
        raise ValidationError("path", str(path), f"the file is not usable JSON ({exc})") from None


def read_jsonl(path: Path, project: str) -> Iterator[Row]:
    # Read as bytes: a line that is not UTF-8 is then named by its number, like a JSON error.
    with path.open("rb") as fh:
        for n, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ValidationError(
                    f"line {n}",
                    raw[:60],
                    f"save the file as UTF-8 ({exc.reason} at byte {exc.start})",
                ) from None
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
            yield f"line {n}", item


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


def _object(where: str, value: Any, fix: str) -> Mapping[str, Any]:
    """`value` as an object, or the error that names its place in the file."""
    if not isinstance(value, Mapping):
        raise ValidationError(where, value, fix)
    return value


def _seconds(where: str, value: Any) -> float | None:
    """A time in the file: seconds since the epoch (as a record's `created_at` takes them; a
    comparison, so an integer of hundreds of digits or NaN is refused, not overflowed), or absent."""
    return None if value is None else check_time(where, value)


def _chatgpt_messages(conv: Mapping[str, Any], where: str) -> list[tuple[str, Mapping[str, Any]]]:
    """Walk a ChatGPT export's `mapping` from `current_node` back to the root (the shown branch):
    each message with its place in the file."""
    mapping = _object(f"{where}.mapping", conv.get("mapping") or {}, "give {node id: node}")
    nodes = {
        k: _object(f"{where}.mapping.{k}", n, "give a node object (message, parent)")
        for k, n in mapping.items()
    }
    node_id = conv.get("current_node")
    chain: list[Mapping[str, Any]] = []
    seen: set[str] = set()
    while isinstance(node_id, str) and node_id in nodes and node_id not in seen:
        seen.add(node_id)
        node = nodes[node_id]
        if node.get("message"):
            chain.append(node["message"])
        node_id = node.get("parent")
    if not chain:  # no current_node: fall back to insertion order
        chain = [n["message"] for n in reversed(list(nodes.values())) if n.get("message")]
    places = [(f"{where}.mapping: message {i}", m) for i, m in enumerate(reversed(chain))]
    return [(at, _object(at, m, "give a message object (author, content)")) for at, m in places]


def read_openai(path: Path, project: str) -> Iterator[Row]:
    data = _load_json(path)
    convs = data if isinstance(data, list) else [data]
    for ci, conv in enumerate(convs):
        if not isinstance(conv, Mapping):
            raise ValidationError(f"conversations[{ci}]", conv, "each conversation is an object")
        session = _slug(str(conv.get("id") or conv.get("title") or ""), f"conversation-{ci}")
        base = _seconds(f"conversations[{ci}].create_time", conv.get("create_time")) or None
        # Each message with its place in the file: errors and rows name where it is.
        if "mapping" in conv:
            messages: list[tuple[str, Any]] = [
                (
                    at,
                    {
                        "role": _object(
                            f"{at}.author",
                            m.get("author") or {},
                            "give the author as an object with its role",
                        ).get("role", "user"),
                        "content": _text_of(m.get("content")),
                        "create_time": m.get("create_time"),
                    },
                )
                for at, m in _chatgpt_messages(conv, f"conversations[{ci}]")
            ]
        elif isinstance(conv.get("messages"), list):
            messages = [
                (f"conversations[{ci}].messages[{mi}]", m) for mi, m in enumerate(conv["messages"])
            ]
        else:
            raise ValidationError(
                f"conversations[{ci}]", list(conv)[:5], "give a 'mapping' or a 'messages' list"
            )
        for mi, (place, msg) in enumerate(messages):
            if not isinstance(msg, Mapping):
                raise ValidationError(place, msg, "give an object")
            text = _text_of(msg.get("content"))
            role = str(msg.get("role") or "user")
            if not text.strip() or (role == "system" and not text.strip()):
                continue
            item: dict[str, Any] = {
                "project": project,
                "session": session,
                "author": _person(msg.get("name") or role, role),
                "kind": "tool_result" if role == "tool" else "message",
                "content": text,
                "meta": {"role": role},
            }
            at = _seconds(f"{place}.create_time", msg.get("create_time"))
            at = at or (base + mi if base else None)
            if at is not None:
                item["created_at"] = at
            yield place, item


def _locomo_time(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        dt = datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")
    except ValueError:
        return None
    return dt.replace(tzinfo=UTC).timestamp()


def read_locomo(path: Path, project: str) -> Iterator[Row]:
    """`project` may hold `{sample}`: each sample then goes to a project of its own, so one
    conversation's window never holds another conversation's people."""
    data = _load_json(path)
    samples = data if isinstance(data, list) else [data]
    for si, sample in enumerate(samples):
        conv = sample.get("conversation") if isinstance(sample, Mapping) else None
        if not isinstance(conv, Mapping):
            raise ValidationError(f"samples[{si}].conversation", None, "give a LoCoMo sample")
        sample_id = _slug(str(sample.get("sample_id") or ""), f"sample-{si}")
        target = project.replace(SAMPLE, sample_id)
        n = 1
        while f"session_{n}" in conv:
            start = _locomo_time(conv.get(f"session_{n}_date_time")) or float(n * 86400)
            turns = conv[f"session_{n}"]
            if not isinstance(turns, list):
                raise ValidationError(
                    f"samples[{si}].conversation.session_{n}", turns, "give the turns as a list"
                )
            for ti, turn in enumerate(turns):
                place = f"samples[{si}].conversation.session_{n}[{ti}]"
                _object(place, turn, "give a turn object (speaker, text)")
                text = str(turn.get("text") or "")
                if turn.get("blip_caption"):
                    text += f" [shares an image: {turn['blip_caption']}]"
                if not text.strip():
                    continue
                dia = str(turn.get("dia_id") or f"D{n}:{ti + 1}")
                yield (
                    place,
                    {
                        "project": target,
                        "id": _slug(f"{sample_id}:{dia}", f"{sample_id}-{n}-{ti}"),
                        "session": f"{sample_id}:session_{n}",
                        "author": _person(turn.get("speaker"), "speaker"),
                        "kind": "message",
                        "content": text,
                        "created_at": start + ti * 30.0,
                        "meta": {"dia_id": dia, "sample_id": sample_id},
                    },
                )
            n += 1


READERS: dict[str, Callable[[Path, str], Iterator[Row]]] = {
    "jsonl": read_jsonl,
    "openai": read_openai,
    "locomo": read_locomo,
}


def read_rows(path: str | Path, fmt: str, project: str) -> list[Row]:
    """The file's records as (where in the file, fields); a file that cannot be read at all
    (not JSON, not the format) raises before anything is stored."""
    if fmt not in READERS:
        raise ValidationError("format", fmt, f"use one of {', '.join(FORMATS)}")
    if SAMPLE in project and fmt != "locomo":
        raise ValidationError(
            "project", project, f"{SAMPLE} is for --format locomo; name one project"
        )
    p = Path(path)
    if not p.is_file():
        raise ValidationError("path", str(path), "give an existing file")
    return list(READERS[fmt](p, project))


def read_file(path: str | Path, fmt: str, project: str) -> list[dict[str, Any]]:
    return [fields for _, fields in read_rows(path, fmt, project)]


@dataclass(frozen=True)
class RowNote:
    """One row of the file that was not stored: where it is, its id if any, and why."""

    row: str
    reason: str
    id: str | None = None
    field: str | None = None
    value: Any = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"row": self.row, "reason": self.reason}
        if self.id is not None:
            out["id"] = self.id
        if self.field is not None:
            out["field"] = self.field
        return out


@dataclass
class ImportReport:
    """What an import did: `stored` counts only the records the store took as new."""

    rows: int = 0
    stored: int = 0
    projects: dict[str, int] = field(default_factory=dict)  # project -> records stored there
    skipped: list[RowNote] = field(default_factory=list)
    refused: list[RowNote] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "stored": self.stored,
            "skipped": len(self.skipped),
            "refused": len(self.refused),
            "projects": dict(self.projects),
            "skipped_rows": [n.to_dict() for n in self.skipped],
            "refused_rows": [n.to_dict() for n in self.refused],
        }

    def summary(self, shown: int = 5) -> str:
        """Lines for a person: the counts, then each reason with its first rows."""
        where = ", ".join(f"{p} ({n})" for p, n in sorted(self.projects.items()))
        lines = [
            f"stored {self.stored} new records of {self.rows} rows"
            + (f" in {where}" if where else "")
            + f"; skipped {len(self.skipped)}; refused {len(self.refused)}"
        ]
        for label, notes in (("skipped", self.skipped), ("refused", self.refused)):
            by_reason: dict[str, list[str]] = {}
            for n in notes:
                by_reason.setdefault(n.reason, []).append(n.row)
            for reason, rows in by_reason.items():
                more = f" and {len(rows) - shown} more" if len(rows) > shown else ""
                lines.append(f"  {label} {len(rows)}: {reason} ({', '.join(rows[:shown])}{more})")
        return "\n".join(lines)


def check_rows(rows: Sequence[Row]) -> list[RowNote]:
    """Every row that cannot be stored, with its place in the file and the reason."""
    refused = []
    for where, fields in rows:
        try:
            build_record(fields, len, now=0.0)
        except ValidationError as exc:
            refused.append(RowNote(where, exc.message, field=exc.field, value=exc.value))
    return refused


def _skip_reason(fields: Mapping[str, Any], stored: Record) -> str:
    same = (
        stored.project == fields.get("project")
        and stored.author == fields.get("author")
        and stored.content_hash == content_hash(str(fields.get("content", "")))
    )
    if same:
        return "already present with the same content"
    return "its id is already taken by another record (the stored one is kept)"


def import_rows(
    engine: Engine,
    rows: Sequence[Row],
    *,
    batch: int = 500,
    skip_invalid: bool = False,
    progress: Callable[[int], None] | None = None,
) -> ImportReport:
    """Check every row, then store them in batches. A row that cannot be stored refuses the whole
    import (nothing stored), unless `skip_invalid`: then the others are stored and it is reported."""
    report = ImportReport(rows=len(rows), refused=check_rows(rows))
    if report.refused and not skip_invalid:
        first = report.refused[0]
        others = len(report.refused) - 1
        more = f" ({others} more rows are refused too)" if others else ""
        raise ValidationError(
            f"{first.row}: {first.field}",
            first.value,
            f"{first.reason}. Nothing was stored{more}: fix the file, or import with "
            "skip_invalid (--skip-invalid) to store the other rows",
            problem="cannot be stored",
        )
    bad = {n.row for n in report.refused}
    good = [(w, f) for w, f in rows if w not in bad]
    for i in range(0, len(good), batch):
        chunk = good[i : i + batch]
        for (where, fields), (record, new) in zip(
            chunk, engine.add_batch([f for _, f in chunk]), strict=True
        ):
            if new:
                report.stored += 1
                report.projects[record.project] = report.projects.get(record.project, 0) + 1
            else:
                report.skipped.append(RowNote(where, _skip_reason(fields, record), id=record.id))
        if progress is not None:
            progress(len(chunk))
    return report


def import_file(
    engine: Engine,
    path: str | Path,
    fmt: str,
    project: str,
    *,
    batch: int = 500,
    skip_invalid: bool = False,
    progress: Callable[[int], None] | None = None,
) -> ImportReport:
    rows = read_rows(path, fmt, project)
    return import_rows(engine, rows, batch=batch, skip_invalid=skip_invalid, progress=progress)
