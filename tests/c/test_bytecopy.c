/* s3x_bytes_copy (core/src/util/bytecopy.c): the same bytes as memcpy at every
 * distance modulo 4096 (the pieced path at 1-31) and at sizes around the
 * piece size, and nothing written outside [dst, dst + n). The same for
 * s3x_bytes_copy_to into a large region (non-temporal stores on x86-64:
 * every destination alignment modulo 64, sizes around S3X_BYTES_COLD_MIN)
 * and into a small one. */
#include "bytecopy.h"
#include "tap.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 64

static void check_all(int plain, size_t region) {
    size_t sizes[] = {0, 1, 63, S3X_BYTES_COPY_PIECE - 1, S3X_BYTES_COPY_PIECE, S3X_BYTES_COPY_PIECE + 1, 3 * S3X_BYTES_COPY_PIECE + 7,
                      16384, 262144 + 13, S3X_BYTES_COLD_MIN - 1, S3X_BYTES_COLD_MIN, S3X_BYTES_COLD_MIN + 1,
                      S3X_BYTES_COLD_MIN + 63, 16384 + 65};
    size_t cap = 262144 + 3 * 4096; /* a multiple of 4096, as aligned_alloc asks */
    unsigned char *src = aligned_alloc(4096, cap), *dst = aligned_alloc(4096, cap + 4096);
    if (!src || !dst) {
        CHECK(0, "out of memory");
        free(src);
        free(dst);
        return;
    }
    for (size_t i = 0; i < cap; i++) src[i] = (unsigned char)(i * 131u + 7u);
    int bad = 0, pieced = 0;
    for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
        size_t n = sizes[z];
        for (size_t ahead = 0; ahead < 130 && !bad; ahead++) {
            for (size_t so = 0; so < 2 && !bad; so++) {
                const unsigned char *s = src + GUARD + so * 4000; /* two source alignments */
                unsigned char *d = dst + GUARD + ((uintptr_t)s - (uintptr_t)src - GUARD + ahead) % 4096;
                if ((((uintptr_t)d - (uintptr_t)s) & 4095u) != ahead) {
                    bad = 1;
                    CHECK(0, "test setup: distance %zu not made", ahead);
                    break;
                }
                memset(dst, 0xA5, cap + 4096);
                void *r = region ? s3x_bytes_copy_to(d, s, n, region) : s3x_bytes_copy(d, s, n);
                if (r != d || memcmp(d, s, n)) bad = 1;
                for (unsigned char *g = d - GUARD; g < d && !bad; g++) bad = *g != 0xA5;
                for (unsigned char *g = d + n; g < d + n + GUARD && !bad; g++) bad = *g != 0xA5;
                if (bad)
                    CHECK(0, "plain=%d region %zu size %zu distance %zu: bytes differ or a guard was written", plain, region,
                          n, ahead);
                int cold = region >= S3X_BYTES_COLD_REGION && n >= S3X_BYTES_COLD_MIN;
                if (ahead >= 1 && ahead < 32 && n > S3X_BYTES_COPY_PIECE && !cold) pieced++;
            }
        }
    }
    CHECK(!bad, "plain=%d region %zu: every size and distance copies exactly its bytes", plain, region);
    CHECK(pieced > 0, "the pieced path was taken (%d copies)", pieced);
    free(src);
    free(dst);
}

int main(void) {
    size_t regions[] = {0, S3X_BYTES_COLD_REGION - 1, S3X_BYTES_COLD_REGION, (size_t)1 << 30};
    for (int plain = 0; plain < 2; plain++) {
        s3x_bytes_copy_plain = plain;
        for (size_t i = 0; i < sizeof regions / sizeof *regions; i++) check_all(plain, regions[i]);
    }
    s3x_bytes_copy_plain = 0;
    return tap_summary("test_bytecopy");
}
