/*
 * places.c -- a file's path as users read it (contract: places.h).
 */
#include "places.h"

#include <string.h>

size_t place_install_prefix(const char *path)
{
    static const char *const roots[] = {"/site-packages/", "/dist-packages/"};
    size_t best = 0;
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        /* the last one: a package vendored inside another names itself */
        for (const char *at = strstr(path, roots[i]); at != NULL; at = strstr(at + 1, roots[i])) {
            size_t end = (size_t)(at - path) + strlen(roots[i]);
            if (end > best && path[end] != '\0')
                best = end;
        }
    }
    return best;
}
