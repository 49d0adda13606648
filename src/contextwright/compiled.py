"""The mypyc build of the hot path, used when it matches the sources (docs/compiled.md).

`scripts/compile.py` (`make compile`) compiles the modules every assemble call spends its Python
time in (scoring, packing, rendering, sources, ...) into `_compiled/`, with a manifest holding the
sha256 of each source it compiled. When `contextwright` is imported, `install()` checks that
manifest: if it was built for this Python and every source still matches, a finder in front of
the import system loads those modules from the build; otherwise (no build, an edited source,
another Python, or CONTEXTWRIGHT_PURE=1 in the environment) everything is imported from source.
Both behave the same; the build is faster (docs/benchmarks.md). `ACTIVE` and `REASON` say which
one this process runs.

The build also holds C kernels, plain shared libraries that a module loads through ctypes
(`kernel`): each is used when its source still has the sha256 it was built from, whether or not
the modules are, and never under CONTEXTWRIGHT_PURE; without it, the module's own fallback runs
(numpy's loop for the Hamming distances, SQLite's bm25() for the full-text ranking).
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import sysconfig
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

PACKAGE = Path(__file__).resolve().parent
BUILD = PACKAGE / "_compiled"

ACTIVE = False
REASON = "not installed yet"


class _BuildFinder(importlib.abc.MetaPathFinder):
    """Finds the compiled modules, by full name, in the build directory."""

    def __init__(self, files: dict[str, Path]) -> None:
        self.files = files

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        file = self.files.get(fullname)
        if file is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, str(file))
        return importlib.util.spec_from_file_location(fullname, file, loader=loader)


def check(build: Path = BUILD, package: Path = PACKAGE) -> tuple[dict[str, Path] | None, str]:
    """(the compiled modules' files by module name, or None; why) for the build in `build`."""
    if os.environ.get("CONTEXTWRIGHT_PURE"):
        return None, "CONTEXTWRIGHT_PURE is set: running from source"
    return matches(build, package)


def matches(build: Path, package: Path) -> tuple[dict[str, Path] | None, str]:
    """`check` without the environment: does the build in `build` match the sources in `package`
    and this Python (scripts/compile.py asks this to know whether to compile again)?"""
    try:
        manifest = json.loads((build / "manifest.json").read_text())
    except FileNotFoundError:
        return None, "no compiled build (make compile): running from source"
    except (OSError, ValueError) as exc:
        return None, f"unreadable build manifest ({exc}): running from source"
    if manifest.get("python") != sys.implementation.cache_tag or manifest.get(
        "suffix"
    ) != sysconfig.get_config_var("EXT_SUFFIX"):
        return None, f"the build is for {manifest.get('python')}: running from source"
    files: dict[str, Path] = {}
    for name, entry in manifest.get("modules", {}).items():
        source = package.joinpath(*name.split(".")[1:]).with_suffix(".py")
        try:
            digest = hashlib.sha256(source.read_bytes()).hexdigest()
        except OSError:
            return None, f"{source.name} is missing: running from source"
        if digest != entry.get("sha256"):
            return None, f"{name} changed since it was compiled (make compile): running from source"
        files[name] = build / entry["file"]
    library = manifest.get("library", {})
    if not files or "name" not in library:
        return None, "the build manifest lists no modules: running from source"
    files[library["name"]] = build / library["file"]
    missing = [str(f.name) for f in files.values() if not f.is_file()]
    if missing:
        return None, f"the build lacks {', '.join(missing)}: running from source"
    return files, f"{len(files) - 1} modules compiled with mypyc"


def kernel(name: str, build: Path = BUILD, package: Path = PACKAGE) -> ctypes.CDLL | None:
    """The C kernel `name` from the build (scripts/compile.py's KERNELS), or None: no build, the
    kernel's source changed since, the library does not load here, or CONTEXTWRIGHT_PURE."""
    if os.environ.get("CONTEXTWRIGHT_PURE"):
        return None
    try:
        entry = json.loads((build / "manifest.json").read_text())["kernels"][name]
        source = package.joinpath(*entry["source"].split("/"))
        library = build / entry["file"]
        if hashlib.sha256(source.read_bytes()).hexdigest() != entry["sha256"]:
            return None
        return ctypes.CDLL(str(library)) if library.is_file() else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def install() -> None:
    """Load the compiled modules from now on, if the build matches the sources (`check`) and
    its shared library loads. Runs when this module is imported, which `contextwright` does
    before it imports anything else."""
    global ACTIVE, REASON
    if ACTIVE:
        return
    files, REASON = check()
    if files is None:
        return
    finder = _BuildFinder(files)
    sys.meta_path.insert(0, finder)
    library = next(name for name in files if name.endswith("__mypyc"))
    try:
        importlib.import_module(library)
    except ImportError as exc:  # built for another machine, say: the sources still work
        sys.meta_path.remove(finder)
        REASON = f"the compiled build does not load ({exc}): running from source"
        return
    ACTIVE = True


if __package__ == "contextwright":  # not when scripts/compile.py loads this file on its own
    install()
