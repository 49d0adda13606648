"""An in-process store for tests and ephemeral use; passes the same contract suite as SQLite."""

from __future__ import annotations

import copy
import json
import math
import threading
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from ..ports import Hit, Query
from ..records import Record
from ..text import fold_latin, query_terms, words
from ._vectors import MemoryVectors
from .batches import RecordId, plan_batch


class MemoryStore(MemoryVectors):
    url = "memory://"

    def __init__(self) -> None:
        self._lock = threading.RLock()
        # Everything about a record is keyed by its identity, (project, id).
        self._records: dict[RecordId, Record] = {}
        self._seq: dict[RecordId, int] = {}  # insertion order: the store's own time
        self._status: dict[RecordId, str | None] = {}
        self._facts: defaultdict[RecordId, list[dict[str, Any]]] = defaultdict(list)
        self._versions: Counter[str] = Counter()
        self._edges: set[tuple[str, str, str, str]] = set()
        self._kv: dict[tuple[str, str], str] = {}
        self._docs: dict[tuple[str, str], tuple[str, str | None, float, dict[str, Any]]] = {}
        self._terms: dict[RecordId, Counter[str]] = {}

    def _current(self, r: Record) -> Record:
        status = self._status.get((r.project, r.id), r.status)
        return r if status == r.status else replace(r, status=status)

    def add_many(self, records: Sequence[Record]) -> list[Record]:
        with self._lock:
            stored = {
                (r.project, r.id): self._current(self._records[(r.project, r.id)])
                for r in records
                if (r.project, r.id) in self._records
            }
            out, fresh = plan_batch(records, stored)  # refuses before anything changes
            for r in fresh:
                key = (r.project, r.id)
                self._records[key] = r
                self._seq[key] = len(self._seq)
                self._terms[key] = Counter(_all_words(r.content))
                self._versions[r.project] += 1
            # After the whole batch, so that a record may supersede one later in the same batch.
            for r in fresh:
                if r.supersedes:
                    key = (r.project, r.supersedes)
                    self._set(key, "superseded", r.author, r.created_at, f"by {r.id}")
                    self._edges.add((r.project, r.id, r.supersedes, "supersedes"))
            return out

    def _time_sort(self, records: list[Record], newest_first: bool) -> list[Record]:
        # (created_at, insertion order): the same order SQLite gives by (created_at, rid).
        return sorted(
            records,
            key=lambda r: (r.created_at, self._seq[(r.project, r.id)]),
            reverse=newest_first,
        )

    def get_many(self, project: str, ids: Sequence[str]) -> list[Record]:
        with self._lock:
            found = (self._records.get((project, i)) for i in ids)
            return [self._current(r) for r in found if r is not None]

    def _matches(self, r: Record, q: Query) -> bool:
        if q.agent is not None and not r.visible_to(q.agent):
            return False
        return q.admits(r, self._status.get((r.project, r.id), r.status))

    def query(self, q: Query) -> list[Record]:
        with self._lock:
            found = [self._current(r) for r in self._records.values() if self._matches(r, q)]
        return self._time_sort(found, q.newest_first)[: q.limit]

    def search_text(self, project: str, agent: str | None, text: str, limit: int) -> list[Hit]:
        terms = list(dict.fromkeys(fold_latin(t) for t in query_terms(text)))
        if not terms or limit <= 0:
            return []
        with self._lock:
            docs = [
                r
                for r in self._records.values()
                if r.project == project and (agent is None or r.visible_to(agent))
            ]
            n = len(docs) or 1
            avg = sum(sum(self._terms[(project, r.id)].values()) for r in docs) / n or 1.0
            df = {t: sum(1 for r in docs if t in self._terms[(project, r.id)]) for t in terms}
            hits = []
            for r in docs:
                tf = self._terms[(project, r.id)]
                length = sum(tf.values())
                score = 0.0
                for t in terms:
                    f = tf.get(t, 0)
                    if f:
                        idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                        score += idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * length / avg))
                if score > 0:
                    hits.append(Hit(self._current(r), score))
        hits.sort(key=lambda h: (-h.score, h.record.id))
        return hits[:limit]

    def _set(self, key: RecordId, status: str, by: str, at: float, note: str) -> bool:
        if key not in self._records:
            return False
        self._status[key] = status
        self._facts[key].append({"status": status, "by": by, "at": at, "note": note})
        return True

    def set_status(
        self, project: str, record_id: str, status: str, by: str, at: float, note: str = ""
    ) -> None:
        self.set_status_many(project, [record_id], status, by, at, note)

    def set_status_many(
        self,
        project: str,
        record_ids: Sequence[str],
        status: str,
        by: str,
        at: float,
        note: str = "",
    ) -> None:
        with self._lock:
            changed = [
                rid
                for rid in dict.fromkeys(record_ids)
                if self._set((project, rid), status, by, at, note)
            ]
            if changed:
                self._versions[project] += 1

    def status_history(self, project: str, record_id: str) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(f) for f in self._facts.get((project, record_id), [])]

    def replies_to(self, project: str, ids: Sequence[str], agent: str | None) -> list[Record]:
        wanted = set(ids)
        with self._lock:
            found = [
                (self._seq[key], self._current(r))
                for key, r in self._records.items()
                if r.project == project
                and r.reply_to in wanted
                and (agent is None or r.visible_to(agent))
            ]
        return [r for _, r in sorted(found, key=lambda pair: pair[0])]

    def superseded_by(self, project: str, ids: Sequence[str]) -> dict[str, str]:
        wanted = set(ids)
        with self._lock:
            pairs = sorted(
                (r.created_at, self._seq[key], r.supersedes, r.id)
                for key, r in self._records.items()
                if r.project == project and r.supersedes in wanted
            )
        return {old: new for _, _, old, new in pairs if old is not None}

    def version(self, project: str) -> int:
        with self._lock:
            return self._versions[project]

    def projects(self) -> list[str]:
        with self._lock:
            return sorted(p for p, v in self._versions.items() if v)

    def agents(self, project: str) -> list[str]:
        with self._lock:
            return sorted({r.author for r in self._records.values() if r.project == project})

    def count(self, project: str | None = None) -> int:
        with self._lock:
            return sum(1 for r in self._records.values() if project is None or r.project == project)

    def add_edges(self, project: str, edges: Iterable[tuple[str, str, str]]) -> None:
        rows = [(project, s, d, k) for s, d, k in edges]
        with self._lock:
            self._edges.update(rows)
            if rows:
                self._versions[project] += 1

    def edges(
        self,
        project: str,
        *,
        src: str | None = None,
        dst: str | None = None,
        kind: str | None = None,
    ) -> list[tuple[str, str, str]]:
        with self._lock:
            found = [
                (s, d, k)
                for p, s, d, k in self._edges
                if p == project and src in (None, s) and dst in (None, d) and kind in (None, k)
            ]
        return sorted(found, key=lambda e: (e[0], e[2], e[1]))

    def kv_set(self, project: str, key: str, value: str, at: float) -> None:
        with self._lock:
            self._kv[(project, key)] = value
            self._versions[project] += 1

    def kv_get(self, project: str, key: str) -> str | None:
        with self._lock:
            return self._kv.get((project, key))

    def kv_list(self, project: str, prefix: str = "") -> dict[str, str]:
        with self._lock:
            return {
                k: v
                for (p, k), v in sorted(self._kv.items())
                if p == project and k.startswith(prefix)
            }

    def put_doc(
        self,
        collection: str,
        doc_id: str,
        project: str,
        data: dict[str, Any],
        at: float,
        key: str | None = None,
    ) -> None:
        with self._lock:
            found = self._docs.get((collection, doc_id))
            if found is not None and found[0] != project:
                return  # another project's document: as the SQL stores, change nothing
            # Kept as its JSON reads back, as the SQL stores keep every document (the trace
            # writer hands over tuples where a trace read back has lists).
            kept = json.loads(json.dumps(data, default=str))
            self._docs[(collection, doc_id)] = (project, key, at, kept)

    def get_doc(self, collection: str, project: str, doc_id: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._docs.get((collection, doc_id))
            if found is None or found[0] != project:
                return None
            return copy.deepcopy(found[3])

    def list_docs(
        self, collection: str, project: str, *, key: str | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        with self._lock:
            rows = [
                (at, copy.deepcopy(data))
                for (c, _), (p, k, at, data) in self._docs.items()
                if c == collection and p == project and (key is None or k == key)
            ]
        rows.sort(key=lambda row: -row[0])
        return [data for _, data in rows[:limit]]

    def close(self) -> None:
        pass


def _all_words(text: str) -> list[str]:
    """Every word occurrence (BM25 needs term frequencies, not unique terms), folded as SQLite's
    index folds them, so that "cafe" finds "café" in either store."""
    return [fold_latin(w) for w in words(text)]
