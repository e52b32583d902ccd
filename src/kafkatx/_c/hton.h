/*
 * hton.h -- alignment-safe big-endian (network order) loads and stores.
 *
 * Every helper copies through memcpy, so the pointer may have any alignment
 * and there is no strict-aliasing question; compilers turn each one into a
 * plain load/store plus a byte swap (movbe / rev on little-endian hosts).
 *
 *   kx_load_be16/32/64(p)       -> uint16_t / uint32_t / uint64_t
 *   kx_load_be_i16/i32/i64(p)   -> int16_t / int32_t / int64_t (two's complement)
 *   kx_store_be16/32/64(p, v)   (also kx_store_be_i16/i32/i64)
 */
#ifndef KAFKATX_HTON_H
#define KAFKATX_HTON_H

#include <stdint.h>
#include <string.h>

#if defined(_MSC_VER) && !defined(__cplusplus)
#  define KX_HTON_INLINE static __inline
#else
#  define KX_HTON_INLINE static inline
#endif

/* ---- host byte order ---- */
#if defined(__BYTE_ORDER__) && defined(__ORDER_BIG_ENDIAN__) && \
    __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#  define KX_HTON_BIG_ENDIAN_HOST 1
#elif defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#  define KX_HTON_LITTLE_ENDIAN_HOST 1
#elif defined(_MSC_VER) || defined(_WIN32)
#  define KX_HTON_LITTLE_ENDIAN_HOST 1 /* every Windows target is little-endian */
#endif

/* ---- byte swaps ---- */
#if defined(__GNUC__) || defined(__clang__)
#  define KX_BSWAP16(x) __builtin_bswap16(x)
#  define KX_BSWAP32(x) __builtin_bswap32(x)
#  define KX_BSWAP64(x) __builtin_bswap64(x)
#elif defined(_MSC_VER)
#  include <stdlib.h>
#  define KX_BSWAP16(x) _byteswap_ushort(x)
#  define KX_BSWAP32(x) _byteswap_ulong(x)
#  define KX_BSWAP64(x) _byteswap_uint64(x)
#endif

#if defined(KX_BSWAP16) && \
    (defined(KX_HTON_LITTLE_ENDIAN_HOST) || defined(KX_HTON_BIG_ENDIAN_HOST))

#  if defined(KX_HTON_BIG_ENDIAN_HOST)
#    define KX_BE16(x) (x)
#    define KX_BE32(x) (x)
#    define KX_BE64(x) (x)
#  else
#    define KX_BE16(x) KX_BSWAP16(x)
#    define KX_BE32(x) KX_BSWAP32(x)
#    define KX_BE64(x) KX_BSWAP64(x)
#  endif

KX_HTON_INLINE uint16_t kx_load_be16(const unsigned char *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return (uint16_t)KX_BE16(v);
}

KX_HTON_INLINE uint32_t kx_load_be32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return (uint32_t)KX_BE32(v);
}

KX_HTON_INLINE uint64_t kx_load_be64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return (uint64_t)KX_BE64(v);
}

KX_HTON_INLINE void kx_store_be16(unsigned char *p, uint16_t v)
{
    v = (uint16_t)KX_BE16(v);
    memcpy(p, &v, sizeof v);
}

KX_HTON_INLINE void kx_store_be32(unsigned char *p, uint32_t v)
{
    v = (uint32_t)KX_BE32(v);
    memcpy(p, &v, sizeof v);
}

KX_HTON_INLINE void kx_store_be64(unsigned char *p, uint64_t v)
{
    v = (uint64_t)KX_BE64(v);
    memcpy(p, &v, sizeof v);
}

#else /* portable fallback: assemble bytes (endianness-independent) */

KX_HTON_INLINE uint16_t kx_load_be16(const unsigned char *p)
{
    return (uint16_t)(((unsigned)p[0] << 8) | (unsigned)p[1]);
}

KX_HTON_INLINE uint32_t kx_load_be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
           (uint32_t)p[3];
}

KX_HTON_INLINE uint64_t kx_load_be64(const unsigned char *p)
{
    return ((uint64_t)kx_load_be32(p) << 32) | (uint64_t)kx_load_be32(p + 4);
}

KX_HTON_INLINE void kx_store_be16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)(v >> 8);
    p[1] = (unsigned char)v;
}

KX_HTON_INLINE void kx_store_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

KX_HTON_INLINE void kx_store_be64(unsigned char *p, uint64_t v)
{
    kx_store_be32(p, (uint32_t)(v >> 32));
    kx_store_be32(p + 4, (uint32_t)v);
}

#endif

/* ---- signed variants ----
 * intN_t is two's complement without padding bits by definition, so copying
 * the bits is exact and avoids the implementation-defined conversion of an
 * out-of-range unsigned value.  The memcpy compiles to nothing. */

KX_HTON_INLINE int16_t kx_load_be_i16(const unsigned char *p)
{
    uint16_t u = kx_load_be16(p);
    int16_t v;
    memcpy(&v, &u, sizeof v);
    return v;
}

KX_HTON_INLINE int32_t kx_load_be_i32(const unsigned char *p)
{
    uint32_t u = kx_load_be32(p);
    int32_t v;
    memcpy(&v, &u, sizeof v);
    return v;
}

KX_HTON_INLINE int64_t kx_load_be_i64(const unsigned char *p)
{
    uint64_t u = kx_load_be64(p);
    int64_t v;
    memcpy(&v, &u, sizeof v);
    return v;
}

KX_HTON_INLINE void kx_store_be_i16(unsigned char *p, int16_t v)
{
    kx_store_be16(p, (uint16_t)v); /* signed -> unsigned is defined (mod 2^16) */
}

KX_HTON_INLINE void kx_store_be_i32(unsigned char *p, int32_t v)
{
    kx_store_be32(p, (uint32_t)v);
}

KX_HTON_INLINE void kx_store_be_i64(unsigned char *p, int64_t v)
{
    kx_store_be64(p, (uint64_t)v);
}

#undef KX_BE16
#undef KX_BE32
#undef KX_BE64

#endif /* KAFKATX_HTON_H */
