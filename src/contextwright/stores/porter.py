"""The stem FTS5's `porter` tokenizer gives an ASCII word, computed in Python.

The SQLite store's full-text index holds stems (`tokenize='porter unicode61'`), and the counts of
its words (sqlite_vocab.py) are by stem, so a query word is looked up by the stem FTS5 would make
of it. This is M. F. Porter's algorithm (1980) with the choices of FTS5's implementation: words
shorter than 3 or longer than 64 characters are kept as they are; `y` is a vowel after a consonant
(and anywhere but first for the "stem has a vowel" test); the step-2 rules are those of the revised
algorithm (`bli` to `ble`, `logi` to `log`); of the suffixes that share a second-to-last letter,
the first listed that ends the word decides, met or not.

Where FTS5 would read outside the word (a stem cut to one letter), `stem` says None rather than
guess. tests/test_porter.py checks it against SQLite's own tokenizer word for word.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# The tokenizer whose stems these are: `records_fts`'s (sqlite_schema.py; tests/test_porter.py
# checks they agree).
TOKENIZE = "porter unicode61"
MAX_TOKEN = 64  # longer tokens are not stemmed (FTS5_PORTER_MAX_TOKEN)
_ASCII_WORD = re.compile(r"[a-z0-9]+")


def _vowel(c: str, after_consonant: bool) -> bool:
    return c in "aeiou" or (after_consonant and c == "y")


def _gobble_vc(s: str, start: int, end: int, prev_consonant: bool) -> int:
    """The index just past the first vowel-then-consonant run of s[start:end], or 0."""
    cons = prev_consonant
    i = start
    while i < end:
        cons = not _vowel(s[i], cons)
        if not cons:
            break
        i += 1
    i += 1
    while i < end:
        cons = not _vowel(s[i], cons)
        if cons:
            return i + 1
        i += 1
    return 0


def _m_gt0(s: str, n: int) -> bool:
    return _gobble_vc(s, 0, n, False) > 0


def _m_gt1(s: str, n: int) -> bool:
    first = _gobble_vc(s, 0, n, False)
    return first > 0 and _gobble_vc(s, first, n, True) > 0


def _m_eq1(s: str, n: int) -> bool:
    first = _gobble_vc(s, 0, n, False)
    return first > 0 and _gobble_vc(s, first, n, True) == 0


def _o_star(s: str, n: int) -> bool:
    """Consonant, vowel, consonant at the end of s[:n], the last not w, x or y."""
    if s[n - 1] in "wxy":
        return False
    mask = 0
    cons = False
    for i in range(n):
        cons = not _vowel(s[i], cons)
        mask = (mask << 1) + int(cons)
    return (mask & 7) == 5


def _has_vowel(s: str, n: int) -> bool:
    return any(_vowel(s[i], i > 0) for i in range(n))


def _m_gt1_s_or_t(s: str, n: int) -> bool:
    return s[n - 1] in "st" and _m_gt1(s, n)


Rule = tuple[str, str, Callable[[str, int], bool]]  # suffix, replacement, test on the stem

# By the suffixes' second-to-last letter, in FTS5's order.
_STEP2: dict[str, list[Rule]] = {
    "a": [("ational", "ate", _m_gt0), ("tional", "tion", _m_gt0)],
    "c": [("enci", "ence", _m_gt0), ("anci", "ance", _m_gt0)],
    "e": [("izer", "ize", _m_gt0)],
    "g": [("logi", "log", _m_gt0)],
    "l": [
        ("bli", "ble", _m_gt0),
        ("alli", "al", _m_gt0),
        ("entli", "ent", _m_gt0),
        ("eli", "e", _m_gt0),
        ("ousli", "ous", _m_gt0),
    ],
    "o": [("ization", "ize", _m_gt0), ("ation", "ate", _m_gt0), ("ator", "ate", _m_gt0)],
    "s": [
        ("alism", "al", _m_gt0),
        ("iveness", "ive", _m_gt0),
        ("fulness", "ful", _m_gt0),
        ("ousness", "ous", _m_gt0),
    ],
    "t": [("aliti", "al", _m_gt0), ("iviti", "ive", _m_gt0), ("biliti", "ble", _m_gt0)],
}
_STEP3: dict[str, list[Rule]] = {
    "a": [("ical", "ic", _m_gt0)],
    "s": [("ness", "", _m_gt0)],
    "t": [("icate", "ic", _m_gt0), ("iciti", "ic", _m_gt0)],
    "u": [("ful", "", _m_gt0)],
    "v": [("ative", "", _m_gt0)],
    "z": [("alize", "al", _m_gt0)],
}
_STEP4: dict[str, list[Rule]] = {
    "a": [("al", "", _m_gt1)],
    "c": [("ance", "", _m_gt1), ("ence", "", _m_gt1)],
    "e": [("er", "", _m_gt1)],
    "i": [("ic", "", _m_gt1)],
    "l": [("able", "", _m_gt1), ("ible", "", _m_gt1)],
    "n": [("ant", "", _m_gt1), ("ement", "", _m_gt1), ("ment", "", _m_gt1), ("ent", "", _m_gt1)],
    "o": [("ion", "", _m_gt1_s_or_t), ("ou", "", _m_gt1)],
    "s": [("ism", "", _m_gt1)],
    "t": [("ate", "", _m_gt1), ("iti", "", _m_gt1)],
    "u": [("ous", "", _m_gt1)],
    "v": [("ive", "", _m_gt1)],
    "z": [("ize", "", _m_gt1)],
}


def _apply(s: str, rules: dict[str, list[Rule]]) -> str:
    for suffix, replacement, test in rules.get(s[-2], ()):
        if len(s) > len(suffix) and s.endswith(suffix):
            stem_len = len(s) - len(suffix)
            return s[:stem_len] + replacement if test(s, stem_len) else s
    return s


def stem(word: str) -> str | None:
    """FTS5's porter stem of a lowercase ASCII word (letters and digits); None where this cannot
    be sure (another word, or a stem FTS5 would cut below two letters)."""
    if not _ASCII_WORD.fullmatch(word):
        return None
    if len(word) < 3 or len(word) > MAX_TOKEN:
        return word
    s = word
    # Step 1a: plurals.
    if s[-1] == "s":
        if s[-2] == "e":
            sses_or_ies = (len(s) > 4 and s[-4:-2] == "ss") or (len(s) > 3 and s[-3] == "i")
            s = s[:-2] if sses_or_ies else s[:-1]
        elif s[-2] != "s":
            s = s[:-1]
    # Step 1b: -eed, -ed, -ing.
    cut = False
    if s[-2] == "e":
        if len(s) > 3 and s.endswith("eed"):
            if _m_gt0(s, len(s) - 3):
                s = s[:-1]
        elif len(s) > 2 and s.endswith("ed") and _has_vowel(s, len(s) - 2):
            s, cut = s[:-2], True
    elif s[-2] == "n" and len(s) > 3 and s.endswith("ing") and _has_vowel(s, len(s) - 3):
        s, cut = s[:-3], True
    if cut:
        if len(s) < 2:
            return None  # FTS5 would look before the word
        if len(s) > 2 and s.endswith(("at", "bl", "iz")):
            s += "e"
        else:
            c = s[-1]
            if c not in "aeiou" and c not in "lsz" and c == s[-2]:
                s = s[:-1]
            elif _m_eq1(s, len(s)) and _o_star(s, len(s)):
                s += "e"
    # Step 1c: y after a vowel-bearing stem.
    if s[-1] == "y" and _has_vowel(s, len(s) - 1):
        s = s[:-1] + "i"
    if len(s) < 2:
        return None
    # Steps 2 to 4: suffixes by their second-to-last letter.
    s = _apply(s, _STEP2)
    s = _apply(s, _STEP3)
    if len(s) < 2:
        return None
    s = _apply(s, _STEP4)
    # Step 5a: a final e.
    if s[-1] == "e":
        n = len(s) - 1
        if _m_gt1(s, n) or (_m_eq1(s, n) and not _o_star(s, n)):
            s = s[:-1]
    # Step 5b: a final double l.
    if len(s) > 1 and s.endswith("ll") and _m_gt1(s, len(s) - 1):
        s = s[:-1]
    return s
