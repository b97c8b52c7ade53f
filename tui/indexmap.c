/*
 * indexmap.c -- an open-addressing (linear probing) hash of indexes into an
 * array the caller owns; the model finds its code rows and cache entries by
 * key with it.  No deletion: the model only adds, or clears everything on a
 * reload.  Contract and invariants: tui.h (IndexMap).
 */
#include "tui.h"

#include <stdlib.h>
#include <string.h>

uint64_t indexmap_hash2(long long a, long long b)
{
    uint64_t h = (uint64_t)a * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t)b + 0x632BE59BD9B4E019ull + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    return h;
}

uint64_t indexmap_hash_str(uint64_t h, const char *s)
{
    /* FNV-1a over the bytes, seeded with h. */
    h ^= 0xCBF29CE484222325ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001B3ull;
    }
    return h;
}

size_t indexmap_find(const IndexMap *m, uint64_t hash, IndexMapEq eq, const void *ctx)
{
    if (m->cap == 0)
        return (size_t)-1;
    size_t mask = m->cap - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
        size_t slot = m->slots[i];
        if (slot == 0)
            return (size_t)-1;
        if (m->hashes[i] == hash && eq(ctx, slot - 1))
            return slot - 1;
    }
}

static void insert(size_t *slots, uint64_t *hashes, size_t cap, uint64_t hash, size_t idx)
{
    size_t mask = cap - 1;
    size_t i = hash & mask;
    while (slots[i] != 0)
        i = (i + 1) & mask;
    slots[i] = idx + 1;
    hashes[i] = hash;
}

void indexmap_add(IndexMap *m, uint64_t hash, size_t idx)
{
    if ((m->n + 1) * 4 >= m->cap * 3) {
        size_t ncap = m->cap ? m->cap * 2 : 64;
        size_t *slots = xcalloc(ncap, sizeof *slots);
        uint64_t *hashes = xcalloc(ncap, sizeof *hashes);
        for (size_t i = 0; i < m->cap; i++)
            if (m->slots[i] != 0)
                insert(slots, hashes, ncap, m->hashes[i], m->slots[i] - 1);
        free(m->slots);
        free(m->hashes);
        m->slots = slots;
        m->hashes = hashes;
        m->cap = ncap;
    }
    insert(m->slots, m->hashes, m->cap, hash, idx);
    m->n++;
}

void indexmap_clear(IndexMap *m)
{
    if (m->cap)
        memset(m->slots, 0, m->cap * sizeof *m->slots);
    m->n = 0;
}

void indexmap_done(IndexMap *m)
{
    free(m->slots);
    free(m->hashes);
    memset(m, 0, sizeof *m);
}
