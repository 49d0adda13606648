"""Shared fixtures: every store-backed test runs against real stores (SQLite file, memory, and
PostgreSQL where the `pg_url` fixture is available), with a temporary home and no network."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from contextwright import Engine
from contextwright.assembly import pipeline
from contextwright.ports import Store
from contextwright.stores import open_store

pytest_plugins = ["pg"]

STORE_KINDS = ["memory", "sqlite", "postgres"]


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where derived models (the int8 query build of MiniLM) are kept: one per test run."""
    return tmp_path_factory.mktemp("model-cache")


@pytest.fixture(autouse=True)
def _hermetic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_cache: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    for key in list(os.environ):
        if key.startswith("CONTEXTWRIGHT_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("CONTEXTWRIGHT_CACHE", str(model_cache))
    # Engine.open, the server and MCP turn vectors on by default ("auto"); loading MiniLM in
    # every test would take minutes on two cores. Tests of the default delete this.
    monkeypatch.setenv("CONTEXTWRIGHT_EMBEDDER", "none")
    # Where sources' prepared work runs must not depend on what else the machine runs: a core
    # is spare, as on a quiet machine (tests/test_hot_path_io.py tests the busy case).
    monkeypatch.setattr(pipeline, "machine_busy", lambda: False)


def make_store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Store:
    if kind == "memory":
        return open_store("memory://")
    if kind == "sqlite":
        return open_store(f"sqlite:///{tmp_path / 'test.db'}")
    if kind == "postgres":
        url = request.getfixturevalue("pg_url")
        return open_store(url)
    raise ValueError(kind)


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s = make_store(request.param, tmp_path, request)
    yield s
    s.close()


@pytest.fixture
def engine(store: Store) -> Iterator[Engine]:
    e = Engine(store)
    yield e
    e.close()


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[Engine]:
    e = Engine.open(f"sqlite:///{tmp_path / 'engine.db'}")
    yield e
    e.close()
