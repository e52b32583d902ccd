/*
 * deflate.h -- a large zstd payload compressed in two halves at once, the second on a worker thread.
 *
 * zstd at Kafka's default level is the slowest part of building a batch by far: ~3 ns a byte, against
 * well under 1 ns for encoding the records.  A producer builds one batch at a time, so the only way to use
 * a second core for it is inside the batch.  A payload of KX_ZSTD_SPLIT_MIN record bytes or more is cut
 * at half its bytes, and each half is compressed on its own core, in one of two forms:
 *  - one frame (the default, zstd_frames=1), as libzstd's own multithreaded compressor joins its jobs:
 *    the caller writes the frame header and the first half's blocks; the worker compresses the second
 *    half with the first half as its history (as much of it as fits in the frame's window beside the
 *    second half: matches may reach back into it) and its repeat offsets cleared (the decoder carries
 *    the first half's into the second half's blocks: cleared, the compressor never refers to them), and
 *    writes blocks that end the frame.  This needs libzstd's buffer-less functions and its internal
 *    ZSTD_invalidateRepCodes, which python-zstandard's build exports and a system libzstd does not
 *    (kx_zstd_joins() is 0 then, and the payload is compressed in one pass, as compression._zstd does);
 *  - two frames (zstd_frames=2), the records' first half and their second half: zstd's format lets
 *    frames follow each other (RFC 8878), and Kafka's classes read such a payload as the concatenation of
 *    their contents (kafka-python 2.0.2, for one, does not: see compression.ZSTD_SPLIT_MIN).
 * The cut depends on the size alone, so a builder writes the same bytes whether or not a thread was free
 * (compression._zstd cuts two frames in the same place; a joined frame is written in C only, so the
 * pure-Python twin's one pass gives other bytes for the same records there).
 *
 * One worker thread for the process, started on first use, compresses the second half while the caller
 * compresses the first.  A caller that finds the worker busy with another caller's half, or finishes its
 * own half before the worker has started on the second, compresses the second half itself: a caller
 * never waits for a half nobody is compressing, and two builders on two threads each get a core.
 *
 * The compression calls need no GIL; the caller keeps its buffers alive until the call returns (the
 * worker only touches them between being handed a job and marking it done, which the caller waits for).
 * After fork() the child starts without the worker (the thread is not copied); the next call starts one.
 */
#ifndef KAFKATX_DEFLATE_H
#define KAFKATX_DEFLATE_H

#include <string.h>

#include "syslib.h"

#if KX_SYSLIB_POSSIBLE
#  include <signal.h>
#endif

#define KX_ZSTD_SPLIT_MIN ((size_t)64 << 10) /* compression.ZSTD_SPLIT_MIN */
/* Where a payload of n record bytes is cut: n itself (one frame) below KX_ZSTD_SPLIT_MIN, else n / 2. */
static size_t kx_zstd_cut(size_t n)
{
    return n < KX_ZSTD_SPLIT_MIN ? n : n / 2;
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

/* Whether the library can write a joined frame (kx_zstd_head and kx_zstd_tail); after
   kx_zstd_compressor_version. */
static int kx_zstd_joins(void)
{
    return kx_zc.ready && kx_zc.joins;
}

/* The parameters both halves of a joined frame of n bytes are compressed with: the level's for n bytes
   (as ZSTD_compress2 chooses them for one pass), with neither a content size nor a checksum. */
static kx_zstd_params kx_zstd_join_params(size_t n, int level)
{
    kx_zstd_params p = kx_zc.get_params(level, n, 0);
    p.content_size_flag = 0;
    p.checksum_flag = 0;
    p.no_dict_id_flag = 1;
    return p;
}

/*
 * A joined frame's first part: its header and the blocks of src[0, cut), none of them the last, into
 * dst[0, cap) (cap at least kx_zstd_bound(cut)); n is the whole payload.  Returns as kx_zstd_frame.
 */
static long long kx_zstd_head(void *dst, size_t cap, const unsigned char *src, size_t cut, size_t n, int level)
{
    void *cctx = kx_zc_context();
    size_t r;
    if (cctx == NULL)
        return -2;
    r = kx_zc.begin(cctx, NULL, 0, kx_zstd_join_params(n, level), n);
    if (!kx_zc.is_error(r))
        r = kx_zc.resume(cctx, dst, cap, src, cut);
    return kx_zc.is_error(r) ? -1 : (long long)r;
}

/*
 * A joined frame's second part: the blocks of src[cut, n) that end the frame kx_zstd_head began (no
 * header), into dst[0, cap) (cap at least kx_zstd_bound(n - cut)).  Returns as kx_zstd_frame.
 */
static long long kx_zstd_tail(void *dst, size_t cap, const unsigned char *src, size_t cut, size_t n, int level)
{
    kx_zstd_params p = kx_zstd_join_params(n, level);
    size_t window = (size_t)1 << p.c.windowLog, keep = cut;
    const unsigned char *history;
    unsigned char header[32]; /* ZSTD_FRAMEHEADERSIZE_MAX is 18 */
    void *cctx = kx_zc_context();
    size_t r;
    if (cctx == NULL)
        return -2;
    /* The whole first half, not only its last few KiB: a value repeated across the cut is then matched as
       in one pass (the benchmark's payloads: the worker's half takes ~18% longer, for indexing the
       history first).  libzstd lets matches reach anywhere in the history it is given, the decoder only a
       window back: keep history and second half within one window (n is below it for all but payloads of
       megabytes). */
    if (n - cut >= window)
        keep = 0;
    else if (keep > window - (n - cut))
        keep = window - (n - cut);
    history = src + cut - keep;
    /* history opening with a dictionary's magic number would be read as one: start a byte later */
    if (keep >= 4 && history[0] == 0x37 && history[1] == 0xA4 && history[2] == 0x30 && history[3] == 0xEC) {
        history++;
        keep--;
    }
    r = kx_zc.begin(cctx, history, keep, p, n - cut);
    if (!kx_zc.is_error(r)) /* the context writes a frame header first: into the scratch, not dst */
        r = kx_zc.resume(cctx, header, sizeof(header), src + cut, 0);
    if (kx_zc.is_error(r))
        return -1;
    kx_zc.clear_repeats(cctx);
    r = kx_zc.finish(cctx, dst, cap, src + cut, n - cut);
    return kx_zc.is_error(r) ? -1 : (long long)r;
}

/* The second part of src[0, n) cut at ``cut``: the blocks ending a joined frame, or a frame of its own. */
static long long kx_zstd_second(void *dst, size_t cap, const unsigned char *src, size_t cut, size_t n, int level,
                                int join)
{
    return join ? kx_zstd_tail(dst, cap, src, cut, n, level) : kx_zstd_frame(dst, cap, src + cut, n - cut, level);
}

/* ---------------------------------------------------------------------------------------- the worker */
enum { KX_DW_IDLE = 0, KX_DW_POSTED = 1, KX_DW_TAKEN = 2, KX_DW_DONE = 3 };

static struct {
    pthread_mutex_t mu;
    pthread_cond_t job;  /* the worker waits here for POSTED */
    pthread_cond_t done; /* the caller waits here for DONE */
    int started;         /* 1: the worker runs; -1: it could not be started */
    int owned;           /* a caller holds the job */
    int state;
    const unsigned char *src; /* kx_zstd_second's arguments */
    size_t cut;
    size_t n;
    void *dst;
    size_t cap;
    int level;
    int join;
    long long result;
    long jobs; /* frames the worker compressed (for the tests) */
} kx_dw = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER};

static void *kx_dw_main(void *unused)
{
    long long r;
    (void)unused;
    pthread_mutex_lock(&kx_dw.mu);
    for (;;) {
        while (kx_dw.state != KX_DW_POSTED)
            pthread_cond_wait(&kx_dw.job, &kx_dw.mu);
        kx_dw.state = KX_DW_TAKEN;
        pthread_mutex_unlock(&kx_dw.mu);
        r = kx_zstd_second(kx_dw.dst, kx_dw.cap, kx_dw.src, kx_dw.cut, kx_dw.n, kx_dw.level, kx_dw.join);
        pthread_mutex_lock(&kx_dw.mu);
        kx_dw.result = r;
        kx_dw.jobs++;
        kx_dw.state = KX_DW_DONE;
        pthread_cond_signal(&kx_dw.done);
    }
    return NULL;
}

/* fork(): hold the lock across it, so that the child's copy is consistent; the child has no worker */
static void kx_dw_prepare(void) { pthread_mutex_lock(&kx_dw.mu); }
static void kx_dw_parent(void) { pthread_mutex_unlock(&kx_dw.mu); }
static void kx_dw_child(void)
{
    kx_dw.started = 0;
    kx_dw.owned = 0;
    kx_dw.state = KX_DW_IDLE;
    pthread_mutex_init(&kx_dw.mu, NULL);
    pthread_cond_init(&kx_dw.job, NULL);
    pthread_cond_init(&kx_dw.done, NULL);
}
static pthread_once_t kx_dw_once = PTHREAD_ONCE_INIT;
static void kx_dw_init(void) { pthread_atfork(kx_dw_prepare, kx_dw_parent, kx_dw_child); }

/* Hand kx_zstd_second's job to the worker (starting it if need be): 1 if it took the job, 0 if the caller
   is on its own (the worker busy with another caller's half, or no thread to be had). */
static int kx_dw_post(void *dst, size_t cap, const unsigned char *src, size_t cut, size_t n, int level, int join)
{
    pthread_attr_t attr;
    pthread_t t;
    sigset_t all, old;
    int ok = 0;
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
    if (kx_dw.started == 1 && !kx_dw.owned) {
        kx_dw.owned = 1;
        kx_dw.src = src;
        kx_dw.cut = cut;
        kx_dw.n = n;
        kx_dw.dst = dst;
        kx_dw.cap = cap;
        kx_dw.level = level;
        kx_dw.join = join;
        kx_dw.state = KX_DW_POSTED;
        pthread_cond_signal(&kx_dw.job);
        ok = 1;
    }
    pthread_mutex_unlock(&kx_dw.mu);
    return ok;
}

/* The posted job's result: the worker's, or the caller's own where the worker had not taken it yet. */
static long long kx_dw_collect(void)
{
    long long r;
    pthread_mutex_lock(&kx_dw.mu);
    if (kx_dw.state == KX_DW_POSTED) { /* not started: take it back */
        kx_dw.state = KX_DW_IDLE;
        pthread_mutex_unlock(&kx_dw.mu);
        r = kx_zstd_second(kx_dw.dst, kx_dw.cap, kx_dw.src, kx_dw.cut, kx_dw.n, kx_dw.level, kx_dw.join);
        pthread_mutex_lock(&kx_dw.mu);
    } else {
        while (kx_dw.state != KX_DW_DONE)
            pthread_cond_wait(&kx_dw.done, &kx_dw.mu);
        r = kx_dw.result;
        kx_dw.state = KX_DW_IDLE;
    }
    kx_dw.owned = 0;
    pthread_mutex_unlock(&kx_dw.mu);
    return r;
}

static long kx_zstd_worker_jobs(void)
{
    long n;
    pthread_mutex_lock(&kx_dw.mu);
    n = kx_dw.jobs;
    pthread_mutex_unlock(&kx_dw.mu);
    return n;
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
static long long kx_zstd_head(void *dst, size_t cap, const unsigned char *src, size_t cut, size_t n, int level)
{
    (void)dst; (void)cap; (void)src; (void)cut; (void)n; (void)level;
    return -2;
}
static long long kx_zstd_second(void *dst, size_t cap, const unsigned char *src, size_t cut, size_t n, int level,
                                int join)
{
    (void)dst; (void)cap; (void)src; (void)cut; (void)n; (void)level; (void)join;
    return -2;
}
static int kx_dw_post(void *dst, size_t cap, const unsigned char *src, size_t cut, size_t n, int level, int join)
{
    (void)dst; (void)cap; (void)src; (void)cut; (void)n; (void)level; (void)join;
    return 0;
}
static long long kx_dw_collect(void) { return -2; }
static long kx_zstd_worker_jobs(void) { return 0; }

#endif

/* Whether kx_zstd_deflate cuts a payload of n record bytes in two: at KX_ZSTD_SPLIT_MIN bytes or more,
   as two frames, or as a joined frame where the library writes one. */
static int kx_zstd_cuts(size_t n, int frames)
{
    return kx_zstd_cut(n) < n && (frames == 2 || kx_zstd_joins());
}

/* What kx_zstd_deflate may write at most for n record bytes (both halves' bounds when it cuts). */
static size_t kx_zstd_deflate_bound(size_t n, int frames)
{
    size_t cut = kx_zstd_cut(n);
    return kx_zstd_cuts(n, frames) ? kx_zstd_bound(cut) + kx_zstd_bound(n - cut) : kx_zstd_bound(n);
}

/*
 * The zstd payload of the records src[0, n) at ``level`` into dst[0, cap), cap at least
 * kx_zstd_deflate_bound(n, frames): with ``frames`` 1 one frame, joined from halves where kx_zstd_cuts;
 * with 2, two frames cut at kx_zstd_cut(n).  The second half goes to the worker where ``threads`` allows
 * one.  The bytes written, or < 0 as kx_zstd_frame.  Needs kx_zstd_compressor_version() != 0; needs no GIL.
 */
static long long kx_zstd_deflate(unsigned char *dst, size_t cap, const unsigned char *src, size_t n, int level,
                                 int threads, int frames)
{
    size_t cut = kx_zstd_cut(n), cap1;
    long long first, second;
    int posted, join = frames == 1;
    if (!kx_zstd_cuts(n, frames))
        return kx_zstd_frame(dst, cap, src, n, level);
    /* the second half goes after the first one's bound, and moves down once the first one's size is known */
    cap1 = kx_zstd_bound(cut);
    if (cap < cap1)
        return -1;
    posted = threads && kx_dw_post(dst + cap1, cap - cap1, src, cut, n, level, join);
    first = join ? kx_zstd_head(dst, cap1, src, cut, n, level) : kx_zstd_frame(dst, cap1, src, cut, level);
    second = posted ? kx_dw_collect() : kx_zstd_second(dst + cap1, cap - cap1, src, cut, n, level, join);
    if (first < 0 || second < 0)
        return first < 0 ? first : second;
    memmove(dst + first, dst + cap1, (size_t)second);
    return first + second;
}

#endif /* KAFKATX_DEFLATE_H */
