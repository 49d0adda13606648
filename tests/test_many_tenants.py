"""Many projects on one server at once (issue 27): six projects, agents named in four scripts, keys
scoped to a project or to one agent, four clients writing and assembling concurrently over a real
uvicorn through the fast path. Every record carries a marker naming its project, author,
visibility and recipient; no window, trace or record listing ever holds a marker that its reader
may not see. The sequential properties are in test_isolation_properties.py; this is the same
rule under concurrency (shared caches, the gate, the fast path, the trace writer)."""

from __future__ import annotations

import random
import re
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from contextwright import Engine
from contextwright.server import create_app
from contextwright.settings import Settings
from servers import auth, running

PROJECTS = [f"team{i}" for i in range(6)]
PEOPLE = ["Ada Lovelace", "李小龍", "محمد", "José Núñez 🐉"]
MARK = re.compile(r"MARK\|([^|]+)\|([^|]+)\|([^|]+)\|([^|]*)\|")


def project_key(p: str) -> str:
    return f"key-{p}-0000000"


def agent_key(p: str, i: int) -> str:
    return f"key-{p}-agent{i}-000"


KEYS: dict[str, Any] = {project_key(p): [p] for p in PROJECTS}
KEYS.update(
    {agent_key(p, i): {"project": p, "agents": [a]} for p in PROJECTS for i, a in enumerate(PEOPLE)}
)


def may_see(reader: str, project: str, seen: tuple[str, str, str, str]) -> bool:
    p, author, visibility, to = seen
    if p != project:
        return False
    return visibility == "project" or author == reader or (visibility == "direct" and reader == to)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    engine = Engine.open(f"sqlite:///{tmp_path_factory.mktemp('t') / 'tenants.db'}")
    for p in PROJECTS:
        for a in PEOPLE:
            engine.register_agent(p, a)
    with running(create_app(engine, Settings(api_keys=KEYS))) as base:
        yield base
    engine.close()


def client_run(base: str, seed: int, problems: list[str], reads: list[int]) -> None:
    rnd = random.Random(seed)
    with httpx.Client(base_url=base, timeout=60) as c:
        for n in range(120):
            p, i = rnd.choice(PROJECTS), rnd.randrange(len(PEOPLE))
            me = PEOPLE[i]
            key = agent_key(p, i) if rnd.random() < 0.5 else project_key(p)
            step = rnd.random()
            if step < 0.55:
                visibility = rnd.choice(["project", "private", "direct"])
                to = rnd.choice(PEOPLE) if visibility == "direct" else ""
                body = {
                    "author": me,
                    "content": f"MARK|{p}|{me}|{visibility}|{to}| login form {seed}.{n}",
                    "visibility": visibility,
                    "to": [to] if to else [],
                }
                r = c.post(f"/v1/projects/{p}/records", json=body, headers=auth(key))
                if r.status_code != 201:
                    problems.append(f"add {p} {me}: {r.status_code} {r.text[:200]}")
                continue
            if step < 0.85:
                r = c.post(
                    f"/v1/projects/{p}/assemble",
                    json={"agent": me, "task": "the login form", "budget": 3000},
                    headers=auth(key),
                )
                texts = [r.text]
                if r.status_code == 200:
                    trace = c.get(
                        f"/v1/projects/{p}/traces/{r.json()['trace_id']}", headers=auth(key)
                    )
                    texts.append(trace.text if trace.status_code == 200 else "")
            else:
                r = c.get(
                    f"/v1/projects/{p}/records",
                    params={"agent": me, "limit": 500},
                    headers=auth(key),
                )
                texts = [r.text]
            if r.status_code != 200:
                problems.append(f"read {p} {me}: {r.status_code} {r.text[:200]}")
                continue
            for text in texts:
                found = MARK.findall(text)
                reads.append(len(found))
                problems.extend(
                    f"{me} of {p} read {'|'.join(m)}" for m in found if not may_see(me, p, m)
                )


def test_concurrent_tenants_never_read_each_other(served: str) -> None:
    problems: list[str] = []
    reads: list[int] = []
    threads = [
        threading.Thread(target=client_run, args=(served, seed, problems, reads))
        for seed in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not problems, "\n".join(problems[:20])
    assert sum(reads) > 1000  # the windows and listings did hold markers to check
