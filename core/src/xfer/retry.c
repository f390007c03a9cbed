#include "retry.h"
#include <math.h>
#include <string.h>

/* ---- first-byte timeout ------------------------------------------------------- */

void s3x_fbt_init(s3x_fbt *f, int64_t knob, int64_t concurrency) {
    memset(f, 0, sizeof *f);
    if (knob == 0) return;
    if (knob > 0) {
        f->mode = 1;
        f->timeout_ms = knob;
        f->timeout_exact_ms = (double)knob;
        return;
    }
    f->mode = 2;
    f->warmup_n = concurrency > 10 ? (int)concurrency : 10;
    f->topk_cap = f->warmup_n / 10;
    if (f->topk_cap < 1) f->topk_cap = 1;
    if (f->topk_cap > S3X_FBT_MAX_TOPK) f->topk_cap = S3X_FBT_MAX_TOPK;
}

static void heap_push_topk(s3x_fbt *f, double v) {
    /* Keep the topk_cap largest values in a min-heap (root = smallest kept). */
    double *h = f->topk;
    if (f->topk_n < f->topk_cap) {
        int i = f->topk_n++;
        h[i] = v;
        while (i > 0 && h[(i - 1) / 2] > h[i]) {
            double t = h[i];
            h[i] = h[(i - 1) / 2];
            h[(i - 1) / 2] = t;
            i = (i - 1) / 2;
        }
        return;
    }
    if (v <= h[0]) return;
    h[0] = v;
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < f->topk_n && h[l] < h[m]) m = l;
        if (r < f->topk_n && h[r] < h[m]) m = r;
        if (m == i) break;
        double t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static void set_timeout(s3x_fbt *f, double ms) {
    /* Never below the floor: a timeout shorter than a loaded server's normal
     * think time would re-send parts that were not slow at all. */
    if (ms < S3X_FBT_FLOOR_MS) ms = S3X_FBT_FLOOR_MS;
    if (ms > S3X_FBT_CEILING_MS) {
        f->stopped = 1;
        f->timeout_ms = 0;
        f->timeout_exact_ms = 0;
    } else {
        f->timeout_exact_ms = ms;
        f->timeout_ms = (int64_t)llround(ms);
    }
}

void s3x_fbt_on_success(s3x_fbt *f, double request_ms, double ttfb_ms) {
    if (f->mode != 2 || f->stopped) return;
    f->n_ok++;
    if (f->n_ok <= f->warmup_n) {
        /* Warm-up: no timeout yet; learn from whole-request durations. */
        f->warmup_sum_ms += request_ms;
        heap_push_topk(f, request_ms);
        if (f->n_ok == f->warmup_n) {
            if (f->warmup_sum_ms / f->warmup_n >= S3X_FBT_CEILING_MS) {
                f->stopped = 1; /* a slow link: re-sending would cost more than waiting */
                f->timeout_ms = 0;
            } else {
                double p90 = f->topk[0]; /* smallest of the largest tenth ~ the 90th percentile */
                set_timeout(f, p90);
            }
        }
        return;
    }
    f->rate_done++;
    f->ttfb_sum_ms += ttfb_ms;
    f->ttfb_n++;
    double expected = f->ttfb_sum_ms / (double)f->ttfb_n + S3X_FBT_OFFSET_MS;
    /* Drift slowly toward the mean time to first byte plus a margin. */
    set_timeout(f, 0.99 * f->timeout_exact_ms + 0.01 * expected);
}

void s3x_fbt_on_timeout(s3x_fbt *f, int64_t used_ms) {
    if (f->mode != 2 || f->stopped || f->n_ok < 10) return;
    f->rate_done++;
    f->rate_fail++;
    int64_t pct1 = (f->rate_done + 99) / 100, pmille = (f->rate_done + 999) / 1000;
    if (f->rate_fail > pct1) {
        /* More than 1% of recent parts timed out: a larger step. */
        f->rate_done = f->rate_fail = 0;
        if (used_ms + 1000 > f->timeout_ms) set_timeout(f, f->timeout_exact_ms + 1000);
    } else if (f->rate_fail > pmille) {
        /* More than 0.1%: a smaller one. The guard ignores stale timeouts. */
        if (used_ms + 100 > f->timeout_ms) set_timeout(f, f->timeout_exact_ms + 100);
    }
}
