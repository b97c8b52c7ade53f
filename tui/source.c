/*
 * source.c -- lines of the user's source files as they read now: what the
 * detail view shows under a break's frames and a guard, and the break view
 * under its selected row.  A recorded path is tried as recorded (relative
 * to dyntop's directory), then relative to the database's directory.  A
 * SourceCache keeps the lines one load asked for: the same few lines come
 * again and again, and each read scans a file.  Contract: tui.h.
 */
#include "tui.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The file as recorded, else relative to the database's directory. */
static FILE *open_source(const char *db, const char *filename)
{
    if (filename[0] == '\0' || filename[0] == '<')
        return NULL;
    FILE *f = fopen(filename, "r");
    if (f == NULL && filename[0] != '/') {
        char *dbpath = xstrdup(db);
        char *path = xasprintf("%s/%s", dirname(dbpath), filename);
        f = fopen(path, "r");
        free(path);
        free(dbpath);
    }
    return f;
}

/* The next line of f into buf (its first cap - 1 bytes; the rest of a long
   line is skipped).  false at the end. */
static bool next_line(FILE *f, char *buf, size_t cap)
{
    if (fgets(buf, (int)cap, f) == NULL)
        return false;
    size_t len = strlen(buf);
    bool whole = len > 0 && buf[len - 1] == '\n';
    char rest[4096];
    while (!whole && fgets(rest, sizeof rest, f) != NULL) {   /* rest of a long line */
        len = strlen(rest);
        whole = len > 0 && rest[len - 1] == '\n';
    }
    return true;
}

char *source_line(const char *db, const char *filename, int lineno)
{
    FILE *f = lineno > 0 ? open_source(db, filename) : NULL;
    if (f == NULL)
        return NULL;
    char buf[4096];
    char *line = NULL;
    for (int n = 1; line == NULL && next_line(f, buf, sizeof buf); n++)
        if (n == lineno)
            line = fmt_trim(fmt_sanitize(buf));
    fclose(f);
    return line;
}

char *source_def_line(const char *db, const char *filename, int lineno, int *found)
{
    FILE *f = lineno > 0 ? open_source(db, filename) : NULL;
    if (f == NULL)
        return NULL;
    char buf[4096];
    char *line = NULL;
    for (int n = 1; line == NULL && n < lineno + SOURCE_DEF_LINES && next_line(f, buf, sizeof buf);
         n++) {
        if (n < lineno)
            continue;
        const char *s = buf + strspn(buf, " \t");
        if (strncmp(s, "def ", 4) == 0 || strncmp(s, "async def ", 10) == 0
            || strncmp(s, "class ", 6) == 0) {
            line = fmt_trim(fmt_sanitize(buf));
            *found = n;
        }
    }
    fclose(f);
    return line;
}

const char *source_cached_line(SourceCache *c, const char *db, const char *filename, int lineno)
{
    int used = c->n < SOURCE_CACHE_SLOTS ? c->n : SOURCE_CACHE_SLOTS;
    for (int i = 0; i < used; i++)
        if (c->slot[i].lineno == lineno && strcmp(c->slot[i].db, db) == 0
            && strcmp(c->slot[i].filename, filename) == 0)
            return c->slot[i].line;
    struct SourceCacheSlot *slot = &c->slot[c->n++ % SOURCE_CACHE_SLOTS];
    free(slot->db);
    free(slot->filename);
    free(slot->line);
    slot->db = xstrdup(db);
    slot->filename = xstrdup(filename);
    slot->lineno = lineno;
    slot->line = source_line(db, filename, lineno);
    return slot->line;
}

void source_cache_free(SourceCache *c)
{
    for (int i = 0; i < SOURCE_CACHE_SLOTS; i++) {
        free(c->slot[i].db);
        free(c->slot[i].filename);
        free(c->slot[i].line);
    }
    memset(c, 0, sizeof *c);
}
