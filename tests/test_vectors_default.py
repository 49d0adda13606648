"""Vectors on by default (`embedder="auto"`): Engine.open, the server and MCP load the embedder in
the background; until it is ready every call runs on full text and says so."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import contextwright.embedders as embedders
from contextwright import Engine, ValidationError
from contextwright.embedders import HashEmbedder, resolve_name
from contextwright.ports import Embedder
from contextwright.settings import Settings
from contextwright.stores.sqlite import SQLiteStore

NOTES = [
    ("ann", "the cache lives in redis on port 6379"),
    ("bob", "we deploy on fridays after lunch"),
]


def _add(e: Engine) -> None:
    for author, text in NOTES:
        e.add(project="p", author=author, kind="note", content=text)


@pytest.fixture
def slow_minilm(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """`minilm` loads until the returned event is set (then it is a HashEmbedder)."""
    release = threading.Event()

    def load(name: str = "minilm") -> Embedder | None:
        assert name == "minilm"
        release.wait(30)
        return HashEmbedder()

    monkeypatch.setattr(embedders, "load_embedder", load)
    monkeypatch.setattr("contextwright.embedders.missing_reason", lambda name: None)
    return release


def test_calls_run_on_full_text_while_the_model_loads_and_say_so(
    tmp_path: Path, slow_minilm: threading.Event
) -> None:
    with Engine(SQLiteStore(str(tmp_path / "v.db")), embedder="minilm") as e:
        _add(e)
        assert e.vectors.loading and not e.vectors.on
        loading = e.assemble("p", "ann", "where is the key-value store?", 2000)
        assert any("still loading" in w and "full text alone" in w for w in loading.warnings)
        assert "still loading" in loading.text  # the window's warnings section says it too
        assert loading.trace.notes["vectors"]["state"] == "loading"
        assert "vector" not in {s["name"] for s in loading.trace.sources}
        slow_minilm.set()
        assert e.wait_for_embeddings(timeout=30)  # the load, then the records added meanwhile
        ready = e.assemble("p", "ann", "where is the key-value store?", 2000)
    assert not any("loading" in w for w in ready.warnings)
    assert ready.trace.notes["vectors"]["state"] == "on"
    assert "vector" in {s["name"] for s in ready.trace.sources}


def test_close_does_not_wait_for_a_model_still_loading(
    tmp_path: Path, slow_minilm: threading.Event
) -> None:
    e = Engine(SQLiteStore(str(tmp_path / "v.db")), embedder="minilm")
    e.close()
    slow_minilm.set()
    assert not e.wait_for_embeddings(timeout=30) or e.vectors.worker is None
    assert e.vectors.worker is None  # the model arrived after close: nothing started


def test_engine_open_defaults_to_minilm_where_the_extra_is_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CONTEXTWRIGHT_EMBEDDER")
    assert resolve_name("auto") == "minilm"  # the test environment has the vectors extra
    with Engine.open(f"sqlite:///{tmp_path / 'v.db'}") as e:
        assert e.vectors.configured == "minilm"
        _add(e)
        assert e.wait_for_embeddings(timeout=300)
        result = e.assemble("p", "ann", "where is the key-value store?", 2000)
    assert result.trace.notes["vectors"]["embedder"] == "minilm-l6-int8"
    assert result.warnings == []


def test_none_turns_the_default_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTWRIGHT_EMBEDDER", "none")
    with Engine.open(f"sqlite:///{tmp_path / 'a.db'}") as e:
        assert e.vectors.state == "off" and e.vectors.configured is None
    monkeypatch.delenv("CONTEXTWRIGHT_EMBEDDER")
    with Engine.open(f"sqlite:///{tmp_path / 'b.db'}", embedder=None) as e:
        _add(e)
        result = e.assemble("p", "ann", "redis", 2000)
        assert e.vectors.state == "off" and result.warnings == []


def test_auto_without_the_extra_is_full_text_with_a_reason_not_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CONTEXTWRIGHT_EMBEDDER")
    monkeypatch.setattr(embedders, "vectors_installed", lambda: False)
    with Engine.open(f"sqlite:///{tmp_path / 'v.db'}") as e:
        _add(e)
        result = e.assemble("p", "ann", "redis", 2000)
    assert result.warnings == []
    assert "contextwright[vectors]" in result.trace.notes["vectors"]["reason"]


def test_a_name_no_embedder_has_raises_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValidationError, match="embedder"):
        Engine.open("memory://", embedder="word2vec")
    monkeypatch.setenv("CONTEXTWRIGHT_EMBEDDER", "word2vec")
    with pytest.raises(ValidationError, match="word2vec"):
        Engine.open("memory://")


def test_the_server_and_mcp_default_to_auto_one_shot_commands_do_not_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextwright.cli import State

    assert Settings().embedder == "auto"
    monkeypatch.setenv("CONTEXTWRIGHT_EMBEDDER", "hash")  # what "auto" stands for here
    state = State(Settings(db=f"sqlite:///{tmp_path / 'v.db'}"))
    try:
        assert state.engine.vectors.state == "off"  # `contextwright add`: exits at once
    finally:
        state.close()
    state = State(Settings(db=f"sqlite:///{tmp_path / 'v.db'}"))
    state.serving = True  # `contextwright serve` / `mcp`
    try:
        assert state.engine.vectors.state == "on"
        assert state.engine.vectors.configured == "hash"
    finally:
        state.close()
