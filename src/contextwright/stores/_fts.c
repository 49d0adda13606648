/* `cw_bm25`: FTS5's bm25() with the documents' lengths kept in memory, for the full-text
 * ranking of stores/sqlite_text.py. Same formula, same order of operations, same doubles
 * (tests/test_fts_kernel.py compares the two on every query it generates).
 *
 * Why: bm25() asks FTS5 for each ranked row's length (xColumnSize), which runs a statement on
 * the %_docsize table per row: 0.55 of the 0.75 ms that ranking the newest 500 matches took at
 * 100k records. Here a connection keeps the lengths in an array by rowid (2 bytes a row), read
 * from %_docsize a chunk of CHUNK rows at a time, the first time a ranking meets a row of that
 * chunk (a range read: 0.2 us a row, against 1.1 for the statement per row). At most
 * LOADS_PER_STATEMENT chunks are read in one statement, so that the first rankings on a large
 * store do not pay for all of it at once (100k rows: 17-23 ms); a row beyond them is asked for
 * as bm25() does, and kept. A length never changes: the store only inserts into its index
 * (records are immutable).
 *
 * Linked against nothing: every sqlite3_* function comes from the table that `cw_fts_bind`
 * receives, taken by the caller from the library that Python's own sqlite3 module uses, so
 * that the connection and these calls are one SQLite. scripts/compile.py builds this file into
 * the compiled build (docs/compiled.md); without it the store ranks with bm25(). */

#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

/* The SQLite functions this file calls, in the order of cw_fts_bind's table. */
static struct {
    int (*prepare_v2)(sqlite3 *, const char *, int, sqlite3_stmt **, const char **);
    int (*bind_pointer)(sqlite3_stmt *, int, void *, const char *, void (*)(void *));
    int (*bind_int64)(sqlite3_stmt *, int, sqlite3_int64);
    int (*step)(sqlite3_stmt *);
    int (*finalize)(sqlite3_stmt *);
    sqlite3_int64 (*column_int64)(sqlite3_stmt *, int);
    const void *(*column_blob)(sqlite3_stmt *, int);
    int (*column_bytes)(sqlite3_stmt *, int);
    void (*result_double)(sqlite3_context *, double);
    void (*result_error_code)(sqlite3_context *, int);
    const char *(*db_filename)(sqlite3 *, const char *);
} S;

#define CW_FUNCTIONS 11

/* Takes the table of SQLite's functions (see S); 0, or -1 if one is missing. */
int cw_fts_bind(void **fns, int n) {
    if (n != CW_FUNCTIONS) return -1;
    for (int i = 0; i < n; i++)
        if (fns[i] == NULL) return -1;
    memcpy(&S, fns, sizeof(S));
    return 0;
}

#define CHUNK_BITS 12 /* 4,096 rows a chunk: 0.8-1 ms to read */
#define LOADS_PER_STATEMENT 2

/* One connection's lengths by rowid (0: not known), and which chunks it has read. */
typedef struct {
    sqlite3 *db;
    uint16_t *len;
    uint8_t *read;
    sqlite3_int64 cap; /* rows; a multiple of the chunk */
} Lengths;

static void lengths_free(void *p) {
    Lengths *l = p;
    if (l == NULL) return;
    free(l->len);
    free(l->read);
    free(l);
}

/* Room for `rowid`, in a table of `rows` rows; 0 if there is none (the row is then asked for
 * every time). The store's rowids count up from 1, one per record: a rowid past twice the rows
 * is a gap that no memory is spent on. */
static int grow(Lengths *l, sqlite3_int64 rowid, sqlite3_int64 rows) {
    sqlite3_int64 cap = l->cap ? l->cap : (sqlite3_int64)1 << CHUNK_BITS;
    if (rowid < 0) return 0;
    if (rowid < l->cap) return 1;
    if (rowid >= 2 * rows + ((sqlite3_int64)1 << CHUNK_BITS)) return 0;
    while (cap <= rowid) cap *= 2;
    uint16_t *len = realloc(l->len, (size_t)cap * sizeof(uint16_t));
    if (len == NULL) return 0;
    l->len = len;
    uint8_t *read = realloc(l->read, (size_t)(cap >> CHUNK_BITS));
    if (read == NULL) return 0; /* l->len is kept, larger: l->cap still says what is valid */
    l->read = read;
    memset(len + l->cap, 0, (size_t)(cap - l->cap) * sizeof(uint16_t));
    memset(read + (l->cap >> CHUNK_BITS), 0, (size_t)((cap - l->cap) >> CHUNK_BITS));
    l->cap = cap;
    return 1;
}

/* The first varint of a %_docsize blob (the one column's token count), or 0 past 65535. */
static int first_varint(const unsigned char *p, int n) {
    uint32_t v = 0;
    for (int i = 0; i < n && i < 4; i++) {
        v = (v << 7) | (p[i] & 0x7f);
        if (!(p[i] & 0x80)) return v <= 0xffff ? (int)v : 0;
    }
    return 0;
}

/* Reads the lengths of the chunk that holds `rowid` (within l->cap), once. */
static void read_chunk(Lengths *l, sqlite3_int64 rowid) {
    sqlite3_int64 first = rowid >> CHUNK_BITS << CHUNK_BITS;
    sqlite3_stmt *stmt = NULL;
    l->read[rowid >> CHUNK_BITS] = 1; /* once, whatever happens: a row not read is asked for */
    if (S.prepare_v2(l->db, "SELECT id, sz FROM records_fts_docsize WHERE id >= ?1 AND id < ?2",
                     -1, &stmt, NULL) == SQLITE_OK) {
        S.bind_int64(stmt, 1, first);
        S.bind_int64(stmt, 2, first + ((sqlite3_int64)1 << CHUNK_BITS));
        while (S.step(stmt) == SQLITE_ROW) {
            sqlite3_int64 id = S.column_int64(stmt, 0);
            if (id >= first && id < l->cap)
                l->len[id] = (uint16_t)first_varint(S.column_blob(stmt, 1), S.column_bytes(stmt, 1));
        }
    }
    S.finalize(stmt);
}

/* As fts5_aux.c's Fts5Bm25Data: the query's IDFs, computed once per statement. */
typedef struct {
    int nPhrase;
    int loads; /* chunks of lengths read in this statement */
    sqlite3_int64 nRow;
    double avgdl;
    double *aIDF;
    double *aFreq;
} Bm25Data;

static int count_cb(const Fts5ExtensionApi *api, Fts5Context *fts, void *ctx) {
    (void)api;
    (void)fts;
    (*(sqlite3_int64 *)ctx)++;
    return SQLITE_OK;
}

static int bm25_data(const Fts5ExtensionApi *api, Fts5Context *fts, Bm25Data **out) {
    int rc = SQLITE_OK;
    Bm25Data *p = api->xGetAuxdata(fts, 0);
    if (p == NULL) {
        int nPhrase = api->xPhraseCount(fts);
        sqlite3_int64 nRow = 0, nToken = 0;
        size_t nByte = sizeof(Bm25Data) + (size_t)nPhrase * 2 * sizeof(double);
        p = calloc(1, nByte);
        if (p == NULL) return SQLITE_NOMEM;
        p->nPhrase = nPhrase;
        p->aIDF = (double *)&p[1];
        p->aFreq = &p->aIDF[nPhrase];
        rc = api->xRowCount(fts, &nRow);
        if (rc == SQLITE_OK) rc = api->xColumnTotalSize(fts, -1, &nToken);
        if (rc == SQLITE_OK) p->avgdl = (double)nToken / (double)nRow;
        p->nRow = nRow;
        for (int i = 0; rc == SQLITE_OK && i < nPhrase; i++) {
            sqlite3_int64 nHit = 0;
            rc = api->xQueryPhrase(fts, i, (void *)&nHit, count_cb);
            if (rc == SQLITE_OK) {
                double idf = log((nRow - nHit + 0.5) / (nHit + 0.5));
                if (idf <= 0.0) idf = 1e-6;
                p->aIDF[i] = idf;
            }
        }
        if (rc != SQLITE_OK) {
            free(p);
            return rc;
        }
        rc = api->xSetAuxdata(fts, p, free);
        if (rc != SQLITE_OK) return rc; /* xSetAuxdata frees p on failure */
    }
    *out = p;
    return rc;
}

static void cw_bm25(const Fts5ExtensionApi *api, Fts5Context *fts, sqlite3_context *ctx,
                    int nVal, sqlite3_value **apVal) {
    const double k1 = 1.2, b = 0.75;
    Lengths *l = api->xUserData(fts);
    Bm25Data *p = NULL;
    double score = 0.0, D = 0.0;
    int nInst = 0;
    int rc = bm25_data(api, fts, &p);
    (void)apVal;
    if (nVal != 0) rc = SQLITE_MISUSE; /* no column weights: the store gives none */
    if (rc == SQLITE_OK) {
        memset(p->aFreq, 0, sizeof(double) * p->nPhrase);
        rc = api->xInstCount(fts, &nInst);
    }
    for (int i = 0; rc == SQLITE_OK && i < nInst; i++) {
        int ip, ic, io;
        rc = api->xInst(fts, i, &ip, &ic, &io);
        if (rc == SQLITE_OK) p->aFreq[ip] += 1.0;
    }
    if (rc == SQLITE_OK) {
        sqlite3_int64 rowid = api->xRowid(fts);
        int nTok = 0;
        int room = grow(l, rowid, p->nRow);
        if (room && l->len[rowid] == 0 && !l->read[rowid >> CHUNK_BITS] &&
            p->loads < LOADS_PER_STATEMENT) {
            p->loads++;
            read_chunk(l, rowid);
        }
        if (room && l->len[rowid] != 0) {
            nTok = l->len[rowid];
        } else {
            rc = api->xColumnSize(fts, -1, &nTok);
            if (rc == SQLITE_OK && room && nTok > 0 && nTok <= 0xffff) l->len[rowid] = (uint16_t)nTok;
        }
        D = (double)nTok;
    }
    if (rc == SQLITE_OK) {
        for (int i = 0; i < p->nPhrase; i++) {
            score += p->aIDF[i] * ((p->aFreq[i] * (k1 + 1.0)) /
                                   (p->aFreq[i] + k1 * (1 - b + b * D / p->avgdl)));
        }
        S.result_double(ctx, -1.0 * score);
    } else {
        S.result_error_code(ctx, rc);
    }
}

/* Registers cw_bm25 on `db`, a connection to the file `filename` (checked, so that a pointer
 * that is not that connection is never used further). 0, or an SQLite error code, or -1. */
int cw_fts_register(sqlite3 *db, const char *filename) {
    fts5_api *api = NULL;
    sqlite3_stmt *stmt = NULL;
    const char *name;
    Lengths *l;
    int rc;
    if (S.prepare_v2 == NULL || db == NULL) return -1;
    name = S.db_filename(db, "main");
    if (name == NULL || strcmp(name, filename) != 0) return -1;
    rc = S.prepare_v2(db, "SELECT fts5(?1)", -1, &stmt, NULL);
    if (rc == SQLITE_OK) {
        S.bind_pointer(stmt, 1, (void *)&api, "fts5_api_ptr", NULL);
        S.step(stmt);
    }
    S.finalize(stmt);
    if (rc != SQLITE_OK) return rc;
    if (api == NULL || api->iVersion < 2) return -1;
    l = calloc(1, sizeof(Lengths));
    if (l == NULL) return SQLITE_NOMEM;
    l->db = db;
    /* fts5 calls lengths_free when the function is replaced or the connection closes */
    rc = api->xCreateFunction(api, "cw_bm25", l, cw_bm25, lengths_free);
    if (rc != SQLITE_OK) lengths_free(l); /* not registered: fts5 did not take it */
    return rc;
}
