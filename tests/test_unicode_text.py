"""Full text finds words of any script in every store, and the query's words are the words
SQLite FTS5's unicode61 tokenizer indexes (they were ASCII-only: `[A-Za-z0-9_]+`)."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextwright import Engine
from contextwright.text import fold_latin, query_terms

CHATS = [
    ("Zoë", "we met at the café near the Москва river"),
    ("Ada Lovelace", "東京タワー was closed, so we went to 新宿 instead"),
    ("Grace Hopper", "my grandmother's recipe: पनीर with spinach 😀"),
    ("Ada Lovelace", "the Ελληνικά lessons start on Monday"),
    ("Grace Hopper", "lunch was fine"),
]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("the Москва river?", "Москва"),
        ("what about 東京タワー", "東京タワー"),
        ("Ελληνικά lessons", "Ελληνικά"),
        ("where was the café", "café"),
    ],
)
def test_full_text_finds_words_of_any_script(engine: Engine, query: str, expected: str) -> None:
    _add(engine)
    hits = engine.store.search_text("p", None, query, 3)
    assert hits and expected in hits[0].record.content


def test_an_unaccented_query_finds_the_accented_word_in_memory_and_sqlite(engine: Engine) -> None:
    if engine.store.url.startswith("postgresql"):
        pytest.skip("PostgreSQL's english configuration keeps accents")
    _add(engine)
    hits = engine.store.search_text("p", None, "the cafe", 3)
    assert hits and "café" in hits[0].record.content


def test_assemble_keeps_a_non_ascii_match(engine: Engine) -> None:
    _add(engine)
    engine.add_many(
        [{"project": "p", "author": "bot", "content": f"status update {i}"} for i in range(30)]
    )
    engine.register_agent("p", "bob")
    result = engine.assemble("p", "bob", "Москва", 120)
    assert "Москва" in result.text


def test_query_terms_are_unicode_words() -> None:
    assert query_terms("Zoë's café in Москва, 東京タワー!") == [
        "zoë",
        "café",
        "москва",
        "東京タワー",
    ]
    assert query_terms("cache_ttl and x") == ["cache", "ttl"]  # "_" separates, as in unicode61
    assert query_terms("猫 a b") == ["猫"]  # one ideograph is a word; one ASCII letter is not
    assert fold_latin("naïve café") == "naive cafe" and fold_latin("ελληνικά") == "ελληνικά"


_conn = sqlite3.connect(":memory:")
_conn.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='unicode61 remove_diacritics 0')")
_conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")


# Scripts and symbols whose Unicode categories are old (SQLite's tables and Python's may be of
# different Unicode versions for recently assigned characters).
ALPHABET = (
    "abcXYZ019 _-.,!?'\"\t\néüßçÆøœŁ²½³"
    "αβγΩλ ђжЯщ ابت ١٢ कखग् ाि 東京猫 ひらがな カタカナ 한국 😀🎉 №™©"
)


@given(st.text(alphabet=ALPHABET, max_size=40))
def test_query_terms_match_the_unicode61_tokenizer(text: str) -> None:
    """Every token FTS5 indexes (stopwords and one ASCII letter aside) is a query term, and no
    query term is something FTS5 would not index as one token."""
    with _conn:
        _conn.execute("DELETE FROM t")
        _conn.execute("INSERT INTO t(rowid, x) VALUES (1, ?)", (text,))
        indexed = [row[0] for row in _conn.execute("SELECT term FROM v ORDER BY offset")]
    expected = list(dict.fromkeys(w for w in indexed if w in query_terms(w)))
    assert query_terms(text) == expected


def _add(engine: Engine) -> None:
    for author, content in CHATS:
        engine.add(project="p", author=author, kind="message", content=content)
