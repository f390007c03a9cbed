/* The retry policy every S3 request goes through: backoff with full jitter,
 * a retry budget, the throttling window, Retry-After. */
#include "retrypolicy.h"
#include "client_internal.h"
#include "error.h"
#include "buf.h"
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void s3x_rng_seed(s3x_rng *r, uint64_t seed) { r->s = seed ? seed : 0x9E3779B97F4A7C15ull; }

double s3x_rng_uniform(s3x_rng *r) {
    /* xorshift64*: plenty for jitter. */
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    uint64_t v = r->s * 2685821657736338717ull;
    return (double)(v >> 11) / 9007199254740992.0;
}

double s3x_backoff_delay(s3x_rng *r, int attempt) {
    if (attempt < 1) attempt = 1;
    double cap = S3X_BACKOFF_BASE_S * pow(2.0, attempt - 1);
    if (cap > S3X_BACKOFF_CAP_S) cap = S3X_BACKOFF_CAP_S;
    return s3x_rng_uniform(r) * cap;
}

void s3x_budget_init(s3x_retry_budget *b) { b->tokens = S3X_RETRY_TOKENS; }

int s3x_budget_take(s3x_retry_budget *b, int cost) {
    if (b->tokens < cost) return 0;
    b->tokens -= cost;
    return 1;
}

void s3x_budget_refund(s3x_retry_budget *b) {
    if (b->tokens < S3X_RETRY_TOKENS) b->tokens++;
}


void s3x_retry_state_clear(s3x_retry_state *s) { s3x_saved_error_free(&s->storm_err); }

void s3x_retry_state_init(s3x_retry_state *s, uintptr_t seed_extra) {
    s3x_retry_state_clear(s);
    memset(s, 0, sizeof *s);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    s3x_rng_seed(&s->rng, (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32) ^ (uint64_t)seed_extra);
    s3x_budget_init(&s->budget);
}

void s3x_sleep_s(double s) {
    if (s <= 0) return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

void s3x_retry_storm_end(s3x_retry_state *s, s3x_result *stats) {
    if (s->storm_since > 0 && stats) stats->throttled_seconds += s3x_now() - s->storm_since;
    s->storm_since = 0;
    s->storm_throttled = 0;
    s3x_saved_error_free(&s->storm_err);
}

/* Appends a reason to the thread's error, keeping its code, status and ids. */
static void amend_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
static void amend_error(const char *fmt, ...) {
    const s3x_error *e = s3x_error_last();
    s3x_buf m = S3X_BUF_INIT;
    s3x_buf_puts(&m, e->message);
    va_list ap;
    va_start(ap, fmt);
    s3x_buf_vprintf(&m, fmt, ap);
    va_end(ap);
    s3x_seterr_http(e->code, e->http_status, e->s3_code, e->request_id, "%s", m.data ? m.data : e->message);
    s3x_buf_free(&m);
}

static void amend_window_error(const s3x_retry_state *s, int64_t window_ms, double now) {
    amend_error(" (throttled for %.1f s with no request succeeding, beyond the retry window of %lld ms; "
                "%lld requests throttled in that time; raise the retry_timeout knob (--retry-timeout) to "
                "wait longer)",
                now - s->storm_since, (long long)window_ms, (long long)s->storm_throttled);
}

int s3x_retry_storm_expired(s3x_retry_state *s, int64_t window_ms, double now) {
    if (s->storm_since <= 0 || window_ms <= 0 || !s->storm_err.code) return 0;
    if (now < s->storm_since + (double)window_ms / 1000.0) return 0;
    s3x_error_restore(&s->storm_err);
    amend_window_error(s, window_ms, now);
    return 1;
}

int s3x_retry_judge(s3x_retry_state *s, const s3x_retry_rules *rules, s3x_client *c, s3x_http_req *r,
                    int attempt, int cancelled, int64_t first_byte_timeout_ms, s3x_result *stats,
                    double *delay_s) {
    *delay_s = 0;
    s3x_result scratch;
    s3x_result *res = stats ? stats : &scratch;
    s3x_ratelimit *rl = &c->rate;
    double now = s3x_now();
    int first_byte_timeout = first_byte_timeout_ms > 0;
    int adaptive = rules->adaptive;
    if (!first_byte_timeout) s3x_rl_on_response(rl, now);
    int error_in_200 = !first_byte_timeout && s3x_http_error_in_200(r);
    if (!first_byte_timeout && r->curl_rc == CURLE_OK && r->status >= 200 && r->status < 300 && !r->read_failed &&
        !r->aborted_by_callback && !error_in_200) {
        s3x_budget_refund(&s->budget);
        /* A request sent before the last throttling answer says nothing
         * about the server now: it does not end the storm. */
        if (s->storm_since > 0 && r->t_start >= s->storm_last) s3x_retry_storm_end(s, stats);
        s3x_rl_on_success(rl, now, r->t_start);
        return S3X_REQ_OK;
    }
    /* Throttling (SlowDown, 429, 503, 500, ...) is the server asking for fewer
     * requests, not a slow part and not a stall: it never reaches the
     * first-byte-timeout learning (only successes and first-byte cuts do). */
    int throttled = !first_byte_timeout && !cancelled && s3x_http_throttled(r);
    int retryable;
    int cost = S3X_RETRY_COST;
    if (first_byte_timeout) {
        retryable = 1;
        cost = 0; /* the slow-part retry is an optimisation, not a failure */
    } else {
        retryable = (throttled || s3x_http_retryable(r)) && !cancelled;
        if (r->curl_rc == CURLE_OPERATION_TIMEDOUT) cost = S3X_RETRY_COST_TIMEOUT;
    }
    /* Keep the thread error describing this failure in case it is final. */
    if (first_byte_timeout)
        s3x_seterr(S3X_ETIMEOUT, "%s: no response within the %lld ms first-byte timeout", r->op,
                   (long long)first_byte_timeout_ms);
    else if (error_in_200)
        s3x_http_check_complete_body(r);
    else
        s3x_http_check(c, r);
    if (!retryable) return S3X_REQ_FAIL;
    int64_t window_ms = rules->window_ms;
    if (throttled) {
        s3x_rl_on_throttle(rl, now);
        if (s->storm_since <= 0) s->storm_since = now;
        s->storm_last = now;
        s->storm_throttled++;
    }
    double window_end = s->storm_since + (double)window_ms / 1000.0;
    if (throttled && window_ms > 0) {
        /* Inside the window throttling is retried whatever max_attempts says:
         * the window measures the storm (time since a request last
         * succeeded), not one request's attempts. */
        s3x_saved_error_free(&s->storm_err);
        s3x_error_save(&s->storm_err);
        if (now >= window_end) {
            amend_window_error(s, window_ms, now);
            return S3X_REQ_FAIL;
        }
    } else if (attempt >= rules->max_attempts) {
        amend_error(" (gave up after %d attempts)", attempt);
        return S3X_REQ_FAIL;
    }
    /* The budget protects a dying server from retries that cannot help. A
     * throttled retry in adaptive mode is already paced by the shared rate,
     * which is the protection the server asked for, so it costs nothing: a
     * storm the window covers must not fail on an empty bucket. */
    if (throttled && adaptive) cost = 0;
    if (cost && !s3x_budget_take(&s->budget, cost)) {
        amend_error(" (retry budget exhausted: the server keeps failing)");
        return S3X_REQ_FAIL;
    }
    res->retries++;
    if (first_byte_timeout) {
        res->retries_first_byte++;
        *delay_s = 0;
        return S3X_REQ_RETRY;
    }
    if (r->curl_rc == CURLE_OPERATION_TIMEDOUT) res->retries_timeout++;
    else if (r->curl_rc != CURLE_OK) res->retries_network++;
    else res->retries_http++;
    double d = s3x_backoff_delay(&s->rng, attempt);
    if (throttled) {
        res->retries_throttled++;
        if (adaptive) {
            /* The shared rate paces every request of a transfer at the
             * scheduler's gate (s3x_rl_may_send); the request's own backoff
             * is capped low so that a retry is never parked long after the
             * storm has passed. */
            if (d > S3X_THROTTLE_ADAPTIVE_CAP_S) d = s3x_rng_uniform(&s->rng) * S3X_THROTTLE_ADAPTIVE_CAP_S;
        }
        if (r->retry_after_s >= 0 && r->retry_after_s > d) d = r->retry_after_s;
        /* The last try lands at the window's end rather than past it. */
        if (window_ms > 0 && now + d > window_end) d = window_end - now;
        if (d < 0) d = 0;
    } else if (r->retry_after_s >= 0 && r->retry_after_s > d) {
        d = r->retry_after_s;
    }
    *delay_s = d;
    return S3X_REQ_RETRY;
}
