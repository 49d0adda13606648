"""The SQLite store's schema: named migrations, each a SQL script applied once in its own
transaction and recorded in the `migrations` table (see SQLiteStore._migrate)."""

from __future__ import annotations

from .rows import COLUMNS
from .sqlite_vectors import M003_VECTORS

# A migration is a name and a SQL script; each runs once, in its own transaction, and is recorded.
Migration = tuple[str, str]


M001_RECORDS = """
        CREATE TABLE records (
            rid INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            project TEXT NOT NULL, milestone TEXT, session TEXT, author TEXT NOT NULL,
            kind TEXT NOT NULL, recipients TEXT NOT NULL, visibility TEXT NOT NULL,
            mentions TEXT NOT NULL, tags TEXT NOT NULL, refs TEXT NOT NULL,
            current_status TEXT, supersedes TEXT, reply_to TEXT, pinned INTEGER NOT NULL,
            created_at REAL NOT NULL, content TEXT NOT NULL, tokens INTEGER NOT NULL,
            content_hash TEXT NOT NULL, meta TEXT NOT NULL
        );
        CREATE INDEX records_project_time ON records(project, created_at);
        CREATE INDEX records_session_time ON records(project, session, created_at);
        CREATE INDEX records_kind_time ON records(project, kind, created_at);
        CREATE INDEX records_author_time ON records(project, author, created_at);
        CREATE INDEX records_status ON records(project, current_status, kind)
            WHERE current_status IS NOT NULL;
        CREATE INDEX records_pinned ON records(project, pinned) WHERE pinned = 1;
        CREATE INDEX records_reply ON records(reply_to) WHERE reply_to IS NOT NULL;
        CREATE INDEX records_supersedes ON records(supersedes) WHERE supersedes IS NOT NULL;
        CREATE TABLE addressing (
            name TEXT NOT NULL, how TEXT NOT NULL, rid INTEGER NOT NULL,
            PRIMARY KEY (name, how, rid)
        ) WITHOUT ROWID;
        CREATE TABLE record_tags (
            tag TEXT NOT NULL, rid INTEGER NOT NULL, PRIMARY KEY (tag, rid)
        ) WITHOUT ROWID;
        CREATE TABLE status_facts (
            seq INTEGER PRIMARY KEY, record_id TEXT NOT NULL, status TEXT NOT NULL,
            by TEXT NOT NULL, at REAL NOT NULL, note TEXT NOT NULL DEFAULT ''
        );
        CREATE INDEX status_facts_record ON status_facts(record_id, seq);
        CREATE VIRTUAL TABLE records_fts USING fts5(
            content, content='records', content_rowid='rid', tokenize='porter unicode61'
        );
        CREATE TABLE project_versions (project TEXT PRIMARY KEY, version INTEGER NOT NULL);
"""


M002_EDGES_KV_DOCS = """
        CREATE TABLE edges (
            project TEXT NOT NULL, src TEXT NOT NULL, dst TEXT NOT NULL, kind TEXT NOT NULL,
            PRIMARY KEY (project, src, kind, dst)
        ) WITHOUT ROWID;
        CREATE INDEX edges_dst ON edges(project, dst, kind);
        CREATE TABLE kv (
            project TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, at REAL NOT NULL,
            PRIMARY KEY (project, key)
        ) WITHOUT ROWID;
        CREATE TABLE docs (
            collection TEXT NOT NULL, id TEXT NOT NULL, project TEXT NOT NULL, key TEXT,
            at REAL NOT NULL, data TEXT NOT NULL, PRIMARY KEY (collection, id)
        );
        CREATE INDEX docs_by_key ON docs(collection, project, key, at);
"""


# "Records addressed to X, newest first" walks this index and stops at the limit, instead of
# sorting everything ever addressed to X. One row per (name, record), whether by `to` or @mention.
M005_ADDRESSED_BY_TIME = """
        CREATE TABLE addressed_time (
            name TEXT NOT NULL, at REAL NOT NULL, rid INTEGER NOT NULL,
            PRIMARY KEY (name, at, rid)
        ) WITHOUT ROWID;
        INSERT OR IGNORE INTO addressed_time
            SELECT a.name, r.created_at, a.rid FROM addressing a JOIN records r ON r.rid = a.rid;
"""


# A record's identity is (project, id): the same id in two projects is two records. SQLite cannot
# change a UNIQUE constraint, so the table is rebuilt, keeping each row's `rid` (the full-text
# index is keyed by it: content_rowid='rid'; so are addressing, tags and vectors). References are
# looked up within a project, so their indexes lead with it; a status fact names its project.
M006_RECORD_IDENTITY = f"""
        CREATE TABLE records_by_project (
            rid INTEGER PRIMARY KEY,
            id TEXT NOT NULL,
            project TEXT NOT NULL, milestone TEXT, session TEXT, author TEXT NOT NULL,
            kind TEXT NOT NULL, recipients TEXT NOT NULL, visibility TEXT NOT NULL,
            mentions TEXT NOT NULL, tags TEXT NOT NULL, refs TEXT NOT NULL,
            current_status TEXT, supersedes TEXT, reply_to TEXT, pinned INTEGER NOT NULL,
            created_at REAL NOT NULL, content TEXT NOT NULL, tokens INTEGER NOT NULL,
            content_hash TEXT NOT NULL, meta TEXT NOT NULL,
            UNIQUE (project, id)
        );
        INSERT INTO records_by_project (rid, {COLUMNS}) SELECT rid, {COLUMNS} FROM records;
        DROP TABLE records;
        ALTER TABLE records_by_project RENAME TO records;
        CREATE INDEX records_project_time ON records(project, created_at);
        CREATE INDEX records_session_time ON records(project, session, created_at);
        CREATE INDEX records_kind_time ON records(project, kind, created_at);
        CREATE INDEX records_author_time ON records(project, author, created_at);
        CREATE INDEX records_status ON records(project, current_status, kind)
            WHERE current_status IS NOT NULL;
        CREATE INDEX records_pinned ON records(project, pinned) WHERE pinned = 1;
        CREATE INDEX records_pinned_time ON records(project, created_at) WHERE pinned = 1;
        CREATE INDEX records_reply ON records(project, reply_to) WHERE reply_to IS NOT NULL;
        CREATE INDEX records_supersedes ON records(project, supersedes)
            WHERE supersedes IS NOT NULL;
        ALTER TABLE status_facts ADD COLUMN project TEXT NOT NULL DEFAULT '';
        UPDATE status_facts SET project = coalesce(
            (SELECT r.project FROM records r WHERE r.id = status_facts.record_id), '');
        DROP INDEX status_facts_record;
        CREATE INDEX status_facts_record ON status_facts(project, record_id, seq);
"""


# What storing a record writes beside its row (its full-text row, who it addresses, its tags),
# written by SQLite within the row's own INSERT: each statement that the store executes inside
# the write lock hands the GIL over, and the writer waits for the busy assembling threads to give
# it back (up to a switch interval, 5 ms, each), so an add was seven or more such waits; with the
# triggers, one INSERT writes them all (SQLiteStore._insert_new). Those of names and tags fire only
# for rows that have some (most have none). A later migration that rebuilds `records` drops the
# triggers with the table and must create them again.
M007_WRITTEN_BY_TRIGGER = """
        CREATE TRIGGER records_written AFTER INSERT ON records BEGIN
            INSERT INTO records_fts(rowid, content) VALUES (new.rid, new.content);
        END;
        CREATE TRIGGER records_addressed AFTER INSERT ON records
        WHEN new.recipients <> '[]' OR new.mentions <> '[]' BEGIN
            INSERT OR IGNORE INTO addressing
                SELECT value, 'to', new.rid FROM json_each(new.recipients)
                UNION ALL SELECT value, 'mention', new.rid FROM json_each(new.mentions);
            INSERT OR IGNORE INTO addressed_time
                SELECT value, new.created_at, new.rid FROM json_each(new.recipients)
                UNION ALL SELECT value, new.created_at, new.rid FROM json_each(new.mentions);
        END;
        CREATE TRIGGER records_tagged AFTER INSERT ON records WHEN new.tags <> '[]' BEGIN
            INSERT OR IGNORE INTO record_tags SELECT value, new.rid FROM json_each(new.tags);
        END;
"""


MIGRATIONS: list[Migration] = [
    ("m001_records", M001_RECORDS),
    ("m002_edges_kv_docs", M002_EDGES_KV_DOCS),
    ("m003_vectors", M003_VECTORS),
    # Pinned records newest first is read on every assemble: keep it one short index range.
    (
        "m004_pinned_by_time",
        "CREATE INDEX records_pinned_time ON records(project, created_at) WHERE pinned = 1;",
    ),
    ("m005_addressed_by_time", M005_ADDRESSED_BY_TIME),
    ("m006_record_identity", M006_RECORD_IDENTITY),
    ("m007_written_by_trigger", M007_WRITTEN_BY_TRIGGER),
]
