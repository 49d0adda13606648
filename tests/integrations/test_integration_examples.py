"""Every example in docs/integrations runs, offline, and prints the agent's second answer; and a
missing framework fails with the exact install command."""

from __future__ import annotations

import importlib
import runpy
import sys
from pathlib import Path

import pytest

from contextwright.errors import MissingExtra

EXAMPLES = sorted((Path(__file__).parents[2] / "docs" / "integrations").glob("*_example.py"))
FRAMEWORKS = {
    "openai_agents": ("agents", "openai-agents"),
    "langchain": ("langchain", "langchain"),
    "llamaindex": ("llama_index", "llamaindex"),
    "pydantic_ai": ("pydantic_ai", "pydantic-ai"),
}


def test_there_is_one_example_per_framework() -> None:
    assert sorted(p.name for p in EXAMPLES) == sorted(f"{m}_example.py" for m in FRAMEWORKS)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # LlamaIndex's pydantic v1 leftovers
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_runs(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip(FRAMEWORKS[path.stem.removesuffix("_example")][0])
    runpy.run_path(str(path), run_name="__main__")
    out = capsys.readouterr().out
    assert "answer: You asked about Lyon." in out
    assert "sunny in Lyon" in out  # the first turn's tool result came back from contextwright


@pytest.mark.parametrize("module", sorted(FRAMEWORKS))
def test_a_missing_framework_names_the_install_command(
    module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    package, extra = FRAMEWORKS[module]
    for name in list(sys.modules):
        if name == package or name.startswith(package + "."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, package, None)  # an import of it now fails
    monkeypatch.delitem(sys.modules, f"contextwright.integrations.{module}", raising=False)
    with pytest.raises(MissingExtra) as err:
        importlib.import_module(f"contextwright.integrations.{module}")
    assert f"pip install 'contextwright[{extra}]'" in str(err.value)
