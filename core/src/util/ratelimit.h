/* The adaptive request rate (private): one per client, shared by every
 * transfer on it. On throttling the allowed rate of retried requests drops
 * multiplicatively; each success raises it again until it is back above the
 * rate the client was sending at, where the limiter switches itself off.
 * Pure arithmetic on times the caller passes (seconds), so tests can drive it.
 * See docs/reliability.md ("Adaptive request rate"). */
#ifndef S3X_RATELIMIT_H
#define S3X_RATELIMIT_H
#include <stdint.h>

/* The rate never drops below this many requests/s: the waiting requests are
 * given slots 1/rate apart and cannot be woken early, so the tail after a
 * storm ends is at most (requests waiting) / S3X_RL_MIN_RATE seconds. */
#define S3X_RL_MIN_RATE 2.0
#define S3X_RL_BETA 0.5         /* multiplicative decrease per throttling answer */
#define S3X_RL_GROWTH 1.5       /* multiplicative increase per success while active */
#define S3X_RL_MEASURE_S 0.5    /* window of the measured response rate */

typedef struct s3x_ratelimit {
    int active;
    double rate;          /* requests/s allowed while active */
    double full_rate;     /* the measured rate when throttling began: above it the limiter stops */
    double next_free;     /* the next free slot */
    double meas_t0;       /* measured response rate: current window start, count, last value */
    int64_t meas_n;
    double measured;
    int64_t throttles;    /* throttling answers seen by this client */
} s3x_ratelimit;

void s3x_rl_init(s3x_ratelimit *rl);
/* Every finished request (to measure the rate the client sends at). */
void s3x_rl_on_response(s3x_ratelimit *rl, double now);
/* A throttling answer: activates the limiter or lowers its rate. */
void s3x_rl_on_throttle(s3x_ratelimit *rl, double now);
/* A request succeeded: raises the rate; may switch the limiter off. */
void s3x_rl_on_success(s3x_ratelimit *rl, double now);
/* Reserves a slot for a retried request that would go at `earliest`: returns
 * the time it may go (>= earliest; earliest itself when the limiter is off).
 * Slots are 1/rate apart, so the requests sent into a storm are spaced. */
double s3x_rl_reserve(s3x_ratelimit *rl, double earliest);

#endif
