/* S3 XML: parsing every response type from realistic documents, rejecting
 * hostile and broken ones cleanly (S3X_EXML, a message naming the reason,
 * nothing on stderr), building request bodies, and parsing on many threads. */
#include "s3xml.h"
#include "buf.h"
#include "error.h"
#include "tap.h"

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef S3X_TEST_DATA_DIR
#error "S3X_TEST_DATA_DIR must point at tests/c/data"
#endif

static char *read_data(const char *name, size_t *len) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", S3X_TEST_DATA_DIR, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("FAIL cannot open %s\n", path);
        tap_failed++;
        *len = 0;
        return NULL;
    }
    s3x_buf b = S3X_BUF_INIT;
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) s3x_buf_append(&b, chunk, n);
    fclose(f);
    *len = b.len;
    return s3x_buf_detach(&b);
}

/* ---- stderr capture: libxml2 must print nothing ---- */

static int cap_saved_fd = -1;
static FILE *cap_file;

static void capture_begin(void) {
    fflush(stderr);
    cap_file = tmpfile();
    cap_saved_fd = dup(2);
    if (cap_file && cap_saved_fd >= 0) dup2(fileno(cap_file), 2);
}

/* Returns the number of bytes written to stderr since capture_begin and
 * prints them (on stdout) when there are any. */
static long capture_end(void) {
    fflush(stderr);
    if (cap_saved_fd >= 0) {
        dup2(cap_saved_fd, 2);
        close(cap_saved_fd);
        cap_saved_fd = -1;
    }
    if (!cap_file) return -1;
    long n = ftell(cap_file);
    struct stat st;
    if (fstat(fileno(cap_file), &st) == 0) n = (long)st.st_size;
    if (n > 0) {
        char buf[512];
        rewind(cap_file);
        size_t r = fread(buf, 1, sizeof buf - 1, cap_file);
        buf[r] = '\0';
        printf("  stderr got: %s\n", buf);
    }
    fclose(cap_file);
    cap_file = NULL;
    return n;
}

static const char *last_msg(void) { return s3x_error_last()->message; }

/* ---- good documents ---- */

static void test_initiate(void) {
    size_t len;
    char *xml = read_data("initiate.xml", &len);
    char *id = NULL;
    int rc = s3x_xml_parse_initiate(xml, len, &id);
    CHECK(rc == 0, "parse initiate: %d %s", rc, last_msg());
    CHECK_STREQ(id, "VXBsb2FkIElEIGZvciA2aWWpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA", "UploadId");
    free(id);
    free(xml);
    /* rclone serve s3 (v1.75) names the root <InitiateMultipartUpload>; that
     * one alias is accepted, any other name is not. */
    static const char rclone[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<InitiateMultipartUpload "
                                 "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Bucket>b</Bucket><Key>k</Key>"
                                 "<UploadId>e7f940c7-5</UploadId></InitiateMultipartUpload>";
    id = NULL;
    rc = s3x_xml_parse_initiate(rclone, sizeof rclone - 1, &id);
    CHECK(rc == 0 && id && !strcmp(id, "e7f940c7-5"), "rclone's <InitiateMultipartUpload> root: %d %s", rc,
          rc ? last_msg() : "");
    free(id);
    static const char other[] = "<InitiateMultipart><UploadId>x</UploadId></InitiateMultipart>";
    id = NULL;
    rc = s3x_xml_parse_initiate(other, sizeof other - 1, &id);
    CHECK(rc == S3X_EXML && !id && strstr(last_msg(), "unexpected root element <InitiateMultipart>"),
          "another root name is refused: %s", last_msg());
}

static void test_complete(void) {
    size_t len;
    char *xml = read_data("complete.xml", &len);
    s3x_xml_complete c;
    memset(&c, 0, sizeof c);
    int rc = s3x_xml_parse_complete(xml, len, &c);
    CHECK(rc == 0, "parse complete: %d %s", rc, last_msg());
    CHECK_STREQ(c.location, "https://example-bucket.s3.us-east-1.amazonaws.com/Example-Object", "Location");
    CHECK_STREQ(c.bucket, "example-bucket", "Bucket");
    CHECK_STREQ(c.key, "Example-Object", "Key");
    CHECK_STREQ(c.etag, "\"3858f62230ac3c915f300c664312c11f-9\"", "ETag keeps its quotes");
    CHECK(!s3x_xml_is_error(xml, len), "complete result is not an error");
    s3x_xml_complete_free(&c);
    CHECK(c.etag == NULL && c.key == NULL, "complete_free zeroes");
    s3x_xml_complete_free(&c); /* twice is fine */
    free(xml);

    /* Optional elements absent: "" rather than NULL. */
    const char *min = "<CompleteMultipartUploadResult><ETag>\"e\"</ETag></CompleteMultipartUploadResult>";
    memset(&c, 0, sizeof c);
    rc = s3x_xml_parse_complete(min, strlen(min), &c);
    CHECK(rc == 0, "minimal complete: %d %s", rc, last_msg());
    CHECK_STREQ(c.location, "", "absent Location is \"\"");
    CHECK_STREQ(c.etag, "\"e\"", "minimal ETag");
    s3x_xml_complete_free(&c);
}

static void test_errors(void) {
    size_t len;
    char *xml = read_data("error_nosuchkey.xml", &len);
    s3x_xml_error e;
    memset(&e, 0, sizeof e);
    int rc = s3x_xml_parse_error(xml, len, &e);
    CHECK(rc == 0, "parse error body: %d %s", rc, last_msg());
    CHECK_STREQ(e.code, "NoSuchKey", "Error Code");
    CHECK_STREQ(e.message, "The resource you requested does not exist", "Error Message");
    CHECK_STREQ(e.request_id, "4442587FB7D0A2F9", "Error RequestId");
    CHECK_STREQ(e.resource, "/mybucket/myfoto.jpg", "Error Resource");
    CHECK(s3x_xml_is_error(xml, len) == 1, "NoSuchKey body is an error");
    s3x_xml_error_free(&e);
    free(xml);

    xml = read_data("error_slowdown_ns.xml", &len);
    memset(&e, 0, sizeof e);
    rc = s3x_xml_parse_error(xml, len, &e);
    CHECK(rc == 0, "parse namespaced error: %d %s", rc, last_msg());
    CHECK_STREQ(e.code, "SlowDown", "namespaced Error Code");
    CHECK_STREQ(e.resource, "", "absent Resource is \"\"");
    CHECK(s3x_xml_is_error(xml, len) == 1, "namespaced SlowDown body is an error");
    s3x_xml_error_free(&e);
    free(xml);

    /* CompleteMultipartUpload can answer 200 with an error body. */
    xml = read_data("complete_error_200.xml", &len);
    CHECK(s3x_xml_is_error(xml, len) == 1, "200 error body detected");
    s3x_xml_complete c;
    memset(&c, 0, sizeof c);
    rc = s3x_xml_parse_complete(xml, len, &c);
    CHECK(rc == S3X_EXML, "complete parse of an error body fails: %d", rc);
    CHECK(strstr(last_msg(), "InternalError") && strstr(last_msg(), "CompleteMultipartUploadResult"),
          "message names the S3 error code and the expected root: %s", last_msg());
    s3x_xml_complete_free(&c);
    free(xml);

    /* Not errors. */
    xml = read_data("list_parts.xml", &len);
    CHECK(s3x_xml_is_error(xml, len) == 0, "ListPartsResult is not an error");
    free(xml);
    CHECK(s3x_xml_is_error("", 0) == 0, "empty is not an error");
    CHECK(s3x_xml_is_error(NULL, 0) == 0, "NULL is not an error");
    CHECK(s3x_xml_is_error("<Error>", 7) == 0, "unparsable is not an error");
    CHECK(s3x_xml_is_error("<ErrorX/>", 9) == 0, "<ErrorX> is not an error");
    CHECK(s3x_xml_is_error("<a><Error/></a>", 15) == 0, "nested <Error> is not a root error");
    xml = read_data("billion_laughs.xml", &len);
    CHECK(s3x_xml_is_error(xml, len) == 0, "an <Error> with a DTD is refused, not an error");
    free(xml);
    /* is_error does not touch the thread's last error. */
    s3x_error_clear();
    s3x_xml_is_error("garbage", 7);
    CHECK(s3x_error_last()->code == S3X_OK, "is_error leaves the last error alone");
}

static void test_list_objects(void) {
    size_t len;
    char *xml = read_data("list_objects_v2.xml", &len);
    s3x_xml_list_objects l;
    memset(&l, 0, sizeof l);
    int rc = s3x_xml_parse_list_objects(xml, len, &l);
    CHECK(rc == 0, "parse ListBucketResult: %d %s", rc, last_msg());
    CHECK_INTEQ(l.nobjects, 3, "object count");
    CHECK_INTEQ(l.nprefixes, 2, "common prefix count");
    if (l.nobjects == 3) {
        CHECK_STREQ(l.objects[0].key, "photos/a b&c+d=\xc3\xa9\xe6\x97\xa5\xe6\x9c\xac.jpg", "key with entities and UTF-8");
        CHECK_STREQ(l.objects[0].etag, "\"fba9dede5f27731c9771645a39863328\"", "ETag with &quot; entities");
        CHECK_STREQ(l.objects[0].last_modified, "2009-10-12T17:50:30.000Z", "LastModified");
        CHECK_STREQ(l.objects[0].storage_class, "STANDARD", "StorageClass");
        CHECK_INTEQ(l.objects[0].size, 434234, "Size");
        CHECK_STREQ(l.objects[1].key, "photos/  spaced  ", "key spaces kept exactly");
        CHECK_STREQ(l.objects[1].etag, "\"d41d8cd98f00b204e9800998ecf8427e-2\"", "literal-quote ETag");
        CHECK_INTEQ(l.objects[1].size, 0, "zero Size");
        CHECK_STREQ(l.objects[1].storage_class, "GLACIER", "StorageClass after nested Owner");
        CHECK_STREQ(l.objects[2].key, "photos/<cdata>&key", "CDATA key");
        CHECK_INTEQ(l.objects[2].size, 5497558138880LL, "5 TiB Size");
    }
    if (l.nprefixes == 2) {
        CHECK_STREQ(l.common_prefixes[0], "photos/2006/", "prefix 0");
        CHECK_STREQ(l.common_prefixes[1], "photos/2007/", "prefix 1");
    }
    CHECK(l.is_truncated == 1, "IsTruncated");
    CHECK_STREQ(l.next_continuation_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=", "NextContinuationToken");
    CHECK_INTEQ(l.key_count, 5, "KeyCount");
    s3x_xml_list_objects_free(&l);
    CHECK(l.objects == NULL && l.nobjects == 0, "list_objects_free zeroes");
    free(xml);

    /* Empty, not truncated, no token, no KeyCount. */
    const char *empty = "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>b</Name>"
                        "<IsTruncated>false</IsTruncated></ListBucketResult>";
    memset(&l, 0, sizeof l);
    rc = s3x_xml_parse_list_objects(empty, strlen(empty), &l);
    CHECK(rc == 0, "empty listing: %d %s", rc, last_msg());
    CHECK(l.nobjects == 0 && l.nprefixes == 0 && !l.is_truncated && !l.next_continuation_token && l.key_count == 0,
          "empty listing fields");
    s3x_xml_list_objects_free(&l);

    /* A namespace prefix instead of a default namespace: local names match. */
    const char *pref = "<s3:ListBucketResult xmlns:s3=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                       "<s3:IsTruncated>false</s3:IsTruncated><s3:Contents><s3:Key>k</s3:Key><s3:Size>7</s3:Size>"
                       "</s3:Contents></s3:ListBucketResult>";
    memset(&l, 0, sizeof l);
    rc = s3x_xml_parse_list_objects(pref, strlen(pref), &l);
    CHECK(rc == 0 && l.nobjects == 1 && l.objects[0].size == 7, "prefixed namespace: %d %s", rc, last_msg());
    if (rc == 0 && l.nobjects == 1) CHECK_STREQ(l.objects[0].etag, "", "absent ETag is \"\"");
    s3x_xml_list_objects_free(&l);

    /* ISO-8859-1 declared: text comes back as UTF-8. */
    xml = read_data("latin1.xml", &len);
    memset(&l, 0, sizeof l);
    rc = s3x_xml_parse_list_objects(xml, len, &l);
    CHECK(rc == 0 && l.nobjects == 1, "latin-1 document: %d %s", rc, last_msg());
    if (rc == 0 && l.nobjects == 1) CHECK_STREQ(l.objects[0].key, "caf\xc3\xa9", "latin-1 key converted to UTF-8");
    s3x_xml_list_objects_free(&l);
    free(xml);
}

static void test_list_parts(void) {
    size_t len;
    char *xml = read_data("list_parts.xml", &len);
    s3x_xml_list_parts l;
    memset(&l, 0, sizeof l);
    int rc = s3x_xml_parse_list_parts(xml, len, &l);
    CHECK(rc == 0, "parse ListPartsResult: %d %s", rc, last_msg());
    CHECK_INTEQ(l.nparts, 2, "part count");
    if (l.nparts == 2) {
        CHECK_INTEQ(l.parts[0].part_number, 2, "PartNumber 0");
        CHECK_STREQ(l.parts[0].etag, "\"7778aef83f66abc1fa1e8477f296d394\"", "part ETag");
        CHECK_STREQ(l.parts[0].last_modified, "2010-11-10T20:48:34.000Z", "part LastModified");
        CHECK_INTEQ(l.parts[0].size, 10485760, "part Size");
        CHECK_INTEQ(l.parts[1].part_number, 3, "PartNumber 1");
        CHECK_STREQ(l.parts[1].etag, "\"aaaa18db4cc2f85cedef654fccc4a4x8\"", "part ETag from &quot;");
    }
    CHECK(l.is_truncated == 1, "parts IsTruncated");
    CHECK_INTEQ(l.next_part_number_marker, 3, "NextPartNumberMarker");
    s3x_xml_list_parts_free(&l);
    free(xml);
}

static void test_list_parts_big(void) {
    enum { N = 10000 };
    s3x_buf b = S3X_BUF_INIT;
    s3x_buf_puts(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListPartsResult "
                     "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Bucket>b</Bucket><Key>k</Key>"
                     "<UploadId>u</UploadId><PartNumberMarker>0</PartNumberMarker><MaxParts>10000</MaxParts>"
                     "<IsTruncated>false</IsTruncated>\n");
    for (int i = 1; i <= N; i++)
        s3x_buf_printf(&b,
                       "  <Part><PartNumber>%d</PartNumber><LastModified>2024-01-01T00:00:00.000Z</LastModified>"
                       "<ETag>&quot;%032x&quot;</ETag><Size>%d</Size></Part>\n",
                       i, (unsigned)i * 2654435761u, 5242880 + i);
    s3x_buf_puts(&b, "</ListPartsResult>\n");
    s3x_xml_list_parts l;
    memset(&l, 0, sizeof l);
    int rc = s3x_xml_parse_list_parts(b.data, b.len, &l);
    CHECK(rc == 0, "parse 10000 parts (%zu bytes): %d %s", b.len, rc, last_msg());
    CHECK_INTEQ(l.nparts, N, "10000 parts");
    int ok = l.nparts == N;
    for (int i = 0; ok && i < N; i++) {
        char want[40];
        snprintf(want, sizeof want, "\"%032x\"", (unsigned)(i + 1) * 2654435761u);
        if (l.parts[i].part_number != i + 1 || l.parts[i].size != 5242880 + i + 1 || strcmp(l.parts[i].etag, want))
            ok = 0;
    }
    CHECK(ok, "all 10000 parts read back exactly");
    CHECK(!l.is_truncated && l.next_part_number_marker == 0, "untruncated, no marker");
    s3x_xml_list_parts_free(&l);
    s3x_buf_free(&b);
}

static void test_list_uploads(void) {
    size_t len;
    char *xml = read_data("list_uploads.xml", &len);
    s3x_xml_list_uploads l;
    memset(&l, 0, sizeof l);
    int rc = s3x_xml_parse_list_uploads(xml, len, &l);
    CHECK(rc == 0, "parse ListMultipartUploadsResult: %d %s", rc, last_msg());
    CHECK_INTEQ(l.nuploads, 2, "upload count");
    if (l.nuploads == 2) {
        CHECK_STREQ(l.uploads[0].key, "my-divisor", "upload Key");
        CHECK_STREQ(l.uploads[0].upload_id, "XMgbGlrZSBlbHZpbmcncyBub3QgaGF2aW5nIG11Y2ggbHVjaw", "UploadId");
        CHECK_STREQ(l.uploads[0].initiated, "2010-11-10T20:48:33.000Z", "Initiated");
        CHECK_STREQ(l.uploads[1].key, "my-movie.m2ts", "upload Key 1");
    }
    CHECK(l.is_truncated == 1, "uploads IsTruncated");
    CHECK_STREQ(l.next_key_marker, "my-movie.m2ts", "NextKeyMarker");
    CHECK_STREQ(l.next_upload_id_marker, "YW55IGlkZWEgd2h5IGVsdmluZydzIHVwbG9hZCBmYWlsZWQ", "NextUploadIdMarker");
    s3x_xml_list_uploads_free(&l);
    free(xml);

    const char *none = "<ListMultipartUploadsResult><Bucket>b</Bucket><NextKeyMarker></NextKeyMarker>"
                       "<IsTruncated>false</IsTruncated></ListMultipartUploadsResult>";
    memset(&l, 0, sizeof l);
    rc = s3x_xml_parse_list_uploads(none, strlen(none), &l);
    CHECK(rc == 0 && l.nuploads == 0 && !l.next_key_marker && !l.next_upload_id_marker,
          "no uploads; empty/absent markers are NULL: %d %s", rc, last_msg());
    s3x_xml_list_uploads_free(&l);
}

/* ---- rejected documents ---- */

enum kind { K_INITIATE, K_COMPLETE, K_ERROR, K_OBJECTS, K_PARTS, K_UPLOADS };

/* Parses doc as kind; expects S3X_EXML, a message containing every needle
 * (separated by '|'), a clean output struct and nothing on stderr. */
static void expect_reject(const char *what, enum kind k, const char *xml, size_t len, const char *needles) {
    s3x_error_clear();
    capture_begin();
    int rc = 0, clean = 1;
    switch (k) {
    case K_INITIATE: {
        char *id = (char *)"sentinel";
        rc = s3x_xml_parse_initiate(xml, len, &id);
        clean = id == NULL;
        break;
    }
    case K_COMPLETE: {
        s3x_xml_complete c;
        memset(&c, 0, sizeof c);
        rc = s3x_xml_parse_complete(xml, len, &c);
        clean = !c.etag && !c.key && !c.bucket && !c.location;
        s3x_xml_complete_free(&c);
        break;
    }
    case K_ERROR: {
        s3x_xml_error e;
        memset(&e, 0, sizeof e);
        rc = s3x_xml_parse_error(xml, len, &e);
        clean = !e.code && !e.message;
        s3x_xml_error_free(&e);
        break;
    }
    case K_OBJECTS: {
        s3x_xml_list_objects l;
        memset(&l, 0, sizeof l);
        rc = s3x_xml_parse_list_objects(xml, len, &l);
        clean = !l.objects && !l.nobjects && !l.common_prefixes && !l.next_continuation_token;
        s3x_xml_list_objects_free(&l);
        break;
    }
    case K_PARTS: {
        s3x_xml_list_parts l;
        memset(&l, 0, sizeof l);
        rc = s3x_xml_parse_list_parts(xml, len, &l);
        clean = !l.parts && !l.nparts;
        s3x_xml_list_parts_free(&l);
        break;
    }
    case K_UPLOADS: {
        s3x_xml_list_uploads l;
        memset(&l, 0, sizeof l);
        rc = s3x_xml_parse_list_uploads(xml, len, &l);
        clean = !l.uploads && !l.nuploads && !l.next_key_marker;
        s3x_xml_list_uploads_free(&l);
        break;
    }
    }
    long errbytes = capture_end();
    const char *m = last_msg();
    CHECK(rc == S3X_EXML, "%s: expected S3X_EXML, got %d (%s)", what, rc, m);
    CHECK(errbytes == 0, "%s: %ld bytes printed on stderr", what, errbytes);
    CHECK(clean, "%s: output not left clean after failure", what);
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", needles);
    for (char *save = NULL, *n = strtok_r(tmp, "|", &save); n; n = strtok_r(NULL, "|", &save))
        CHECK(strstr(m, n) != NULL, "%s: message \"%s\" should mention \"%s\"", what, m, n);
}

#define REJECT(what, k, s, needles) expect_reject((what), (k), (s), strlen(s), (needles))

static void reject_file(const char *file, enum kind k, const char *needles) {
    size_t len;
    char *xml = read_data(file, &len);
    if (xml) expect_reject(file, k, xml, len, needles);
    free(xml);
}

static void test_rejections(void) {
    /* Hostile: every DOCTYPE is refused before any entity is declared. */
    reject_file("billion_laughs.xml", K_ERROR, "DTD|refused");
    reject_file("xxe_file.xml", K_INITIATE, "DTD|InitiateMultipartUploadResult");
    reject_file("xxe_parameter.xml", K_ERROR, "DTD");
    reject_file("external_dtd.xml", K_PARTS, "DTD");
    REJECT("DOCTYPE without subset", K_ERROR, "<!DOCTYPE Error><Error><Code>x</Code></Error>", "DTD");
    /* The file's contents never leak into a message. */
    CHECK(strstr(last_msg(), "root:") == NULL, "no /etc/passwd content in messages");

    /* Undeclared entity without a DTD: malformed, not expanded. */
    REJECT("undeclared entity", K_ERROR, "<Error><Code>&xxe;</Code></Error>", "malformed|Error response|xxe|line 1");

    /* Malformed. */
    REJECT("mismatched tag", K_PARTS, "<ListPartsResult>\n<Part></ListPartsResult>",
           "malformed XML in ListPartsResult response|line 2");
    REJECT("garbage after root", K_INITIATE, "<InitiateMultipartUploadResult/><x/>", "malformed");
    REJECT("non-XML text", K_OBJECTS, "Hello, this is not XML at all", "ListBucketResult");
    REJECT("JSON", K_ERROR, "{\"Code\": \"NoSuchKey\"}", "XML in Error response");
    REJECT("HTML (well-formed)", K_COMPLETE, "<html><body>502 Bad Gateway</body></html>",
           "unexpected root element <html>|CompleteMultipartUploadResult");
    REJECT("HTML (malformed)", K_COMPLETE, "<html><br><p>502</html>", "malformed");
    REJECT("bad attribute", K_INITIATE, "<InitiateMultipartUploadResult a=1/>", "malformed");
    REJECT("undeclared prefix", K_INITIATE, "<s3:InitiateMultipartUploadResult><UploadId>x</UploadId></s3:InitiateMultipartUploadResult>", "XML");
    {
        const char bin[] = "\x00\x01\x02\xff\xfe<Error>\x00</Error>";
        expect_reject("binary with NULs", K_ERROR, bin, sizeof bin - 1, "Error response");
    }
    REJECT("invalid UTF-8", K_ERROR, "<Error><Code>\xc3\x28</Code></Error>", "malformed");
    REJECT("control character", K_ERROR, "<Error><Code>a\x01</Code></Error>", "malformed|Char value 1");
    REJECT("unknown encoding", K_ERROR, "<?xml version=\"1.0\" encoding=\"x-bogus\"?><Error/>", "encoding");
    REJECT("UTF-16 label on UTF-8", K_ERROR, "<?xml version=\"1.0\" encoding=\"UTF-16\"?><Error/>", "UTF-16");
    REJECT("EBCDIC label", K_ERROR, "<?xml version=\"1.0\" encoding=\"EBCDIC-US\"?><Error/>", "malformed");
    {
        s3x_buf deep = S3X_BUF_INIT;
        for (int i = 0; i < 5000; i++) s3x_buf_puts(&deep, "<a>");
        expect_reject("5000 nested elements", K_ERROR, deep.data, deep.len, "depth");
        s3x_buf_free(&deep);
    }
    {
        /* XInclude is never processed: the element stays an (ignored) element. */
        const char *xi = "<Error xmlns:xi=\"http://www.w3.org/2001/XInclude\"><Code>c<xi:include "
                         "href=\"file:///etc/passwd\" parse=\"text\"/></Code></Error>";
        s3x_xml_error e;
        memset(&e, 0, sizeof e);
        CHECK(s3x_xml_parse_error(xi, strlen(xi), &e) == 0, "XInclude document parses");
        CHECK_STREQ(e.code, "c", "XInclude not expanded");
        s3x_xml_error_free(&e);
    }

    /* Empty and truncated. */
    REJECT("empty", K_PARTS, "", "empty|ListPartsResult");
    expect_reject("NULL", K_PARTS, NULL, 0, "empty");
    REJECT("blank", K_UPLOADS, "  \r\n\t ", "empty");
    REJECT("declaration only", K_INITIATE, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", "truncated");
    {
        size_t len;
        char *xml = read_data("list_parts.xml", &len);
        if (xml) {
            expect_reject("list_parts cut in half", K_PARTS, xml, len / 2, "truncated XML in ListPartsResult response");
            expect_reject("list_parts cut before the last '>'", K_PARTS, xml, len - 2, "truncated");
        }
        free(xml);
        /* Every prefix of a document fails cleanly and says "truncated" (or "empty"). */
        xml = read_data("initiate.xml", &len);
        size_t end = xml ? (size_t)(strstr(xml, "</InitiateMultipartUploadResult>") - xml) +
                               strlen("</InitiateMultipartUploadResult>")
                         : 0;
        int all_ok = xml != NULL, quiet = 1;
        capture_begin();
        for (size_t n = 0; xml && n < end; n++) {
            char *id = NULL;
            s3x_error_clear();
            int rc = s3x_xml_parse_initiate(xml, n, &id);
            const char *m = last_msg();
            if (rc != S3X_EXML || id || !(strstr(m, "truncated") || strstr(m, "empty"))) {
                if (all_ok) printf("  prefix %zu: rc %d, message \"%s\"\n", n, rc, m);
                all_ok = 0;
            }
            free(id);
        }
        quiet = capture_end() == 0;
        CHECK(all_ok, "every proper prefix of initiate.xml is rejected as truncated");
        CHECK(quiet, "no stderr output for truncated prefixes");
        char *id = NULL;
        CHECK(xml && s3x_xml_parse_initiate(xml, end, &id) == 0, "the complete prefix parses");
        free(id);
        free(xml);
    }

    /* Too large: refused before parsing. */
    {
        size_t n = (size_t)S3X_XML_MAX_BYTES + 1;
        char *big = malloc(n);
        if (CHECK(big != NULL, "alloc cap+1")) {
            memset(big, ' ', n);
            memcpy(big, "<ListPartsResult>", 17);
            memcpy(big + n - 18, "</ListPartsResult>", 18);
            expect_reject("one byte over the cap", K_PARTS, big, n, "too large|8388608");
        }
        free(big);
    }

    /* Wrong document type, missing and invalid fields. */
    reject_file("error_nosuchkey.xml", K_INITIATE, "S3 error|NoSuchKey|InitiateMultipartUploadResult");
    reject_file("list_parts.xml", K_UPLOADS, "unexpected root element <ListPartsResult>");
    REJECT("missing UploadId", K_INITIATE,
           "<InitiateMultipartUploadResult><Bucket>b</Bucket></InitiateMultipartUploadResult>",
           "missing <UploadId> in InitiateMultipartUploadResult");
    REJECT("empty UploadId", K_INITIATE, "<InitiateMultipartUploadResult><UploadId/></InitiateMultipartUploadResult>",
           "empty <UploadId>");
    REJECT("nested UploadId only", K_INITIATE,
           "<InitiateMultipartUploadResult><X><UploadId>u</UploadId></X></InitiateMultipartUploadResult>",
           "missing <UploadId>");
    REJECT("missing ETag", K_COMPLETE, "<CompleteMultipartUploadResult><Key>k</Key></CompleteMultipartUploadResult>",
           "missing <ETag>");
    REJECT("Error root for error parse", K_ERROR, "<NotError/>", "unexpected root element <NotError>");
    REJECT("Size not a number", K_OBJECTS,
           "<ListBucketResult><Contents><Key>k</Key><Size>12a</Size></Contents></ListBucketResult>",
           "invalid <Size> \"12a\"|<Contents> 1");
    REJECT("negative Size", K_OBJECTS,
           "<ListBucketResult><Contents><Key>k</Key><Size>-1</Size></Contents></ListBucketResult>", "invalid <Size>");
    REJECT("Size overflow", K_OBJECTS,
           "<ListBucketResult><Contents><Key>k</Key><Size>99999999999999999999</Size></Contents></ListBucketResult>",
           "invalid <Size>");
    REJECT("Size with plus", K_OBJECTS,
           "<ListBucketResult><Contents><Key>k</Key><Size>+5</Size></Contents></ListBucketResult>", "invalid <Size>");
    REJECT("empty Size", K_OBJECTS,
           "<ListBucketResult><Contents><Key>k</Key><Size></Size></Contents></ListBucketResult>", "invalid <Size>");
    REJECT("missing Key", K_OBJECTS,
           "<ListBucketResult><Contents><Key>a</Key><Size>1</Size></Contents><Contents><Size>1</Size></Contents>"
           "</ListBucketResult>",
           "missing <Key> in <Contents> 2");
    REJECT("missing Size", K_OBJECTS, "<ListBucketResult><Contents><Key>a</Key></Contents></ListBucketResult>",
           "missing <Size>");
    REJECT("missing Prefix", K_OBJECTS, "<ListBucketResult><CommonPrefixes/></ListBucketResult>", "missing <Prefix>");
    REJECT("bad IsTruncated", K_OBJECTS, "<ListBucketResult><IsTruncated>yes</IsTruncated></ListBucketResult>",
           "invalid <IsTruncated> \"yes\"");
    REJECT("truncated without token", K_OBJECTS, "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
           "NextContinuationToken");
    REJECT("bad KeyCount", K_OBJECTS, "<ListBucketResult><KeyCount>x</KeyCount></ListBucketResult>", "KeyCount");
    REJECT("PartNumber 0", K_PARTS,
           "<ListPartsResult><Part><PartNumber>0</PartNumber><ETag>e</ETag><Size>1</Size></Part></ListPartsResult>",
           "invalid <PartNumber> \"0\"|<Part> 1");
    REJECT("PartNumber 10001", K_PARTS,
           "<ListPartsResult><Part><PartNumber>10001</PartNumber><ETag>e</ETag><Size>1</Size></Part></ListPartsResult>",
           "invalid <PartNumber>");
    REJECT("part without ETag", K_PARTS,
           "<ListPartsResult><Part><PartNumber>1</PartNumber><Size>1</Size></Part></ListPartsResult>", "missing <ETag>");
    REJECT("part without Size", K_PARTS,
           "<ListPartsResult><Part><PartNumber>1</PartNumber><ETag>e</ETag></Part></ListPartsResult>", "missing <Size>");
    REJECT("truncated parts without marker", K_PARTS,
           "<ListPartsResult><IsTruncated>true</IsTruncated></ListPartsResult>", "NextPartNumberMarker");
    REJECT("bad NextPartNumberMarker", K_PARTS,
           "<ListPartsResult><NextPartNumberMarker>two</NextPartNumberMarker></ListPartsResult>", "NextPartNumberMarker");
    REJECT("upload without UploadId", K_UPLOADS,
           "<ListMultipartUploadsResult><Upload><Key>k</Key></Upload></ListMultipartUploadsResult>",
           "missing <UploadId> in <Upload> 1");
    REJECT("truncated uploads without marker", K_UPLOADS,
           "<ListMultipartUploadsResult><IsTruncated>true</IsTruncated></ListMultipartUploadsResult>", "NextKeyMarker");
}

/* The caller's own libxml2 error handlers are left in place. */
static int app_errors;
static void app_serror(void *ctx, xmlErrorPtr err) {
    (void)err;
    (*(int *)ctx)++;
}

static void test_handlers_restored(void) {
    xmlSetStructuredErrorFunc(&app_errors, app_serror);
    app_errors = 0;
    char *id = NULL;
    capture_begin();
    int rc = s3x_xml_parse_initiate("<a><b></a>", 10, &id);
    long n = capture_end();
    CHECK(rc == S3X_EXML && n == 0, "malformed parse with an app handler set");
    CHECK_INTEQ(app_errors, 0, "our parse errors do not reach the app's handler");
    CHECK(xmlStructuredError == app_serror && xmlStructuredErrorContext == &app_errors,
          "app's structured handler restored");
    xmlDocPtr d = xmlReadMemory("<a><b></a>", 10, NULL, NULL, 0);
    CHECK(d == NULL && app_errors > 0, "app's own parse still reports to its handler");
    xmlSetStructuredErrorFunc(NULL, NULL);
}

/* ---- building bodies ---- */

static void test_build(void) {
    const s3x_complete_part parts[] = {
        {1, "\"a&b<c>'d\"", "sK9ZCw=="},
        {2, "\"plain\"", NULL},
        {10000, "\"last\"", "AAAA+/=="},
    };
    char *out = NULL;
    size_t len = 0;
    int rc = s3x_xml_build_complete(parts, 3, NULL, &out, &len);
    CHECK(rc == 0, "build complete: %d", rc);
    CHECK_STREQ(out,
                "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                "<Part><PartNumber>1</PartNumber><ETag>&quot;a&amp;b&lt;c&gt;&apos;d&quot;</ETag></Part>"
                "<Part><PartNumber>2</PartNumber><ETag>&quot;plain&quot;</ETag></Part>"
                "<Part><PartNumber>10000</PartNumber><ETag>&quot;last&quot;</ETag></Part>"
                "</CompleteMultipartUpload>",
                "CompleteMultipartUpload body, no checksums");
    CHECK(out && len == strlen(out), "out_len matches");
    /* Round trip through libxml2: the ETags come back exactly. */
    xmlDocPtr d = out ? xmlReadMemory(out, (int)len, NULL, NULL, XML_PARSE_NONET) : NULL;
    CHECK(d != NULL, "built body is well-formed");
    if (d) {
        xmlNodePtr part = xmlDocGetRootElement(d)->children;
        xmlChar *etag = xmlNodeGetContent(part->children->next);
        CHECK_STREQ((const char *)etag, "\"a&b<c>'d\"", "escaped ETag round trip");
        xmlFree(etag);
        xmlFreeDoc(d);
    }
    free(out);

    rc = s3x_xml_build_complete(parts, 3, "ChecksumCRC32C", &out, &len);
    CHECK(rc == 0, "build complete with checksums: %d", rc);
    CHECK_STREQ(out,
                "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                "<Part><PartNumber>1</PartNumber><ETag>&quot;a&amp;b&lt;c&gt;&apos;d&quot;</ETag>"
                "<ChecksumCRC32C>sK9ZCw==</ChecksumCRC32C></Part>"
                "<Part><PartNumber>2</PartNumber><ETag>&quot;plain&quot;</ETag></Part>"
                "<Part><PartNumber>10000</PartNumber><ETag>&quot;last&quot;</ETag>"
                "<ChecksumCRC32C>AAAA+/==</ChecksumCRC32C></Part>"
                "</CompleteMultipartUpload>",
                "CompleteMultipartUpload body with CRC32C");
    free(out);
    rc = s3x_xml_build_complete(parts, 1, "ChecksumSHA256", &out, &len);
    CHECK(rc == 0 && out && strstr(out, "<ChecksumSHA256>sK9ZCw==</ChecksumSHA256>"), "SHA256 checksum element");
    free(out);

    /* Invalid input. */
    struct {
        const char *what;
        const s3x_complete_part *p;
        size_t n;
        const char *ck;
        const char *needle;
    } bad[] = {
        {"no parts", parts, 0, NULL, "no parts"},
        {"NULL parts", NULL, 2, NULL, "no parts"},
        {"unknown checksum", parts, 1, "ChecksumMD5", "unknown checksum"},
        {"injected checksum name", parts, 1, "x><y", "unknown checksum"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        out = (char *)"sentinel";
        rc = s3x_xml_build_complete(bad[i].p, bad[i].n, bad[i].ck, &out, &len);
        CHECK(rc == S3X_EINVAL && out == NULL, "%s: rc %d", bad[i].what, rc);
        CHECK(strstr(last_msg(), bad[i].needle) != NULL, "%s: message \"%s\"", bad[i].what, last_msg());
    }
    const s3x_complete_part desc[] = {{2, "a", NULL}, {1, "b", NULL}};
    rc = s3x_xml_build_complete(desc, 2, NULL, &out, &len);
    CHECK(rc == S3X_EINVAL && strstr(last_msg(), "ascend"), "descending part numbers: %s", last_msg());
    const s3x_complete_part dup[] = {{2, "a", NULL}, {2, "b", NULL}};
    rc = s3x_xml_build_complete(dup, 2, NULL, &out, &len);
    CHECK(rc == S3X_EINVAL, "duplicate part numbers");
    const s3x_complete_part zero[] = {{0, "a", NULL}};
    rc = s3x_xml_build_complete(zero, 1, NULL, &out, &len);
    CHECK(rc == S3X_EINVAL && strstr(last_msg(), "out of range"), "part number 0: %s", last_msg());
    const s3x_complete_part noetag[] = {{1, NULL, NULL}};
    rc = s3x_xml_build_complete(noetag, 1, NULL, &out, &len);
    CHECK(rc == S3X_EINVAL && strstr(last_msg(), "no ETag"), "NULL ETag: %s", last_msg());
    const s3x_complete_part ctl[] = {{1, "a\x01" "b", NULL}};
    rc = s3x_xml_build_complete(ctl, 1, NULL, &out, &len);
    CHECK(rc == S3X_EINVAL && strstr(last_msg(), "control character"), "control char in ETag: %s", last_msg());

    /* Values XML 1.0 cannot carry are refused, naming the part (issue 11,
     * finding 11: they used to come out as malformed XML). */
    struct {
        const char *what, *etag, *needle;
    } unxml[] = {
        {"invalid UTF-8 byte", "\"ab\xff\"", "not UTF-8 text (byte 0xff at byte 3)"},
        {"lone continuation byte", "\x80", "not UTF-8"},
        {"truncated sequence", "a\xe2\x82", "not UTF-8"},
        {"overlong '/'", "\xc0\xaf", "not UTF-8"},
        {"overlong 3-byte", "\xe0\x80\xaf", "not UTF-8"},
        {"UTF-16 surrogate", "\xed\xa0\x80", "not UTF-8"},
        {"above U+10FFFF", "\xf4\x90\x80\x80", "not UTF-8"},
        {"U+FFFE", "x\xef\xbf\xbe", "U+FFFE at byte 1"},
        {"U+FFFF", "\xef\xbf\xbf", "U+FFFF"},
        {"unit separator", "a\x1f", "control character 0x1f"},
    };
    for (size_t i = 0; i < sizeof unxml / sizeof unxml[0]; i++) {
        const s3x_complete_part p2[] = {{1, "\"ok\"", NULL}, {7, unxml[i].etag, NULL}};
        out = (char *)"sentinel";
        rc = s3x_xml_build_complete(p2, 2, NULL, &out, &len);
        CHECK(rc == S3X_EINVAL && out == NULL, "%s: refused (rc %d)", unxml[i].what, rc);
        CHECK(strstr(last_msg(), unxml[i].needle) && strstr(last_msg(), "ETag of part 7"), "%s: message \"%s\"",
              unxml[i].what, last_msg());
    }
    const s3x_complete_part badck[] = {{2, "\"e\"", "AAA\xef\xbf\xbf"}};
    rc = s3x_xml_build_complete(badck, 1, "ChecksumCRC32C", &out, &len);
    CHECK(rc == S3X_EINVAL && strstr(last_msg(), "ChecksumCRC32C of part 2"), "bad checksum value: %s", last_msg());
    rc = s3x_xml_build_create_bucket("eu\xff", &out, &len);
    CHECK(rc == S3X_EINVAL && strstr(last_msg(), "region"), "bad region: %s", last_msg());

    /* Everything XML can carry goes through and comes back exactly. */
    {
        static const char *const fine[] = {
            "\"caf\xc3\xa9\"",                   /* U+00E9 */
            "\xef\xbf\xbd\xef\xbf\xbc",          /* U+FFFD, U+FFFC: allowed */
            "\xee\x80\x80\xf4\x8f\xbf\xbf",      /* U+E000, U+10FFFF */
            "\xed\x9f\xbf",                     /* U+D7FF, just below the surrogates */
            "tab\there\nLF\rCR\r\n",             /* tab and LF literal, CR as &#13; */
            "\x7f\xc2\x80\xc2\x9f",               /* DEL and C1 controls are XML 1.0 Chars */
            "<&>\"'",
        };
        enum { NF = sizeof fine / sizeof fine[0] };
        s3x_complete_part fp[NF];
        for (int i = 0; i < NF; i++) fp[i] = (s3x_complete_part){i + 1, fine[i], NULL};
        rc = s3x_xml_build_complete(fp, NF, NULL, &out, &len);
        CHECK(rc == 0, "XML-compatible ETags build: %s", rc ? last_msg() : "");
        xmlDocPtr fd = rc == 0 ? xmlReadMemory(out, (int)len, NULL, NULL, XML_PARSE_NONET) : NULL;
        CHECK(fd != NULL, "and the body is well-formed");
        int i = 0;
        for (xmlNodePtr part = fd ? xmlDocGetRootElement(fd)->children : NULL; part; part = part->next, i++) {
            xmlChar *etag = xmlNodeGetContent(part->children->next);
            if (i < NF) CHECK_STREQ((const char *)etag, fine[i], "ETag round trip");
            xmlFree(etag);
        }
        CHECK(i == NF, "all %d parts came back (%d)", NF, i);
        if (fd) xmlFreeDoc(fd);
        if (rc == 0) free(out);
    }

    /* 10000 parts. */
    {
        enum { N = 10000 };
        s3x_complete_part *many = calloc(N, sizeof *many);
        if (CHECK(many != NULL, "alloc")) {
            for (int i = 0; i < N; i++) many[i] = (s3x_complete_part){i + 1, "\"0123456789abcdef0123456789abcdef\"", NULL};
            rc = s3x_xml_build_complete(many, N, NULL, &out, &len);
            CHECK(rc == 0 && out && strstr(out, "<PartNumber>10000</PartNumber>"), "10000-part body");
            free(out);
            rc = s3x_xml_build_complete(many, N + 0, "ChecksumCRC32", &out, &len);
            CHECK(rc == 0 && out && !strstr(out, "ChecksumCRC32"), "NULL checksums are omitted");
            free(out);
        }
        free(many);
    }

    /* CreateBucketConfiguration. */
    out = (char *)"sentinel";
    rc = s3x_xml_build_create_bucket(NULL, &out, &len);
    CHECK(rc == 0 && out == NULL && len == 0, "no body for NULL region");
    out = (char *)"sentinel";
    rc = s3x_xml_build_create_bucket("us-east-1", &out, &len);
    CHECK(rc == 0 && out == NULL && len == 0, "no body for us-east-1");
    rc = s3x_xml_build_create_bucket("eu-west-1", &out, &len);
    CHECK(rc == 0, "create bucket body");
    CHECK_STREQ(out,
                "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                "<LocationConstraint>eu-west-1</LocationConstraint></CreateBucketConfiguration>",
                "CreateBucketConfiguration body");
    CHECK(out && len == strlen(out), "create bucket length");
    free(out);
    rc = s3x_xml_build_create_bucket("a<b", &out, &len);
    CHECK(rc == 0 && out && strstr(out, "a&lt;b"), "region escaped");
    free(out);
}

/* ---- threads ---- */

typedef struct thread_arg {
    char *good;
    size_t good_len;
    int failures;
} thread_arg;

static void *parse_thread(void *p) {
    thread_arg *a = p;
    for (int i = 0; i < 300; i++) {
        s3x_xml_list_parts l;
        memset(&l, 0, sizeof l);
        if (s3x_xml_parse_list_parts(a->good, a->good_len, &l) != 0 || l.nparts != 2 ||
            strcmp(l.parts[1].etag, "\"aaaa18db4cc2f85cedef654fccc4a4x8\"") != 0)
            a->failures++;
        s3x_xml_list_parts_free(&l);
        memset(&l, 0, sizeof l);
        if (s3x_xml_parse_list_parts(a->good, a->good_len / 2, &l) != S3X_EXML ||
            !strstr(s3x_error_last()->message, "truncated"))
            a->failures++;
        s3x_xml_list_parts_free(&l);
        if (s3x_xml_is_error("<Error><Code>x</Code></Error>", 29) != 1) a->failures++;
        if (s3x_xml_is_error("<!DOCTYPE Error [<!ENTITY a \"b\">]><Error>&a;</Error>", 52) != 0) a->failures++;
    }
    s3x_error_clear();
    return NULL;
}

static void test_threads(void) {
    enum { T = 6 };
    size_t len;
    char *xml = read_data("list_parts.xml", &len);
    if (!xml) return;
    pthread_t th[T];
    thread_arg args[T];
    capture_begin();
    int started = 0;
    for (int i = 0; i < T; i++) {
        args[i] = (thread_arg){xml, len, 0};
        if (pthread_create(&th[i], NULL, parse_thread, &args[i]) == 0) started++;
        else break;
    }
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    long n = capture_end();
    CHECK_INTEQ(started, T, "threads started");
    int fails = 0;
    for (int i = 0; i < started; i++) fails += args[i].failures;
    CHECK_INTEQ(fails, 0, "concurrent parse failures");
    CHECK(n == 0, "no stderr output from concurrent parsing (%ld bytes)", n);
    free(xml);
}

int main(void) {
    s3x_xml_init();
    s3x_xml_init(); /* idempotent */
    test_initiate();
    test_complete();
    test_errors();
    test_list_objects();
    test_list_parts();
    test_list_parts_big();
    test_list_uploads();
    test_rejections();
    test_handlers_restored();
    test_build();
    test_threads();
    s3x_error_clear();
    return tap_summary("test_xml");
}
