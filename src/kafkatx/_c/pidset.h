/*
 * pidset.h -- a set of producer ids (int64 >= 0) that needs no GIL: the producers whose aborted
 * transaction a read_committed decoder is inside of, each with that transaction's first offset (an
 * ABORT marker ends only a transaction that began at or before it: a marker fed again, below a later
 * aborted transaction of its producer, ends nothing).
 *
 * Open addressing with linear probing in a power-of-two table, at most half full; removal shifts the
 * following entries of the probe run back, so there are no tombstones and a lookup never scans more
 * than the run its id hashes into.  Empty slots hold -1 (only ids >= 0 are stored: Kafka's
 * non-idempotent batches carry -1 and are never part of a transaction).
 */
#ifndef KAFKATX_PIDSET_H
#define KAFKATX_PIDSET_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t *slots;
    int64_t *firsts; /* the first offset of each slot's transaction */
    size_t cap;      /* 0 or a power of two */
    size_t n;
} kx_pidset;

static inline size_t kx_pidset_slot(const kx_pidset *s, int64_t pid)
{
    uint64_t h = (uint64_t)pid * 0x9E3779B97F4A7C15ULL; /* Fibonacci hashing */
    return (size_t)(h >> 17) & (s->cap - 1);
}

static void kx_pidset_free(kx_pidset *s)
{
    free(s->slots);
    free(s->firsts);
    s->slots = NULL;
    s->firsts = NULL;
    s->cap = 0;
    s->n = 0;
}

static int kx_pidset_has(const kx_pidset *s, int64_t pid)
{
    size_t i;
    if (s->n == 0 || pid < 0)
        return 0;
    for (i = kx_pidset_slot(s, pid); s->slots[i] != -1; i = (i + 1) & (s->cap - 1))
        if (s->slots[i] == pid)
            return 1;
    return 0;
}

/* Enter ``pid`` with ``first``.  A producer already in keeps the later of the two first offsets: in log
 * order that is the transaction it is inside of now; an entry from further back, added after a fetch
 * started over, names a transaction its ABORT has ended or will end before the later one. */
static void kx_pidset_put(kx_pidset *s, int64_t pid, int64_t first)
{
    size_t i = kx_pidset_slot(s, pid);
    while (s->slots[i] != -1) {
        if (s->slots[i] == pid) {
            if (first > s->firsts[i])
                s->firsts[i] = first;
            return;
        }
        i = (i + 1) & (s->cap - 1);
    }
    s->slots[i] = pid;
    s->firsts[i] = first;
    s->n++;
}

/* Add ``pid``, inside an aborted transaction from ``first`` on (ids < 0 are ignored).  Returns -1 if the
 * table could not grow, else 0. */
static int kx_pidset_add(kx_pidset *s, int64_t pid, int64_t first)
{
    if (pid < 0)
        return 0;
    if (2 * (s->n + 1) > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16, j;
        int64_t *old = s->slots, *old_firsts = s->firsts;
        size_t old_cap = s->cap;
        int64_t *slots = (int64_t *)malloc(cap * sizeof(int64_t));
        int64_t *firsts = (int64_t *)malloc(cap * sizeof(int64_t));
        if (slots == NULL || firsts == NULL) {
            free(slots);
            free(firsts);
            return -1;
        }
        memset(slots, 0xff, cap * sizeof(int64_t)); /* every slot -1 */
        s->slots = slots;
        s->firsts = firsts;
        s->cap = cap;
        s->n = 0;
        for (j = 0; j < old_cap; j++)
            if (old[j] != -1)
                kx_pidset_put(s, old[j], old_firsts[j]);
        free(old);
        free(old_firsts);
    }
    kx_pidset_put(s, pid, first);
    return 0;
}

/* An ABORT marker of ``pid`` at ``offset``: the producer leaves the set if its aborted transaction began at
 * or before the marker (in log order always; a marker fed again lies below a later transaction). */
static void kx_pidset_end(kx_pidset *s, int64_t pid, int64_t offset)
{
    size_t i, j, k, mask;
    if (s->n == 0 || pid < 0)
        return;
    mask = s->cap - 1;
    for (i = kx_pidset_slot(s, pid); s->slots[i] != pid; i = (i + 1) & mask)
        if (s->slots[i] == -1)
            return;
    if (s->firsts[i] > offset)
        return;
    /* shift back the entries after i in the run that may not stay behind the hole */
    j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (s->slots[j] == -1)
            break;
        k = kx_pidset_slot(s, s->slots[j]);
        /* the entry at j may move to the hole at i unless its home k lies cyclically in (i, j] */
        if ((i <= j) ? (i < k && k <= j) : (i < k || k <= j))
            continue;
        s->slots[i] = s->slots[j];
        s->firsts[i] = s->firsts[j];
        i = j;
    }
    s->slots[i] = -1;
    s->n--;
}

#endif /* KAFKATX_PIDSET_H */
