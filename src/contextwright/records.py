"""Records: the one unit contextwright stores. Immutable; a status change is a new fact, not an edit.

`build_record` is the single place where raw input becomes a Record: it validates every field with
an error that names the field, the value and the fix, then computes the id, the content hash, the
token count and the @mentions.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from .errors import ValidationError
from .ids import new_id

KINDS = (
    "message",
    "tool_call",
    "tool_result",
    "decision",
    "pattern",
    "gotcha",
    "preference",
    "artifact",
    "question",
    "task",
    "handoff",
    "summary",
    "file",
    "constraint",
    "state",
    "note",
    "memory",
)
VISIBILITIES = ("project", "direct", "private")
STATUSES = ("open", "active", "resolved", "superseded", "completed", "cancelled", "compacted")
# Kinds that start life open until a later fact resolves them.
OPEN_BY_DEFAULT = {"task": "open", "question": "open", "decision": "active"}

MAX_CONTENT_CHARS = 400_000
MAX_NAME_CHARS = 200
MAX_LIST_ITEMS = 256

_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:/\-]*$")
# @name, @path/to/file.ts, @kv:key, @rec:ID; not e-mail addresses (a word character before @).
MENTION_RE = re.compile(r"(?<![\w@])@([A-Za-z0-9_][\w.\-/:]*[\w/])|(?<![\w@])@([A-Za-z0-9_])")


@dataclass(frozen=True, slots=True)
class Record:
    id: str
    project: str
    author: str
    kind: str
    content: str
    created_at: float
    tokens: int
    content_hash: str
    milestone: str | None = None
    session: str | None = None
    to: tuple[str, ...] = ()
    visibility: str = "project"
    mentions: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    refs: tuple[str, ...] = ()
    status: str | None = None
    supersedes: str | None = None
    reply_to: str | None = None
    pinned: bool = False
    meta: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("to", "mentions", "tags", "refs"):
            data[key] = list(data[key])
        data["meta"] = dict(self.meta)
        return data

    def with_status(self, status: str | None) -> Record:
        return replace(self, status=status)

    def visible_to(self, agent: str) -> bool:
        """The one visibility rule: every read path goes through the store's filter or this."""
        if self.visibility == "project":
            return True
        if self.author == agent:
            return True
        if self.visibility == "direct":
            return agent in self.to
        return False


FIELDS = tuple(f.name for f in fields(Record))
_INPUT_FIELDS = set(FIELDS) - {"mentions", "tokens", "content_hash"}


def content_hash(text: str) -> str:
    normalized = " ".join(text.split()).lower()
    return hashlib.blake2b(normalized.encode(), digest_size=12).hexdigest()


def parse_mentions(text: str) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for match in MENTION_RE.finditer(text):
        name = match.group(1) or match.group(2)
        seen.setdefault(name.rstrip(".:"), None)
    return tuple(seen)


def check_name(field: str, value: object) -> str:
    """A name argument (project, agent, session, id, ...) of an API call: a short non-empty string."""
    if not isinstance(value, str) or not value or len(value) > MAX_NAME_CHARS:
        raise ValidationError(
            field, value, f"give a non-empty string of at most {MAX_NAME_CHARS} characters"
        )
    return value


def _name(data: Mapping[str, Any], key: str, *, required: bool, fix: str) -> str | None:
    value = data.get(key)
    if value is None:
        if required:
            raise ValidationError(key, None, fix, problem="is missing")
        return None
    if not isinstance(value, str):
        raise ValidationError(
            key, value, fix, problem=f"must be a string, not {type(value).__name__}"
        )
    if not value or len(value) > MAX_NAME_CHARS or not _NAME_RE.match(value):
        raise ValidationError(
            key, value, f"use 1-{MAX_NAME_CHARS} characters of letters, digits and _ . : / -"
        )
    return value


def _names(data: Mapping[str, Any], key: str, *, agents: bool = False) -> tuple[str, ...]:
    value = data.get(key)
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple):
        raise ValidationError(
            key,
            value,
            "give a list of strings",
            problem=f"must be a list, not {type(value).__name__}",
        )
    if len(value) > MAX_LIST_ITEMS:
        raise ValidationError(key, f"{len(value)} items", f"give at most {MAX_LIST_ITEMS} items")
    out: dict[str, None] = {}
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item or len(item) > MAX_NAME_CHARS:
            raise ValidationError(
                f"{key}[{i}]",
                item,
                f"each item must be a non-empty string of at most {MAX_NAME_CHARS} characters",
            )
        if agents and not _NAME_RE.match(item):
            raise ValidationError(
                f"{key}[{i}]",
                item,
                "name one agent per item, with letters, digits and _ . : / -",
            )
        out.setdefault(item, None)
    return tuple(out)


def _check_json(key: str, value: Any) -> None:
    """Stores keep `meta` as JSON: only str keys and JSON values survive every store unchanged."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValidationError(f"{key}.{k!r}", k, "use text keys in meta")
            _check_json(f"{key}.{k}", v)
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _check_json(f"{key}[{i}]", v)
    elif isinstance(value, float) and not math.isfinite(value):
        raise ValidationError(key, value, "use a finite number (JSON has no NaN or infinity)")
    elif value is not None and not isinstance(value, str | int | float | bool):
        raise ValidationError(
            key,
            value,
            "use JSON values: text, numbers, true/false, null, lists and objects",
            problem=f"cannot be stored as JSON ({type(value).__name__})",
        )


def build_record(
    data: Mapping[str, Any],
    count_tokens: Any,
    *,
    now: float | None = None,
) -> Record:
    """Validate raw input and return a complete Record. Raises ValidationError; never partial."""
    if not isinstance(data, Mapping):
        raise ValidationError(
            "record",
            data,
            "give a mapping of field names to values",
            problem=f"must be an object, not {type(data).__name__}",
        )
    unknown: list[Any] = sorted(set(data) - _INPUT_FIELDS, key=str)  # keys may not be str
    if unknown:
        raise ValidationError(
            str(unknown[0]),
            data[unknown[0]],
            f"remove it; known fields are {', '.join(sorted(_INPUT_FIELDS))}",
            problem="is not a record field",
        )
    project = _name(data, "project", required=True, fix="name the project, e.g. project='acme'")
    author = _name(data, "author", required=True, fix="name the agent or person who wrote it")
    kind = data.get("kind", "message")
    if kind not in KINDS:
        raise ValidationError("kind", kind, f"use one of {', '.join(KINDS)}")
    content = data.get("content")
    if content is None:
        raise ValidationError("content", None, "give the record's text", problem="is missing")
    if not isinstance(content, str):
        raise ValidationError(
            "content",
            content,
            "give the text as a string",
            problem=f"must be a string, not {type(content).__name__}",
        )
    if not content.strip():
        raise ValidationError("content", content, "give non-empty text", problem="is empty")
    if len(content) > MAX_CONTENT_CHARS:
        raise ValidationError(
            "content",
            f"<{len(content)} characters>",
            f"split it into records of at most {MAX_CONTENT_CHARS} characters",
            problem="is too large",
        )
    if "\x00" in content:
        # PostgreSQL text cannot hold NUL; refusing it everywhere keeps every store alike.
        raise ValidationError(
            "content", "<text with a NUL character>", "remove the \\x00 characters",
            problem="contains a NUL character",
        )  # fmt: skip
    visibility = data.get("visibility", "project")
    if visibility not in VISIBILITIES:
        raise ValidationError("visibility", visibility, f"use one of {', '.join(VISIBILITIES)}")
    to = _names(data, "to", agents=True)
    if visibility == "direct" and not to:
        raise ValidationError(
            "to", [], "a direct record needs at least one recipient in 'to'", problem="is empty"
        )
    status = data.get("status")
    if status is None:
        status = OPEN_BY_DEFAULT.get(kind)
    elif status not in STATUSES:
        raise ValidationError("status", status, f"use one of {', '.join(STATUSES)}")
    pinned = data.get("pinned", False)
    if not isinstance(pinned, bool):
        raise ValidationError("pinned", pinned, "use true or false")
    meta = data.get("meta") or {}
    if not isinstance(meta, Mapping):
        raise ValidationError("meta", meta, "give an object of extra fields")
    _check_json("meta", meta)
    created = data.get("created_at")
    if created is None:
        created_at = time.time() if now is None else now
    elif isinstance(created, int | float) and not isinstance(created, bool) and 0 <= created < 1e11:
        created_at = float(created)
    else:
        raise ValidationError("created_at", created, "give seconds since the epoch as a number")
    record_id = data.get("id")
    if record_id is None:
        record_id = new_id(int(created_at * 1000))
    else:
        record_id = _name(data, "id", required=True, fix="use a string id")
    return Record(
        id=str(record_id),
        project=str(project),
        milestone=_name(data, "milestone", required=False, fix="name the milestone"),
        session=_name(data, "session", required=False, fix="name the session"),
        author=str(author),
        kind=kind,
        to=to,
        visibility=visibility,
        mentions=parse_mentions(content),
        tags=tuple(dict.fromkeys(t.lower() for t in _names(data, "tags"))),
        refs=_names(data, "refs"),
        status=status,
        supersedes=_name(
            data, "supersedes", required=False, fix="give the id of the record it replaces"
        ),
        reply_to=_name(
            data, "reply_to", required=False, fix="give the id of the record it answers"
        ),
        pinned=pinned,
        created_at=created_at,
        content=content,
        tokens=int(count_tokens(content)),
        content_hash=content_hash(content),
        # A JSON round trip: every store gives back the same meta (lists, not tuples).
        meta=json.loads(json.dumps(dict(meta))),
    )
