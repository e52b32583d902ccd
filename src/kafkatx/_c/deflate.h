/*
 * deflate.h -- a large zstd payload compressed in pieces on two cores, some on a worker thread.
 *
 * zstd at Kafka's default level is the slowest part of building a batch by far: ~3 ns a byte, against
 * well under 1 ns for encoding the records.  A producer builds one batch at a time, so the only way to use
 * a second core for it is inside the batch, in one of two forms:
 *  - one frame (the default, zstd_frames=1), joined from pieces as libzstd's own multithreaded compressor
 *    joins its jobs: a payload of more than KX_ZSTD_PART record bytes is cut into parts, the first
 *    KX_ZSTD_PART bytes long and each next one as long as all the records before it, up to kx_zstd_big
 *    (the window of one pass at the level), and what follows the last part is one more piece, or two
 *    halves if it is longer than KX_ZSTD_PART.  Each piece is compressed on its own, with the records
 *    before it (up to kx_zstd_big of them) as history, so that matches reach at least as far back as in
 *    one pass, at no more cost, all pieces taken, than indexing the records once more; with no frame header of
 *    its own and its repeat offsets cleared (the decoder carries the previous piece's into it: cleared,
 *    the compressor never refers to them); the last piece ends the frame.  The frame's header, written
 *    last, gives the largest window of the pieces (history and piece: up to twice one pass's, where the
 *    payload is larger than one pass's window) and the content size (each piece ends a block, so a
 *    reader could not size the frame from its blocks as it can a one-pass frame's).  A piece's parameters
 *    depend on where it starts and ends (kx_zstd_join_params), not on the payload's size, so that a
 *    BatchBuilder can queue each part for the worker as soon as the records after it begin (kx_zstream),
 *    while its caller is still appending.  This needs libzstd's buffer-less functions and its internal
 *    ZSTD_invalidateRepCodes, which python-zstandard's build exports and a system libzstd does not
 *    (kx_zstd_joins() is 0 then, and the payload is compressed in one pass, as compression._zstd does);
 *  - two frames (zstd_frames=2), the records' first half and their second half: zstd's format lets
 *    frames follow each other (RFC 8878), and Kafka's classes read such a payload as the concatenation of
 *    their contents (kafka-python 2.0.2, for one, does not: see compression.ZSTD_SPLIT_MIN).
 * The cuts depend on the size alone, so a builder writes the same bytes whoever compressed which piece,
 * and whether or not a thread was free (compression._zstd cuts two frames in the same place; a joined frame
 * is written in C only, so the pure-Python twin's one pass gives other bytes for the same records there).
 *
 * One worker thread for the process, started on first use, takes queued pieces oldest first.  A caller
 * compresses the last piece of its payload itself, then takes back its queued pieces from the last while
 * the worker takes them from the first, and waits only for a piece the worker is compressing (polling for
 * it a while before it sleeps: see KX_DW_POLL_NS): a caller never waits for a piece nobody is compressing,
 * and builders on several threads each get a core.
 *
 * The compression calls need no GIL.  A piece of a payload the caller holds points into it (the caller
 * keeps it alive until it has all the pieces back); a part a builder queues while appending is a copy
 * with its history (the builder's buffer moves as it grows), freed once compressed.  After fork() the child
 * starts without the worker (the thread is not copied) and with an empty queue: a piece of the thread that
 * forked is compressed by that thread when it takes it, and the next piece queued starts a worker.
 */
#ifndef KAFKATX_DEFLATE_H
#define KAFKATX_DEFLATE_H

#include <string.h>

#include "syslib.h"

#if KX_SYSLIB_POSSIBLE
#  include <signal.h>
#  include <time.h>
#endif

#define KX_ZSTD_SPLIT_MIN ((size_t)64 << 10) /* compression.ZSTD_SPLIT_MIN */
/* Where a payload of n record bytes is cut: n itself (one frame) below KX_ZSTD_SPLIT_MIN, else n / 2. */
static size_t kx_zstd_cut(size_t n)
{
    return n < KX_ZSTD_SPLIT_MIN ? n : n / 2;
}
/* A joined frame's pieces (kx_zstd_part_len, kx_zstd_piece_len; _codec._zstd_join_layout): parts of
   KX_ZSTD_PART record bytes and more, up to kx_zstd_big(level) (one pass's window at the level), each
   compressed with the records before it, up to as many, as history */
#define KX_ZSTD_PART ((size_t)64 << 10)
/* a part's and a history's most, so that the two fit a window of 2^KX_ZSTD_WLOG_MAX, the largest a
   decoder takes by default (ZSTD_WINDOWLOG_LIMIT_DEFAULT: 128 MiB) */
#define KX_ZSTD_WLOG_MAX 27
#define KX_ZSTD_BIG_MAX ((size_t)1 << (KX_ZSTD_WLOG_MAX - 1))
#define KX_ZSTD_SIZE_UNKNOWN (0ULL - 1) /* ZSTD_CONTENTSIZE_UNKNOWN */
#define KX_ZSTD_HEADER_ROOM ((size_t)32) /* room for a joined frame's header (ZSTD_FRAMEHEADERSIZE_MAX is 18) */

/*
 * The header of a joined frame of n record bytes into dst (KX_ZSTD_HEADER_ROOM bytes), as libzstd's
 * ZSTD_writeFrameHeader writes it (RFC 8878 3.1.1.1), for the largest window log of its pieces, ``wlog``,
 * and n as the frame's content size (known only when the builder is built, so the header is written last,
 * and no piece writes one): no checksum, no dictionary, one segment where the window holds all of it.  The
 * content size is what lets a reader size its output from the header: a piece ends a block, so the
 * frame's blocks are not the whole blocks a reader would otherwise assume.  Returns the header's size.
 */
static size_t kx_zstd_join_header(unsigned char *dst, size_t n, int wlog)
{
    int single = ((unsigned long long)1 << wlog) >= (unsigned long long)n;
    int fcs = (n >= 256) + (n >= 65536 + 256) + ((unsigned long long)n >= 0xFFFFFFFFULL);
    size_t h = 0;
    int i;
    dst[h++] = 0x28; /* the magic number, 0xFD2FB528 little-endian */
    dst[h++] = 0xB5;
    dst[h++] = 0x2F;
    dst[h++] = 0xFD;
    dst[h++] = (unsigned char)((fcs << 6) | (single << 5));
    if (!single)
        dst[h++] = (unsigned char)((wlog - 10) << 3); /* window: 2^wlog, mantissa 0 */
    if (fcs == 0) {
        if (single)
            dst[h++] = (unsigned char)n; /* one byte below 256, with one segment only */
    } else if (fcs == 1) {
        dst[h++] = (unsigned char)(n - 256);
        dst[h++] = (unsigned char)((n - 256) >> 8);
    } else {
        for (i = 0; i < (fcs == 2 ? 4 : 8); i++)
            dst[h++] = (unsigned char)((unsigned long long)n >> (8 * i));
    }
    return h;
}

#if KX_SYSLIB_POSSIBLE

/* ------------------------------------------------------------------------------------------ the library */
/* ZSTD_parameters (zstd.h's static API, unchanged since libzstd 1.0), passed by value */
typedef struct {
    unsigned windowLog, chainLog, hashLog, searchLog, minMatch, targetLength;
    int strategy;
} kx_zstd_cparams;
typedef struct {
    kx_zstd_cparams c;
    int content_size_flag, checksum_flag, no_dict_id_flag;
} kx_zstd_params;

/*
 * Which libzstd compresses: python-zstandard's own where its CFFI backend's module exports libzstd's
 * functions (it is built from libzstd's sources with their symbols visible; the compiled codec names the
 * file, kx_zstd_compressor_at), else the system's.  python-zstandard's first: the frames are then the
 * bytes compression._zstd writes, and its libzstd (1.5.7 with python-zstandard 0.25) compressed the
 * benchmark's records ~25% faster than Debian 12's (1.5.4).
 */
static struct {
    int ready;
    unsigned version;
    int bundled; /* python-zstandard's, not the system's */
    void *(*create)(void);
    size_t (*release)(void *);
    size_t (*set_parameter)(void *, int, int);
    size_t (*compress2)(void *, void *, size_t, const void *, size_t);
    size_t (*bound)(size_t);
    unsigned (*is_error)(size_t);
    /* a joined frame's (all or none, see kx_zstd_joins) */
    kx_zstd_params (*get_params)(int, unsigned long long, size_t);
    size_t (*begin)(void *, const void *, size_t, kx_zstd_params, unsigned long long);
    size_t (*resume)(void *, void *, size_t, const void *, size_t);
    size_t (*finish)(void *, void *, size_t, const void *, size_t);
    void (*clear_repeats)(void *);
    int joins;
} kx_zc;

static char kx_zc_path[4096]; /* python-zstandard's CFFI module, "" if none */
static pthread_once_t kx_zc_once = PTHREAD_ONCE_INIT;
static pthread_key_t kx_zc_key;

/* Name python-zstandard's CFFI module (before the first kx_zstd_compressor_version call to count). */
static void kx_zstd_compressor_at(const char *path)
{
    if (strlen(path) < sizeof(kx_zc_path))
        strcpy(kx_zc_path, path);
}

static void kx_zc_free_context(void *cctx)
{
    if (cctx != NULL)
        kx_zc.release(cctx);
}

static int kx_zc_try(const char *name, int bundled)
{
    unsigned (*version)(void);
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        return 0;
    *(void **)&version = dlsym(h, "ZSTD_versionNumber");
    *(void **)&kx_zc.create = dlsym(h, "ZSTD_createCCtx");
    *(void **)&kx_zc.release = dlsym(h, "ZSTD_freeCCtx");
    *(void **)&kx_zc.set_parameter = dlsym(h, "ZSTD_CCtx_setParameter");
    *(void **)&kx_zc.compress2 = dlsym(h, "ZSTD_compress2");
    *(void **)&kx_zc.bound = dlsym(h, "ZSTD_compressBound");
    *(void **)&kx_zc.is_error = dlsym(h, "ZSTD_isError");
    if (version == NULL || kx_zc.create == NULL || kx_zc.release == NULL || kx_zc.set_parameter == NULL
        || kx_zc.compress2 == NULL || kx_zc.bound == NULL || kx_zc.is_error == NULL
        || (kx_zc.version = version()) < KX_SYSZSTD_MIN_VERSION) {
        dlclose(h);
        return 0;
    }
    *(void **)&kx_zc.get_params = dlsym(h, "ZSTD_getParams");
    *(void **)&kx_zc.begin = dlsym(h, "ZSTD_compressBegin_advanced");
    *(void **)&kx_zc.resume = dlsym(h, "ZSTD_compressContinue");
    *(void **)&kx_zc.finish = dlsym(h, "ZSTD_compressEnd");
    *(void **)&kx_zc.clear_repeats = dlsym(h, "ZSTD_invalidateRepCodes");
    kx_zc.joins = kx_zc.get_params != NULL && kx_zc.begin != NULL && kx_zc.resume != NULL && kx_zc.finish != NULL
                  && kx_zc.clear_repeats != NULL;
    kx_zc.bundled = bundled;
    return 1; /* the library stays loaded for the life of the process */
}

static void kx_zc_load(void)
{
    static const char *const names[] = {"libzstd.so.1", "libzstd.1.dylib", "libzstd.dylib", NULL};
    int i, ok = 0;
    if (kx_syslib_disabled)
        return;
    if (kx_zc_path[0])
        ok = kx_zc_try(kx_zc_path, 1);
    for (i = 0; !ok && names[i] != NULL; i++)
        ok = kx_zc_try(names[i], 0);
    kx_zc.ready = ok && pthread_key_create(&kx_zc_key, kx_zc_free_context) == 0;
}

/* The version of the libzstd that compresses here, 0 when there is none (``*bundled``: python-zstandard's). */
static unsigned kx_zstd_compressor_version(int *bundled)
{
    pthread_once(&kx_zc_once, kx_zc_load);
    *bundled = kx_zc.bundled;
    return kx_zc.ready ? kx_zc.version : 0;
}

/* What compressing n bytes may take at most (ZSTD_compressBound); needs a library. */
static size_t kx_zstd_bound(size_t n)
{
    return kx_zc.bound(n);
}

/* The calling thread's context (made on first use, freed when the thread ends); NULL if none could be made. */
static void *kx_zc_context(void)
{
    void *cctx = pthread_getspecific(kx_zc_key);
    if (cctx == NULL) {
        cctx = kx_zc.create();
        if (cctx != NULL && pthread_setspecific(kx_zc_key, cctx) != 0) {
            kx_zc.release(cctx);
            cctx = NULL;
        }
    }
    return cctx;
}

/*
 * Compress src[0, n) at ``level`` into dst[0, cap) as one frame with neither a content size nor a
 * checksum (as compression._zstd asks python-zstandard to, and as zstd-jni's stream writes Kafka's
 * frames) with the calling thread's context: the bytes written, -1 if libzstd fails (cap short of
 * kx_zstd_bound(n), no memory), -2 if no context could be made.  Needs kx_zstd_compressor_version() != 0;
 * needs no GIL.
 */
static long long kx_zstd_frame(void *dst, size_t cap, const void *src, size_t n, int level)
{
    void *cctx = kx_zc_context();
    size_t r;
    if (cctx == NULL)
        return -2;
    /* ZSTD_c_compressionLevel 100, ZSTD_c_contentSizeFlag 200, ZSTD_c_checksumFlag 201 (zstd.h, stable) */
    if (kx_zc.is_error(kx_zc.set_parameter(cctx, 100, level)) || kx_zc.is_error(kx_zc.set_parameter(cctx, 200, 0))
        || kx_zc.is_error(kx_zc.set_parameter(cctx, 201, 0)))
        return -1;
    r = kx_zc.compress2(cctx, dst, cap, src, n);
    return kx_zc.is_error(r) ? -1 : (long long)r;
}

/* Whether the library can write a joined frame (kx_zstd_part); after kx_zstd_compressor_version. */
static int kx_zstd_joins(void)
{
    return kx_zc.ready && kx_zc.joins;
}

/* The parameters a piece of a joined frame of ``len`` bytes with ``keep`` bytes of history is compressed
   with, with neither a content size nor a checksum: the level's for keep + len bytes up to 128 KiB (as a
   one-pass compressor picks them for a payload that size), and past that the level's for a payload of
   unknown size (the tables of one pass over a large payload: smaller ones lose the history's matches to
   the piece's own bytes), with the window fitted to keep + len (up to twice one pass's).  They depend on
   where the piece starts and ends alone, not on who compresses it, nor, for a part, on the payload's
   size: a builder queues parts before it knows that. */
static kx_zstd_params kx_zstd_join_params(size_t keep, size_t len, int level)
{
    size_t size = keep + len;
    kx_zstd_params p = kx_zc.get_params(level, size <= KX_ZSTD_PART * 2 ? (unsigned long long)size : 0, 0);
    while (p.c.windowLog > 10 && ((size_t)1 << (p.c.windowLog - 1)) >= size)
        p.c.windowLog--;
    while (p.c.windowLog < KX_ZSTD_WLOG_MAX && ((size_t)1 << p.c.windowLog) < size)
        p.c.windowLog++;
    p.content_size_flag = 0;
    p.checksum_flag = 0;
    p.no_dict_id_flag = 1;
    return p;
}

/* The longest part and history at ``level``: the window one pass over a large payload has at that level
   (so that every byte of a piece reaches at least as far back as in one pass), up to KX_ZSTD_BIG_MAX. */
static size_t kx_zstd_big(int level)
{
    size_t window;
    if (!kx_zstd_joins())
        return KX_ZSTD_BIG_MAX;
    window = (size_t)1 << kx_zc.get_params(level, 0, 0).c.windowLog;
    return window < KX_ZSTD_PART ? KX_ZSTD_PART : window < KX_ZSTD_BIG_MAX ? window : KX_ZSTD_BIG_MAX;
}

/* A piece's window log (kx_zstd_join_params). */
static int kx_zstd_part_wlog(size_t keep, size_t len, int level)
{
    return (int)kx_zstd_join_params(keep, len, level).c.windowLog;
}

/*
 * One part of a joined frame at ``level``: the blocks of at[0, len), with the ``keep`` bytes before ``at``
 * as history, into dst[0, cap) (cap at least kx_zstd_bound(len)), without a frame header
 * (kx_zstd_join_header writes the frame's); ``last``: the frame's last part, which ends it.  Returns as
 * kx_zstd_frame.
 */
static long long kx_zstd_part(void *dst, size_t cap, const unsigned char *at, size_t keep, size_t len, int last,
                              int level)
{
    kx_zstd_params p = kx_zstd_join_params(keep, len, level);
    size_t window = (size_t)1 << p.c.windowLog, r;
    unsigned char header[KX_ZSTD_HEADER_ROOM];
    const unsigned char *history;
    void *cctx = kx_zc_context();
    if (cctx == NULL)
        return -2;
    /* libzstd lets matches reach anywhere in the history it is given, the decoder only a window back: keep
       history and part within one window (a guard: kx_zstd_join_params fits the window to both) */
    if (len >= window)
        keep = 0;
    else if (keep > window - len)
        keep = window - len;
    history = at - keep;
    /* history opening with a dictionary's magic number would be read as one: start a byte later */
    if (keep >= 4 && history[0] == 0x37 && history[1] == 0xA4 && history[2] == 0x30 && history[3] == 0xEC) {
        history++;
        keep--;
    }
    r = kx_zc.begin(cctx, keep ? history : NULL, keep, p, KX_ZSTD_SIZE_UNKNOWN);
    /* the context writes a frame header first: into the scratch, not dst; and the decoder carries the
       previous part's repeat offsets into this one, which the compressor would not know: clear them */
    if (!kx_zc.is_error(r))
        r = kx_zc.resume(cctx, header, sizeof(header), at, 0);
    if (!kx_zc.is_error(r)) {
        kx_zc.clear_repeats(cctx);
        r = last ? kx_zc.finish(cctx, dst, cap, at, len) : kx_zc.resume(cctx, dst, cap, at, len);
    }
    return kx_zc.is_error(r) ? -1 : (long long)r;
}

/* ----------------------------------------------------------------------------------------------- jobs */
enum { KX_JOB_IDLE = 0, KX_JOB_QUEUED = 1, KX_JOB_TAKEN = 2, KX_JOB_DONE = 3 };

/* A piece of compression the worker or its caller does: a part of a joined frame, or a frame of its own. */
typedef struct kx_zjob {
    struct kx_zjob *prev, *next; /* the worker's queue, while QUEUED */
    int state;
    int whole;                   /* a frame of its own (kx_zstd_frame) rather than a part */
    int last;
    int level;
    const unsigned char *at;     /* kx_zstd_part's arguments */
    size_t keep, len;
    unsigned char *dst;
    size_t cap;
    long long result;
    unsigned char *own;          /* a copy ``at`` points into (kx_zstream's), or NULL */
} kx_zjob;

static long long kx_zjob_run(const kx_zjob *j)
{
    return j->whole ? kx_zstd_frame(j->dst, j->cap, j->at, j->len, j->level)
                    : kx_zstd_part(j->dst, j->cap, j->at, j->keep, j->len, j->last, j->level);
}

/* ----------------------------------------------------------------------------------------- the worker */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t job;        /* the worker waits here for a queued job */
    pthread_cond_t done;       /* callers wait here for a TAKEN job to be DONE */
    int started;               /* 1: the worker runs; -1: it could not be started */
    kx_zjob *head, *tail;      /* QUEUED jobs, oldest first */
    kx_zjob *current;          /* the job the worker compresses */
    long long expect_until;    /* kx_zstd_expect: until then (CLOCK_MONOTONIC ns) the idle worker polls */
    long jobs;                 /* jobs the worker compressed (for the tests) */
} kx_dw = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER};

/* (under kx_dw.mu) */
static void kx_dw_unlink(kx_zjob *j)
{
    if (j->prev != NULL)
        j->prev->next = j->next;
    else
        __atomic_store_n(&kx_dw.head, j->next, __ATOMIC_RELEASE); /* (kx_dw_main polls it unlocked) */
    if (j->next != NULL)
        j->next->prev = j->prev;
    else
        kx_dw.tail = j->prev;
    j->prev = j->next = NULL;
}

/* (under kx_dw.mu) */
static void kx_dw_push(kx_zjob *j)
{
    j->state = KX_JOB_QUEUED;
    j->next = NULL;
    j->prev = kx_dw.tail;
    if (kx_dw.tail != NULL)
        kx_dw.tail->next = j;
    else
        __atomic_store_n(&kx_dw.head, j, __ATOMIC_RELEASE);
    kx_dw.tail = j;
}

/* How long a caller polls for a job the worker is compressing before it sleeps until woken: a thread
   woken from a condition variable runs again tens of microseconds later where its CPU went idle (~65 us
   on this project's VM), more than the worker usually has left of a piece when its caller gets there. */
#define KX_DW_POLL_NS 200000
/* how long before a part is queued a builder warns the worker (kx_zstd_expect), at most: the last quarter
   of the first part's records (~30 us of appends in the benchmark's batches) */
#define KX_DW_EXPECT_NS 200000
#if defined(__x86_64__) || defined(__i386__)
#  define KX_CPU_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#  define KX_CPU_RELAX() __asm__ __volatile__("yield")
#else
#  define KX_CPU_RELAX() ((void)0)
#endif

static long long kx_dw_now_ns(void)
{
    struct timespec t;
    if (clock_gettime(CLOCK_MONOTONIC, &t) != 0)
        return -1;
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Spin, without kx_dw.mu, until ready(arg) or the monotonic clock passes ``until`` (read every 64 turns). */
static void kx_dw_poll(int (*ready)(const void *), const void *arg, long long until)
{
    int polls = 0;
    while (!ready(arg) && (++polls % 64 != 0 || kx_dw_now_ns() < until))
        KX_CPU_RELAX();
}

static int kx_dw_queued(const void *unused)
{
    (void)unused;
    return __atomic_load_n(&kx_dw.head, __ATOMIC_ACQUIRE) != NULL;
}

static int kx_dw_finished(const void *job)
{
    return __atomic_load_n(&((const kx_zjob *)job)->state, __ATOMIC_ACQUIRE) == KX_JOB_DONE;
}

static void *kx_dw_main(void *unused)
{
    kx_zjob *j;
    long long r, until;
    (void)unused;
    pthread_mutex_lock(&kx_dw.mu);
    for (;;) {
        while (kx_dw.head == NULL) {
            if (kx_dw.expect_until) { /* a part is on its way (kx_zstd_expect): poll for it */
                until = kx_dw.expect_until;
                kx_dw.expect_until = 0;
                pthread_mutex_unlock(&kx_dw.mu);
                kx_dw_poll(kx_dw_queued, NULL, until);
                pthread_mutex_lock(&kx_dw.mu);
                continue;
            }
            pthread_cond_wait(&kx_dw.job, &kx_dw.mu);
        }
        j = kx_dw.head;
        kx_dw_unlink(j);
        j->state = KX_JOB_TAKEN;
        kx_dw.current = j;
        pthread_mutex_unlock(&kx_dw.mu);
        r = kx_zjob_run(j);
        pthread_mutex_lock(&kx_dw.mu);
        j->result = r;
        __atomic_store_n(&j->state, KX_JOB_DONE, __ATOMIC_RELEASE); /* (kx_dw_take polls it unlocked) */
        kx_dw.current = NULL;
        kx_dw.jobs++;
        pthread_cond_broadcast(&kx_dw.done);
    }
    return NULL;
}

/* fork(): hold the lock across it, so that the child's copy is consistent.  The child has no worker, and
   of the parent's threads only the one that forked: the queue is emptied, and its jobs and the one the
   worker had taken are IDLE again, for their owner to compress if it is the thread that forked (the others'
   jobs may lie on stacks the child no longer has: they are not touched). */
static void kx_dw_prepare(void) { pthread_mutex_lock(&kx_dw.mu); }
static void kx_dw_parent(void) { pthread_mutex_unlock(&kx_dw.mu); }
static void kx_dw_child(void)
{
    kx_zjob *j;
    kx_dw.started = 0;
    kx_dw.expect_until = 0;
    while ((j = kx_dw.head) != NULL) {
        kx_dw_unlink(j);
        j->state = KX_JOB_IDLE;
    }
    if (kx_dw.current != NULL) {
        kx_dw.current->state = KX_JOB_IDLE;
        kx_dw.current = NULL;
    }
    pthread_cond_init(&kx_dw.job, NULL);
    pthread_cond_init(&kx_dw.done, NULL);
    pthread_mutex_unlock(&kx_dw.mu);
}
static pthread_once_t kx_dw_once = PTHREAD_ONCE_INIT;
static void kx_dw_init(void) { pthread_atfork(kx_dw_prepare, kx_dw_parent, kx_dw_child); }

/* Queue a job for the worker (starting it if need be); the job stays IDLE, for its owner to run, where no
   thread is to be had.  Every posted job is then passed to kx_dw_take or kx_dw_cancel by its owner. */
static void kx_dw_post(kx_zjob *j)
{
    pthread_attr_t attr;
    pthread_t t;
    sigset_t all, old;
    pthread_once(&kx_dw_once, kx_dw_init);
    pthread_mutex_lock(&kx_dw.mu);
    if (kx_dw.started == 0) {
        kx_dw.started = -1;
        if (pthread_attr_init(&attr) == 0) {
            /* the worker takes no signals: they stay with the threads Python runs on */
            sigfillset(&all);
            pthread_sigmask(SIG_SETMASK, &all, &old);
            if (pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0
                && pthread_create(&t, &attr, kx_dw_main, NULL) == 0)
                kx_dw.started = 1;
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            pthread_attr_destroy(&attr);
        }
    }
    if (kx_dw.started == 1) {
        kx_dw_push(j);
        pthread_cond_signal(&kx_dw.job);
    }
    pthread_mutex_unlock(&kx_dw.mu);
}

/* A job's result: compressed here if nobody has started on it (a queued job is taken back), else the
   worker's, waited for (polled for up to KX_DW_POLL_NS first).  A caller never waits for a job nobody is
   compressing. */
static long long kx_dw_take(kx_zjob *j)
{
    long long r, until;
    pthread_mutex_lock(&kx_dw.mu);
    if (j->state == KX_JOB_QUEUED)
        kx_dw_unlink(j);
    if (j->state == KX_JOB_QUEUED || j->state == KX_JOB_IDLE) {
        j->state = KX_JOB_TAKEN;
        pthread_mutex_unlock(&kx_dw.mu);
        r = kx_zjob_run(j);
        pthread_mutex_lock(&kx_dw.mu);
        j->result = r;
        j->state = KX_JOB_DONE;
        pthread_cond_broadcast(&kx_dw.done);
    }
    if (j->state != KX_JOB_DONE && (until = kx_dw_now_ns()) >= 0) {
        pthread_mutex_unlock(&kx_dw.mu);
        kx_dw_poll(kx_dw_finished, j, until + KX_DW_POLL_NS);
        pthread_mutex_lock(&kx_dw.mu);
    }
    while (j->state != KX_JOB_DONE)
        pthread_cond_wait(&kx_dw.done, &kx_dw.mu);
    r = j->result;
    pthread_mutex_unlock(&kx_dw.mu);
    return r;
}

/* Drop a job: out of the queue if it is there, else wait until the worker is done with it. */
static void kx_dw_cancel(kx_zjob *j)
{
    pthread_mutex_lock(&kx_dw.mu);
    if (j->state == KX_JOB_QUEUED) {
        kx_dw_unlink(j);
        j->state = KX_JOB_IDLE;
    }
    while (j->state == KX_JOB_TAKEN)
        pthread_cond_wait(&kx_dw.done, &kx_dw.mu);
    pthread_mutex_unlock(&kx_dw.mu);
}

/* Whether a job is done (its result ready for kx_dw_take). */
static int kx_dw_done(kx_zjob *j)
{
    int done;
    pthread_mutex_lock(&kx_dw.mu);
    done = j->state == KX_JOB_DONE;
    pthread_mutex_unlock(&kx_dw.mu);
    return done;
}

static long kx_zstd_worker_jobs(void)
{
    long n;
    pthread_mutex_lock(&kx_dw.mu);
    n = kx_dw.jobs;
    pthread_mutex_unlock(&kx_dw.mu);
    return n;
}

/* A builder's heads-up that it will queue a part within KX_DW_EXPECT_NS: an idle worker is woken now and
   polls for it until then, so that it starts on the part as it is queued rather than when its CPU is up
   again (see KX_DW_POLL_NS).  Nothing if the worker is busy or not started. */
static void kx_zstd_expect(void)
{
    long long now;
    pthread_mutex_lock(&kx_dw.mu);
    if (kx_dw.started == 1 && kx_dw.current == NULL && kx_dw.head == NULL && (now = kx_dw_now_ns()) >= 0) {
        kx_dw.expect_until = now + KX_DW_EXPECT_NS;
        pthread_cond_signal(&kx_dw.job);
    }
    pthread_mutex_unlock(&kx_dw.mu);
}

#else

static void kx_zstd_compressor_at(const char *path) { (void)path; }
static unsigned kx_zstd_compressor_version(int *bundled)
{
    *bundled = 0;
    return 0;
}
static size_t kx_zstd_bound(size_t n) { return n; }
static long long kx_zstd_frame(void *dst, size_t cap, const void *src, size_t n, int level)
{
    (void)dst; (void)cap; (void)src; (void)n; (void)level;
    return -2;
}
static int kx_zstd_joins(void) { return 0; }

typedef struct kx_zjob {
    int whole, last, level;
    const unsigned char *at;
    size_t keep, len;
    unsigned char *dst;
    size_t cap;
    long long result;
    unsigned char *own;
} kx_zjob;

static int kx_zstd_part_wlog(size_t keep, size_t len, int level)
{
    (void)keep; (void)len; (void)level;
    return 0;
}
static size_t kx_zstd_big(int level) { (void)level; return KX_ZSTD_BIG_MAX; }
static void kx_dw_post(kx_zjob *j) { (void)j; }
static int kx_dw_done(kx_zjob *j) { (void)j; return 0; }
static long long kx_dw_take(kx_zjob *j) { (void)j; return -2; }
static void kx_dw_cancel(kx_zjob *j) { (void)j; }
static long kx_zstd_worker_jobs(void) { return 0; }
static void kx_zstd_expect(void) {}

#endif

/* ------------------------------------------------------------------------------------ the layouts */
/* Whether kx_zstd_deflate cuts a payload of n record bytes: into two frames at KX_ZSTD_SPLIT_MIN bytes or
   more (frames 2), or into the pieces of a joined frame past KX_ZSTD_PART bytes where the library writes one. */
static int kx_zstd_cuts(size_t n, int frames)
{
    return frames == 2 ? kx_zstd_cut(n) < n : n > KX_ZSTD_PART && kx_zstd_joins();
}

/* The length of the part of a joined frame that starts at record byte s, a part's start: KX_ZSTD_PART for
   the first, then as long as all the records before it, up to ``big`` (kx_zstd_big: 0, 64 KiB, 128 KiB,
   256 KiB, ... 1 MiB, 2 MiB, 4 MiB, 6 MiB, ... at level 3), so that a part's history (all the records before it,
   up to ``big``) costs no more to index, all parts taken, than the records once. */
static size_t kx_zstd_part_len(size_t s, size_t big)
{
    return s == 0 ? KX_ZSTD_PART : s < big ? s : big;
}

/* The last part's start before n: where the parts of a joined frame of n record bytes stop and its rest
   (1 to kx_zstd_part_len of it bytes) begins; a builder has queued every part before it (kx_zstream). */
static size_t kx_zstd_rest(size_t n, size_t big)
{
    size_t s = 0;
    while (s + kx_zstd_part_len(s, big) < n)
        s += kx_zstd_part_len(s, big);
    return s;
}

/* The length of the piece of the joined frame of n record bytes that starts at s (0, or where the piece
   before it ends), given rest = kx_zstd_rest(n, big): the parts before the rest, then the rest in one
   piece, or in two halves when it is longer than KX_ZSTD_PART (the worker takes one, the caller the other). */
static size_t kx_zstd_piece_len(size_t n, size_t rest, size_t s, size_t big)
{
    if (s < rest)
        return kx_zstd_part_len(s, big);
    return s == rest && n - rest > KX_ZSTD_PART ? (n - rest) / 2 : n - s;
}

/* A piece's history: the records before it, up to ``big``. */
static size_t kx_zstd_keep(size_t s, size_t big)
{
    return s < big ? s : big;
}

/* The pieces of a joined frame of n record bytes. */
static size_t kx_zstd_pieces(size_t n, size_t big)
{
    size_t rest = kx_zstd_rest(n, big), s = 0, k = 0;
    for (; s < n; k++)
        s += kx_zstd_piece_len(n, rest, s, big);
    return k;
}

/* What kx_zstd_deflate may write at most for n record bytes at ``level`` (the pieces' bounds when it cuts). */
static size_t kx_zstd_deflate_bound(size_t n, int frames, int level)
{
    size_t cut = kx_zstd_cut(n), big, rest, s, len, bound;
    if (!kx_zstd_cuts(n, frames))
        return kx_zstd_bound(n);
    if (frames == 2)
        return kx_zstd_bound(cut) + kx_zstd_bound(n - cut);
    big = kx_zstd_big(level);
    rest = kx_zstd_rest(n, big);
    for (s = 0, bound = KX_ZSTD_HEADER_ROOM; s < n; s += len) {
        len = kx_zstd_piece_len(n, rest, s, big);
        bound += kx_zstd_bound(len);
    }
    return bound;
}

/*
 * A builder's joined frame begun while its records are appended: each part that is complete (records past
 * its end) is copied out of the builder's buffer (which may move as it grows), with its history, and
 * queued for the worker; kx_zstd_deflate_joined takes the rest when the builder is built.  A part's copy
 * is freed once the worker has compressed it (its output is kept).
 */
typedef struct {
    int level;
    size_t big;     /* kx_zstd_big(level) */
    size_t posted;  /* record bytes in jobs: the parts before this */
    size_t next;    /* where the part that starts at ``posted`` ends: it is queued once the records pass it */
    size_t njobs, room, done;
    kx_zjob **jobs; /* each allocated with its output after it; its input (history and part) in ``own`` */
} kx_zstream;

static kx_zstream *kx_zstream_new(int level)
{
    kx_zstream *s = (kx_zstream *)calloc(1, sizeof(kx_zstream));
    if (s != NULL) {
        s->level = level;
        s->big = kx_zstd_big(level);
        s->next = kx_zstd_part_len(0, s->big);
    }
    return s;
}

/* Queue the parts of records[0, n) that are complete and not queued yet; -1 if out of memory (the
   stream is then of no more use: free it, and compress the whole payload when the builder is built). */
static int kx_zstream_feed(kx_zstream *s, const unsigned char *records, size_t n)
{
    kx_zjob *j, **more;
    unsigned char *in;
    size_t keep, len;
    /* the copies of the parts the worker is done with (from the oldest, as it takes them) */
    while (s->done < s->njobs && kx_dw_done(s->jobs[s->done])) {
        free(s->jobs[s->done]->own);
        s->jobs[s->done]->own = NULL;
        s->done++;
    }
    while (n > s->next) {
        len = s->next - s->posted;
        if (s->njobs == s->room) {
            more = (kx_zjob **)realloc(s->jobs, (s->room ? 2 * s->room : 16) * sizeof(kx_zjob *));
            if (more == NULL)
                return -1;
            s->jobs = more;
            s->room = s->room ? 2 * s->room : 16;
        }
        keep = kx_zstd_keep(s->posted, s->big);
        j = (kx_zjob *)malloc(sizeof(kx_zjob) + kx_zstd_bound(len));
        in = (unsigned char *)malloc(keep + len);
        if (j == NULL || in == NULL) {
            free(j);
            free(in);
            return -1;
        }
        memset(j, 0, sizeof(*j));
        memcpy(in, records + s->posted - keep, keep + len);
        j->own = in;
        j->level = s->level;
        j->keep = keep;
        j->len = len;
        j->at = in + keep;
        j->dst = (unsigned char *)(j + 1);
        j->cap = kx_zstd_bound(len);
        s->jobs[s->njobs++] = j;
        s->posted = s->next;
        s->next += kx_zstd_part_len(s->next, s->big);
        kx_dw_post(j);
    }
    return 0;
}

static void kx_zstream_free(kx_zstream *s)
{
    size_t i;
    if (s == NULL)
        return;
    for (i = 0; i < s->njobs; i++) {
        kx_dw_cancel(s->jobs[i]);
        free(s->jobs[i]->own);
        free(s->jobs[i]);
    }
    free(s->jobs);
    free(s);
}

/*
 * The joined frame of src[0, n) at ``level`` into dst[0, cap) (cap at least kx_zstd_deflate_bound(n, 1,
 * level)):
 * the parts a stream ``s`` (or NULL) holds, then the other pieces, queued for the worker where ``threads``
 * allows one, but for the last, which the caller compresses before taking back the others from the end
 * while the worker takes them from the front; then the frame's header, and the pieces after it.  The same
 * bytes whoever compresses which piece.
 */
static long long kx_zstd_deflate_joined(unsigned char *dst, size_t cap, const unsigned char *src, size_t n,
                                        int level, int threads, kx_zstream *s)
{
    size_t big = kx_zstd_big(level), k = kx_zstd_pieces(n, big), rest = kx_zstd_rest(n, big), i, pos, at, start;
    size_t had = s != NULL ? s->njobs : 0;
    kx_zjob *local, *j;
    long long r, bad = 0;
    int wlog = 0;
    if (cap < kx_zstd_deflate_bound(n, 1, level) || had >= k
        || (s != NULL && (s->posted > rest || s->level != level)))
        return -1;
    local = (kx_zjob *)malloc((k - had) * sizeof(kx_zjob));
    if (local == NULL)
        return -1;
    /* the pieces' room in dst: piece i's output after the header's room and the bounds of the pieces
       before it (the stream's parts' outputs are in their jobs, and are moved into their room) */
    start = s != NULL ? s->posted : 0;
    for (i = 0, at = KX_ZSTD_HEADER_ROOM; i < had; i++)
        at += s->jobs[i]->cap;
    for (i = had; i < k; i++) {
        j = &local[i - had];
        memset(j, 0, sizeof(*j));
        j->level = level;
        j->at = src + start;
        j->keep = kx_zstd_keep(start, big);
        j->len = kx_zstd_piece_len(n, rest, start, big);
        j->last = start + j->len == n;
        j->dst = dst + at;
        j->cap = kx_zstd_bound(j->len);
        at += j->cap;
        start += j->len;
    }
    if (threads)
        for (i = had; i + 1 < k; i++)
            kx_dw_post(&local[i - had]);
    for (i = k; i-- > 0;) {
        j = i < had ? s->jobs[i] : &local[i - had];
        r = kx_dw_take(j);
        j->result = r;
        if (r < 0 && bad == 0)
            bad = r;
        if (kx_zstd_part_wlog(j->keep, j->len, level) > wlog)
            wlog = kx_zstd_part_wlog(j->keep, j->len, level);
    }
    /* the header, then each piece's output after the one before (it only moves down: the header is at most
       18 bytes, and outputs are at most their bounds) */
    for (i = 0, pos = bad == 0 ? kx_zstd_join_header(dst, n, wlog) : 0; i < k && bad == 0; i++) {
        j = i < had ? s->jobs[i] : &local[i - had];
        memmove(dst + pos, j->dst, (size_t)j->result);
        pos += (size_t)j->result;
    }
    free(local);
    return bad < 0 ? bad : (long long)pos;
}

/*
 * The zstd payload of the records src[0, n) at ``level`` into dst[0, cap), cap at least
 * kx_zstd_deflate_bound(n, frames, level): with ``frames`` 1 one frame, joined from parts where kx_zstd_cuts;
 * with 2, two frames cut at kx_zstd_cut(n).  The worker takes pieces where ``threads`` allows it.  The
 * bytes written, or < 0 as kx_zstd_frame.  Needs kx_zstd_compressor_version() != 0; needs no GIL.
 */
static long long kx_zstd_deflate(unsigned char *dst, size_t cap, const unsigned char *src, size_t n, int level,
                                 int threads, int frames)
{
    size_t cut = kx_zstd_cut(n), cap1;
    long long first, second;
    kx_zjob j;
    if (!kx_zstd_cuts(n, frames))
        return kx_zstd_frame(dst, cap, src, n, level);
    if (frames != 2)
        return kx_zstd_deflate_joined(dst, cap, src, n, level, threads, NULL);
    /* the second frame goes after the first one's bound, and moves down once the first one's size is known */
    cap1 = kx_zstd_bound(cut);
    if (cap < cap1)
        return -1;
    memset(&j, 0, sizeof(j));
    j.whole = 1;
    j.level = level;
    j.at = src + cut;
    j.len = n - cut;
    j.dst = dst + cap1;
    j.cap = cap - cap1;
    if (threads)
        kx_dw_post(&j);
    first = kx_zstd_frame(dst, cap1, src, cut, level);
    second = kx_dw_take(&j);
    if (first < 0 || second < 0)
        return first < 0 ? first : second;
    memmove(dst + first, dst + cap1, (size_t)second);
    return first + second;
}

#endif /* KAFKATX_DEFLATE_H */
