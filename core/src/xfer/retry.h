/* Retry policy of transfers (private): the slow-part (first-byte) timeout
 * learned from the run. Backoff, the retry budget and the judge every request
 * goes through are net/retrypolicy.h, shared with the single operations.
 * See docs/reliability.md. */
#ifndef S3X_RETRY_H
#define S3X_RETRY_H
#include <stdint.h>
#include "retrypolicy.h"

/* First-byte timeout policy. */
#define S3X_FBT_CEILING_MS 5000   /* above this the optimisation turns itself off */
#define S3X_FBT_OFFSET_MS 700     /* margin over the mean time to first byte */
#define S3X_FBT_FLOOR_MS 1000     /* the learned timeout is never below this */
#define S3X_FBT_MAX_TOPK 128
typedef struct s3x_fbt {
    int mode;                 /* 0 off, 1 fixed, 2 dynamic */
    int stopped;
    int64_t timeout_ms;       /* in force now, whole milliseconds; 0 = none */
    double timeout_exact_ms;  /* the same unrounded, so small steps of the average add up */
    int warmup_n;             /* N = max(concurrency, 10) */
    int n_ok;
    double warmup_sum_ms;
    double topk[S3X_FBT_MAX_TOPK]; /* min-heap of the largest warm-up durations */
    int topk_n, topk_cap;
    int64_t rate_done, rate_fail;
    double ttfb_sum_ms;
    int64_t ttfb_n;
} s3x_fbt;

/* knob: S3X_SLOW_PART_OFF, S3X_SLOW_PART_DYNAMIC or a fixed timeout in ms. */
void s3x_fbt_init(s3x_fbt *f, int64_t knob, int64_t concurrency);
static inline int64_t s3x_fbt_current(const s3x_fbt *f) { return f->stopped ? 0 : f->timeout_ms; }
/* A request finished well: its whole duration and its time to first byte. */
void s3x_fbt_on_success(s3x_fbt *f, double request_ms, double ttfb_ms);
/* A request was cut by the first-byte timeout that was in force for it. */
void s3x_fbt_on_timeout(s3x_fbt *f, int64_t timeout_used_ms);

#endif
