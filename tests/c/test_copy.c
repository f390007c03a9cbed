/* Server-side copy and bulk delete without a network: the request builders
 * (CopyObject, UploadPartCopy, DeleteObjects, the copy source's encoding),
 * the CopyObjectResult / CopyPartResult and DeleteResult parsers, the
 * DeleteObjects body, and the multipart copy's part plan for sizes the
 * server tests cannot hold (over 5 GiB, up to 5 TiB). */
#include "kinds.h"
#include "requests.h"
#include "s3xml.h"
#include "s3xfer/s3xfer.h"
#include "tap.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1024LL * 1024LL)
#define GiB (1024LL * MiB)

/* tap.h's CHECK_INTEQ evaluates `actual` twice; the calls checked here
 * allocate and append, so evaluate once. */
static int check_eq(long long actual, long long expected, const char *file, int line, const char *what) {
    return tap_check(actual == expected, file, line, "%s: expected %lld, got %lld", what, expected, actual);
}
#undef CHECK_INTEQ
#define CHECK_INTEQ(actual, expected, what) \
    check_eq((long long)(actual), (long long)(expected), __FILE__, __LINE__, (what))

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

static void test_copy_source(void) {
    char *s = NULL;
    CHECK_INTEQ(s3x_req_copy_source("bkt", "dir/a b+c%d?é~_.-", &s), 0, "copy source");
    /* botocore: quote(key, safe='/~') on "bucket/key": '/' kept, the rest of
     * the reserved set and every non-ASCII byte percent-encoded. */
    CHECK_STREQ(s, "/bkt/dir/a%20b%2Bc%25d%3F%C3%A9~_.-", "encoded like botocore");
    free(s);
    CHECK_INTEQ(s3x_req_copy_source("bkt", "a//b/./c", &s), 0, "slashes");
    CHECK_STREQ(s, "/bkt/a//b/./c", "segments kept as they are");
    free(s);
    CHECK_INTEQ(s3x_req_copy_source("bkt", "", &s), S3X_EINVAL, "empty key refused");
    CHECK(s == NULL, "nothing returned on failure");
}

static void test_builders(void) {
    s3x_http_req r;
    s3x_req_num pn;
    s3x_req_new(&r);
    CHECK_INTEQ(s3x_req_copy_object(&r, "dst", "k2", "/src/k", "COPY", "text/plain", "\"e1\"", "CRC32C"), 0,
                "CopyObject COPY");
    CHECK_STREQ(r.op, "CopyObject", "op");
    CHECK_STREQ(r.method, "PUT", "PUT");
    CHECK_STREQ(r.bucket, "dst", "destination bucket");
    CHECK_STREQ(header(&r, "x-amz-copy-source"), "/src/k", "copy source header");
    CHECK_STREQ(header(&r, "x-amz-metadata-directive"), "COPY", "directive");
    CHECK(header(&r, "content-type") == NULL, "no content-type with COPY (the source's is kept)");
    CHECK_STREQ(header(&r, "x-amz-copy-source-if-match"), "\"e1\"", "pinned to the source's ETag");
    CHECK_STREQ(header(&r, "x-amz-checksum-algorithm"), "CRC32C", "checksum algorithm asked for");

    CHECK_INTEQ(s3x_req_copy_object(&r, "dst", "k2", "/src/k", "REPLACE", "image/png", NULL, NULL), 0,
                "CopyObject REPLACE");
    CHECK_STREQ(header(&r, "x-amz-metadata-directive"), "REPLACE", "REPLACE");
    CHECK_STREQ(header(&r, "content-type"), "image/png", "content-type with REPLACE");
    CHECK(header(&r, "x-amz-copy-source-if-match") == NULL, "no precondition when none given");
    CHECK_INTEQ(r.nheaders, 3, "three headers");
    CHECK_INTEQ(s3x_req_copy_object(&r, "dst", "k2", "/src/k", "MOVE", NULL, NULL, NULL), S3X_EINVAL,
                "unknown directive refused");

    CHECK_INTEQ(s3x_req_upload_part_copy(&r, "dst", "k2", "UP", 3, pn, "/src/k", "bytes=16-23", "\"e\""), 0,
                "UploadPartCopy");
    CHECK_STREQ(r.op, "UploadPartCopy", "op");
    CHECK_STREQ(query(&r, "partNumber"), "3", "partNumber");
    CHECK_STREQ(query(&r, "uploadId"), "UP", "uploadId");
    CHECK_STREQ(header(&r, "x-amz-copy-source-range"), "bytes=16-23", "range");
    CHECK_STREQ(header(&r, "x-amz-copy-source-if-match"), "\"e\"", "if-match");
    CHECK_INTEQ(s3x_req_upload_part_copy(&r, "dst", "k2", "UP", 10001, pn, "/src/k", "bytes=0-1", NULL), S3X_EINVAL,
                "part 10001 refused");

    CHECK_INTEQ(s3x_req_delete_objects(&r, "bkt", "1B2M2Y8AsgTpgAmY7PhCfg=="), 0, "DeleteObjects");
    CHECK_STREQ(r.method, "POST", "POST");
    CHECK(r.key == NULL, "bucket-level");
    CHECK(query(&r, "delete") && !*query(&r, "delete"), "?delete");
    CHECK_STREQ(header(&r, "content-md5"), "1B2M2Y8AsgTpgAmY7PhCfg==", "Content-MD5 (S3 requires it)");

    const char *names[] = {"x-amz-meta-a", "x-amz-meta-b"}, *values[] = {"1", "two"};
    CHECK_INTEQ(s3x_req_create_mpu_meta(&r, "dst", "k", "text/x", "CRC32", names, values, 2), 0, "Create with meta");
    CHECK_STREQ(header(&r, "x-amz-meta-b"), "two", "metadata carried");
    CHECK_STREQ(header(&r, "content-type"), "text/x", "type carried");
}

static void test_parse_copy(void) {
    static const char ok[] = "<?xml version=\"1.0\"?><CopyObjectResult><LastModified>2026-12-03T10:00:00Z"
                             "</LastModified><ETag>\"abc\"</ETag><ChecksumCRC32C>AAAAAA==</ChecksumCRC32C>"
                             "</CopyObjectResult>";
    s3x_xml_copy c;
    memset(&c, 0, sizeof c);
    CHECK_INTEQ(s3x_xml_parse_copy(ok, sizeof ok - 1, "CopyObjectResult", &c), 0, "CopyObjectResult");
    CHECK_STREQ(c.etag, "\"abc\"", "ETag");
    CHECK_STREQ(c.checksum_name, "ChecksumCRC32C", "checksum name");
    CHECK_STREQ(c.checksum, "AAAAAA==", "checksum");
    s3x_xml_copy_free(&c);
    CHECK_INTEQ(s3x_xml_parse_copy(ok, sizeof ok - 1, "CopyPartResult", &c), S3X_EXML, "wrong root refused");
    CHECK(c.etag == NULL, "cleared");

    static const char part[] = "<CopyPartResult><ETag>&quot;p1&quot;</ETag></CopyPartResult>";
    CHECK_INTEQ(s3x_xml_parse_copy(part, sizeof part - 1, "CopyPartResult", &c), 0, "CopyPartResult");
    CHECK_STREQ(c.etag, "\"p1\"", "entity-decoded ETag");
    CHECK(c.checksum == NULL && c.checksum_name == NULL, "no checksum");
    s3x_xml_copy_free(&c);

    static const char noetag[] = "<CopyPartResult><LastModified>x</LastModified></CopyPartResult>";
    CHECK_INTEQ(s3x_xml_parse_copy(noetag, sizeof noetag - 1, "CopyPartResult", &c), S3X_EXML, "no ETag refused");
    static const char err[] = "<Error><Code>InternalError</Code><Message>boom</Message></Error>";
    CHECK_INTEQ(s3x_xml_parse_copy(err, sizeof err - 1, "CopyObjectResult", &c), S3X_EXML, "an <Error> is an error");
    CHECK(strstr(s3x_error_last()->message, "InternalError") != NULL, "its code is in the message");
    CHECK(s3x_xml_is_error(err, sizeof err - 1), "a 200 with this body is an error (http.c)");
}

static void test_parse_delete(void) {
    static const char x[] = "<DeleteResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                            "<Deleted><Key>a</Key></Deleted>"
                            "<Error><Key>b&amp;c</Key><Code>AccessDenied</Code><Message>no</Message></Error>"
                            "<Deleted><Key>d</Key><DeleteMarker>true</DeleteMarker></Deleted>"
                            "<Error><Key>e</Key></Error></DeleteResult>";
    s3x_xml_delete_result d;
    memset(&d, 0, sizeof d);
    CHECK_INTEQ(s3x_xml_parse_delete_result(x, sizeof x - 1, &d), 0, "DeleteResult");
    CHECK_INTEQ(d.n, 4, "four entries");
    if (d.n == 4) {
        CHECK(d.entries[0].ok && !strcmp(d.entries[0].key, "a"), "a deleted");
        CHECK(!d.entries[1].ok && !strcmp(d.entries[1].key, "b&c"), "b&c failed");
        CHECK_STREQ(d.entries[1].code, "AccessDenied", "its code");
        CHECK_STREQ(d.entries[1].message, "no", "its message");
        CHECK(d.entries[2].ok, "d deleted");
        CHECK_STREQ(d.entries[3].code, "UnknownError", "an error without a code still fails");
    }
    s3x_xml_delete_result_free(&d);
    static const char nokey[] = "<DeleteResult><Deleted></Deleted></DeleteResult>";
    CHECK_INTEQ(s3x_xml_parse_delete_result(nokey, sizeof nokey - 1, &d), S3X_EXML, "entry without a key refused");
    CHECK(d.entries == NULL && d.n == 0, "cleared");
    /* More entries than a request can name is a broken answer. */
    size_t cap = 64 + 1001 * 48;
    char *big = malloc(cap);
    size_t n = (size_t)snprintf(big, cap, "<DeleteResult>");
    for (int i = 0; i < 1001; i++) n += (size_t)snprintf(big + n, cap - n, "<Deleted><Key>k%d</Key></Deleted>", i);
    n += (size_t)snprintf(big + n, cap - n, "</DeleteResult>");
    CHECK_INTEQ(s3x_xml_parse_delete_result(big, n, &d), S3X_EXML, "1001 entries refused");
    free(big);
}

static void test_build_delete(void) {
    const char *keys[] = {"plain", "a&b<c>\"d'", "line\r\nbreak", "é/ü"};
    char *body = NULL;
    size_t len = 0;
    CHECK_INTEQ(s3x_xml_build_delete(keys, 4, 1, &body, &len), 0, "body built");
    CHECK(body && strstr(body, "<Quiet>true</Quiet>"), "quiet");
    CHECK(body && strstr(body, "<Key>a&amp;b&lt;c&gt;&quot;d&apos;</Key>"), "escaped");
    CHECK(body && strstr(body, "<Key>line&#13;\nbreak</Key>"), "CR kept as a reference");
    CHECK(body && len == strlen(body), "length");
    free(body);
    const char *bad[] = {"ok", "bell\007"};
    CHECK_INTEQ(s3x_xml_build_delete(bad, 2, 0, &body, &len), S3X_EINVAL, "control character refused");
    CHECK(body == NULL, "no body");
    CHECK(strstr(s3x_error_last()->message, "key 1") != NULL, "names the key");
    const char *empty[] = {""};
    CHECK_INTEQ(s3x_xml_build_delete(empty, 1, 0, &body, &len), S3X_EINVAL, "empty key refused");
    CHECK_INTEQ(s3x_xml_build_delete(keys, 0, 0, &body, &len), S3X_EINVAL, "no keys refused");
    CHECK_INTEQ(s3x_xml_build_delete(keys, 1001, 0, &body, &len), S3X_EINVAL, "1001 keys refused");
}

static void test_part_plan(void) {
    /* The knob when it is enough. */
    CHECK_INTEQ(s3x_copy_plan_part_size(8 * MiB, 40 * MiB), 8 * MiB, "40 MiB in 8 MiB parts");
    /* 6 GiB (over CopyObject's 5 GiB) in 8 MiB parts: 768 parts. */
    int64_t p = s3x_copy_plan_part_size(8 * MiB, 6 * GiB);
    CHECK_INTEQ(p, 8 * MiB, "6 GiB keeps 8 MiB parts");
    CHECK((6 * GiB + p - 1) / p == 768, "768 parts");
    /* 100 GiB in 8 MiB parts would be 12,800: grown to whole MiB, <= 10,000 parts. */
    p = s3x_copy_plan_part_size(8 * MiB, 100 * GiB);
    CHECK(p % MiB == 0 && p > 8 * MiB, "grown to whole MiB (%lld)", (long long)p);
    CHECK((100 * GiB + p - 1) / p <= 10000, "at most 10,000 parts");
    CHECK(s3x_copy_plan_part_size(p - MiB, 100 * GiB) == p, "the smallest whole-MiB size that fits");
    /* 5 TiB, S3's largest object: parts stay under 5 GiB. */
    p = s3x_copy_plan_part_size(8 * MiB, 5 * 1024 * GiB);
    CHECK(p <= 5 * GiB && (5 * 1024 * GiB + p - 1) / p <= 10000, "5 TiB fits 10,000 parts under 5 GiB (%lld)",
          (long long)p);
}

int main(void) {
    test_copy_source();
    test_builders();
    test_parse_copy();
    test_parse_delete();
    test_build_delete();
    test_part_plan();
    return tap_summary("test_copy");
}
