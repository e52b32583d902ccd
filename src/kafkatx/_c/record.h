/*
 * record.h -- the v2 record parser of the compiled codec (Java's DefaultRecord.readFrom rules).
 *
 * Kept in C so that the compiler inlines it into the decode loops (the Cython
 * version was called out of line, and the call cost ~15% of a columnar decode).
 * Nothing here raises: a failure returns -1 with a kx_rec_error naming the
 * rule broken, the byte position (relative to buf) and the numbers the
 * message quotes; _codec.pyx turns it into InvalidRecordError.
 *
 *   kx_rd_varint / kx_rd_varlong   zigzag varints, at most 5 / 10 bytes
 *   kx_parse_record                one record at *pos, validated, headers skipped
 */
#ifndef KAFKATX_RECORD_H
#define KAFKATX_RECORD_H

#include <Python.h> /* Py_ssize_t */
#include <stdint.h>

#if defined(_MSC_VER)
#  define KX_REC_INLINE static __forceinline
#elif defined(__GNUC__) || defined(__clang__)
#  define KX_REC_INLINE static inline __attribute__((always_inline))
#else
#  define KX_REC_INLINE static inline
#endif

/* What went wrong (the names are _codec.pyx's). */
typedef enum {
    E_PREMATURE_EOF = 1,  /* no record where the count says there is one */
    E_RECORD_SIZE,        /* length < 0 or past the batch: a = length, b = bytes left */
    E_READ_MISMATCH,      /* body not consumed exactly: a = length, b = bytes read */
    E_KEY_PAST,
    E_VALUE_PAST,
    E_HEADER_COUNT,       /* a = the count */
    E_HKEY_NEGATIVE,
    E_HKEY_PAST,
    E_HVALUE_PAST,
    E_REMAINING,          /* bytes left after the last record */
    E_VARINT_TRUNCATED,
    E_VARINT_TOO_LONG,
    E_VARLONG_TRUNCATED,
    E_VARLONG_TOO_LONG
} RecErr;

typedef struct {
    RecErr code;
    Py_ssize_t pos;
    int64_t a, b;
} kx_rec_error;

/* One parsed record: pointers into the batch payload. */
typedef struct {
    int32_t off_delta;
    int64_t ts_delta;
    const uint8_t *key;
    int32_t klen;   /* -1: null */
    const uint8_t *value;
    int32_t vlen;   /* -1: null */
    Py_ssize_t hpos;  /* start of the first header */
    int32_t hcount;
    Py_ssize_t rend;  /* end of the record */
} RecView;

static int kx_rec_fail(kx_rec_error *e, RecErr code, Py_ssize_t pos, int64_t a, int64_t b)
{
    e->code = code;
    e->pos = pos;
    e->a = a;
    e->b = b;
    return -1;
}

/* The unsigned varint at *pos in at most max_shift / 7 + 1 bytes (5 for an int32, 10 for an int64); the
 * caller keeps the bits it needs, so excess high bits are dropped as Java's ByteUtils does. */
KX_REC_INLINE int kx_rd_uvarint(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t end, int max_shift, uint64_t *out,
                                RecErr truncated, RecErr too_long, kx_rec_error *e)
{
    Py_ssize_t p = *pos;
    uint64_t value = 0, b;
    int shift = 0;
    if (p + 1 < end && buf[p + 1] < 0x80) { /* the 1- and 2-byte forms, no loop */
        if (buf[p] < 0x80) {
            *out = buf[p];
            *pos = p + 1;
        } else {
            *out = (buf[p] & 0x7Fu) | ((uint64_t)buf[p + 1] << 7);
            *pos = p + 2;
        }
        return 0;
    }
    for (;;) {
        if (p >= end)
            return kx_rec_fail(e, truncated, p, 0, 0);
        b = buf[p++];
        if (!(b & 0x80)) {
            value |= b << shift;
            break;
        }
        value |= (b & 0x7Fu) << shift;
        shift += 7;
        if (shift > max_shift)
            return kx_rec_fail(e, too_long, p - 1, 0, 0);
    }
    *pos = p;
    *out = value;
    return 0;
}

/* Zigzag int32 as Java's ByteUtils.readVarint: at most 5 bytes, excess high bits dropped. */
KX_REC_INLINE int kx_rd_varint(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t end, int32_t *out,
                               kx_rec_error *e)
{
    uint64_t u;
    uint32_t v;
    if (kx_rd_uvarint(buf, pos, end, 28, &u, E_VARINT_TRUNCATED, E_VARINT_TOO_LONG, e))
        return -1;
    v = (uint32_t)u;
    *out = (int32_t)((v >> 1) ^ (0u - (v & 1u)));
    return 0;
}

/* Zigzag int64 as Java's ByteUtils.readVarlong: at most 10 bytes. */
KX_REC_INLINE int kx_rd_varlong(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t end, int64_t *out,
                                kx_rec_error *e)
{
    uint64_t u;
    if (kx_rd_uvarint(buf, pos, end, 63, &u, E_VARLONG_TRUNCATED, E_VARLONG_TOO_LONG, e))
        return -1;
    *out = (int64_t)((u >> 1) ^ ((uint64_t)0 - (u & 1u)));
    return 0;
}

/* Validate hcount headers at *pos (Java's rules) and move past them. */
static int kx_skip_headers(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t rend, int32_t hcount,
                           kx_rec_error *e)
{
    int32_t i, hklen, hvlen;
    for (i = 0; i < hcount; i++) {
        if (kx_rd_varint(buf, pos, rend, &hklen, e))
            return -1;
        if (hklen < 0)
            return kx_rec_fail(e, E_HKEY_NEGATIVE, *pos, 0, 0);
        if (hklen > rend - *pos)
            return kx_rec_fail(e, E_HKEY_PAST, *pos, 0, 0);
        *pos += hklen;
        if (kx_rd_varint(buf, pos, rend, &hvlen, e))
            return -1;
        if (hvlen >= 0) {
            if (hvlen > rend - *pos)
                return kx_rec_fail(e, E_HVALUE_PAST, *pos, 0, 0);
            *pos += hvlen;
        }
    }
    return 0;
}

/* Parse and validate the record at *ppos (the batch payload ends at end). */
KX_REC_INLINE int kx_parse_record(const uint8_t *buf, Py_ssize_t *ppos, Py_ssize_t end, RecView *rv,
                                  kx_rec_error *e)
{
    Py_ssize_t pos = *ppos, start = pos, body, rend;
    int32_t length;
    if (pos >= end)
        return kx_rec_fail(e, E_PREMATURE_EOF, pos, 0, 0);
    if (kx_rd_varint(buf, &pos, end, &length, e))
        return -1;
    body = pos;
    if (length < 0 || length > end - pos)
        return kx_rec_fail(e, E_RECORD_SIZE, start, length, end - pos);
    if (length < 1)
        return kx_rec_fail(e, E_READ_MISMATCH, start, length, 1);
    rend = pos + length;
    pos += 1; /* attributes: no bits defined, read and ignored */
    if (kx_rd_varlong(buf, &pos, rend, &rv->ts_delta, e))
        return -1;
    if (kx_rd_varint(buf, &pos, rend, &rv->off_delta, e))
        return -1;
    if (kx_rd_varint(buf, &pos, rend, &rv->klen, e))
        return -1;
    rv->key = buf + pos;
    if (rv->klen >= 0) {
        if (rv->klen > rend - pos)
            return kx_rec_fail(e, E_KEY_PAST, pos, 0, 0);
        pos += rv->klen;
    }
    if (kx_rd_varint(buf, &pos, rend, &rv->vlen, e))
        return -1;
    rv->value = buf + pos;
    if (rv->vlen >= 0) {
        if (rv->vlen > rend - pos)
            return kx_rec_fail(e, E_VALUE_PAST, pos, 0, 0);
        pos += rv->vlen;
    }
    if (kx_rd_varint(buf, &pos, rend, &rv->hcount, e))
        return -1;
    rv->hpos = pos;
    if (rv->hcount != 0) {
        if (rv->hcount < 0 || rv->hcount > rend - pos)
            return kx_rec_fail(e, E_HEADER_COUNT, pos, rv->hcount, 0);
        if (kx_skip_headers(buf, &pos, rend, rv->hcount, e))
            return -1;
    }
    if (pos != rend)
        return kx_rec_fail(e, E_READ_MISMATCH, start, length, pos - body);
    rv->rend = rend;
    *ppos = pos;
    return 0;
}

#endif /* KAFKATX_RECORD_H */
