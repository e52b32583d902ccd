/*
 * syslib.h -- the system's libzstd and liblz4, when the process can load them, and a buffer per thread
 * for the payloads they inflate: a batch payload inflated in C, with no Python call in between.
 *
 * kafkatx does not link against either library (a wheel cannot count on them; python-zstandard and
 * cramjam are its declared dependencies).  Where they can be loaded (every Debian and Ubuntu system has
 * both: dpkg needs libzstd, apt liblz4), the compiled codec inflates the payloads producers write with
 * them, straight into a buffer the thread reuses:
 *  - zstd: the benchmark's 1,000 single-frame payloads took 89-92 ms with the system's libzstd 1.5.4
 *    against 101 ms for python-zstandard's one-shot `decompress`, which can only return a new `bytes`;
 *  - lz4 and small batches: the Python walk of a frame and the call per block (cramjam) cost ~3 us a
 *    payload, a quarter of decoding Kafka's default 16 KiB batches into Arrow.
 * Elsewhere kx_syszstd_version() / kx_syslz4_version() are 0 and the Python paths run.  Nothing but the
 * speed depends on which one runs: the same payloads are taken (libzstd's default window limit, 2^27, is
 * the one python-zstandard is given), and whatever a library rejects is reported as a negative count, for
 * the caller to name the error through the Python path.
 */
#ifndef KAFKATX_SYSLIB_H
#define KAFKATX_SYSLIB_H

#include <stddef.h>
#include <stdlib.h>

#if defined(__unix__) || defined(__APPLE__)
#  include <dlfcn.h>
#  include <pthread.h>
#  define KX_SYSLIB_POSSIBLE 1
#else
#  define KX_SYSLIB_POSSIBLE 0
#endif

#define KX_SYSZSTD_MIN_VERSION 10400 /* 1.4.0; versions read x*10000 + y*100 + z */
#define KX_SYSLZ4_MIN_VERSION 10800  /* 1.8.0 */
#define KX_SCRATCH_MAX ((size_t)8 << 20) /* as compression.SCRATCH_KEEP_MAX: larger payloads take the Python path */

static int kx_syslib_disabled; /* KAFKATX_SYSTEM_LIBS=0: set before first use, never load them */

static void kx_syslib_disable(void)
{
    kx_syslib_disabled = 1;
}

#if KX_SYSLIB_POSSIBLE

static void *kx_syslib_open(const char *const *names)
{
    void *h = NULL;
    int i;
    if (kx_syslib_disabled)
        return NULL;
    for (i = 0; names[i] != NULL && h == NULL; i++)
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    return h;
}

/* ---------------------------------------------------------------------------------------------- zstd */
static struct {
    int ready;
    unsigned version;
    void *(*create)(void);
    size_t (*release)(void *);
    size_t (*decompress)(void *, void *, size_t, const void *, size_t);
    unsigned (*is_error)(size_t);
} kx_zs;

static pthread_once_t kx_zs_once = PTHREAD_ONCE_INIT;
static pthread_key_t kx_zs_key;
static long kx_zs_live; /* contexts made and not yet freed (kx_syslib_live, for the tests) */

static void kx_zs_free_context(void *dctx)
{
    if (dctx != NULL) {
        kx_zs.release(dctx);
        __atomic_sub_fetch(&kx_zs_live, 1, __ATOMIC_RELAXED);
    }
}

static void kx_zs_load(void)
{
    static const char *const names[] = {"libzstd.so.1", "libzstd.1.dylib", "libzstd.dylib", NULL};
    unsigned (*version)(void);
    void *h = kx_syslib_open(names);
    if (h == NULL)
        return;
    *(void **)&version = dlsym(h, "ZSTD_versionNumber");
    *(void **)&kx_zs.create = dlsym(h, "ZSTD_createDCtx");
    *(void **)&kx_zs.release = dlsym(h, "ZSTD_freeDCtx");
    *(void **)&kx_zs.decompress = dlsym(h, "ZSTD_decompressDCtx");
    *(void **)&kx_zs.is_error = dlsym(h, "ZSTD_isError");
    if (version == NULL || kx_zs.create == NULL || kx_zs.release == NULL || kx_zs.decompress == NULL
        || kx_zs.is_error == NULL || (kx_zs.version = version()) < KX_SYSZSTD_MIN_VERSION
        || pthread_key_create(&kx_zs_key, kx_zs_free_context) != 0) {
        dlclose(h);
        return;
    }
    kx_zs.ready = 1; /* the library stays loaded for the life of the process */
}

/* The loaded libzstd's version number, or 0 when there is none to use. */
static unsigned kx_syszstd_version(void)
{
    pthread_once(&kx_zs_once, kx_zs_load);
    return kx_zs.ready ? kx_zs.version : 0;
}

/*
 * Inflate the zstd frame(s) in src[0, n) into dst[0, cap) with the calling thread's context (made on
 * first use, freed when the thread ends): the bytes written, -1 if libzstd rejects the input (corrupt,
 * or more output than cap), -2 if no context could be made.  Needs kx_syszstd_version() != 0; needs no
 * GIL (the caller keeps both ranges alive).
 */
static long long kx_syszstd_decompress(void *dst, size_t cap, const void *src, size_t n)
{
    void *dctx = pthread_getspecific(kx_zs_key);
    size_t r;
    if (dctx == NULL) {
        dctx = kx_zs.create();
        if (dctx == NULL)
            return -2;
        if (pthread_setspecific(kx_zs_key, dctx) != 0) {
            kx_zs.release(dctx);
            return -2;
        }
        __atomic_add_fetch(&kx_zs_live, 1, __ATOMIC_RELAXED);
    }
    r = kx_zs.decompress(dctx, dst, cap, src, n);
    return kx_zs.is_error(r) ? -1 : (long long)r;
}

/* ----------------------------------------------------------------------------------------------- lz4 */
static struct {
    int ready;
    unsigned version;
    int (*decompress)(const char *, char *, int, int);
} kx_l4;

static pthread_once_t kx_l4_once = PTHREAD_ONCE_INIT;

static void kx_l4_load(void)
{
    static const char *const names[] = {"liblz4.so.1", "liblz4.1.dylib", "liblz4.dylib", NULL};
    int (*version)(void);
    void *h = kx_syslib_open(names);
    if (h == NULL)
        return;
    *(void **)&version = dlsym(h, "LZ4_versionNumber");
    *(void **)&kx_l4.decompress = dlsym(h, "LZ4_decompress_safe");
    if (version == NULL || kx_l4.decompress == NULL || version() < KX_SYSLZ4_MIN_VERSION) {
        dlclose(h);
        return;
    }
    kx_l4.version = (unsigned)version();
    kx_l4.ready = 1;
}

/* The loaded liblz4's version number, or 0 when there is none to use. */
static unsigned kx_syslz4_version(void)
{
    pthread_once(&kx_l4_once, kx_l4_load);
    return kx_l4.ready ? kx_l4.version : 0;
}

/* Inflate one lz4 block (LZ4_decompress_safe): the bytes written into dst[0, cap), or < 0 if the block is
   corrupt or inflates to more than cap.  Needs kx_syslz4_version() != 0; needs no GIL. */
static long long kx_syslz4_block(void *dst, size_t cap, const void *src, size_t n)
{
    if (n > 0x7E000000u || cap > 0x7E000000u) /* LZ4_MAX_INPUT_SIZE; both are ints to liblz4 */
        return -1;
    return kx_l4.decompress((const char *)src, (char *)dst, (int)n, (int)cap);
}

/* ------------------------------------------------------------------------------------ thread buffer */
typedef struct {
    unsigned char *p;
    size_t cap;
    int busy;
} kx_scratch_t;

static pthread_once_t kx_scratch_once = PTHREAD_ONCE_INIT;
static pthread_key_t kx_scratch_key;
static int kx_scratch_ok;
static long kx_scratch_live; /* thread buffers made and not yet freed (kx_syslib_live) */

static void kx_scratch_free(void *s)
{
    if (s != NULL) {
        free(((kx_scratch_t *)s)->p);
        free(s);
        __atomic_sub_fetch(&kx_scratch_live, 1, __ATOMIC_RELAXED);
    }
}

static void kx_scratch_init(void)
{
    kx_scratch_ok = pthread_key_create(&kx_scratch_key, kx_scratch_free) == 0;
}

/*
 * The calling thread's buffer, of at least n bytes (kept from call to call, freed when the thread ends),
 * marked busy until kx_scratch_release(); NULL if n is over KX_SCRATCH_MAX, memory is short, or the
 * buffer is already in use on this thread (a decoder re-entered from Python code run while it decodes:
 * the caller then takes the Python path, with a buffer of its own).
 */
static unsigned char *kx_scratch_acquire(size_t n)
{
    kx_scratch_t *s;
    pthread_once(&kx_scratch_once, kx_scratch_init);
    if (!kx_scratch_ok || n > KX_SCRATCH_MAX)
        return NULL;
    s = (kx_scratch_t *)pthread_getspecific(kx_scratch_key);
    if (s == NULL) {
        s = (kx_scratch_t *)calloc(1, sizeof(*s));
        if (s == NULL)
            return NULL;
        if (pthread_setspecific(kx_scratch_key, s) != 0) {
            free(s);
            return NULL;
        }
        __atomic_add_fetch(&kx_scratch_live, 1, __ATOMIC_RELAXED);
    }
    if (s->busy)
        return NULL;
    if (s->cap < n) {
        size_t cap = n < ((size_t)256 << 10) ? ((size_t)256 << 10) : n;
        unsigned char *p = (unsigned char *)malloc(cap);
        if (p == NULL)
            return NULL;
        free(s->p);
        s->p = p;
        s->cap = cap;
    }
    s->busy = 1;
    return s->p;
}

static void kx_scratch_release(void)
{
    kx_scratch_t *s = (kx_scratch_t *)pthread_getspecific(kx_scratch_key);
    if (s != NULL)
        s->busy = 0;
}

/* What the threads hold now: libzstd contexts (which == 0) or thread buffers (which == 1), each freed when
   its thread ends. */
static long kx_syslib_live(int which)
{
    return __atomic_load_n(which == 0 ? &kx_zs_live : &kx_scratch_live, __ATOMIC_RELAXED);
}

#else /* no dlopen: never available */

static unsigned kx_syszstd_version(void) { return 0; }
static unsigned kx_syslz4_version(void) { return 0; }
static long long kx_syszstd_decompress(void *dst, size_t cap, const void *src, size_t n)
{
    (void)dst; (void)cap; (void)src; (void)n;
    return -2;
}
static long long kx_syslz4_block(void *dst, size_t cap, const void *src, size_t n)
{
    (void)dst; (void)cap; (void)src; (void)n;
    return -2;
}
static unsigned char *kx_scratch_acquire(size_t n) { (void)n; return NULL; }
static void kx_scratch_release(void) {}
static long kx_syslib_live(int which) { (void)which; return 0; }

#endif
#endif /* KAFKATX_SYSLIB_H */
