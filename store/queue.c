/*
 * queue.c -- copies of events and the bounded MPSC queue that carries them
 * from producer threads to the writer thread (DESIGN.md 4.3: the hot path
 * never touches disk; a full queue drops and counts).
 *
 * The queue is D. Vyukov's bounded queue (1024cores.net, "Bounded MPMC
 * queue") with one consumer: each cell carries a sequence number that says
 * whose turn it is.  A producer claims position `pos` with one CAS on head
 * when cell[pos & mask].seq == pos, stores the pointer, and publishes with
 * seq = pos + 1.  The consumer takes cell[tail & mask] when seq == tail + 1
 * and hands the cell back to producers with seq = tail + capacity.  A cell
 * whose seq is behind pos means the queue is full: the producer gives up.
 * No locks, no waiting: a producer either claims a cell in a few atomic
 * steps or returns -1.  Invariants: store_int.h (EventQueue).
 */
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- event copies ---- */

/* The string fields of EventRecord, copied into StoreEvent.text. */
static const size_t string_fields[] = {
    offsetof(EventRecord, qualname),
    offsetof(EventRecord, filename),
    offsetof(EventRecord, compile_id),
    offsetof(EventRecord, call_path_json),
    offsetof(EventRecord, outcome),
    offsetof(EventRecord, guards_text),
    offsetof(EventRecord, guard_sites_json),
    offsetof(EventRecord, hatches),
    offsetof(EventRecord, reason),
    offsetof(EventRecord, entry_compile_id),
    offsetof(EventRecord, guard_kind),
    offsetof(EventRecord, expr),
    offsetof(EventRecord, observed),
    offsetof(EventRecord, guard_file),
    offsetof(EventRecord, nearest_json),
    offsetof(EventRecord, failures_packed),
    offsetof(EventRecord, break_type),
    offsetof(EventRecord, break_class),
    offsetof(EventRecord, break_kind),
    offsetof(EventRecord, break_file),
    offsetof(EventRecord, user_stack_json),
    offsetof(EventRecord, backend),
    offsetof(EventRecord, graph_code),
    offsetof(EventRecord, ops),
    offsetof(EventRecord, annotation),
    offsetof(EventRecord, annotation_phase),
    offsetof(EventRecord, annotation_fields),
    offsetof(EventRecord, span_kind),
};
#define NSTRINGS (sizeof(string_fields) / sizeof(string_fields[0]))

static const char **field(EventRecord *r, size_t i)
{
    return (const char **)(void *)((char *)r + string_fields[i]);
}

static const char *const *cfield(const EventRecord *r, size_t i)
{
    return (const char *const *)(const void *)((const char *)r + string_fields[i]);
}

/* An empty (or NULL) string takes no room: its field points at a static
   "".  Most fields of most events are empty (a guard failure fills 8 of
   21), and the copy is most of what store_submit costs the producer. */
StoreEvent *store_event_copy(const EventRecord *ev)
{
    size_t size[NSTRINGS];          /* with the NUL; 0 for an empty string */
    size_t total = 0;
    for (size_t i = 0; i < NSTRINGS; i++) {
        const char *str = *cfield(ev, i);
        size[i] = str != NULL && str[0] != '\0' ? strlen(str) + 1 : 0;
        total += size[i];
    }
    StoreEvent *e = malloc(sizeof(StoreEvent) + total);
    if (e == NULL)
        return NULL;
    e->rec = *ev;
    e->size = sizeof(StoreEvent) + total;
    char *p = e->text;
    for (size_t i = 0; i < NSTRINGS; i++) {
        if (size[i] == 0) {
            *field(&e->rec, i) = "";
            continue;
        }
        memcpy(p, *cfield(ev, i), size[i]);
        *field(&e->rec, i) = p;
        p += size[i];
    }
    STORE_ASSERT(p == (char *)e + e->size);
    return e;
}

void store_event_free(StoreEvent *e)
{
    free(e);
}

/* ---- the queue ---- */

int store_queue_init(EventQueue *q, size_t capacity, size_t max_bytes)
{
    size_t cap = 2;
    while (cap < capacity)
        cap <<= 1;
    QueueCell *cells = malloc(cap * sizeof(QueueCell));
    if (cells == NULL)
        return -1;
    for (size_t i = 0; i < cap; i++) {
        atomic_init(&cells[i].seq, i);
        cells[i].ev = NULL;
    }
    q->cells = cells;
    q->mask = cap - 1;
    q->max_bytes = max_bytes;
    atomic_init(&q->head, 0);
    atomic_init(&q->tail, 0);
    atomic_init(&q->bytes, 0);
    return 0;
}

void store_queue_done(EventQueue *q)
{
    StoreEvent *e;
    if (q->cells == NULL)
        return;
    while ((e = store_queue_pop(q)) != NULL)
        store_event_free(e);
    free(q->cells);
    q->cells = NULL;
}

int store_queue_push(EventQueue *q, StoreEvent *e, size_t *depth)
{
    /* The byte bound first: reserve, and give back if over. */
    size_t before = atomic_fetch_add_explicit(&q->bytes, e->size, memory_order_relaxed);
    if (before + e->size > q->max_bytes) {
        atomic_fetch_sub_explicit(&q->bytes, e->size, memory_order_relaxed);
        return -1;
    }

    size_t pos = atomic_load_explicit(&q->head, memory_order_relaxed);
    QueueCell *cell;
    for (;;) {
        cell = &q->cells[pos & q->mask];
        size_t seq = atomic_load_explicit(&cell->seq, memory_order_acquire);
        intptr_t diff = (intptr_t)seq - (intptr_t)pos;
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(&q->head, &pos, pos + 1,
                                                      memory_order_relaxed,
                                                      memory_order_relaxed))
                break;
            /* pos reloaded by the failed CAS */
        }
        else if (diff < 0) {
            /* The cell still holds an event a lap behind: full. */
            atomic_fetch_sub_explicit(&q->bytes, e->size, memory_order_relaxed);
            return -1;
        }
        else {
            pos = atomic_load_explicit(&q->head, memory_order_relaxed);
        }
    }
    cell->ev = e;
    atomic_store_explicit(&cell->seq, pos + 1, memory_order_release);
    if (depth != NULL) {
        size_t tail = atomic_load_explicit(&q->tail, memory_order_relaxed);
        *depth = pos + 1 > tail ? pos + 1 - tail : 0;   /* the writer may be ahead */
    }
    return 0;
}

StoreEvent *store_queue_pop(EventQueue *q)
{
    size_t pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
    QueueCell *cell = &q->cells[pos & q->mask];
    size_t seq = atomic_load_explicit(&cell->seq, memory_order_acquire);
    if (seq != pos + 1)
        return NULL;   /* empty, or the producer of this cell has not published yet */
    StoreEvent *e = cell->ev;
    cell->ev = NULL;
    atomic_store_explicit(&cell->seq, pos + q->mask + 1, memory_order_release);
    atomic_store_explicit(&q->tail, pos + 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&q->bytes, e->size, memory_order_relaxed);
    return e;
}

size_t store_queue_depth(EventQueue *q)
{
    size_t tail = atomic_load_explicit(&q->tail, memory_order_relaxed);
    size_t head = atomic_load_explicit(&q->head, memory_order_relaxed);
    return head > tail ? head - tail : 0;
}

size_t store_queue_capacity(const EventQueue *q)
{
    return q->mask + 1;
}
