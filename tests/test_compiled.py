"""The mypyc build of the hot path (compiled.py, scripts/compile.py): used only when it matches
the sources, and the same windows either way."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from contextwright import compiled

SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")


def _package(tmp_path: Path, sources: dict[str, str]) -> Path:
    pkg = tmp_path / "contextwright"
    for rel, text in sources.items():
        path = pkg / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return pkg


def _manifest(build: Path, sources: dict[str, str], **over: object) -> None:
    build.mkdir(parents=True, exist_ok=True)
    modules = {}
    for rel, text in sources.items():
        name = "contextwright." + rel.removesuffix(".py").replace("/", ".")
        (build / (name + SUFFIX)).write_bytes(b"")
        modules[name] = {"file": name + SUFFIX, "sha256": hashlib.sha256(text.encode()).hexdigest()}
    (build / ("contextwright._native__mypyc" + SUFFIX)).write_bytes(b"")
    manifest = {
        "python": sys.implementation.cache_tag,
        "suffix": SUFFIX,
        "modules": modules,
        "library": {
            "name": "contextwright._native__mypyc",
            "file": "contextwright._native__mypyc" + SUFFIX,
        },
    }
    manifest.update(over)
    (build / "manifest.json").write_text(json.dumps(manifest))


SOURCES = {"scoring.py": "X = 1\n", "stores/_rows.py": "Y = 2\n"}


@pytest.fixture
def _not_pure(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks of a build in a temporary directory, whether or not this run is pure."""
    monkeypatch.delenv("CONTEXTWRIGHT_PURE", raising=False)


@pytest.mark.usefixtures("_not_pure")
def test_a_build_that_matches_the_sources_is_used(tmp_path: Path) -> None:
    pkg, build = _package(tmp_path, SOURCES), tmp_path / "build"
    _manifest(build, SOURCES)
    files, why = compiled.check(build, pkg)
    assert files is not None, why
    assert set(files) == {
        "contextwright.scoring",
        "contextwright.stores._rows",
        "contextwright._native__mypyc",
    }
    assert files["contextwright.stores._rows"] == build / ("contextwright.stores._rows" + SUFFIX)
    assert why == "2 modules compiled with mypyc"


@pytest.mark.usefixtures("_not_pure")
def test_an_edited_source_sends_everything_back_to_source(tmp_path: Path) -> None:
    pkg, build = _package(tmp_path, SOURCES), tmp_path / "build"
    _manifest(build, SOURCES)
    (pkg / "stores" / "_rows.py").write_text("Y = 3\n")
    files, why = compiled.check(build, pkg)
    assert files is None
    assert "contextwright.stores._rows changed since it was compiled" in why
    assert "make compile" in why


@pytest.mark.parametrize(
    ("over", "expect"),
    [
        ({"python": "cpython-39"}, "the build is for cpython-39"),
        ({"suffix": ".abi3.so"}, "the build is for"),
        ({"modules": {}}, "lists no modules"),
    ],
)
@pytest.mark.usefixtures("_not_pure")
def test_a_build_for_something_else_is_not_used(
    tmp_path: Path, over: dict[str, object], expect: str
) -> None:
    pkg, build = _package(tmp_path, SOURCES), tmp_path / "build"
    _manifest(build, SOURCES, **over)
    files, why = compiled.check(build, pkg)
    assert files is None and expect in why


@pytest.mark.usefixtures("_not_pure")
def test_no_build_a_broken_manifest_or_a_missing_file(tmp_path: Path) -> None:
    pkg, build = _package(tmp_path, SOURCES), tmp_path / "build"
    assert compiled.check(build, pkg) == (
        None,
        "no compiled build (make compile): running from source",
    )
    build.mkdir()
    (build / "manifest.json").write_text("{not json")
    files, why = compiled.check(build, pkg)
    assert files is None and why.startswith("unreadable build manifest")
    _manifest(build, SOURCES)
    (build / ("contextwright.scoring" + SUFFIX)).unlink()
    files, why = compiled.check(build, pkg)
    assert files is None and f"lacks contextwright.scoring{SUFFIX}" in why


def test_contextwright_pure_turns_the_build_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg, build = _package(tmp_path, SOURCES), tmp_path / "build"
    _manifest(build, SOURCES)
    monkeypatch.setenv("CONTEXTWRIGHT_PURE", "1")
    assert compiled.check(build, pkg) == (None, "CONTEXTWRIGHT_PURE is set: running from source")


PROBE = """
import json, sys, contextwright, contextwright.scoring as s, contextwright.stores._rows as r
from contextwright import Engine
e = Engine.open("sqlite:///" + sys.argv[1], persist_traces=False)
e.register_agent("p", "ann", "developer")
e.register_agent("p", "bob", "reviewer")
for i in range(40):
    e.add(id=f"r{i:03d}", project="p", author="ann" if i % 3 else "bob", session="s1" if i % 2 else "s2",
          kind="decision" if i % 9 == 0 else "message",
          content=f"step {i}: the login form posts to /api/session, retry {i % 4} @bob",
          created_at=1_750_000_000.0 + i)
a = e.assemble("p", "bob", "review the login form retry", budget=900, session="s1")
items = [(i["key"], i["decision"], i["score"], i["components"]) for i in a.trace.items]
print(json.dumps({"active": contextwright.compiled.ACTIVE, "why": contextwright.compiled.REASON,
                  "files": [s.__file__, r.__file__], "text": a.text, "items": items}))
"""


def _probe(tmp_path: Path, name: str, pure: bool) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "CONTEXTWRIGHT_PURE"}
    if pure:
        env["CONTEXTWRIGHT_PURE"] = "1"
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path / f"{name}.db")],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_the_same_window_and_trace_compiled_and_from_source(tmp_path: Path) -> None:
    """With CONTEXTWRIGHT_PURE the modules come from their .py files; without it from the build
    when it is current (`make test` compiles first) and from source when there is none. The
    window and every scored item are the same either way."""
    pure = _probe(tmp_path, "pure", pure=True)
    assert pure["active"] is False
    assert all(str(f).endswith(".py") for f in pure["files"])  # type: ignore[attr-defined]
    default = _probe(tmp_path, "default", pure=False)
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("CONTEXTWRIGHT_PURE", raising=False)
        files, _ = compiled.check()
    if files is not None:  # a current build: it is what runs
        assert default["active"] is True, default["why"]
        assert all(str(f).endswith(SUFFIX) for f in default["files"])  # type: ignore[attr-defined]
    else:
        assert default["active"] is False
        assert all(str(f).endswith(".py") for f in default["files"])  # type: ignore[attr-defined]
    assert default["text"] == pure["text"]
    assert default["items"] == pure["items"]
    assert "step" in str(pure["text"])


def test_this_process_runs_what_check_says() -> None:
    """`make test` runs the suite once compiled and once with CONTEXTWRIGHT_PURE: either way
    this process imported what `check` (under the same environment) says."""
    import contextwright.scoring as scoring

    files, why = compiled.check()
    assert compiled.ACTIVE is (files is not None)
    assert why == compiled.REASON
    assert scoring.__file__ is not None
    assert scoring.__file__.endswith(SUFFIX if files is not None else ".py")
    if os.environ.get("CONTEXTWRIGHT_PURE"):
        assert not compiled.ACTIVE and why.startswith("CONTEXTWRIGHT_PURE is set")


HAMMING_C = compiled.PACKAGE / "stores" / "_hamming.c"


@pytest.mark.usefixtures("_not_pure")
def test_a_kernel_is_used_only_while_its_source_matches(tmp_path: Path) -> None:
    """A C kernel (stores/_hamming.c) loads from the build when its source has the sha256 it was
    built from, whether or not the modules match; an edited source, a manifest without it, a
    missing library or CONTEXTWRIGHT_PURE leave the numpy code."""
    built = compiled.kernel("hamming")
    if built is None:
        pytest.skip("no current build of the kernels here (make compile)")
    text = HAMMING_C.read_text()
    pkg, build = _package(tmp_path, {"stores/_hamming.c": text}), tmp_path / "build"
    build.mkdir()
    (build / "_hamming.so").write_bytes(Path(built._name).read_bytes())
    entry = {"file": "_hamming.so", "source": "stores/_hamming.c"}
    digest = hashlib.sha256(text.encode()).hexdigest()
    (build / "manifest.json").write_text(
        json.dumps({"kernels": {"hamming": {**entry, "sha256": digest}}})
    )
    lib = compiled.kernel("hamming", build, pkg)
    assert lib is not None and hasattr(lib, "cw_hamming")
    assert compiled.kernel("cosine", build, pkg) is None  # not in the manifest
    (pkg / "stores" / "_hamming.c").write_text(text + "/* edited */\n")
    assert compiled.kernel("hamming", build, pkg) is None
    (pkg / "stores" / "_hamming.c").write_text(text)
    (build / "_hamming.so").unlink()
    assert compiled.kernel("hamming", build, pkg) is None
    # A kernel the compiler could not build is recorded without a file (scripts/compile.py).
    unbuilt = {"file": None, "source": "stores/_hamming.c", "sha256": digest}
    (build / "manifest.json").write_text(json.dumps({"kernels": {"hamming": unbuilt}}))
    assert compiled.kernel("hamming", build, pkg) is None
    (build / "manifest.json").write_text("{not json")
    assert compiled.kernel("hamming", build, pkg) is None


def test_contextwright_pure_turns_the_kernels_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTWRIGHT_PURE", "1")
    assert compiled.kernel("hamming") is None
    assert compiled.kernel("fts") is None


def test_a_current_build_holds_every_kernel() -> None:
    """`make test` compiles first: where the modules come from the build, so do the kernels."""
    if compiled.ACTIVE:
        from contextwright.stores import _vectors, sqlite_bm25

        assert compiled.kernel("hamming") is not None
        assert _vectors._HAMMING is not None
        assert compiled.kernel("fts") is not None
        assert sqlite_bm25.available()
