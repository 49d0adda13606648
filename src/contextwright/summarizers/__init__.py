"""Summarizers behind the `ports.Summarizer` protocol: extractive (the default, no model) and one
over any OpenAI-compatible chat completions API (the `summarizer` extra)."""

from .extractive import SUMMARY_HEADING, ExtractiveSummarizer
from .openai_compatible import OpenAICompatibleSummarizer, SummarizerFallback

__all__ = [
    "SUMMARY_HEADING",
    "ExtractiveSummarizer",
    "OpenAICompatibleSummarizer",
    "SummarizerFallback",
]
