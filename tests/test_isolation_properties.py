"""Tenants and visibility that cannot be crossed, through every interface (issue 24, "Tests").

Three projects and six agents write records that carry unique secret markers (`mk0007q`), with
references pointing anywhere (ids of other projects, ids that exist nowhere, ids reused across
projects), and run compactions, resets, memory flushes, rules that include or pin records, replays
and diffs of traces, searches and task reads. The same generated scenarios run through the Python
library, the HTTP API (keys scoped per project), the MCP server (the SDK's client) and the CLI.

The oracle, after every operation:
- the answer (window, trace, search results, record lists, error text) holds no marker its caller
  may not see: markers of other projects, private markers of other agents, direct markers where
  the caller is neither author nor recipient;
- no record of another project changed (ids, statuses, contents), and no record of the caller's
  own project that the caller may not see changed;
- an acknowledged write is stored in the writer's project, with the writer's content.

A write may be refused (a reference that does not resolve in the project); that is fine.

The calls whose signatures issue 24 changed are isolated in the helpers at the top.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio.from_thread
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from contextwright import Engine
from contextwright.cli import cli
from contextwright.errors import ContextwrightError
from contextwright.mcp.server import build_server
from contextwright.records import Record
from contextwright.server import create_app
from contextwright.settings import Settings

PROJECTS = ("alpha", "beta", "gamma")
AGENTS = ("alice", "bob", "carol", "dave", "erin", "frank")
KEYS = {f"key-{p}-000000": [p] for p in PROJECTS}
KEY_OF = {p: k for k, [p] in ((k, v) for k, v in KEYS.items())}
BUDGET = 4000

# About a minute for the five interfaces; still run by `make test`.
pytestmark = pytest.mark.slow

# Bounded and deterministic: the same examples on every run, no example database.
PROPS = settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# -- calls whose signatures issue 24 changed -----------------------------------------------------


def get_record(engine: Engine, project: str, record_id: str) -> Record:
    """A record's identity is (project, id)."""
    return engine.get(project, record_id)


def search_text(engine: Engine, project: str, agent: str, query: str) -> list[Record]:
    return [h.record for h in engine.store.search_text(project, agent, query, 20)]


def task_handoff(engine: Engine, project: str, agent: str, task_id: str) -> Any:
    """The newest handoff of the task that `agent` may see."""
    return engine.tasks.handoff(project, task_id, agent)


def create_task(engine: Engine, project: str) -> str:
    return engine.tasks.create(project, name="Login", objective="Fix the login flow").id


def mcp_trace_uri(templates: list[str], project: str, agent: str, trace_id: str) -> str:
    """The trace resource as the server advertises it (`trace://{project}/{agent}/{trace_id}`),
    read as the caller."""
    for t in templates:
        if t.startswith("trace://"):
            return t.format(project=project, agent=agent, trace_id=trace_id)
    raise AssertionError(f"no trace resource among {templates}")


def cli_trace_args(project: str, agent: str, trace_id: str) -> list[str]:
    """`trace show ID -p PROJECT -a AGENT`: read as the caller."""
    return ["trace", "show", trace_id, "--json", "--project", project, "--agent", agent]


def agent_keys() -> dict[str, Any]:
    """One key per (project, agent), scoped to that agent (issue 24, item 7)."""
    return {f"key-{p}-{a}-0000": {"project": p, "agents": [a]} for p in PROJECTS for a in AGENTS}


def snapshot(engine: Engine, project: str) -> dict[str, tuple[str, str, str | None]]:
    """Every record of a project: id -> (status, content, supersedes)."""
    found = engine.records(project, agent=None, limit=10_000)
    return {r.id: (r.status, r.content, r.supersedes) for r in found}


# -- scenarios ------------------------------------------------------------------------------------


def marker(n: int) -> str:
    return f"mk{n:04d}q"


@dataclass(frozen=True)
class Write:
    n: int
    project: str
    author: str
    kind: str
    visibility: str
    to: tuple[str, ...]
    session: str | None
    id_choice: tuple[str, int]  # ("auto"|"fresh"|"reuse", index)
    ref_field: str | None  # supersedes | reply_to
    ref_choice: tuple[str, int]  # ("record"|"task"|"nowhere", index)
    batch: bool

    @property
    def marker(self) -> str:
        return marker(self.n)


@dataclass(frozen=True)
class Op:
    name: str
    project: str
    agent: str
    session: str = "s1"
    a: int = 0
    b: int = 0
    rule: tuple[str, int] | None = None


# Most traffic in two projects and three agents, so sessions grow long enough to compact.
projects = st.sampled_from(("alpha", "alpha", "beta", "beta", "gamma"))
agents = st.sampled_from(("alice", "alice", "bob", "bob", "carol", *AGENTS[3:]))
sessions = st.sampled_from(("s1", "s1", "s1", "s2"))


@st.composite
def writes(draw: st.DrawFn, n: int) -> Write:
    author = draw(agents)
    visibility = draw(st.sampled_from(("project", "direct", "direct", "private", "private")))
    to: tuple[str, ...] = ()
    if visibility == "direct":
        to = tuple(
            draw(
                st.lists(
                    st.sampled_from([a for a in AGENTS if a != author]),
                    min_size=1,
                    max_size=2,
                    unique=True,
                )
            )
        )
    kind = draw(st.sampled_from(("message", "message", "message", "decision", "note", "handoff")))
    ref_field = None
    if kind == "handoff":
        ref_field = "reply_to"
        ref_choice = ("task", draw(st.integers(0, 2)))
    elif draw(st.integers(0, 2)) == 0:
        ref_field = "supersedes" if kind == "decision" else "reply_to"
        ref_choice = (
            draw(st.sampled_from(("record", "record", "nowhere"))),
            draw(st.integers(0, 99)),
        )
    else:
        ref_choice = ("record", 0)
    return Write(
        n=n,
        project=draw(projects),
        author=author,
        kind=kind,
        visibility=visibility,
        to=to,
        session=draw(st.one_of(st.none(), sessions, sessions, sessions)),
        id_choice=(draw(st.sampled_from(("auto", "fresh", "reuse"))), draw(st.integers(0, 99))),
        ref_field=ref_field,
        ref_choice=ref_choice,
        batch=draw(st.booleans()),
    )


OP_NAMES = (
    "compact",
    "compact",
    "reset",
    "flush",
    "assemble",
    "assemble",
    "replay",
    "diff",
    "trace",
    "search",
    "records",
    "get",
    "task",
)


@st.composite
def ops(draw: st.DrawFn) -> Op:
    name = draw(st.sampled_from(OP_NAMES))
    rule = None
    if name in ("assemble", "replay") and draw(st.booleans()):
        rule = (draw(st.sampled_from(("include", "pin"))), draw(st.integers(0, 99)))
    return Op(
        name=name,
        project=draw(projects),
        agent=draw(agents),
        session=draw(sessions),
        a=draw(st.integers(0, 99)),
        b=draw(st.integers(0, 99)),
        rule=rule,
    )


@st.composite
def scenarios(draw: st.DrawFn) -> list[Write | Op]:
    """Writes first (so sessions fill up), then writes and operations interleaved."""
    steps: list[Write | Op] = [draw(writes(i)) for i in range(draw(st.integers(10, 18)))]
    for _ in range(draw(st.integers(6, 16))):
        if draw(st.integers(0, 2)) == 0:
            steps.append(draw(writes(len([s for s in steps if isinstance(s, Write)]))))
        else:
            steps.append(draw(ops()))
    return steps


def w(
    n: int,
    project: str,
    author: str,
    visibility: str = "project",
    to: tuple[str, ...] = (),
    *,
    kind: str = "message",
    session: str | None = "s1",
    ids: tuple[str, int] = ("auto", 0),
    ref: tuple[str, tuple[str, int]] | None = None,
    batch: bool = False,
) -> Write:
    field_, choice = ref if ref is not None else (None, ("record", 0))
    return Write(n, project, author, kind, visibility, to, session, ids, field_, choice, batch)


# The findings of issue 24 as explicit scenarios, run first by every interface.
SESSION_S1 = [
    w(0, "alpha", "alice", "private"),
    w(1, "alpha", "bob", "direct", ("alice",)),
    w(2, "alpha", "carol", "direct", ("bob",)),
    *[w(3 + i, "alpha", ("alice", "bob")[i % 2]) for i in range(7)],
]
FINDINGS: dict[str, list[Write | Op]] = {
    "id reused across projects": [
        w(0, "alpha", "alice", "private", ids=("fresh", 0)),
        w(1, "beta", "bob", ids=("reuse", 0)),
        w(2, "beta", "bob", ids=("reuse", 0), batch=True),
    ],
    "supersedes and reply_to across projects or nowhere": [
        w(0, "alpha", "alice", kind="decision"),
        w(1, "alpha", "bob", "private", kind="decision"),
        w(2, "beta", "bob", kind="decision", ref=("supersedes", ("record", 0))),
        w(3, "alpha", "carol", kind="decision", ref=("supersedes", ("record", 1))),
        w(4, "beta", "bob", ref=("reply_to", ("record", 0))),
        w(5, "beta", "bob", ref=("reply_to", ("nowhere", 0))),
    ],
    "handoff forged for another project's task": [
        w(0, "beta", "bob", kind="handoff", ref=("reply_to", ("task", 0))),
    ],
    # Found by this suite once the APIs of issue 24 were in (the fixes came with it):
    "a private handoff read by another agent of the project": [
        w(0, "alpha", "alice", "private", kind="handoff", ref=("reply_to", ("task", 0))),
        Op("task", "alpha", "bob"),
    ],
    "a record that names itself (an id of another project reused)": [
        w(0, "alpha", "alice", "private", ids=("fresh", 0)),
        w(1, "beta", "bob", kind="decision", ids=("reuse", 0), ref=("supersedes", ("record", 0))),
        w(2, "beta", "bob", ids=("reuse", 0), ref=("reply_to", ("record", 0)), batch=True),
    ],
    "reading by id": [
        w(0, "alpha", "alice", "private", ids=("fresh", 0)),
        Op("get", "alpha", "bob"),
        Op("get", "beta", "bob"),
        Op("get", "alpha", "alice"),
    ],
    "compaction": [*SESSION_S1, Op("compact", "alpha", "alice")],
    "reset": [*SESSION_S1, Op("reset", "alpha", "alice")],
    "flush": [*SESSION_S1, Op("flush", "alpha", "alice")],
    "traces by another agent or project": [
        w(0, "alpha", "alice", "private"),
        Op("assemble", "alpha", "alice"),
        Op("trace", "alpha", "bob"),
        Op("trace", "beta", "bob"),
        Op("replay", "beta", "bob"),
        Op("diff", "alpha", "carol"),
    ],
    "rules that include another's record": [
        w(0, "alpha", "alice", "private"),
        Op("assemble", "alpha", "bob", rule=("include", 0)),
        Op("assemble", "beta", "bob", rule=("include", 0)),
        Op("replay", "alpha", "bob", rule=("include", 0)),
    ],
}


def findings(test: Callable[..., None]) -> Callable[..., None]:
    for steps in FINDINGS.values():
        test = example(steps)(test)
    return test


# -- the oracle -----------------------------------------------------------------------------------


def may_see(w: Write, project: str, agent: str | None) -> bool:
    """Whether `agent` of `project` may see what `w` wrote; None: a reader trusted with every
    agent's view of `project` (never another project's)."""
    if w.project != project:
        return False
    if agent is None:
        return True
    if w.visibility == "private":
        return w.author == agent
    if w.visibility == "direct":
        return agent == w.author or agent in w.to
    return True


@dataclass
class World:
    """What the scenario did so far: the writes (with their acknowledged ids), traces, tasks."""

    engine: Engine
    writes: list[Write] = field(default_factory=list)
    acked: dict[int, str] = field(default_factory=dict)  # write n -> stored id
    traces: list[tuple[str, str, str]] = field(default_factory=list)  # (project, agent, id)
    tasks: dict[str, str] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)

    def forbidden(self, project: str, agent: str | None) -> dict[str, Write]:
        return {w.marker: w for w in self.writes if not may_see(w, project, agent)}

    def check(self, answer: Any, project: str, agent: str | None, what: str) -> None:
        text = answer if isinstance(answer, str) else json.dumps(answer, default=str)
        leaked = {m: w for m, w in self.forbidden(project, agent).items() if m in text}
        assert not leaked, (
            f"{what} as {agent}@{project} shows what it may not see: "
            + "; ".join(
                f"{m} ({w.visibility} by {w.author}@{w.project} to {list(w.to)})"
                for m, w in leaked.items()
            )
            + "\nsteps:\n  "
            + "\n  ".join(self.log)
        )

    def resolves(self, w: Write, target: str) -> bool:
        """A reference resolves inside the writer's project; a superseded record must be one the
        writer may see."""
        if w.ref_field == "reply_to" and target == self.tasks[w.project]:
            return True
        for t in self.writes:
            if t.project == w.project and self.acked.get(t.n) == target:
                return w.ref_field != "supersedes" or may_see(t, w.project, w.author)
        return False

    def ids(self) -> list[str]:
        return list(self.acked.values())

    def pick_id(self, i: int) -> str | None:
        ids = self.ids()
        return ids[i % len(ids)] if ids else None

    def fields(self, w: Write) -> dict[str, Any]:
        data: dict[str, Any] = {
            "project": w.project,
            "author": w.author,
            "kind": w.kind,
            "content": f"Note {w.n} about the login flow {w.marker}",
            "visibility": w.visibility,
        }
        if w.to:
            data["to"] = list(w.to)
        if w.session:
            data["session"] = w.session
        how, i = w.id_choice
        if how == "fresh":
            data["id"] = f"r{w.n:04d}"
        elif how == "reuse" and (reused := self.pick_id(i)):
            data["id"] = reused
        if w.ref_field is not None:
            kind, j = w.ref_choice
            if kind == "task":
                target: str | None = self.tasks[PROJECTS[j % 3]]
            elif kind == "record":
                target = self.pick_id(j)
            else:
                target = f"nowhere-{j}"
            if target is not None:
                data[w.ref_field] = target
        if w.kind == "handoff":
            data["meta"] = {"handoff": {"summary": f"Done {w.marker}"}}
        return data

    def rules(self, rule: tuple[str, int] | None) -> list[dict[str, Any]] | None:
        if rule is None:
            return None
        what, i = rule
        if what == "include":
            target = self.pick_id(i) or "nowhere"
            return [{"name": "inc", "then": [{"include": f"rec:{target}"}]}]
        kind = ("decision", "message", "note")[i % 3]
        return [{"name": "pin", "then": [{"pin": {"kind": kind}}]}]

    def pick_trace(self, i: int, own: tuple[str, str] | None = None) -> str | None:
        found = [t for t in self.traces if own is None or t[:2] == own]
        return found[i % len(found)][2] if found else None

    def trace_reader(self, project: str, agent: str, trace_id: str, strict: bool) -> str:
        """Whose view a trace read answers with: a project key may read any agent's trace of its
        project (it may ask as any agent), so the trace's own agent; else (or with a key scoped
        to agents, `strict`) the caller."""
        if strict:
            return agent
        for p, a, t in self.traces:
            if t == trace_id and p == project:
                return a
        return agent


# -- interfaces -----------------------------------------------------------------------------------


class Python:
    """The library, the caller being the (project, agent) each call names."""

    any_trace = True  # engine.trace/replay/diff read as the agent they are given
    strict = True
    # engine.get(project, id) names no reader: the library's caller is trusted with every view of
    # the project it names, and with nothing of another project.
    reads_as_agent = False

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def write(self, data: dict[str, Any], batch: bool) -> tuple[Any, str]:
        rec = self.engine.add_many([data])[0] if batch else self.engine.add(**data)
        return rec.to_dict(), rec.id

    def read(self, project: str, agent: str, record_id: str) -> Any:
        rec = get_record(self.engine, project, record_id)
        return rec.to_dict()

    def compact(self, op: Op) -> Any:
        return self.engine.sessions.compact(op.project, op.agent, op.session, keep=4).to_dict()

    def reset(self, op: Op) -> Any:
        return self.engine.sessions.reset(op.project, op.agent, op.session).to_dict()

    def flush(self, op: Op) -> Any:
        return self.engine.sessions.flush(op.project, op.agent, op.session).to_dict()

    def assemble(self, op: Op, rules: Any) -> tuple[Any, str]:
        res = self.engine.assemble(
            op.project, op.agent, "fix the login flow", BUDGET, "markdown",
            session=op.session, rules=rules,
        )  # fmt: skip
        self.engine.flush()
        return {"text": res.text, "trace": res.trace.to_dict()}, res.trace.id

    def replay(self, op: Op, trace_id: str, rules: Any) -> tuple[Any, str]:
        res = self.engine.replay(op.project, trace_id, op.agent, budget=BUDGET // 2, rules=rules)
        self.engine.flush()
        return {"text": res.text, "trace": res.trace.to_dict()}, res.trace.id

    def trace(self, op: Op, trace_id: str) -> Any:
        return self.engine.trace(op.project, trace_id, op.agent).to_dict()

    def diff(self, op: Op, a: str, b: str) -> Any:
        return self.engine.diff(op.project, a, b, op.agent)

    def search(self, op: Op, query: str) -> Any:
        return [r.to_dict() for r in search_text(self.engine, op.project, op.agent, query)]

    def records(self, op: Op) -> Any:
        return [r.to_dict() for r in self.engine.records(op.project, agent=op.agent, limit=1000)]

    def task(self, op: Op, task_id: str) -> Any:
        h = task_handoff(self.engine, op.project, op.agent, task_id)
        return None if h is None else h.to_dict()


class Refused(Exception):
    """A 4xx answer (or a tool error, or a CLI error): the answer text is checked all the same."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class Http:
    """The HTTP API with a key scoped to the caller's project."""

    any_trace = True
    strict = False  # a project key may ask as any agent of its project
    reads_as_agent = True

    def key(self, project: str, agent: str) -> str:
        return KEY_OF[project]

    def __init__(self, engine: Engine, client: TestClient) -> None:
        self.engine = engine
        self.client = client

    def call(self, method: str, project: str, path: str, agent: str = "", **kw: Any) -> Any:
        key = self.key(project, agent)
        r = self.client.request(
            method, f"/v1/projects/{project}{path}", headers={"X-API-Key": key}, **kw
        )
        assert r.status_code < 500, f"{method} {path}: {r.status_code} {r.text}"
        if r.status_code >= 400:
            raise Refused(r.text)
        return r.json()

    def write(self, data: dict[str, Any], batch: bool) -> tuple[Any, str]:
        p = data["project"]
        if batch:
            out = self.call("POST", p, "/records/batch", data["author"], json={"records": [data]})
            return out, out["ids"][0]
        out = self.call("POST", p, "/records", data["author"], json=data)
        return out, out["id"]

    def read(self, project: str, agent: str, record_id: str) -> Any:
        return self.call("GET", project, f"/records/{record_id}", agent, params={"agent": agent})

    def compact(self, op: Op) -> Any:
        return self.call(
            "POST",
            op.project,
            f"/sessions/{op.session}/compact",
            op.agent,
            json={"agent": op.agent, "keep": 4},
        )

    def reset(self, op: Op) -> Any:
        return self.call(
            "POST", op.project, f"/sessions/{op.session}/reset", op.agent, json={"agent": op.agent}
        )

    flush = None

    def assemble(self, op: Op, rules: Any) -> tuple[Any, str]:
        body = {"agent": op.agent, "task": "fix the login flow", "budget": BUDGET}
        body["session"] = op.session
        out = self.call(
            "POST",
            op.project,
            "/assemble",
            op.agent,
            json=body,
            params={"trace": "true", "format": "markdown"},
        )
        return out, out["trace_id"]

    def replay(self, op: Op, trace_id: str, rules: Any) -> tuple[Any, str]:
        body: dict[str, Any] = {"budget": BUDGET // 2}
        if rules is not None:
            body["rules"] = rules
        out = self.call("POST", op.project, f"/traces/{trace_id}/replay", op.agent, json=body)
        return out, out["trace"]["id"]

    def trace(self, op: Op, trace_id: str) -> Any:
        return self.call("GET", op.project, f"/traces/{trace_id}", op.agent)

    def diff(self, op: Op, a: str, b: str) -> Any:
        return self.call("GET", op.project, f"/traces/{a}/diff/{b}", op.agent)

    def search(self, op: Op, query: str) -> Any:
        return None  # the HTTP API has no search route; windows cover full-text search

    def records(self, op: Op) -> Any:
        return self.call(
            "GET", op.project, "/records", op.agent, params={"agent": op.agent, "limit": 1000}
        )

    def task(self, op: Op, task_id: str) -> Any:
        return self.call(
            "GET", op.project, f"/tasks/{task_id}", op.agent, params={"agent": op.agent}
        )


class Mcp:
    """The MCP server through the SDK's client; the caller is the (project, agent) a tool names."""

    any_trace = True
    strict = True
    reads_as_agent = True

    def __init__(self, engine: Engine, portal: Any, client: Any) -> None:
        self.engine = engine
        self.portal = portal
        self.client = client
        listed = portal.call(client.list_resource_templates)
        self.templates = [t.uri_template for t in listed.resource_templates]

    def tool(self, name: str, args: dict[str, Any]) -> Any:
        result = self.portal.call(self.client.call_tool, name, args)
        text = " ".join(getattr(c, "text", "") for c in result.content)
        if result.is_error:
            raise Refused(text)
        sc = result.structured_content
        if sc is not None:
            return sc.get("result", sc) if set(sc) == {"result"} else sc
        return json.loads(text)

    def resource(self, uri: str) -> Any:
        try:
            got = self.portal.call(self.client.read_resource, uri)
        except Exception as exc:  # the SDK raises a resource error as an MCP error
            raise Refused(str(exc)) from exc
        return " ".join(getattr(c, "text", "") for c in got.contents)

    def write(self, data: dict[str, Any], batch: bool) -> tuple[Any, str] | None:
        if "id" in data or "supersedes" in data or "reply_to" in data or "meta" in data:
            return None  # post_message takes none of these
        args = {k: data[k] for k in ("project", "author", "kind", "content", "visibility")}
        if "to" in data:
            args["to"] = data["to"]
        if "session" in data:
            args["session"] = data["session"]
        out = self.tool("post_message", args)
        return out, out["id"]

    def read(self, project: str, agent: str, record_id: str) -> Any:
        return None

    def compact(self, op: Op) -> Any:
        args = {"project": op.project, "agent": op.agent, "session": op.session}
        return self.tool("compact_session", args)

    reset = None
    flush = None

    def assemble(self, op: Op, rules: Any) -> tuple[Any, str]:
        args = {
            "project": op.project,
            "agent": op.agent,
            "task": "fix the login flow",
            "budget": BUDGET,
            "session": op.session,
        }
        out = self.tool("assemble_context", args)
        return out, out["trace_id"]

    replay = None

    def trace(self, op: Op, trace_id: str) -> Any:
        return self.resource(mcp_trace_uri(self.templates, op.project, op.agent, trace_id))

    def diff(self, op: Op, a: str, b: str) -> Any:
        uri = next(t for t in self.templates if t.startswith("traces://"))
        return self.resource(uri.format(project=op.project, agent=op.agent))

    def search(self, op: Op, query: str) -> Any:
        args = {"project": op.project, "agent": op.agent, "query": query}
        return self.tool("search_memory", args)

    records = None
    task = None


class Cli:
    """The `contextwright` command on the same SQLite file; the caller is -p/-a."""

    any_trace = True
    strict = True
    reads_as_agent = True

    def __init__(self, engine: Engine, db: str) -> None:
        self.engine = engine
        self.db = db

    def run(self, *args: str) -> Any:
        result = CliRunner().invoke(cli, ["--db", self.db, *args])
        if result.exit_code != 0:
            assert result.exception is None or isinstance(result.exception, SystemExit), (
                args,
                result.output,
                result.exception,
            )
            raise Refused(result.output)
        return json.loads(result.stdout)

    def write(self, data: dict[str, Any], batch: bool) -> tuple[Any, str] | None:
        if "id" in data or "supersedes" in data or "reply_to" in data or "meta" in data:
            return None  # `add` takes none of these
        args = ["add", "-p", data["project"], "-a", data["author"], "-k", data["kind"]]
        args += ["--visibility", data["visibility"]]
        for to in data.get("to", ()):
            args += ["--to", to]
        if "session" in data:
            args += ["--session", data["session"]]
        out = self.run(*args, data["content"], "--json")
        return out, out["id"]

    def read(self, project: str, agent: str, record_id: str) -> Any:
        return None

    def _session(self, what: str, op: Op) -> Any:
        return self.run("session", what, "-p", op.project, "-a", op.agent, op.session, "--json")

    def compact(self, op: Op) -> Any:
        return self._session("compact", op)

    def reset(self, op: Op) -> Any:
        return self._session("reset", op)

    flush = None

    def assemble(self, op: Op, rules: Any) -> tuple[Any, str]:
        out = self.run(
            "assemble", "-p", op.project, "-a", op.agent, "-t", "fix the login flow",
            "-b", str(BUDGET), "--session", op.session, "--json",
        )  # fmt: skip
        return out, out["trace_id"]

    replay = None

    def trace(self, op: Op, trace_id: str) -> Any:
        return self.run(*cli_trace_args(op.project, op.agent, trace_id))

    def diff(self, op: Op, a: str, b: str) -> Any:
        return self.run("trace", "list", "-p", op.project, "-a", op.agent, "--json")

    search = None
    records = None
    task = None


# -- running a scenario ---------------------------------------------------------------------------


def others_and_hidden(world: World, project: str, agent: str) -> dict[str, Any]:
    """What an operation by (project, agent) must not change: every other project's records, and
    the records of its own project that it may not see."""
    engine = world.engine
    out: dict[str, Any] = {p: snapshot(engine, p) for p in PROJECTS if p != project}
    hidden_markers = {w.marker for w in world.forbidden(project, agent).values()}
    own = snapshot(engine, project)
    out[project] = {rid: v for rid, v in own.items() if any(m in v[1] for m in hidden_markers)}
    return out


def still(world: World, before: dict[str, Any], project: str, agent: str, what: str) -> None:
    after = others_and_hidden(world, project, agent)
    for p in PROJECTS:
        if p == project:
            changed = {
                k: (v, after[p].get(k)) for k, v in before[p].items() if after[p].get(k) != v
            }
        else:
            changed = {
                k: (before[p].get(k), after[p].get(k))
                for k in set(before[p]) | set(after[p])
                if before[p].get(k) != after[p].get(k)
            }
        assert not changed, (
            f"{what} by {agent}@{project} changed records of {p} it may not touch: {changed}"
            + "\nsteps:\n  "
            + "\n  ".join(world.log)
        )


def attempt(fn: Callable[[], Any]) -> tuple[Any, bool]:
    """(answer, acknowledged): a refusal's text is an answer too."""
    try:
        return fn(), True
    except Refused as exc:
        return exc.text, False
    except ContextwrightError as exc:
        return str(exc), False


def run_write(world: World, iface: Any, w: Write) -> None:
    data = world.fields(w)
    world.writes.append(w)
    before = others_and_hidden(world, w.project, w.author)
    world.log.append(f"write {w.marker}: {data} batch={w.batch}")
    answer, ok = attempt(lambda: iface.write(data, w.batch))
    if answer is None:
        world.writes.pop()  # this interface cannot send it
        world.log.pop()
        return
    world.check(answer, w.project, w.author, f"write {w.marker}")
    still(world, before, w.project, w.author, f"write {w.marker}")
    if w.ref_field is not None and w.ref_field in data and ok:
        target = data[w.ref_field]
        assert world.resolves(w, target), (
            f"write {w.marker} was stored with {w.ref_field}={target!r}, which does not resolve "
            f"in {w.project} for {w.author}\nsteps:\n  " + "\n  ".join(world.log)
        )
    if not ok:
        return
    _, rid = answer
    world.acked[w.n] = rid
    # Acknowledged means stored, in the writer's project, with the writer's words.
    stored = [
        r for r in world.engine.records(w.project, agent=None, limit=10_000)
        if r.id == rid
    ]  # fmt: skip
    assert len(stored) == 1 and w.marker in stored[0].content, (
        f"write {w.marker} acknowledged as {rid!r} but {w.project} holds {stored}"
        + "\nsteps:\n  "
        + "\n  ".join(world.log)
    )


def run_op(world: World, iface: Any, op: Op) -> None:
    p, a = op.project, op.agent
    world.log.append(f"{op}")
    before = others_and_hidden(world, p, a)
    who: str | None = a
    rules = world.rules(op.rule)

    def go() -> Any:
        nonlocal who
        if op.name in ("compact", "reset", "flush"):
            fn = getattr(iface, op.name)
            return None if fn is None else fn(op)
        if op.name == "assemble":
            out, tid = iface.assemble(op, rules)
            world.traces.append((p, a, tid))
            return out
        if op.name in ("replay", "trace", "diff"):
            own = None if iface.any_trace else (p, a)
            tid = world.pick_trace(op.a, own)
            if tid is None or getattr(iface, op.name) is None:
                return None
            who = world.trace_reader(p, a, tid, iface.strict)
            if op.name == "replay":
                out, new = iface.replay(op, tid, rules)
                world.traces.append((p, who, new))
                return out
            if op.name == "trace":
                return iface.trace(op, tid)
            other = world.pick_trace(op.b, own)
            assert other is not None
            if world.trace_reader(p, a, other, iface.strict) != who:
                return None
            return iface.diff(op, tid, other)
        if op.name == "search":
            if iface.search is None or not world.writes:
                return None
            return iface.search(op, world.writes[op.a % len(world.writes)].marker)
        if op.name == "records":
            return None if iface.records is None else iface.records(op)
        if op.name == "get":
            rid = world.pick_id(op.a)
            if not iface.reads_as_agent:
                who = None
            return None if rid is None else iface.read(p, a, rid)
        if op.name == "task":
            return None if iface.task is None else iface.task(op, world.tasks[p])
        raise AssertionError(op.name)

    answer, _ = attempt(go)
    world.check(answer, p, who, op.name)
    still(world, before, p, a, op.name)


def probe(world: World, iface: Any) -> None:
    """Every agent of every project reads its window, records and task at the end."""
    for p in PROJECTS:
        for a in AGENTS:
            for name in ("assemble", "records", "task", "trace"):
                run_op(world, iface, Op(name=name, project=p, agent=a, a=-1))


def run_scenario(engine: Engine, iface: Any, steps: list[Write | Op]) -> None:
    world = World(engine)
    for p in PROJECTS:
        world.tasks[p] = create_task(engine, p)
        for a in AGENTS:
            engine.register_agent(p, a)
    for step in steps:
        if isinstance(step, Write):
            run_write(world, iface, step)
        else:
            run_op(world, iface, step)
    probe(world, iface)


@contextmanager
def fresh_engine() -> Iterator[tuple[Engine, str]]:
    with tempfile.TemporaryDirectory(prefix="cw-iso-") as d:
        db = f"sqlite:///{Path(d) / 'iso.db'}"
        engine = Engine.open(db)
        try:
            yield engine, db
        finally:
            engine.close()


# -- the properties -------------------------------------------------------------------------------


@PROPS
@findings
@given(scenarios())
def test_python_keeps_projects_and_visibility_apart(steps: list[Write | Op]) -> None:
    with fresh_engine() as (engine, _):
        run_scenario(engine, Python(engine), steps)


@PROPS
@findings
@given(scenarios())
def test_http_keeps_projects_and_visibility_apart(steps: list[Write | Op]) -> None:
    with fresh_engine() as (engine, db), ExitStack() as stack:
        app = create_app(engine, Settings(db=db, api_keys=KEYS))
        client = stack.enter_context(TestClient(app, raise_server_exceptions=False))
        run_scenario(engine, Http(engine, client), steps)


class HttpAgentKeys(Http):
    """The HTTP API with a key scoped to the caller's project and agent: it reads traces, windows
    and records as that agent only."""

    strict = True

    def key(self, project: str, agent: str) -> str:
        return f"key-{project}-{agent}-0000"


@PROPS
@findings
@given(scenarios())
def test_http_agent_keys_keep_agents_apart(steps: list[Write | Op]) -> None:
    with fresh_engine() as (engine, db), ExitStack() as stack:
        app = create_app(engine, Settings(db=db, api_keys=agent_keys()))
        client = stack.enter_context(TestClient(app, raise_server_exceptions=False))
        run_scenario(engine, HttpAgentKeys(engine, client), steps)


@PROPS
@findings
@given(scenarios())
def test_mcp_keeps_projects_and_visibility_apart(steps: list[Write | Op]) -> None:
    from mcp import Client

    with fresh_engine() as (engine, _), anyio.from_thread.start_blocking_portal() as portal:
        server = build_server(engine)
        with portal.wrap_async_context_manager(Client(server)) as client:
            run_scenario(engine, Mcp(engine, portal, client), steps)


@settings(PROPS, max_examples=4)
@findings
@given(scenarios())
def test_cli_keeps_projects_and_visibility_apart(steps: list[Write | Op]) -> None:
    with fresh_engine() as (engine, db):
        run_scenario(engine, Cli(engine, db), steps)
