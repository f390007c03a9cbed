/* Request builders: every S3 request's method, target, query and headers. */
#include "requests.h"
#include "error.h"
#include "sigv4.h"
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

void s3x_req_new(s3x_http_req *r) {
    memset(r, 0, sizeof *r);
    r->content_length = -1;
    r->retry_after_s = -1;
}

int s3x_req_header(s3x_http_req *r, const char *name, const char *value) {
    if (!name || !value)
        return s3x_seterr(S3X_EINVAL, "%s: header %s has no %s", r->op ? r->op : "request", name ? name : "(null)",
                          name ? "value" : "name");
    /* A full array is a builder asking for more headers than the request
     * type allows: a bug to report, never a header silently dropped. */
    if (r->nheaders >= S3X_MAX_HEADERS)
        return s3x_seterr(S3X_EINTERNAL, "%s: cannot add header %s: the request already has %d headers (S3X_MAX_HEADERS)",
                          r->op ? r->op : "request", name, S3X_MAX_HEADERS);
    r->headers[r->nheaders++] = (s3x_kv){name, value};
    return 0;
}

int s3x_req_query(s3x_http_req *r, const char *name, const char *value) {
    if (!name || !value)
        return s3x_seterr(S3X_EINVAL, "%s: query parameter %s has no %s", r->op ? r->op : "request",
                          name ? name : "(null)", name ? "value" : "name");
    if (r->nquery >= S3X_MAX_QUERY)
        return s3x_seterr(S3X_EINTERNAL,
                          "%s: cannot add query parameter %s: the request already has %d (S3X_MAX_QUERY)",
                          r->op ? r->op : "request", name, S3X_MAX_QUERY);
    r->query[r->nquery++] = (s3x_kv){name, value};
    return 0;
}

int s3x_req_range(char *buf, size_t cap, int64_t first, int64_t last) {
    if (first < 0 || (last >= 0 && last < first))
        return s3x_seterr(S3X_EINVAL, "invalid byte range %" PRId64 "-%" PRId64, first, last);
    int n = last >= 0 ? snprintf(buf, cap, "bytes=%" PRId64 "-%" PRId64, first, last)
                      : snprintf(buf, cap, "bytes=%" PRId64 "-", first);
    if (n < 0 || (size_t)n >= cap) return s3x_seterr(S3X_EINTERNAL, "range buffer of %zu bytes is too small", cap);
    return 0;
}

/* The request line: what every builder sets first. The body, the sink and
 * the engine fields are the caller's. */
static void target(s3x_http_req *r, const char *op, const char *method, const char *bucket, const char *key) {
    r->op = op;
    r->method = method;
    r->bucket = bucket;
    r->key = key;
    r->nquery = 0;
    r->nheaders = 0;
}

static int opt_query(s3x_http_req *r, const char *name, const char *value) {
    return value && *value ? s3x_req_query(r, name, value) : 0;
}

static int opt_header(s3x_http_req *r, const char *name, const char *value) {
    return value && *value ? s3x_req_header(r, name, value) : 0;
}

static int checksum_headers(s3x_http_req *r, const s3x_req_checksum *ck) {
    if (!ck) return 0;
    int rc = 0;
    if (ck->header) rc = s3x_req_header(r, ck->header, ck->value);
    if (!rc) rc = opt_header(r, "x-amz-sdk-checksum-algorithm", ck->algorithm);
    return rc;
}

static int num(char *buf, size_t cap, const char *what, int64_t v) {
    int n = snprintf(buf, cap, "%" PRId64, v);
    if (n < 0 || (size_t)n >= cap) return s3x_seterr(S3X_EINTERNAL, "%s %" PRId64 " does not fit its buffer", what, v);
    return 0;
}

/* ---- buckets ------------------------------------------------------------- */

int s3x_req_create_bucket(s3x_http_req *r, const char *bucket) {
    target(r, "CreateBucket", "PUT", bucket, NULL);
    return 0;
}

int s3x_req_delete_bucket(s3x_http_req *r, const char *bucket) {
    target(r, "DeleteBucket", "DELETE", bucket, NULL);
    return 0;
}

int s3x_req_head_bucket(s3x_http_req *r, const char *bucket) {
    target(r, "HeadBucket", "HEAD", bucket, NULL);
    return 0;
}

int s3x_req_list_objects(s3x_http_req *r, const char *bucket, const char *prefix, const char *delimiter,
                         const char *token, int max_keys, s3x_req_num mk) {
    target(r, "ListObjectsV2", "GET", bucket, NULL);
    int rc = s3x_req_query(r, "list-type", "2");
    if (!rc) rc = opt_query(r, "prefix", prefix);
    if (!rc) rc = opt_query(r, "delimiter", delimiter);
    if (!rc) rc = opt_query(r, "continuation-token", token);
    if (!rc && max_keys > 0) {
        rc = num(mk, sizeof(s3x_req_num), "max-keys", max_keys);
        if (!rc) rc = s3x_req_query(r, "max-keys", mk);
    }
    return rc;
}

int s3x_req_list_uploads(s3x_http_req *r, const char *bucket, const char *prefix, const char *key_marker,
                         const char *id_marker) {
    target(r, "ListMultipartUploads", "GET", bucket, NULL);
    int rc = s3x_req_query(r, "uploads", "");
    if (!rc) rc = opt_query(r, "prefix", prefix);
    if (!rc) rc = opt_query(r, "key-marker", key_marker);
    if (!rc) rc = opt_query(r, "upload-id-marker", id_marker);
    return rc;
}

/* ---- objects ------------------------------------------------------------- */

int s3x_req_put_object(s3x_http_req *r, const char *bucket, const char *key, const char *content_type,
                       const s3x_req_checksum *ck) {
    target(r, "PutObject", "PUT", bucket, key);
    int rc = opt_header(r, "content-type", content_type);
    if (!rc) rc = checksum_headers(r, ck);
    return rc;
}

int s3x_req_get_object(s3x_http_req *r, const char *bucket, const char *key, const char *range,
                       const char *if_match, int checksum_mode) {
    target(r, "GetObject", "GET", bucket, key);
    int rc = checksum_mode ? s3x_req_header(r, "x-amz-checksum-mode", "ENABLED") : 0;
    if (!rc) rc = opt_header(r, "if-match", if_match);
    if (!rc) rc = opt_header(r, "range", range);
    return rc;
}

int s3x_req_head_object(s3x_http_req *r, const char *bucket, const char *key, const char *if_match,
                        int checksum_mode) {
    target(r, "HeadObject", "HEAD", bucket, key);
    int rc = checksum_mode ? s3x_req_header(r, "x-amz-checksum-mode", "ENABLED") : 0;
    if (!rc) rc = opt_header(r, "if-match", if_match);
    return rc;
}

int s3x_req_delete_object(s3x_http_req *r, const char *bucket, const char *key) {
    target(r, "DeleteObject", "DELETE", bucket, key);
    return 0;
}

/* ---- multipart ----------------------------------------------------------- */

int s3x_req_create_mpu(s3x_http_req *r, const char *bucket, const char *key, const char *content_type,
                       const char *checksum_algorithm) {
    target(r, "CreateMultipartUpload", "POST", bucket, key);
    int rc = s3x_req_query(r, "uploads", "");
    if (!rc) rc = opt_header(r, "content-type", content_type);
    if (!rc) rc = opt_header(r, "x-amz-checksum-algorithm", checksum_algorithm);
    return rc;
}

int s3x_req_upload_part(s3x_http_req *r, const char *bucket, const char *key, const char *upload_id,
                        int part_number, s3x_req_num pn, const s3x_req_checksum *ck) {
    target(r, "UploadPart", "PUT", bucket, key);
    if (part_number < 1 || part_number > 10000)
        return s3x_seterr(S3X_EINVAL, "part number %d is out of range [1, 10000]", part_number);
    int rc = num(pn, sizeof(s3x_req_num), "part number", part_number);
    if (!rc) rc = s3x_req_query(r, "partNumber", pn);
    if (!rc) rc = s3x_req_query(r, "uploadId", upload_id);
    if (!rc) rc = checksum_headers(r, ck);
    return rc;
}

int s3x_req_complete_mpu(s3x_http_req *r, const char *bucket, const char *key, const char *upload_id) {
    target(r, "CompleteMultipartUpload", "POST", bucket, key);
    int rc = s3x_req_query(r, "uploadId", upload_id);
    if (!rc) rc = s3x_req_header(r, "content-type", "application/xml");
    return rc;
}

int s3x_req_abort_mpu(s3x_http_req *r, const char *bucket, const char *key, const char *upload_id) {
    target(r, "AbortMultipartUpload", "DELETE", bucket, key);
    return s3x_req_query(r, "uploadId", upload_id);
}

int s3x_req_list_parts(s3x_http_req *r, const char *bucket, const char *key, const char *upload_id, int marker,
                       s3x_req_num mk) {
    target(r, "ListParts", "GET", bucket, key);
    int rc = s3x_req_query(r, "uploadId", upload_id);
    if (!rc && marker > 0) {
        rc = num(mk, sizeof(s3x_req_num), "part-number-marker", marker);
        if (!rc) rc = s3x_req_query(r, "part-number-marker", mk);
    }
    return rc;
}

/* ---- server-side copy and bulk delete -------------------------------------- */

int s3x_req_copy_source(const char *bucket, const char *key, char **out) {
    *out = NULL;
    if (!bucket || !*bucket || !key || !*key) return s3x_seterr(S3X_EINVAL, "copy source needs a bucket and a key");
    s3x_buf b = S3X_BUF_INIT;
    /* '/' stays as is, as botocore sends it; S3 decodes the rest. */
    if (s3x_buf_puts(&b, "/") || s3x_uri_encode(&b, bucket, strlen(bucket), 1) || s3x_buf_puts(&b, "/") ||
        s3x_uri_encode(&b, key, strlen(key), 0)) {
        s3x_buf_free(&b);
        return s3x_seterr(S3X_ENOMEM, "out of memory");
    }
    *out = s3x_buf_detach(&b);
    return *out ? 0 : s3x_seterr(S3X_ENOMEM, "out of memory");
}

int s3x_req_copy_object(s3x_http_req *r, const char *bucket, const char *key, const char *copy_source,
                        const char *directive, const char *content_type, const char *if_match,
                        const char *checksum_algorithm) {
    target(r, "CopyObject", "PUT", bucket, key);
    if (directive && strcmp(directive, "COPY") && strcmp(directive, "REPLACE"))
        return s3x_seterr(S3X_EINVAL, "metadata directive must be COPY or REPLACE, not %.32s", directive);
    int rc = s3x_req_header(r, "x-amz-copy-source", copy_source);
    if (!rc) rc = opt_header(r, "x-amz-metadata-directive", directive);
    /* With COPY the server keeps the source's type; a type sent then is ignored or refused. */
    if (!rc && directive && !strcmp(directive, "REPLACE")) rc = opt_header(r, "content-type", content_type);
    if (!rc) rc = opt_header(r, "x-amz-copy-source-if-match", if_match);
    if (!rc) rc = opt_header(r, "x-amz-checksum-algorithm", checksum_algorithm);
    return rc;
}

int s3x_req_upload_part_copy(s3x_http_req *r, const char *bucket, const char *key, const char *upload_id,
                             int part_number, s3x_req_num pn, const char *copy_source, const char *range,
                             const char *if_match) {
    target(r, "UploadPartCopy", "PUT", bucket, key);
    if (part_number < 1 || part_number > 10000)
        return s3x_seterr(S3X_EINVAL, "part number %d is out of range [1, 10000]", part_number);
    int rc = num(pn, sizeof(s3x_req_num), "part number", part_number);
    if (!rc) rc = s3x_req_query(r, "partNumber", pn);
    if (!rc) rc = s3x_req_query(r, "uploadId", upload_id);
    if (!rc) rc = s3x_req_header(r, "x-amz-copy-source", copy_source);
    if (!rc) rc = s3x_req_header(r, "x-amz-copy-source-range", range);
    if (!rc) rc = opt_header(r, "x-amz-copy-source-if-match", if_match);
    return rc;
}

int s3x_req_delete_objects(s3x_http_req *r, const char *bucket, const char *content_md5) {
    target(r, "DeleteObjects", "POST", bucket, NULL);
    int rc = s3x_req_query(r, "delete", "");
    if (!rc) rc = s3x_req_header(r, "content-md5", content_md5);
    if (!rc) rc = s3x_req_header(r, "content-type", "application/xml");
    return rc;
}

int s3x_req_create_mpu_meta(s3x_http_req *r, const char *bucket, const char *key, const char *content_type,
                            const char *checksum_algorithm, const char *const *names, const char *const *values,
                            size_t nmeta) {
    int rc = s3x_req_create_mpu(r, bucket, key, content_type, checksum_algorithm);
    for (size_t i = 0; !rc && i < nmeta; i++) rc = s3x_req_header(r, names[i], values[i]);
    return rc;
}
