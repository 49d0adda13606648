"""Vectors in process memory: one int8 matrix per (project, model), searched by brute force.

Stores keep vectors durably as int8 with one scale per vector (a quarter of float32 on disk, and
the recall benchmark shows no loss; see docs/vectors.md), and this matrix keeps them the same way:
38 MB for 100k MiniLM vectors instead of 154 MB of float32. It grows by appending and is shared
by every call in the process. Rows are dequantized only when they are ranked, so cosines are the
same as from a float32 matrix. Up to EXACT_UP_TO rows the search is exact. Above that, one sign
bit per dimension preselects the OVERSAMPLE x limit rows nearest by Hamming distance (ties at the
cut included), and those are ranked exactly: 99% of the exact top 10 on LoCoMo. An HNSW index
(usearch) took minutes to build at 100k on this machine, and importing it beside onnxruntime
crashed the process, so it was not chosen. Visibility is enforced here, before
ranking: a row the agent may not see never competes for a place.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

F32 = np.dtype[np.float32]
EXACT_UP_TO = 20_000
OVERSAMPLE = 10
DISTANCES_KEPT = 16  # queries whose distances are kept (about 200 KB each per 100k rows)


def quantize_rows(
    rows: np.ndarray[Any, Any],
) -> tuple[np.ndarray[Any, np.dtype[np.int8]], np.ndarray[Any, np.dtype[np.float64]]]:
    """int8 rows and, per row, the scale that restores it: v ≈ int8 * scale."""
    v = np.asarray(rows, dtype=np.float32)
    peak = np.abs(v).max(axis=1).astype(np.float64) if v.shape[1] else np.zeros(len(v))
    scales = np.where(peak > 1e-30, peak / 127.0, 1.0)  # a zero (or subnormal) row stays zero
    data = np.clip(np.rint(v / scales.astype(np.float32)[:, None]), -127, 127).astype(np.int8)
    return data, scales


def quantize(vec: np.ndarray[Any, Any]) -> tuple[bytes, float]:
    """int8 bytes and the scale that restores them, for one vector as the stores keep it."""
    data, scales = quantize_rows(np.asarray(vec, dtype=np.float32).reshape(1, -1))
    return data[0].tobytes(), float(scales[0])


def dequantize(data: bytes, scale: float) -> np.ndarray[Any, F32]:
    return np.frombuffer(data, dtype=np.int8).astype(np.float32) * np.float32(scale)


def signs(vec: np.ndarray[Any, Any], words: int) -> np.ndarray[Any, np.dtype[np.uint64]]:
    """One bit per dimension (positive or not), packed into `words` 64-bit words."""
    bits = np.packbits(np.asarray(vec).ravel() > 0)
    padded = np.zeros(words * 8, dtype=np.uint8)
    padded[: bits.size] = bits
    return padded.view(np.uint64)


def hamming(
    bits: np.ndarray[Any, np.dtype[np.uint64]],
    qbits: np.ndarray[Any, np.dtype[np.uint64]],
    lo: int,
    n: int,
    mask: np.ndarray[Any, np.dtype[np.bool_]] | None,
    far: int,
) -> tuple[np.ndarray[Any, np.dtype[np.uint16]], np.ndarray[Any, np.dtype[np.int64]]]:
    """The Hamming distances of rows [lo, n) of `bits` (sign bits, word-major) to `qbits`, `far`
    where `mask` (of rows [lo, n)) is False, and their histogram over 0..far."""
    words = bits.shape[0]
    if n - lo <= FEW:
        return _hamming_few(bits, qbits, lo, n, mask, far)
    dist: np.ndarray[Any, np.dtype[np.uint16]] | None = None
    # Three words' counts (at most 192) are summed in bytes and only then widened: half the
    # uint16 passes over the rows (384 dimensions: one widening add instead of five).
    for at in range(0, words, 3):
        part = np.bitwise_count(bits[at, lo:n] ^ qbits[at])
        for w in range(at + 1, min(at + 3, words)):
            part += np.bitwise_count(bits[w, lo:n] ^ qbits[w])
        if dist is None:
            dist = part.astype(np.uint16)
        else:
            dist += part
    assert dist is not None
    if mask is not None:
        np.putmask(dist, ~mask, far)
    return dist, np.bincount(dist, minlength=far + 1).astype(np.int64)


# Up to this many rows, `hamming` counts in Python: the agent loop adds a row or two a turn, and
# two dozen numpy calls on arrays of one row cost more than the counting (0.06-0.1 ms a turn).
FEW = 4


def _hamming_few(
    bits: np.ndarray[Any, np.dtype[np.uint64]],
    qbits: np.ndarray[Any, np.dtype[np.uint64]],
    lo: int,
    n: int,
    mask: np.ndarray[Any, np.dtype[np.bool_]] | None,
    far: int,
) -> tuple[np.ndarray[Any, np.dtype[np.uint16]], np.ndarray[Any, np.dtype[np.int64]]]:
    query = qbits.tolist()
    rows = bits[:, lo:n].T.tolist()
    seen = [True] * (n - lo) if mask is None else mask.tolist()
    found = [
        sum((w ^ qw).bit_count() for w, qw in zip(row, query, strict=True)) if ok else far
        for row, ok in zip(rows, seen, strict=True)
    ]
    hist = np.zeros(far + 1, dtype=np.int64)
    for d in found:
        hist[d] += 1
    return np.asarray(found, dtype=np.uint16), hist


@dataclass(frozen=True, slots=True)
class Access:
    """Who may see one vector's record (the Record.visible_to rule, kept beside the row)."""

    author: str
    visibility: str
    to: tuple[str, ...] = ()

    @classmethod
    def of_row(cls, author: str, visibility: str, recipients: str) -> Access:
        """From a record's columns (`recipients` as stored, JSON): only a direct record's
        recipients decide who sees it (`allows`), so the others keep none."""
        return cls(
            author, visibility, tuple(json.loads(recipients)) if visibility == "direct" else ()
        )

    def allows(self, agent: str) -> bool:
        if self.visibility == "project" or self.author == agent:
            return True
        return self.visibility == "direct" and agent in self.to


class VectorMatrix:
    """Rows appended in embedding order; a record embedded again overwrites its row."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        # Record ids by row, in an object array: the cyclic GC does not walk it, where a list of
        # 100k ids added 4-5 ms to every full collection (it visits each string). `row` (ids to
        # rows, strings to ints) is a dict the GC leaves alone by itself.
        self._ids = np.empty(0, dtype=object)
        self._n = 0
        self.row: dict[str, int] = {}
        # int8 rows and one scale each, as stored: a quarter of float32 in memory (38 MB for 100k
        # MiniLM vectors instead of 154), and the same ranking (the int8 values are the vectors).
        self._q = np.zeros((0, dim), dtype=np.int8)
        self._scale = np.zeros(0, dtype=np.float32)
        self._restricted: dict[int, Access] = {}
        self._public = np.zeros(0, dtype=bool)
        # Sign bits, word-major: one contiguous row per 64 dimensions is 6x faster to scan.
        self._bits = np.zeros(((dim + 63) // 64, 0), dtype=np.uint64)
        # Who may see each row, per agent that searched: built once from `_restricted` (a Python
        # pass over every direct row), then kept up to date row by row as rows are added.
        self._masks: dict[str, np.ndarray[Any, np.dtype[np.bool_]]] = {}
        # The last Hamming distances per (query, who searched), extended to rows added since:
        # an agent asks the same task turn after turn (its embedding is cached), and between two
        # turns a row or two is added. `_rewrites` counts rows overwritten, which voids them all.
        self._dists: dict[tuple[bytes, str | None], _Distances] = {}
        self._rewrites = 0
        self.seq = 0  # the store's high-water mark of what this matrix holds
        self.lock = threading.Lock()

    def __len__(self) -> int:
        return self._n

    @property
    def ids(self) -> np.ndarray[Any, np.dtype[np.object_]]:
        """The record id of each row (a view: index it, take its len)."""
        return self._ids[: self._n]

    @property
    def nbytes(self) -> int:
        n = self._n
        return int(self._q[:n].nbytes + self._scale[:n].nbytes + self._bits[:, :n].nbytes)

    def reserve(self, rows: int) -> None:
        """Room for `rows` rows at once (a bulk load then allocates exactly once)."""
        with self.lock:
            self._grow(rows)

    def _grow(self, need: int) -> None:
        n = self._n
        if need <= self._q.shape[0]:
            return
        cap = max(need, 2 * self._q.shape[0], 1024) if n else need
        grown = np.zeros((cap, self.dim), dtype=np.int8)
        grown[:n] = self._q[:n]
        scale = np.zeros(cap, dtype=np.float32)
        scale[:n] = self._scale[:n]
        public = np.zeros(cap, dtype=bool)
        public[:n] = self._public[:n]
        bits = np.zeros((self._bits.shape[0], cap), dtype=np.uint64)
        bits[:, :n] = self._bits[:, :n]
        ids = np.empty(cap, dtype=object)
        ids[:n] = self._ids[:n]
        self._q, self._scale, self._public, self._bits = grown, scale, public, bits
        self._ids = ids
        for agent, mask in self._masks.items():
            wider = np.zeros(cap, dtype=bool)
            wider[:n] = mask[:n]
            self._masks[agent] = wider

    def add(self, ids: Sequence[str], vecs: np.ndarray[Any, Any], access: Sequence[Access]) -> None:
        """Float rows, quantized as the stores quantize them (`quantize_rows`)."""
        data, scales = quantize_rows(np.asarray(vecs, dtype=np.float32).reshape(len(ids), self.dim))
        self.add_quantized(ids, data, scales.astype(np.float32), access)

    def add_quantized(
        self,
        ids: Sequence[str],
        data: np.ndarray[Any, np.dtype[np.int8]],
        scales: np.ndarray[Any, Any],
        access: Sequence[Access],
    ) -> None:
        """int8 rows and their scales, as the stores keep them (v = int8 * scale)."""
        words = self._bits.shape[0]
        packed = np.zeros((len(ids), words * 8), dtype=np.uint8)
        packed[:, : (self.dim + 7) // 8] = np.packbits(data > 0, axis=1)
        bits = packed.view(np.uint64)
        if len(access) != len(ids):
            raise ValueError(f"{len(ids)} ids but {len(access)} access rules")
        public = np.fromiter((a.visibility == "project" for a in access), bool, len(ids))
        with self.lock:
            self._grow(self._n + len(ids))
            at = np.empty(len(ids), dtype=np.intp)
            for i, rid in enumerate(ids):
                row = self.row.get(rid)
                if row is None:
                    row = self.row[rid] = self._n
                    self._ids[row] = rid
                    self._n += 1
                else:
                    self._rewrites += 1
                at[i] = row
            # Whole columns at once: loading 100k rows on the first search is one copy per chunk.
            self._q[at] = data
            self._scale[at] = scales
            self._bits[:, at] = bits.T
            self._public[at] = public
            for i in range(len(ids)):
                if public[i]:
                    if self._restricted:
                        self._restricted.pop(int(at[i]), None)
                else:
                    self._restricted[int(at[i])] = access[i]
            for agent, mask in self._masks.items():  # the new rows' visibility, agent by agent
                for i, at_row in enumerate(at.tolist()):
                    mask[at_row] = public[i] or access[i].allows(agent)

    def search(
        self, query: np.ndarray[Any, Any], agent: str | None, limit: int
    ) -> list[tuple[str, float]]:
        """Top `limit` (record id, cosine) among rows `agent` may see; None sees every row."""
        with self.lock:
            n = self._n
            if n == 0 or limit <= 0:
                return []
            q = np.asarray(query, dtype=np.float32).ravel()
            mask = None
            if agent is not None and self._restricted:
                mask = self._masks.get(agent)
                if mask is None:
                    mask = self._public.copy()
                    for at, acc in self._restricted.items():
                        if acc.allows(agent):
                            mask[at] = True
                    if len(self._masks) > 256:
                        self._masks.clear()
                    self._masks[agent] = mask
                mask = mask[:n]
            kept = None
            if n <= EXACT_UP_TO:
                rows = np.arange(n)
                scores = self._dot(rows, q)
                if mask is not None:
                    scores = np.where(mask, scores, -np.inf)
            else:
                wide = min(max(limit * OVERSAMPLE, 200), n)
                rows, scores, kept = self._scored(
                    q, n, mask, wide, agent if mask is not None else None
                )
                if kept is not None and kept.found is not None and kept.limit == limit:
                    # The same rows and cosines as the last search of this query by this
                    # reader: the same answer (the agent loop, while no new row is near).
                    return list(kept.found)
                if mask is not None:
                    scores = np.where(mask[rows], scores, -np.inf)
            k = min(limit, len(rows))
            if n > EXACT_UP_TO:  # a few hundred rows, ascending: equal cosines keep row order
                top = np.argsort(-scores, kind="stable")[:k]
            else:
                top = np.argpartition(-scores, k - 1)[:k] if k < len(rows) else np.arange(len(rows))
                top = top[np.argsort(-scores[top], kind="stable")]
            # Whole arrays, not an element at a time: 80 hits cost 0.1-0.15 ms in numpy scalars.
            best = scores[top]
            seen = np.isfinite(best)  # rows the agent may not see score -inf
            if not seen.all():
                top, best = top[seen], best[seen]
            found = list(zip(self._ids[rows[top]].tolist(), best.tolist(), strict=True))
            if kept is not None:
                kept.found, kept.limit = tuple(found), limit
            return found

    def _dot(
        self, rows: np.ndarray[Any, np.dtype[np.intp]], q: np.ndarray[Any, F32]
    ) -> np.ndarray[Any, F32]:
        """Cosines of `rows` with `q`, in chunks so that the float32 copy of the int8 rows
        stays a few MB (an exact scan of 20k rows would otherwise copy 30 MB)."""
        out = np.empty(len(rows), dtype=np.float32)
        for at in range(0, len(rows), 4096):
            part = rows[at : at + 4096]
            # Dequantize, then each row's own sum of products: a matrix product (BLAS) sums a
            # row in an order that depends on how many rows it is given, so the cosines kept for
            # rows scored one by one as they were added differed in their last bit from a fresh
            # search's, and with them a trace, or the order of a near-tie. This costs about 1.3x
            # the product's time (0.2 ms against 0.14 for 800 rows).
            out[at : at + 4096] = np.einsum("ij,j->i", self._q[part] * self._scale[part, None], q)
        return out

    def _scored(
        self,
        q: np.ndarray[Any, Any],
        n: int,
        mask: np.ndarray[Any, Any] | None,
        wide: int,
        who: str | None = None,
    ) -> tuple[np.ndarray[Any, np.dtype[np.intp]], np.ndarray[Any, F32], _Distances | None]:
        """The preselected rows, ascending: every row whose sign bits are at or below the Hamming
        distance of the query's `wide`-th nearest, ties included; and their cosines with the
        query. Distances are small integers, so a histogram finds that cut in one pass, 3x faster
        than a partial sort of 100k. The distances, their histogram, the rows at or below the cut
        and their cosines are kept for the next search of the same query by the same reader
        (`who`, None when `mask` is): an agent asks the same task turn after turn, a turn adds a
        row or two, and the next search counts and ranks only those (while the cut stays). In the
        agent loop the cosines of the same few hundred rows cost 0.3-0.4 ms a turn: their rows
        are read from a 38 MB matrix that the time between turns has pushed out of the caches.
        Also the distances kept (None when every row was ranked), with the last search's answer
        where these rows and cosines are the ones it ranked."""
        if wide >= n:
            rows = np.arange(n)
            return rows, self._dot(rows, q), None
        words = self._bits.shape[0]
        far = words * 64 + 1  # past any real distance: rows the agent may not see
        key = (q.tobytes(), who)
        kept = self._dists.get(key)
        if kept is None or kept.rewrites != self._rewrites or kept.n > n:
            empty = np.zeros(0, dtype=np.uint16)
            kept = _Distances(empty, np.zeros(far + 1, np.int64), 0, self._rewrites)
        lo = kept.n
        if lo < n:
            part = None if mask is None else mask[lo:n]
            if kept.qbits is None:
                kept.qbits = signs(q, words)
            dist, counts = hamming(self._bits, kept.qbits, lo, n, part, far)
            np.add(kept.hist, counts, out=kept.hist)
            if lo == 0:
                kept.dist = dist
            elif len(kept.dist) < n:
                # Room for many turns' rows: copying 200 KB of distances to add a row or two
                # took a loop turn's search 0.1 ms (a fresh allocation, its pages faulted in).
                grown = np.empty(n + max(1024, n // 8), dtype=np.uint16)
                grown[:lo] = kept.dist[:lo]
                kept.dist = grown
            if lo:
                kept.dist[lo:n] = dist
            kept.n = n
            if key not in self._dists and len(self._dists) >= DISTANCES_KEPT:
                del self._dists[next(iter(self._dists))]  # the oldest query
            self._dists[key] = kept
        cut = int(np.searchsorted(np.cumsum(kept.hist), wide))
        if kept.cut == cut:  # rows [0, lo) were ranked by the last search, at this cut
            new = np.flatnonzero(kept.dist[lo:n] <= cut) + lo
            if len(new):
                kept.found = None
                kept.rows = np.concatenate([kept.rows, new])
                kept.scores = np.concatenate([kept.scores, self._dot(new, q)])
        else:
            kept.found = None
            kept.rows = np.flatnonzero(kept.dist[:n] <= cut)
            kept.scores = self._dot(kept.rows, q)
        kept.cut = cut
        return kept.rows, kept.scores, kept


@dataclass
class _Distances:
    """One query's Hamming distances to rows [0, n), as one reader sees them, and their
    histogram, and the rows and cosines of its last search (VectorMatrix._scored)."""

    dist: np.ndarray[Any, np.dtype[np.uint16]]  # rows [0, n), then room for more
    hist: np.ndarray[Any, np.dtype[np.int64]]
    n: int
    rewrites: int  # VectorMatrix._rewrites when the first row was counted
    # The last search's cut (-1 before the first), the rows at or below it, and their cosines.
    cut: int = -1
    rows: np.ndarray[Any, np.dtype[np.intp]] = field(default_factory=lambda: np.zeros(0, np.intp))
    scores: np.ndarray[Any, F32] = field(default_factory=lambda: np.zeros(0, np.float32))
    # That search's answer and the limit it was asked for; None once the rows ranked change.
    found: tuple[tuple[str, float], ...] | None = None
    limit: int = 0
    qbits: np.ndarray[Any, np.dtype[np.uint64]] | None = None  # the query's sign bits


class MemoryVectors:
    """The vector half of MemoryStore (mixed in; uses its `_records`, `_lock` and `_current`)."""

    _records: dict[tuple[str, str], Any]  # by (project, id)
    _lock: Any
    _current: Any

    def _vec_state(self) -> dict[tuple[str, str], VectorMatrix]:
        state: dict[tuple[str, str], VectorMatrix] | None = getattr(self, "_vec_matrices", None)
        if state is None:
            state = {}
            self._vec_matrices = state
            self._vec_done: set[tuple[str, tuple[str, str]]] = set()
        return state

    def unembedded(self, model: str, limit: int) -> list[Any]:
        with self._lock:
            self._vec_state()
            out = []
            for key, r in self._records.items():
                if (model, key) not in self._vec_done:
                    out.append(r)
                    if len(out) >= limit:
                        break
            return out

    def unembedded_count(self, model: str) -> int:
        with self._lock:
            self._vec_state()
            return sum(1 for key in self._records if (model, key) not in self._vec_done)

    def put_vectors(self, model: str, rows: Sequence[tuple[str, str, Any]]) -> None:
        with self._lock:
            state = self._vec_state()
            for project, rid, vec in rows:
                r = self._records.get((project, rid))
                if r is None:
                    continue
                data, scale = quantize(vec)
                v = dequantize(data, scale)
                m = state.setdefault((r.project, model), VectorMatrix(v.shape[0]))
                m.add([rid], v[None, :], [Access(r.author, r.visibility, tuple(r.to))])
                self._vec_done.add((model, (project, rid)))

    def vector_nearest(
        self, project: str, agent: str | None, vector: Any, limit: int, model: str
    ) -> list[tuple[str, float]]:
        with self._lock:
            m = self._vec_state().get((project, model))
        return [] if m is None else m.search(vector, agent, limit)

    def vector_search(
        self, project: str, agent: str | None, vector: Any, limit: int, model: str
    ) -> list[Any]:
        from ..ports import hits_for

        found = self.vector_nearest(project, agent, vector, limit, model)
        return hits_for(self, project, found)  # type: ignore[arg-type]
