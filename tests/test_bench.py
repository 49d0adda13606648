"""The benchmarks run end to end on a tiny store and report what docs/benchmarks.md quotes: a
benchmark that breaks silently would leave the figures there unverifiable."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _run(script: str, *args: str, cwd: Path) -> dict:  # type: ignore[type-arg]
    out = subprocess.run(
        [sys.executable, str(BENCH / script), *args, "--json"],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def _positive(stats: dict) -> bool:  # type: ignore[type-arg]
    return 0 < stats["p50"] <= stats["p99"]


def test_assemble_bench_reports_both_workloads_and_the_baselines(tmp_path: Path) -> None:
    report = _run(
        "assemble.py",
        "--sizes",
        "400",
        "--calls",
        "6",
        "--loop-sessions",
        "2",
        "--dir",
        str(tmp_path),
        cwd=tmp_path,
    )
    (r,) = report["results"]
    assert r["records"] == 400 and r["calls"] == 6
    for key in (
        "assemble_ms",
        "assemble_seen_ms",
        "assemble_loop_ms",
        "assemble_loop_after_idle_ms",
        "assemble_no_locality_ms",
        "assemble_no_pool_ms",
        "baseline_queries_ms",
        "cpu_reference_ms",
    ):
        assert _positive(r[key]), key
    ratio = r["assemble_ms"]["p50"] / r["cpu_reference_ms"]["p50"]
    assert r["assemble_per_reference"] == pytest.approx(ratio, abs=0.01)
    full = r["full_collections"]
    assert full["count"] >= 0 and (full["max_ms"] > 0) == (full["count"] > 0)
    assert 0 <= r["result_release_ms"]["p50"] <= r["result_release_ms"]["p99"]
    assert 0 < r["window_tokens_p50"] <= r["available"]
    assert r["ingest_records_per_s"] > 0 and r["file_mb"] > 0
    # The RSS split: the process's own memory, and the store's pages mapped (docs/stores.md).
    assert 0 < r["rss_anon_mb"] <= r["peak_rss_mb"] and 0 <= r["rss_file_mb"] <= r["peak_rss_mb"]
    assert report["machine"]["nproc"] >= 1
    from contextwright import compiled

    files, why = compiled.check()  # the bench runs in a process of its own, with this environment
    assert report["machine"]["compiled"] is (files is not None)
    assert report["machine"]["compiled_reason"] == why
    assert report["machine"]["hamming_kernel"] is (compiled.kernel("hamming") is not None)
    assert report["machine"]["fts_kernel"] is (compiled.kernel("fts") is not None)
    assert r["frozen_objects"] == 0  # nothing frozen without --settle-heap


def test_assemble_bench_settles_the_heap_as_the_servers_do(tmp_path: Path) -> None:
    """`--settle-heap` freezes what the warm-up left (gc.freeze), as `contextwright serve` does:
    the report says how many objects every later full collection leaves out."""
    report = _run(
        "assemble.py",
        "--sizes",
        "300",
        "--calls",
        "4",
        "--loop-sessions",
        "1",
        "--settle-heap",
        "--dir",
        str(tmp_path),
        cwd=tmp_path,
    )
    (r,) = report["results"]
    assert r["frozen_objects"] > 10_000  # modules, classes, functions: start-up's objects
    assert _positive(r["assemble_ms"])


def test_vectors_bench_reports_cold_and_loop_with_and_without_vectors(tmp_path: Path) -> None:
    report = _run(
        "vectors.py",
        "--records",
        "300",
        "--calls",
        "4",
        "--sample",
        "50",
        "--embedder",
        "hash",
        "--dir",
        str(tmp_path),
        cwd=tmp_path,
    )
    assert report["records"] == 300 and report["embedder"] == "hash"
    for key in (
        "assemble_with_vectors_ms",
        "assemble_without_vectors_ms",
        "assemble_loop_with_vectors_ms",
        "assemble_loop_without_vectors_ms",
        "vector_search_ms",
        "cpu_reference_ms",
    ):
        assert _positive(report[key]), key
    ratio = report["assemble_with_vectors_ms"]["p50"] / report["cpu_reference_ms"]["p50"]
    assert report["with_vectors_per_reference"] == pytest.approx(ratio, abs=0.01)
    assert report["lag_after_run"] == 0  # the loop waited for the worker after every turn
    full = report["full_collections"]
    assert full["count"] >= 0 and (full["max_ms"] > 0) == (full["count"] > 0)
    # The hash embedder has one model: no int8 query build to compare with the packaged one.
    assert report["compute"] is None and report["query_embedding_packaged_model_ms"] is None
    assert _positive(report["query_embedding_ms"])


def test_between_bench_reports_each_wait_before_the_call(tmp_path: Path) -> None:
    report = _run(
        "between.py",
        "--records",
        "300",
        "--sessions",
        "2",
        "--idle-ms",
        "5",
        "--dir",
        str(tmp_path),
        cwd=tmp_path,
    )
    assert report["records"] == 300 and report["idle_ms"] == 5
    calls = report["assemble_ms"]
    assert set(calls) == {"back_to_back", "busy", "asleep"}
    for name, stats in calls.items():
        assert _positive(stats), name
    assert (tmp_path / "between-300.db").exists()  # --dir kept the store for another run
    bad = subprocess.run(
        [sys.executable, str(BENCH / "between.py"), "--sessions", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert bad.returncode == 2 and "--sessions must be at least 1" in bad.stderr


def test_compiled_bench_pairs_the_build_with_the_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each pair is one process on the build and one from source, whatever this process runs;
    without a current build it stops and says so (docs/compiled.md)."""
    from contextwright import compiled

    args = ["--records", "300", "--calls", "4", "--pairs", "2", "--dir", str(tmp_path)]
    monkeypatch.delenv("CONTEXTWRIGHT_PURE", raising=False)
    files, _ = compiled.check()
    if files is None:  # no current build (or a pure run): both sides would be the sources
        out = subprocess.run(
            [sys.executable, str(BENCH / "compiled.py"), *args, "--json"],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )
        assert out.returncode != 0 and "make compile" in out.stderr
        return
    report = _run("compiled.py", *args, cwd=tmp_path)
    assert report["records"] == 300 and len(report["pairs"]) == 2
    for pair in report["pairs"]:
        assert pair["compiled"]["compiled"] is True and pair["source"]["compiled"] is False
        for side in pair.values():
            assert min(side["cold_p50"], side["seen_p50"], side["cpu_p50"]) > 0
    for key in ("cold", "seen", "cpu"):
        assert len(report["ratio"][key]) == 2 and report["median_ratio"][key] > 0


def test_assemble_bench_counts_the_full_collections_only() -> None:
    """`FullCollections` (bench/assemble.py) records each full collection of the cyclic GC while
    it is on, and nothing for the younger generations or once it is off."""
    sys.path.insert(0, str(BENCH))
    try:
        import assemble
    finally:
        sys.path.remove(str(BENCH))
    with assemble.FullCollections() as seen:
        gc.collect(0)
        gc.collect(1)
        assert seen.report() == {"count": 0, "max_ms": 0.0}
        gc.collect()
    gc.collect()  # after the block: not observed
    assert len(seen.ms) == 1 and seen.ms[0] > 0
    assert seen.report() == {"count": 1, "max_ms": round(seen.ms[0], 2)}
    assert seen._observe not in gc.callbacks


def test_assemble_bench_names_the_first_cpus_family_and_model(tmp_path: Path) -> None:
    """`cpu_info` reads the first CPU's block of /proc/cpuinfo (a VM may name every host "AMD
    EPYC"; the family and model tell them apart), and says "unknown" for what it cannot read."""
    sys.path.insert(0, str(BENCH))
    try:
        import assemble
    finally:
        sys.path.remove(str(BENCH))
    info = tmp_path / "cpuinfo"
    info.write_text(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\n"
        "model name\t: AMD EPYC\nstepping\t: 1\n\n"
        "processor\t: 1\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: other\n"
    )
    assert assemble.cpu_info(str(info)) == {
        "cpu": "AMD EPYC",
        "cpu_family": "26",
        "cpu_model": "2",
        "cpu_stepping": "1",
    }
    gone = assemble.cpu_info(str(tmp_path / "missing"))
    assert set(gone.values()) == {"unknown"} and len(gone) == 4
    assert set(assemble.machine()) >= {"cpu", "cpu_family", "cpu_model", "cpu_stepping"}


def test_instructions_bench_reads_valgrinds_counts() -> None:
    """bench/instructions.py's parsing of valgrind's total and of callgrind_annotate's lines (the
    run itself needs valgrind and minutes: docs/benchmarks.md quotes it)."""
    sys.path.insert(0, str(BENCH))
    try:
        import instructions
    finally:
        sys.path.remove(str(BENCH))
    assert (
        instructions.total_instructions("==7== Events    : Ir\n==7== Collected : 4,216,765,617\n")
        == 4_216_765_617
    )
    annotated = (
        "416,256,720 ( 9.87%)  /x/Python/ceval.c:_PyEval_EvalFrameDefault [/usr/lib/libpython3.11.so.1.0]\n"
        "122,176,222 ( 2.90%)  ???:sqlite3VdbeExec [/usr/lib/x86_64-linux-gnu/libsqlite3.so.0.8.6]\n"
        " 20,000,000 ( 0.50%)  /x/Objects/dictobject.c:_Py_dict_lookup [/usr/lib/libpython3.11.so.1.0]\n"
        "4,216,765,617 (100.0%)  PROGRAM TOTALS\n"
    )
    assert instructions.by_library(annotated) == {
        "libpython3.11.so.1.0": 436_256_720,
        "libsqlite3.so.0.8.6": 122_176_222,
    }
    with pytest.raises(SystemExit, match="no total"):
        instructions.total_instructions("valgrind: command not found")


def test_instructions_bench_says_what_is_missing(tmp_path: Path) -> None:
    def run(*args: str, path: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(BENCH / "instructions.py"), *args],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            env={**os.environ, "PATH": path},
        )

    bad = run("--calls", "0", path=os.environ["PATH"])
    assert bad.returncode != 0 and "--calls=0" in bad.stderr
    no_valgrind = run("--records", "50", "--calls", "1", "--dir", str(tmp_path), path=str(tmp_path))
    assert no_valgrind.returncode != 0 and "valgrind is not installed" in no_valgrind.stderr


def test_vector_index_bench_compares_the_store_with_sqlite_vec(tmp_path: Path) -> None:
    """bench/vector_index.py times the store's search and three sqlite-vec searches on the same
    vectors and says how much of the exact top k each returns: float32 vec0 is exact."""
    report = _run(
        "vector_index.py",
        "--rows",
        "600",
        "--queries",
        "6",
        "--k",
        "5",
        "--dir",
        str(tmp_path),
        cwd=tmp_path,
    )
    searches = ["store", "vec0 float32", "vec0 int8", "vec0 bit + rerank"]
    assert list(report["search_ms"]) == searches and list(report["agreement"]) == searches
    for name in searches:
        assert _positive(report["search_ms"][name]), name
        assert 0.0 <= report["agreement"][name] <= 1.0, name
    assert report["agreement"]["vec0 float32"] == 1.0
    assert report["agreement"]["store"] >= 0.8  # 600 rows: every row ranked, int8 cosines
    assert report["rows"] == 600 and report["k"] == 5
    assert all(mb > 0 for mb in report["file_mb"].values())


def test_vector_index_bench_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without sqlite-vec the bench stops with the pip command, not a traceback."""
    sys.path.insert(0, str(BENCH))
    try:
        import vector_index
    finally:
        sys.path.remove(str(BENCH))
    monkeypatch.setitem(sys.modules, "sqlite_vec", None)  # import sqlite_vec -> ImportError
    with pytest.raises(SystemExit) as stopped:
        vector_index.sqlite_vec_connection(":memory:")
    assert "pip install -e '.[bench]'" in str(stopped.value.code)
