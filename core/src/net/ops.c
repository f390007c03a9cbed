/* The single S3 operations of the public API. Each builds its request with
 * requests.h and runs it through the retry policy every request shares
 * (retrypolicy.h), with the client's MAX_ATTEMPTS, RETRY_TIMEOUT and
 * RETRY_MODE knobs. */
#include "client_internal.h"
#include "error.h"
#include "params_internal.h"
#include "checksum.h"
#include "range.h"
#include "requests.h"
#include "retrypolicy.h"
#include "s3xml.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *xstrdup0(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s);
    char *p = malloc(n + 1);
    if (p) memcpy(p, s, n + 1);
    return p;
}

static int need(const char *what, const void *p) {
    if (!p) return s3x_seterr(S3X_EINVAL, "%s must not be NULL", what);
    return 0;
}

static int check_bucket(const char *bucket) {
    if (!bucket || !*bucket) return s3x_seterr(S3X_EINVAL, "bucket name is empty");
    return s3x_client_bucket_addressing(NULL, bucket, NULL);
}

static int check_key(const char *key) {
    if (!key || !*key) return s3x_seterr(S3X_EINVAL, "object key is empty");
    return 0;
}

/* ---- running with retries ------------------------------------------------- */

typedef struct one_state {
    int done;
} one_state;

static void one_done(s3x_http_req *r, void *p) {
    (void)r;
    ((one_state *)p)->done = 1;
}

/* One attempt to its outcome (status, curl error) without judging it. A
 * non-zero return is a failure to run the request at all (settings,
 * signing, the multi handle), which no retry mends. */
static int attempt_once(s3x_client *c, s3x_http_req *r) {
    int rc = s3x_http_prepare(c, r);
    if (rc) return rc;
    one_state st = {0};
    r->on_done = one_done;
    r->done_payload = &st;
    rc = s3x_http_start(c, r);
    while (!rc && !st.done) {
        int n = s3x_http_poll(c, 1000);
        if (n < 0) rc = n;
    }
    r->on_done = NULL;
    r->done_payload = NULL;
    if (rc) s3x_http_abort(c, r);
    return rc;
}

/* A request whose body comes from a read callback, or whose response goes to
 * a write callback, can be sent again only while the callback has not been
 * used: bytes read from a stream cannot be read again, bytes handed to the
 * caller's sink cannot be taken back. Returns 1 when an attempt can be
 * replayed, else 0 with *why set. */
static int replayable(const s3x_http_req *r, const char **why) {
    if (r->read_fn && r->bytes_out > 0) {
        *why = "part of the body was already read from the stream";
        return 0;
    }
    if (r->write_fn && r->status >= 200 && r->status < 300 && r->bytes_in > 0) {
        *why = "part of the object was already written to the sink";
        return 0;
    }
    return 1;
}

/* Runs r with the client's retry policy: a throttling answer (503 SlowDown,
 * 429, 500, ...), another retryable status or a broken connection is tried
 * again after a jittered backoff (or Retry-After), up to MAX_ATTEMPTS, with
 * throttling retried for as long as the RETRY_TIMEOUT window allows; 403,
 * 404 and other answers that a retry cannot change fail at once. r is reset
 * (its description kept) between attempts; the caller resets it at the end.
 * *maybe_applied (may be NULL) is set to 1 when an attempt failed after the
 * request may have reached the server (the connection broke once it was
 * sent), for the operations where that matters. Returns 0 or the error of
 * the last attempt (thread error set). */
static int attempts(s3x_client *c, s3x_http_req *r, int *maybe_applied);

static int run_ex(s3x_client *c, s3x_http_req *r, int *maybe_applied) {
    int rc = attempts(c, r, maybe_applied);
    /* The operation's storm ends with it (and its saved error is freed). */
    s3x_retry_storm_end(&c->retry, NULL);
    return rc;
}

static int attempts(s3x_client *c, s3x_http_req *r, int *maybe_applied) {
    if (maybe_applied) *maybe_applied = 0;
    if (!c->retry_ready) {
        s3x_retry_state_init(&c->retry, (uintptr_t)c);
        c->retry_ready = 1;
    }
    /* Each operation has a throttling window of its own; the jitter and the
     * retry budget are the client's, so a failing server is not hammered by
     * one call after another. */
    s3x_retry_storm_end(&c->retry, NULL);
    s3x_retry_rules rules = {c->params[S3X_PARAM_MAX_ATTEMPTS], c->params[S3X_PARAM_RETRY_TIMEOUT],
                             c->params[S3X_PARAM_RETRY_MODE] == S3X_RETRY_MODE_ADAPTIVE};
    for (int attempt = 1;; attempt++) {
        if (attempt > 1) s3x_http_req_reset(c, r);
        int rc = attempt_once(c, r);
        if (rc) return rc;
        const char *why = NULL;
        int can_replay = replayable(r, &why);
        double delay = 0;
        /* A request that cannot be replayed is judged as if cancelled: its
         * own error, no retry. */
        int v = s3x_retry_judge(&c->retry, &rules, c, r, attempt, !can_replay, 0, NULL, &delay);
        if (maybe_applied && r->curl_rc != CURLE_OK && r->curl_rc != CURLE_COULDNT_CONNECT &&
            r->curl_rc != CURLE_COULDNT_RESOLVE_HOST)
            *maybe_applied = 1;
        if (v == S3X_REQ_OK) return s3x_http_check(c, r);
        if (v == S3X_REQ_FAIL) {
            const s3x_error *e = s3x_error_last();
            if (!can_replay && (s3x_http_retryable(r) || s3x_http_throttled(r)))
                return s3x_seterr_http(e->code, e->http_status, e->s3_code, e->request_id, "%s (not retried: %s)",
                                       e->message, why);
            return e->code;
        }
        s3x_sleep_s(delay);
    }
}

static int run(s3x_client *c, s3x_http_req *r) { return run_ex(c, r, NULL); }

/* The last error is the S3 error code named (after an attempt that may have
 * been applied, a replay that finds its work done says so this way). */
static int last_error_is(int rc, long status, const char *s3_code) {
    const s3x_error *e = s3x_error_last();
    return rc == S3X_EHTTP && e->http_status == status && e->s3_code && !strcmp(e->s3_code, s3_code);
}

static void fill_info(const s3x_http_req *r, s3x_object_info *info, int64_t size) {
    s3x_object_info_clear(info);
    info->size = size;
    info->etag = xstrdup0(r->etag);
    info->last_modified = xstrdup0(r->last_modified);
    info->content_type = xstrdup0(r->content_type);
    info->version_id = xstrdup0(r->version_id);
}

int s3x_create_bucket(s3x_client *c, const char *bucket) {
    int rc;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket))) return rc;
    if ((rc = s3x_client_ensure(c))) return rc;
    s3x_http_req r;
    s3x_req_new(&r);
    if ((rc = s3x_req_create_bucket(&r, bucket))) return rc;
    char *body = NULL;
    size_t blen = 0;
    if ((rc = s3x_xml_build_create_bucket(c->region, &body, &blen))) return rc;
    r.body = body;
    r.body_len = blen;
    int maybe_applied = 0;
    rc = run_ex(c, &r, &maybe_applied);
    /* An earlier attempt that reached the server made the bucket: ours. */
    if (maybe_applied && last_error_is(rc, 409, "BucketAlreadyOwnedByYou")) rc = 0;
    s3x_http_req_reset(c, &r);
    free(body);
    return rc;
}

/* Runs a request that a builder has described; no body, no result. */
static int simple(s3x_client *c, s3x_http_req *r, int built, int *maybe_applied) {
    int rc = built ? built : run_ex(c, r, maybe_applied);
    s3x_http_req_reset(c, r);
    return rc;
}

int s3x_delete_bucket(s3x_client *c, const char *bucket) {
    int rc;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket))) return rc;
    s3x_http_req r;
    s3x_req_new(&r);
    int maybe_applied = 0;
    rc = simple(c, &r, s3x_req_delete_bucket(&r, bucket), &maybe_applied);
    /* An earlier attempt that reached the server deleted it. */
    if (maybe_applied && last_error_is(rc, 404, "NoSuchBucket")) rc = 0;
    return rc;
}

int s3x_head_bucket(s3x_client *c, const char *bucket) {
    int rc;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket))) return rc;
    s3x_http_req r;
    s3x_req_new(&r);
    return simple(c, &r, s3x_req_head_bucket(&r, bucket), NULL);
}

int s3x_head_object(s3x_client *c, const char *bucket, const char *key, s3x_object_info *out) {
    int rc;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket)) || (rc = check_key(key))) return rc;
    s3x_http_req r;
    s3x_req_new(&r);
    if ((rc = s3x_req_head_object(&r, bucket, key, NULL, 0))) return rc;
    rc = run(c, &r);
    if (!rc && out) fill_info(&r, out, r.content_length);
    s3x_http_req_reset(c, &r);
    return rc;
}

static int finish_etag(s3x_http_req *r, char **etag_out) {
    if (!etag_out) return 0;
    *etag_out = xstrdup0(r->etag ? r->etag : "");
    return *etag_out ? 0 : s3x_seterr(S3X_ENOMEM, "out of memory");
}

int s3x_put_object(s3x_client *c, const char *bucket, const char *key, const void *data, size_t len,
                   const char *content_type, char **etag_out) {
    int rc;
    if (etag_out) *etag_out = NULL;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket)) || (rc = check_key(key))) return rc;
    if (len && !data) return s3x_seterr(S3X_EINVAL, "data is NULL but len is %zu", len);
    s3x_http_req r;
    s3x_req_new(&r);
    if ((rc = s3x_req_put_object(&r, bucket, key, content_type, NULL))) return rc;
    r.body = data ? data : "";
    r.body_len = len;
    rc = run(c, &r);
    if (!rc) rc = finish_etag(&r, etag_out);
    s3x_http_req_reset(c, &r);
    return rc;
}

int s3x_put_object_stream(s3x_client *c, const char *bucket, const char *key, int64_t size,
                          s3x_read_fn read_fn, char **etag_out, void *payload) {
    int rc;
    if (etag_out) *etag_out = NULL;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket)) || (rc = check_key(key)) ||
        (rc = read_fn ? 0 : s3x_seterr(S3X_EINVAL, "read_fn must not be NULL")))
        return rc;
    if (size < 0) return s3x_seterr(S3X_EINVAL, "size must be >= 0");
    s3x_http_req r;
    s3x_req_new(&r);
    if ((rc = s3x_req_put_object(&r, bucket, key, NULL, NULL))) return rc;
    r.read_fn = read_fn;
    r.read_payload = payload;
    r.body_size = size;
    rc = run(c, &r);
    if (!rc) rc = finish_etag(&r, etag_out);
    s3x_http_req_reset(c, &r);
    return rc;
}

/* The GetObject of a single operation: the Range header when a range is
 * asked for (start and end both < 0: the whole object). */
static int build_get(s3x_http_req *r, const char *bucket, const char *key, char *range, size_t cap, int64_t start,
                     int64_t end) {
    range[0] = 0;
    if (start >= 0 || end >= 0) {
        int rc = s3x_req_range(range, cap, start, end);
        if (rc) return rc;
    }
    return s3x_req_get_object(r, bucket, key, range[0] ? range : NULL, NULL, 0);
}

static int64_t object_size_of(const s3x_http_req *r) {
    int64_t t = s3x_content_range_total(r->content_range);
    return t >= 0 ? t : r->content_length;
}

/* A ranged GET must be answered with the bytes asked for: a 206 whose
 * Content-Range starts at range_start and ends at range_end (or the object's
 * last byte), with a Content-Length to match. A 200 means the server ignored
 * the Range header; its body is not what the caller asked for. */
static int check_range_answer(const s3x_http_req *r, const char *asked, int64_t start, int64_t end) {
    if (start < 0 && end < 0) return 0;
    s3x_crange cr;
    if (r->status != 206)
        return s3x_seterr(S3X_ENETWORK, "%s s3://%s/%s: asked for %s, got HTTP %ld without a range "
                          "(the server ignored the Range header)", r->op, r->bucket, r->key, asked, r->status);
    if (!r->content_range || s3x_crange_parse(r->content_range, strlen(r->content_range), &cr) || cr.first < 0)
        return s3x_seterr(S3X_ENETWORK, "%s s3://%s/%s: a 206 with a missing or malformed Content-Range", r->op,
                          r->bucket, r->key);
    int64_t want_last = end;
    if (cr.total >= 0 && (end < 0 || end >= cr.total)) want_last = cr.total - 1;
    if (cr.first != start || (want_last >= 0 && cr.last != want_last) ||
        (r->content_length >= 0 && r->content_length != cr.last - cr.first + 1))
        return s3x_seterr(S3X_ENETWORK, "%s s3://%s/%s: asked for %s, the server sent bytes %lld-%lld "
                          "(Content-Length %lld)", r->op, r->bucket, r->key, asked, (long long)cr.first,
                          (long long)cr.last, (long long)r->content_length);
    return 0;
}

static int check_complete_body(s3x_http_req *r) {
    /* A body shorter than Content-Length is a broken transfer, never success. */
    if (r->content_length >= 0 && r->bytes_in != r->content_length)
        return s3x_seterr(S3X_ENETWORK, "%s s3://%s/%s: body ended after %lld of %lld bytes", r->op,
                          r->bucket, r->key, (long long)r->bytes_in, (long long)r->content_length);
    return 0;
}

int s3x_get_object(s3x_client *c, const char *bucket, const char *key, int64_t range_start,
                   int64_t range_end, void **data, size_t *len, s3x_object_info *info) {
    int rc;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket)) || (rc = check_key(key)) ||
        (rc = need("data", data)) || (rc = need("len", len)))
        return rc;
    *data = NULL;
    *len = 0;
    s3x_http_req r;
    char range[64];
    s3x_req_new(&r);
    if ((rc = build_get(&r, bucket, key, range, sizeof range, range_start, range_end))) return rc;
    r.resp_cap = S3X_GET_OBJECT_MAX_BYTES;
    rc = run(c, &r);
    if (!rc) rc = check_complete_body(&r);
    if (!rc) rc = check_range_answer(&r, range, range_start, range_end);
    if (!rc) {
        if (info) fill_info(&r, info, object_size_of(&r));
        size_t n = r.resp_body.len;
        *data = s3x_buf_detach(&r.resp_body);
        if (!*data) rc = s3x_seterr(S3X_ENOMEM, "out of memory");
        else *len = n;
    }
    s3x_http_req_reset(c, &r);
    return rc;
}

int s3x_get_object_stream(s3x_client *c, const char *bucket, const char *key, int64_t range_start,
                          int64_t range_end, s3x_write_fn write_fn, s3x_object_info *info, void *payload) {
    int rc;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket)) || (rc = check_key(key)) ||
        (rc = write_fn ? 0 : s3x_seterr(S3X_EINVAL, "write_fn must not be NULL")))
        return rc;
    s3x_http_req r;
    char range[64];
    s3x_req_new(&r);
    if ((rc = build_get(&r, bucket, key, range, sizeof range, range_start, range_end))) return rc;
    r.write_fn = write_fn;
    r.write_payload = payload;
    rc = run(c, &r);
    if (!rc) rc = check_complete_body(&r);
    if (!rc) rc = check_range_answer(&r, range, range_start, range_end);
    if (!rc && info) fill_info(&r, info, object_size_of(&r));
    s3x_http_req_reset(c, &r);
    return rc;
}

int s3x_delete_object(s3x_client *c, const char *bucket, const char *key) {
    int rc;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket)) || (rc = check_key(key))) return rc;
    /* Replayed freely: deleting a key that is gone already answers 204. */
    s3x_http_req r;
    s3x_req_new(&r);
    return simple(c, &r, s3x_req_delete_object(&r, bucket, key), NULL);
}

/* ---- listing -------------------------------------------------------------- */

void s3x_list_free(s3x_list *l) {
    if (!l) return;
    for (size_t i = 0; i < l->count; i++) {
        free(l->entries[i].key);
        free(l->entries[i].etag);
        free(l->entries[i].last_modified);
    }
    free(l->entries);
    for (size_t i = 0; i < l->nprefixes; i++) free(l->prefixes[i]);
    free(l->prefixes);
    free(l->next_token);
    free(l);
}

int s3x_list_objects(s3x_client *c, const char *bucket, const char *prefix, const char *delimiter,
                     const char *token, int max_keys, s3x_list **out) {
    int rc;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket)) || (rc = need("out", out))) return rc;
    *out = NULL;
    if (max_keys < 0) return s3x_seterr(S3X_EINVAL, "max_keys must be >= 0");
    s3x_http_req r;
    s3x_req_num mk;
    s3x_req_new(&r);
    if ((rc = s3x_req_list_objects(&r, bucket, prefix, delimiter, token, max_keys, mk))) return rc;
    rc = run(c, &r);
    s3x_xml_list_objects lo;
    memset(&lo, 0, sizeof lo);
    if (!rc) rc = s3x_xml_parse_list_objects(r.resp_body.data, r.resp_body.len, &lo);
    s3x_list *l = NULL;
    if (!rc) {
        l = calloc(1, sizeof *l);
        if (l && lo.nobjects) l->entries = calloc(lo.nobjects, sizeof *l->entries);
        if (l && lo.nprefixes) l->prefixes = calloc(lo.nprefixes, sizeof *l->prefixes);
        if (!l || (lo.nobjects && !l->entries) || (lo.nprefixes && !l->prefixes)) {
            rc = s3x_seterr(S3X_ENOMEM, "out of memory");
        } else {
            /* Move strings out of the parse result. */
            for (size_t i = 0; i < lo.nobjects; i++) {
                l->entries[i].key = lo.objects[i].key;
                l->entries[i].etag = lo.objects[i].etag;
                l->entries[i].last_modified = lo.objects[i].last_modified;
                l->entries[i].size = lo.objects[i].size;
                lo.objects[i].key = lo.objects[i].etag = lo.objects[i].last_modified = NULL;
            }
            l->count = lo.nobjects;
            for (size_t i = 0; i < lo.nprefixes; i++) {
                l->prefixes[i] = lo.common_prefixes[i];
                lo.common_prefixes[i] = NULL;
            }
            l->nprefixes = lo.nprefixes;
            l->is_truncated = lo.is_truncated;
            l->next_token = lo.next_continuation_token;
            lo.next_continuation_token = NULL;
        }
    }
    s3x_xml_list_objects_free(&lo);
    s3x_http_req_reset(c, &r);
    if (rc) s3x_list_free(l);
    else *out = l;
    return rc;
}

/* ---- multipart -------------------------------------------------------------- */

int s3x_create_multipart_upload(s3x_client *c, const char *bucket, const char *key,
                                const char *content_type, char **upload_id) {
    int rc;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket)) || (rc = check_key(key)) ||
        (rc = need("upload_id", upload_id)))
        return rc;
    *upload_id = NULL;
    s3x_http_req r;
    s3x_req_new(&r);
    if ((rc = s3x_req_create_mpu(&r, bucket, key, content_type, NULL))) return rc;
    /* Replayed even after a broken connection: an upload the lost answer
     * created is left behind either way (its id never reached us), and a
     * replay at least gives the caller one to use. */
    rc = run(c, &r);
    if (!rc) rc = s3x_xml_parse_initiate(r.resp_body.data, r.resp_body.len, upload_id);
    s3x_http_req_reset(c, &r);
    return rc;
}

int s3x_upload_part(s3x_client *c, const char *bucket, const char *key, const char *upload_id,
                    int part_number, const void *data, size_t len, char **etag_out) {
    int rc;
    if (etag_out) *etag_out = NULL;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket)) || (rc = check_key(key)) ||
        (rc = need("upload_id", upload_id)))
        return rc;
    if (len && !data) return s3x_seterr(S3X_EINVAL, "data is NULL but len is %zu", len);
    s3x_http_req r;
    s3x_req_num pn;
    s3x_req_new(&r);
    if ((rc = s3x_req_upload_part(&r, bucket, key, upload_id, part_number, pn, NULL))) return rc;
    r.body = data ? data : "";
    r.body_len = len;
    rc = run(c, &r);
    if (!rc) rc = finish_etag(&r, etag_out);
    s3x_http_req_reset(c, &r);
    return rc;
}

int s3x_complete_multipart_upload(s3x_client *c, const char *bucket, const char *key,
                                  const char *upload_id, const s3x_part_ref *parts, size_t nparts,
                                  char **etag_out) {
    int rc;
    if (etag_out) *etag_out = NULL;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket)) || (rc = check_key(key)) ||
        (rc = need("upload_id", upload_id)) || (rc = need("parts", parts)))
        return rc;
    if (nparts == 0 || nparts > 10000)
        return s3x_seterr(S3X_EINVAL, "a multipart upload needs 1..10000 parts, got %zu", nparts);
    s3x_complete_part *cp = calloc(nparts, sizeof *cp);
    if (!cp) return s3x_seterr(S3X_ENOMEM, "out of memory");
    for (size_t i = 0; i < nparts; i++) {
        cp[i].part_number = parts[i].part_number;
        cp[i].etag = parts[i].etag;
    }
    char *body = NULL;
    size_t blen = 0;
    rc = s3x_xml_build_complete(cp, nparts, NULL, &body, &blen);
    free(cp);
    if (rc) return rc;
    s3x_http_req r;
    s3x_req_new(&r);
    if ((rc = s3x_req_complete_mpu(&r, bucket, key, upload_id))) {
        free(body);
        return rc;
    }
    r.body = body;
    r.body_len = blen;
    int maybe_applied = 0;
    rc = run_ex(c, &r, &maybe_applied);
    if (maybe_applied && last_error_is(rc, 404, "NoSuchUpload")) {
        /* The connection broke after an earlier attempt was sent, and the
         * upload is gone now: that attempt most likely completed it. */
        rc = s3x_seterr_http(S3X_EHTTP, 404, "NoSuchUpload", s3x_error_last()->request_id,
                             "CompleteMultipartUpload s3://%s/%s: upload %s no longer exists after the connection "
                             "broke on an earlier attempt, which may have completed it: check the object",
                             bucket, key, upload_id);
    }
    if (!rc) rc = s3x_http_check_complete_body(&r);
    if (!rc && etag_out) {
        s3x_xml_complete cr;
        memset(&cr, 0, sizeof cr);
        rc = s3x_xml_parse_complete(r.resp_body.data, r.resp_body.len, &cr);
        if (!rc) {
            *etag_out = cr.etag ? cr.etag : xstrdup0("");
            cr.etag = NULL;
        }
        s3x_xml_complete_free(&cr);
    }
    s3x_http_req_reset(c, &r);
    free(body);
    return rc;
}

int s3x_abort_multipart_upload(s3x_client *c, const char *bucket, const char *key, const char *upload_id) {
    int rc;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket)) || (rc = check_key(key)) ||
        (rc = need("upload_id", upload_id)))
        return rc;
    s3x_http_req r;
    s3x_req_new(&r);
    int maybe_applied = 0;
    rc = simple(c, &r, s3x_req_abort_mpu(&r, bucket, key, upload_id), &maybe_applied);
    /* An earlier attempt that reached the server aborted it. */
    if (maybe_applied && last_error_is(rc, 404, "NoSuchUpload")) rc = 0;
    return rc;
}

void s3x_part_list_free(s3x_part_list *l) {
    if (!l) return;
    for (size_t i = 0; i < l->count; i++) free(l->parts[i].etag);
    free(l->parts);
    free(l);
}

int s3x_list_parts(s3x_client *c, const char *bucket, const char *key, const char *upload_id,
                   s3x_part_list **out) {
    int rc;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket)) || (rc = check_key(key)) ||
        (rc = need("upload_id", upload_id)) || (rc = need("out", out)))
        return rc;
    *out = NULL;
    s3x_part_list *l = calloc(1, sizeof *l);
    if (!l) return s3x_seterr(S3X_ENOMEM, "out of memory");
    size_t cap = 0;
    int marker = 0;
    for (;;) {
        s3x_http_req r;
        s3x_req_num mk;
        s3x_req_new(&r);
        rc = s3x_req_list_parts(&r, bucket, key, upload_id, marker, mk);
        if (!rc) rc = run(c, &r);
        s3x_xml_list_parts lp;
        memset(&lp, 0, sizeof lp);
        if (!rc) rc = s3x_xml_parse_list_parts(r.resp_body.data, r.resp_body.len, &lp);
        s3x_http_req_reset(c, &r);
        if (!rc && l->count + lp.nparts > cap) {
            size_t ncap = (l->count + lp.nparts) * 2;
            s3x_part_info *p = realloc(l->parts, ncap * sizeof *p);
            if (!p) rc = s3x_seterr(S3X_ENOMEM, "out of memory");
            else {
                l->parts = p;
                cap = ncap;
            }
        }
        if (!rc) {
            for (size_t i = 0; i < lp.nparts; i++) {
                s3x_part_info *pi = &l->parts[l->count++];
                pi->part_number = lp.parts[i].part_number;
                pi->size = lp.parts[i].size;
                pi->etag = lp.parts[i].etag;
                lp.parts[i].etag = NULL;
            }
        }
        int more = !rc && lp.is_truncated && lp.next_part_number_marker > marker;
        marker = lp.next_part_number_marker;
        s3x_xml_list_parts_free(&lp);
        if (rc || !more) break;
    }
    if (rc) s3x_part_list_free(l);
    else *out = l;
    return rc;
}

void s3x_upload_list_free(s3x_upload_list *l) {
    if (!l) return;
    for (size_t i = 0; i < l->count; i++) {
        free(l->uploads[i].key);
        free(l->uploads[i].upload_id);
        free(l->uploads[i].initiated);
    }
    free(l->uploads);
    free(l);
}

int s3x_list_multipart_uploads(s3x_client *c, const char *bucket, const char *prefix, s3x_upload_list **out) {
    int rc;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket)) || (rc = need("out", out))) return rc;
    *out = NULL;
    s3x_upload_list *l = calloc(1, sizeof *l);
    if (!l) return s3x_seterr(S3X_ENOMEM, "out of memory");
    size_t cap = 0;
    char *key_marker = NULL, *id_marker = NULL;
    for (int page = 0; page < 100000; page++) {
        s3x_http_req r;
        s3x_req_new(&r);
        rc = s3x_req_list_uploads(&r, bucket, prefix, key_marker, id_marker);
        if (!rc) rc = run(c, &r);
        s3x_xml_list_uploads lu;
        memset(&lu, 0, sizeof lu);
        if (!rc) rc = s3x_xml_parse_list_uploads(r.resp_body.data, r.resp_body.len, &lu);
        s3x_http_req_reset(c, &r);
        if (!rc && l->count + lu.nuploads > cap) {
            size_t ncap = (l->count + lu.nuploads) * 2;
            s3x_upload_entry *p = realloc(l->uploads, ncap * sizeof *p);
            if (!p) rc = s3x_seterr(S3X_ENOMEM, "out of memory");
            else {
                l->uploads = p;
                cap = ncap;
            }
        }
        if (!rc) {
            for (size_t i = 0; i < lu.nuploads; i++) {
                s3x_upload_entry *u = &l->uploads[l->count++];
                u->key = lu.uploads[i].key;
                u->upload_id = lu.uploads[i].upload_id;
                u->initiated = lu.uploads[i].initiated;
                lu.uploads[i].key = lu.uploads[i].upload_id = lu.uploads[i].initiated = NULL;
            }
        }
        int more = !rc && lu.is_truncated && lu.next_key_marker;
        free(key_marker);
        free(id_marker);
        key_marker = lu.next_key_marker;
        id_marker = lu.next_upload_id_marker;
        lu.next_key_marker = lu.next_upload_id_marker = NULL;
        s3x_xml_list_uploads_free(&lu);
        if (rc || !more) break;
    }
    free(key_marker);
    free(id_marker);
    if (rc) s3x_upload_list_free(l);
    else *out = l;
    return rc;
}

/* ---- server-side copy ------------------------------------------------------- */

int s3x_copy_object(s3x_client *c, const char *src_bucket, const char *src_key, const char *dst_bucket,
                    const char *dst_key, const s3x_copy_opts *opts, char **etag_out) {
    int rc;
    if (etag_out) *etag_out = NULL;
    if ((rc = need("client", c)) || (rc = check_bucket(src_bucket)) || (rc = check_key(src_key)) ||
        (rc = check_bucket(dst_bucket)) || (rc = check_key(dst_key)))
        return rc;
    s3x_copy_opts none = {0};
    if (!opts) opts = &none;
    if (opts->metadata_directive != S3X_METADATA_COPY && opts->metadata_directive != S3X_METADATA_REPLACE)
        return s3x_seterr(S3X_EINVAL, "metadata_directive %d is neither S3X_METADATA_COPY nor S3X_METADATA_REPLACE",
                          opts->metadata_directive);
    char *source = NULL;
    if ((rc = s3x_req_copy_source(src_bucket, src_key, &source))) return rc;
    s3x_http_req r;
    s3x_req_new(&r);
    const char *directive = opts->metadata_directive == S3X_METADATA_REPLACE ? "REPLACE" : "COPY";
    rc = s3x_req_copy_object(&r, dst_bucket, dst_key, source, directive, opts->content_type, opts->if_match, NULL);
    /* Replayed freely: copying the same source again gives the same object. */
    if (!rc) rc = run(c, &r);
    if (!rc) rc = s3x_http_check_complete_body(&r);
    if (!rc) {
        s3x_xml_copy cr;
        memset(&cr, 0, sizeof cr);
        rc = s3x_xml_parse_copy(r.resp_body.data, r.resp_body.len, "CopyObjectResult", &cr);
        if (!rc && etag_out) {
            *etag_out = cr.etag;
            cr.etag = NULL;
        }
        s3x_xml_copy_free(&cr);
    }
    s3x_http_req_reset(c, &r);
    free(source);
    return rc;
}

/* ---- bulk delete ------------------------------------------------------------ */

void s3x_delete_result_free(s3x_delete_result *d) {
    if (!d) return;
    for (size_t i = 0; i < d->count; i++) {
        free(d->entries[i].key);
        free(d->entries[i].code);
        free(d->entries[i].message);
    }
    free(d->entries);
    free(d);
}

typedef struct key_ix {
    const char *key;
    size_t i;
} key_ix;

static int key_ix_cmp(const void *a, const void *b) {
    return strcmp(((const key_ix *)a)->key, ((const key_ix *)b)->key);
}

/* Puts the answer's entries in the order of the keys asked for; a key the
 * answer leaves out is a failure ("NotReported"), never a silent success. */
static int order_deleted(const char *const *keys, size_t n, s3x_xml_delete_result *dr, s3x_delete_result *d) {
    key_ix *ix = malloc(n * sizeof *ix);
    if (!ix) return s3x_seterr(S3X_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) ix[i] = (key_ix){keys[i], i};
    qsort(ix, n, sizeof *ix, key_ix_cmp);
    for (size_t j = 0; j < dr->n; j++) {
        key_ix probe = {dr->entries[j].key, 0};
        key_ix *hit = bsearch(&probe, ix, n, sizeof *ix, key_ix_cmp);
        if (!hit) continue; /* a key we did not ask about says nothing of ours */
        /* The same key named twice: the first entry still free takes it. */
        while (hit > ix && !strcmp(hit[-1].key, probe.key)) hit--;
        while (hit < ix + n && !strcmp(hit->key, probe.key) && d->entries[hit->i].key) hit++;
        if (hit == ix + n || strcmp(hit->key, probe.key)) continue;
        s3x_delete_entry *e = &d->entries[hit->i];
        s3x_xml_deleted *x = &dr->entries[j];
        e->key = x->key;
        e->ok = x->ok;
        e->code = x->code;
        e->message = x->message;
        x->key = x->code = x->message = NULL;
    }
    free(ix);
    for (size_t i = 0; i < n; i++) {
        s3x_delete_entry *e = &d->entries[i];
        if (!e->key) {
            e->key = xstrdup0(keys[i]);
            e->ok = 0;
            e->code = xstrdup0("NotReported");
            e->message = xstrdup0("the DeleteObjects answer does not mention this key");
            if (!e->key || !e->code || !e->message) return s3x_seterr(S3X_ENOMEM, "out of memory");
        }
        if (!e->ok) d->failed++;
    }
    return 0;
}

int s3x_delete_body(const char *const *keys, size_t n, char **body, size_t *blen, char md5[48]) {
    int rc = s3x_xml_build_delete(keys, n, 0, body, blen);
    if (rc) return rc;
    /* S3 refuses DeleteObjects without an integrity header. */
    s3x_hasher h;
    if (s3x_hasher_init(&h, S3X_CHECKSUM_MD5)) {
        free(*body);
        *body = NULL;
        return s3x_seterr(S3X_ENOMEM, "MD5 init failed");
    }
    s3x_hasher_update(&h, *body, *blen);
    s3x_hasher_final_b64(&h, md5);
    return 0;
}

int s3x_delete_outcome(const char *const *keys, size_t n, const char *xml, size_t len, s3x_delete_result **out) {
    s3x_xml_delete_result dr;
    memset(&dr, 0, sizeof dr);
    int rc = s3x_xml_parse_delete_result(xml, len, &dr);
    s3x_delete_result *d = NULL;
    if (!rc) {
        d = calloc(1, sizeof *d);
        if (d) d->entries = calloc(n, sizeof *d->entries);
        if (!d || !d->entries) rc = s3x_seterr(S3X_ENOMEM, "out of memory");
        else {
            d->count = n;
            rc = order_deleted(keys, n, &dr, d);
        }
    }
    s3x_xml_delete_result_free(&dr);
    if (rc) s3x_delete_result_free(d);
    else *out = d;
    return rc;
}

int s3x_delete_objects(s3x_client *c, const char *bucket, const char *const *keys, size_t n,
                       s3x_delete_result **out) {
    int rc;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket)) || (rc = need("keys", keys)) ||
        (rc = need("out", out)))
        return rc;
    *out = NULL;
    if (n == 0 || n > S3X_DELETE_MAX_KEYS)
        return s3x_seterr(S3X_EINVAL, "DeleteObjects takes 1..%d keys, got %zu", S3X_DELETE_MAX_KEYS, n);
    char *body = NULL;
    size_t blen = 0;
    char md5[48];
    if ((rc = s3x_delete_body(keys, n, &body, &blen, md5))) return rc;
    s3x_http_req r;
    s3x_req_new(&r);
    rc = s3x_req_delete_objects(&r, bucket, md5);
    r.body = body;
    r.body_len = blen;
    /* Replayed freely: deleting what is gone already reports it deleted. */
    if (!rc) rc = run(c, &r);
    if (!rc) rc = s3x_delete_outcome(keys, n, r.resp_body.data, r.resp_body.len, out);
    s3x_http_req_reset(c, &r);
    free(body);
    return rc;
}
