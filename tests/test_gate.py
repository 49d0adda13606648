"""The assemble gate: at most `limit` calls of a process run at once, the others wait and are
admitted in the order they came; a call inside an admitted one on the same thread is not counted."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from contextwright import Engine, ValidationError
from contextwright.gate import CallGate, default_limit
from contextwright.stores.memory import MemoryStore


def _wait_until(predicate: object, what: str) -> None:
    for _ in range(2000):
        if predicate():  # type: ignore[operator]
            return
        threading.Event().wait(0.005)
    raise AssertionError(f"never happened: {what}")


def test_calls_past_the_limit_wait_and_are_admitted_first_come_first_served() -> None:
    gate = CallGate(2)
    done = [threading.Event() for _ in range(6)]
    running: set[int] = set()
    admitted: list[int] = []
    peak = [0]
    lock = threading.Lock()

    def call(i: int) -> int:
        with lock:
            admitted.append(i)
            running.add(i)
            peak[0] = max(peak[0], len(running))
        done[i].wait()
        with lock:
            running.discard(i)
        return i

    results: dict[int, int] = {}
    threads = []
    for i in range(6):
        t = threading.Thread(target=lambda i=i: results.__setitem__(i, gate.run(call, i)))
        t.start()
        threads.append(t)
        # Each thread is running or queued before the next one starts: arrival order is i.
        _wait_until(lambda i=i: len(admitted) + len(gate._queue) == i + 1, f"call {i} arrived")
    assert admitted == [0, 1] and len(gate._queue) == 4
    for i in range(4):  # each call that ends hands its slot to the first in the queue
        done[i].set()
        _wait_until(lambda i=i: len(admitted) == i + 3, f"call {i + 2} admitted")
        assert admitted == list(range(i + 3))
    done[4].set()
    done[5].set()
    for t in threads:
        t.join()
    assert peak[0] == 2 and results == {i: i for i in range(6)}


def test_each_admitted_call_reports_how_long_it_waited_for_its_slot() -> None:
    gate = CallGate(1)
    waits: list[float] = []
    gate.on_wait = waits.append
    inside, leave = threading.Event(), threading.Event()

    def first() -> None:
        inside.set()
        leave.wait()

    holder = threading.Thread(target=gate.run, args=(first,))
    holder.start()
    inside.wait()
    waiter = threading.Thread(target=gate.run, args=(lambda: None,))
    waiter.start()
    _wait_until(lambda: len(gate._queue) == 1, "the second call queued")
    threading.Event().wait(0.02)  # the second call has waited at least this long
    leave.set()
    holder.join()
    waiter.join()
    assert waits[0] == 0.0 and waits[1] >= 0.02  # a slot was free, then none was
    gate.run(lambda: gate.run(lambda: None))  # a nested call is not admitted again
    assert len(waits) == 3
    CallGate(0).run(lambda: None)  # no limit: no slot to wait for


def test_a_nested_call_on_the_same_thread_is_not_counted_again() -> None:
    gate = CallGate(1)
    assert gate.run(lambda: gate.run(lambda: gate.run(lambda: "inner"))) == "inner"
    assert gate.run(lambda: "after") == "after"  # the slot was given back


def test_an_error_gives_the_slot_back() -> None:
    gate = CallGate(1)
    with pytest.raises(ZeroDivisionError):
        gate.run(lambda: 1 / 0)
    assert gate.run(lambda: "next") == "next"


def test_the_default_is_one_call_per_core_here_and_more_on_a_database_server() -> None:
    assert default_limit(MemoryStore(), cpus=2) == 2
    assert default_limit(MemoryStore(), cpus=1) == 2  # one call's reads beside another's Python
    assert default_limit(object(), cpus=2) == 8  # a store whose calls wait for a server


def test_engine_assembles_through_the_gate_and_checks_its_size(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as err:
        Engine(MemoryStore(), assemble_slots=-1)
    assert err.value.field == "assemble_slots"
    engine = Engine.open(f"sqlite:///{tmp_path / 'g.db'}", embedder=None, assemble_slots=1)
    engine.add(project="p", author="ann", content="the cache lives in redis")
    results: list[str] = []
    threads = [
        threading.Thread(
            target=lambda: results.append(engine.assemble("p", "ann", "redis", 2000).text)
        )
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and all("redis" in r for r in results)
    assert engine.gate.limit == 1
    engine.close()


def test_a_failing_wait_report_gives_its_slot_back() -> None:
    gate = CallGate(1)

    def broken(seconds: float) -> None:
        raise RuntimeError("metrics down")

    gate.on_wait = broken
    with pytest.raises(RuntimeError):
        gate.run(lambda: None)
    gate.on_wait = None
    done = threading.Event()
    worker = threading.Thread(target=lambda: gate.run(done.set))
    worker.start()
    worker.join(timeout=5)
    assert done.is_set()  # the one slot was given back: the next call ran
