"""The LoCoMo recall benchmark, on a small slice of the dev file read from ../shared at test time
(never copied into the repository)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from contextwright import ValidationError
from contextwright.embedders import HashEmbedder
from contextwright.evals import run_recall
from contextwright.evals.locomo import load_locomo, parse_date
from contextwright.evals.recall import MISSED, main, why_missed

DEV = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo" / "locomo-dev.json"
needs_dev = pytest.mark.skipif(
    not DEV.exists(), reason=f"the LoCoMo dev split is not at {DEV} (../shared is absent)"
)


def sliced(tmp_path: Path, sessions: int = 2, questions: int = 12) -> Path:
    """The first conversation cut to its first sessions, with the questions they answer."""
    sample = json.loads(DEV.read_text())[0]
    conv = {k: v for k, v in sample["conversation"].items() if not k.startswith("session_")}
    for n in range(1, sessions + 1):
        conv[f"session_{n}"] = sample["conversation"][f"session_{n}"]
        conv[f"session_{n}_date_time"] = sample["conversation"][f"session_{n}_date_time"]
    ids = {t["dia_id"] for n in range(1, sessions + 1) for t in conv[f"session_{n}"]}
    qa = [q for q in sample["qa"] if q.get("evidence") and set(q["evidence"]) <= ids]
    out = {"sample_id": "slice", "conversation": conv, "qa": qa[:questions]}
    path = tmp_path / "slice.json"
    path.write_text(json.dumps([out]))
    return path


def test_parse_date() -> None:
    assert parse_date("1:56 pm on 8 May, 2023") == 1683554160.0
    assert parse_date("10:37 am on 27 June, 2023") == 1687862220.0
    with pytest.raises(ValueError):
        parse_date("yesterday")


@needs_dev
def test_turns_become_records_with_speaker_date_and_caption(tmp_path: Path) -> None:
    conv = load_locomo(sliced(tmp_path))[0]
    first = conv.turns[0]
    assert (first.dia_id, first.speaker, first.session) == ("D1:1", "Caroline", 1)
    assert first.created_at == parse_date("1:56 pm on 8 May, 2023")
    assert any("[shares an image:" in t.text for t in conv.turns)
    assert conv.questions and all(q.evidence for q in conv.questions)


@needs_dev
def test_report_shape_and_a_budget_that_holds_everything(tmp_path: Path) -> None:
    report = run_recall(sliced(tmp_path), [500, 8000], embedder=HashEmbedder())
    rows = {(r["method"], r["budget"]): r for r in report["results"]}
    assert set(rows) == {(m, b) for m in ("contextwright", "recency", "bm25") for b in (500, 8000)}
    for r in report["results"]:
        assert set(r) - {"missed"} == {
            "method",
            "budget",
            "turn_recall",
            "all_evidence_recall",
            "questions",
            "by_category",
            "tokens_used",
            "evidence_fits",
        }
        assert ("missed" in r) == (r["method"] == "contextwright")
        assert 0.0 <= r["all_evidence_recall"] <= r["turn_recall"] <= 1.0
        assert 0 < r["tokens_used"] <= r["budget"] and 0.0 <= r["evidence_fits"] <= 1.0
        assert r["questions"] == 12
        assert sum(c["questions"] for c in r["by_category"].values()) == 12
    # The two sessions hold ~2,000 tokens: at 8,000 every method sees every turn.
    assert rows[("recency", 8000)]["turn_recall"] == 1.0
    assert rows[("contextwright", 8000)]["turn_recall"] == 1.0
    # At 500 tokens selection matters: the engine beats the recency window.
    assert rows[("contextwright", 500)]["turn_recall"] > rows[("recency", 500)]["turn_recall"]
    assert report["vectors"]["on"] is True


@needs_dev
def test_every_missed_evidence_turn_is_counted_once_by_why(tmp_path: Path) -> None:
    """`missed` sorts the evidence turns the engine's window left out by what its trace says:
    found by no source, outranked (the window filled first), capped, or left out otherwise."""
    path = sliced(tmp_path)
    conv = load_locomo(path)[0]
    evidence = sum(len(q.evidence) for q in conv.questions)
    report = run_recall(path, [150, 400, 8000], ["contextwright"], embedder=HashEmbedder())
    rows = {r["budget"]: r for r in report["results"]}
    for budget, row in rows.items():
        missed = row["missed"]
        assert set(missed) == set(MISSED)
        # Turn recall is the mean share per question: compare counts, not means.
        assert sum(missed.values()) <= evidence
        assert (sum(missed.values()) == 0) == (row["turn_recall"] == 1.0), budget
    # A window of 150 tokens holds two or three turns: most evidence is found but outranked.
    assert rows[150]["missed"]["outranked"] > 0
    assert sum(rows[8000]["missed"].values()) == 0


@pytest.mark.parametrize(
    ("reason", "why"),
    [
        (None, "not_found"),
        ("budget exhausted: needs 55 tokens, 5 left", "outranked"),
        ("source cap: fulltext already used 340 of 350 tokens", "capped"),
        ("section cap: knowledge limited to 400 tokens", "capped"),
        ("past the vector list's first 40: the other candidates fill the window twice over",
         "left_out"),
    ],
)  # fmt: skip
def test_why_missed(reason: str | None, why: str) -> None:
    assert why_missed(reason) == why


@needs_dev
def test_with_the_real_default_embedder(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime", reason="needs the 'vectors' extra")
    path = sliced(tmp_path, sessions=1, questions=4)
    report = run_recall(path, [300], ["contextwright", "bm25"], embedder="minilm")
    assert report["vectors"]["embedder"] == "minilm-l6-int8" and report["vectors"]["lag"] == 0
    cw = report["results"][0]
    assert cw["method"] == "contextwright" and cw["questions"] == 4
    assert cw["turn_recall"] > 0.0


@needs_dev
def test_module_command_prints_json_and_a_progress_bar(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = sliced(tmp_path, sessions=1, questions=3)
    code = main(["--path", str(path), "--budgets", "400", "--embedder", "hash", "--json"])
    out, err = capsys.readouterr()
    assert code == 0
    assert [r["method"] for r in json.loads(out)["results"]] == ["contextwright", "recency", "bm25"]
    assert "3/3" in err


def write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    return path


GOOD: dict[str, Any] = {
    "sample_id": "s",
    "conversation": {
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}],
    },
    "qa": [{"question": "who said hi?", "evidence": ["D1:1"], "category": 4}],
}


@pytest.mark.parametrize(
    ("damage", "field"),
    [
        (lambda d: d.pop("qa"), "[0].qa"),
        (lambda d: d.pop("conversation"), "[0].conversation"),
        (lambda d: d["qa"][0].pop("evidence"), "[0].qa[0].evidence"),
        (lambda d: d["qa"][0].pop("category"), "[0].qa[0].category"),
        (
            lambda d: d["conversation"].pop("session_1_date_time"),
            "[0].conversation.session_1_date_time",
        ),
        (
            lambda d: d["conversation"]["session_1"][0].pop("speaker"),
            "[0].conversation.session_1[0].speaker",
        ),
    ],
)
def test_a_dataset_of_the_wrong_shape_names_the_path_and_the_field(
    tmp_path: Path, damage: Any, field: str
) -> None:
    data = copy.deepcopy(GOOD)
    damage(data)
    path = write(tmp_path, [data])
    with pytest.raises(ValidationError) as err:
        run_recall(path, [500], embedder=None)
    assert str(path) in err.value.field and err.value.field.endswith(field)


def test_other_bad_input(tmp_path: Path) -> None:
    assert load_locomo(write(tmp_path, [GOOD]))[0].questions[0].evidence == {"D1:1"}
    with pytest.raises(ValidationError, match="path"):
        run_recall(tmp_path / "missing.json", [500])
    with pytest.raises(ValidationError, match="budgets"):
        run_recall(write(tmp_path, [GOOD]), "500,lots")
    with pytest.raises(ValidationError, match="methods"):
        run_recall(write(tmp_path, [GOOD]), [500], ["magic"])
    bad_date = copy.deepcopy(GOOD)
    bad_date["conversation"]["session_1_date_time"] = "last tuesday"
    with pytest.raises(ValidationError, match="session_1_date_time"):
        run_recall(write(tmp_path, [bad_date]), [500], embedder=None)
    with pytest.raises(ValidationError):
        run_recall(write(tmp_path, {"not": "a list"}), [500], embedder=None)


def real_chat() -> list[dict[str, Any]]:
    """A small generated chat between two people with display names, in the LoCoMo format: short
    bursts, emoji, right-to-left text, a shared photo's caption, a typo; and questions that name
    the speakers by their given names."""
    ada, grace = "Ada Lovelace", "Grace Hopper"
    filler = [
        "lol 😂", "ok ok", "brb", "👍", "haha yes", "sure thing", "omg", "see you 👋",
        "מה נשמע?", "شكرا جزيلا", "right?", "hmm", "nice!!", "true", "cool cool", "k",
    ]  # fmt: skip
    facts = {
        "D1:3": (ada, "I finally finished the notes on the analytical engne, all of them"),
        "D2:5": (grace, "I found a moth stuck in relay 70 of the Mark II today"),
        "D3:4": (ada, "Mum wants me to take up mathematics instead of poetry"),
        "D3:9": (grace, "The team ships the first COBOL compiler next spring"),
    }
    conv: dict[str, Any] = {"speaker_a": ada, "speaker_b": grace}
    for s in (1, 2, 3):
        conv[f"session_{s}_date_time"] = f"{s + 1}:00 pm on {s + 7} May, 2023"
        turns = []
        for t in range(1, 13):
            dia = f"D{s}:{t}"
            speaker, text = facts.get(dia, ((ada, grace)[t % 2], filler[(s * 13 + t) % 16]))
            turn = {"speaker": speaker, "dia_id": dia, "text": text}
            if dia == "D2:8":
                turn["blip_caption"] = "a photo of a brass gear on a wooden table"
            turns.append(turn)
        conv[f"session_{s}"] = turns
    qa = [
        {
            "question": "What did Ada finish writing notes about?",
            "evidence": ["D1:3"],
            "category": 4,
        },
        {"question": "What did Grace find in the relay?", "evidence": ["D2:5"], "category": 4},
        {"question": "What does Ada's mum want her to study?", "evidence": ["D3:4"], "category": 4},
        {"question": "What will Grace Hopper's team ship?", "evidence": ["D3:9"], "category": 4},
        {"question": "What did Ada share a photo of?", "evidence": ["D2:8"], "category": 1},
    ]
    return [{"sample_id": "Ada & Grace 💬", "conversation": conv, "qa": qa}]


def test_bench_runs_on_a_chat_between_people_with_display_names(tmp_path: Path) -> None:
    """The bench (`contextwright bench recall`) on speakers 'Ada Lovelace' and 'Grace Hopper':
    it ran into a ValidationError at the first turn when authors had to be identifiers."""
    from click.testing import CliRunner

    from contextwright.cli import cli

    path = tmp_path / "chat.json"
    path.write_text(json.dumps(real_chat(), ensure_ascii=False), "utf-8")
    conv = load_locomo(path)[0]
    assert set(conv.speakers) == {"Ada Lovelace", "Grace Hopper"}
    assert conv.project.startswith("Ada-Grace-")  # the sample id made an identifier
    result = CliRunner().invoke(
        cli,
        ["bench", "recall", "--path", str(path), "--budgets", "150,4000", "--embedder", "hash",
         "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, (result.output, result.stderr)
    report = json.loads(result.stdout)
    rows = {(r["method"], r["budget"]): r for r in report["results"]}
    assert all(r["questions"] == 5 for r in report["results"])
    assert rows[("contextwright", 4000)]["turn_recall"] == 1.0
    # At 150 tokens the window holds a few turns: the named speaker's words win over filler.
    assert rows[("contextwright", 150)]["turn_recall"] >= 0.6
    assert rows[("contextwright", 150)]["turn_recall"] > rows[("recency", 150)]["turn_recall"]


def test_the_bench_reports_what_it_measured_tokens_fits_and_a_plot(tmp_path: Path) -> None:
    """`bench recall` says which configuration it measured, the tokens each method used, the
    share of questions whose evidence fits the budget, recall per category, and draws a PNG."""
    from click.testing import CliRunner

    from contextwright.cli import cli

    path = tmp_path / "chat.json"
    path.write_text(json.dumps(real_chat(), ensure_ascii=False), "utf-8")
    png = tmp_path / "recall.png"
    args = ["bench", "recall", "--path", str(path), "--budgets", "150,4000", "--embedder", "hash"]
    result = CliRunner().invoke(cli, [*args, "--json", "--plot", str(png)])
    assert result.exit_code == 0, (result.output, result.stderr)
    report = json.loads(result.stdout)
    assert report["configuration"]["embedder"] == "hash"
    assert report["configuration"]["vectors"] == "hash" and "vector" in report[
        "configuration"]["sources"]  # fmt: skip
    rows = {(r["method"], r["budget"]): r for r in report["results"]}
    for (method, budget), row in rows.items():
        assert 0 < row["tokens_used"] <= budget, (method, budget)
        assert row["by_category"]["4"]["name"] == "single-hop"
    assert rows[("contextwright", 4000)]["evidence_fits"] == 1.0
    # The whole chat fits 4,000 tokens: the baselines hold it too (they read a conversation's
    # records by its project, not its sample id, which here is not an identifier).
    assert rows[("recency", 4000)]["turn_recall"] == 1.0
    # No baseline keeps all the evidence of more questions than could fit (it renders alike).
    for method in ("bm25", "recency"):
        row = rows[(method, 150)]
        assert row["all_evidence_recall"] <= row["evidence_fits"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and report["plot"] == str(png)
    text = CliRunner().invoke(cli, args)
    assert text.exit_code == 0
    assert "measured: embedder hash (vectors: hash)" in text.stdout
    assert "single-hop" in text.stdout and "tokens" in text.stdout


def test_the_bench_measures_the_default_embedder_unless_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(real_chat(), ensure_ascii=False), "utf-8")
    monkeypatch.setenv("CONTEXTWRIGHT_EMBEDDER", "hash")  # what "auto" resolves to here
    report = run_recall(path, [4000], ["contextwright"])
    assert report["configuration"]["embedder"] == "auto"
    assert report["configuration"]["vectors"] == "hash"


def test_plot_wants_a_png_name(tmp_path: Path) -> None:
    from contextwright.evals.recall import plot

    with pytest.raises(ValidationError, match="png"):
        plot({"results": [], "dataset": "x"}, tmp_path / "recall.svg")
