"""A script that uses the engine and ends without close() (what a user's first script does) must
exit cleanly. With vectors on by default, the daemon embedder thread is inside onnxruntime when
the interpreter finalizes, and the process dies with SIGABRT ("terminate called without an active
exception", exit 134): a crash after the user's work, in every short script that writes records.
Closing the engine while the model is still loading aborts the same way, less often.

vectors.py closes every engine's vectors at exit (`_close_at_exit`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EMBEDDING = """
from contextwright import Engine
engine = Engine.open("memory://", embedder="minilm")
assert engine.wait_for_embeddings(120)  # the model is loaded; nothing to embed yet
for i in range(2000):
    engine.add(project="chat", author="José Núñez", content=f"note {i} about the login form")
print("done")
"""
LOADING = """
from contextwright import Engine
engine = Engine.open("memory://", embedder="minilm")
engine.add(project="chat", author="Ada Lovelace", content="the model is still loading")
engine.close()
print("done")
"""


@pytest.mark.parametrize("script", [EMBEDDING, LOADING], ids=["embedding", "closed-while-loading"])
def test_a_script_that_ends_while_records_are_embedded_exits_cleanly(
    tmp_path: Path, script: str
) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("CONTEXTWRIGHT_EMBEDDER", None)
    # Where the thread is when the interpreter ends varies (about one run in ten of the old code
    # got out clean), so three runs must all exit cleanly.
    for _ in range(3):
        done = subprocess.run(
            [sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, timeout=300
        )
        assert done.stdout.strip() == b"done", done.stderr[-2000:]
        assert done.returncode == 0, done.stderr[-2000:]
