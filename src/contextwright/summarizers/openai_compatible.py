"""A model-backed summarizer over any OpenAI-compatible chat completions API (OpenAI, vLLM,
llama.cpp server, Ollama, LiteLLM ...).

A summary is a convenience, never a reason to fail a session: on an error, a timeout or a reply it
cannot read, it retries what is worth retrying (429, 5xx, timeouts), then falls back to the
extractive summarizer with a `SummarizerFallback` warning, and remembers why in `last_error`.
httpx is imported lazily; it comes with the `summarizer` extra.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..errors import MissingExtra, ValidationError
from ..ports import Summarizer
from .extractive import ExtractiveSummarizer

DEFAULT_INSTRUCTIONS = (
    "Summarize the conversation turns below for the same assistant, who will continue the work "
    "without them. Write short bullet points, one fact per line, starting with '- '. Keep every "
    "decision, user preference, correction, file path, artifact, number and open question. "
    "No preamble."
)
RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
MAX_INPUT_TOKENS = 12_000


class SummarizerFallback(UserWarning):
    """The model-backed summarizer failed and the extractive one was used instead."""


class OpenAICompatibleSummarizer:
    name = "openai_compatible"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout: float = 20.0,
        retries: int = 2,
        backoff: float = 0.25,
        fallback: Summarizer | None = None,
        max_input_tokens: int = MAX_INPUT_TOKENS,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValidationError(
                "base_url", base_url, "give the API root, e.g. 'http://127.0.0.1:8000/v1'"
            )
        if not isinstance(model, str) or not model:
            raise ValidationError("model", model, "name the model to call")
        if not isinstance(timeout, int | float) or timeout <= 0:
            raise ValidationError("timeout", timeout, "give seconds > 0")
        if not isinstance(retries, int) or not 0 <= retries <= 10:
            raise ValidationError("retries", retries, "give a whole number from 0 to 10")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.timeout = float(timeout)
        self.retries = retries
        self.backoff = backoff
        self.fallback: Summarizer = fallback or ExtractiveSummarizer()
        self.max_input_tokens = max_input_tokens
        self.last_error: str | None = None

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> OpenAICompatibleSummarizer:
        """From a settings mapping: base_url, model, api_key, timeout, retries."""
        known = {"base_url", "model", "api_key", "timeout", "retries", "backoff"}
        unknown = sorted(set(config) - known)
        if unknown:
            raise ValidationError(
                f"summarizer.{unknown[0]}", config[unknown[0]], f"use {', '.join(sorted(known))}"
            )
        return cls(**dict(config))

    def summarize(self, texts: Sequence[str], *, max_tokens: int, instructions: str = "") -> str:
        text, why = self.summarize_noted(texts, max_tokens=max_tokens, instructions=instructions)
        if why is not None:  # for the operator: where, and the provider's words
            where = _without_secrets(self.base_url)
            warnings.warn(f"{why} ({where}: {self.last_error})", SummarizerFallback, stacklevel=2)
        return text

    def summarize_noted(
        self, texts: Sequence[str], *, max_tokens: int, instructions: str = ""
    ) -> tuple[str, str | None]:
        """The summary, and what failed where the fallback wrote it (None: the model did)."""
        try:
            import httpx
        except ImportError as exc:  # pragma: no cover - httpx ships with the extra
            raise MissingExtra("OpenAICompatibleSummarizer", "summarizer") from exc
        body = "\n".join(texts)
        extractive = ExtractiveSummarizer()
        if extractive.counter.count(body) > self.max_input_tokens:
            body = extractive.summarize(texts, max_tokens=self.max_input_tokens)
        payload = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": instructions or DEFAULT_INSTRUCTIONS},
                {"role": "user", "content": body},
            ],
            "max_tokens": max_tokens,
            "temperature": 0,
        }
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        error = brief = "no attempt made"  # what failed; `brief` without the provider's words
        with httpx.Client(base_url=self.base_url, timeout=self.timeout, headers=headers) as client:
            for attempt in range(self.retries + 1):
                if attempt:
                    time.sleep(self.backoff * 2 ** (attempt - 1))
                try:
                    response = client.post("/chat/completions", json=payload)
                except httpx.TimeoutException:
                    error = brief = f"timed out after {self.timeout:g} s"
                    continue
                except httpx.HTTPError as exc:
                    error, brief = f"{type(exc).__name__}: {exc}", type(exc).__name__
                    continue
                brief = f"HTTP {response.status_code}"
                if response.status_code in RETRY_STATUS:
                    error = f"HTTP {response.status_code}: {response.text[:200]}"
                    wait = _retry_after(response.headers.get("retry-after"))
                    if wait and attempt < self.retries:
                        time.sleep(min(wait, 2.0))
                    continue
                if response.status_code >= 400:
                    error = f"HTTP {response.status_code}: {response.text[:200]}"
                    break  # a client error will not change on retry
                text = _content(response)
                if text is None:
                    error, brief = f"malformed reply: {response.text[:200]!r}", "malformed reply"
                    break
                self.last_error = None
                return text, None
        self.last_error = error
        # Read by the agent (a session window's warnings, its trace): the model and the kind of
        # failure, never the address (it may carry a key) or the provider's answer.
        why = (
            f"summarizer {self.model!r} failed ({brief}); "
            f"used the {self.fallback.name} summarizer instead"
        )
        return self.fallback.summarize(texts, max_tokens=max_tokens, instructions=instructions), why


def _retry_after(value: str | None) -> float:
    try:
        return max(float(value), 0.0) if value else 0.0
    except ValueError:
        return 0.0


def _content(response: Any) -> str | None:
    """choices[0].message.content as non-empty text, or None for anything else."""
    try:
        data = response.json()
        text = data["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    if not isinstance(text, str) or not text.strip():
        return None
    return text.strip()


def _without_secrets(url: str) -> str:
    """`url` without its user part, query and fragment, where keys are often put."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
