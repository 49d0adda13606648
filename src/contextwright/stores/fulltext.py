"""Full-text query building and the bounds on a ranking's cost, shared by the SQL stores."""

from __future__ import annotations

from ..text import query_terms


def fts_match(text: str) -> str | None:
    terms = query_terms(text)
    return " OR ".join(f'"{t}"' for t in terms) if terms else None


# What bounds a full-text ranking's cost on a large store, the same in both SQL stores
# (sqlite_text.py, postgres_text.py), so that they rank alike: words found in more records than
# COMMON_DF are left out of the BM25 query (the rarest word is always kept), and only the newest
# LARGE_WINDOW matches of the project (or 8 times the limit, if more) are ranked.
COMMON_DF = 2000
LARGE_WINDOW = 500
