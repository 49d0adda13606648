"""porter.stem gives the stem SQLite's own FTS5 porter tokenizer gives, word for word, and the
SQLite store's index is built with that tokenizer (porter.TOKENIZE)."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwright.stores.porter import TOKENIZE, stem
from contextwright.stores.sqlite import SQLiteStore

DEV = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo" / "locomo-dev.json"

# Every suffix a rule looks at, and the endings that feed them.
SUFFIXES = [
    "ational",
    "tional",
    "enci",
    "anci",
    "izer",
    "logi",
    "bli",
    "alli",
    "entli",
    "eli",
    "ousli",
    "ization",
    "ation",
    "ator",
    "alism",
    "iveness",
    "fulness",
    "ousness",
    "aliti",
    "iviti",
    "biliti",
    "ical",
    "ness",
    "icate",
    "iciti",
    "ful",
    "ative",
    "alize",
    "al",
    "ance",
    "ence",
    "er",
    "ic",
    "able",
    "ible",
    "ant",
    "ement",
    "ment",
    "ent",
    "ion",
    "sion",
    "tion",
    "ou",
    "ism",
    "ate",
    "iti",
    "ous",
    "ive",
    "ize",
    "eed",
    "ed",
    "ing",
    "s",
    "es",
    "ies",
    "sses",
    "ss",
    "y",
    "e",
    "ll",
    "at",
    "bl",
    "iz",
]
ENGLISH = [
    "caresses",
    "ponies",
    "ties",
    "caress",
    "cats",
    "feed",
    "agreed",
    "plastered",
    "bled",
    "motoring",
    "sing",
    "conflated",
    "troubled",
    "sized",
    "hopping",
    "tanned",
    "falling",
    "hissing",
    "fizzed",
    "failing",
    "filing",
    "happy",
    "sky",
    "relational",
    "conditional",
    "rational",
    "valenci",
    "hesitanci",
    "digitizer",
    "conformabli",
    "radicalli",
    "differentli",
    "vileli",
    "analogousli",
    "vietnamization",
    "predication",
    "operator",
    "feudalism",
    "decisiveness",
    "hopefulness",
    "callousness",
    "formaliti",
    "sensitiviti",
    "sensibiliti",
    "triplicate",
    "formative",
    "formalize",
    "electriciti",
    "electrical",
    "hopeful",
    "goodness",
    "revival",
    "allowance",
    "inference",
    "airliner",
    "gyroscopic",
    "adjustable",
    "defensible",
    "irritant",
    "replacement",
    "adjustment",
    "dependent",
    "adoption",
    "homologou",
    "communism",
    "activate",
    "angulariti",
    "homologous",
    "effective",
    "bowdlerize",
    "probate",
    "rate",
    "cease",
    "controll",
    "roll",
    "database",
    "migration",
    "billing",
    "measure",
    "yes",
    "eyes",
    "aed",
]


def fts5_stems(words: Iterable[str]) -> list[list[str]]:
    """The terms SQLite's FTS5 makes of each word with the store's tokenizer."""
    words = list(words)
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(w, tokenize='{TOKENIZE}', detail=none)")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
    conn.executemany("INSERT INTO t(rowid, w) VALUES (?, ?)", enumerate(words))
    found: list[list[str]] = [[] for _ in words]
    for doc, term in conn.execute("SELECT doc, term FROM v"):
        found[doc].append(term)
    conn.close()
    return found


def assert_same(words: list[str]) -> int:
    """Every stem given is FTS5's; returns how many were given (None: a stem FTS5 would cut
    below two letters, not guessed)."""
    sure = 0
    for word, terms in zip(words, fts5_stems(words), strict=True):
        mine = stem(word)
        if mine is not None:
            assert [mine] == terms, word
            sure += 1
    return sure


def test_stems_of_english_words_are_fts5s() -> None:
    assert assert_same(ENGLISH) == len(ENGLISH) - 1  # all but "aed" (cut to "a")
    assert stem("aed") is None
    assert stem("caresses") == "caress" and stem("relational") == "relat"
    assert stem("database") == "databas" and stem("billing") == "bill"


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text("aeiouybcdlmnrstwxz", max_size=7),
            st.sampled_from(SUFFIXES),
            st.sampled_from(["", "s", "ed", "ing", "e", "ly"]),
        ).map("".join),
        min_size=1,
        max_size=200,
    )
)
def test_stems_of_words_built_from_the_rules_suffixes_are_fts5s(words: list[str]) -> None:
    assert_same([w for w in words if w])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=70)))
def test_stems_of_any_ascii_words_are_fts5s(words: list[str]) -> None:
    for word, terms in zip(words, fts5_stems(words), strict=True):
        mine = stem(word)
        assert mine is None or [mine] == terms, word


@pytest.mark.skipif(not DEV.exists(), reason=f"the LoCoMo dev split is not at {DEV}")
def test_stems_of_every_locomo_word_are_fts5s() -> None:
    words = sorted(set(re.findall(r"[a-z0-9]+", json.dumps(json.loads(DEV.read_text())).lower())))
    assert len(words) > 5_000
    assert assert_same(words) >= len(words) - 10  # almost every word: few are left to counts


def test_not_a_plain_ascii_word_has_no_stem_here() -> None:
    for word in ["foo_bar", "café", "Upper", "two words", ""]:
        assert stem(word) is None
    assert stem("ab") == "ab" and stem("x" * 65) == "x" * 65  # too short or long: kept


def test_the_store_indexes_with_the_tokenizer_stemmed_here(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "s.db"))
    (sql,) = (
        store._conn().execute("SELECT sql FROM sqlite_master WHERE name = 'records_fts'").fetchone()
    )
    store.close()
    assert f"tokenize='{TOKENIZE}'" in sql
