"""Files that are JSON but not the format they claim, or not UTF-8: the import names the place in
the file and stores nothing, in the library and in the CLI (exit 1, one line, never the CLI's
"unexpected AttributeError" of a bug, exit 3). Found by feeding each reader real-world shapes:
a string where an object belongs, a session that is not a list, a time written in words."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from contextwright import Engine, ValidationError
from contextwright.cli import cli
from contextwright.importers import import_file

GOOD_TURN = {"speaker": "Ada Lovelace", "text": "hi", "dia_id": "D1:1"}
CASES: list[tuple[str, str, Any, str]] = [
    (
        "openai",
        "a ChatGPT author given as a name",
        [
            {
                "mapping": {
                    "n1": {
                        "message": {"author": "Ada Lovelace", "content": {"parts": ["hi"]}},
                        "parent": None,
                    }
                },
                "current_node": "n1",
            }
        ],
        "conversations[0].mapping: message 0.author",
    ),
    (
        "openai",
        "a mapping that is a list",
        [{"mapping": ["n1"], "current_node": "n1"}],
        "conversations[0].mapping",
    ),
    (
        "openai",
        "a node that is a string",
        [{"mapping": {"n1": "x"}, "current_node": "n1"}],
        "conversations[0].mapping.n1",
    ),
    (
        "openai",
        "a conversation's time in words",
        [{"create_time": "yesterday", "messages": [{"role": "user", "content": "hi"}]}],
        "conversations[0].create_time",
    ),
    (
        "openai",
        "a message's time in words",
        [{"messages": [{"role": "user", "content": "hi", "create_time": "noon"}]}],
        "conversations[0].messages[0].create_time",
    ),
    (
        "locomo",
        "a session that is a string",
        {"conversation": {"session_1": "oops"}},
        "samples[0].conversation.session_1",
    ),
    (
        "locomo",
        "a session that is a number",
        {"conversation": {"session_1": 5}},
        "samples[0].conversation.session_1",
    ),
    (
        "locomo",
        "a turn that is a string",
        {"conversation": {"session_1": [GOOD_TURN, "hello"]}},
        "samples[0].conversation.session_1[1]",
    ),
    (
        "openai",
        "a mapping message's time in words",
        [
            {
                "mapping": {
                    "n1": {
                        "message": {
                            "author": {"role": "user"},
                            "content": {"parts": ["hi"]},
                            "create_time": "noon",
                        },
                        "parent": None,
                    }
                },
                "current_node": "n1",
            }
        ],
        "conversations[0].mapping: message 0.create_time",
    ),
    (
        "openai",
        "a message's time that is not finite",
        [{"messages": [{"role": "user", "content": "hi", "create_time": float("inf")}]}],
        "conversations[0].messages[0].create_time",
    ),
]


@pytest.mark.parametrize(("fmt", "what", "data", "field"), CASES, ids=[c[1] for c in CASES])
def test_a_malformed_file_is_refused_naming_its_place(
    engine: Engine, tmp_path: Path, fmt: str, what: str, data: Any, field: str
) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(data, ensure_ascii=False), "utf-8")
    with pytest.raises(ValidationError) as err:
        import_file(engine, path, fmt, "chat")
    assert err.value.field == field
    assert engine.store.count("chat") == 0


def test_a_line_that_is_not_utf8_is_named(engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_bytes(
        '{"author": "José Núñez", "content": "hola 🐉"}\n'.encode()
        + b'{"author": "a", "content": "\xff\xfe"}\n'
    )
    with pytest.raises(ValidationError) as err:
        import_file(engine, path, "jsonl", "chat")
    assert err.value.field == "line 2" and "UTF-8" in err.value.fix
    assert engine.store.count("chat") == 0


@pytest.mark.parametrize(
    ("fmt", "what", "data", "field"), CASES[:1] + CASES[5:6], ids=[CASES[0][1], CASES[5][1]]
)
def test_cli_import_of_a_malformed_file_is_one_line_naming_its_place(
    tmp_path: Path, fmt: str, what: str, data: Any, field: str
) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(data), "utf-8")
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    result = CliRunner().invoke(
        cli, ["--db", db, "import", str(path), "-p", "chat", "--format", fmt]
    )
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"error: {field}=") and "unexpected" not in result.stderr
    with Engine.open(db) as engine:
        assert engine.store.count("chat") == 0
