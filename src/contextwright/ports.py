"""The contract between the engine and its adapters, as Protocols. Nothing here does anything."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast, runtime_checkable

from .records import Record


@dataclass(frozen=True, slots=True)
class Query:
    """A filtered read of one project's records, as one agent may see them.

    `agent=None` reads without a visibility filter; only administrative paths (export, the
    record browser with an admin key) do that. Every assemble path passes the agent.
    """

    project: str
    agent: str | None
    kinds: tuple[str, ...] | None = None
    session: str | None = None
    author: str | None = None
    statuses: tuple[str, ...] | None = None
    addressed_to: str | None = None  # @mention or `to`
    pinned: bool | None = None
    tag: str | None = None
    milestone: str | None = None
    since: float | None = None
    before: float | None = None
    limit: int = 50
    newest_first: bool = True

    def admits(self, r: Record, status: str | None = None) -> bool:
        """Do the read's filters (visibility and limit aside) let `r` in, with `status` (its
        current status; by default the one it was stored with)?"""
        return (
            r.project == self.project
            and (self.kinds is None or r.kind in self.kinds)
            and (self.statuses is None or (status or r.status) in self.statuses)
            and (self.session is None or r.session == self.session)
            and (self.author is None or r.author == self.author)
            and (self.milestone is None or r.milestone == self.milestone)
            and (self.pinned is None or r.pinned == self.pinned)
            and (self.since is None or r.created_at >= self.since)
            and (self.before is None or r.created_at < self.before)
            and (
                self.addressed_to is None
                or self.addressed_to in r.to
                or self.addressed_to in r.mentions
            )
            and (self.tag is None or self.tag in r.tags)
        )


@dataclass(frozen=True, slots=True)
class Hit:
    record: Record
    score: float


def hits_for(
    store: Store,
    project: str,
    found: Sequence[tuple[str, float]],
    known: Mapping[str, Record] | None = None,
) -> list[Hit]:
    """(record id, score) pairs of `project` as Hits, in their order, read with one `get_many`:
    what `vector_search` gives on a store whose `vector_nearest` gives `found`. `known`: records
    of `project` read already (by id), taken as they are instead of read again."""
    known = known or {}
    missing = [i for i, _ in found if i not in known]
    records = {r.id: r for r in store.get_many(project, missing)} if missing else {}
    return [Hit(r, s) for i, s in found if (r := known.get(i) or records.get(i)) is not None]


class Store(Protocol):
    """Durable records, their status facts, edges, key-values, vectors and traces.

    A record's identity is (project, id): the same id in two projects names two records, and
    every method that takes record ids takes the project and reads or changes only its records.
    """

    url: str

    def add_many(self, records: Sequence[Record]) -> list[Record]:
        """Store all in one transaction. A (project, id) already stored with the same write
        (`same_write`) is returned as stored (idempotent); with another write the whole batch
        is refused with a ValidationError on `id`. `supersedes` marks a record of the writer's
        own project only.
        A record this call stores is returned as given, the very object: that is how a caller
        tells new records from existing ones (Engine.add_batch)."""

    def get_many(self, project: str, ids: Sequence[str]) -> list[Record]: ...

    def query(self, q: Query) -> list[Record]: ...

    def search_text(self, project: str, agent: str | None, text: str, limit: int) -> list[Hit]:
        """Full-text relevance (BM25); higher score is better."""

    def set_status(
        self, project: str, record_id: str, status: str, by: str, at: float, note: str = ""
    ) -> None:
        """Append a status fact; the record's effective status follows the latest fact."""

    def set_status_many(
        self,
        project: str,
        record_ids: Sequence[str],
        status: str,
        by: str,
        at: float,
        note: str = "",
    ) -> None:
        """The same fact for many records in one transaction (compaction marks hundreds)."""

    def status_history(self, project: str, record_id: str) -> list[dict[str, Any]]: ...

    def replies_to(self, project: str, ids: Sequence[str], agent: str | None) -> list[Record]:
        """Records of `project` replying to `ids`, oldest first in the store's own insertion
        order (not the writers' `created_at`)."""

    def superseded_by(self, project: str, ids: Sequence[str]) -> dict[str, str]:
        """Map of record id -> id of the record of `project` that superseded it."""

    def version(self, project: str) -> int:
        """Increases with every write to the project; cache keys include it."""

    def projects(self) -> list[str]: ...

    def agents(self, project: str) -> list[str]: ...

    def count(self, project: str | None = None) -> int: ...

    # Edges of the knowledge graph and between records (task -> dependency, ...).
    def add_edges(self, project: str, edges: Iterable[tuple[str, str, str]]) -> None: ...

    def edges(
        self,
        project: str,
        *,
        src: str | None = None,
        dst: str | None = None,
        kind: str | None = None,
    ) -> list[tuple[str, str, str]]: ...

    # Key-value memory, per project.
    def kv_set(self, project: str, key: str, value: str, at: float) -> None: ...

    def kv_get(self, project: str, key: str) -> str | None: ...

    def kv_list(self, project: str, prefix: str = "") -> dict[str, str]: ...

    # Traces and other JSON documents (agents, sessions), by collection and id.
    def put_doc(
        self,
        collection: str,
        doc_id: str,
        project: str,
        data: dict[str, Any],
        at: float,
        key: str | None = None,
    ) -> None: ...

    def get_doc(self, collection: str, project: str, doc_id: str) -> dict[str, Any] | None:
        """The document, if `project` wrote it: a `put_doc` of another project with the same
        id changes nothing."""

    def list_docs(
        self, collection: str, project: str, *, key: str | None = None, limit: int = 50
    ) -> list[dict[str, Any]]: ...

    def close(self) -> None: ...


class VectorStore(Store, Protocol):
    """A store that also keeps one vector per record per embedding model (see docs/vectors.md).

    A store that searches in this process (SQLite, memory) may also have `vector_nearest`, with
    the arguments of `vector_search`, returning (record id, cosine) pairs without reading the
    records: the vector source then runs it on the pool, beside the other sources' reads."""

    def unembedded(self, model: str, limit: int) -> list[Record]:
        """Oldest records first that have no vector from `model` yet."""

    def unembedded_count(self, model: str) -> int: ...

    def put_vectors(self, model: str, rows: Sequence[tuple[str, str, Any]]) -> None:
        """(project, record id, float32 vector) rows; records that do not exist are skipped."""

    def vector_search(
        self, project: str, agent: str | None, vector: Any, limit: int, model: str
    ) -> list[Hit]:
        """Nearest records by cosine that `agent` may see; higher score is better."""


class Tokenizer(Protocol):
    def count(self, text: str) -> int: ...

    def count_many(self, texts: Sequence[str]) -> list[int]: ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Iterable[int]) -> str: ...


class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> Any:
        """A float32 array of shape (len(texts), dim), rows L2-normalized."""


class Summarizer(Protocol):
    name: str

    def summarize(
        self, texts: Sequence[str], *, max_tokens: int, instructions: str = ""
    ) -> str: ...


# -- optional store capabilities ------------------------------------------------------------------
# Small Protocols a store implements when it can do more; the engine checks them with isinstance
# (through `capable`), never by looking attributes up by name.

_CAPABLE: dict[tuple[type, Any], bool] = {}


def capable(obj: object, capability: Any) -> bool:
    """`isinstance(obj, capability)` for one of the capability Protocols below, remembered per
    class: the check looks for members that a class has for all of its instances, and on Python
    3.11 it costs 7-18 µs, several times in every assemble call. An object whose class forwards
    attribute reads (`__getattr__`: a wrapper) is checked each time, since what it has depends on
    what it wraps."""
    cls = type(obj)
    if hasattr(cls, "__getattr__"):
        return isinstance(obj, capability)
    key = (cls, capability)
    hit = _CAPABLE.get(key)
    if hit is None:
        hit = _CAPABLE[key] = isinstance(obj, capability)
    return hit


@dataclass(frozen=True, slots=True)
class Written:
    """What one write of records did to one project: its store version just before the write
    and right after it, the records it stored there and their authors. A cache of the
    project's authors (or of anything else only records' authors change) that was read at
    `before` holds at `after` once `authors` are added; at any other version it must be read
    again. `records` are every record of the write, whoever asked for it: in a group commit
    (stores/groups.py) one write stores the batches of several callers, and a read kept at
    `before` holds at `after` only if none of them may enter it."""

    project: str
    before: int
    after: int
    authors: frozenset[str]
    # Required: a step that stored "nothing" would carry every read across the write.
    records: tuple[Record, ...] = field(compare=False)


@runtime_checkable
class ReportsWrites(Protocol):
    """`add_many` that also says which versions the write went from and to, per project, read
    inside the write's own transaction (SQLite), so that the writer's caches keyed by the
    version need not be read again after its own write."""

    def add_many_written(
        self, records: Sequence[Record]
    ) -> tuple[list[Record], tuple[Written, ...]]: ...


@runtime_checkable
class SettlesReads(Protocol):
    """Reads started in the background (SQLite's word counts) can be waited for."""

    def settle(self) -> None: ...


@runtime_checkable
class RanksHere(Protocol):
    """Ranks full text in this process, in SQL that holds no GIL while it works, in three steps
    the full-text source spreads over the pool and the calling thread (SQLite)."""

    def ranking_plan(self, project: str, agent: str | None, text: str, limit: int) -> Any: ...
    def ranking_rows(self, plan: Any) -> str | None: ...
    def ranking_result(self, plan: Any, found: str | None) -> list[Any]: ...
    def ranked_hits(self, ranked: Sequence[Any]) -> list[Hit]: ...


@runtime_checkable
class WarmHere(Protocol):
    """Knows whether this thread just wrote (its page cache is then the only warm one)."""

    def warm_here(self) -> bool: ...


@runtime_checkable
class BatchNeighbours(Protocol):
    """Reads the records said around many (session, time) anchors in one statement."""

    def neighbours(
        self, project: str, agent: str, anchors: Sequence[tuple[str | None, float]]
    ) -> list[tuple[list[Record], list[Record]]]: ...


@runtime_checkable
class ReadsFollowUps(Protocol):
    """Reads the replies to some records, the replacements of others and the records said around
    some (session, time) anchors in one round trip (PostgreSQL): what `replies_to`,
    `superseded_by` and `BatchNeighbours.neighbours` would give, an empty list being a read not
    made. The follow-up reads of an assemble call, known together once the sources have answered
    (assembly/chains.py `read_links`)."""

    def follow_ups(
        self,
        project: str,
        agent: str,
        replied: Sequence[str],
        replaced: Sequence[str],
        anchors: Sequence[tuple[str | None, float]],
    ) -> tuple[list[Record], dict[str, str], list[tuple[list[Record], list[Record]]]]: ...


@runtime_checkable
class ReadsMany(Protocol):
    """Answers many queries in one round trip (PostgreSQL's pipeline mode): each list as
    `query(q)` would give it, in the queries' order. The pipeline asks it for the reads of the
    sources that run on the calling thread before any of them runs (`SourceContext.prefetch`)."""

    def query_many(self, queries: Sequence[Query]) -> list[list[Record]]: ...


@runtime_checkable
class ReadsDocWithVersion(Protocol):
    """Reads a document and the project's store version in one round trip (PostgreSQL): what an
    assemble call reads first, its agent's document and the version its caches key on. `words`:
    the task's, whose full-text counts the store may read in the same round trip."""

    def doc_with_version(
        self, collection: str, project: str, doc_id: str, words: Sequence[str] = ()
    ) -> tuple[dict[str, Any] | None, int]: ...


@runtime_checkable
class SearchesAhead(Protocol):
    """Full-text search that reads the project's store version with it: (version, hits), the
    hits as `search_text` gives them and holding every record of that version (PostgreSQL). An
    assemble call starts it before its first read, so that the two overlap (assembly/ahead.py)."""

    def search_ahead(
        self, project: str, agent: str | None, text: str, limit: int
    ) -> tuple[int, list[Hit]]: ...


@runtime_checkable
class RemoteReads(Protocol):
    """`remote` is true where reads wait on another process (PostgreSQL): those overlap on the
    pool, so sources run there rather than on the calling thread."""

    remote: bool


def reads_remotely(store: object) -> bool:
    return capable(store, RemoteReads) and cast(RemoteReads, store).remote


@runtime_checkable
class KeepsVectors(Protocol):
    """The part of VectorStore the embedding worker and the vector source need."""

    def unembedded(self, model: str, limit: int) -> list[Record]: ...
    def unembedded_count(self, model: str) -> int: ...
    def put_vectors(self, model: str, rows: Sequence[tuple[str, str, Any]]) -> None: ...
    def vector_search(
        self, project: str, agent: str | None, vector: Any, limit: int, model: str
    ) -> list[Hit]: ...


@runtime_checkable
class Stages(Protocol):
    """Vector writes that cost the store's readers (SQLite: a write on one connection makes the
    others drop their page caches) can be held in memory, searchable, and written later."""

    def stage_vectors(self, model: str, records: Sequence[Record], vectors: Any) -> bool: ...
    def staged_count(self, model: str) -> int: ...
    def flush_vectors(self, model: str) -> None: ...


@runtime_checkable
class NearestHere(Protocol):
    """Searches its vectors in this process, answering ids and cosines without the records."""

    def vector_nearest(
        self, project: str, agent: str | None, vector: Any, limit: int, model: str
    ) -> list[tuple[str, float]]: ...


@runtime_checkable
class PutsDocs(Protocol):
    """Stores many documents of one collection in one transaction: each `(id, project, data, at,
    key)` as `put_doc` stores it. `durable=False`: the store may answer before they are on disk
    (PostgreSQL: `synchronous_commit` off for that transaction only), so that a crash of the
    database server can lose the last moment's documents, never a record nor anything written
    durably; traces/writer.py writes traces so, without waiting for a flush of the write-ahead
    log that adds wait for."""

    def put_docs(
        self,
        collection: str,
        docs: Sequence[tuple[str, str, dict[str, Any], float, str | None]],
        *,
        durable: bool = True,
    ) -> None: ...
