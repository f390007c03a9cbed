/* Part-buffer pools: what each kind allocates, keeps and frees, with exact
 * counters, and the memory bound of the BOUNDED pool under the upload
 * manager's get/put pattern (C parts in flight, at most C+1 buffers).
 * Leaks are left to ASan: every scenario ends with s3x_pool_release and
 * every buffer handed out is put back first. */
#include "pool.h"
#include "s3xfer/params.h"
#include "tap.h"

/* tap.h's CHECK_INTEQ evaluates `actual` twice (once for the test, once for
 * the message), which repeats side effects; this one evaluates it once. */
static int check_eq(long long actual, long long expected, const char *file, int line, const char *what) {
    return tap_check(actual == expected, file, line, "%s: expected %lld, got %lld", what, expected, actual);
}
#define CHECK_EQ(actual, expected, what) \
    check_eq((long long)(actual), (long long)(expected), __FILE__, __LINE__, (what))

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SZ ((size_t)4096)

/* Counters in one line, so a failing scenario shows the whole state. */
#define CHECK_COUNTERS(p, alloc, bytes, held, peak, alv)                                                      \
    CHECK((p)->allocations == (int64_t)(alloc) && (p)->bytes_allocated == (int64_t)(bytes) &&                  \
              (p)->held_bytes == (int64_t)(held) && (p)->peak_held_bytes == (int64_t)(peak) &&                \
              (p)->alive == (int)(alv),                                                                       \
          "counters: expected alloc=%lld bytes=%lld held=%lld peak=%lld alive=%d, got alloc=%lld bytes=%lld " \
          "held=%lld peak=%lld alive=%d",                                                                     \
          (long long)(alloc), (long long)(bytes), (long long)(held), (long long)(peak), (int)(alv),           \
          (long long)(p)->allocations, (long long)(p)->bytes_allocated, (long long)(p)->held_bytes,           \
          (long long)(p)->peak_held_bytes, (p)->alive)

static int in_list(char *const *list, int n, const char *b) {
    for (int i = 0; i < n; i++)
        if (list[i] == b) return 1;
    return 0;
}

/* Writes to the whole buffer so ASan sees it is really buf_size bytes. */
static void touch(char *b, size_t n) { memset(b, 0xA5, n); }

/* ---- MALLOC ----------------------------------------------------------------- */

static void test_malloc_kind(void) {
    s3x_pool p;
    s3x_pool_init(&p, S3X_POOL_MALLOC, SZ, 2);
    CHECK_COUNTERS(&p, 0, 0, 0, 0, 0);
    char *b[5];
    int oom = 7;
    /* max_buffers does not apply to MALLOC: five gets with max 2 all succeed. */
    for (int i = 0; i < 5; i++) {
        b[i] = s3x_pool_get(&p, &oom);
        CHECK(b[i] != NULL, "malloc pool get %d returned NULL", i);
        CHECK_EQ(oom, 0, "oom flag after a successful get");
        if (b[i]) touch(b[i], SZ);
    }
    CHECK_COUNTERS(&p, 5, 5 * SZ, 5 * SZ, 5 * SZ, 5);
    s3x_pool_put(&p, b[0], SZ);
    s3x_pool_put(&p, b[1], SZ);
    CHECK_COUNTERS(&p, 5, 5 * SZ, 3 * SZ, 5 * SZ, 3);
    CHECK_EQ(p.nfree, 0, "malloc pool keeps nothing after a put");
    /* Every get allocates, even right after a put. */
    b[0] = s3x_pool_get(&p, NULL);
    CHECK(b[0] != NULL, "malloc pool get after put");
    CHECK_COUNTERS(&p, 6, 6 * SZ, 4 * SZ, 5 * SZ, 4);
    for (int i = 0; i < 5; i++)
        if (i != 1) s3x_pool_put(&p, b[i], SZ);
    CHECK_COUNTERS(&p, 6, 6 * SZ, 0, 5 * SZ, 0);
    CHECK_EQ(p.nfree, 0, "malloc pool free list after all puts");
    /* 100 get/put cycles: 100 allocations, never more than one held. */
    for (int i = 0; i < 100; i++) {
        char *x = s3x_pool_get(&p, NULL);
        CHECK(x != NULL, "malloc cycle get %d", i);
        s3x_pool_put(&p, x, SZ);
    }
    CHECK_COUNTERS(&p, 106, 106 * SZ, 0, 5 * SZ, 0);
    s3x_pool_put(&p, NULL, SZ); /* a NULL put is a no-op */
    CHECK_COUNTERS(&p, 106, 106 * SZ, 0, 5 * SZ, 0);
    s3x_pool_release(&p);
    CHECK_COUNTERS(&p, 106, 106 * SZ, 0, 5 * SZ, 0);
}

/* ---- CACHE ------------------------------------------------------------------ */

static void test_cache_kind(void) {
    s3x_pool p;
    s3x_pool_init(&p, S3X_POOL_CACHE, SZ, 2);
    char *b[6];
    /* max_buffers does not apply to CACHE either. */
    for (int i = 0; i < 5; i++) {
        b[i] = s3x_pool_get(&p, NULL);
        CHECK(b[i] != NULL, "cache pool get %d returned NULL", i);
        if (b[i]) touch(b[i], SZ);
    }
    CHECK_COUNTERS(&p, 5, 5 * SZ, 5 * SZ, 5 * SZ, 5);
    for (int i = 0; i < 5; i++) s3x_pool_put(&p, b[i], SZ);
    /* Nothing is freed on put: all five stay alive and held. */
    CHECK_COUNTERS(&p, 5, 5 * SZ, 5 * SZ, 5 * SZ, 5);
    CHECK_EQ(p.nfree, 5, "cache pool keeps every buffer put back");
    char *orig[5];
    memcpy(orig, b, sizeof orig);
    /* Five gets reuse the five kept buffers. */
    for (int i = 0; i < 5; i++) {
        b[i] = s3x_pool_get(&p, NULL);
        CHECK(in_list(orig, 5, b[i]), "cache get %d reuses a kept buffer", i);
    }
    int distinct = 1;
    for (int i = 0; i < 5; i++)
        for (int j = i + 1; j < 5; j++)
            if (b[i] == b[j]) distinct = 0;
    CHECK(distinct, "cache pool never hands out one buffer twice");
    CHECK_COUNTERS(&p, 5, 5 * SZ, 5 * SZ, 5 * SZ, 5);
    CHECK_EQ(p.nfree, 0, "cache free list after reusing all");
    /* A sixth get allocates. */
    b[5] = s3x_pool_get(&p, NULL);
    CHECK(b[5] != NULL && !in_list(orig, 5, b[5]), "cache get beyond the kept ones allocates a new buffer");
    CHECK_COUNTERS(&p, 6, 6 * SZ, 6 * SZ, 6 * SZ, 6);
    for (int i = 0; i < 6; i++) s3x_pool_put(&p, b[i], SZ);
    CHECK_COUNTERS(&p, 6, 6 * SZ, 6 * SZ, 6 * SZ, 6);
    /* 1000 get/put cycles: no allocation at all. */
    for (int i = 0; i < 1000; i++) {
        char *x = s3x_pool_get(&p, NULL);
        CHECK(x != NULL, "cache cycle get %d", i);
        s3x_pool_put(&p, x, SZ);
    }
    CHECK_COUNTERS(&p, 6, 6 * SZ, 6 * SZ, 6 * SZ, 6);
    /* Counters reset: peak restarts from what is held now. */
    s3x_pool_reset_counters(&p);
    CHECK_COUNTERS(&p, 0, 0, 6 * SZ, 6 * SZ, 6);
    /* Release frees the kept buffers; the pool is usable again afterwards. */
    s3x_pool_release(&p);
    CHECK_COUNTERS(&p, 0, 0, 0, 6 * SZ, 0);
    CHECK(p.nfree == 0 && p.free_list == NULL && p.free_cap == 0, "release empties the free list");
    char *x = s3x_pool_get(&p, NULL);
    CHECK(x != NULL, "get after release");
    s3x_pool_put(&p, x, SZ);
    CHECK_COUNTERS(&p, 1, (int64_t)SZ, (int64_t)SZ, 6 * SZ, 1);
    CHECK_EQ(p.nfree, 1, "put after release keeps the buffer");
    s3x_pool_release(&p);
    CHECK_COUNTERS(&p, 1, (int64_t)SZ, 0, 6 * SZ, 0);
}

/* Many buffers in one CACHE pool: the free list grows past its first capacity. */
static void test_cache_growth(void) {
    s3x_pool p;
    s3x_pool_init(&p, S3X_POOL_CACHE, 64, 0);
    enum { N = 100 };
    char *b[N];
    for (int i = 0; i < N; i++) b[i] = s3x_pool_get(&p, NULL);
    for (int i = 0; i < N; i++) s3x_pool_put(&p, b[i], 64);
    CHECK_EQ(p.nfree, N, "cache free list holds 100 buffers");
    CHECK(p.free_cap >= N, "free list capacity grew (%d)", p.free_cap);
    CHECK_COUNTERS(&p, N, N * 64, N * 64, N * 64, N);
    s3x_pool_release(&p);
    CHECK_COUNTERS(&p, N, N * 64, 0, N * 64, 0);
}

/* ---- BOUNDED ---------------------------------------------------------------- */

static void test_bounded_kind(void) {
    s3x_pool p;
    s3x_pool_init(&p, S3X_POOL_BOUNDED, SZ, 3);
    char *b[3];
    for (int i = 0; i < 3; i++) {
        b[i] = s3x_pool_get(&p, NULL);
        CHECK(b[i] != NULL, "bounded get %d of 3", i);
        if (b[i]) touch(b[i], SZ);
    }
    CHECK_COUNTERS(&p, 3, 3 * SZ, 3 * SZ, 3 * SZ, 3);
    int oom = 7;
    char *x = s3x_pool_get(&p, &oom);
    CHECK(x == NULL, "bounded pool with all 3 buffers in use returns NULL");
    CHECK_EQ(oom, 0, "exhaustion is not reported as out of memory");
    CHECK_COUNTERS(&p, 3, 3 * SZ, 3 * SZ, 3 * SZ, 3);
    /* Asking again changes nothing. */
    for (int i = 0; i < 10; i++) CHECK(s3x_pool_get(&p, NULL) == NULL, "exhausted get %d", i);
    CHECK_COUNTERS(&p, 3, 3 * SZ, 3 * SZ, 3 * SZ, 3);
    /* A put makes the next get succeed, with the same buffer, no allocation. */
    s3x_pool_put(&p, b[1], SZ);
    CHECK_COUNTERS(&p, 3, 3 * SZ, 3 * SZ, 3 * SZ, 3);
    x = s3x_pool_get(&p, &oom);
    CHECK(x == b[1], "bounded get after a put reuses the returned buffer");
    CHECK_EQ(oom, 0, "oom after reuse");
    CHECK_COUNTERS(&p, 3, 3 * SZ, 3 * SZ, 3 * SZ, 3);
    CHECK(s3x_pool_get(&p, NULL) == NULL, "exhausted again after the reuse");
    for (int i = 0; i < 3; i++) s3x_pool_put(&p, i == 1 ? x : b[i], SZ);
    CHECK_EQ(p.nfree, 3, "bounded pool keeps buffers put back");
    CHECK_COUNTERS(&p, 3, 3 * SZ, 3 * SZ, 3 * SZ, 3);
    s3x_pool_release(&p);
    CHECK_COUNTERS(&p, 3, 3 * SZ, 0, 3 * SZ, 0);
}

/* ---- buffer size changes ---------------------------------------------------- */

static void test_set_size(int kind, const char *name) {
    s3x_pool p;
    s3x_pool_init(&p, kind, 1000, 4);
    char *a = s3x_pool_get(&p, NULL), *b = s3x_pool_get(&p, NULL), *c = s3x_pool_get(&p, NULL);
    CHECK(a && b && c, "%s: three gets", name);
    s3x_pool_put(&p, a, 1000);
    s3x_pool_put(&p, b, 1000);
    int kept = kind == S3X_POOL_MALLOC ? 0 : 2;
    CHECK_EQ(p.nfree, kept, "kept before set_size");
    CHECK_COUNTERS(&p, 3, 3000, (1 + kept) * 1000, 3000, 1 + kept);
    /* Same size: nothing changes. */
    s3x_pool_set_size(&p, 1000);
    CHECK_EQ(p.nfree, kept, "set_size to the same size keeps buffers");
    CHECK_COUNTERS(&p, 3, 3000, (1 + kept) * 1000, 3000, 1 + kept);
    /* New size: kept buffers of the old size are freed, the one in use is not. */
    s3x_pool_set_size(&p, 3000);
    CHECK_EQ(p.buf_size, 3000, "buf_size after set_size");
    CHECK_EQ(p.nfree, 0, "set_size drops kept buffers of the old size");
    CHECK_COUNTERS(&p, 3, 3000, 1000, 3000, 1);
    char *d = s3x_pool_get(&p, NULL);
    CHECK(d != NULL, "%s: get of the new size", name);
    if (d) touch(d, 3000);
    CHECK_COUNTERS(&p, 4, 6000, 4000, 4000, 2);
    /* A put of an old-size buffer frees it, whatever the kind. */
    s3x_pool_put(&p, c, 1000);
    CHECK_EQ(p.nfree, 0, "old-size buffer is not kept");
    CHECK_COUNTERS(&p, 4, 6000, 3000, 4000, 1);
    s3x_pool_put(&p, d, 3000);
    CHECK_EQ(p.nfree, kind == S3X_POOL_MALLOC ? 0 : 1, "new-size buffer kept (not MALLOC)");
    CHECK_COUNTERS(&p, 4, 6000, kind == S3X_POOL_MALLOC ? 0 : 3000, 4000, kind == S3X_POOL_MALLOC ? 0 : 1);
    s3x_pool_release(&p);
    CHECK_COUNTERS(&p, 4, 6000, 0, 4000, 0);
}

/* A BOUNDED pool at its limit with buffers of an old size: when they come
 * back they are freed, and the new size can be handed out. */
static void test_bounded_resize(void) {
    s3x_pool p;
    s3x_pool_init(&p, S3X_POOL_BOUNDED, 1000, 2);
    char *a = s3x_pool_get(&p, NULL), *b = s3x_pool_get(&p, NULL);
    CHECK(a && b, "two gets of 2");
    s3x_pool_set_size(&p, 2000);
    CHECK(s3x_pool_get(&p, NULL) == NULL, "both old-size buffers in use: the new size waits");
    CHECK_COUNTERS(&p, 2, 2000, 2000, 2000, 2);
    s3x_pool_put(&p, a, 1000);
    CHECK_COUNTERS(&p, 2, 2000, 1000, 2000, 1);
    char *c = s3x_pool_get(&p, NULL);
    CHECK(c != NULL, "after an old-size put the new size is handed out");
    if (c) touch(c, 2000);
    CHECK_COUNTERS(&p, 3, 4000, 3000, 3000, 2);
    CHECK(s3x_pool_get(&p, NULL) == NULL, "limit holds across sizes");
    s3x_pool_put(&p, b, 1000);
    s3x_pool_put(&p, c, 2000);
    CHECK_COUNTERS(&p, 3, 4000, 2000, 3000, 1);

    /* Only kept buffers, all of the old size, the pool full: set_size frees
     * them, and a get of the new size succeeds. */
    s3x_pool q;
    s3x_pool_init(&q, S3X_POOL_BOUNDED, 1000, 2);
    a = s3x_pool_get(&q, NULL);
    b = s3x_pool_get(&q, NULL);
    s3x_pool_put(&q, a, 1000);
    s3x_pool_put(&q, b, 1000);
    CHECK(q.nfree == 2 && q.alive == 2, "two kept old-size buffers (nfree %d, alive %d)", q.nfree, q.alive);
    s3x_pool_set_size(&q, 5000);
    char *n1 = s3x_pool_get(&q, NULL), *n2 = s3x_pool_get(&q, NULL);
    CHECK(n1 != NULL && n2 != NULL, "bounded pool whose kept buffers were of an old size hands out new ones");
    if (n1) touch(n1, 5000);
    if (n2) touch(n2, 5000);
    CHECK(s3x_pool_get(&q, NULL) == NULL, "and still stops at max_buffers");
    CHECK_COUNTERS(&q, 4, 12000, 10000, 10000, 2);
    s3x_pool_put(&q, n1, 5000);
    s3x_pool_put(&q, n2, 5000);
    s3x_pool_release(&q);
    CHECK_COUNTERS(&q, 4, 12000, 0, 10000, 0);
    s3x_pool_release(&p);
    CHECK_COUNTERS(&p, 3, 4000, 0, 3000, 0);
}

/* ---- the upload manager's pattern ------------------------------------------- */

/* A small deterministic generator for the completion order. */
static uint64_t g_rng = 88172645463325252ull;
static uint32_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 32);
}

typedef struct sim {
    int64_t max_alive, max_inflight, null_gets;
} sim;

/* nparts parts through pool p, at most c in flight, completing in random
 * order; at part `resize_at` (if > 0) the buffer size doubles, as for a
 * stream whose parts grow. Puts each buffer back with the size it had. */
static sim simulate(s3x_pool *p, int c, int nparts, int resize_at) {
    sim s = {0, 0, 0};
    char **bufs = calloc((size_t)c, sizeof *bufs);
    size_t *sizes = calloc((size_t)c, sizeof *sizes);
    int inflight = 0, started = 0, done = 0;
    while (done < nparts) {
        while (inflight < c && started < nparts) {
            if (resize_at > 0 && started == resize_at) s3x_pool_set_size(p, p->buf_size * 2);
            char *b = s3x_pool_get(p, NULL);
            if (!b) {
                s.null_gets++;
                break;
            }
            b[0] = (char)started;
            b[p->buf_size - 1] = (char)started;
            bufs[inflight] = b;
            sizes[inflight] = p->buf_size;
            inflight++;
            started++;
            if (p->alive > s.max_alive) s.max_alive = p->alive;
            if (inflight > s.max_inflight) s.max_inflight = inflight;
        }
        if (inflight == 0) break; /* a stuck pool: nothing to complete */
        int k = (int)(rnd() % (uint32_t)inflight);
        s3x_pool_put(p, bufs[k], sizes[k]);
        bufs[k] = bufs[inflight - 1];
        sizes[k] = sizes[inflight - 1];
        inflight--;
        done++;
    }
    free(bufs);
    free(sizes);
    return s;
}

static void test_upload_pattern(void) {
    static const int cs[] = {1, 2, 4, 8, 16, 64};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        int c = cs[i];
        s3x_pool p;
        s3x_pool_init(&p, S3X_POOL_BOUNDED, 1024, c + 1);
        sim s = simulate(&p, c, 300, 0);
        CHECK(p.allocations <= c + 1, "C=%d: bounded pool allocated %lld buffers for 300 parts (bound C+1 = %d)", c,
              (long long)p.allocations, c + 1);
        CHECK_EQ(p.allocations, c, "bounded allocations with C in flight (reused after the first C)");
        CHECK(s.max_alive <= c + 1, "C=%d: at most C+1 buffers alive (saw %lld)", c, (long long)s.max_alive);
        CHECK(p.peak_held_bytes <= (int64_t)(c + 1) * 1024, "C=%d: peak held %lld <= (C+1)*size", c,
              (long long)p.peak_held_bytes);
        CHECK_EQ(s.null_gets, 0, "no waits with C in flight and C+1 buffers");
        CHECK_EQ(s.max_inflight, c, "the simulation kept C parts in flight");
        s3x_pool_release(&p);
        CHECK_EQ(p.alive, 0, "nothing alive after release");

        /* The same with the part size doubling mid-run (stream growth). */
        s3x_pool_init(&p, S3X_POOL_BOUNDED, 1024, c + 1);
        s = simulate(&p, c, 300, 150);
        CHECK(s.max_alive <= c + 1, "C=%d with a resize: at most C+1 alive (saw %lld)", c, (long long)s.max_alive);
        CHECK(p.allocations <= 2 * (c + 1), "C=%d with a resize: %lld allocations (<= 2(C+1))", c,
              (long long)p.allocations);
        CHECK(p.peak_held_bytes <= (int64_t)(c + 1) * 2048, "C=%d with a resize: peak held %lld <= (C+1)*new size",
              c, (long long)p.peak_held_bytes);
        CHECK_EQ(s.null_gets, 0, "no waits across the resize");
        s3x_pool_release(&p);
        CHECK_EQ(p.alive, 0, "nothing alive after release (resize)");

        /* Tighter than the manager runs it: C in flight, only C buffers. */
        s3x_pool_init(&p, S3X_POOL_BOUNDED, 1024, c);
        s = simulate(&p, c, 300, 0);
        CHECK(s.max_alive <= c, "C=%d, max C: at most C alive (saw %lld)", c, (long long)s.max_alive);
        CHECK_EQ(p.allocations, c, "max C: C allocations");
        s3x_pool_release(&p);

        /* The CACHE and MALLOC kinds under the same pattern. */
        s3x_pool_init(&p, S3X_POOL_CACHE, 1024, c + 1);
        s = simulate(&p, c, 300, 0);
        CHECK_EQ(p.allocations, c, "cache allocations with C in flight");
        s3x_pool_release(&p);
        s3x_pool_init(&p, S3X_POOL_MALLOC, 1024, c + 1);
        s = simulate(&p, c, 300, 0);
        CHECK_EQ(p.allocations, 300, "malloc allocations: one per part");
        CHECK(p.peak_held_bytes <= (int64_t)c * 1024, "malloc peak %lld <= C*size", (long long)p.peak_held_bytes);
        CHECK_EQ(p.held_bytes, 0, "malloc holds nothing at the end");
        s3x_pool_release(&p);
    }
}

/* The upload manager keeps its pool between transfers and, at the start of
 * each one, sets the limit to concurrency + 1 with s3x_pool_set_limit and
 * resets the counters (core/src/xfer/upload.c, run_upload). After a transfer at concurrency 16 the
 * pool keeps 17 buffers; a next transfer at concurrency 2 must hold at most
 * 3, as DESIGN.md requires ("a bounded pool holds at most concurrency+1 part
 * buffers") and as the memory_limit check assumes. */
static void test_bounded_reused_with_lower_concurrency(void) {
    s3x_pool p;
    s3x_pool_init(&p, S3X_POOL_BOUNDED, 1024, 17);
    sim s = simulate(&p, 16, 100, 0);
    (void)s;
    char *b[17];
    for (int i = 0; i < 17; i++) b[i] = s3x_pool_get(&p, NULL);
    for (int i = 0; i < 17; i++) s3x_pool_put(&p, b[i], 1024);
    CHECK_EQ(p.alive, 17, "first transfer left 17 kept buffers");
    /* Next transfer, concurrency 2: exactly what run_upload does. */
    s3x_pool_set_limit(&p, 3);
    s3x_pool_reset_counters(&p);
    s = simulate(&p, 2, 100, 0);
    CHECK(p.alive <= p.max_buffers,
          "a reused BOUNDED pool keeps %d buffers alive with max_buffers %d",
          p.alive, p.max_buffers);
    CHECK(p.peak_held_bytes <= 3 * 1024,
          "a reused BOUNDED pool reports peak held %lld bytes at concurrency 2 (bound (C+1)*size = %d)",
          (long long)p.peak_held_bytes, 3 * 1024);
    s3x_pool_release(&p);
    CHECK_EQ(p.alive, 0, "nothing alive after release");
}

/* ---- out of memory ---------------------------------------------------------- */

/* Under ASan an impossible allocation aborts unless the allocator may return
 * NULL; this hook (read by ASan with GCC and clang alike, ignored without
 * ASan) lets the out-of-memory path run in the sanitizer build too. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

static void test_oom(void) {
    s3x_pool p;
    s3x_pool_init(&p, S3X_POOL_BOUNDED, SIZE_MAX / 2, 3);
    int oom = 0;
    char *b = s3x_pool_get(&p, &oom);
    CHECK(b == NULL, "an impossible buffer size fails");
    CHECK_EQ(oom, 1, "and says it is out of memory");
    CHECK_COUNTERS(&p, 0, 0, 0, 0, 0);
    s3x_pool_release(&p);
}

/* Buffers of 2 MiB and more are mapped on a 2 MiB boundary (so the kernel
 * can back them with huge pages), keep their exact size for the counters,
 * and are whole: every byte written and read back, the odd tail too. */
static void test_large_buffers(void) {
    const size_t sizes[] = {(size_t)2 << 20, ((size_t)5 << 20) + 100, (size_t)8 << 20};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        s3x_pool p;
        s3x_pool_init(&p, S3X_POOL_CACHE, sizes[k], 0);
        char *a = s3x_pool_get(&p, NULL), *b = s3x_pool_get(&p, NULL);
        CHECK(a && b, "two buffers of %zu bytes", sizes[k]);
        if (!a || !b) continue;
#if !defined(__SANITIZE_ADDRESS__)
        CHECK(((uintptr_t)a & ((2u << 20) - 1)) == 0 && ((uintptr_t)b & ((2u << 20) - 1)) == 0,
              "start on a 2 MiB boundary (%p, %p)", (void *)a, (void *)b);
#endif
        memset(a, 0x5A, sizes[k]);
        memset(b, 0xA5, sizes[k]);
        CHECK(a[0] == 0x5A && a[sizes[k] - 1] == 0x5A && (unsigned char)b[sizes[k] - 1] == 0xA5,
              "each is its own %zu bytes", sizes[k]);
        CHECK_EQ(p.held_bytes, (int64_t)(2 * sizes[k]), "counted at their exact size");
        s3x_pool_put(&p, a, sizes[k]);
        CHECK(s3x_pool_get(&p, NULL) == a, "a kept buffer is handed out again");
        s3x_pool_put(&p, a, sizes[k]);
        s3x_pool_put(&p, b, sizes[k]);
        s3x_pool_release(&p);
        CHECK_EQ(p.held_bytes, 0, "and all released");
        CHECK_EQ(p.alive, 0, "none alive");
    }
}

int main(void) {
    test_malloc_kind();
    test_cache_kind();
    test_cache_growth();
    test_bounded_kind();
    test_set_size(S3X_POOL_MALLOC, "malloc");
    test_set_size(S3X_POOL_CACHE, "cache");
    test_set_size(S3X_POOL_BOUNDED, "bounded");
    test_bounded_resize();
    test_upload_pattern();
    test_bounded_reused_with_lower_concurrency();
    test_oom();
    test_large_buffers();
    return tap_summary("test_pool");
}
