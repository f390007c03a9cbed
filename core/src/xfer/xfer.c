/* Shared manager machinery: knobs, runs, retry decisions. */
#include "xfer.h"
#include "error.h"
#include "params_internal.h"
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
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
    s3x_retry_state_clear(&x->retry);
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
    s3x_saved_error_free(&x->err);
    s3x_retry_state_init(&x->retry, (uintptr_t)x);
    s3x_fbt_init(&x->fbt, x->params[S3X_PARAM_SLOW_PART_TIMEOUT], x->params[S3X_PARAM_CONCURRENCY]);
    /* DYNAMIC's starting timeout: an upload part's answer follows its body. */
    s3x_fbt_start(&x->fbt, (x->scope & S3X_SCOPE_UPLOAD) ? x->params[S3X_PARAM_PART_SIZE] : 0);
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
    s3x_retry_storm_end(&x->retry, r);
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

int s3x_xfer_storm_expired(s3x_xfer *x, double now) {
    return s3x_retry_storm_expired(&x->retry, x->params[S3X_PARAM_RETRY_TIMEOUT], now);
}

int s3x_xfer_judge(s3x_xfer *x, s3x_http_req *r, int attempt, int first_byte_timeout, double *delay_s) {
    s3x_retry_rules rules = {x->params[S3X_PARAM_MAX_ATTEMPTS], x->params[S3X_PARAM_RETRY_TIMEOUT],
                             x->params[S3X_PARAM_RETRY_MODE] == S3X_RETRY_MODE_ADAPTIVE};
    /* The timeout that cut it is still in force (the scheduler re-learns
     * after judging); a cut must stay a cut even if it were not. */
    int64_t fbt_ms = 0;
    if (first_byte_timeout) {
        fbt_ms = s3x_fbt_current(&x->fbt);
        if (fbt_ms <= 0) fbt_ms = 1;
    }
    return s3x_retry_judge(&x->retry, &rules, x->client, r, attempt, s3x_xfer_cancelled(x), fbt_ms, x->res,
                           delay_s);
}

void s3x_xfer_learn(s3x_xfer *x, const s3x_http_req *r) {
    if (r->t_end <= 0 || r->t_start <= 0) return;
    double whole = (r->t_end - r->t_start) * 1000.0;
    double ttfb = (r->t_first_byte > 0 && r->t_sent > 0) ? (r->t_first_byte - r->t_sent) * 1000.0 : whole;
    if (ttfb < 0) ttfb = 0;
    s3x_fbt_on_success(&x->fbt, whole, ttfb);
    if (x->fbt.carry_key) s3x_fbt_carry_add(x->client->fbt_carry, x->fbt.carry_key, ttfb, s3x_fbt_last_cap(&x->fbt), r->t_end);
}

void s3x_xfer_learn_cut(s3x_xfer *x, int64_t used_ms) {
    s3x_fbt_on_timeout(&x->fbt, used_ms);
    if (x->fbt.carry_key && used_ms > 0) s3x_fbt_carry_cut(x->client->fbt_carry, x->fbt.carry_key, s3x_now());
}

void s3x_xfer_trace_attempt(const s3x_xfer *x, const s3x_http_req *r, int slot, int attempt, int cut,
                            int64_t given_ms, double judged_ms, int inflight) {
    const char *path = getenv("S3X_FBT_TRACE");
    if (!path || !*path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    const s3x_fbt *b = &x->fbt;
    fprintf(f,
            "{\"xfer\": %llu, \"slot\": %d, \"attempt\": %d, \"start\": %.6f, \"sent\": %.6f, "
            "\"first_byte\": %.6f, \"end\": %.6f, \"status\": %ld, \"cut\": %d, \"given_ms\": %lld, "
            "\"judged_ms\": %.1f, \"timeout_ms\": %lld, \"tail_ms\": %.1f, \"median_ms\": %.1f, "
            "\"spread_ms\": %.1f, \"rule\": \"%s\", \"inflight\": %d}\n",
            (unsigned long long)(uintptr_t)x, slot, attempt, r->t_start, r->t_sent, r->t_first_byte, r->t_end,
            r->status, cut, (long long)given_ms, judged_ms, (long long)s3x_fbt_current(b), b->tail_ms, b->median_ms,
            b->spread_ms, s3x_fbt_rule_name(b), inflight);
    fclose(f);
}

void s3x_xfer_carry_in(s3x_xfer *x, const s3x_http_req *r) {
    if (x->fbt.carry_tried) return;
    x->fbt.carry_tried = 1;
    if (x->fbt.mode != 2 || x->fbt.estimator != S3X_FBT_ROBUST || x->fbt.no_carry) return;
    s3x_client *c = x->client;
    /* Without the memory this transfer just learns on its own. */
    if (!c->fbt_carry && !(c->fbt_carry = calloc(1, sizeof *c->fbt_carry))) return;
    int64_t body = r->read_fn ? r->body_size : (int64_t)r->body_len;
    s3x_fbt_resume(&x->fbt, c->fbt_carry, s3x_fbt_carry_key(r->op, c->endpoint, r->bucket, body), s3x_now());
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
    if (!strcmp(r->op, "AbortMultipartUpload")) s3x_retry_storm_end(&x->retry, x->res);
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
        for (double left = delay; left > 0 && !s3x_xfer_cancelled(x); left -= 0.05) s3x_sleep_s(left < 0.05 ? left : 0.05);
        if (s3x_xfer_cancelled(x)) return s3x_seterr(S3X_ECANCELLED, "%s cancelled", r->op);
    }
}
