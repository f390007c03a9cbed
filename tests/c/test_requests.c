/* Request builders (core/src/net/requests.c): the bounds-checked header and
 * query helpers, what each builder puts in a request, and the retry judge
 * every request goes through (core/src/net/retrypolicy.c) on made-up
 * outcomes. No network. */
#include "requests.h"
#include "retrypolicy.h"
#include "s3xfer/s3xfer.h"
#include "tap.h"
#include <stdio.h>
#include <string.h>

/* tap.h's CHECK_INTEQ evaluates `actual` twice; the calls checked here have
 * side effects (the judge counts and spends), so evaluate once. */
static int check_eq(long long actual, long long expected, const char *file, int line, const char *what) {
    return tap_check(actual == expected, file, line, "%s: expected %lld, got %lld", what, expected, actual);
}
#define CHECK_EQ(actual, expected, what) check_eq((long long)(actual), (long long)(expected), __FILE__, __LINE__, (what))

static int contains(const char *s, const char *sub) { return s && sub && strstr(s, sub) != NULL; }

static const char *header(const s3x_http_req *r, const char *name) {
    for (size_t i = 0; i < r->nheaders; i++)
        if (!strcmp(r->headers[i].key, name)) return r->headers[i].value;
    return NULL;
}

static const char *query(const s3x_http_req *r, const char *name) {
    for (size_t i = 0; i < r->nquery; i++)
        if (!strcmp(r->query[i].key, name)) return r->query[i].value;
    return NULL;
}

static void test_header_bounds(void) {
    s3x_http_req r;
    s3x_req_new(&r);
    r.op = "PutObject";
    char names[S3X_MAX_HEADERS][24];
    int ok = 1;
    for (int i = 0; i < S3X_MAX_HEADERS; i++) {
        snprintf(names[i], sizeof names[i], "x-amz-meta-h%d", i);
        if (s3x_req_header(&r, names[i], "v") != 0) ok = 0;
    }
    CHECK(ok, "the first S3X_MAX_HEADERS (%d) headers are accepted", S3X_MAX_HEADERS);
    CHECK_EQ(r.nheaders, S3X_MAX_HEADERS, "array full");
    s3x_error_clear();
    CHECK_EQ(s3x_req_header(&r, "x-amz-meta-one-too-many", "v"), S3X_EINTERNAL, "one more header is refused");
    const char *m = s3x_error_last()->message;
    CHECK(contains(m, "x-amz-meta-one-too-many") && contains(m, "PutObject") && contains(m, "S3X_MAX_HEADERS"),
          "the message names the header, the request and the limit: \"%s\"", m);
    CHECK_EQ(s3x_error_last()->code, S3X_EINTERNAL, "thread error code");
    CHECK_EQ(r.nheaders, S3X_MAX_HEADERS, "nothing written past the array");
    CHECK_STREQ(r.headers[S3X_MAX_HEADERS - 1].key, names[S3X_MAX_HEADERS - 1], "the last header is untouched");
    CHECK_EQ(s3x_req_header(&r, "x", NULL), S3X_EINVAL, "a NULL value is refused");
    CHECK_EQ(s3x_req_header(&r, NULL, "v"), S3X_EINVAL, "a NULL name is refused");
}

static void test_query_bounds(void) {
    s3x_http_req r;
    s3x_req_new(&r);
    CHECK_EQ(s3x_req_list_objects(&r, "b", "p/", "/", "tok", 10, (char[24]){0}), 0, "list builder");
    int ok = 1;
    char names[S3X_MAX_QUERY][16];
    for (int i = (int)r.nquery; i < S3X_MAX_QUERY; i++) {
        snprintf(names[i], sizeof names[i], "q%d", i);
        if (s3x_req_query(&r, names[i], "") != 0) ok = 0;
    }
    CHECK(ok, "query parameters up to S3X_MAX_QUERY (%d) are accepted", S3X_MAX_QUERY);
    s3x_error_clear();
    CHECK_EQ(s3x_req_query(&r, "versionId", "v1"), S3X_EINTERNAL, "one more query parameter is refused");
    const char *m = s3x_error_last()->message;
    CHECK(contains(m, "versionId") && contains(m, "ListObjectsV2") && contains(m, "S3X_MAX_QUERY"),
          "the message names the parameter, the request and the limit: \"%s\"", m);
    CHECK_EQ(r.nquery, S3X_MAX_QUERY, "nothing written past the array");
    /* A builder describes the request anew: a request reused for its next
     * attempt does not pile up parameters. */
    CHECK_EQ(s3x_req_head_bucket(&r, "b"), 0, "re-described as HeadBucket");
    CHECK_EQ(r.nquery, 0, "query cleared");
    CHECK_EQ(r.nheaders, 0, "headers cleared");
    CHECK_STREQ(r.method, "HEAD", "method");
    CHECK(r.key == NULL, "bucket-level request has no key");
}

static void test_range(void) {
    char b[64];
    CHECK_EQ(s3x_req_range(b, sizeof b, 0, 99), 0, "closed range");
    CHECK_STREQ(b, "bytes=0-99", "closed range text");
    CHECK_EQ(s3x_req_range(b, sizeof b, 5, -1), 0, "open range");
    CHECK_STREQ(b, "bytes=5-", "open range text");
    CHECK_EQ(s3x_req_range(b, sizeof b, 9, 3), S3X_EINVAL, "end before start");
    CHECK_EQ(s3x_req_range(b, sizeof b, -1, 3), S3X_EINVAL, "negative start");
    CHECK_EQ(s3x_req_range(b, 8, 0, 1000000), S3X_EINTERNAL, "a buffer too small is an error, not a cut range");
}

static void test_builders(void) {
    s3x_http_req r;
    s3x_req_num pn;
    s3x_req_new(&r);
    s3x_req_checksum ck = {"x-amz-checksum-crc32c", "AAAAAA==", NULL};
    CHECK_EQ(s3x_req_upload_part(&r, "bkt", "k", "UP1", 7, pn, &ck), 0, "UploadPart");
    CHECK_STREQ(r.op, "UploadPart", "op");
    CHECK_STREQ(r.method, "PUT", "method");
    CHECK_STREQ(query(&r, "partNumber"), "7", "partNumber");
    CHECK_STREQ(query(&r, "uploadId"), "UP1", "uploadId");
    CHECK_STREQ(header(&r, "x-amz-checksum-crc32c"), "AAAAAA==", "checksum header");
    CHECK(header(&r, "x-amz-sdk-checksum-algorithm") == NULL, "no algorithm header when not asked");
    CHECK(query(&r, "partNumber") == pn, "the number lives in the caller's storage");
    CHECK_EQ(s3x_req_upload_part(&r, "bkt", "k", "UP1", 0, pn, NULL), S3X_EINVAL, "part 0 refused");
    CHECK_EQ(s3x_req_upload_part(&r, "bkt", "k", "UP1", 10001, pn, NULL), S3X_EINVAL, "part 10001 refused");

    ck = (s3x_req_checksum){NULL, NULL, "CRC32C"};
    CHECK_EQ(s3x_req_put_object(&r, "bkt", "k", "text/plain", &ck), 0, "PutObject");
    CHECK_STREQ(header(&r, "content-type"), "text/plain", "content-type");
    CHECK_STREQ(header(&r, "x-amz-sdk-checksum-algorithm"), "CRC32C", "algorithm only (checksum in a trailer)");
    CHECK_EQ(r.nheaders, 2, "two headers");
    CHECK_EQ(r.nquery, 0, "no query");

    CHECK_EQ(s3x_req_get_object(&r, "bkt", "k", "bytes=0-9", "\"e\"", 1), 0, "GetObject");
    CHECK_STREQ(r.method, "GET", "method");
    CHECK_STREQ(header(&r, "range"), "bytes=0-9", "range");
    CHECK_STREQ(header(&r, "if-match"), "\"e\"", "if-match");
    CHECK_STREQ(header(&r, "x-amz-checksum-mode"), "ENABLED", "checksum mode");
    CHECK_EQ(s3x_req_get_object(&r, "bkt", "k", NULL, "", 0), 0, "plain GetObject");
    CHECK_EQ(r.nheaders, 0, "nothing left out is sent");

    CHECK_EQ(s3x_req_head_object(&r, "bkt", "k", NULL, 1), 0, "HeadObject");
    CHECK_STREQ(r.method, "HEAD", "method");
    CHECK_EQ(r.nheaders, 1, "checksum mode only");

    CHECK_EQ(s3x_req_create_mpu(&r, "bkt", "k", NULL, "SHA256"), 0, "CreateMultipartUpload");
    CHECK_STREQ(r.method, "POST", "method");
    CHECK_STREQ(query(&r, "uploads"), "", "?uploads");
    CHECK_STREQ(header(&r, "x-amz-checksum-algorithm"), "SHA256", "checksum algorithm");

    CHECK_EQ(s3x_req_complete_mpu(&r, "bkt", "k", "UP1"), 0, "CompleteMultipartUpload");
    CHECK_STREQ(r.method, "POST", "method");
    CHECK_STREQ(header(&r, "content-type"), "application/xml", "content-type");
    CHECK_STREQ(query(&r, "uploadId"), "UP1", "uploadId");

    CHECK_EQ(s3x_req_abort_mpu(&r, "bkt", "k", "UP1"), 0, "AbortMultipartUpload");
    CHECK_STREQ(r.method, "DELETE", "method");
    CHECK_EQ(r.nquery, 1, "uploadId only");

    s3x_req_num mk;
    CHECK_EQ(s3x_req_list_parts(&r, "bkt", "k", "UP1", 0, mk), 0, "ListParts");
    CHECK(query(&r, "part-number-marker") == NULL, "no marker on the first page");
    CHECK_EQ(s3x_req_list_parts(&r, "bkt", "k", "UP1", 1000, mk), 0, "ListParts page 2");
    CHECK_STREQ(query(&r, "part-number-marker"), "1000", "marker");

    CHECK_EQ(s3x_req_list_objects(&r, "bkt", NULL, "", NULL, 0, mk), 0, "ListObjectsV2");
    CHECK_EQ(r.nquery, 1, "list-type only");
    CHECK_STREQ(query(&r, "list-type"), "2", "list-type");

    CHECK_EQ(s3x_req_list_uploads(&r, "bkt", "p", "km", "im"), 0, "ListMultipartUploads");
    CHECK_EQ(r.nquery, 4, "uploads, prefix, markers");
    CHECK(r.key == NULL, "bucket-level");

    CHECK_EQ(s3x_req_delete_object(&r, "bkt", "k"), 0, "DeleteObject");
    CHECK_STREQ(r.op, "DeleteObject", "op");
    CHECK_EQ(s3x_req_create_bucket(&r, "bkt"), 0, "CreateBucket");
    CHECK_STREQ(r.method, "PUT", "method");
    CHECK_EQ(s3x_req_delete_bucket(&r, "bkt"), 0, "DeleteBucket");
    CHECK_STREQ(r.method, "DELETE", "method");
}

/* ---- the judge ------------------------------------------------------------- */

static void outcome(s3x_http_req *r, long status, const char *body) {
    s3x_req_new(r);
    s3x_req_get_object(r, "bkt", "k", NULL, NULL, 0);
    r->status = status;
    r->got_status = 1;
    if (body) s3x_buf_append(&r->resp_body, body, strlen(body));
}

static void test_judge(void) {
    s3x_client *c = NULL;
    CHECK_EQ(s3x_client_new(&c), 0, "client");
    if (!c) return;
    /* Resolved (no request is sent): error messages name the endpoint. */
    s3x_client_set_string(c, S3X_CLIENT_ENDPOINT_URL, "http://127.0.0.1:9");
    s3x_client_set_string(c, S3X_CLIENT_REGION, "us-east-1");
    s3x_client_set_string(c, S3X_CLIENT_ACCESS_KEY, "AK");
    s3x_client_set_string(c, S3X_CLIENT_SECRET_KEY, "SK");
    CHECK_EQ(s3x_client_ensure(c), 0, "client settings resolve");
    s3x_retry_state st;
    memset(&st, 0, sizeof st);
    s3x_retry_state_init(&st, 1);
    s3x_retry_rules standard = {5, 0, 0};
    s3x_result res;
    memset(&res, 0, sizeof res);
    s3x_http_req r;
    double d = -1;

    outcome(&r, 200, NULL);
    CHECK_EQ(s3x_retry_judge(&st, &standard, c, &r, 1, 0, 0, &res, &d), S3X_REQ_OK, "200 is OK");
    s3x_buf_free(&r.resp_body);

    outcome(&r, 403, "<Error><Code>AccessDenied</Code></Error>");
    CHECK_EQ(s3x_retry_judge(&st, &standard, c, &r, 1, 0, 0, &res, &d), S3X_REQ_FAIL, "403 is not retried");
    CHECK_STREQ(s3x_error_last()->s3_code, "AccessDenied", "its error is the request's");
    s3x_buf_free(&r.resp_body);

    outcome(&r, 404, "<Error><Code>NoSuchKey</Code></Error>");
    CHECK_EQ(s3x_retry_judge(&st, &standard, c, &r, 1, 0, 0, &res, &d), S3X_REQ_FAIL, "404 is not retried");
    s3x_buf_free(&r.resp_body);
    CHECK_EQ(res.retries, 0, "no retry counted");

    outcome(&r, 503, "<Error><Code>SlowDown</Code></Error>");
    r.retry_after_s = 0.5;
    CHECK_EQ(s3x_retry_judge(&st, &standard, c, &r, 1, 0, 0, &res, &d), S3X_REQ_RETRY, "503 SlowDown is retried");
    CHECK(d >= 0.5, "Retry-After is honoured (%.3f s)", d);
    CHECK_EQ(res.retries_throttled, 1, "counted as throttled");
    CHECK_EQ(s3x_retry_judge(&st, &standard, c, &r, 5, 0, 0, &res, &d), S3X_REQ_FAIL,
                "with no window, throttling stops at max_attempts");
    CHECK(contains(s3x_error_last()->message, "gave up after 5 attempts"), "says why: \"%s\"",
          s3x_error_last()->message);
    CHECK_EQ(s3x_retry_judge(&st, &standard, c, &r, 1, 1, 0, &res, &d), S3X_REQ_FAIL,
                "a cancelled (or unreplayable) request is not retried");
    s3x_buf_free(&r.resp_body);

    outcome(&r, 500, "<Error><Code>InternalError</Code></Error>");
    s3x_retry_rules windowed = {2, 60000, 0};
    CHECK_EQ(s3x_retry_judge(&st, &windowed, c, &r, 10, 0, 0, &res, &d), S3X_REQ_RETRY,
                "inside the window throttling is retried past max_attempts");
    s3x_buf_free(&r.resp_body);

    outcome(&r, 0, NULL);
    r.got_status = 0;
    r.curl_rc = CURLE_RECV_ERROR;
    CHECK_EQ(s3x_retry_judge(&st, &standard, c, &r, 1, 0, 0, &res, &d), S3X_REQ_RETRY, "a reset is retried");
    CHECK_EQ(res.retries_network, 1, "counted as a network retry");
    CHECK_EQ(s3x_retry_judge(&st, &standard, c, &r, 1, 0, 1500, &res, &d), S3X_REQ_RETRY,
                "a first-byte cut is retried");
    CHECK(contains(s3x_error_last()->message, "1500 ms first-byte timeout"), "names the timeout: \"%s\"",
          s3x_error_last()->message);

    /* An empty budget stops retries of errors that are not throttling. */
    st.budget.tokens = 0;
    CHECK_EQ(s3x_retry_judge(&st, &standard, c, &r, 1, 0, 0, NULL, &d), S3X_REQ_FAIL, "budget exhausted");
    CHECK(contains(s3x_error_last()->message, "retry budget exhausted"), "says so: \"%s\"",
          s3x_error_last()->message);
    s3x_retry_state_clear(&st);
    s3x_client_free(c);
}

int main(void) {
    test_header_bounds();
    test_query_bounds();
    test_range();
    test_builders();
    test_judge();
    return tap_summary("test_requests");
}
