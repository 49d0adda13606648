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
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
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
MAX_META_DEPTH = 32

# Identifiers (project, session, milestone, ids): they go into URL paths, file names and keys.
_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:/\-]*\Z")  # \Z: `$` would let "p\n" pass
# Display names (author, `to`, agent, `by`) are what people are called: any script, spaces,
# punctuation, emoji. Refused: what would break a rendered line or a comparison. Control characters
# (a newline in an author line forges a new line), line and paragraph separators, lone surrogates
# (no store can hold them as text), and the bidi embedding, override and isolate controls (they
# reorder the text that follows the name on screen). Zero-width joiners stay: emoji need them.
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_BAD_NAME_CATEGORIES = frozenset(("Cc", "Cs", "Zl", "Zp"))
# @name, @path/to/file.ts, @kv:key, @rec:ID, @Zoë, @"Ada Lovelace" (a display name with spaces);
# not e-mail addresses (a word character before @).
# The `@` comes first, and the look back after it: a pattern that starts with a literal is searched
# for that character alone, where one that starts with a look back is tried at every character.
MENTION_RE = re.compile(r'@(?<![\w@]@)(?:"([^"\r\n]{1,200})"|(\w[\w.\-/:]*[\w/])|(\w))')


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
        """Every field, tuples as lists, `meta` copied (not asdict: 26 us a record, this 1.5)."""
        data = {name: getattr(self, name) for name in FIELDS}
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
# Each field's slot setter, in FIELDS order. A frozen dataclass's __init__ sets each field through
# object.__setattr__: twice the cost of setting the slots (3.3 us a record of 1.6). Every record
# stored is built once and every record read decoded once; `record_of` makes both.
_SETTERS = tuple(Record.__dict__[name].__set__ for name in FIELDS)


def record_of(values: tuple[Any, ...]) -> Record:
    """The Record whose fields are `values`, in FIELDS order (the dataclass's own order), as
    immutable as one `Record(...)` makes; the caller has checked them (`build_record`, a store's
    row)."""
    r: Record = object.__new__(Record)
    for put, value in zip(_SETTERS, values, strict=True):
        put(r, value)
    return r


# What a writer says in a record. A repeated (project, id) with the same of these is a retry and
# gets the stored record back; the rest is the store's (status, since a status fact may have
# followed) or derived from these, or the moment of the write (`created_at`: a retry comes later).
_WRITE_FIELDS = (
    "author", "kind", "content", "milestone", "session", "to", "visibility", "tags", "refs",
    "supersedes", "reply_to", "pinned",
)  # fmt: skip


def same_write(a: Record, b: Record) -> bool:
    """Do `a` and `b` (the same project and id) say the same thing? (see _WRITE_FIELDS)"""
    if any(getattr(a, f) != getattr(b, f) for f in _WRITE_FIELDS):
        return False
    return _as_stored(a.meta) == _as_stored(b.meta)


def _as_stored(meta: Mapping[str, Any]) -> str:
    return json.dumps(meta, sort_keys=True, default=str)  # as the stores keep it: JSON


def changed_write(record: Record) -> ValidationError:
    """The error for a (project, id) already stored with another write: it names only what the
    writer's own project holds."""
    return ValidationError(
        "id",
        record.id,
        "use a new id for a new record (a retry must repeat the stored record exactly)",
        problem=f"is already a record of project {record.project!r} with other content",
    )


def content_hash(text: str) -> str:
    """The hash of the text with its whitespace runs made one space and its ends trimmed, lower
    case: the same words in other spacing or case are the same content."""
    return hashlib.blake2b(_normalized(text).encode(), digest_size=12).hexdigest()


def _normalized(text: str) -> str:
    """`" ".join(text.split()).lower()`. ASCII text whose only whitespace is single spaces and
    newlines (most text: prose, a tool's output line by line) is that already once its newlines
    are spaces, without a list of its words (split and join were most of the hash's time)."""
    if text.isascii():
        line = text.replace("\n", " ") if "\n" in text else text
        # Printable ASCII holds no other whitespace than the space.
        if line.isprintable() and "  " not in line and line[:1] != " " and line[-1:] != " ":
            return line.lower()
    return " ".join(text.split()).lower()


def parse_mentions(text: str) -> tuple[str, ...]:
    if "@" not in text:  # most texts: no scan at all
        return ()
    seen: dict[str, None] = {}
    for match in MENTION_RE.finditer(text):
        quoted = match.group(1)
        if quoted is not None:
            if quoted.strip() == quoted and display_name_problem(quoted) is None:
                seen.setdefault(quoted, None)
            continue
        name = match.group(2) or match.group(3)
        seen.setdefault(name.rstrip(".:"), None)
    return tuple(seen)


def check_text(field: str, value: str) -> str:
    """Text that every store can hold and every answer can encode: no NUL (PostgreSQL text cannot
    hold it) and no lone surrogate (not encodable as UTF-8; JSON allows `"\\ud800"`). The one
    check for every text on its way to a store or a trace, so that bad text is refused here, by
    name, and never becomes a store error or an answer that cannot be encoded."""
    if "\x00" in value:
        raise ValidationError(
            field, _clip(value), "remove the \\x00 characters", problem="contains a NUL character"
        )
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(
            field,
            _clip(value),
            f"send valid UTF-8 text: the character at position {exc.start} is a lone surrogate "
            f"({value[exc.start].encode('unicode_escape').decode()}); "
            "a \\uD800-\\uDFFF escape must pair a high with a low surrogate",
            problem="contains a lone surrogate",
        ) from None
    return value


def _clip(value: str, limit: int = 200) -> str:
    """Long text in an error is cut (the message would otherwise carry it whole)."""
    return value if len(value) <= limit else value[:limit] + f"...<{len(value)} characters>"


def display_name_problem(value: str) -> str | None:
    """Why `value` cannot be a display name (author, recipient, agent), or None if it can."""
    if not value or len(value) > MAX_NAME_CHARS:
        return f"must have 1-{MAX_NAME_CHARS} characters"
    # Printable ASCII holds no control character: the lookup of each one's category is skipped.
    if not (value.isascii() and value.isprintable()):
        for ch in value:
            if ch in _BIDI_CONTROLS or unicodedata.category(ch) in _BAD_NAME_CATEGORIES:
                return f"contains the control character U+{ord(ch):04X}"
    if not value.strip():
        return "is only whitespace"
    if value != value.strip():
        return "starts or ends with whitespace"
    return None


DISPLAY_NAME_FIX = (
    f"give a non-empty name of at most {MAX_NAME_CHARS} characters: any script, spaces and "
    "punctuation, no control characters, no space at either end (e.g. 'Ada Lovelace')"
)


def check_display_name(field: str, value: object) -> str:
    """A display name argument (agent, author, `by`) of an API call; see `display_name_problem`."""
    if not isinstance(value, str):
        raise ValidationError(
            field, value, DISPLAY_NAME_FIX, problem=f"must be a string, not {type(value).__name__}"
        )
    check_text(field, value)  # NUL and lone surrogates: the message every text field gives
    problem = display_name_problem(value)
    if problem is not None:
        raise ValidationError(field, value, DISPLAY_NAME_FIX, problem=problem)
    return value


def check_name(field: str, value: object) -> str:
    """A name argument (project, agent, session, id, ...) of an API call: a short non-empty string."""
    if not isinstance(value, str) or not value or len(value) > MAX_NAME_CHARS:
        raise ValidationError(
            field, value, f"give a non-empty string of at most {MAX_NAME_CHARS} characters"
        )
    return check_text(field, value)


def check_identifier(field: str, value: object) -> str:
    """An identifier argument that must match what a record may store (a milestone, a session):
    the strict rule of `_name`, so that a filter can never name what no record can hold."""
    return str(_name({field: value}, field, required=True, fix=f"name the {field}"))


def check_json_text(
    field: str, value: object, max_depth: int = MAX_META_DEPTH, depth: int = 0
) -> None:
    """Every key and text inside a JSON-like value (meta, a profile, a handoff, a rule) through
    `check_text`, and its nesting bounded: deeper values are refused, not a RecursionError."""
    if depth > max_depth:
        raise ValidationError(
            field, "<nested value>", f"nest objects and lists at most {max_depth} deep",
            problem="is nested too deeply",
        )  # fmt: skip
    if isinstance(value, str):
        check_text(field, value)
    elif isinstance(value, Mapping):
        for k, v in value.items():
            inner = f"{field}.{k}" if field else str(k)
            if isinstance(k, str):
                check_text(f"{field}.{k!r} (key)" if field else f"{k!r} (key)", k)
            check_json_text(inner, v, max_depth, depth + 1)
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            check_json_text(f"{field}[{i}]", v, max_depth, depth + 1)


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
    check_text(key, value)  # first: its message says what is wrong with such a character
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
        if agents and "," in value:
            # "bob, carol" is far more often two recipients than one name with a comma.
            raise ValidationError(
                key,
                value,
                "give the recipients as a list, e.g. ['bob', 'carol'] (a name that holds a "
                "comma goes in a list too: ['Lovelace, Ada'])",
                problem="is one string with a comma",
            )
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
        if agents:
            check_display_name(f"{key}[{i}]", item)
        elif not isinstance(item, str) or not item or len(item) > MAX_NAME_CHARS:
            raise ValidationError(
                f"{key}[{i}]",
                item,
                f"each item must be a non-empty string of at most {MAX_NAME_CHARS} characters",
            )
        check_text(f"{key}[{i}]", item)
        out.setdefault(item, None)
    return tuple(out)


def _check_json(key: str, value: Any, depth: int = 0) -> None:
    """Stores keep `meta` as JSON: only str keys and JSON values survive every store unchanged."""
    if depth > MAX_META_DEPTH:
        raise ValidationError(
            key, "<nested value>", f"nest objects and lists at most {MAX_META_DEPTH} deep",
            problem="is nested too deeply",
        )  # fmt: skip
    if isinstance(value, str):
        check_text(key, value)
    elif isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValidationError(f"{key}.{k!r}", k, "use text keys in meta")
            check_text(f"{key}.{k!r} (key)", k)
            _check_json(f"{key}.{k}", v, depth + 1)
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _check_json(f"{key}[{i}]", v, depth + 1)
    elif isinstance(value, float) and not math.isfinite(value):
        raise ValidationError(key, value, "use a finite number (JSON has no NaN or infinity)")
    elif value is not None and not isinstance(value, str | int | float | bool):
        raise ValidationError(
            key,
            value,
            "use JSON values: text, numbers, true/false, null, lists and objects",
            problem=f"cannot be stored as JSON ({type(value).__name__})",
        )


def check_time(field: str, value: object) -> float:
    """A moment as seconds since the epoch: a finite number from 1970 to about 5138."""
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < 1e11:
        return float(value)
    raise ValidationError(field, value, "give seconds since the epoch as a number")


def build_record(
    data: Mapping[str, Any],
    count_tokens: Any,
    *,
    now: float | None = None,
) -> Record:
    """Validate raw input and return a complete Record. Raises ValidationError; never partial."""
    if type(data) is not dict and not isinstance(data, Mapping):  # the ABC check is slow
        raise ValidationError(
            "record",
            data,
            "give a mapping of field names to values",
            problem=f"must be an object, not {type(data).__name__}",
        )
    if not data.keys() <= _INPUT_FIELDS:
        unknown: list[Any] = sorted(set(data) - _INPUT_FIELDS, key=str)  # keys may not be str
        raise ValidationError(
            str(unknown[0]),
            data[unknown[0]],
            f"remove it; known fields are {', '.join(sorted(_INPUT_FIELDS))}",
            problem="is not a record field",
        )
    project = _name(data, "project", required=True, fix="name the project, e.g. project='acme'")
    author = data.get("author")
    if author is None:
        raise ValidationError(
            "author", None, "name the agent or person who wrote it", problem="is missing"
        )
    check_display_name("author", author)
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
    if not content or content.isspace():  # `strip()` would copy the text
        raise ValidationError("content", content, "give non-empty text", problem="is empty")
    if len(content) > MAX_CONTENT_CHARS:
        raise ValidationError(
            "content",
            f"<{len(content)} characters>",
            f"split it into records of at most {MAX_CONTENT_CHARS} characters",
            problem="is too large",
        )
    check_text("content", content)
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
    if type(meta) is not dict and not isinstance(meta, Mapping):
        raise ValidationError("meta", meta, "give an object of extra fields")
    if meta:
        _check_json("meta", meta)
    created = data.get("created_at")
    if created is None:
        created_at = time.time() if now is None else now
    else:
        created_at = check_time("created_at", created)
    record_id = data.get("id")
    if record_id is None:
        record_id = new_id(int(created_at * 1000))
    else:
        record_id = _name(data, "id", required=True, fix="use a string id")
    # FIELDS order: id, project, author, kind, content, created_at, tokens, content_hash,
    # milestone, session, to, visibility, mentions, tags, refs, status, supersedes, reply_to,
    # pinned, meta.
    tags = data.get("tags")
    return record_of((
        str(record_id),
        str(project),
        str(author),
        kind,
        content,
        created_at,
        int(count_tokens(content)),
        content_hash(content),
        _name(data, "milestone", required=False, fix="name the milestone"),
        _name(data, "session", required=False, fix="name the session"),
        to,
        visibility,
        parse_mentions(content),
        () if tags is None else tuple(dict.fromkeys(t.lower() for t in _names(data, "tags"))),
        _names(data, "refs"),
        status,
        _name(data, "supersedes", required=False, fix="give the id of the record it replaces"),
        _name(data, "reply_to", required=False, fix="give the id of the record it answers"),
        pinned,
        # A JSON round trip: every store gives back the same meta (lists, not tuples).
        json.loads(json.dumps(dict(meta))) if meta else {},
    ))  # fmt: skip
