"""Token accounting against the provider: our count of a rendered window beside the provider's.

Limits fire at the wrong time when counts are wrong. The rendered window is counted with the
provider's own rule (render.count_openai for OpenAI chat); when a caller passes back the usage the
provider reported, `calibrate` compares the two, keeps a running ratio per model in the store, and
the next windows for that model shrink by the ratio when the provider counts more than we do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import ValidationError
from ..ports import Store

COLLECTION = "calibration"


@dataclass(frozen=True)
class Calibration:
    model: str
    ours: int
    provider: int
    samples: int
    mean_ratio: float

    @property
    def delta(self) -> int:
        return self.provider - self.ours

    @property
    def ratio(self) -> float:
        return round(self.provider / self.ours, 4) if self.ours else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "delta": self.delta, "ratio": self.ratio}


def prompt_tokens(usage: Mapping[str, Any]) -> int:
    """The prompt side of a usage object: OpenAI `prompt_tokens`, Anthropic `input_tokens` (plus
    cache reads and writes, which Anthropic reports apart)."""
    if not isinstance(usage, Mapping):
        raise ValidationError(
            "usage", usage, "give the provider's usage object, e.g. {'prompt_tokens': 812}"
        )
    if "prompt_tokens" in usage:
        value = usage["prompt_tokens"]
    elif "input_tokens" in usage:
        value = usage["input_tokens"]
        for extra in ("cache_read_input_tokens", "cache_creation_input_tokens"):
            more = usage.get(extra) or 0
            value = value + more if isinstance(value, int) and isinstance(more, int) else value
    else:
        raise ValidationError(
            "usage", usage, "give prompt_tokens (OpenAI) or input_tokens (Anthropic)"
        )
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValidationError("usage.prompt_tokens", value, "give a whole number of tokens")
    return value


def record(
    store: Store, project: str, model: str, ours: int, provider: int, at: float
) -> Calibration:
    doc_id = f"{project}/{model}"
    data = store.get_doc(COLLECTION, project, doc_id) or {"samples": 0, "ratio_sum": 0.0}
    samples = int(data["samples"]) + 1
    ratio_sum = float(data["ratio_sum"]) + (provider / ours if ours else 1.0)
    store.put_doc(
        COLLECTION,
        doc_id,
        project,
        {"samples": samples, "ratio_sum": ratio_sum, "ours": ours, "provider": provider},
        at,
        key=model,
    )
    return Calibration(model, ours, provider, samples, round(ratio_sum / samples, 4))


def ratio(store: Store, project: str, model: str) -> float:
    """The running provider/ours ratio for `model` (1.0 before any sample)."""
    data = store.get_doc(COLLECTION, project, f"{project}/{model}")
    if not data or not data.get("samples"):
        return 1.0
    return float(data["ratio_sum"]) / int(data["samples"])
