"""The benchmarks run end to end on a tiny store and report what docs/benchmarks.md quotes: a
benchmark that breaks silently would leave the figures there unverifiable."""

from __future__ import annotations

import gc
import json
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
    # One engine with the defaults in a fresh process: what a deployment holds.
    one = r["one_engine"]
    assert _positive(one["assemble_ms"]) and _positive(one["cpu_reference_ms"])
    assert 0 < one["rss_anon_mb"] < one["rss_mb"] <= one["peak_rss_mb"] + 1
    assert one["rss_mb"] == pytest.approx(one["rss_anon_mb"] + one["rss_file_mb"], abs=0.2)
    assert report["machine"]["nproc"] >= 1
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
        str(tmp_path / "new"),  # made if missing, as bench/assemble.py makes it
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


@pytest.mark.slow
@pytest.mark.postgres
def test_peers_bench_times_contextwright_on_both_stores_beside_llamaindex_and_langgraph(
    tmp_path: Path,
) -> None:
    """bench/peers.py's quick mode: contextwright on SQLite and on PostgreSQL and the two peers on
    the same 500 records (every request's session has records at that size), each call doing its
    work (a window with items, a memory with messages, a search with hits), with the ratios taken
    from the same run, and the plot written."""
    import importlib.util

    for module in (
        "llama_index.core", "langgraph.store.sqlite", "pysqlite3", "matplotlib", "pgserver",
    ):  # fmt: skip
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (the bench and test extras)")
    png = tmp_path / "peers.png"
    report = _run(
        "peers.py",
        "--sizes",
        "500",
        "--calls",
        "3",
        "--embed-sample",
        "50",
        "--postgres",
        "--plot",
        str(png),
        cwd=tmp_path,
    )
    assert set(report["machine"]) >= {"nproc", "cpu", "cpu_family", "cpu_model"}
    (result,) = report["results"]
    assert result["records"] == 500 and result["calls"] == 3
    systems = {"contextwright", "contextwright_postgres", "llamaindex", "langgraph"}
    assert set(result["ms"]) == systems
    assert all(_positive(stats) for stats in result["ms"].values())
    assert all(n > 0 for n in result["returned_p50"].values())
    cw = result["ms"]["contextwright"]["p50"]
    for other in systems - {"contextwright"}:
        ratio = result["ms"][other]["p50"] / cw
        assert result["peer_over_contextwright_p50"][other] == pytest.approx(ratio, abs=0.01)
    assert result["langgraph_embedded"] == 50 and result["minilm_texts_per_s"] > 0
    assert set(result["ingest_records_per_s"]) == systems
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and report["plot"] == str(png)


def test_ingest_bench_reports_each_rounds_rate(tmp_path: Path) -> None:
    report = _run("ingest.py", "--records", "1500", "--rounds", "2", cwd=tmp_path)
    assert report["records"] == 1500 and len(report["records_per_s"]) == 2
    assert all(r > 0 for r in report["records_per_s"] + report["records_per_cpu_s"])
    assert report["cpu_reference_ms"] > 0


@pytest.mark.postgres
def test_ingest_bench_on_postgres_from_threads_reports_the_servers_cpu(tmp_path: Path) -> None:
    report = _run(
        "ingest.py", "--records", "300", "--rounds", "1", "--threads", "4",
        "--postgres", str(tmp_path / "pg"), cwd=tmp_path,
    )  # fmt: skip
    assert report["store"] == "postgresql" and report["threads"] == 4
    assert report["records_per_s"][0] > 0 and report["server_cpu_us_per_record"][0] > 0


def test_load_bench_drives_the_server_with_keep_alive_clients(tmp_path: Path) -> None:
    """bench/load.py end to end on a tiny store: its own HTTP client gets answers (no errors),
    and the CPU of both sides is reported."""
    report = _run(
        "load.py", "--records", "300", "--clients", "3", "--seconds", "2", "--max-requests",
        "40", "--db", str(tmp_path / "load.db"), cwd=tmp_path,
    )  # fmt: skip
    assert report["errors"] == {} and report["requests"] > 0
    assert report["ops"]["add"]["count"] > 0 and report["client"] == "raw"
    assert report["server_cpu_ms_per_request"] >= 0 and report["client_cpu_ms_per_request"] > 0


def test_load_turns_bench_drives_each_configuration_in_turns(tmp_path: Path) -> None:
    """bench/load_turns.py: two servers of their own configurations, each driven every round."""
    report = _run(
        "load_turns.py", "--records", "300", "--db", str(tmp_path / "turns.db"), "--rounds",
        "2", "--segment", "0.5", "--warmup", "0.3", "--clients", "3",
        "--config", "one", "1", "--config", "slots2", "1", "CONTEXTWRIGHT_ASSEMBLE_SLOTS=2",
        cwd=tmp_path,
    )  # fmt: skip
    assert set(report["configs"]) == {"one", "slots2"} and report["cpu_reference_ms"] > 0
    for s in report["configs"].values():
        assert s["errors"] == {} and len(s["segments_per_s"]) == 2 and s["requests_per_s"] > 0
        assert 0 < s["add_p50_ms"] <= s["add_p99_ms"]


def test_request_cost_bench_splits_each_request_at_the_engine_call(tmp_path: Path) -> None:
    db = tmp_path / "cost.db"
    _run("load.py", "--records", "300", "--clients", "1", "--seconds", "1", "--max-requests", "2",
         "--db", str(db), cwd=tmp_path)  # fmt: skip
    report = _run("request_cost.py", "--db", str(db), "--requests", "30", cwd=tmp_path)
    for op in ("add", "assemble"):
        s = report["ops"][op]
        assert s["count"] > 0 and 0 < s["engine_ms"] < s["request_ms"]
        assert s["beyond_ms"] == pytest.approx(s["request_ms"] - s["engine_ms"], abs=0.002)
    assert report["cpu_ms_per_request"] > 0


@pytest.mark.postgres
def test_postgres_plans_lists_each_round_trip_of_a_call_with_its_plans(tmp_path: Path) -> None:
    """bench/postgres_plans.py on a store that bench/postgres.py built and left in its --dir:
    every round trip of the call, with the server's time for each of its statements; then
    bench/postgres_slow.py on it."""
    store = tmp_path / "pg"
    report = _run(
        "postgres.py", "--records", "400", "--calls", "2", "--dir", str(store), cwd=tmp_path
    )
    assert report["postgres"]["assemble_ms"]["p50"] > 0
    out = subprocess.run(
        [sys.executable, str(BENCH / "postgres_plans.py"), "--dir", str(store), "--records",
         "400", "--calls", "1", "--plans"],
        check=True, capture_output=True, text=True, timeout=300, cwd=tmp_path,
    ).stdout  # fmt: skip
    (head,) = [line for line in out.splitlines() if line.startswith("== ")]
    trips = int(head.split(", ")[-1].split()[0])
    assert trips >= 2 and out.count("  waited ") == trips
    assert "server" in out and "Execution Time" in out and "doc" in out
    slow = subprocess.run(
        [sys.executable, str(BENCH / "postgres_slow.py"), "--dir", str(store), "--records",
         "400", "--calls", "20"],
        check=True, capture_output=True, text=True, timeout=300, cwd=tmp_path,
    ).stdout  # fmt: skip
    assert slow.startswith("20 calls, load average")  # bench/postgres_slow.py on the same store
