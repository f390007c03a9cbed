#include "ratelimit.h"
#include <string.h>

void s3x_rl_init(s3x_ratelimit *rl) { memset(rl, 0, sizeof *rl); }

void s3x_rl_on_response(s3x_ratelimit *rl, double now) {
    if (rl->meas_t0 <= 0) rl->meas_t0 = now;
    rl->meas_n++;
    double span = now - rl->meas_t0;
    if (span >= S3X_RL_MEASURE_S) {
        rl->measured = (double)rl->meas_n / span;
        rl->meas_t0 = now;
        rl->meas_n = 0;
    }
}

void s3x_rl_on_throttle(s3x_ratelimit *rl, double now) {
    rl->throttles++;
    rl->last_throttle = now;
    if (!rl->active) {
        /* Start from what the client was doing: a client sending 100 req/s
         * that is told to slow down goes to 50, not to some fixed guess. */
        double base = rl->measured;
        if (base < 2 * S3X_RL_MIN_RATE) base = 2 * S3X_RL_MIN_RATE;
        rl->active = 1;
        rl->full_rate = base;
        rl->rate = base;
        rl->next_free = now;
    }
    /* Every throttling answer cuts: the burst of answers that a storm gives to
     * the requests already in flight takes the rate to its floor at once, which
     * is what a storm asks for; scattered throttling is outweighed by the
     * successes around it (each raises the rate by GROWTH). */
    rl->rate *= S3X_RL_BETA;
    if (rl->rate < S3X_RL_MIN_RATE) rl->rate = S3X_RL_MIN_RATE;
}

void s3x_rl_on_success(s3x_ratelimit *rl, double now, double sent_at) {
    if (!rl->active || sent_at < rl->last_throttle) return;
    /* A request sent after the server last said "slow down" went through:
     * the storm is likely over. Climb back fast, from at least a quarter of
     * the rate before it (more throttling cuts it again at once). */
    rl->rate *= S3X_RL_GROWTH;
    if (rl->rate < rl->full_rate / 4) rl->rate = rl->full_rate / 4;
    if (rl->next_free > now) rl->next_free = now;
    if (rl->rate >= rl->full_rate) rl->active = 0;
}

int s3x_rl_may_send(s3x_ratelimit *rl, double now) {
    if (!rl->active) return 1;
    if (now < rl->next_free) return 0;
    rl->next_free = now + 1.0 / rl->rate;
    return 1;
}

double s3x_rl_next(const s3x_ratelimit *rl) { return rl->active ? rl->next_free : 0; }

double s3x_rl_reserve(s3x_ratelimit *rl, double earliest) {
    if (!rl->active) return earliest;
    double slot = rl->next_free > earliest ? rl->next_free : earliest;
    rl->next_free = slot + 1.0 / rl->rate;
    return slot;
}
