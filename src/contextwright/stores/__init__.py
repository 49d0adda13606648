"""Store adapters behind `ports.Store`, opened by URL: memory://, sqlite:///path.db, postgresql://..."""

from __future__ import annotations

from ..errors import ValidationError
from ..ports import Store


def open_store(url: str) -> Store:
    if not isinstance(url, str) or not url:
        raise ValidationError(
            "url", url, "use memory://, sqlite:///path/to/file.db or postgresql://..."
        )
    if url == "memory://" or url.startswith("memory://"):
        from .memory import MemoryStore

        return MemoryStore()
    if url.startswith("sqlite:///"):
        from .sqlite import SQLiteStore

        path = url[len("sqlite:///") :]
        if not path:
            raise ValidationError("url", url, "name a file: sqlite:///path/to/file.db")
        return SQLiteStore(path)
    if url.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStore

        return PostgresStore(url)
    raise ValidationError(
        "url",
        url,
        "use memory://, sqlite:///path/to/file.db (the default) or postgresql://user@host/db",
    )
