/*
 * read.c -- read-only access to a dynscope database, shared by dyntop and
 * `python -m dynscope sql`: open with a file:...?mode=ro URI, check that the
 * file is ours and at our schema version, and a few aggregate queries kept
 * deliberately simple (callers extend with their own SQL through
 * store_reader_db()).  Contract: store.h; tables and views: docs/sql.md.
 *
 * Invariants: the connection is opened read-only and never writes; each
 * helper reads inside one transaction, so its numbers come from one
 * snapshot even while a writer runs (WAL).
 */
#include "store_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct StoreReader {
    sqlite3 *db;    /* owned, read-only */
    char *path;     /* owned */
};

/* "file:" + path percent-encoded + "?mode=ro".  malloc'd, NULL on OOM. */
static char *readonly_uri(const char *path)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(path);
    char *uri = malloc(5 + 3 * n + 9);
    if (uri == NULL)
        return NULL;
    char *p = uri;
    memcpy(p, "file:", 5);
    p += 5;
    for (const unsigned char *c = (const unsigned char *)path; *c; c++) {
        bool plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')
                     || (*c >= '0' && *c <= '9') || strchr("/-._~", *c) != NULL;
        if (plain) {
            *p++ = (char)*c;
        }
        else {
            *p++ = '%';
            *p++ = hex[*c >> 4];
            *p++ = hex[*c & 15];
        }
    }
    memcpy(p, "?mode=ro", 9);
    return uri;
}

StoreReader *store_reader_open(const char *path, char **errmsg)
{
    int version;
    struct stat st;
    if (errmsg != NULL)
        *errmsg = NULL;
    if (stat(path, &st) != 0) {
        store_set_error(errmsg, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    StoreReader *r = calloc(1, sizeof *r);
    char *uri = readonly_uri(path);
    if (r == NULL || uri == NULL || (r->path = strdup(path)) == NULL) {
        store_set_error(errmsg, "out of memory");
        goto out_free;
    }
    int rc = sqlite3_open_v2(uri, &r->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
    if (rc != SQLITE_OK) {
        store_set_error(errmsg, "cannot open %s read-only: %s", path,
                        r->db ? sqlite3_errmsg(r->db) : sqlite3_errstr(rc));
        goto out_free;
    }
    sqlite3_busy_timeout(r->db, 1000);
    if (store_schema_identify(r->db, path, &version, errmsg) < 0)
        goto out_free;
    if (version == 0) {
        store_set_error(errmsg, "%s is an empty database, not a dynscope one", path);
        goto out_free;
    }
    if (version > STORE_SCHEMA_VERSION) {
        store_set_error(errmsg, "%s was written by a newer dynscope (schema v%d; this "
                        "build reads v%d)", path, version, STORE_SCHEMA_VERSION);
        goto out_free;
    }
    if (version < STORE_SCHEMA_VERSION) {
        store_set_error(errmsg, "%s has the older schema v%d (this build reads v%d); "
                        "recording to it once migrates it", path, version,
                        STORE_SCHEMA_VERSION);
        goto out_free;
    }
    free(uri);
    return r;

out_free:
    free(uri);
    store_reader_close(r);
    return NULL;
}

void store_reader_close(StoreReader *r)
{
    if (r == NULL)
        return;
    sqlite3_close(r->db);
    free(r->path);
    free(r);
}

struct sqlite3 *store_reader_db(StoreReader *r)
{
    return r->db;
}

/* Run a static query with ?1 = run_id; copy up to n integer columns of its
   one row into out[].  SQLite result code. */
static int query_ints(sqlite3 *db, const char *sql, long long run_id, long long *out, int n)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_bind_int64(st, 1, run_id);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        for (int i = 0; i < n; i++)
            out[i] = sqlite3_column_int64(st, i);
        rc = SQLITE_OK;
    }
    else if (rc == SQLITE_DONE) {
        memset(out, 0, (size_t)n * sizeof *out);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc;
}

#define RUN_FILTER " WHERE ?1 = 0 OR run_id = ?1"

int store_read_summary(StoreReader *r, long long run_id, StoreSummary *out, char **errmsg)
{
    long long v[3];
    if (errmsg != NULL)
        *errmsg = NULL;
    memset(out, 0, sizeof *out);
    int rc = sqlite3_exec(r->db, "BEGIN", NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = query_ints(r->db, "SELECT count(*), coalesce(max(run_id), 0),"
                        " total(dropped_events) FROM runs" RUN_FILTER, run_id, v, 3);
    if (rc == SQLITE_OK) {
        out->runs = v[0];
        out->last_run_id = v[1];
        out->dropped_events = v[2];
        rc = query_ints(r->db, "SELECT count(*) FROM code_objects" RUN_FILTER, run_id,
                        &out->code_objects, 1);
    }
    if (rc == SQLITE_OK)
        rc = query_ints(r->db, "SELECT count(*), total(frame_compile_id > 0) FROM compiles"
                        RUN_FILTER, run_id, v, 2);
    if (rc == SQLITE_OK) {
        out->compiles = v[0];
        out->recompiles = v[1];
        rc = query_ints(r->db, "SELECT count(*) FROM guard_failures" RUN_FILTER, run_id,
                        &out->guard_failures, 1);
    }
    if (rc == SQLITE_OK)
        rc = query_ints(r->db, "SELECT count(*) FROM graph_breaks" RUN_FILTER, run_id,
                        &out->graph_breaks, 1);
    if (rc == SQLITE_OK)
        rc = query_ints(r->db, "SELECT count(*), coalesce(sum(e.hits), 0) FROM cache_entries AS e"
                        " JOIN runs AS r ON r.run_id = e.run_id AND e.epoch = r.resets"
                        " WHERE ?1 = 0 OR e.run_id = ?1", run_id, v, 2);
    if (rc == SQLITE_OK) {
        out->cache_entries = v[0];
        out->hits = v[1];
    }
    if (rc != SQLITE_OK)
        store_set_error(errmsg, "%s: reading the summary failed: %s", r->path,
                        sqlite3_errmsg(r->db));
    if (!sqlite3_get_autocommit(r->db))
        sqlite3_exec(r->db, "COMMIT", NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : -1;
}

static char *dup_column(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return strdup(t != NULL ? (const char *)t : "");
}

void store_code_rows_free(StoreCodeRow *rows, size_t nrows)
{
    if (rows == NULL)
        return;
    for (size_t i = 0; i < nrows; i++) {
        free(rows[i].filename);
        free(rows[i].name);
        free(rows[i].last_failure);
    }
    free(rows);
}

int store_read_code_objects(StoreReader *r, long long run_id, StoreCodeRow **rows,
                            size_t *nrows, char **errmsg)
{
    StoreCodeRow *v = NULL;
    size_t n = 0, cap = 0;
    sqlite3_stmt *st = NULL;
    if (errmsg != NULL)
        *errmsg = NULL;
    *rows = NULL;
    *nrows = 0;
    int rc = sqlite3_prepare_v2(r->db,
        "SELECT run_id, code_id, filename, name, firstlineno, compiles, recompiles,"
        " graph_breaks, guard_failures, cache_entries, hits, last_failure"
        " FROM code_summary" RUN_FILTER
        " ORDER BY compiles DESC, hits DESC, run_id, code_id", -1, &st, NULL);
    if (rc != SQLITE_OK)
        goto out_error;
    sqlite3_bind_int64(st, 1, run_id);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == cap) {
            size_t ncap = cap ? 2 * cap : 16;
            StoreCodeRow *nv = realloc(v, ncap * sizeof *nv);
            if (nv == NULL) {
                rc = SQLITE_NOMEM;
                goto out_error;
            }
            v = nv;
            cap = ncap;
        }
        StoreCodeRow *row = &v[n++];
        row->run_id = sqlite3_column_int64(st, 0);
        row->code_id = sqlite3_column_int64(st, 1);
        row->filename = dup_column(st, 2);
        row->name = dup_column(st, 3);
        row->firstlineno = sqlite3_column_int(st, 4);
        row->compiles = sqlite3_column_int64(st, 5);
        row->recompiles = sqlite3_column_int64(st, 6);
        row->graph_breaks = sqlite3_column_int64(st, 7);
        row->guard_failures = sqlite3_column_int64(st, 8);
        row->cache_entries = sqlite3_column_int64(st, 9);
        row->hits = sqlite3_column_int64(st, 10);
        row->last_failure = dup_column(st, 11);
        if (row->filename == NULL || row->name == NULL || row->last_failure == NULL) {
            rc = SQLITE_NOMEM;
            goto out_error;
        }
    }
    if (rc != SQLITE_DONE)
        goto out_error;
    sqlite3_finalize(st);
    *rows = v;
    *nrows = n;
    return 0;

out_error:
    store_set_error(errmsg, "%s: listing code objects failed: %s", r->path,
                    rc == SQLITE_NOMEM ? "out of memory" : sqlite3_errmsg(r->db));
    sqlite3_finalize(st);
    store_code_rows_free(v, n);
    return -1;
}
