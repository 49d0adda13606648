"""Step 1 of assembly: the @references in a task must resolve, and those that do not become items
in the window's `warnings` section. A reference is never dropped silently: the agent sees that
`@src/auth.ts` or `@kv:deploy.target` was not found and can decide what to do.

Forms, with the prefix optional when the name is unambiguous:

- `@kv:KEY`: a key-value entry of the project;
- `@rec:ID`: a record of the project that the agent may see (a record it may not see reads as
  missing, so a warning never reveals that it exists);
- `@file:PATH`, or any name with `/` or a file extension: a `file` or `artifact` record tagged
  with the path, or a file under the workspace root;
- `@name`: an agent of the project, a KV key or a record id.

The records a written record names (`supersedes`, `reply_to`, `rec:` refs) must resolve too, in
the writer's project, or the write is refused (`check_links`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import ValidationError
from ..ports import Query, Store
from ..records import Record, parse_mentions


@dataclass(frozen=True)
class Unresolved:
    ref: str
    problem: str
    fix: str

    def __str__(self) -> str:
        return f"@{self.ref}: {self.problem}; {self.fix}"


def visible_record(store: Store, project: str, agent: str, record_id: str) -> Record | None:
    for r in store.get_many(project, [record_id]):
        if r.project == project and r.visible_to(agent):
            return r
    return None


def file_record(store: Store, project: str, agent: str, path: str) -> Record | None:
    q = Query(project, agent, kinds=("file", "artifact"), tag=path.lower(), limit=1)
    found = store.query(q)
    return found[0] if found else None


def workspace_file(root: Path | None, path: str) -> Path | None:
    """`path` under `root`, if it is a file there; never a path that escapes the root."""
    if root is None:
        return None
    try:
        base = root.resolve()
        target = (base / path).resolve()
    except (OSError, ValueError):
        return None
    if not target.is_relative_to(base) or not target.is_file():
        return None
    return target


def looks_like_path(ref: str) -> bool:
    last = ref.rsplit("/", 1)[-1]
    return "/" in ref or (
        "." in last and not last.startswith(".") and len(last.split(".")[-1]) <= 5
    )


def check_reference(
    store: Store,
    project: str,
    agent: str,
    ref: str,
    *,
    is_agent: Callable[[str], bool] = lambda name: False,
    root: Path | None = None,
) -> Unresolved | None:
    """None when `ref` (a mention without its @) resolves, else what is wrong and the fix."""
    if ref.startswith("kv:"):
        key = ref[3:]
        if store.kv_get(project, key) is None:
            return Unresolved(
                ref,
                f"no KV key {key!r} in project {project!r}",
                f"set it with kv_set({project!r}, {key!r}, ...) or fix the key",
            )
        return None
    if ref.startswith("rec:"):
        rid = ref[4:]
        if visible_record(store, project, agent, rid) is None:
            return Unresolved(
                ref,
                f"no record {rid!r} in project {project!r} that {agent} may see",
                "check the id (records(...) lists them)",
            )
        return None
    if ref.startswith("file:"):
        path = ref[5:]
        if file_record(store, project, agent, path) or workspace_file(root, path):
            return None
        return _missing_file(ref, path, project)
    if is_agent(ref) or store.kv_get(project, ref) is not None:
        return None
    if visible_record(store, project, agent, ref) is not None:
        return None
    if looks_like_path(ref):
        if file_record(store, project, agent, ref) or workspace_file(root, ref):
            return None
        return _missing_file(ref, ref, project)
    return Unresolved(
        ref,
        f"not an agent, KV key or record id in project {project!r}",
        "check the spelling, or write @kv:KEY, @rec:ID or @file:PATH",
    )


def _missing_file(ref: str, path: str, project: str) -> Unresolved:
    return Unresolved(
        ref,
        f"no file or artifact {path!r} is known in project {project!r}",
        f"add it as a record (kind='file', tags=[{path.lower()!r}]) or fix the path",
    )


def validate_refs(
    store: Store,
    project: str,
    agent: str,
    task: str,
    *,
    is_agent: Callable[[str], bool] = lambda name: False,
    root: Path | None = None,
) -> list[Unresolved]:
    """Every @reference in `task` that does not resolve, in the order they appear."""
    return unresolved(store, project, agent, parse_mentions(task), is_agent=is_agent, root=root)


def unresolved(
    store: Store,
    project: str,
    agent: str,
    refs: Iterable[str],
    *,
    is_agent: Callable[[str], bool] = lambda name: False,
    root: Path | None = None,
) -> list[Unresolved]:
    """The references of `refs` that do not resolve, in order (check_reference on each)."""
    checked = (
        check_reference(store, project, agent, r, is_agent=is_agent, root=root) for r in refs
    )
    return [problem for problem in checked if problem is not None]


# How many references of addressed messages one call checks: each is a store read or two.
MAX_ADDRESSED_REFS = 16


def addressed_refs(
    store: Store,
    project: str,
    agent: str,
    records: Sequence[Record],
    *,
    root: Path | None = None,
) -> list[Unresolved]:
    """The @references that messages addressed to `agent` make and that do not resolve: what a
    peer asked it to read (`@kv:deploy.url`, `@src/auth.ts`, `@rec:ID`) is missing, so the agent
    is told rather than left to look. Only explicit forms and paths are checked (a bare `@name` is
    most often the agent itself or a peer), each once, at most MAX_ADDRESSED_REFS a call."""
    sender: dict[str, str] = {}  # each explicit reference once, with who wrote it first
    for r in records:
        for ref in r.mentions:
            if ref.startswith(("kv:", "rec:", "file:")) or looks_like_path(ref):
                sender.setdefault(ref, r.author)
    refs = list(sender)[:MAX_ADDRESSED_REFS]
    return [
        Unresolved(u.ref, f"{u.problem} (in a message from {sender[u.ref]})", u.fix)
        for u in unresolved(store, project, agent, refs, root=root)
    ]


def record_links(r: Record) -> list[tuple[str, str]]:
    """(field, id) of every record that `r` names: `supersedes`, `reply_to`, and each `refs`
    entry written `rec:ID` (other refs are free labels: paths, URLs)."""
    out = [(name, value) for name in ("supersedes", "reply_to") if (value := getattr(r, name))]
    out += [(f"refs[{i}]", ref[4:]) for i, ref in enumerate(r.refs) if ref[:4] == "rec:"]
    return out


def check_links(store: Store, records: Sequence[Record], *, batch: bool) -> None:
    """Every record that `records` name is a record of the writer's own project, stored or
    another of the batch (never the record itself), that its author may see; else a
    ValidationError names the first field that does not resolve (`records[i].field` when
    `batch`). Nothing is written, and nothing says whether the id exists in another project or
    is hidden from the writer."""
    wanted: dict[str, set[str]] = {}
    in_batch = {(r.project, r.id): r for r in records}
    # Most records name none: only those that do are looked at again below.
    linking = [(i, r, links) for i, r in enumerate(records) if (links := record_links(r))]
    for _, r, links in linking:
        for _, target in links:
            if (r.project, target) not in in_batch:
                wanted.setdefault(r.project, set()).add(target)
    known = dict(in_batch)
    for project, ids in wanted.items():
        known.update(((project, s.id), s) for s in store.get_many(project, sorted(ids)))
    for i, r, links in linking:
        for name, target in links:
            field = f"records[{i}].{name}" if batch else name
            if target == r.id:
                # The record is not there before its own write: a decision that superseded itself
                # would be acknowledged active and stored superseded.
                raise ValidationError(
                    field,
                    target,
                    f"name another record of project {r.project!r}, or leave "
                    f"{name.split('[')[0]} out",
                    problem="names the record itself",
                )
            # Each target must be one the writer may see: a link accepted to a hidden record and
            # refused to an id that exists nowhere would tell the writer the hidden one exists.
            found = known.get((r.project, target))
            if found is not None and found.visible_to(r.author):
                continue
            who = f" that {r.author!r} may see"
            raise ValidationError(
                field,
                target,
                f"give the id of a record of project {r.project!r}{who} (records(...) lists "
                f"them), or leave {name.split('[')[0]} out",
                problem=f"names no record of project {r.project!r}{who}",
            )
