"""The README is tested: every Python example followed by a `text` block must print exactly that
text. When behaviour changes on purpose, run the example and paste its new output."""

from __future__ import annotations

import contextlib
import io
import itertools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def examples(path: Path) -> list[tuple[str, str]]:
    """(code, expected output) for each ```python block whose next block is ```text."""
    blocks = [(m.group(1), m.group(2)) for m in FENCE.finditer(path.read_text())]
    return [
        (code, expected)
        for (lang, code), (next_lang, expected) in itertools.pairwise(blocks)
        if lang == "python" and next_lang == "text"
    ]


README_EXAMPLES = examples(ROOT / "README.md")


def test_readme_starts_with_one_sentence_and_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    intro = text.split("\n\n")[1]
    assert intro.rstrip().endswith(".") and intro.count(". ") == 0
    commands = FENCE.search(text)
    assert commands is not None and commands.group(1) == "bash"
    assert "make demo" in commands.group(2) and "make test" in commands.group(2)


def test_readme_has_an_example() -> None:
    assert README_EXAMPLES


@pytest.mark.parametrize("code,expected", README_EXAMPLES)
def test_readme_example_prints_what_it_shows(code: str, expected: str) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    printed = [line.rstrip() for line in out.getvalue().rstrip().splitlines()]
    assert printed == [line.rstrip() for line in expected.rstrip().splitlines()]


def test_readme_links_point_to_files() -> None:
    text = (ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target


QUICKSTART_EXAMPLES = examples(ROOT / "docs" / "quickstart.md")


@pytest.mark.parametrize("code,expected", QUICKSTART_EXAMPLES)
def test_quickstart_example_prints_what_it_shows(code: str, expected: str) -> None:
    assert QUICKSTART_EXAMPLES
    test_readme_example_prints_what_it_shows(code, expected)


@pytest.mark.parametrize(
    "page", sorted((ROOT / "docs").rglob("*.md")), ids=lambda p: str(p.relative_to(ROOT))
)
def test_doc_links_point_to_files(page: Path) -> None:
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", page.read_text()):
        if not target.startswith(("http", "mailto:")):
            assert (page.parent / target).exists(), f"{page.name}: {target}"
