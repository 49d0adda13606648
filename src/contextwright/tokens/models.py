"""The registry of models that budgets are computed against.

Counts are cl100k (tokens.py). Models whose own tokenizer is not shipped offline (o200k for
GPT-4o/4.1) or not public at all (Claude, Llama 3, Mistral through cl100k) carry a stated safety
margin: the usable budget is divided by (1 + margin) so that our count can only over-estimate
theirs. Callers' values are checked here, so a wrong type is a ValidationError that names the
field.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ValidationError


@dataclass(frozen=True, slots=True)
class ModelSpec:
    name: str
    window: int
    reserve: int
    # 0.0 when cl100k is the model's own tokenizer; otherwise the over-count we allow for.
    margin: float
    tokenizer: str
    exact: bool


def _spec(name: str, window: int, reserve: int, margin: float, tokenizer: str) -> ModelSpec:
    return ModelSpec(name, window, reserve, margin, tokenizer, exact=margin == 0.0)


MODELS: dict[str, ModelSpec] = {
    s.name: s
    for s in (
        # A raw budget in cl100k tokens, for callers that count tokens themselves.
        _spec("cl100k", 2_000_000, 0, 0.0, "cl100k_base"),
        _spec("gpt-4", 8_192, 1_024, 0.0, "cl100k_base"),
        _spec("gpt-4-turbo", 128_000, 4_096, 0.0, "cl100k_base"),
        _spec("gpt-3.5-turbo", 16_385, 1_024, 0.0, "cl100k_base"),
        _spec("gpt-4o", 128_000, 4_096, 0.05, "o200k_base (not shipped offline; cl100k + 5%)"),
        _spec("gpt-4o-mini", 128_000, 4_096, 0.05, "o200k_base (not shipped offline; cl100k + 5%)"),
        _spec("gpt-4.1", 1_047_576, 8_192, 0.05, "o200k_base (not shipped offline; cl100k + 5%)"),
        _spec(
            "gpt-4.1-mini", 1_047_576, 8_192, 0.05, "o200k_base (not shipped offline; cl100k + 5%)"
        ),
        _spec("claude-3-5-sonnet", 200_000, 8_192, 0.20, "not public; cl100k + 20%"),
        _spec("claude-3-7-sonnet", 200_000, 8_192, 0.20, "not public; cl100k + 20%"),
        _spec("claude-sonnet-4", 200_000, 8_192, 0.20, "not public; cl100k + 20%"),
        _spec("claude-opus-4", 200_000, 8_192, 0.20, "not public; cl100k + 20%"),
        _spec("claude-3-5-haiku", 200_000, 8_192, 0.20, "not public; cl100k + 20%"),
        _spec("llama-3-8b", 8_192, 1_024, 0.10, "llama3 tiktoken (not shipped); cl100k + 10%"),
        _spec("llama-3.1-8b", 128_000, 4_096, 0.10, "llama3 tiktoken (not shipped); cl100k + 10%"),
        _spec("llama-3.1-70b", 128_000, 4_096, 0.10, "llama3 tiktoken (not shipped); cl100k + 10%"),
        _spec("mistral-large", 128_000, 4_096, 0.15, "mistral tekken (not shipped); cl100k + 15%"),
        _spec("mistral-small", 32_000, 2_048, 0.15, "mistral tekken (not shipped); cl100k + 15%"),
        _spec("mistral-7b", 32_768, 2_048, 0.15, "mistral sentencepiece; cl100k + 15%"),
    )
}


def model_spec(name: str) -> ModelSpec:
    if not isinstance(name, str) or name not in MODELS:
        raise ValidationError(
            "model", name, f"use one of {', '.join(MODELS)} or register it with register_model()"
        )
    return MODELS[name]


def register_model(name: str, window: int, reserve: int, margin: float = 0.1) -> ModelSpec:
    """Add a model to the registry; unknown tokenizers should keep a margin above zero."""
    if not isinstance(name, str) or not name.strip():
        raise ValidationError("model", name, "name the model, e.g. 'my-model-8b'")
    for key, value in (("window", window), ("reserve", reserve)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValidationError(key, value, "give a whole number of tokens")
    if window <= 0 or reserve < 0 or reserve >= window:
        raise ValidationError("window", window, "window must be positive and larger than reserve")
    if not isinstance(margin, int | float) or isinstance(margin, bool) or not 0.0 <= margin <= 1.0:
        raise ValidationError(
            "margin", margin, "give a safety margin from 0.0 to 1.0 (0.1 = count 10% over)"
        )
    spec = _spec(name, window, reserve, float(margin), "custom; cl100k + margin")
    MODELS[name] = spec
    return spec
