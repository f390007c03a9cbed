/* The adaptive request rate (private): one per client, shared by every
 * transfer on it. On throttling the allowed rate of requests drops
 * multiplicatively; each success of a request sent after the last throttling
 * answer raises it again until it is back above the rate the client was
 * sending at, where the limiter switches itself off. While it is on, every
 * request of an adaptive transfer asks it before it goes (s3x_rl_may_send):
 * new parts and retries alike, so a storm receives about `rate` requests a
 * second whatever the number of parts waiting.
 * Pure arithmetic on times the caller passes (seconds), so tests can drive it.
 * See docs/reliability.md ("Adaptive request rate"). */
#ifndef S3X_RATELIMIT_H
#define S3X_RATELIMIT_H
#include <stdint.h>

/* The rate never drops below this many requests/s: during a storm one
 * request probes it every 1/S3X_RL_MIN_RATE seconds, so the end of a storm
 * is noticed within that time; each success then doubles the rate and
 * releases the waiting requests at once (they hold no slots). */
#define S3X_RL_MIN_RATE 0.5
#define S3X_RL_BETA 0.5         /* multiplicative decrease per throttling answer */
#define S3X_RL_GROWTH 2.0       /* multiplicative increase per success while active */
#define S3X_RL_MEASURE_S 0.5    /* window of the measured response rate */

typedef struct s3x_ratelimit {
    int active;
    double rate;          /* requests/s allowed while active */
    double full_rate;     /* the measured rate when throttling began: above it the limiter stops */
    double next_free;     /* the next free slot */
    double last_throttle; /* when the last throttling answer came */
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
/* A request sent at sent_at succeeded: raises the rate (doubled, and at
 * least a quarter of the rate before the storm) and frees the next slot now,
 * unless it was sent before the last throttling answer, which says nothing
 * about the server now; may switch the limiter off. */
void s3x_rl_on_success(s3x_ratelimit *rl, double now, double sent_at);
/* May a request go now? 1 (and the slot is taken: the next one is 1/rate
 * later) or 0 (ask again at s3x_rl_next). Always 1 while the limiter is off. */
int s3x_rl_may_send(s3x_ratelimit *rl, double now);
/* When the next request may go (0 while the limiter is off). */
double s3x_rl_next(const s3x_ratelimit *rl);
/* Reserves a slot for a retried request that would go at `earliest`: returns
 * the time it may go (>= earliest; earliest itself when the limiter is off).
 * Slots are 1/rate apart, so the requests sent into a storm are spaced. */
double s3x_rl_reserve(s3x_ratelimit *rl, double earliest);

#endif
