/* The HTTP response header callback (on_header in core/src/net/http.c, through
 * s3x_http_parse_header_line). The input is split into lines after each LF,
 * as curl hands them over (the LF kept), and fed in order to one request.
 *
 * curl hands the callback whole lines only, each ending in LF (it builds
 * "name: value\r\n" lines itself for HTTP/2), and the buffer is not
 * NUL-terminated: the target does the same, ending a last line that has no
 * LF with one. (It found the status line's strtol reading past the line:
 * "HTTP/1.1 \r\n" made it skip the CR LF as blanks.) A line with a NUL byte
 * is skipped: curl fails the transfer on one ("Nul byte in header").
 *
 * Properties: every field it keeps (ETag, request id, Content-Range,
 * Content-Type, Last-Modified, version id, checksum) is a copy of the last
 * such header's value, with no LF inside, no leading blank and no trailing
 * blank or CR; Content-Length is -1 or a length; a checksum kind is only set
 * with its value; a status line resets the lengths. User metadata headers
 * (x-amz-meta-*, kept as a copy's HeadObject asks) are "name\0value\0"
 * pairs, names lowercased, values trimmed as the fields are, within the
 * bound, or the overflow flag is set. */
#include "fuzz.h"
#include "client_internal.h"
#include "error.h"

#include <strings.h>

static void check_field(const char *f, const char *name) {
    if (!f) return;
    size_t n = strlen(f);
    FUZZ_ASSERT(!strchr(f, '\n'), "%s holds a LF", name);
    FUZZ_ASSERT(!n || (f[0] != ' ' && f[0] != '\t'), "%s starts with a blank", name);
    FUZZ_ASSERT(!n || (f[n - 1] != ' ' && f[n - 1] != '\r'), "%s ends with a blank or CR", name);
}

static void free_fields(s3x_http_req *r) {
    char **f[] = {&r->etag, &r->request_id, &r->content_range, &r->content_type, &r->last_modified, &r->version_id,
                  &r->checksum_value, &r->server};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        free(*f[i]);
        *f[i] = NULL;
    }
    s3x_buf_free(&r->resp_body);
    s3x_buf_free(&r->meta);
}

static void check_meta(const s3x_http_req *r) {
    const char *m = r->meta.data;
    size_t len = r->meta.len;
    FUZZ_ASSERT(len <= 8192, "metadata of %zu bytes kept", len);
    for (size_t off = 0; off < len;) {
        const char *name = m + off, *end = memchr(name, 0, len - off);
        FUZZ_ASSERT(end, "metadata name not terminated");
        FUZZ_ASSERT(!strncmp(name, "x-amz-meta-", 11), "metadata name %.40s", name);
        for (const char *c = name; c < end; c++) FUZZ_ASSERT(*c < 'A' || *c > 'Z', "metadata name not lowercased");
        off = (size_t)(end - m) + 1;
        FUZZ_ASSERT(off < len, "metadata name without a value");
        const char *value = m + off;
        end = memchr(value, 0, len - off);
        FUZZ_ASSERT(end, "metadata value not terminated");
        check_field(value, "metadata value");
        off = (size_t)(end - m) + 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    s3x_http_req r;
    memset(&r, 0, sizeof r);
    r.content_length = -1;
    r.want_meta = 1;
    size_t pos = 0;
    while (pos < size) {
        const uint8_t *lf = memchr(data + pos, '\n', size - pos);
        size_t take = lf ? (size_t)(lf - (data + pos)) + 1 : size - pos, n = take;
        char *line = malloc(take + 1); /* exact size: no NUL after it, as from curl */
        if (!line) abort();
        memcpy(line, data + pos, take);
        if (!lf) line[n++] = '\n';
        if (memchr(line, '\0', n)) {
            free(line);
            pos += take;
            continue;
        }
        int is_status = n >= 5 && !memcmp(line, "HTTP/", 5);
        int is_etag = n > 5 && !strncasecmp(line, "etag:", 5);
        (void)s3x_http_parse_header_line(&r, line, n);
        free(line);
        pos += take;
        check_field(r.etag, "etag");
        check_field(r.request_id, "request id");
        check_field(r.content_range, "content-range");
        check_field(r.content_type, "content-type");
        check_field(r.last_modified, "last-modified");
        check_field(r.version_id, "version id");
        check_field(r.checksum_value, "checksum");
        check_meta(&r);
        FUZZ_ASSERT(r.content_length >= -1, "content length %lld", (long long)r.content_length);
        FUZZ_ASSERT((r.checksum_kind == 0) == (r.checksum_value == NULL), "checksum kind %d without a value",
                    r.checksum_kind);
        FUZZ_ASSERT(r.checksum_kind == 0 || r.checksum_kind == S3X_CHECKSUM_CRC32C ||
                        r.checksum_kind == S3X_CHECKSUM_CRC32 || r.checksum_kind == S3X_CHECKSUM_SHA256,
                    "checksum kind %d", r.checksum_kind);
        if (is_status) FUZZ_ASSERT(r.got_status && r.content_length == -1, "a status line must reset the length");
        if (is_etag) FUZZ_ASSERT(r.etag != NULL, "an ETag header was not kept");
    }
    free_fields(&r);
    return 0;
}
