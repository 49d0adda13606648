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


def new_id(at_ms: int | None = None) -> str:
    """A 26-character id; ids made in the same millisecond still sort in creation order."""
    global _last_ms, _last_rand
    ms = int(time.time() * 1000) if at_ms is None else at_ms
    with _lock:
        if ms == _last_ms:
            _last_rand += 1
        else:
            _last_ms = ms
            _last_rand = int.from_bytes(os.urandom(10), "big") >> 2
        rand = _last_rand & ((1 << 80) - 1)
    return _encode(ms, 10) + _encode(rand, 16)
