/* The delete kind: one DeleteObjects request of up to 1,000 keys as a
 * transfer on the scheduler (see kinds.h), so a bulk delete or a sync's
 * deletes take a connection slot like any part, go several at once, retry
 * through the same judge and never block the loop. The keys' outcomes are
 * left in the caller's slot. */
#include "error.h"
#include "kinds.h"
#include "requests.h"
#include <stdlib.h>
#include <string.h>

typedef struct delrun {
    s3x_xfer *x;
    s3x_transfer t;
    char *bucket;
    const char *const *keys;  /* borrowed until close */
    size_t n;
    char *body;
    size_t blen;
    char md5[48];
    s3x_delete_result **out;
    int fed, done;
} delrun;

static int del_feed(s3x_transfer *t, s3x_part *p) {
    delrun *R = t->ctx;
    if (R->fed) return 0;
    R->fed = 1;
    p->state = S3X_PART_QUEUED;
    return 1;
}

static int del_prepare(s3x_transfer *t, s3x_part *p) {
    delrun *R = t->ctx;
    int rc = s3x_req_delete_objects(&p->req, R->bucket, R->md5);
    p->req.body = R->body;
    p->req.body_len = R->blen;
    return rc;
}

static int del_take(s3x_transfer *t, s3x_part *p) {
    delrun *R = t->ctx;
    s3x_http_req *r = &p->req;
    int rc = s3x_delete_outcome(R->keys, R->n, r->resp_body.data, r->resp_body.len, R->out);
    if (rc) return rc;
    R->done = 1;
    R->x->res->bytes = 0;
    R->x->res->parts = 1;
    return S3X_PART_FREE;
}

static int del_more(s3x_transfer *t) { return !((delrun *)t->ctx)->fed; }

static void del_moving(s3x_transfer *t, int64_t *done, int64_t *total) {
    delrun *R = t->ctx;
    *done = R->done ? (int64_t)R->n : 0;
    *total = (int64_t)R->n;
}

static void del_release(s3x_transfer *t, s3x_part *p) {
    (void)t;
    (void)p;
}

static void del_close(s3x_transfer *t, int rc) {
    delrun *R = t->ctx;
    (void)rc;
    s3x_sched_remove(t->sched, t);
    s3x_xfer_end(R->x);
    free(R->body);
    free(R->bucket);
    free(R);
}

static const s3x_kind delete_kind = {
    .name = "delete",
    .part_size = sizeof(s3x_part),
    .feed = del_feed,
    .prepare = del_prepare,
    .take = del_take,
    .more = del_more,
    .moving = del_moving,
    .release = del_release,
    .close = del_close,
};

int s3x_delete_open(s3x_sched *S, s3x_xfer *x, const char *bucket, const char *const *keys, size_t n,
                    s3x_delete_result **out, s3x_transfer **tout) {
    *tout = NULL;
    *out = NULL;
    if (n == 0 || n > S3X_DELETE_MAX_KEYS) {
        s3x_xfer_end(x);
        return s3x_seterr(S3X_EINVAL, "DeleteObjects takes 1..%d keys, got %zu", S3X_DELETE_MAX_KEYS, n);
    }
    delrun *R = calloc(1, sizeof *R);
    if (!R) {
        s3x_xfer_end(x);
        return s3x_seterr(S3X_ENOMEM, "out of memory");
    }
    int rc = (R->bucket = strdup(bucket)) ? 0 : s3x_seterr(S3X_ENOMEM, "out of memory");
    if (!rc) rc = s3x_delete_body(keys, n, &R->body, &R->blen, R->md5);
    if (rc) {
        free(R->body);
        free(R->bucket);
        free(R);
        s3x_xfer_end(x);
        return rc;
    }
    R->x = x;
    R->keys = keys;
    R->n = n;
    R->out = out;
    R->t.what = "delete in";
    R->t.bucket = R->bucket;
    R->t.key = keys[0];
    if ((rc = s3x_sched_add(S, &R->t, &delete_kind, R, x, 1, 0))) {
        free(R->body);
        free(R->bucket);
        free(R);
        s3x_xfer_end(x);
        return rc;
    }
    *tout = &R->t;
    return 0;
}
