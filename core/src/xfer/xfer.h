/* Machinery shared by the upload and download managers (private): the
 * per-transfer state (knobs, pool, retry policy, counters, cancel flag) and
 * the steps every part request goes through. */
#ifndef S3X_XFER_H
#define S3X_XFER_H

#include <stdatomic.h>
#include "client_internal.h"
#include "error.h"
#include "pool.h"
#include "retry.h"
#include "s3xfer/transfer.h"

typedef struct s3x_xfer {
    s3x_client *client;
    int64_t params[S3X_PARAM__COUNT];
    unsigned scope;            /* S3X_SCOPE_UPLOAD or _DOWNLOAD */
    s3x_pool pool;             /* kept between transfers (CACHE keeps buffers) */
    int pool_ready;
    s3x_pool *bufs;            /* where part buffers come from: &pool, or a batch's shared pool */
    int batched;               /* one transfer of a batch: bufs is the batch's, bounded by its budget */
    s3x_progress_fn progress;
    void *progress_payload;
    atomic_int cancel;

    /* per run */
    s3x_retry_state retry;     /* jitter, retry budget, throttling storm (net/retrypolicy.h) */
    s3x_fbt fbt;
    s3x_result *res;
    double t0;
    int failed;                /* an error is saved in err */
    int64_t progress_last;     /* last value reported (reports never go back) */
    double progress_at;        /* when it was reported */
    s3x_saved_error err;
} s3x_xfer;

int s3x_xfer_init(s3x_xfer *x, s3x_client *c, unsigned scope);
void s3x_xfer_destroy(s3x_xfer *x);
int s3x_xfer_set(s3x_xfer *x, s3x_param p, int64_t v);
int s3x_xfer_get(const s3x_xfer *x, s3x_param p, int64_t *v);

/* Starts a run: clears the result, seeds jitter, resets policy and counters. */
void s3x_xfer_begin(s3x_xfer *x, s3x_result *res);
/* Ends a run: time and pool counters into the result. */
void s3x_xfer_end(s3x_xfer *x);

/* Records the thread's last error as the run's failure (first one wins). */
void s3x_xfer_fail(s3x_xfer *x);
/* Fails the run with a message (sets the thread error too). Returns code. */
int s3x_xfer_failf(s3x_xfer *x, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Progress report; returns non-zero (and marks cancel) when the callback asks
 * to stop. Values never go back (a retried part's bytes are not re-counted). */
int s3x_xfer_progress(s3x_xfer *x, int64_t done, int64_t total);
/* Heartbeat from the loop: reports done (completed plus in-flight bytes) if
 * the last report is older than S3X_PROGRESS_EVERY_S, so a callback also gets
 * the chance to cancel while parts are slow. */
#define S3X_PROGRESS_EVERY_S 0.25
void s3x_xfer_heartbeat(s3x_xfer *x, int64_t done, int64_t total);
int s3x_xfer_cancelled(s3x_xfer *x);

/* Classifies a finished request with the transfer's knobs and retry state
 * (s3x_retry_judge: OK, RETRY with *delay_s set, or FAIL with the thread
 * error set). first_byte_timeout: the request was cut by the slow-part timeout. */
int s3x_xfer_judge(s3x_xfer *x, s3x_http_req *r, int attempt, int first_byte_timeout, double *delay_s);

/* Blocking request with the run's retry policy (for CreateMultipartUpload,
 * CompleteMultipartUpload, AbortMultipartUpload and first GETs). r is reset
 * and re-prepared between attempts; the caller resets it at the end. */
int s3x_xfer_perform(s3x_xfer *x, s3x_http_req *r);
/* Same; *maybe_applied is set to 1 when an attempt failed in a way that may
 * have reached the server anyway (the connection broke after the request was
 * sent), so a non-idempotent request may have taken effect more than once. */
int s3x_xfer_perform_ex(s3x_xfer *x, s3x_http_req *r, int *maybe_applied);

/* The retry window ran out while the transfer waits to retry throttled
 * requests (the rate's gate can hold a retry past it): 1 with the error set
 * as a throttled answer past the window would set it, else 0. */
int s3x_xfer_storm_expired(s3x_xfer *x, double now);

/* First-byte timeout bookkeeping for a finished successful request (and
 * the client's carry, see below). */
void s3x_xfer_learn(s3x_xfer *x, const s3x_http_req *r);
/* An attempt was cut by the first-byte timeout after used_ms: the
 * timeout learns it, and the client's carry counts it among the recent
 * attempts of its kind. */
void s3x_xfer_learn_cut(s3x_xfer *x, int64_t used_ms);
/* S3X_FBT_TRACE=FILE in the environment (benchmarks only): one JSON line per
 * part attempt that ended (answered, failed or cut) is appended to FILE:
 * its times (monotonic seconds, 0: not reached), whether it was cut and
 * after how long (given_ms), DYNAMIC's floor for it (judged_ms: the learned
 * timeout when it was sent, or the broad hold's if higher, scheduler.c;
 * 0 before one was learned and in the other modes), and the
 * timeout's state when it ended (with the rule that set it,
 * s3x_fbt_rule_name). Call before the attempt is learned from. */
void s3x_xfer_trace_attempt(const s3x_xfer *x, const s3x_http_req *r, int slot, int attempt, int cut,
                            int64_t given_ms, double judged_ms, int inflight);
/* Before the run's first part request r (prepared) goes out: a DYNAMIC
 * timeout starts from what the client's earlier transfers of that kind
 * learned (s3x_fbt_resume, keyed by r's operation, endpoint, bucket and body
 * size). Later calls do nothing. On the thread driving the client. */
void s3x_xfer_carry_in(s3x_xfer *x, const s3x_http_req *r);

/* Sets per-request curl options the managers share (stall detection). */
void s3x_xfer_tune(s3x_xfer *x, s3x_http_req *r);

#endif
