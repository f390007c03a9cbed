/* Retry policy (private): backoff with full jitter, a retry budget, and the
 * slow-part (first-byte) timeout learned from the run. See docs/reliability.md. */
#ifndef S3X_RETRY_H
#define S3X_RETRY_H
#include <stdint.h>

typedef struct s3x_rng {
    uint64_t s;
} s3x_rng;
void s3x_rng_seed(s3x_rng *r, uint64_t seed);
double s3x_rng_uniform(s3x_rng *r); /* [0, 1) */

/* Full jitter: uniform in [0, min(cap, base * 2^(attempt-1))] seconds. */
#define S3X_BACKOFF_BASE_S 0.05
#define S3X_BACKOFF_CAP_S 20.0
double s3x_backoff_delay(s3x_rng *r, int attempt);
/* In adaptive mode a throttled request's own backoff is at most this; the
 * client's shared rate does the rest of the pacing. */
#define S3X_THROTTLE_ADAPTIVE_CAP_S 2.0

/* Token bucket: a retry spends tokens, a success gives one back; with the
 * bucket empty no retry is made, so a dying server is not hammered. */
#define S3X_RETRY_TOKENS 500
#define S3X_RETRY_COST 5
#define S3X_RETRY_COST_TIMEOUT 10
typedef struct s3x_retry_budget {
    int tokens;
} s3x_retry_budget;
void s3x_budget_init(s3x_retry_budget *b);
int s3x_budget_take(s3x_retry_budget *b, int cost); /* 1 if taken */
void s3x_budget_refund(s3x_retry_budget *b);

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
