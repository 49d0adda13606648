"""Many server processes on one database (`contextwright serve`, docs/scaling.md): two real server
processes on one SQLite file or one PostgreSQL database, driven at once. Nothing written through
either is lost or stored twice, and a record added through one is in the next window assembled
through the other: every per-process cache (source results, known agents, word counts, records)
follows the store version that both processes see."""

from __future__ import annotations

import gc
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from contextwright.engine import Engine
from contextwright.errors import ValidationError
from contextwright.heap import THRESHOLDS
from contextwright.server.workers import check_workers, default_workers, pool_url, to_env
from contextwright.settings import Settings
from contextwright.stores.postgres import default_pool_max
from servers import free_port, wait_http

P = "team"
BUDGET = 4000
SRC = str(Path(__file__).resolve().parents[1] / "src")


def _serve(db: str, workers: int = 1, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "contextwright.cli", "serve", "--db", db, "--port", str(port),
         "--workers", str(workers), "--log-level", "error", *args],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + "/health", timeout=60)
    except Exception:
        proc.kill()
        raise AssertionError(proc.communicate(timeout=10)[1].decode()) from None
    return proc, base


@pytest.fixture(params=["sqlite", "postgres"])
def two_servers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[str]]:
    db = (
        f"sqlite:///{tmp_path / 'shared.db'}"
        if request.param == "sqlite"
        else request.getfixturevalue("pg_url")
    )
    with ExitStack() as stack:
        bases = []
        for _ in range(2):
            proc, base = _serve(db)
            stack.callback(_stop, proc)
            bases.append(base)
        yield bases


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _window_ids(client: httpx.Client, agent: str, task: str) -> set[str]:
    r = client.post(f"/v1/projects/{P}/assemble", json={"agent": agent, "task": task,
                                                       "budget": BUDGET})  # fmt: skip
    assert r.status_code == 200, r.text
    return {i for items in r.json()["sections"].values() for item in items
            for i in item["record_ids"]}  # fmt: skip


def test_two_workers_on_one_database(two_servers: list[str]) -> None:
    clients = [httpx.Client(base_url=b, timeout=60) for b in two_servers]
    try:
        a, b = clients
        for c in clients:
            c.post(f"/v1/projects/{P}/records", json={"author": "reader", "content": "hi"})
        posted: list[str] = []
        failures: list[str] = []

        def drive(n: int) -> None:
            # Each thread alternates workers: adds (each id twice, once through each worker, at
            # once with the other threads) and assembles in between.
            with ExitStack() as stack:
                mine = [stack.enter_context(httpx.Client(base_url=x, timeout=60))
                        for x in two_servers]  # fmt: skip
                for k in range(12):
                    rid = f"t{n}-{k}"
                    body = {"id": rid, "author": f"w{n}", "content": f"step {k} of thread {n}"}
                    for c in (mine[k % 2], mine[(k + 1) % 2]):
                        r = c.post(f"/v1/projects/{P}/records", json=body)
                        if r.status_code != 201:
                            failures.append(r.text)
                    posted.append(rid)
                    if k % 3 == 0:
                        r = mine[k % 2].post(
                            f"/v1/projects/{P}/assemble",
                            json={"agent": f"w{n}", "task": "step", "budget": BUDGET},
                        )
                        if r.status_code != 200:
                            failures.append(r.text)

        threads = [threading.Thread(target=drive, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert failures == []
        for c in clients:
            listed = c.get(f"/v1/projects/{P}/records", params={"limit": 1000}).json()
            ids = [r["id"] for r in listed["records"] if r["author"] != "reader"]
            assert sorted(ids) == sorted(posted)  # each once: none lost, none twice

        # A record added through one worker is in the next window assembled through the other,
        # although the other has just assembled the same request (its caches are warm), and its
        # author is new to the other worker (the known-agents cache).
        for k, (w, r) in enumerate([(a, b), (b, a), (a, b), (b, a)]):
            word = f"zanzibarquux{k}"
            assert f"fresh-{k}" not in _window_ids(r, "reader", f"find the {word}")
            added = w.post(f"/v1/projects/{P}/records", json={
                "id": f"fresh-{k}", "author": f"new{k}", "content": f"the {word} is here"})  # fmt: skip
            assert added.status_code == 201, added.text
            assert f"fresh-{k}" in _window_ids(r, "reader", f"find the {word}")
            assert f"fresh-{k}" in _window_ids(r, f"new{k}", f"find the {word}")
    finally:
        for c in clients:
            c.close()


def test_serve_with_two_workers_answers_on_one_port(tmp_path: Path) -> None:
    proc, base = _serve(f"sqlite:///{tmp_path / 'w.db'}", workers=2)
    try:
        with httpx.Client(base_url=base, timeout=30) as c:
            for k in range(6):
                r = c.post(f"/v1/projects/{P}/records", json={"author": "ann", "content": f"n{k}"})
                assert r.status_code == 201, r.text
            listed = c.get(f"/v1/projects/{P}/records", params={"limit": 100}).json()
            assert len(listed["records"]) == 6
    finally:
        _stop(proc)


@pytest.mark.parametrize(
    ("workers", "sig"), [(1, signal.SIGTERM), (1, signal.SIGINT), (2, signal.SIGTERM)]
)
def test_serve_closes_its_engine_when_stopped(
    tmp_path: Path, workers: int, sig: signal.Signals
) -> None:
    # Stopped by a signal, every process closes its engine: the queued traces are written and
    # SQLite checkpoints the WAL into the file, so that no -wal file is left beside it.
    path = tmp_path / "s.db"
    proc, base = _serve(f"sqlite:///{path}", workers)
    try:
        with httpx.Client(base_url=base, timeout=30) as c:
            for k in range(3):
                r = c.post(f"/v1/projects/{P}/records", json={"author": "ann", "content": f"n{k}"})
                assert r.status_code == 201, r.text
            r = c.post(f"/v1/projects/{P}/assemble", json={"agent": "ann", "task": "n1"})
            assert r.status_code == 200, r.text
        proc.send_signal(sig)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not (tmp_path / "s.db-wal").exists()
    assert not (tmp_path / "s.traces.db-wal").exists()
    db = sqlite3.connect(path)
    try:
        assert db.execute("SELECT count(*) FROM records").fetchone() == (3,)
    finally:
        db.close()
    with Engine.open(f"sqlite:///{path}", embedder=None) as engine:
        assert len(engine.traces(P)) == 1


def test_serve_takes_the_assemble_slots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from contextwright.cli import State
    from contextwright.server.workers import app_from_env

    db = f"sqlite:///{tmp_path / 'g.db'}"
    state = State(Settings(db=db, assemble_slots=3))
    try:
        assert state.engine.gate.limit == 3
    finally:
        state.close()
    for key, value in to_env(Settings(db=db, assemble_slots=0)).items():
        monkeypatch.setenv(key, value)
    thresholds = gc.get_threshold()
    engine = app_from_env().state.engine
    try:
        assert engine.gate.limit == 0
    finally:
        engine.close()
        gc.unfreeze()
        gc.set_threshold(*thresholds)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValidationError, match="assemble_slots"):
            Settings(assemble_slots=bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="CONTEXTWRIGHT_ASSEMBLE_SLOTS"):
        Settings.from_env(environ={"CONTEXTWRIGHT_ASSEMBLE_SLOTS": "four"})
    with pytest.raises(ValidationError, match="assemble_slots"):
        Settings.from_env(environ={"CONTEXTWRIGHT_ASSEMBLE_SLOTS": "-2"})
    proc = subprocess.run(
        [sys.executable, "-m", "contextwright.cli", "serve", "--assemble-slots", "-1"],
        env={**os.environ, "PYTHONPATH": SRC}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2 and "--assemble-slots" in proc.stderr


def test_workers_share_the_machines_assemble_slots(tmp_path: Path) -> None:
    from contextwright.gate import default_limit
    from contextwright.server.workers import worker_slots
    from contextwright.stores import open_store

    store = open_store(f"sqlite:///{tmp_path / 'slots.db'}")
    try:
        whole = default_limit(store)
        assert worker_slots(store, 1) == whole
        assert worker_slots(store, 2) == max(1, whole // 2)
        assert worker_slots(store, whole) == 1
        assert worker_slots(store, 10 * whole) == 1  # never 0, which would mean no limit
    finally:
        store.close()


def test_worker_settings_round_trip_through_the_environment() -> None:
    settings = Settings(
        db="sqlite:///x.db", port=9001, log_level="info", rules_dir="/r", assemble_slots=2,
        api_keys={"key-acme-1": ["acme"], "key-alice": {"project": "p", "agents": ["alice"]}},
    )  # fmt: skip
    assert Settings.from_env(environ=to_env(settings)) == settings
    assert Settings.from_env(environ=to_env(Settings())) == Settings()
    for embedder in ("none", "hash", "auto"):  # and the debug block: a worker renders as one
        changed = settings.with_(embedder=embedder, debug_context=True)
        assert Settings.from_env(environ=to_env(changed)) == changed


@pytest.mark.parametrize(("embedder", "state"), [("none", "off"), ("hash", "on")])
def test_a_worker_opens_its_engine_with_the_parents_embedder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder: str, state: str
) -> None:
    from contextwright.server.workers import app_from_env

    settings = Settings(db=f"sqlite:///{tmp_path / 'w.db'}", embedder=embedder)
    for key, value in to_env(settings).items():
        monkeypatch.setenv(key, value)
    thresholds = gc.get_threshold()
    engine = app_from_env().state.engine
    try:
        assert engine.vectors.state == state
        assert gc.get_threshold() == THRESHOLDS  # settled as `serve` settles its one process
    finally:
        engine.close()
        gc.unfreeze()  # app_from_env froze this process's heap, as a worker's
        gc.set_threshold(*thresholds)


def test_workers_defaults_and_limits() -> None:
    assert default_workers(cpus=2) == 2 and default_workers(cpus=0) == 1
    with pytest.raises(Exception, match="workers"):
        check_workers(2, "memory://")
    check_workers(1, "memory://")
    assert default_pool_max(cpus=2) == 14 and default_pool_max(cpus=8) == 38
    assert pool_url("postgresql://h/db", 4) == f"postgresql://h/db?pool_max={default_pool_max()}"
    assert pool_url("postgresql://h/db?sslmode=require", 30) == (
        "postgresql://h/db?sslmode=require&pool_max=3"
    )
    assert pool_url("postgresql://h/db?pool_max=20", 30) == "postgresql://h/db?pool_max=20"
    assert pool_url("sqlite:///x.db", 4) == "sqlite:///x.db"


def _listening(port: int) -> int:
    """How many sockets listen on 127.0.0.1:`port` (Linux's table of TCP sockets)."""
    with open("/proc/net/tcp") as table:
        rows = [line.split() for line in table.readlines()[1:]]
    return sum(1 for row in rows if row[1] == f"0100007F:{port:04X}" and row[3] == "0A")


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="reads Linux's socket table")
def test_each_worker_listens_on_a_socket_of_its_own(tmp_path: Path) -> None:
    """On one shared listening socket the first worker to wake took every waiting connection
    (16 keep-alive clients: 16/0 over two workers); with a socket each on the port
    (SO_REUSEPORT) the kernel spreads the connections over them."""
    proc, base = _serve(f"sqlite:///{tmp_path / 'p.db'}", workers=2)
    try:
        port = int(base.rsplit(":", 1)[1])
        deadline = time.monotonic() + 60  # one worker answers /health before the other listens
        while _listening(port) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _listening(port) == 2
        clients = [httpx.Client(base_url=base) for _ in range(16)]
        for n, client in enumerate(clients):
            answer = client.post(
                f"/v1/projects/{P}/records", json={"author": "ann", "content": f"hello {n}"}
            )
            assert answer.status_code == 201
        for client in clients:
            client.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


def test_a_worker_gets_a_socket_of_its_own_on_the_parents_port() -> None:
    import pickle
    import socket
    from multiprocessing.reduction import ForkingPickler

    from contextwright.server.workers import PortShare

    parent = PortShare.bind_to("127.0.0.1", 0)
    port = parent.getsockname()[1]
    # As uvicorn hands the socket to each worker process it spawns.
    workers = [pickle.loads(bytes(ForkingPickler.dumps(parent))) for _ in range(2)]
    try:
        for sock in workers:
            assert type(sock) is socket.socket and sock.getsockname()[1] == port
            assert sock.fileno() != parent.fileno()
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT) == 1
            sock.listen()
        client = socket.create_connection(("127.0.0.1", port), timeout=10)
        client.close()
    finally:
        for sock in (parent, *workers):
            sock.close()


def test_workers_never_share_a_port_with_another_server(tmp_path: Path) -> None:
    """SO_REUSEPORT would let a second server of the same user listen beside a first one, each
    answering some connections: the port is refused when anything listens on it."""
    import socket

    from contextwright.server.workers import PortShare

    other = socket.socket()
    other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    other.bind(("127.0.0.1", 0))
    other.listen()
    port = other.getsockname()[1]
    try:
        with pytest.raises(OSError):
            PortShare.bind_to("127.0.0.1", port).close()
        proc = subprocess.run(
            [sys.executable, "-m", "contextwright.cli", "serve", "--db",
             f"sqlite:///{tmp_path / 'x.db'}", "--port", str(port), "--workers", "2"],
            env={**os.environ, "PYTHONPATH": SRC}, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        other.close()
    assert proc.returncode == 1 and f"cannot listen on 127.0.0.1:{port}" in proc.stderr
