"""Query terms and stop words: the words of a task worth matching, shared by scoring, the
stores' full-text queries and task signals. Pure functions, no I/O."""

from __future__ import annotations

import re
import unicodedata

STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "s",
        "t",
        "don",
        "let",
        "lets",
        "ll",
        "ve",
        "re",
        "d",
        "m",
        "o",
        "y",
        "also",
        "get",
        "got",
        "would",
        "could",
        "should",
        "might",
        "must",
        "shall",
        "may",
        "please",
        "thanks",
        "thank",
        "ok",
        "okay",
        "yes",
        "yeah",
        "hi",
        "hey",
    ]
)

# A word as SQLite FTS5's unicode61 tokenizer sees one: a run of letters and digits of any script
# (Unicode categories L* and N*); the underscore, punctuation, emoji and combining marks separate
# words. "Zoë", "Москва" and "東京タワー" are words; "cache_ttl" is two.
WORD_RE = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    """Every word worth matching in `text`, lowercased, in order, repeats kept: no stopwords, and
    no one-character ASCII words ("a", "x"), while a single character of another script (a CJK
    ideograph: "猫") is a word."""
    return [
        w
        for w in WORD_RE.findall(text.lower())
        if (len(w) > 1 or not w.isascii()) and w not in STOPWORDS
    ]


def fold_latin(word: str) -> str:
    """`word` with the diacritics of Latin letters removed ("café" -> "cafe"), as unicode61
    (remove_diacritics) indexes it; other scripts keep theirs, as they do there."""
    if word.isascii():
        return word
    out: list[str] = []
    for ch in unicodedata.normalize("NFD", word):
        if unicodedata.combining(ch) and out and out[-1] < "\u0250":  # a mark on a Latin base
            continue
        out.append(ch)
    return unicodedata.normalize("NFC", "".join(out))


def query_terms(text: str, limit: int = 32) -> list[str]:
    """The distinct words of `words(text)`, first occurrence order, at most `limit`. They are
    not folded: SQLite's index folds them in the query, PostgreSQL's keeps accents."""
    seen: dict[str, None] = {}
    for word in words(text):
        seen.setdefault(word, None)
        if len(seen) >= limit:
            break
    return list(seen)
