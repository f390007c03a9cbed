/* Copies into a destination that is out of the cache: memcpy against
 * s3x_bytes_copy_to (core/src/util/bytecopy.c, non-temporal stores from 4
 * MiB of region on x86-64), both copying CHUNK bytes at a time from a 256 KiB
 * source that stays in the cache (as libcurl's receive buffer does) into a
 * destination of TOTAL bytes, written front to back (as range buffers are),
 * best of REPS passes, GB/s. The destination's pages are touched first, so
 * no pass pays page faults. Built and run by copy_cold.py. */
#include "bytecopy.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SRC_BYTES (256u * 1024u)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double pass(int cold, char *dst, const char *src, size_t chunk, size_t total, int reps) {
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        size_t so = 0;
        for (size_t o = 0; o + chunk <= total; o += chunk) {
            if (so + chunk > SRC_BYTES) so = 0;
            if (cold) s3x_bytes_copy_to(dst + o, src + so, chunk, total);
            else memcpy(dst + o, src + so, chunk);
            so += chunk;
        }
        double t = now() - t0;
        if (t < best) best = t;
    }
    return (double)total / best / 1e9;
}

int main(int argc, char **argv) {
    size_t chunk = argc > 1 ? strtoul(argv[1], NULL, 0) : 16384;
    size_t total = argc > 2 ? strtoul(argv[2], NULL, 0) : (size_t)1 << 30;
    int reps = argc > 3 ? atoi(argv[3]) : 5;
    if (chunk == 0 || chunk > SRC_BYTES) return 2;
    total -= total % chunk;
    char *src = aligned_alloc(4096, SRC_BYTES);
    char *dst = aligned_alloc(4096, (total / 4096 + 1) * 4096);
    if (!src || !dst) return 1;
    memset(src, 1, SRC_BYTES);
    memset(dst, 0, (total / 4096 + 1) * 4096);
    double m = pass(0, dst, src, chunk, total, reps);
    double c = pass(1, dst, src, chunk, total, reps);
    printf("{\"chunk\": %zu, \"total\": %zu, \"reps\": %d, \"memcpy\": %.2f, \"s3x_bytes_copy_to\": %.2f}\n", chunk, total,
           reps, m, c);
    free(src);
    free(dst);
    return 0;
}
