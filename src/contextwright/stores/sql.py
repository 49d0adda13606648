"""SQL text shared by the SQL stores: edges, documents, a project's authors; their migrations' check."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..errors import StoreError


def edges_sql(
    project: str, src: str | None, dst: str | None, kind: str | None, mark: str
) -> tuple[str, list[str]]:
    """The edges query of the SQL stores; `mark` is the driver's placeholder (? or %s)."""
    where, params = [f"project = {mark}"], [project]
    for col, value in (("src", src), ("dst", dst), ("kind", kind)):
        if value is not None:
            where.append(f"{col} = {mark}")
            params.append(value)
    sql = f"SELECT src, dst, kind FROM edges WHERE {' AND '.join(where)} ORDER BY src, kind, dst"
    return sql, params


def docs_sql(
    collection: str, project: str, key: str | None, limit: int, mark: str
) -> tuple[str, list[Any]]:
    """The `list_docs` query of the SQL stores, newest first; `mark` is the driver's placeholder."""
    where, params = [f"collection = {mark}", f"project = {mark}"], [collection, project]
    if key is not None:
        where.append(f"key = {mark}")
        params.append(key)
    sql = f"SELECT data FROM docs WHERE {' AND '.join(where)} ORDER BY at DESC LIMIT {mark}"
    return sql, [*params, limit]


# A project's distinct authors by a skip scan of the (project, author, created_at) index, which
# both SQL stores have: one seek per author instead of a pass over every record. `{p}` is the
# driver's placeholder for the project.
AUTHORS_SQL = (
    "WITH RECURSIVE a(author) AS ("
    "SELECT min(author) FROM records WHERE project = {p} "
    "UNION ALL SELECT (SELECT min(author) FROM records WHERE project = {p} AND author > a.author) "
    "FROM a WHERE a.author IS NOT NULL) "
    "SELECT author FROM a WHERE author IS NOT NULL"
)


def refuse_newer(url: str, applied: Iterable[str], known: Iterable[str]) -> None:
    """A store that a newer version migrated (a migration this code does not know) is refused:
    its writes would miss what the migration changed (SQLite's m007 triggers, PostgreSQL's m009
    word rows)."""
    newer = sorted(set(applied) - set(known))
    if newer:
        raise StoreError(
            f"cannot open {url}: a newer contextwright migrated it ({', '.join(newer)} unknown "
            "here); upgrade contextwright to use it"
        )
