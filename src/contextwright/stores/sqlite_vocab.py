"""How many records hold each word of a SQLite store's full-text index, read in one pass.

A large store leaves out of its full-text query the words found in more than COMMON_DF records
(sqlite_text.py). Counting one word's records is a statement that walks up to COMMON_DF + 1 of its
postings (about 0.2 ms for a common word), and a call whose task brings words not counted before
paid that for each of them: 0.3 ms at p50 and 0.7 ms on average of the full-text source of a
cold call at 100k records (docs/benchmarks.md).

Here the counts of every word of the index are read at once from FTS5's own vocabulary (fts5vocab;
0.12 s at 100k records), on a thread of their own, and read again once the store has grown by a
fifth, the rule the word-by-word counts follow too. The index holds stems (the porter tokenizer),
so a query word is looked up by the stem FTS5 makes of it (porter.py, 3 µs a word). A word this
does not know is counted one by one as before: a word rarer than KEEP_ABOVE (cheap to count), one
new since the last read, one that is not a plain ASCII word, or any word while the first read is
under way. So the words left out of a query are the same with or without it.
"""

from __future__ import annotations

import sqlite3
import threading
import urllib.parse
from collections.abc import Sequence

from .porter import stem

# Words found in this many records or fewer are left out of the counts read (and counted one by
# one when asked for): it bounds the memory to the index's postings over KEEP_ABOVE.
KEEP_ABOVE = 20
# The counts are read again once the store has grown by this factor.
GROWTH = 1.2


class Vocabulary:
    """The record counts of a store's index words, by stem, read at once."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._counts: tuple[int, dict[str, int]] | None = None  # (max rid then, records per stem)
        self._asked: int | None = None  # the max rid when a read was last started
        self._reading = threading.Lock()
        self._thread: threading.Thread | None = None

    def known(self, words: Sequence[str], top: int) -> dict[str, int]:
        """The records that hold each of `words`, for the words the last read knows; `top` is the
        store's max rid now. Starts a read when there is none or the store has outgrown it."""
        counts = self._counts
        if counts is None or top > counts[0] * GROWTH:
            # Once per growth: a read that failed (the file gone, a store without full text) is
            # not tried again on every call.
            if self._asked is None or top > self._asked * GROWTH:
                self._asked = top
                self.read_soon()
            return {}
        by_stem = counts[1]
        out: dict[str, int] = {}
        for word in words:
            s = stem(word)
            n = None if s is None else by_stem.get(s)
            if n is not None:
                out[word] = n
        return out

    def read_soon(self) -> None:
        """Read the counts on a thread of their own, unless a read is under way."""
        if not self._reading.acquire(blocking=False):
            return
        try:
            thread = threading.Thread(
                target=self._read_then_release, name="contextwright-vocabulary", daemon=True
            )
            self._thread = thread
            thread.start()
        except BaseException:
            self._reading.release()
            raise

    def read(self) -> None:
        """Read the counts now (on the calling thread; `read_soon` runs this on its own)."""
        try:
            uri = f"file:{urllib.parse.quote(self._path)}?mode=rw"  # never creates a file
            conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
            try:
                conn.execute("PRAGMA busy_timeout=10000")
                conn.execute(
                    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.cw_vocab "
                    "USING fts5vocab(main, records_fts, row)"
                )
                conn.execute("BEGIN")  # the max rid and the counts of one snapshot
                (top,) = conn.execute("SELECT coalesce(max(rid), 0) FROM records").fetchone()
                rows = conn.execute(
                    "SELECT term, doc FROM temp.cw_vocab WHERE doc > ?", (KEEP_ABOVE,)
                ).fetchall()
                conn.execute("COMMIT")
                self._counts = (int(top), dict(rows))
            finally:
                conn.close()
        except sqlite3.Error:
            pass  # nothing read: the words are counted one by one, as without this

    def _read_then_release(self) -> None:
        try:
            self.read()
        finally:
            self._reading.release()

    def wait(self, timeout: float | None = None) -> None:
        """Wait for a read under way (the store's `close` does)."""
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
