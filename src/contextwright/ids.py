"""Time-sortable ids (ULID layout, Crockford base32): sorting ids sorts records by creation time."""

from __future__ import annotations

import os
import threading
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_lock = threading.Lock()
_last_ms = 0
_last_rand = 0


def _encode(value: int, length: int) -> str:
    out = []
    for _ in range(length):
        out.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(out))


# The OS's random bytes, read 4 KB at a time: a read per id released the GIL, and under load the
# request thread waited behind every other thread to take it back (a millisecond and more).
_pool = b""
_at = 0


def _random80() -> int:
    """80 random bits from the pool (the caller holds `_lock`)."""
    global _pool, _at
    if _at + 10 > len(_pool):
        _pool, _at = os.urandom(4000), 0
    _at += 10
    return int.from_bytes(_pool[_at - 10 : _at], "big") >> 2


def _forget() -> None:
    """In a forked child: never hand out the bytes, or continue the sequence, of the parent."""
    global _pool, _at, _last_ms
    _pool, _at, _last_ms = b"", 0, 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)


def new_id(at_ms: int | None = None) -> str:
    """A 26-character id; ids made in the same millisecond still sort in creation order."""
    global _last_ms, _last_rand
    ms = int(time.time() * 1000) if at_ms is None else at_ms
    with _lock:
        if ms == _last_ms:
            _last_rand += 1
        else:
            _last_ms = ms
            _last_rand = _random80()
        rand = _last_rand & ((1 << 80) - 1)
    return _encode(ms, 10) + _encode(rand, 16)
