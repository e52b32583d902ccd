/*
 * ahead.h -- compressed payloads inflated on worker threads ahead of the decoder, entirely in C.
 *
 * The compiled decoders' inflate_threads path for the payloads producers write (zstd data frames; an lz4
 * frame of independent blocks), which the system's libraries inflate with no Python call (syslib.h).
 * compression.InflateAhead does the same job in Python for any payload, but each of its payloads costs its
 * workers ~10-20 us of Python under the GIL, which the decoding thread wants back between batches: on
 * the benchmark's logs that took a third of what the threads could gain for lz4.  Here the workers never
 * touch Python; the decoder waits (without the GIL) only when the payload it needs is not ready and none
 * is left for it to inflate itself.
 *
 * The rules are InflateAhead's:
 *  - the spans are the compressed data batches' payloads in log order; span j is inflated into ring slot
 *    j % depth, and is taken by a worker (or the decoder) only while j < current + depth and its slot is
 *    free, so at most depth payloads are held whatever the input;
 *  - the decoder asks for spans in order, possibly skipping some (aborted batches, batches before the
 *    fetch offset); a payload it holds stays valid until its next kx_ahead_take; slots of skipped spans
 *    are freed as soon as no worker writes them;
 *  - a decoder that would wait inflates the next span nobody has taken instead (maybe its own);
 *  - every span is one the inflater takes (the caller checked its framing and bound first); a payload
 *    the library rejects comes back as KX_AHEAD_FAILED, and the decoder inflates it again itself through
 *    the Python path, which names the error, so errors surface at their batch in log order, exactly as
 *    without threads.
 *
 * The worker threads read the caller's buffer; kx_ahead_close joins them before the decode call returns.
 *
 * The slots' buffers outlive their call: kx_ahead_close gives them to a small process-wide pool (at most
 * KX_POOL_BUFFERS buffers, KX_POOL_BYTES in all), where the next call's slots take them.  A consumer
 * decodes fetch after fetch; buffers malloc'ed afresh each time would be mapped afresh, and faulting in
 * a MiB of fresh pages (~250 faults) costs about what inflating a MiB of fast payload does.
 */
#ifndef KAFKATX_AHEAD_H
#define KAFKATX_AHEAD_H

#include <Python.h> /* Py_ssize_t */
#include <stdlib.h>

#if defined(__unix__) || defined(__APPLE__)
#  include <pthread.h>
#  define KX_AHEAD_POSSIBLE 1
#else
#  define KX_AHEAD_POSSIBLE 0
#endif

#define KX_AHEAD_INLINE (-2) /* no span starts there: inflate it inline */
#define KX_AHEAD_FAILED (-1) /* the library rejected it (or no memory): inflate it inline to name the error */

/* Inflate src[0, n) of codec cid into dst[0, cap): the bytes written, or < 0. Called without the GIL. */
typedef long long (*kx_inflate_fn)(const unsigned char *src, Py_ssize_t n, int cid, unsigned char *dst,
                                   Py_ssize_t cap);

typedef struct {
    Py_ssize_t start, end; /* the payload, in the caller's buffer */
    Py_ssize_t bound;      /* what it inflates to at most (> 0) */
    int cid;
} kx_span;

enum { KX_SLOT_FREE = 0, KX_SLOT_BUSY = 1, KX_SLOT_DONE = 2 };

typedef struct {
    unsigned char *buf;
    Py_ssize_t cap;
    Py_ssize_t span; /* the span it holds (BUSY or DONE) */
    long long n;     /* DONE: the bytes inflated, or KX_AHEAD_FAILED */
    int state;
} kx_slot;

typedef struct {
    const unsigned char *src;
    kx_span *spans;
    Py_ssize_t nspans;
    kx_slot *slots;
    Py_ssize_t depth;
    kx_inflate_fn inflate;
    Py_ssize_t claimed; /* the next span to take */
    Py_ssize_t current; /* the span the decoder holds, -1 before its first */
    Py_ssize_t next;    /* the first span the decoder may still ask for */
    int closed;
#if KX_AHEAD_POSSIBLE
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t *threads;
#endif
    int nthreads; /* started */
} kx_ahead;

#if KX_AHEAD_POSSIBLE

#define KX_POOL_BUFFERS 8
#define KX_POOL_BYTES ((Py_ssize_t)16 << 20)

static pthread_mutex_t kx_pool_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned char *kx_pool_buf[KX_POOL_BUFFERS];
static Py_ssize_t kx_pool_cap[KX_POOL_BUFFERS];
static int kx_pool_n;
static Py_ssize_t kx_pool_bytes;

/* fork() while another thread holds the pool's lock would leave it held in the child */
static void kx_pool_lock(void) { pthread_mutex_lock(&kx_pool_mu); }
static void kx_pool_unlock(void) { pthread_mutex_unlock(&kx_pool_mu); }
static pthread_once_t kx_pool_once = PTHREAD_ONCE_INIT;
static void kx_pool_init(void) { pthread_atfork(kx_pool_lock, kx_pool_unlock, kx_pool_unlock); }

/* Give each slot a pooled buffer, the largest first (locked by the pool's lock). */
static void kx_pool_take(kx_slot *slots, Py_ssize_t depth)
{
    Py_ssize_t i;
    pthread_once(&kx_pool_once, kx_pool_init);
    pthread_mutex_lock(&kx_pool_mu);
    for (i = 0; i < depth && kx_pool_n > 0; i++) {
        int best = 0, k;
        for (k = 1; k < kx_pool_n; k++)
            if (kx_pool_cap[k] > kx_pool_cap[best])
                best = k;
        slots[i].buf = kx_pool_buf[best];
        slots[i].cap = kx_pool_cap[best];
        kx_pool_bytes -= kx_pool_cap[best];
        kx_pool_n--;
        kx_pool_buf[best] = kx_pool_buf[kx_pool_n];
        kx_pool_cap[best] = kx_pool_cap[kx_pool_n];
    }
    pthread_mutex_unlock(&kx_pool_mu);
}

/* Keep the slots' buffers for the next call where the pool has room; free the others. */
static void kx_pool_give(kx_slot *slots, Py_ssize_t depth)
{
    Py_ssize_t i;
    pthread_mutex_lock(&kx_pool_mu);
    for (i = 0; i < depth; i++) {
        if (slots[i].buf == NULL)
            continue;
        if (kx_pool_n < KX_POOL_BUFFERS && slots[i].cap <= KX_POOL_BYTES - kx_pool_bytes) {
            kx_pool_buf[kx_pool_n] = slots[i].buf;
            kx_pool_cap[kx_pool_n] = slots[i].cap;
            kx_pool_bytes += slots[i].cap;
            kx_pool_n++;
        } else {
            free(slots[i].buf);
        }
        slots[i].buf = NULL;
    }
    pthread_mutex_unlock(&kx_pool_mu);
}

/* Inflate span j into its slot (called unlocked, by whoever marked the slot BUSY for j). */
static void kx_ahead_fill(kx_ahead *a, Py_ssize_t j)
{
    kx_span *s = &a->spans[j];
    kx_slot *slot = &a->slots[j % a->depth];
    long long n = KX_AHEAD_FAILED;
    if (slot->cap < s->bound) {
        unsigned char *p = (unsigned char *)malloc((size_t)s->bound);
        if (p != NULL) {
            free(slot->buf);
            slot->buf = p;
            slot->cap = s->bound;
        }
    }
    if (slot->cap >= s->bound) {
        n = a->inflate(a->src + s->start, s->end - s->start, s->cid, slot->buf, s->bound);
        if (n < 0)
            n = KX_AHEAD_FAILED;
    }
    slot->n = n;
}

/* Take the next unclaimed span if the window allows and its slot is free (locked): its index, or -1. */
static Py_ssize_t kx_ahead_claim(kx_ahead *a)
{
    Py_ssize_t k = a->claimed;
    kx_slot *slot;
    if (k >= a->nspans || k >= a->current + a->depth)
        return -1;
    slot = &a->slots[k % a->depth];
    if (slot->state != KX_SLOT_FREE)
        return -1;
    a->claimed = k + 1;
    slot->state = KX_SLOT_BUSY;
    slot->span = k;
    return k;
}

/* A span inflated (locked): keep it for the decoder, or free its slot if the decoder went past it. */
static void kx_ahead_finish(kx_ahead *a, Py_ssize_t k)
{
    kx_slot *slot = &a->slots[k % a->depth];
    slot->state = k >= a->current ? KX_SLOT_DONE : KX_SLOT_FREE;
    pthread_cond_broadcast(&a->cv);
}

static void *kx_ahead_work(void *arg)
{
    kx_ahead *a = (kx_ahead *)arg;
    Py_ssize_t k;
    pthread_mutex_lock(&a->mu);
    while (!a->closed) {
        k = kx_ahead_claim(a);
        if (k < 0) {
            if (a->claimed >= a->nspans)
                break; /* nothing left to take */
            pthread_cond_wait(&a->cv, &a->mu);
            continue;
        }
        pthread_mutex_unlock(&a->mu);
        kx_ahead_fill(a, k);
        pthread_mutex_lock(&a->mu);
        kx_ahead_finish(a, k);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

/*
 * A new object over src (the spans' buffer) and the spans (owned from now on; malloc'ed), with
 * `threads` workers started: NULL if memory is short or no thread could be started (the caller then
 * goes another way; the spans are freed).
 */
static kx_ahead *kx_ahead_open(const unsigned char *src, kx_span *spans, Py_ssize_t nspans, int threads,
                               kx_inflate_fn inflate)
{
    kx_ahead *a = (kx_ahead *)calloc(1, sizeof(*a));
    int i;
    if (a == NULL) {
        free(spans);
        return NULL;
    }
    a->src = src;
    a->spans = spans;
    a->nspans = nspans;
    a->depth = threads + 3; /* the decoder's payload, one queued per worker, and slack (as InflateAhead) */
    a->inflate = inflate;
    a->current = -1;
    a->slots = (kx_slot *)calloc((size_t)a->depth, sizeof(kx_slot));
    a->threads = (pthread_t *)calloc((size_t)threads, sizeof(pthread_t));
    if (a->slots == NULL || a->threads == NULL || pthread_mutex_init(&a->mu, NULL) != 0) {
        free(a->slots);
        free(a->threads);
        free(a->spans);
        free(a);
        return NULL;
    }
    if (pthread_cond_init(&a->cv, NULL) != 0) {
        pthread_mutex_destroy(&a->mu);
        free(a->slots);
        free(a->threads);
        free(a->spans);
        free(a);
        return NULL;
    }
    kx_pool_take(a->slots, a->depth);
    for (i = 0; i < threads; i++) {
        if (pthread_create(&a->threads[i], NULL, kx_ahead_work, a) != 0)
            break;
        a->nthreads++;
    }
    return a;
}

/*
 * The decoder's payload starting at byte `start` of src: the bytes inflated, with *out pointing at them
 * until the next call, or KX_AHEAD_INLINE / KX_AHEAD_FAILED (see the top). Spans before it that were not
 * asked for are dropped. Called without the GIL; waits only while a worker inflates what it needs.
 */
static long long kx_ahead_take(kx_ahead *a, Py_ssize_t start, const unsigned char **out)
{
    Py_ssize_t j = a->next, i, k;
    kx_slot *slot;
    long long n;
    while (j < a->nspans && a->spans[j].start < start)
        j++;
    if (j == a->nspans || a->spans[j].start != start) {
        a->next = j;
        return KX_AHEAD_INLINE;
    }
    a->next = j + 1;
    pthread_mutex_lock(&a->mu);
    /* done with what it held: free the slots of earlier spans that are not being written */
    for (i = 0; i < a->depth; i++)
        if (a->slots[i].state == KX_SLOT_DONE && a->slots[i].span < j)
            a->slots[i].state = KX_SLOT_FREE;
    if (a->claimed < j)
        a->claimed = j; /* nobody inflates the skipped ones any more */
    a->current = j;
    pthread_cond_broadcast(&a->cv);
    slot = &a->slots[j % a->depth];
    while (!(slot->state == KX_SLOT_DONE && slot->span == j)) {
        k = kx_ahead_claim(a);
        if (k >= 0) { /* rather than wait, inflate the next span nobody has taken (maybe this one) */
            pthread_mutex_unlock(&a->mu);
            kx_ahead_fill(a, k);
            pthread_mutex_lock(&a->mu);
            kx_ahead_finish(a, k);
            continue;
        }
        pthread_cond_wait(&a->cv, &a->mu);
    }
    n = slot->n;
    pthread_mutex_unlock(&a->mu);
    *out = slot->buf;
    return n;
}

/* Stop and join the workers, and free everything. */
static void kx_ahead_close(kx_ahead *a)
{
    int i;
    if (a == NULL)
        return;
    pthread_mutex_lock(&a->mu);
    a->closed = 1;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    for (i = 0; i < a->nthreads; i++)
        pthread_join(a->threads[i], NULL);
    kx_pool_give(a->slots, a->depth);
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
    free(a->slots);
    free(a->threads);
    free(a->spans);
    free(a);
}

#else /* no pthreads: the caller uses compression.InflateAhead */

static kx_ahead *kx_ahead_open(const unsigned char *src, kx_span *spans, Py_ssize_t nspans, int threads,
                               kx_inflate_fn inflate)
{
    (void)src; (void)nspans; (void)threads; (void)inflate;
    free(spans);
    return NULL;
}
static long long kx_ahead_take(kx_ahead *a, Py_ssize_t start, const unsigned char **out)
{
    (void)a; (void)start; (void)out;
    return KX_AHEAD_INLINE;
}
static void kx_ahead_close(kx_ahead *a) { (void)a; }

#endif
#endif /* KAFKATX_AHEAD_H */
