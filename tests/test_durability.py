"""Durability under load and under kill -9 (issue 24, "Tests").

- Eight writer threads and eight reader threads (assemble and record lists) for a few seconds, on
  SQLite (one process, and two processes sharing the file) and on PostgreSQL: afterwards every
  acknowledged record is stored exactly once, and nothing else is.
- A child process writes records in a loop and prints each acknowledged id; it is killed with
  SIGKILL at random moments; the reopened SQLite file holds every acknowledged record and passes
  `PRAGMA integrity_check`.

The runs are bounded by a time and a count of writes; nothing is asserted about time.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from contextwright import Engine
from contextwright.errors import NotFound
from contextwright.ports import Query

pytestmark = pytest.mark.slow

RUN_S = 4.0
MAX_WRITES = 300  # per writer: a bound on a fast machine, so the check stays quick
WRITERS = 8
READERS = 8
KILL_TRIALS = 5
SRC = str(Path(__file__).resolve().parents[1] / "src")


def write_loop(engine: Engine, name: str, stop: threading.Event, acked: list[str]) -> None:
    """One writer: single records and batches of three, client ids on some, each acknowledged id
    appended once its write returned."""
    n = 0
    while not stop.is_set() and n < MAX_WRITES:
        project = f"dur-{name[:2]}"
        if n % 4 == 3:
            batch = [
                {"project": project, "author": name, "content": f"{name} batch {n} item {i}"}
                for i in range(3)
            ]
            acked.extend(r.id for r in engine.add_many(batch))
            n += 3
            continue
        fields = {"project": project, "author": name, "content": f"{name} note {n} on login"}
        if n % 2:
            fields["id"] = f"{name}-{n}"
        acked.append(engine.add(**fields).id)
        n += 1


def read_loop(engine: Engine, i: int, stop: threading.Event, seen: list[int]) -> None:
    k = i % 4
    project, agent = f"dur-w{k}", f"w{k}{k}"  # a project and one of its writers
    while not stop.is_set():
        with contextlib.suppress(NotFound):  # before the agent's first write
            engine.assemble(project, agent, "fix the login", budget=1500)
        seen.append(len(engine.records(project, agent=agent, limit=200)))


def hammer(engine: Engine, writers: list[str], readers: int) -> list[str]:
    """Run writer and reader threads on `engine` for RUN_S seconds; the acknowledged ids."""
    stop = threading.Event()
    errors: list[BaseException] = []
    acked: list[list[str]] = [[] for _ in writers]
    seen: list[int] = []

    def guarded(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # reported by the test, not lost in a thread
                errors.append(exc)
                stop.set()

        return run

    threads = [
        threading.Thread(target=guarded(lambda w=w, a=a: write_loop(engine, w, stop, a)))
        for w, a in zip(writers, acked, strict=True)
    ] + [
        threading.Thread(target=guarded(lambda i=i: read_loop(engine, i, stop, seen)))
        for i in range(readers)
    ]
    for t in threads:
        t.start()
    time.sleep(RUN_S)
    stop.set()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a thread did not stop"
    assert not errors, errors
    assert seen, "the readers read nothing"
    return [i for a in acked for i in a]


def assert_exactly_once(engine: Engine, acked: list[str]) -> None:
    assert acked, "nothing was written"
    assert len(acked) == len(set(acked)), "one id acknowledged twice"
    projects = sorted({p for p in engine.store.projects() if p.startswith("dur-")})
    stored: list[str] = []
    contents: list[str] = []
    for p in projects:
        found = engine.records(p, agent=None, limit=10_000)
        assert len(found) == engine.store.count(p)
        stored += [r.id for r in found]
        contents += [r.content for r in found]
    dupes = [c for c, k in Counter(contents).items() if k > 1]
    assert not dupes, f"stored twice: {dupes[:5]}"
    assert Counter(stored) == Counter(acked)


WRITERS_A = [f"w{i % 4}{i}" for i in range(WRITERS)]


def test_sqlite_one_process(tmp_path: Path) -> None:
    with Engine.open(f"sqlite:///{tmp_path / 'd.db'}") as engine:
        acked = hammer(engine, WRITERS_A, READERS)
    with Engine.open(f"sqlite:///{tmp_path / 'd.db'}") as engine:
        assert_exactly_once(engine, acked)


CHILD_WRITERS = """
import sys, threading, time
sys.path.insert(0, {src!r})
sys.path.insert(0, {tests!r})
import test_durability as d
from contextwright import Engine
engine = Engine.open({db!r})
stop = threading.Event()
acked = [[] for _ in {names!r}]
threads = [threading.Thread(target=d.write_loop, args=(engine, n, stop, a))
           for n, a in zip({names!r}, acked)]
print("ready", flush=True)
for t in threads: t.start()
time.sleep({run_s!r})
stop.set()
for t in threads: t.join()
engine.close()
for a in acked:
    for i in a:
        print(i)
"""


def test_sqlite_two_processes(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'd.db'}"
    Engine.open(db).close()  # the schema exists before two processes race to create it
    child_names = [f"x{i % 4}{i}" for i in range(WRITERS // 2)]
    script = CHILD_WRITERS.format(
        src=SRC, tests=str(Path(__file__).parent), db=db, names=child_names, run_s=RUN_S
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    with Engine.open(db) as engine:
        mine = hammer(engine, WRITERS_A[: WRITERS // 2], READERS)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    theirs = out.split()
    assert theirs, "the other process wrote nothing"
    with Engine.open(db) as engine:
        assert_exactly_once(engine, mine + theirs)


@pytest.mark.postgres
def test_postgres(pg_url: str) -> None:
    with Engine.open(pg_url) as engine:
        acked = hammer(engine, WRITERS_A, READERS)
    with Engine.open(pg_url) as engine:
        assert_exactly_once(engine, acked)


CHILD_KILLED = """
import sys
sys.path.insert(0, {src!r})
from contextwright import Engine
engine = Engine.open({db!r})
n = 0
while True:
    if n % 5 == 4:
        got = engine.add_many(
            [{{"project": "k", "author": "w", "content": f"{trial} batch {{n}} {{i}}"}}
             for i in range(4)]
        )
        print(" ".join(r.id for r in got), flush=True)
    else:
        got = engine.add(project="k", author="w", content=f"{trial} note {{n}}", id=f"k{trial}-{{n}}")
        print(got.id, flush=True)
    n += 1
"""


def test_kill_9_loses_no_acknowledged_record(tmp_path: Path) -> None:
    db_path = tmp_path / "k.db"
    db = f"sqlite:///{db_path}"
    Engine.open(db).close()
    rng = random.Random(24)
    acked: list[str] = []
    for trial in range(KILL_TRIALS):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD_KILLED.format(src=SRC, db=db, trial=trial)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert child.stdout is not None
        first = child.stdout.readline()  # the child is writing: now kill it at a random moment
        assert first.endswith(b"\n"), "the writer died before its first write"
        time.sleep(rng.uniform(0.05, 1.0))
        os.kill(child.pid, signal.SIGKILL)
        rest = child.stdout.read()
        child.wait(timeout=30)
        assert child.returncode == -signal.SIGKILL
        # Only whole lines were acknowledged; a line cut by the kill was not.
        lines = (first + rest).split(b"\n")[:-1]
        acked += [i for line in lines for i in line.decode().split()]

        with sqlite3.connect(db_path) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        with Engine.open(db) as engine:
            # Read by id: a listing stops at its limit, and a fast writer passes 10,000 records.
            stored = {r.id for r in engine.store.get_many("k", acked)}
            missing = [i for i in acked if i not in stored]
            assert not missing, f"trial {trial}: {len(missing)} acknowledged records lost"
            every = engine.store.query(Query("k", None, limit=10**7))
            assert engine.store.count("k") == len(every) >= len(stored)
    assert len(acked) == len(set(acked))
