"""Retrieval pipelines as data (the spec's "persistent memory definitions"): JSON files beside the
rules that say which sources an assemble call runs and what each one retrieves.

    {"pipelines": [
        {"name": "vector", "steps": [{"step": "vector", "topK": 10},
                                     {"step": "filter", "max_age_days": 30}]}
    ]}

A pipeline is one source: its steps run in order, a retrieval step (history, addressed,
open_items, fulltext, vector, pinned, decisions, kv, graph, session) adding candidates, a `filter`
or `cap` step narrowing the candidates of the steps before it. The engine's own sources are the
packaged `default_pipelines.json`; a user's file replaces a default pipeline of the same name in
place and appends the others, so "lower topK in the vector search step" or "add a filter step" is
a one-line edit of a copy of the defaults.

Files are checked against the published JSON Schema (`schemas/pipeline.schema.json`, the one
definition of what a file may hold), then for what a schema cannot say (a first step that
retrieves, unique names). Every problem is a RuleError with the file, the JSON path of the field
and the fix; `check_pipelines` reports them all, `load_pipelines` raises the first. Nothing here
does I/O but reading the files; retrieval.py turns a definition into sources.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import RuleError, ValidationError
from ..records import check_json_text

DEFAULT_PIPELINES_DIR = Path(".contextwright") / "pipelines"
DEFAULT_FILE = "<default>"  # the `file` of the packaged definitions

# Retrieval steps and the default pipeline (source) each one is: `graph` is the `computed` source.
RETRIEVAL_STEPS = {
    "history": "history",
    "addressed": "addressed",
    "open_items": "open_items",
    "fulltext": "fulltext",
    "vector": "vector",
    "pinned": "pinned",
    "decisions": "decisions",
    "kv": "kv",
    "graph": "computed",
    "session": "session",
}
SEARCH_STEPS = ("fulltext", "vector")  # their size is `topK`; the store reads' is `limit`
NARROWING_STEPS = ("filter", "cap")

# A valid file nests 6 deep ({pipelines: [{steps: [{kind: [...]}]}]}); the bound only keeps a
# hostile document from reaching the validator's recursion.
MAX_DEPTH = 16
MAX_FILE_BYTES = 1_000_000


@dataclass(frozen=True)
class Step:
    step: str
    limit: int | None = None  # `limit`, or `topK` for a search step
    kind: tuple[str, ...] = ()
    author: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    max_age_days: float | None = None
    exclude: bool = False
    items: int | None = None
    tokens: int | None = None

    @property
    def retrieves(self) -> bool:
        return self.step in RETRIEVAL_STEPS

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"step": self.step}
        if self.limit is not None:
            out["topK" if self.step in SEARCH_STEPS else "limit"] = self.limit
        for name in ("kind", "author", "tags"):
            if getattr(self, name):
                out[name] = list(getattr(self, name))
        if self.max_age_days is not None:
            out["max_age_days"] = self.max_age_days
        if self.exclude:
            out["exclude"] = True
        if self.items is not None:
            out["items"] = self.items
        if self.tokens is not None:
            out["tokens"] = self.tokens
        return out


@dataclass(frozen=True)
class Pipeline:
    name: str
    steps: tuple[Step, ...]
    file: str = DEFAULT_FILE
    description: str = ""
    enabled: bool = True

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.description:
            out["description"] = self.description
        if not self.enabled:
            out["enabled"] = False
        out["steps"] = [s.to_dict() for s in self.steps]
        return out

    @property
    def digest(self) -> str:
        """What the trace names a definition by: the same steps give the same digest, whatever
        file they came from or how the JSON was spelt."""
        return digest(self.to_dict())

    @property
    def retrieval(self) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if s.retrieves)


@dataclass(frozen=True)
class Pipelines:
    """The pipelines an engine runs, in order (disabled ones kept, so a file can switch a
    default off by name)."""

    pipelines: tuple[Pipeline, ...] = ()
    files: tuple[str, ...] = ()

    def __iter__(self) -> Iterator[Pipeline]:
        return iter(self.pipelines)

    def __len__(self) -> int:
        return len(self.pipelines)

    def get(self, name: str) -> Pipeline | None:
        for p in self.pipelines:
            if p.name == name:
                return p
        return None

    @property
    def enabled(self) -> tuple[Pipeline, ...]:
        return tuple(p for p in self.pipelines if p.enabled)

    def to_dict(self) -> dict[str, Any]:
        return {"pipelines": [p.to_dict() for p in self.pipelines]}

    @property
    def digest(self) -> str:
        return digest(self.to_dict())

    def extended(self, more: Iterable[Pipeline], file: str | None = None) -> Pipelines:
        """These pipelines with `more`: one of the same name replaces it where it stands, a new
        name runs after the others."""
        out = list(self.pipelines)
        index = {p.name: i for i, p in enumerate(out)}
        for p in more:
            if p.name in index:
                out[index[p.name]] = p
            else:
                index[p.name] = len(out)
                out.append(p)
        files = self.files if file is None else (*self.files, file)
        return Pipelines(tuple(out), files)


def digest(doc: Mapping[str, Any]) -> str:
    """A short, stable name for a definition (JSON with sorted keys, hashed)."""
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


# -- the schema and its errors -------------------------------------------------------------------


def schema() -> dict[str, Any]:
    """The published JSON Schema of a pipelines file."""
    return _schema()


@functools.cache
def _schema() -> dict[str, Any]:
    text = resources.files("contextwright").joinpath("schemas/pipeline.schema.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


@functools.cache
def _validator() -> Any:
    # Imported here: only a user's file is validated (the packaged defaults are checked by a
    # test), so an engine on the defaults never pays for the import.
    import jsonschema

    return jsonschema.Draft202012Validator(_schema())


def json_path(parts: Iterable[str | int]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(document)"


_TYPES = {
    "object": "an object {...}",
    "array": "a list [...]",
    "string": "a string",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
}


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True, default=str) if value is not None else "null"
    return text if len(text) <= 60 else text[:45] + f"...({len(text)} chars)"


def _schema_error(err: Any, file: str) -> RuleError:
    """One jsonschema error as a RuleError: the field's JSON path and a fix a person can act on
    (the schema's `x-fix` where it has one)."""
    parts = list(err.absolute_path)
    at, kw, sub, value = json_path(parts), err.validator, err.schema, err.instance
    given = sub.get("x-fix") if isinstance(sub, Mapping) else None
    if kw == "required":
        missing = [r for r in err.validator_value if r not in value]
        name = missing[0] if missing else err.validator_value[0]
        return RuleError(file, json_path([*parts, name]), f"add the field {name!r}")
    if kw == "additionalProperties":
        allowed = [k for k in sub.get("properties", {}) if k != "$schema"]
        extra = sorted(k for k in value if k not in sub.get("properties", {}))
        name = extra[0] if extra else "?"
        what = f"a {value['step']} step" if isinstance(value.get("step"), str) else "this object"
        return RuleError(
            file,
            json_path([*parts, name]),
            f"remove the field {name!r}: {what} takes {', '.join(allowed)}",
        )
    if kw == "enum":
        fix = f"{_short(value)} is not one of them; use one of {', '.join(err.validator_value)}"
        return RuleError(file, at, fix)
    if kw == "type":
        want = err.validator_value
        types: list[str] = want if isinstance(want, list) else [want]
        words = " or ".join(_TYPES.get(t, t) for t in types)
        return RuleError(file, at, f"{_short(value)} is not {words}; {given or 'give ' + words}")
    if kw in ("minItems", "maxItems"):
        lo, hi = sub.get("minItems", 0), sub.get("maxItems")
        span = f"from {lo} to {hi}" if hi is not None else f"at least {lo}"
        return RuleError(file, at, f"it has {len(value)} items; give {span}")
    if kw == "uniqueItems":
        return RuleError(file, at, "list each value once")
    if kw in ("minLength", "maxLength"):
        return RuleError(
            file, at, f"give {sub.get('minLength', 0)} to {sub.get('maxLength')} characters"
        )
    if kw in ("minimum", "exclusiveMinimum", "maximum"):
        side = "over the maximum" if kw == "maximum" else "under the minimum"
        return RuleError(file, at, f"{_short(value)} is {side}; {given or err.message}")
    if given:
        return RuleError(file, at, f"{_short(value)} does not fit; {given}")
    return RuleError(file, at, f"{_short(value)} does not fit: {err.message}")


# -- reading -------------------------------------------------------------------------------------


class _Refused(ValueError):
    """What the JSON reader refuses that JSON's grammar allows; its message is the fix."""


def _refuse_constant(name: str) -> Any:
    raise _Refused(f"{name} is not a JSON number; give a finite number")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _Refused(f"the key {k!r} appears twice in one object; give it once")
        out[k] = v
    return out


def _depth(value: Any, limit: int) -> bool:
    """Is `value` nested at most `limit` deep? Iterative: a hostile document cannot recurse."""
    stack = [(value, 0)]
    while stack:
        v, d = stack.pop()
        if d > limit:
            return False
        if isinstance(v, Mapping):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)
    return True


def parse_document(doc: Any, file: str) -> tuple[list[Pipeline], list[RuleError]]:
    """The pipelines of one parsed JSON document, or every problem with it."""
    if not _depth(doc, MAX_DEPTH):
        return [], [RuleError(file, "(document)", f"nest the JSON at most {MAX_DEPTH} deep")]
    try:
        check_json_text("", doc, MAX_DEPTH)
    except ValidationError as exc:
        return [], [RuleError(file, exc.field or "(document)", exc.fix)]
    seen_at: set[str] = set()
    errors: list[RuleError] = []
    for err in sorted(_validator().iter_errors(doc), key=lambda e: json_path(e.absolute_path)):
        e = _schema_error(err, file)
        if e.field not in seen_at:  # one problem per field: the first says what to do
            seen_at.add(e.field)
            errors.append(e)
    if errors:
        return [], errors
    out: list[Pipeline] = []
    names: dict[str, int] = {}
    for i, p in enumerate(doc["pipelines"]):
        steps = tuple(_step(s) for s in p["steps"])
        if not steps[0].retrieves:
            errors.append(
                RuleError(
                    file,
                    f"pipelines[{i}].steps[0].step",
                    f"a {steps[0].step} step narrows the candidates of the steps before it; "
                    f"start with a retrieval step ({', '.join(RETRIEVAL_STEPS)})",
                )
            )
        if p["name"] in names:
            errors.append(
                RuleError(
                    file,
                    f"pipelines[{i}].name",
                    f"{p['name']!r} is already the name of pipelines[{names[p['name']]}]; "
                    "rename one",
                )
            )
        names.setdefault(p["name"], i)
        # The schema's range passes NaN (every comparison with it is false), which a call's
        # pipelines can carry (Python's JSON reader takes it); a NaN age dropped every candidate.
        for j in (j for j, st in enumerate(steps) if math.isnan(st.max_age_days or 0.0)):
            fix = _schema()["$defs"]["filter"]["properties"]["max_age_days"]["x-fix"]  # one text
            at = f"pipelines[{i}].steps[{j}].max_age_days"
            errors.append(RuleError(file, at, f"{fix} (JSON has no NaN)"))
        out.append(
            Pipeline(
                name=p["name"],
                steps=steps,
                file=file,
                description=p.get("description", ""),
                enabled=p.get("enabled", True),
            )
        )
    return ([], errors) if errors else (out, [])


def _step(s: Mapping[str, Any]) -> Step:
    limit = s.get("topK", s.get("limit"))
    age = s.get("max_age_days")
    return Step(
        step=s["step"],
        limit=None if limit is None else int(limit),
        kind=tuple(s.get("kind", ())),
        author=tuple(s.get("author", ())),
        tags=tuple(s.get("tags", ())),
        max_age_days=None if age is None else float(age),
        exclude=bool(s.get("exclude", False)),
        items=None if s.get("items") is None else int(s["items"]),
        tokens=None if s.get("tokens") is None else int(s["tokens"]),
    )


def parse_text(text: str | bytes, file: str) -> tuple[list[Pipeline], list[RuleError]]:
    if isinstance(text, bytes):
        if len(text) > MAX_FILE_BYTES:
            return [], [RuleError(file, "(file)", f"keep the file under {MAX_FILE_BYTES} bytes")]
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            return [], [
                RuleError(file, "(file)", f"save the file as UTF-8 (byte {exc.start} is not UTF-8)")
            ]
    try:
        doc = json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_unique_keys)
    except RecursionError:
        return [], [RuleError(file, "(document)", f"nest the JSON at most {MAX_DEPTH} deep")]
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        return [], [RuleError(file, where, f"fix the JSON syntax: {exc.msg}")]
    except _Refused as exc:  # NaN, Infinity, a repeated key
        return [], [RuleError(file, "(document)", str(exc))]
    except ValueError:  # an integer of thousands of digits (Python's int conversion limit)
        return [], [RuleError(file, "(document)", "give numbers of at most a few digits")]
    return parse_document(doc, file)


def read_file(path: Path) -> tuple[list[Pipeline], list[RuleError]]:
    name = str(path)
    try:
        with path.open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        return [], [RuleError(name, "(file)", f"make it a readable file ({exc.strerror})")]
    return parse_text(data, name)


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.suffix == ".json" and p.is_file())
    return [path]


def _scan(path: str | Path) -> tuple[Pipelines, list[RuleError]]:
    p = Path(path)
    if not p.exists():
        where = "(directory)" if not p.suffix else "(file)"
        return Pipelines(), [
            RuleError(str(p), where, "give a pipelines file or a directory of them that exists")
        ]
    found = default_pipelines()
    errors: list[RuleError] = []
    defined: dict[str, str] = {}
    for f in _files(p):
        got, errs = read_file(f)
        errors.extend(errs)
        for i, pipe in enumerate(got):
            if pipe.name in defined:
                errors.append(
                    RuleError(
                        str(f),
                        f"pipelines[{i}].name",
                        f"{pipe.name!r} is already defined in {defined[pipe.name]}; "
                        "keep one definition",
                    )
                )
            defined.setdefault(pipe.name, str(f))
        found = found.extended(got, str(f))
    return found, errors


def check_pipelines(path: str | Path = DEFAULT_PIPELINES_DIR) -> list[RuleError]:
    """Every problem in the pipelines file or directory `path`; empty when all are valid."""
    return _scan(path)[1]


def load_pipelines(path: str | Path = DEFAULT_PIPELINES_DIR) -> Pipelines:
    """The default pipelines as the file or directory `path` replaces and extends them; raises
    the first RuleError if any definition is invalid (check_pipelines lists them all)."""
    found, errors = _scan(path)
    if errors:
        raise errors[0]
    return found


@functools.cache
def default_pipelines() -> Pipelines:
    """The packaged definitions of the engine's own sources (`default_pipelines.json`)."""
    text = resources.files("contextwright").joinpath("assembly/default_pipelines.json")
    doc = json.loads(text.read_text(encoding="utf-8"))
    return Pipelines(tuple(_default(p) for p in doc["pipelines"]), (DEFAULT_FILE,))


def _default(p: Mapping[str, Any]) -> Pipeline:
    return Pipeline(name=p["name"], steps=tuple(_step(s) for s in p["steps"]))


def pipelines_from(docs: Mapping[str, Any] | Sequence[Any], name: str = "<pipelines>") -> Pipelines:
    """The defaults with in-memory definitions: a document {"pipelines": [...]} or a list of
    pipeline objects, for code and tests that keep them in memory."""
    doc = docs if isinstance(docs, Mapping) else {"pipelines": list(docs)}
    got, errors = parse_document(doc, name)
    if errors:
        raise errors[0]
    return default_pipelines().extended(got, name)


PipelinesArg = Pipelines | str | Path | Mapping[str, Any] | Sequence[Any] | None


def coerce_pipelines(value: PipelinesArg) -> Pipelines:
    if value is None:
        return default_pipelines()
    if isinstance(value, Pipelines):
        return value
    if isinstance(value, str | Path):
        return load_pipelines(value)
    if isinstance(value, Mapping | Sequence):
        return pipelines_from(value)
    raise RuleError(
        "<pipelines>",
        "pipelines",
        "give Pipelines, a pipelines file or directory, or a list of pipeline objects",
    )
