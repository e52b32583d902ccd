/*
 * Self-test and benchmark of src/kafkatx/_c/crc32c.c.
 *
 * Build and run from the repository root (the test #includes crc32c.c to reach
 * every internal implementation, so there is only one file to compile):
 *
 *   gcc -O3 -Wall -Wextra -std=c99 -o /tmp/crc32c_selftest scripts/crc32c_selftest.c && /tmp/crc32c_selftest
 *
 * Options: --quick (skip the benchmark), --bench-only.
 *
 * Checks, for every implementation the CPU can run (and for kx_crc32c):
 *   - published check values (CRC-32C "123456789", RFC 3720 B.4 vectors),
 *   - every length 0..4096 at every misalignment 0..15 against kx_crc32c_sw,
 *   - lengths around the 3-way block sizes, and random lengths up to 64 KiB,
 *   - multi-MiB buffers hashed in random pieces (continuation) against one
 *     table pass over the whole buffer.
 * Then prints the throughput of each implementation on a 64 MiB buffer.
 */
#define _POSIX_C_SOURCE 200809L

#include "../src/kafkatx/_c/crc32c.c"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int failures = 0;

#define CHECK(cond, ...)                                                         \
    do {                                                                         \
        if (!(cond)) {                                                           \
            if (failures++ < 20) {                                               \
                fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);             \
                fprintf(stderr, __VA_ARGS__);                                    \
                fputc('\n', stderr);                                             \
            }                                                                    \
        }                                                                        \
    } while (0)

/* xorshift64* -- deterministic test data */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

static void fill_random(unsigned char *p, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        p[i] = (unsigned char)(rng() >> 56);
    }
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the implementations under test ---- */

typedef struct {
    const char *name;
    uint32_t (*fn)(uint32_t crc, const void *buf, size_t len);
    int impl; /* index into kx_impls, or -1 for a public entry point */
} impl_t;

static int cur_impl;

static uint32_t run_internal(uint32_t crc, const void *buf, size_t len)
{
    if (len == 0) {
        return crc;
    }
    return ~kx_impls[cur_impl].fn(~crc, (const unsigned char *)buf, len);
}

/* Whether this CPU runs implementation idx (on x86 each one has its own
 * feature check; elsewhere kx_detect() names the one hardware path). */
static int impl_supported(int idx)
{
#if defined(KX_HAVE_X86)
    return kx_x86_can_run(idx);
#elif defined(KX_HAVE_ARM)
    return idx == KX_IMPL_TABLE || idx == kx_detect();
#else
    return idx == KX_IMPL_TABLE;
#endif
}

static uint32_t call(const impl_t *im, uint32_t crc, const void *buf, size_t len)
{
    if (im->impl >= 0) {
        cur_impl = im->impl;
        return run_internal(crc, buf, len);
    }
    return im->fn(crc, buf, len);
}

/* ---- tests ---- */

static void test_vectors(const impl_t *im)
{
    unsigned char buf[64];
    int i;

    CHECK(call(im, 0, "123456789", 9) == 0xE3069283u, "%s: check value", im->name);
    CHECK(call(im, 0, NULL, 0) == 0, "%s: empty", im->name);
    CHECK(call(im, 0x12345678u, NULL, 0) == 0x12345678u, "%s: empty continue", im->name);
    CHECK(call(im, call(im, 0, "1234", 4), "56789", 5) == 0xE3069283u,
          "%s: check value in two parts", im->name);
    /* RFC 3720 (iSCSI) appendix B.4 */
    memset(buf, 0, 32);
    CHECK(call(im, 0, buf, 32) == 0x8A9136AAu, "%s: 32 x 00", im->name);
    memset(buf, 0xFF, 32);
    CHECK(call(im, 0, buf, 32) == 0x62A8AB43u, "%s: 32 x FF", im->name);
    for (i = 0; i < 32; i++) {
        buf[i] = (unsigned char)i;
    }
    CHECK(call(im, 0, buf, 32) == 0x46DD794Eu, "%s: 00..1F", im->name);
    for (i = 0; i < 32; i++) {
        buf[i] = (unsigned char)(31 - i);
    }
    CHECK(call(im, 0, buf, 32) == 0x113FDB5Cu, "%s: 1F..00", im->name);
}

/* every length 0..maxlen at every misalignment 0..15 */
static void test_lengths(const impl_t *im, const unsigned char *base, size_t maxlen)
{
    size_t len;
    int mis;
    for (mis = 0; mis < 16; mis++) {
        const unsigned char *p = base + mis;
        for (len = 0; len <= maxlen; len++) {
            uint32_t seed = (uint32_t)len * 2654435761u;
            uint32_t want = kx_crc32c_sw(seed, p, len);
            uint32_t got = call(im, seed, p, len);
            CHECK(got == want, "%s: len %zu mis %d: %08x != %08x", im->name, len, mis,
                  (unsigned)got, (unsigned)want);
        }
    }
}

/* lengths near the block sizes of each 3-way tier, plus random ones */
static void test_boundaries(const impl_t *im, const unsigned char *base, size_t cap)
{
    static const size_t blocks[] = {3 * KX_STREAM_SHORT, 3 * KX_STREAM_MID,
                                    3 * KX_STREAM_LONG, 2 * 3 * KX_STREAM_LONG,
                                    KX_SPLIT_MIN_CLMUL, KX_SPLIT_MIN_SOFT};
    size_t b, k, r;
    for (b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
        for (k = 0; k < 80; k++) {
            size_t lens[2];
            lens[0] = blocks[b] + k;
            lens[1] = blocks[b] - k;
            for (r = 0; r < 2; r++) {
                int mis = (int)(rng() & 15);
                if (lens[r] + 16 > cap) {
                    continue;
                }
                CHECK(call(im, 0, base + mis, lens[r]) == kx_crc32c_sw(0, base + mis, lens[r]),
                      "%s: boundary len %zu mis %d", im->name, lens[r], mis);
            }
        }
    }
    for (r = 0; r < 2200; r++) {
        size_t len = (size_t)(rng() % (r < 2000 ? 65536 : 2u << 20));
        int mis = (int)(rng() & 15);
        uint32_t seed = (uint32_t)rng();
        CHECK(call(im, seed, base + mis, len) == kx_crc32c_sw(seed, base + mis, len),
              "%s: random len %zu mis %d", im->name, len, mis);
    }
}

/* a big buffer hashed in random pieces must equal one table pass */
static void test_split(const impl_t *im, const unsigned char *base, size_t len, int mis)
{
    const unsigned char *p = base + mis;
    uint32_t want = kx_crc32c_sw(0, p, len);
    int round;
    CHECK(call(im, 0, p, len) == want, "%s: whole %zu mis %d", im->name, len, mis);
    for (round = 0; round < 4; round++) {
        uint32_t crc = 0;
        size_t off = 0;
        while (off < len) {
            size_t piece;
            switch (rng() & 3) {
            case 0: piece = (size_t)(rng() % 16); break;
            case 1: piece = (size_t)(rng() % 1024); break;
            case 2: piece = (size_t)(rng() % 65536); break;
            default: piece = (size_t)(rng() % (1u << 20)); break;
            }
            if (piece > len - off) {
                piece = len - off;
            }
            crc = call(im, crc, p + off, piece);
            off += piece;
        }
        CHECK(crc == want, "%s: split %zu mis %d round %d", im->name, len, mis, round);
    }
}

#if defined(KX_HAVE_X86) || defined(KX_HAVE_ARM)
/* the run-time construction of x^(8L-33) must match the generated constants */
static void test_shift_constants(const char *name, kx_shift_fn shift)
{
    static const struct { size_t len; uint32_t k1, k2; } want[] = {
        {KX_STREAM_SHORT, KX_SHIFT_64_1, KX_SHIFT_64_2},
        {KX_STREAM_MID, KX_SHIFT_512_1, KX_SHIFT_512_2},
        {KX_STREAM_LONG, KX_SHIFT_4096_1, KX_SHIFT_4096_2},
    };
    size_t w;
    for (w = 0; w < sizeof want / sizeof want[0]; w++) {
        size_t len3 = want[w].len;
        uint32_t k1 = 0, k2 = 0;
        int i;
        for (i = 6; (len3 >> i) != 0; i++) {
            if ((len3 >> i) & 1) {
                k1 = k1 ? shift(k1, kx_crc32c_xpow[i]) : kx_crc32c_xpow[i];
                k2 = k2 ? shift(k2, kx_crc32c_xpow[i + 1]) : kx_crc32c_xpow[i + 1];
            }
        }
        CHECK(k1 == want[w].k1 && k2 == want[w].k2, "%s: shift constants for L=%zu", name,
              len3);
    }
    /* the whole power table: xpow[3] = x^(64-33) = x^31, and squaring
     * x^(a-33) gives x^(2a-33), so each entry follows from the one before */
    CHECK(kx_crc32c_xpow[3] == 1u, "%s: xpow[3]", name);
    for (w = 3; w < 63; w++) {
        CHECK(shift(kx_crc32c_xpow[w], kx_crc32c_xpow[w]) == kx_crc32c_xpow[w + 1],
              "%s: xpow[%zu]^2", name, w);
    }
    CHECK(shift(kx_crc32c_xpow[6], kx_crc32c_xpow[9]) ==
              shift(kx_crc32c_xpow[9], kx_crc32c_xpow[6]),
          "%s: commutes", name);
}
#endif

static double bench(const impl_t *im, const unsigned char *p, size_t len, int reps,
                    uint32_t *out)
{
    double best = 1e30;
    int r;
    for (r = 0; r < reps; r++) {
        double t0 = now(), t;
        *out = call(im, 0, p, len);
        t = now() - t0;
        if (t < best) {
            best = t;
        }
    }
    return (double)len / best / 1e9;
}

int main(int argc, char **argv)
{
    const size_t big = 64u << 20;
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    int bench_only = argc > 1 && strcmp(argv[1], "--bench-only") == 0;
    impl_t impls[KX_IMPL_COUNT + 2];
    int nimpl = 0, i;
    unsigned char *buf = (unsigned char *)malloc(big + 64);
    /* 16-aligned base so that "misalignment" means what it says */
    unsigned char *base = buf + ((16 - ((uintptr_t)buf & 15)) & 15);

    if (!buf) {
        fprintf(stderr, "out of memory\n");
        return 2;
    }
    fill_random(buf, big + 64);

    printf("kx_crc32c_impl_name() = %s, kx_crc32c_hw_available() = %d\n",
           kx_crc32c_impl_name(), kx_crc32c_hw_available());

    impls[nimpl].name = "kx_crc32c";
    impls[nimpl].fn = kx_crc32c;
    impls[nimpl++].impl = -1;
    impls[nimpl].name = "kx_crc32c_sw";
    impls[nimpl].fn = kx_crc32c_sw;
    impls[nimpl++].impl = -1;
    for (i = 0; i < KX_IMPL_COUNT; i++) {
        if (impl_supported(i)) {
            impls[nimpl].name = kx_impls[i].name;
            impls[nimpl].fn = NULL;
            impls[nimpl++].impl = i;
        } else {
            printf("skipping %s: not supported by this CPU\n", kx_impls[i].name);
        }
    }

    if (!bench_only) {
        /* the reference itself against a bit-at-a-time CRC */
        {
            size_t len;
            for (len = 0; len < 300; len++) {
                uint32_t s = 0xFFFFFFFFu;
                size_t j;
                int b;
                for (j = 0; j < len; j++) {
                    s ^= base[j];
                    for (b = 0; b < 8; b++) {
                        s = (s >> 1) ^ (0x82F63B78u & (0u - (s & 1u)));
                    }
                }
                CHECK(~s == kx_crc32c_sw(0, base, len), "table vs bitwise, len %zu", len);
            }
        }
#if defined(KX_HAVE_X86)
        if (impl_supported(KX_IMPL_X86_SOFT)) {
            test_shift_constants("x86 soft shift", kx_shift_x86_soft);
        }
        if (impl_supported(KX_IMPL_X86_CLMUL)) {
            test_shift_constants("x86 pclmul shift", kx_shift_x86_clmul);
        }
#elif defined(KX_HAVE_ARM)
        if (impl_supported(KX_IMPL_ARM)) {
            test_shift_constants("arm soft shift", kx_shift_arm_soft);
        }
#endif
        for (i = 0; i < nimpl; i++) {
            double t0 = now();
            int before = failures;
            test_vectors(&impls[i]);
            test_lengths(&impls[i], base, 4096);
            test_boundaries(&impls[i], base, big);
            test_split(&impls[i], base, (size_t)3 << 20, 0);
            test_split(&impls[i], base, ((size_t)5 << 20) + 12345, 3);
            test_split(&impls[i], base, ((size_t)1 << 20) - 7, 13);
            CHECK(call(&impls[i], 7, base + 5, big - 5) == kx_crc32c_sw(7, base + 5, big - 5),
                  "%s: 64 MiB", impls[i].name);
            printf("%-20s %s (%.2f s)\n", impls[i].name,
                   failures == before ? "ok" : "FAILED", now() - t0);
        }
    }

    if (!quick) {
        uint32_t ref = 0, got = 0;
        printf("\nthroughput on %zu MiB (best of 5):\n", big >> 20);
        for (i = 0; i < nimpl; i++) {
            double gbs = bench(&impls[i], base, big, impls[i].impl == KX_IMPL_TABLE ? 3 : 5, &got);
            if (i == 0) {
                ref = got;
            }
            CHECK(got == ref, "%s: 64 MiB result differs", impls[i].name);
            printf("  %-20s %7.2f GB/s\n", impls[i].name, gbs);
        }
    }

    free(buf);
    if (failures) {
        printf("%d check(s) FAILED\n", failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}
