"""The schema and the write statements of PostgresStore, apart from its Python.

Each write is one statement where it can be: a data-modifying CTE runs as one atomic statement, so
in autocommit mode a write costs one round trip instead of BEGIN, three statements and COMMIT.
The statements of a write that needs more than one run inside a transaction.
"""

from __future__ import annotations

from typing import Any

from .postgres_vectors import M003_VECTORS
from .rows import COLUMNS


def set_local(conn: Any, name: str, value: str) -> None:
    """Set `name` to `value` for the transaction open on `conn` only (SET LOCAL, which takes no
    parameters): in a pipeline, its statements up to its Sync are that transaction."""
    conn.execute("SELECT set_config(%s, %s, true)", (name, value))


def set_planner(conn: Any, planner: str) -> None:
    """A read's planner setting (`name=value`, e.g. `enable_indexscan=off`) for its transaction
    only: what the store's reads and bench/postgres_plans.py's EXPLAIN both set."""
    name, _, value = planner.partition("=")
    set_local(conn, name.strip(), value.strip())


# The rids of one partition of `record_words` (m009): partition k holds [k * WORDS_SPAN,
# (k + 1) * WORDS_SPAN) and is named record_words_k. 2^17: a search above a floor reads one or two
# partitions' postings at 1M records (the floor is within 20,000-100,000 rids of the newest).
WORDS_SPAN = 1 << 17
# The statement making partition `k` (a plpgsql expression of k).
_PARTITION = (
    "format('CREATE TABLE IF NOT EXISTS record_words_%s PARTITION OF record_words "
    f"FOR VALUES FROM (%s) TO (%s)', k, k * {WORDS_SPAN}, (k + 1) * {WORDS_SPAN})"
)

MIGRATIONS: list[tuple[str, str]] = [
    (
        "m001_records",
        """
        CREATE TABLE records (
            rid BIGSERIAL PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            project TEXT NOT NULL, milestone TEXT, session TEXT, author TEXT NOT NULL,
            kind TEXT NOT NULL, recipients TEXT NOT NULL, visibility TEXT NOT NULL,
            mentions TEXT NOT NULL, tags TEXT NOT NULL, refs TEXT NOT NULL,
            current_status TEXT, supersedes TEXT, reply_to TEXT, pinned INTEGER NOT NULL,
            created_at DOUBLE PRECISION NOT NULL, content TEXT NOT NULL, tokens INTEGER NOT NULL,
            content_hash TEXT NOT NULL, meta TEXT NOT NULL,
            tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED
        );
        CREATE INDEX records_project_time ON records(project, created_at);
        CREATE INDEX records_session_time ON records(project, session, created_at);
        CREATE INDEX records_kind_time ON records(project, kind, created_at);
        CREATE INDEX records_author_time ON records(project, author, created_at);
        CREATE INDEX records_status ON records(project, current_status, kind)
            WHERE current_status IS NOT NULL;
        CREATE INDEX records_pinned ON records(project, created_at) WHERE pinned = 1;
        CREATE INDEX records_reply ON records(reply_to) WHERE reply_to IS NOT NULL;
        CREATE INDEX records_supersedes ON records(supersedes) WHERE supersedes IS NOT NULL;
        CREATE INDEX records_tsv ON records USING GIN (tsv);
        CREATE TABLE addressing (
            name TEXT NOT NULL, how TEXT NOT NULL, rid BIGINT NOT NULL,
            PRIMARY KEY (name, how, rid)
        );
        CREATE INDEX addressing_rid ON addressing(rid);
        CREATE TABLE record_tags (tag TEXT NOT NULL, rid BIGINT NOT NULL, PRIMARY KEY (tag, rid));
        CREATE TABLE status_facts (
            seq BIGSERIAL PRIMARY KEY, record_id TEXT NOT NULL, status TEXT NOT NULL,
            by TEXT NOT NULL, at DOUBLE PRECISION NOT NULL, note TEXT NOT NULL DEFAULT ''
        );
        CREATE INDEX status_facts_record ON status_facts(record_id, seq);
        CREATE TABLE project_versions (project TEXT PRIMARY KEY, version BIGINT NOT NULL);
        """,
    ),
    (
        "m002_edges_kv_docs",
        """
        CREATE TABLE edges (
            project TEXT NOT NULL, src TEXT NOT NULL, dst TEXT NOT NULL, kind TEXT NOT NULL,
            PRIMARY KEY (project, src, kind, dst)
        );
        CREATE INDEX edges_dst ON edges(project, dst, kind);
        CREATE TABLE kv (
            project TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
            at DOUBLE PRECISION NOT NULL, PRIMARY KEY (project, key)
        );
        CREATE TABLE docs (
            collection TEXT NOT NULL, id TEXT NOT NULL, project TEXT NOT NULL, key TEXT,
            at DOUBLE PRECISION NOT NULL, data TEXT NOT NULL, PRIMARY KEY (collection, id)
        );
        CREATE INDEX docs_by_key ON docs(collection, project, key, at);
        """,
    ),
    ("m003_vectors", M003_VECTORS),
    (
        # A record's identity is (project, id): the same id in two projects is two records.
        # References are looked up within a project, so their indexes lead with it; a status
        # fact names its project.
        "m004_record_identity",
        """
        ALTER TABLE records DROP CONSTRAINT records_id_key;
        ALTER TABLE records ADD CONSTRAINT records_project_id_key UNIQUE (project, id);
        DROP INDEX records_reply;
        CREATE INDEX records_reply ON records(project, reply_to) WHERE reply_to IS NOT NULL;
        DROP INDEX records_supersedes;
        CREATE INDEX records_supersedes ON records(project, supersedes)
            WHERE supersedes IS NOT NULL;
        ALTER TABLE status_facts ADD COLUMN project TEXT NOT NULL DEFAULT '';
        UPDATE status_facts f SET project = r.project FROM records r WHERE r.id = f.record_id;
        DROP INDEX status_facts_record;
        CREATE INDEX status_facts_record ON status_facts(project, record_id, seq);
        """,
    ),
    (
        # The open tasks and questions, and the active decisions, are read newest first with a
        # LIMIT: in time order in the index, the scan stops after the limit instead of sorting
        # every open record of the project (7,336 at 100k: 39 ms). The kind is in the index so
        # that the kind filter needs no heap fetch.
        "m005_status_time",
        """
        DROP INDEX records_status;
        CREATE INDEX records_status ON records(project, current_status, created_at, kind)
            WHERE current_status IS NOT NULL;
        """,
    ),
    (
        # The project first in every key, so that the tables can be sharded by project (Citus
        # requires the distribution column in every primary key and unique constraint, and a
        # join on it to keep a join on one shard): addressing rows and tags name their project,
        # and every lookup by row id says the project too (docs/scaling.md).
        "m006_project_keys",
        """
        ALTER TABLE records DROP CONSTRAINT records_pkey;
        ALTER TABLE records ADD PRIMARY KEY (project, rid);
        -- The store's insertion order across projects (the newest rows for word statistics, the
        -- oldest unembedded): not unique, so sharding allows it; each shard keeps its own.
        CREATE INDEX records_rid ON records(rid);
        ALTER TABLE addressing ADD COLUMN project TEXT;
        UPDATE addressing a SET project = r.project FROM records r WHERE r.rid = a.rid;
        DELETE FROM addressing WHERE project IS NULL;
        ALTER TABLE addressing ALTER COLUMN project SET NOT NULL;
        ALTER TABLE addressing DROP CONSTRAINT addressing_pkey;
        ALTER TABLE addressing ADD PRIMARY KEY (project, name, how, rid);
        DROP INDEX addressing_rid;
        CREATE INDEX addressing_rid ON addressing(project, rid);
        ALTER TABLE record_tags ADD COLUMN project TEXT;
        UPDATE record_tags t SET project = r.project FROM records r WHERE r.rid = t.rid;
        DELETE FROM record_tags WHERE project IS NULL;
        ALTER TABLE record_tags ALTER COLUMN project SET NOT NULL;
        ALTER TABLE record_tags DROP CONSTRAINT record_tags_pkey;
        ALTER TABLE record_tags ADD PRIMARY KEY (project, tag, rid);
        ALTER TABLE status_facts DROP CONSTRAINT status_facts_pkey;
        ALTER TABLE status_facts ADD PRIMARY KEY (project, seq);
        ALTER TABLE vectors DROP CONSTRAINT vectors_pkey;
        ALTER TABLE vectors ADD PRIMARY KEY (project, rid, model);
        """,
    ),
    (
        # The full-text index keeps a short pending list (128 kB instead of 4 MB). Every search
        # scans the whole pending list (it is not indexed), which a busy writer filled to 4 MB
        # between cleanups: under bench/load.py's adds the full-text read took most of the
        # server's CPU, and assemble p50 was 470-570 ms at 20k records (about 100 ms with a short
        # list, twice the requests a second). Without any list (fastupdate off) the HTTP load ran
        # the same, and batched ingest was 2,902 records/s against 4,928 with 128 kB.
        "m007_fulltext_short_pending_list",
        """
        ALTER INDEX records_tsv SET (gin_pending_list_limit = 128);
        SELECT gin_clean_pending_list('records_tsv'::regclass);
        """,
    ),
    (
        # Each record's length in lexemes, which BM25 discounts by, kept beside its tsvector: the
        # ranking read every matched row's tsvector for it (a tool result's is several kB,
        # compressed and out of line), 2-4 ms of a 5-10 ms search at 100k records. The write
        # computes the tsvector once for both columns, so it is no longer a generated column.
        # Rows stored before stay NULL and are measured from their tsvector when read
        # (docs/postgres.md: how to fill them in).
        "m008_fulltext_lengths",
        """
        ALTER TABLE records ALTER COLUMN tsv DROP EXPRESSION;
        ALTER TABLE records ADD COLUMN tsv_len INTEGER;
        """,
    ),
    (
        # The words move out of `records` into a table partitioned by ranges of WORDS_SPAN rids,
        # each partition with a GIN index of its own: GIN answers all of a word's postings at
        # once, so a search above a rid floor (postgres_text.search_text) read every posting of
        # its words however few it kept; now it reads only the newest partitions' postings. The
        # columns the ranking filters on (visibility, author, recipients, which no write ever
        # changes) come along, so that a search reads no `records` row but the ones it returns.
        # A DEFAULT partition takes any rid no partition covers, so no insert can fail; the
        # writer makes the partitions ahead of its rids (PostgresText._grow_words). Every row
        # gets its length here (rows stored before m008 had none). The space of the columns
        # dropped from `records` is given back by `VACUUM FULL records` (docs/postgres.md).
        "m009_fulltext_partitions",
        f"""
        SET LOCAL maintenance_work_mem = '256MB';
        -- No write may land between the copy below and the end: its words would be lost.
        LOCK TABLE records IN SHARE MODE;
        CREATE TABLE record_words (
            project TEXT NOT NULL, rid BIGINT NOT NULL, visibility TEXT NOT NULL,
            author TEXT NOT NULL, recipients TEXT NOT NULL, tsv tsvector NOT NULL,
            tsv_len INTEGER NOT NULL
        ) PARTITION BY RANGE (rid);
        CREATE TABLE record_words_default PARTITION OF record_words DEFAULT;
        DO $$ DECLARE k bigint; BEGIN
            FOR k IN SELECT DISTINCT r.rid / {WORDS_SPAN} FROM records r
                UNION SELECT coalesce(max(r.rid), 0) / {WORDS_SPAN} + 1 FROM records r
                UNION SELECT 0
            LOOP
                EXECUTE {_PARTITION};
            END LOOP;
        END $$;
        INSERT INTO record_words
        SELECT project, rid, visibility, author, recipients, v.tsv, coalesce(tsv_len, length(v.tsv))
        FROM records CROSS JOIN LATERAL
            (SELECT coalesce(tsv, to_tsvector('english', content)) AS tsv OFFSET 0) v;
        ALTER TABLE record_words ADD PRIMARY KEY (project, rid);
        CREATE INDEX record_words_tsv ON record_words USING GIN (tsv)
            WITH (gin_pending_list_limit = 128);
        ALTER TABLE records DROP COLUMN tsv, DROP COLUMN tsv_len;
        """,
    ),
    (
        # Each addressing row carries its record's time, and an index reads a name's rows newest
        # first (SQLite's addressed_time): "the 25 newest records addressed to X" reads about 25
        # index entries and 25 records. Without it the read either sorted every record addressed
        # to X or walked the project's newest records testing each one's JSON, 7-20 ms a call at
        # 100k records once the newest thousands were addressed to nobody (bench/load.py's adds),
        # the PostgreSQL server's largest cost per HTTP request. Rows written by a worker of an
        # older version meanwhile have no time and read as the newest (docs/postgres.md). The
        # planner's statistics of the new column and index at once, not at autovacuum's next turn.
        "m010_addressing_time",
        """
        ALTER TABLE addressing ADD COLUMN created_at DOUBLE PRECISION;
        UPDATE addressing a SET created_at = r.created_at FROM records r WHERE r.rid = a.rid;
        CREATE INDEX addressing_time ON addressing (project, name, created_at, rid);
        ANALYZE addressing;
        """,
    ),
]

# Partition k of `record_words` made by a writer, before its rids reach it (PostgresText.
# _grow_words): an empty table attached to the parent, which takes a SHARE UPDATE EXCLUSIVE lock
# on it (searches and inserts go on), where `CREATE TABLE ... PARTITION OF` would take ACCESS
# EXCLUSIVE. The attach makes the partition's indexes (it is empty: no time). Rows in its range
# that the DEFAULT partition took meanwhile must leave it first (the attach refuses otherwise),
# and are put back through the parent, into the new partition.
GROW_WORDS = """
    CREATE TEMP TABLE IF NOT EXISTS cw_words_moved (LIKE record_words) ON COMMIT DELETE ROWS;
    WITH d AS (
        DELETE FROM record_words_default WHERE rid >= {lo} AND rid < {hi} RETURNING *
    ) INSERT INTO cw_words_moved SELECT * FROM d;
    CREATE TABLE record_words_{k} (LIKE record_words);
    ALTER TABLE record_words ATTACH PARTITION record_words_{k}
        FOR VALUES FROM ({lo}) TO ({hi});
    WITH m AS (DELETE FROM cw_words_moved RETURNING *) INSERT INTO record_words SELECT * FROM m;
"""

# Column types of record_to_row(), in COLUMNS order, for unnest().
_TYPES = ["text"] * 14 + ["int", "float8", "text", "int", "text", "text"]
_BUMP = """
    INSERT INTO project_versions (project, version) SELECT DISTINCT project, 1 FROM {src}
    ORDER BY project ON CONFLICT (project) DO UPDATE SET version = project_versions.version + 1
"""

# A whole batch of records with their addressing rows and tags, and the version bump of every
# project that got a record: one statement over `{src}`, the batch's rows in COLUMNS order and
# their position `n`; it returns each stored record's (project, id, rid). A (project, id) already
# stored inserts nothing and is not returned (also when another writer stored it a moment ago).
# The addressing rows and tags are unpacked in SQL from the JSON columns the records carry anyway,
# so the batch is sent once, as rows. Each tsvector is made once for two columns of
# `record_words`: OFFSET 0 keeps the planner from copying the expression into both.
_INSERT_FROM = f"""
    WITH ins AS (
        INSERT INTO records ({COLUMNS}) SELECT {COLUMNS} FROM {{src}} ORDER BY n
        ON CONFLICT (project, id) DO NOTHING
        RETURNING rid, id, project, recipients, mentions, tags, visibility, author, content, created_at
    ), words AS (
        INSERT INTO record_words (project, rid, visibility, author, recipients, tsv, tsv_len)
        SELECT ins.project, ins.rid, ins.visibility, ins.author, ins.recipients, v.tsv,
            length(v.tsv)
        FROM ins CROSS JOIN LATERAL
            (SELECT to_tsvector('english', ins.content) AS tsv OFFSET 0) v
    ), addr AS (
        INSERT INTO addressing (project, name, how, rid, created_at)
        SELECT ins.project, a.name, a.how, ins.rid, ins.created_at FROM ins CROSS JOIN LATERAL (
            SELECT value, 'to' FROM jsonb_array_elements_text(ins.recipients::jsonb)
            UNION ALL SELECT value, 'mention' FROM jsonb_array_elements_text(ins.mentions::jsonb)
        ) AS a(name, how)
        WHERE ins.recipients <> '[]' OR ins.mentions <> '[]'
        ON CONFLICT DO NOTHING
    ), tags AS (
        INSERT INTO record_tags (project, tag, rid)
        SELECT ins.project, t.tag, ins.rid
        FROM ins CROSS JOIN LATERAL jsonb_array_elements_text(ins.tags::jsonb) AS t(tag)
        WHERE ins.tags <> '[]'
        ON CONFLICT DO NOTHING
    ){{bump}}
    SELECT project, id, rid FROM ins
"""
_INSERT_BUMP = f", bump AS ({_BUMP.format(src='ins')})"

# A small batch (a single add above all) as parameter arrays: one round trip. INSERT_GROUP and
# INSERT_GROUP_STAGED bump no version: a group commit bumps the versions in its own last statement
# (postgres_writes.BUMP_GROUP).
_ARRAYS = f"unnest({', '.join(f'%s::{t}[]' for t in _TYPES)}) WITH ORDINALITY AS s({COLUMNS}, n)"
INSERT_RECORDS = _INSERT_FROM.format(src=_ARRAYS, bump=_INSERT_BUMP)
INSERT_GROUP = _INSERT_FROM.format(src=_ARRAYS, bump="")

# A large batch is copied into this table first (COPY is several times cheaper for the client
# than the parameter arrays, which psycopg builds in Python), then inserted by one statement.
# Made by the transaction that uses it, if its session has none: with PgBouncer in transaction
# mode the next transaction may run on another server session.
STAGE = f"""
    CREATE TEMP TABLE IF NOT EXISTS cw_stage (
        n int, {", ".join(f"{c} {t}" for c, t in zip(COLUMNS.split(", "), _TYPES, strict=True))}
    ) ON COMMIT DELETE ROWS
"""
COPY_STAGE = f"COPY cw_stage (n, {COLUMNS}) FROM STDIN"
INSERT_STAGED = _INSERT_FROM.format(src="cw_stage", bump=_INSERT_BUMP)
INSERT_GROUP_STAGED = _INSERT_FROM.format(src="cw_stage", bump="")

# A supersedes link: the old record's status fact (only if it exists in the writer's project, as
# in SQLite) and the edge. A separate statement, after the batch: a CTE does not see rows inserted
# by its own statement.
SUPERSEDE = """
    WITH upd AS (
        UPDATE records SET current_status = 'superseded'
        WHERE project = %(project)s AND id = %(old)s RETURNING id
    ), fact AS (
        INSERT INTO status_facts (project, record_id, status, by, at, note)
        SELECT %(project)s, id, 'superseded', %(by)s, %(at)s, %(note)s FROM upd
    )
    INSERT INTO edges VALUES (%(project)s, %(new)s, %(old)s, 'supersedes') ON CONFLICT DO NOTHING
"""

# A status fact, the record's current status and the version bump; nothing for an unknown id.
SET_STATUS = f"""
    WITH upd AS (
        UPDATE records SET current_status = %(status)s
        WHERE project = %(project)s AND id = ANY(%(ids)s)
        RETURNING id, project
    ), fact AS (
        INSERT INTO status_facts (project, record_id, status, by, at, note)
        SELECT project, id, %(status)s, %(by)s, %(at)s, %(note)s FROM upd
    )
    {_BUMP.format(src="upd")}
"""

ADD_EDGES = f"""
    WITH e AS (
        INSERT INTO edges (project, src, dst, kind)
        SELECT %(project)s, e.src, e.dst, e.kind
        FROM unnest(%(src)s::text[], %(dst)s::text[], %(kind)s::text[]) AS e(src, dst, kind)
        ON CONFLICT DO NOTHING
    ), p AS (SELECT %(project)s::text AS project)
    {_BUMP.format(src="p")}
"""

KV_SET = f"""
    WITH kv AS (
        INSERT INTO kv VALUES (%(project)s, %(key)s, %(value)s, %(at)s) ON CONFLICT (project, key)
        DO UPDATE SET value = excluded.value, at = excluded.at
    ), p AS (SELECT %(project)s::text AS project)
    {_BUMP.format(src="p")}
"""

# A document belongs to the project that wrote it first (as in SQLite, sqlite_docs.PUT).
PUT_DOC = """
    INSERT INTO docs VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (collection, id) DO UPDATE
    SET key = excluded.key, at = excluded.at, data = excluded.data
    WHERE docs.project = excluded.project
"""
