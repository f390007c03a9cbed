/* Content-Range and Content-Length parsing (core/src/proto/range.c). The input is
 * a header value as the header callback hands it over (not NUL-terminated).
 *
 * Properties, checked against a second implementation written differently
 * (it strips leading zeros and compares digit strings with INT64_MAX's
 * instead of multiplying):
 * - s3x_crange_parse accepts exactly "bytes A-B/T", "bytes A-B/" '*' and
 *   "bytes " '*' "/T" with the unit in any case, decimal digits only, every
 *   number <= INT64_MAX, A <= B and B < T; it reads nothing past the length
 *   given, leaves its output untouched on refusal, and the values it returns
 *   are the values written;
 * - an accepted value printed in canonical form parses back to the same;
 * - s3x_content_length_parse accepts exactly 1*DIGIT <= INT64_MAX;
 * - s3x_content_range_total agrees with the parser on NUL-free input. */
#include "fuzz.h"
#include "client_internal.h"
#include "range.h"
#include <inttypes.h>
#include <strings.h>

/* A run of digits as a number, or -2 when it does not fit int64_t. */
static int64_t ref_number(const char *s, size_t n) {
    while (n > 1 && *s == '0') s++, n--;
    static const char max[] = "9223372036854775807";
    if (n > sizeof max - 1 || (n == sizeof max - 1 && memcmp(s, max, n) > 0)) return -2;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) v = v * 10 + (s[i] - '0');
    return v;
}

/* The length of the run of digits at s (up to e). */
static size_t digits(const char *s, const char *e) {
    size_t k = 0;
    while (s + k < e && s[k] >= '0' && s[k] <= '9') k++;
    return k;
}

/* The reference Content-Range parser: 0 and the fields, or -1. */
static int ref_crange(const char *v, size_t n, int64_t *first, int64_t *last, int64_t *total) {
    const char *e = v + n;
    if (n < 6 || strncasecmp(v, "bytes ", 6) != 0) return -1;
    const char *p = v + 6;
    *first = *last = *total = -1;
    if (p < e && *p == '*') {
        if (e - p < 3 || p[1] != '/') return -1;
        size_t k = digits(p + 2, e);
        if (!k || p + 2 + k != e) return -1;
        *total = ref_number(p + 2, k);
        return *total == -2 ? -1 : 0;
    }
    size_t ka = digits(p, e);
    if (!ka || p + ka >= e || p[ka] != '-') return -1;
    const char *b = p + ka + 1;
    size_t kb = digits(b, e);
    if (!kb || b + kb >= e || b[kb] != '/') return -1;
    const char *t = b + kb + 1;
    *first = ref_number(p, ka);
    *last = ref_number(b, kb);
    if (*first == -2 || *last == -2) return -1;
    if (t + 1 == e && *t == '*') {
        *total = -1;
    } else {
        size_t kt = digits(t, e);
        if (!kt || t + kt != e) return -1;
        *total = ref_number(t, kt);
        if (*total == -2) return -1;
    }
    if (*first > *last) return -1;
    if (*total >= 0 && *last >= *total) return -1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* An exact-size copy: any read past the length given is an ASan report
     * (one byte, zeroed, for the empty input). */
    char *v = malloc(size ? size : 1);
    if (!v) abort();
    v[0] = '\0';
    if (size) memcpy(v, data, size);
    s3x_crange c = {-7, -8, -9};
    int rc = s3x_crange_parse(v, size, &c);
    int64_t f, l, t;
    int ref = ref_crange(v, size, &f, &l, &t);
    FUZZ_ASSERT(rc == ref, "parser says %d, reference says %d", rc, ref);
    if (rc == 0) {
        FUZZ_ASSERT(c.first == f && c.last == l && c.total == t,
                    "parsed %" PRId64 "-%" PRId64 "/%" PRId64 ", reference %" PRId64 "-%" PRId64 "/%" PRId64, c.first,
                    c.last, c.total, f, l, t);
        /* The shapes the header can take, and nothing else. */
        if (c.first < 0) FUZZ_ASSERT(c.last == -1 && c.first == -1 && c.total >= 0, "unsatisfied form");
        else FUZZ_ASSERT(c.first <= c.last && (c.total == -1 || c.last < c.total), "range form");
        /* Canonical form round trip. */
        char canon[96];
        if (c.first < 0) snprintf(canon, sizeof canon, "bytes */%" PRId64, c.total);
        else if (c.total < 0) snprintf(canon, sizeof canon, "bytes %" PRId64 "-%" PRId64 "/*", c.first, c.last);
        else snprintf(canon, sizeof canon, "bytes %" PRId64 "-%" PRId64 "/%" PRId64, c.first, c.last, c.total);
        s3x_crange d = {0, 0, 0};
        FUZZ_ASSERT(s3x_crange_parse(canon, strlen(canon), &d) == 0 && d.first == c.first && d.last == c.last &&
                        d.total == c.total,
                    "canonical form \"%s\" does not round-trip", canon);
    } else {
        FUZZ_ASSERT(c.first == -7 && c.last == -8 && c.total == -9, "output changed on refusal");
    }

    /* Content-Length: exactly the digits, bounded. */
    int64_t cl = -5;
    int crc = s3x_content_length_parse(v, size, &cl);
    size_t k = digits(v, v + size);
    int64_t want = (k && k == size) ? ref_number(v, k) : -2;
    FUZZ_ASSERT(crc == (want >= 0 ? 0 : -1), "Content-Length verdict %d for a value the reference reads as %" PRId64,
                crc, want);
    FUZZ_ASSERT(crc ? cl == -5 : cl == want, "Content-Length %" PRId64 ", expected %" PRId64, cl, want);

    /* The total as http.c and ops.c read it (NUL-terminated, no NUL inside). */
    if (!memchr(v, 0, size)) {
        char *z = malloc(size + 1);
        if (!z) abort();
        memcpy(z, v, size);
        z[size] = '\0';
        int64_t tot = s3x_content_range_total(z);
        FUZZ_ASSERT(tot == (rc == 0 ? c.total : -1), "s3x_content_range_total %" PRId64 " disagrees", tot);
        free(z);
    }
    free(v);
    return 0;
}
