/* Every S3 XML response parser in s3xml.h. The first byte picks the parser,
 * the rest is the document. Beyond memory safety (ASan/UBSan), it checks the
 * contract s3xml.h states (the copy and DeleteObjects results included): 0, S3X_EXML or S3X_ENOMEM; after a failure the
 * out structure is empty; after success every documented field is set and in
 * range; and s3x_xml_is_error agrees with s3x_xml_parse_error. */
#include "fuzz.h"
#include "error.h"
#include "s3xml.h"

static int all_zero(const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i]) return 0;
    return 1;
}

static void check_rc(int rc, const char *what) {
    FUZZ_ASSERT(rc == 0 || rc == S3X_EXML || rc == S3X_ENOMEM, "%s returned %d", what, rc);
    if (rc) FUZZ_ASSERT(s3x_error_last()->code == rc && s3x_error_last()->message[0], "%s: no error message", what);
}

static void fuzz_error(const char *x, size_t n) {
    s3x_xml_error e;
    memset(&e, 0, sizeof e);
    int rc = s3x_xml_parse_error(x, n, &e);
    check_rc(rc, "parse_error");
    int is = s3x_xml_is_error(x, n);
    if (rc == 0) {
        FUZZ_ASSERT(e.code && e.message && e.request_id && e.resource, "Error fields are NULL");
        FUZZ_ASSERT(is == 1, "parse_error accepted it but is_error says %d", is);
    } else {
        FUZZ_ASSERT(all_zero(&e, sizeof e), "Error not cleared after a failure");
        if (rc == S3X_EXML) FUZZ_ASSERT(is == 0, "parse_error refused it (%s) but is_error says 1", s3x_error_last()->message);
    }
    s3x_xml_error_free(&e);
}

static void fuzz_initiate(const char *x, size_t n) {
    char *id = (char *)"sentinel";
    int rc = s3x_xml_parse_initiate(x, n, &id);
    check_rc(rc, "parse_initiate");
    if (rc == 0) FUZZ_ASSERT(id && *id, "empty UploadId accepted");
    else FUZZ_ASSERT(id == NULL, "UploadId not NULL after a failure");
    free(id);
}

static void fuzz_complete(const char *x, size_t n) {
    s3x_xml_complete c;
    memset(&c, 0, sizeof c);
    int rc = s3x_xml_parse_complete(x, n, &c);
    check_rc(rc, "parse_complete");
    if (rc == 0) FUZZ_ASSERT(c.etag && *c.etag && c.location && c.bucket && c.key, "Complete fields");
    else FUZZ_ASSERT(all_zero(&c, sizeof c), "Complete not cleared after a failure");
    s3x_xml_complete_free(&c);
}

static void fuzz_list_objects(const char *x, size_t n) {
    s3x_xml_list_objects l;
    memset(&l, 0, sizeof l);
    int rc = s3x_xml_parse_list_objects(x, n, &l);
    check_rc(rc, "parse_list_objects");
    if (rc == 0) {
        for (size_t i = 0; i < l.nobjects; i++) {
            const s3x_xml_object *o = &l.objects[i];
            FUZZ_ASSERT(o->key && o->etag && o->last_modified && o->storage_class, "object %zu fields", i);
            FUZZ_ASSERT(o->size >= 0, "object %zu size %lld", i, (long long)o->size);
        }
        for (size_t i = 0; i < l.nprefixes; i++) FUZZ_ASSERT(l.common_prefixes[i], "prefix %zu", i);
        FUZZ_ASSERT(!l.is_truncated || (l.next_continuation_token && *l.next_continuation_token),
                    "truncated without a token");
        FUZZ_ASSERT(!l.next_continuation_token || *l.next_continuation_token, "empty token kept");
        FUZZ_ASSERT(l.key_count >= 0, "key count %lld", (long long)l.key_count);
    } else {
        FUZZ_ASSERT(all_zero(&l, sizeof l), "ListObjects not cleared after a failure");
    }
    s3x_xml_list_objects_free(&l);
}

static void fuzz_list_parts(const char *x, size_t n) {
    s3x_xml_list_parts l;
    memset(&l, 0, sizeof l);
    int rc = s3x_xml_parse_list_parts(x, n, &l);
    check_rc(rc, "parse_list_parts");
    if (rc == 0) {
        for (size_t i = 0; i < l.nparts; i++) {
            const s3x_xml_part *p = &l.parts[i];
            FUZZ_ASSERT(p->part_number >= 1 && p->part_number <= 10000, "part number %d", p->part_number);
            FUZZ_ASSERT(p->etag && p->last_modified && p->size >= 0, "part %zu fields", i);
        }
        FUZZ_ASSERT(l.next_part_number_marker >= 0 && l.next_part_number_marker <= 10000, "marker %d",
                    l.next_part_number_marker);
        FUZZ_ASSERT(!l.is_truncated || l.next_part_number_marker > 0, "truncated without a marker");
    } else {
        FUZZ_ASSERT(all_zero(&l, sizeof l), "ListParts not cleared after a failure");
    }
    s3x_xml_list_parts_free(&l);
}

static void fuzz_list_uploads(const char *x, size_t n) {
    s3x_xml_list_uploads l;
    memset(&l, 0, sizeof l);
    int rc = s3x_xml_parse_list_uploads(x, n, &l);
    check_rc(rc, "parse_list_uploads");
    if (rc == 0) {
        for (size_t i = 0; i < l.nuploads; i++)
            FUZZ_ASSERT(l.uploads[i].key && l.uploads[i].upload_id && l.uploads[i].initiated, "upload %zu", i);
        FUZZ_ASSERT(!l.is_truncated || l.next_key_marker, "truncated without a key marker");
        FUZZ_ASSERT(!l.next_key_marker || *l.next_key_marker, "empty key marker kept");
    } else {
        FUZZ_ASSERT(all_zero(&l, sizeof l), "ListMultipartUploads not cleared after a failure");
    }
    s3x_xml_list_uploads_free(&l);
}

static void fuzz_copy_result(const char *x, size_t n) {
    static const char *const roots[] = {"CopyObjectResult", "CopyPartResult"};
    for (int i = 0; i < 2; i++) {
        s3x_xml_copy c;
        memset(&c, 0, sizeof c);
        int rc = s3x_xml_parse_copy(x, n, roots[i], &c);
        check_rc(rc, "parse_copy");
        if (rc == 0) {
            FUZZ_ASSERT(c.etag && *c.etag, "copy result without an ETag accepted");
            FUZZ_ASSERT(!c.checksum == !c.checksum_name, "checksum and its name disagree");
            FUZZ_ASSERT(!c.checksum || *c.checksum, "empty checksum kept");
        } else {
            FUZZ_ASSERT(all_zero(&c, sizeof c), "copy result not cleared after a failure");
        }
        s3x_xml_copy_free(&c);
    }
}

static void fuzz_delete_result(const char *x, size_t n) {
    s3x_xml_delete_result d;
    memset(&d, 0, sizeof d);
    int rc = s3x_xml_parse_delete_result(x, n, &d);
    check_rc(rc, "parse_delete_result");
    if (rc == 0) {
        FUZZ_ASSERT(d.n <= S3X_XML_DELETE_MAX, "%zu entries", d.n);
        for (size_t i = 0; i < d.n; i++) {
            const s3x_xml_deleted *e = &d.entries[i];
            FUZZ_ASSERT(e->key, "entry %zu has no key", i);
            if (e->ok) FUZZ_ASSERT(!e->code && !e->message, "deleted entry %zu has an error", i);
            else FUZZ_ASSERT(e->code && *e->code && e->message, "error entry %zu without code", i);
        }
    } else {
        FUZZ_ASSERT(all_zero(&d, sizeof d), "DeleteResult not cleared after a failure");
    }
    s3x_xml_delete_result_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    /* The rest of the input as its own exact-size buffer: the parsers take a
     * length, not a NUL-terminated string, and must not read past it. */
    char *x = fuzz_copy(data + 1, size - 1);
    size_t n = size - 1;
    /* % 8: the corpus's selectors '0'..'5' pick the same parsers as before. */
    switch (data[0] % 8) {
    case 0: fuzz_error(x, n); break;
    case 1: fuzz_initiate(x, n); break;
    case 2: fuzz_complete(x, n); break;
    case 3: fuzz_list_objects(x, n); break;
    case 4: fuzz_list_parts(x, n); break;
    case 5: fuzz_list_uploads(x, n); break;
    case 6: fuzz_copy_result(x, n); break;
    default: fuzz_delete_result(x, n); break;
    }
    free(x);
    return 0;
}
