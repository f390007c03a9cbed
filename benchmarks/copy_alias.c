/* What the distance between source and destination modulo 4096 does to a
 * bulk copy on this machine: memcpy against s3x_bytes_copy
 * (core/src/util/bytecopy.c), both copying CHUNK bytes at a time from one
 * source buffer into a destination of TOTAL bytes (as the loop copies
 * libcurl's buffer into range buffers), best of REPS passes, GB/s.
 * Built and run by copy_alias.py. */
#include "bytecopy.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef void *(*copy_fn)(void *, const void *, size_t);

static double pass(copy_fn f, char *dst, const char *src, size_t chunk, size_t total, int reps) {
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        for (size_t o = 0; o + chunk <= total; o += chunk) f(dst + o, src, chunk);
        double t = now() - t0;
        if (t < best) best = t;
    }
    return (double)total / best / 1e9;
}

int main(int argc, char **argv) {
    size_t chunk = argc > 1 ? strtoul(argv[1], NULL, 0) : 16384;
    size_t total = argc > 2 ? strtoul(argv[2], NULL, 0) : 64u << 20;
    int reps = argc > 3 ? atoi(argv[3]) : 5;
    total -= total % chunk;
    char *src = aligned_alloc(4096, (chunk / 4096 + 2) * 4096);
    char *dst = aligned_alloc(4096, (total / 4096 + 2) * 4096);
    if (!src || !dst) return 1;
    memset(src, 1, (chunk / 4096 + 2) * 4096);
    memset(dst, 0, (total / 4096 + 2) * 4096);
    printf("{\"chunk\": %zu, \"total\": %zu, \"reps\": %d, \"rows\": [\n", chunk, total, reps);
    for (int ahead = 0; ahead <= 128; ahead++) {
        /* dst - src == ahead (mod 4096) for every copy of the pass */
        double m = pass(memcpy, dst + ahead, src, chunk, total, reps);
        double b = pass(s3x_bytes_copy, dst + ahead, src, chunk, total, reps);
        printf("  {\"ahead\": %d, \"memcpy\": %.2f, \"s3x_bytes_copy\": %.2f}%s\n", ahead, m, b,
               ahead < 128 ? "," : "");
    }
    printf("]}\n");
    free(src);
    free(dst);
    return 0;
}
