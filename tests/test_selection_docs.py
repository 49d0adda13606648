"""The examples in the scoring, cache, KV and rules pages run as written."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = ["scoring.md", "cache.md", "kv.md", "rules.md"]


@pytest.mark.parametrize("page", PAGES)
def test_python_examples_run(page: str) -> None:
    blocks = re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(), re.S)
    assert blocks, f"{page} has no runnable example"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for code in blocks:
            exec(compile(code, page, "exec"), {})
    assert out.getvalue().strip()


def test_kv_example_prints_what_the_page_says() -> None:
    code = re.findall(r"```python\n(.*?)```", (DOCS / "kv.md").read_text(), re.S)[0]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "kv.md", "exec"), {})
    assert (
        out.getvalue().splitlines()[0] == "['- [kv · deploy.target] eu-west-1, blue load balancer']"
    )
