"""`cw_bm25` on the SQLite store's connections: FTS5's bm25() with the documents' lengths kept in
memory, from the compiled build's C kernel (stores/_fts.c). The same scores as bm25(), to the
last bit (tests/test_fts_kernel.py); ranking the newest 500 matches at 100k records took 0.27
instead of 0.75 ms (docs/benchmarks.md).

The kernel calls SQLite through the functions of the library that Python's own `sqlite3` module
uses, so that it and the connection are one SQLite, and it reaches a connection's handle at the
place CPython 3.11 to 3.13 keep it (the first field of the connection object). It checks that
handle against the file the store opened before it uses it. Where any of this does not hold (no
compiled build, CONTEXTWRIGHT_PURE, another Python, another layout), `register` says no and the
store ranks with bm25().
"""

from __future__ import annotations

import ctypes
import os
import sqlite3
import sys
from typing import Any

from ..compiled import kernel

# The SQLite functions the kernel calls, in the order of its table (`cw_fts_bind`).
FUNCTIONS = (
    "sqlite3_prepare_v2",
    "sqlite3_bind_pointer",
    "sqlite3_bind_int64",
    "sqlite3_step",
    "sqlite3_finalize",
    "sqlite3_column_int64",
    "sqlite3_column_blob",
    "sqlite3_column_bytes",
    "sqlite3_result_double",
    "sqlite3_result_error_code",
    "sqlite3_db_filename",
)
# Where `pysqlite_Connection` keeps its `sqlite3 *db`: right after the object's header.
KNOWN_LAYOUT = sys.implementation.name == "cpython" and (3, 11) <= sys.version_info[:2] <= (3, 13)


def _load() -> Any:
    """`cw_fts_register`, bound to the sqlite3 module's own SQLite, or None."""
    lib = kernel("fts")
    if lib is None or not KNOWN_LAYOUT:
        return None
    try:
        import _sqlite3

        # dlsym through the module's handle finds the SQLite it was linked with.
        own = ctypes.CDLL(_sqlite3.__file__)
        table = (ctypes.c_void_p * len(FUNCTIONS))(
            *[ctypes.cast(getattr(own, name), ctypes.c_void_p).value for name in FUNCTIONS]
        )
    except (AttributeError, ImportError, OSError):  # SQLite linked in, its names not exported
        return None
    if lib.cw_fts_bind(table, len(FUNCTIONS)) != 0:
        return None
    register = lib.cw_fts_register
    register.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    register.restype = ctypes.c_int
    return register


_REGISTER = _load()


def available() -> bool:
    """Is cw_bm25 there to register (the compiled build's kernel, on a known Python)?"""
    return _REGISTER is not None


def register(conn: sqlite3.Connection, path: str) -> bool:
    """Add cw_bm25 to `conn`, a new connection to the file at `path`; False where it cannot be
    (see the module's docstring), and the connection is left as it was."""
    if _REGISTER is None or type(conn) is not sqlite3.Connection:
        return False
    handle = ctypes.c_void_p.from_address(id(conn) + object.__basicsize__).value
    # SQLite reports a file's full path, links resolved; an in-memory database has none.
    name = "" if path == ":memory:" else os.path.realpath(path)
    return bool(handle) and _REGISTER(handle, os.fsencode(name)) == 0
