"""LoCoMo-format conversations, read and checked: the input of the recall benchmark.

A file is a JSON list of samples. Each has `conversation` (`session_N` turn lists with
`session_N_date_time` dates such as "1:56 pm on 8 May, 2023") and `qa` (question, evidence dia_ids,
category). A file of another shape is rejected with a ValidationError that names the path and the
missing field, before anything is stored.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import ValidationError

CATEGORIES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
_DIA = re.compile(r"D\d+:\d+")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.:\-]+")
_DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%I:%M %p on %B %d, %Y")


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    session: int
    created_at: float


@dataclass(frozen=True)
class Question:
    question: str
    evidence: frozenset[str]
    category: int


@dataclass
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]
    skipped: int = 0  # questions with no evidence turn in this conversation
    speakers: tuple[str, ...] = field(default_factory=tuple)

    @property
    def project(self) -> str:
        """The project the bench stores this conversation in: one per sample, its id where the
        id is a valid identifier; else the id made safe plus a digest of it, so that two ids that
        differ only in spaces or symbols ("Ada & Grace", "Ada Grace") stay apart."""
        slug = _UNSAFE.sub("-", self.sample_id).strip("-")[:100]
        if slug == self.sample_id and slug[:1].isalnum():
            return slug
        return f"{slug or 'conv'}-{_digest(self.sample_id)}"

    @property
    def end(self) -> float:
        return max((t.created_at for t in self.turns), default=0.0)


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=6).hexdigest()


def parse_date(text: str) -> float:
    """'1:56 pm on 8 May, 2023' -> seconds since the epoch (UTC)."""
    cleaned = " ".join(str(text).split())
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(cleaned, fmt).replace(tzinfo=UTC).timestamp()
        except ValueError:
            continue
    raise ValueError(f"unknown date format {text!r}")


def _need(obj: Any, key: str, where: str, path: str, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(obj, Mapping) or key not in obj:
        raise ValidationError(
            f"{path}: {where}.{key}",
            None,
            "each LoCoMo sample needs conversation.session_N, session_N_date_time and qa "
            "[{question, evidence, category}]",
            problem="is missing",
        )
    value = obj[key]
    if not isinstance(value, kind):
        raise ValidationError(
            f"{path}: {where}.{key}", value, f"give a {getattr(kind, '__name__', 'value')}"
        )
    return value


def turn_text(turn: Mapping[str, Any]) -> str:
    """The turn's words, with the shared image's caption appended where there is one."""
    text = str(turn.get("text", "")).strip()
    caption = turn.get("blip_caption")
    if caption:
        text = f"{text} [shares an image: {str(caption).strip()}]".strip()
    return text


def load_locomo(path: str | Path) -> list[Conversation]:
    """Read and check a LoCoMo-format file; ValidationError names the path and the field."""
    p = str(path)
    try:
        raw = json.loads(Path(p).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ValidationError("path", p, "give the path of a LoCoMo JSON file") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValidationError("path", p, f"give a readable JSON file ({exc})") from exc
    if isinstance(raw, Mapping):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        raise ValidationError(p, type(raw).__name__, "give a JSON list of LoCoMo samples")
    out = []
    for i, sample in enumerate(raw):
        where = f"[{i}]"
        conv = _need(sample, "conversation", where, p, Mapping)
        qa = _need(sample, "qa", where, p, list)
        sample_id = str(sample.get("sample_id") or f"conv-{i}")
        turns: list[Turn] = []
        n = 1
        while f"session_{n}" in conv:
            session = _need(conv, f"session_{n}", f"{where}.conversation", p, list)
            date = _need(conv, f"session_{n}_date_time", f"{where}.conversation", p, str)
            try:
                start = parse_date(date)
            except ValueError as exc:
                raise ValidationError(
                    f"{p}: {where}.conversation.session_{n}_date_time",
                    date,
                    "write dates as '1:56 pm on 8 May, 2023'",
                ) from exc
            for j, turn in enumerate(session):
                tw = f"{where}.conversation.session_{n}[{j}]"
                # A display name as the file writes it; only the whitespace around it goes.
                speaker = " ".join(_need(turn, "speaker", tw, p, str).split()) or "speaker"
                dia_id = _need(turn, "dia_id", tw, p, str)
                _need(turn, "text", tw, p, str)
                # Turns keep their order: one second apart from the session's start.
                turns.append(Turn(dia_id, speaker, turn_text(turn), n, start + j))
            n += 1
        if not turns:
            raise ValidationError(
                f"{p}: {where}.conversation.session_1",
                None,
                "each sample needs at least one session of turns",
                problem="is missing",
            )
        known = {t.dia_id for t in turns}
        questions, skipped = [], 0
        for j, q in enumerate(qa):
            qw = f"{where}.qa[{j}]"
            text = _need(q, "question", qw, p, str)
            evidence = _need(q, "evidence", qw, p, list)
            category = _need(q, "category", qw, p, int)
            ids = frozenset(_DIA.findall(" ".join(map(str, evidence)))) & known
            if not ids:
                skipped += 1
                continue
            questions.append(Question(text, ids, category))
        speakers = tuple(dict.fromkeys(t.speaker for t in turns))
        out.append(Conversation(sample_id, turns, questions, skipped, speakers))
    return out
