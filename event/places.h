/*
 * places.h -- a file's path as users read it (issue 41, "readable places"),
 * at the bottom of the layers (plain C, no Python): a file of an installed
 * package is named from its package on (`transformers/utils/generic.py`,
 * not the venv's absolute path), any other file as it is.  dyntop and
 * explain show places so; SQL keeps the full path, the HTML report shows it
 * on hover (dynscope/places.py is the same rule in Python).
 */
#ifndef DYNSCOPE_PLACES_H
#define DYNSCOPE_PLACES_H

#include <stddef.h>

/* The length of the part of path that is the installation its package lies
   in ("/x/lib/python3.11/site-packages/"), 0 for a file of no installed
   package.  Cannot fail. */
size_t place_install_prefix(const char *path);

/* path without its installation prefix: borrowed from path.  Cannot fail. */
static inline const char *place_readable(const char *path)
{
    return path + place_install_prefix(path);
}

#endif /* DYNSCOPE_PLACES_H */
