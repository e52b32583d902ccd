/*
 * syszstd.h -- the system's libzstd, when the process can load one: a zstd frame inflated in one call
 * into the caller's buffer, with a decompression context kept per thread.
 *
 * kafkatx does not link against libzstd (a wheel cannot count on it being there, and python-zstandard
 * is the declared dependency).  Where a libzstd of 1.4.0 or later can be loaded (every Debian and Ubuntu
 * system has one: dpkg needs it), inflating into a buffer the decoder reuses with the system library took
 * 89-92 ms for the benchmark's 1,000 batches against 101 ms for python-zstandard's one-shot
 * `decompress`, which can only return a new `bytes`.  Elsewhere kx_syszstd_available() is 0 and the
 * caller uses python-zstandard.  Nothing but the speed depends on which one runs: both take the same
 * frames (libzstd's default window limit, 2^27, is the one python-zstandard is given), and an invalid
 * frame is reported as -1 for the caller to name the error with python-zstandard.
 */
#ifndef KAFKATX_SYSZSTD_H
#define KAFKATX_SYSZSTD_H

#include <stddef.h>

#if defined(__unix__) || defined(__APPLE__)
#  include <dlfcn.h>
#  include <pthread.h>
#  define KX_SYSZSTD_POSSIBLE 1
#else
#  define KX_SYSZSTD_POSSIBLE 0
#endif

#define KX_SYSZSTD_MIN_VERSION 10400 /* 1.4.0: ZSTD_versionNumber() encodes x.y.z as x*10000 + y*100 + z */

#if KX_SYSZSTD_POSSIBLE

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
static int kx_zs_disabled; /* set before first use (KAFKATX_SYSTEM_ZSTD=0) */

static void kx_zs_free_context(void *dctx)
{
    if (dctx != NULL)
        kx_zs.release(dctx);
}

static void kx_zs_load(void)
{
    static const char *const names[] = {"libzstd.so.1", "libzstd.1.dylib", "libzstd.dylib", NULL};
    unsigned (*version)(void);
    void *h = NULL;
    int i;
    if (kx_zs_disabled)
        return;
    for (i = 0; names[i] != NULL && h == NULL; i++)
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
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

/* The loaded library's version number (x*10000 + y*100 + z), or 0 when there is none to use. */
static unsigned kx_syszstd_version(void)
{
    pthread_once(&kx_zs_once, kx_zs_load);
    return kx_zs.ready ? kx_zs.version : 0;
}

/* Never load it (before the first kx_syszstd_version call; later calls change nothing). */
static void kx_syszstd_disable(void)
{
    kx_zs_disabled = 1;
}

/*
 * Inflate the zstd frame(s) in src[0, n) into dst[0, cap): the bytes written, -1 if libzstd rejects the
 * input (corrupt, or more output than cap), -2 if no context could be made.  Needs kx_syszstd_version()
 * != 0; needs no GIL (the caller holds buffer exports for both ranges).
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
    }
    r = kx_zs.decompress(dctx, dst, cap, src, n);
    return kx_zs.is_error(r) ? -1 : (long long)r;
}

#else /* no dlopen: never available */

static unsigned kx_syszstd_version(void) { return 0; }
static void kx_syszstd_disable(void) {}
static long long kx_syszstd_decompress(void *dst, size_t cap, const void *src, size_t n)
{
    (void)dst; (void)cap; (void)src; (void)n;
    return -2;
}

#endif
#endif /* KAFKATX_SYSZSTD_H */
