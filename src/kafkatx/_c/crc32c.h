/*
 * crc32c.h -- CRC-32C (Castagnoli) for kafkatx.
 *
 * CRC-32C as used by Kafka record batches (magic v2): reflected polynomial
 * 0x82F63B78, initial value 0xFFFFFFFF, final xor 0xFFFFFFFF.
 * Check value: kx_crc32c(0, "123456789", 9) == 0xE3069283.
 *
 * `crc` is the result of a previous call (0 to start), so checksums chain:
 *     kx_crc32c(kx_crc32c(0, a, n), b, m) == kx_crc32c(0, a || b, n + m)
 *
 * `buf` may be NULL when `len` is 0.  All functions are thread-safe and need no
 * initialisation; the implementation is chosen on the first call (x86-64:
 * SSE4.2 crc32 with or without PCLMULQDQ; aarch64: ARMv8 CRC32; otherwise a
 * slicing-by-8 table).  No special compiler flags are needed.
 */
#ifndef KAFKATX_CRC32C_H
#define KAFKATX_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Best implementation available on this CPU. */
uint32_t kx_crc32c(uint32_t crc, const void *buf, size_t len);

/* Portable table implementation (slicing-by-8); same results as kx_crc32c. */
uint32_t kx_crc32c_sw(uint32_t crc, const void *buf, size_t len);

/* 1 if kx_crc32c uses a hardware CRC instruction on this machine, else 0. */
int kx_crc32c_hw_available(void);

/* Name of the implementation kx_crc32c uses: "sse4.2-pclmul-3way",
 * "sse4.2-3way", "armv8-crc-3way" or "table". */
const char *kx_crc32c_impl_name(void);

#ifdef __cplusplus
}
#endif

#endif /* KAFKATX_CRC32C_H */
