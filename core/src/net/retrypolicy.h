/* The retry policy of every S3 request (private): which failures are tried
 * again, after how long, and when to give up. The single operations (ops.c)
 * and the transfers' part scheduler (xfer/) ask the same judge, so a 503
 * SlowDown, a reset or a Retry-After is handled one way everywhere. It lives
 * in net/ because single operations are net/ and may not call up into xfer/;
 * what only transfers have (the first-byte timeout learned from a run) stays
 * in xfer/retry.h. See docs/reliability.md. */
#ifndef S3X_RETRYPOLICY_H
#define S3X_RETRYPOLICY_H

#include <stdint.h>
#include "s3xfer/client.h"
#include "s3xfer/transfer.h"
#include "error.h"

/* client_internal.h includes this header (a client keeps the retry state of
 * its single operations), so the request type is only named here. */
typedef struct s3x_http_req s3x_http_req;

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

/* What a run of requests (a transfer, or a client's single operations)
 * remembers between its retries. */
typedef struct s3x_retry_state {
    s3x_rng rng;
    s3x_retry_budget budget;
    double storm_since;        /* first throttling answer since the last success; 0 = none */
    int64_t storm_throttled;   /* throttling answers since then */
    double storm_last;         /* the last throttling answer */
    s3x_saved_error storm_err; /* the last throttling answer's error */
} s3x_retry_state;
/* Seeds the jitter (from the clock, the pid and seed_extra) and fills the
 * budget; s must be zeroed or have been cleared by s3x_retry_state_clear. */
void s3x_retry_state_init(s3x_retry_state *s, uintptr_t seed_extra);
/* Frees what the state holds (the saved storm error). */
void s3x_retry_state_clear(s3x_retry_state *s);

/* The knobs the judge obeys (S3X_PARAM_MAX_ATTEMPTS, _RETRY_TIMEOUT, _RETRY_MODE). */
typedef struct s3x_retry_rules {
    int64_t max_attempts;
    int64_t window_ms;
    int adaptive;
} s3x_retry_rules;

/* What to do with a finished request. */
enum { S3X_REQ_OK = 0, S3X_REQ_RETRY = 1, S3X_REQ_FAIL = 2 };
/* Classifies a finished request: OK, or RETRY (with *delay_s set and the
 * retry counted by cause in stats), or FAIL (thread error set: the request's
 * own error, amended with why retrying stopped). attempt counts from 1.
 * cancelled: the caller is giving up, so nothing is retried.
 * first_byte_timeout_ms > 0: the request was cut by the slow-part timeout of
 * that many ms (a retry that costs nothing from the budget). stats may be
 * NULL; its retry counters and throttled_seconds are added to. */
int s3x_retry_judge(s3x_retry_state *s, const s3x_retry_rules *rules, s3x_client *c, s3x_http_req *r,
                    int attempt, int cancelled, int64_t first_byte_timeout_ms, s3x_result *stats,
                    double *delay_s);

/* Ends a throttling storm (its seconds go to stats, which may be NULL):
 * a cleanup request after a transfer gave up gets a window of its own. */
void s3x_retry_storm_end(s3x_retry_state *s, s3x_result *stats);

/* The retry window (window_ms) ran out while requests wait to retry
 * throttling answers (a rate's gate can hold a retry past it): 1 with the
 * last throttling answer's error set, amended with the window's reason;
 * else 0. */
int s3x_retry_storm_expired(s3x_retry_state *s, int64_t window_ms, double now);

/* Sleeps for s seconds (nothing when s <= 0). */
void s3x_sleep_s(double s);

#endif
