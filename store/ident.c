/*
 * ident.c -- who is recording: the host, pid and place in a distributed job
 * (torchrun's RANK, LOCAL_RANK, WORLD_SIZE) of this process, for its runs
 * row, and the path templates that give each process, rank or host a file
 * of its own (%h, %p, %r).  Contract: store.h.
 *
 * Read at each open, never cached: a fork child has another pid, and its
 * file and runs row say so.
 */
#include "store_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* $name as a non-negative int, or -1 when unset or not one. */
static int env_rank(const char *name)
{
    const char *v = getenv(name);
    if (v == NULL || *v == '\0')
        return -1;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    return errno == 0 && *end == '\0' && n >= 0 && n <= 1 << 30 ? (int)n : -1;
}

void store_identity(StoreIdentity *id)
{
    memset(id, 0, sizeof *id);
    if (gethostname(id->host, sizeof id->host - 1) != 0)
        strcpy(id->host, "?");
    id->pid = (long long)getpid();
    id->rank = env_rank("RANK");
    id->local_rank = env_rank("LOCAL_RANK");
    id->world_size = env_rank("WORLD_SIZE");
}

char *store_expand_path(const char *tmpl, char **errmsg)
{
    StoreIdentity id;
    store_identity(&id);
    size_t cap = strlen(tmpl) + 1, len = 0;
    char *out = malloc(cap);
    for (const char *p = tmpl; out != NULL && *p != '\0'; p++) {
        char num[32];
        const char *add = num;
        if (*p != '%') {
            num[0] = *p;
            num[1] = '\0';
        }
        else {
            switch (*++p) {
            case 'h': add = id.host; break;
            case 'p': snprintf(num, sizeof num, "%lld", id.pid); break;
            case 'r': snprintf(num, sizeof num, "%d", id.rank < 0 ? 0 : id.rank); break;
            case '%': add = "%"; break;
            default:
                store_set_error(errmsg, "%s: unknown %%%s in the path (use %%h host, "
                                "%%p pid, %%r rank, %%%% a %%)", tmpl,
                                *p ? (char[]){*p, '\0'} : "");
                free(out);
                return NULL;
            }
        }
        size_t n = strlen(add);
        if (len + n + 1 > cap) {
            char *grown = realloc(out, cap = 2 * (len + n + 1));
            if (grown == NULL)
                free(out);
            out = grown;
        }
        if (out != NULL) {
            memcpy(out + len, add, n + 1);
            len += n;
        }
    }
    if (out == NULL)
        store_set_error(errmsg, "out of memory");
    else
        out[len] = '\0';
    return out;
}
