/*
 * copy.h -- copies of short byte strings (record keys, header keys and values).
 *
 * A call to memcpy with a length only known at run time costs more than the
 * copy itself for the short strings that dominate Kafka keys and values.  Up
 * to 128 bytes, kx_copy uses two or four possibly overlapping fixed-size moves
 * that cover exactly [0, n): no byte outside the source or the destination is
 * read or written.  Longer strings go to memcpy.  The source and destination
 * never overlap (memcpy's contract), so each fixed move may store as it goes.
 */
#ifndef KAFKATX_COPY_H
#define KAFKATX_COPY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(_MSC_VER) && !defined(__cplusplus)
#  define KX_COPY_INLINE static __inline
#else
#  define KX_COPY_INLINE static inline
#endif

KX_COPY_INLINE void kx_copy(unsigned char *dst, const unsigned char *src, size_t n)
{
    if (n > 32) {
        if (n > 128) {
            memcpy(dst, src, n);
        } else if (n > 64) { /* 65-128: the first and the last 64 bytes */
            memcpy(dst, src, 32);
            memcpy(dst + 32, src + 32, 32);
            memcpy(dst + n - 64, src + n - 64, 32);
            memcpy(dst + n - 32, src + n - 32, 32);
        } else { /* 33-64 */
            memcpy(dst, src, 32);
            memcpy(dst + n - 32, src + n - 32, 32);
        }
    } else if (n >= 16) {
        unsigned char a[16], b[16];
        memcpy(a, src, 16);
        memcpy(b, src + n - 16, 16);
        memcpy(dst, a, 16);
        memcpy(dst + n - 16, b, 16);
    } else if (n >= 8) {
        uint64_t a, b;
        memcpy(&a, src, 8);
        memcpy(&b, src + n - 8, 8);
        memcpy(dst, &a, 8);
        memcpy(dst + n - 8, &b, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, src, 4);
        memcpy(&b, src + n - 4, 4);
        memcpy(dst, &a, 4);
        memcpy(dst + n - 4, &b, 4);
    } else if (n > 0) {
        /* 1-3 bytes: first, middle, last (some may coincide) */
        unsigned char x = src[0], y = src[n >> 1], z = src[n - 1];
        dst[0] = x;
        dst[n >> 1] = y;
        dst[n - 1] = z;
    }
}

/* Ask for the cache line at p to be read into the caches, without waiting
 * for it; never faults (any address may be given).  The hint is "all levels"
 * (prefetcht0): on the Zen 4 development machine, decode_arrow with a
 * prefetcht1 (L2 and out) was 4% slower than without prefetching, with
 * prefetcht0 6% faster. */
#if defined(__GNUC__) || defined(__clang__)
#  define kx_prefetch(p) __builtin_prefetch((const void *)(p), 0, 3)
#elif defined(_MSC_VER) && (defined(_M_X64) || defined(_M_IX86))
#  include <xmmintrin.h>
#  define kx_prefetch(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#else
#  define kx_prefetch(p) ((void)(p))
#endif

/* 1 if the n bytes at p are all ASCII (< 0x80). */
KX_COPY_INLINE int kx_is_ascii(const unsigned char *p, size_t n)
{
    size_t i = 0;
    uint64_t acc = 0, w;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, p + i, 8);
        acc |= w;
    }
    for (; i < n; i++)
        acc |= p[i];
    return (acc & UINT64_C(0x8080808080808080)) == 0;
}

#endif /* KAFKATX_COPY_H */
