"""Compile contextwright's hot path with mypyc (`make compile`; docs/compiled.md).

The modules in MODULES are compiled into `src/contextwright/_compiled/`, one extension per module
and one shared library, with a manifest that records the sha256 of every source compiled. At
import, `contextwright.compiled` loads them only if every source still matches; otherwise the
whole package runs from source. Run again after editing a compiled module: it does nothing when
the build is current (`--force` compiles anyway).

Needs mypy (the `test` extra) and a C compiler; without them it says so and exits with 1, and
everything still runs from source.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "contextwright"
OUT = PACKAGE / "_compiled"
BUILD = ROOT / "build" / "mypyc"
# The modules every assemble call spends its Python time in. Those that check a caller's values
# (engine.py, budget.py, cache.py, models.py) stay interpreted: a compiled function checks its
# arguments' declared types itself, so a wrong type would be a TypeError (or, for a bool given as
# a float, no error) instead of a ValidationError that names the field.
MODULES = [
    "actions",
    "assembly",
    "candidates",
    "chains",
    "kv",
    "locality",
    "packing",
    "pipeline",
    "records",
    "render",
    "roles",
    "scoring",
    "selection",
    "sources",
    "stores/_rows",
    "tokens",
]
# C kernels (docs/compiled.md): plain shared libraries that a module loads through ctypes.
KERNELS = {"hamming": "stores/_hamming.c", "fts": "stores/_fts.c"}
GROUP = "contextwright._native"  # the shared library is the module `contextwright._native__mypyc`


def module_name(rel: str) -> str:
    return "contextwright." + rel.replace("/", ".")


def source_hashes() -> dict[str, str]:
    return {
        module_name(rel): hashlib.sha256((PACKAGE / f"{rel}.py").read_bytes()).hexdigest()
        for rel in MODULES
    }


def kernel_hashes() -> dict[str, str]:
    return {
        name: hashlib.sha256((PACKAGE / source).read_bytes()).hexdigest()
        for name, source in KERNELS.items()
    }


def current() -> bool:
    """Is the build in OUT the one these sources and this Python would give? The check that
    `import contextwright` makes (contextwright/compiled.py, loaded on its own: importing the
    package would load the build), and the build must hold every module in MODULES."""
    spec = importlib.util.spec_from_file_location("_cw_compiled", PACKAGE / "compiled.py")
    assert spec is not None and spec.loader is not None
    loader = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loader)
    files, _ = loader.matches(OUT, PACKAGE)
    if files is None or not set(source_hashes()) <= set(files):
        return False
    try:
        kernels = json.loads((OUT / "manifest.json").read_text()).get("kernels", {})
    except (OSError, ValueError):
        return False
    built = {name: entry.get("sha256") for name, entry in kernels.items()}
    return all(built.get(name) == digest for name, digest in kernel_hashes().items())


def build_kernel(source: Path, target: Path) -> None:
    """One C file as a shared library, with the compiler and flags this Python was built with."""
    cc = shlex.split(str(sysconfig.get_config_var("CC") or "cc"))
    command = [*cc, "-O3", "-fPIC", "-shared", str(source), "-o", str(target), "-lm"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr.strip()}")


def build() -> None:
    from mypyc.build import mypycify
    from setuptools import Distribution

    hashes = source_hashes()  # of the sources as compiled, read before mypyc reads them
    kernel_digests = kernel_hashes()
    BUILD.mkdir(parents=True, exist_ok=True)
    os.chdir(ROOT)  # mypyc reads pyproject.toml's [tool.mypy] from here
    extensions = mypycify(
        [f"src/contextwright/{rel}.py" for rel in MODULES],
        opt_level="3",
        group_name=GROUP,
        target_dir=str(BUILD / "c"),
    )
    dist = Distribution({"name": "contextwright-compiled", "ext_modules": extensions})
    dist.verbose = False  # one line per compiler call is too much for `make test`
    cmd = dist.get_command_obj("build_ext")
    cmd.build_lib = str(BUILD / "lib")
    cmd.build_temp = str(BUILD / "temp")
    cmd.parallel = os.cpu_count() or 1
    dist.run_command("build_ext")

    suffix = str(sysconfig.get_config_var("EXT_SUFFIX"))
    staging = OUT.with_name("_compiled.new")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    lib = BUILD / "lib"

    def take(name: str) -> str:
        built = lib / (name.replace(".", "/") + suffix)
        shutil.copy2(built, staging / (name + suffix))
        return name + suffix

    modules = {m: {"file": take(m), "sha256": hashes[m]} for m in hashes}
    library = {"name": f"{GROUP}__mypyc", "file": take(f"{GROUP}__mypyc")}
    kernels: dict[str, dict[str, str | None]] = {}
    for name, source in KERNELS.items():
        file: str | None = f"_{name}.so"
        try:
            build_kernel(PACKAGE / source, staging / str(file))
        except (OSError, RuntimeError) as exc:
            # The modules are built; the module that calls this kernel runs its own fallback
            # (numpy's loop, or SQLite's bm25()). The failure is recorded, so that the build
            # counts as current until the source changes.
            print(f"C kernel {name} not built ({exc}); its fallback runs instead", file=sys.stderr)
            file = None
        kernels[name] = {"file": file, "source": source, "sha256": kernel_digests[name]}
    manifest = {
        "python": sys.implementation.cache_tag,
        "suffix": suffix,
        "modules": modules,
        "library": library,
        "kernels": kernels,
    }
    (staging / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    shutil.rmtree(OUT, ignore_errors=True)
    staging.rename(OUT)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--force", action="store_true", help="compile even if the build is current")
    parser.add_argument(
        "--clean", action="store_true", help="remove the build: everything runs from source"
    )
    args = parser.parse_args(argv)
    if args.clean:
        shutil.rmtree(OUT, ignore_errors=True)
        print(f"removed {OUT.relative_to(ROOT)}: contextwright runs from source")
        return 0
    if not args.force and current():
        print(
            f"{OUT.relative_to(ROOT)} is current ({len(MODULES)} modules, {len(KERNELS)} C kernels)"
        )
        return 0
    try:
        import mypyc  # noqa: F401
    except ImportError:
        print("mypyc not found: pip install -e '.[test]' (mypy); contextwright runs from source")
        return 1
    started = time.perf_counter()
    print(f"compiling {len(MODULES)} modules with mypyc (about a minute)...", flush=True)
    try:
        build()
    except SystemExit:  # mypyc's type check failed; mypy printed why
        print("compiling failed (mypy, above); contextwright runs from source", file=sys.stderr)
        return 1
    except Exception as exc:  # a compiler error: say it, keep the pure package
        print(f"compiling failed ({exc}); contextwright runs from source", file=sys.stderr)
        return 1
    print(f"compiled into {OUT.relative_to(ROOT)} in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
