/* The decisions of a ranged download (see range.h). Everything here is
 * arithmetic on values a server sent, so each number is parsed without
 * overflow, bounded to S3's 5 TiB before it is used, and compared with what
 * was asked rather than trusted. */
#include "range.h"
#include "error.h"
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* 1*DIGIT at p (up to e); *pp is moved past the digits. No sign, no spaces:
 * strtoll would take "+5", " 5" and "-0" and saturate on overflow. */
static int parse_digits(const char **pp, const char *e, int64_t *out) {
    const char *p = *pp;
    int64_t v = 0;
    if (p >= e || *p < '0' || *p > '9') return -1;
    for (; p < e && *p >= '0' && *p <= '9'; p++) {
        int d = *p - '0';
        if (v > (INT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    *pp = p;
    *out = v;
    return 0;
}

int s3x_crange_parse(const char *v, size_t n, s3x_crange *out) {
    if (!v) return -1;
    const char *p = v, *e = v + n;
    if (n < 6 || strncasecmp(p, "bytes", 5) != 0 || p[5] != ' ') return -1;
    p += 6;
    s3x_crange c = {-1, -1, -1};
    if (p < e && *p == '*') {
        /* unsatisfied-range: "*" "/" complete-length */
        p++;
        if (p >= e || *p++ != '/' || parse_digits(&p, e, &c.total) || p != e) return -1;
        *out = c;
        return 0;
    }
    if (parse_digits(&p, e, &c.first) || p >= e || *p++ != '-' || parse_digits(&p, e, &c.last)) return -1;
    if (p >= e || *p++ != '/') return -1;
    if (p < e && *p == '*') p++;
    else if (parse_digits(&p, e, &c.total)) return -1;
    if (p != e) return -1;
    if (c.first > c.last) return -1;
    if (c.total >= 0 && c.last >= c.total) return -1;
    *out = c;
    return 0;
}

int s3x_content_length_parse(const char *v, size_t n, int64_t *out) {
    if (!v) return -1;
    const char *p = v, *e = v + n;
    int64_t x;
    if (parse_digits(&p, e, &x) || p != e) return -1;
    *out = x;
    return 0;
}

/* Server text in a message: printable ASCII kept, the rest as \xNN, at most
 * about 80 bytes, so a header cannot write escape sequences to a terminal
 * or flood a log through an error message. */
static const char *show(const char *s, char *buf, size_t cap) {
    size_t o = 0;
    if (!s) return "(none)";
    for (size_t i = 0; s[i] && o + 8 < cap; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (i >= 80) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        if (ch >= 0x20 && ch < 0x7f && ch != '\\') buf[o++] = (char)ch;
        else o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", ch);
    }
    buf[o] = '\0';
    return buf;
}

int s3x_dlplan_init(s3x_dlplan *p, int64_t part_size, int64_t capacity) {
    memset(p, 0, sizeof *p);
    if (part_size < 1 || part_size > S3X_MAX_OBJECT_SIZE)
        return s3x_seterr(S3X_EINVAL, "part size %" PRId64 " is out of range", part_size);
    p->part_size = part_size;
    p->capacity = capacity < 0 ? -1 : capacity;
    p->total = -1;
    p->nranges = 0;
    return 0;
}

s3x_dlask s3x_dlplan_probe(const s3x_dlplan *p) {
    s3x_dlask a = {1, 1, 0, p->part_size - 1};
    return a;
}

s3x_dlask s3x_dlplan_probe_whole(const s3x_dlplan *p) {
    /* Still at most part_size bytes: the answer lands in the probe's buffer. */
    s3x_dlask a = {1, 0, 0, p->part_size - 1};
    return a;
}

s3x_dlask s3x_dlplan_range(const s3x_dlplan *p, int64_t index) {
    s3x_dlask a = {0, 1, 0, -1};
    if (p->total < 0 || index < 0 || index >= p->nranges) return a;
    /* index < nranges = ceil(total / part_size): no overflow below total. */
    a.first = index * p->part_size;
    a.last = p->total - a.first > p->part_size ? a.first + p->part_size - 1 : p->total - 1;
    return a;
}

int s3x_dlplan_empty_probe(const s3x_dlplan *p, const s3x_dlask *ask, const s3x_dlresp *resp) {
    if (p->total >= 0 || !ask->probe || !ask->ranged || resp->status != 416) return 0;
    /* S3 and SeaweedFS say "bytes * /0" (no spaces) here; some servers say
     * nothing. A 416 that states a size above zero contradicts itself: bytes
     * 0-... of a non-empty object are always satisfiable. */
    s3x_crange c;
    if (resp->content_range && s3x_crange_parse(resp->content_range, strlen(resp->content_range), &c) == 0 &&
        c.total > 0)
        return s3x_seterr(S3X_ENETWORK,
                          "the server answered bytes 0-%" PRId64 " with 416 (not satisfiable) although it says the "
                          "object has %" PRId64 " bytes",
                          ask->last, c.total);
    return 1;
}

/* The opaque part of an ETag: a proxy may weaken one (W/"..."), which
 * still names the same version of the object. */
static const char *etag_core(const char *e, size_t *len) {
    size_t n = strlen(e);
    if (n >= 2 && e[0] == 'W' && e[1] == '/') e += 2, n -= 2;
    *len = n;
    return e;
}

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = UINT64_C(14695981039346656037);
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= UINT64_C(1099511628211);
    }
    return h;
}

static int etag_differs(const s3x_dlplan *p, const char *etag) {
    if (!p->etag_len || !etag || !*etag) return 0;
    size_t la, lb;
    const char *a = etag_core(p->etag, &la), *b = etag_core(etag, &lb);
    (void)la; /* of the stored prefix; the whole length is below */
    size_t whole = p->etag_len - (size_t)(a - p->etag);
    if (whole != lb || fnv1a(b, lb) != p->etag_hash) return 1;
    /* The stored prefix, compared byte for byte. */
    return strncmp(a, b, strlen(a)) != 0;
}

int s3x_dlplan_check(const s3x_dlplan *p, const s3x_dlask *ask, const s3x_dlresp *resp, s3x_dlverdict *v) {
    char b1[400], b2[400];
    const int64_t max = S3X_MAX_OBJECT_SIZE;
    s3x_dlverdict out = {0, 0, 0};
    if (ask->first < 0 || ask->last < ask->first)
        return s3x_seterr(S3X_EINTERNAL, "checking a response to an invalid range %" PRId64 "-%" PRId64, ask->first,
                          ask->last);
    if (!ask->probe && p->total < 0)
        return s3x_seterr(S3X_EINTERNAL, "a range was requested before the object's size was known");

    /* A 200 that carries a Content-Range is read as the 206 it should have
     * been, with all of a 206's checks: `rclone serve s3` (v1.75) answers a
     * ranged GET so. Read as a whole object, its first part would pass for
     * the whole of a larger object. */
    long status = resp->status;
    if (status == 200 && ask->ranged && resp->content_range) status = 206;
    if (status == 200) {
        /* The whole object in one 200 is accepted only as the probe's answer,
         * and only when it is no larger than the probe asked for: then it is
         * exactly bytes 0..T-1 with T <= part_size, the same bytes a 206 would
         * carry. A larger 200 means the server ignored Range. Taking it would
         * pour the whole object through one connection into a destination
         * planned in part_size pieces (a stream holds one range per buffer),
         * with no parallelism, and a retry would start from byte 0; rather
         * than keep a second path for broken servers, it is refused with a
         * message that names the problem. A 200 to a later range is refused
         * for the same reason. */
        if (!ask->probe)
            return s3x_seterr(S3X_ENETWORK,
                              "the server ignored the Range header (HTTP 200 to a request for bytes %" PRId64
                              "-%" PRId64 ")",
                              ask->first, ask->last);
        if (resp->content_length < 0)
            return s3x_seterr(S3X_ENETWORK, "the response (HTTP 200) did not say the object's size (no Content-Length)");
        if (resp->content_length > max)
            return s3x_seterr(S3X_ELIMIT,
                              "the server says the object is %" PRId64 " bytes, more than the %" PRId64
                              " bytes (5 TiB) S3 allows; refused",
                              resp->content_length, max);
        if (resp->content_length > ask->last + 1) {
            if (ask->ranged)
                return s3x_seterr(S3X_ENETWORK,
                                  "the server ignored the Range header (HTTP 200 with the whole %" PRId64
                                  "-byte object to a request for bytes 0-%" PRId64 ")",
                                  resp->content_length, ask->last);
            return s3x_seterr(S3X_ECHANGED,
                              "the object changed during the download (the server first said it was empty, now "
                              "it sends %" PRId64 " bytes); try again",
                              resp->content_length);
        }
        out.offset = 0;
        out.length = resp->content_length;
        out.total = resp->content_length;
    } else if (status == 206) {
        s3x_crange c;
        if (!ask->ranged)
            return s3x_seterr(S3X_ENETWORK, "the server sent a partial answer (HTTP 206) to a request without Range");
        if (!resp->content_range)
            return s3x_seterr(S3X_ENETWORK, "a partial answer (HTTP 206) to bytes %" PRId64 "-%" PRId64
                              " has no Content-Range", ask->first, ask->last);
        if (s3x_crange_parse(resp->content_range, strlen(resp->content_range), &c) || c.first < 0)
            return s3x_seterr(S3X_ENETWORK, "invalid Content-Range \"%s\" in the answer to bytes %" PRId64 "-%" PRId64,
                              show(resp->content_range, b1, sizeof b1), ask->first, ask->last);
        if (c.total < 0)
            return s3x_seterr(S3X_ENETWORK, "Content-Range \"%s\" does not say the object's size",
                              show(resp->content_range, b1, sizeof b1));
        if (c.total > max)
            return s3x_seterr(S3X_ELIMIT,
                              "the server says the object is %" PRId64 " bytes, more than the %" PRId64
                              " bytes (5 TiB) S3 allows; refused",
                              c.total, max);
        if (!ask->probe && c.total != p->total)
            return s3x_seterr(S3X_ECHANGED,
                              "the object's size changed during the download: first %" PRId64 " bytes, now %" PRId64
                              " (Content-Range \"%s\")",
                              p->total, c.total, show(resp->content_range, b1, sizeof b1));
        /* The probe asks for 0..part_size-1 and gets min(part_size, T) bytes. */
        int64_t want_last = ask->probe && c.total - 1 < ask->last ? c.total - 1 : ask->last;
        if (c.first != ask->first || c.last != want_last)
            return s3x_seterr(S3X_ENETWORK,
                              "asked for bytes %" PRId64 "-%" PRId64 " of the %" PRId64
                              "-byte object, the server sent bytes %" PRId64 "-%" PRId64 " (Content-Range \"%s\")",
                              ask->first, want_last, c.total, c.first, c.last,
                              show(resp->content_range, b1, sizeof b1));
        int64_t len = c.last - c.first + 1;
        if (resp->content_length >= 0 && resp->content_length != len)
            return s3x_seterr(S3X_ENETWORK,
                              "Content-Length %" PRId64 " disagrees with Content-Range \"%s\" (%" PRId64 " bytes)",
                              resp->content_length, show(resp->content_range, b1, sizeof b1), len);
        out.offset = c.first;
        out.length = len;
        out.total = c.total;
    } else {
        return s3x_seterr(S3X_ENETWORK, "unexpected HTTP %ld to a GET of bytes %" PRId64 "-%" PRId64, resp->status,
                          ask->first, ask->last);
    }
    if (!ask->probe && etag_differs(p, resp->etag))
        return s3x_seterr(S3X_ECHANGED, "the object changed during the download: its ETag was %s, now %s",
                          show(p->etag, b1, sizeof b1), show(resp->etag, b2, sizeof b2));
    if (ask->probe && p->capacity >= 0 && out.total > p->capacity)
        return s3x_seterr(S3X_ELIMIT, "the object is %" PRId64 " bytes, larger than the %" PRId64 "-byte buffer",
                          out.total, p->capacity);
    *v = out;
    return 0;
}

int s3x_dlplan_check_whole(const s3x_dlplan *p, int64_t content_length, const char *etag) {
    char b1[400], b2[400];
    if (p->total < 0) return s3x_seterr(S3X_EINTERNAL, "a HEAD was checked before the object's size was known");
    if (content_length >= 0 && content_length != p->total)
        return s3x_seterr(S3X_ECHANGED,
                          "the object's size changed during the download: first %" PRId64 " bytes, now %" PRId64
                          " (HEAD)",
                          p->total, content_length);
    if (etag_differs(p, etag))
        return s3x_seterr(S3X_ECHANGED, "the object changed during the download: its ETag was %s, now %s (HEAD)",
                          show(p->etag, b1, sizeof b1), show(etag, b2, sizeof b2));
    return 0;
}

int s3x_dlplan_body(const s3x_dlverdict *v, int64_t got, size_t n) {
    if (got < 0 || got > v->length || (uint64_t)n > (uint64_t)(v->length - got))
        return s3x_seterr(S3X_ENETWORK,
                          "the server sent more than the %" PRId64 " bytes of bytes %" PRId64 "-%" PRId64
                          "; the rest was not used",
                          v->length, v->offset, v->offset + v->length - 1);
    return 0;
}

int s3x_dlplan_complete(const s3x_dlverdict *v, int64_t got) {
    if (got == v->length) return 0;
    if (got > v->length)
        return s3x_seterr(S3X_ENETWORK, "the server sent %" PRId64 " bytes for the %" PRId64 " bytes of bytes %" PRId64
                          "-%" PRId64, got, v->length, v->offset, v->offset + v->length - 1);
    return s3x_seterr(S3X_ENETWORK, "the body ended after %" PRId64 " of the %" PRId64 " bytes of bytes %" PRId64
                      "-%" PRId64, got, v->length, v->offset, v->offset + v->length - 1);
}

int s3x_dlplan_learn(s3x_dlplan *p, const s3x_dlverdict *v, const char *etag) {
    if (v->total < 0 || v->total > S3X_MAX_OBJECT_SIZE)
        return s3x_seterr(S3X_EINTERNAL, "learning an unchecked object size %" PRId64, v->total);
    int64_t n = v->total == 0 ? 1 : (v->total - 1) / p->part_size + 1;
    if (n > INT_MAX)
        return s3x_seterr(S3X_ELIMIT, "a %" PRId64 "-byte object in %" PRId64 "-byte ranges takes more than %d ranges",
                          v->total, p->part_size, INT_MAX);
    p->total = v->total;
    p->nranges = n;
    p->etag[0] = '\0';
    p->etag_len = 0;
    p->etag_hash = 0;
    if (etag) {
        size_t len = strlen(etag), core_len;
        size_t keep = len < sizeof p->etag ? len : sizeof p->etag - 1;
        memcpy(p->etag, etag, keep);
        p->etag[keep] = '\0';
        p->etag_len = len;
        const char *core = etag_core(etag, &core_len);
        p->etag_hash = fnv1a(core, core_len);
    }
    return 0;
}

int s3x_dlplan_finish(const s3x_dlplan *p, int64_t done) {
    if (p->total < 0) return s3x_seterr(S3X_ENETWORK, "the download ended before the object's size was known");
    if (done != p->total)
        return s3x_seterr(S3X_ENETWORK, "received %" PRId64 " of the object's %" PRId64 " bytes", done, p->total);
    return 0;
}
