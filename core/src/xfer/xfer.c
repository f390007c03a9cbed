/* Shared manager machinery: knobs, runs, retry decisions. */
#include "xfer.h"
#include "error.h"
#include "params_internal.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int s3x_xfer_init(s3x_xfer *x, s3x_client *c, unsigned scope) {
    memset(x, 0, sizeof *x);
    if (!c) return s3x_seterr(S3X_EINVAL, "client is NULL");
    x->client = c;
    x->scope = scope;
    x->bufs = &x->pool;
    s3x_params_defaults(x->params);
    atomic_init(&x->cancel, 0);
    return 0;
}

void s3x_xfer_destroy(s3x_xfer *x) {
    if (x->pool_ready) s3x_pool_release(&x->pool);
    s3x_saved_error_free(&x->storm_err);
    s3x_saved_error_free(&x->err);
}

int s3x_xfer_set(s3x_xfer *x, s3x_param p, int64_t v) {
    int rc = s3x_param_check(p, v, x->scope);
    if (rc) return rc;
    if (p == S3X_PARAM_POOL && x->pool_ready && v != x->params[p]) {
        s3x_pool_release(&x->pool);
        x->pool_ready = 0;
    }
    x->params[p] = v;
    return 0;
}

int s3x_xfer_get(const s3x_xfer *x, s3x_param p, int64_t *v) {
    const s3x_param_info *pi = s3x_param_info_get(p);
    if (!v) return s3x_seterr(S3X_EINVAL, "value is NULL");
    if (!pi || !(pi->scope & x->scope))
        return s3x_seterr(S3X_EINVAL, "knob %s does not apply to this manager", pi ? pi->name : "?");
    *v = x->params[p];
    return 0;
}

void s3x_xfer_begin(s3x_xfer *x, s3x_result *res) {
    memset(res, 0, sizeof *res);
    x->res = res;
    x->t0 = s3x_now();
    x->failed = 0;
    x->progress_last = 0;
    x->progress_at = x->t0;
    x->storm_since = 0;
    x->storm_throttled = 0;
    s3x_saved_error_free(&x->storm_err);
    s3x_saved_error_free(&x->err);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    s3x_rng_seed(&x->rng, (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)x);
    s3x_budget_init(&x->budget);
    s3x_fbt_init(&x->fbt, x->params[S3X_PARAM_SLOW_PART_TIMEOUT], x->params[S3X_PARAM_CONCURRENCY]);
    if (x->pool_ready && !x->batched) s3x_pool_reset_counters(&x->pool);
    res->concurrency = x->params[S3X_PARAM_CONCURRENCY];
}

void s3x_xfer_end(s3x_xfer *x) {
    s3x_result *r = x->res;
    r->seconds = s3x_now() - x->t0;
    if (x->batched) {
        /* The batch's pool is shared: its figures are the batch's so far. */
        r->pool_allocations = x->bufs->allocations;
        r->pool_bytes_allocated = x->bufs->bytes_allocated;
        r->peak_buffer_bytes = x->bufs->budget ? x->bufs->budget->peak : x->bufs->peak_held_bytes;
        r->buffer_waits = x->bufs->waits;
    } else if (x->pool_ready) {
        r->pool_allocations = x->pool.allocations;
        r->pool_bytes_allocated = x->pool.bytes_allocated;
        r->peak_buffer_bytes = x->pool.peak_held_bytes;
        r->buffer_waits = x->pool.waits;
    }
    r->slow_part_timeout_ms = s3x_fbt_current(&x->fbt);
    if (x->storm_since > 0) r->throttled_seconds += s3x_now() - x->storm_since;
    /* A cancel is for one transfer. */
    atomic_store(&x->cancel, 0);
}

void s3x_xfer_fail(s3x_xfer *x) {
    if (x->failed) return;
    x->failed = 1;
    s3x_error_save(&x->err);
}

int s3x_xfer_failf(s3x_xfer *x, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    s3x_buf b = S3X_BUF_INIT;
    s3x_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    s3x_seterr(code, "%s", b.data ? b.data : "error");
    s3x_buf_free(&b);
    s3x_xfer_fail(x);
    return code;
}

int s3x_xfer_progress(s3x_xfer *x, int64_t done, int64_t total) {
    if (!x->progress) return 0;
    if (done < x->progress_last) done = x->progress_last;
    x->progress_last = done;
    x->progress_at = s3x_now();
    if (x->progress(done, total, x->progress_payload) != 0) {
        atomic_store(&x->cancel, 1);
        return 1;
    }
    return 0;
}

void s3x_xfer_heartbeat(s3x_xfer *x, int64_t done, int64_t total) {
    if (!x->progress || s3x_now() - x->progress_at < S3X_PROGRESS_EVERY_S) return;
    s3x_xfer_progress(x, done, total);
}

int s3x_xfer_cancelled(s3x_xfer *x) { return atomic_load(&x->cancel) != 0; }

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

static void amend_window_error(const s3x_xfer *x, double now) {
    amend_error(" (throttled for %.1f s with no request succeeding, beyond the retry window of %lld ms; "
                "%lld requests throttled in that time; raise the retry_timeout knob (--retry-timeout) to "
                "wait longer)",
                now - x->storm_since, (long long)x->params[S3X_PARAM_RETRY_TIMEOUT], (long long)x->storm_throttled);
}

int s3x_xfer_storm_expired(s3x_xfer *x, double now) {
    int64_t window_ms = x->params[S3X_PARAM_RETRY_TIMEOUT];
    if (x->storm_since <= 0 || window_ms <= 0 || !x->storm_err.code) return 0;
    if (now < x->storm_since + (double)window_ms / 1000.0) return 0;
    s3x_error_restore(&x->storm_err);
    amend_window_error(x, now);
    return 1;
}

int s3x_xfer_judge(s3x_xfer *x, s3x_http_req *r, int attempt, int first_byte_timeout, double *delay_s) {
    *delay_s = 0;
    s3x_result *res = x->res;
    s3x_ratelimit *rl = &x->client->rate;
    double now = s3x_now();
    int adaptive = x->params[S3X_PARAM_RETRY_MODE] == S3X_RETRY_MODE_ADAPTIVE;
    if (!first_byte_timeout) s3x_rl_on_response(rl, now);
    int error_in_200 = !first_byte_timeout && s3x_http_error_in_200(r);
    if (!first_byte_timeout && r->curl_rc == CURLE_OK && r->status >= 200 && r->status < 300 && !r->read_failed &&
        !r->aborted_by_callback && !error_in_200) {
        s3x_budget_refund(&x->budget);
        /* A request sent before the last throttling answer says nothing
         * about the server now: it does not end the storm. */
        if (x->storm_since > 0 && r->t_start >= x->storm_last) {
            res->throttled_seconds += now - x->storm_since;
            x->storm_since = 0;
            x->storm_throttled = 0;
            s3x_saved_error_free(&x->storm_err);
        }
        s3x_rl_on_success(rl, now, r->t_start);
        return S3X_REQ_OK;
    }
    /* Throttling (SlowDown, 429, 503, 500, ...) is the server asking for fewer
     * requests, not a slow part and not a stall: it never reaches the
     * first-byte-timeout learning (only successes and first-byte cuts do). */
    int throttled = !first_byte_timeout && !s3x_xfer_cancelled(x) && s3x_http_throttled(r);
    int retryable;
    int cost = S3X_RETRY_COST;
    if (first_byte_timeout) {
        retryable = 1;
        cost = 0; /* the slow-part retry is an optimisation, not a failure */
    } else {
        retryable = (throttled || s3x_http_retryable(r)) && !s3x_xfer_cancelled(x);
        if (r->curl_rc == CURLE_OPERATION_TIMEDOUT) cost = S3X_RETRY_COST_TIMEOUT;
    }
    /* Keep the thread error describing this failure in case it is final. */
    if (first_byte_timeout)
        s3x_seterr(S3X_ETIMEOUT, "%s: no response within the %lld ms first-byte timeout", r->op,
                   (long long)s3x_fbt_current(&x->fbt));
    else if (error_in_200)
        s3x_http_check_complete_body(r);
    else
        s3x_http_check(x->client, r);
    if (!retryable) return S3X_REQ_FAIL;
    int64_t window_ms = x->params[S3X_PARAM_RETRY_TIMEOUT];
    if (throttled) {
        s3x_rl_on_throttle(rl, now);
        if (x->storm_since <= 0) x->storm_since = now;
        x->storm_last = now;
        x->storm_throttled++;
    }
    double window_end = x->storm_since + (double)window_ms / 1000.0;
    if (throttled && window_ms > 0) {
        /* Inside the window throttling is retried whatever max_attempts says:
         * the window measures the storm (time since the transfer last had a
         * request succeed), not one request's attempts. */
        s3x_saved_error_free(&x->storm_err);
        s3x_error_save(&x->storm_err);
        if (now >= window_end) {
            amend_window_error(x, now);
            return S3X_REQ_FAIL;
        }
    } else if (attempt >= x->params[S3X_PARAM_MAX_ATTEMPTS]) {
        amend_error(" (gave up after %d attempts)", attempt);
        return S3X_REQ_FAIL;
    }
    /* The budget protects a dying server from retries that cannot help. A
     * throttled retry in adaptive mode is already paced by the shared rate,
     * which is the protection the server asked for, so it costs nothing: a
     * storm the window covers must not fail on an empty bucket. */
    if (throttled && adaptive) cost = 0;
    if (cost && !s3x_budget_take(&x->budget, cost)) {
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
    double d = s3x_backoff_delay(&x->rng, attempt);
    if (throttled) {
        res->retries_throttled++;
        if (adaptive) {
            /* The shared rate paces every request at the scheduler's gate
             * (s3x_rl_may_send); the request's own backoff is capped low so
             * that a retry is never parked long after the storm has passed. */
            if (d > S3X_THROTTLE_ADAPTIVE_CAP_S) d = s3x_rng_uniform(&x->rng) * S3X_THROTTLE_ADAPTIVE_CAP_S;
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

void s3x_xfer_learn(s3x_xfer *x, const s3x_http_req *r) {
    if (r->t_end <= 0 || r->t_start <= 0) return;
    double whole = (r->t_end - r->t_start) * 1000.0;
    double ttfb = (r->t_first_byte > 0 && r->t_sent > 0) ? (r->t_first_byte - r->t_sent) * 1000.0 : whole;
    if (ttfb < 0) ttfb = 0;
    s3x_fbt_on_success(&x->fbt, whole, ttfb);
}

void s3x_xfer_tune(s3x_xfer *x, s3x_http_req *r) {
    /* Stall detection: a request moving less than stall_min_rate bytes/s for
     * stall_timeout_ms is dropped (CURLE_OPERATION_TIMEDOUT) and retried.
     * libcurl counts whole seconds. */
    int64_t ms = x->params[S3X_PARAM_STALL_TIMEOUT_MS];
    if (ms <= 0) return;
    long secs = (long)((ms + 999) / 1000);
    curl_easy_setopt(r->easy, CURLOPT_LOW_SPEED_LIMIT, (long)x->params[S3X_PARAM_STALL_MIN_RATE]);
    curl_easy_setopt(r->easy, CURLOPT_LOW_SPEED_TIME, secs);
}

static void sleep_s(double s) {
    if (s <= 0) return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

typedef struct one_state {
    int done;
} one_state;

static void one_done(s3x_http_req *r, void *p) {
    (void)r;
    ((one_state *)p)->done = 1;
}

int s3x_xfer_perform(s3x_xfer *x, s3x_http_req *r) { return s3x_xfer_perform_ex(x, r, NULL); }

int s3x_xfer_perform_ex(s3x_xfer *x, s3x_http_req *r, int *maybe_applied) {
    if (maybe_applied) *maybe_applied = 0;
    /* The cleanup after a failure gets a retry window of its own: a transfer
     * that gave up on a storm must still abort its multipart upload, and the
     * storm that failed it is throttling the abort too. */
    if (!strcmp(r->op, "AbortMultipartUpload") && x->storm_since > 0) {
        x->res->throttled_seconds += s3x_now() - x->storm_since;
        x->storm_since = 0;
        x->storm_throttled = 0;
    }
    for (int attempt = 1;; attempt++) {
        if (attempt > 1) {
            /* keep the request description, drop the last response */
            s3x_http_req_reset(x->client, r);
        }
        x->res->requests++;
        int rc = s3x_http_prepare(x->client, r);
        if (rc) return rc;
        s3x_xfer_tune(x, r);
        one_state st = {0};
        r->on_done = one_done;
        r->done_payload = &st;
        if ((rc = s3x_http_start(x->client, r))) return rc;
        while (!st.done) {
            /* The transfer's own blocking requests (HeadBucket, Create,
             * Complete) must answer a cancel as its parts do. */
            if (s3x_xfer_cancelled(x)) {
                s3x_http_abort(x->client, r);
                return s3x_seterr(S3X_ECANCELLED, "%s cancelled", r->op);
            }
            int n = s3x_http_poll(x->client, 200);
            if (n < 0) {
                s3x_http_abort(x->client, r);
                return n;
            }
        }
        r->on_done = NULL;
        double delay;
        int v = s3x_xfer_judge(x, r, attempt, 0, &delay);
        if (maybe_applied && r->curl_rc != CURLE_OK && r->curl_rc != CURLE_COULDNT_CONNECT &&
            r->curl_rc != CURLE_COULDNT_RESOLVE_HOST)
            *maybe_applied = 1;
        if (v == S3X_REQ_OK) return s3x_http_check(x->client, r);
        if (v == S3X_REQ_FAIL) return s3x_error_last()->code;
        for (double left = delay; left > 0 && !s3x_xfer_cancelled(x); left -= 0.05) sleep_s(left < 0.05 ? left : 0.05);
        if (s3x_xfer_cancelled(x)) return s3x_seterr(S3X_ECANCELLED, "%s cancelled", r->op);
    }
}
