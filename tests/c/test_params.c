/* Knobs: the table (names, ranges, defaults, scopes), range and scope checks
 * with messages that name the knob, the setters of the upload manager, and
 * the upload part-size planner (at most 10,000 parts, at most 5 GiB). */
#include "params_internal.h"
#include "s3xfer/s3xfer.h"
#include "tap.h"

/* tap.h's CHECK_INTEQ evaluates `actual` twice (once for the test, once for
 * the message), which repeats side effects; this one evaluates it once. */
static int check_eq(long long actual, long long expected, const char *file, int line, const char *what) {
    return tap_check(actual == expected, file, line, "%s: expected %lld, got %lld", what, expected, actual);
}
#define CHECK_EQ(actual, expected, what) \
    check_eq((long long)(actual), (long long)(expected), __FILE__, __LINE__, (what))

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MiB (1024LL * 1024LL)
#define GiB (1024LL * MiB)
#define TiB (1024LL * GiB)

static int contains(const char *s, const char *sub) { return s && sub && strstr(s, sub) != NULL; }

/* ---- the table -------------------------------------------------------------- */

static void test_table(void) {
    const char *names[S3X_PARAM__COUNT];
    for (int i = 0; i < S3X_PARAM__COUNT; i++) {
        s3x_param p = (s3x_param)i;
        const char *n = s3x_param_name(p);
        names[i] = n;
        if (!CHECK(n != NULL && *n, "knob %d has a name", i)) continue;
        int ident = 1;
        for (const char *c = n; *c; c++)
            if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) ident = 0;
        CHECK(ident, "knob %d name \"%s\" is a lower-case identifier", i, n);
        int64_t lo = 99, hi = -99;
        CHECK_EQ(s3x_param_bounds(p, &lo, &hi), 0, "s3x_param_bounds on a known knob");
        int64_t def = s3x_param_default(p);
        CHECK(lo <= def && def <= hi, "%s: lo %" PRId64 " <= default %" PRId64 " <= hi %" PRId64, n, lo, def, hi);
        const s3x_param_info *pi = s3x_param_info_get(p);
        CHECK(pi && pi->lo == lo && pi->hi == hi && pi->def == def, "%s: info matches the public queries", n);
        CHECK(pi && pi->scope != 0 &&
                  (pi->scope & ~(unsigned)(S3X_SCOPE_CLIENT | S3X_SCOPE_UPLOAD | S3X_SCOPE_DOWNLOAD |
                                           S3X_SCOPE_BATCH)) == 0,
              "%s: applies to some handle and only to known ones", n);
        /* Default, lo and hi pass the check for the knob's own scope(s). */
        for (unsigned sc = 1; sc <= S3X_SCOPE_BATCH; sc <<= 1) {
            if (!pi || !(pi->scope & sc)) continue;
            CHECK(s3x_param_check(p, lo, sc) == 0 && s3x_param_check(p, hi, sc) == 0 &&
                      s3x_param_check(p, def, sc) == 0,
                  "%s: lo, hi and default accepted in scope %u", n, sc);
        }
        /* Bounds with NULL out-params. */
        CHECK_EQ(s3x_param_bounds(p, NULL, NULL), 0, "bounds with NULL out-params");
    }
    for (int i = 0; i < S3X_PARAM__COUNT; i++)
        for (int j = i + 1; j < S3X_PARAM__COUNT; j++)
            CHECK(!(names[i] && names[j] && strcmp(names[i], names[j]) == 0), "knobs %d and %d share name %s", i, j,
                  names[i]);

    /* Defaults and ranges documented in params.h. */
    struct {
        s3x_param p;
        int64_t lo, hi, def;
    } doc[] = {
        {S3X_PARAM_ADDRESSING_STYLE, S3X_ADDRESSING_AUTO, S3X_ADDRESSING_VIRTUAL, S3X_ADDRESSING_AUTO},
        {S3X_PARAM_VERIFY_TLS, 0, 1, 1},
        {S3X_PARAM_PAYLOAD_SIGNING, S3X_PAYLOAD_SIGNED, S3X_PAYLOAD_AUTO, S3X_PAYLOAD_AUTO},
        {S3X_PARAM_PART_SIZE, 5 * MiB, 5 * GiB, 8 * MiB},
        {S3X_PARAM_CONCURRENCY, 1, 1024, 16},
        {S3X_PARAM_BUFFER_STRATEGY, S3X_BUFFER_AUTO, S3X_BUFFER_UNBUFFERED, S3X_BUFFER_AUTO},
        {S3X_PARAM_POOL, S3X_POOL_BOUNDED, S3X_POOL_MALLOC, S3X_POOL_BOUNDED},
        {S3X_PARAM_CHECKSUM, S3X_CHECKSUM_NONE, S3X_CHECKSUM_MD5, S3X_CHECKSUM_CRC32C},
        {S3X_PARAM_LEAVE_PARTS_ON_ERROR, 0, 1, 0},
        {S3X_PARAM_MAX_ATTEMPTS, 1, 100, 5},
        {S3X_PARAM_VALIDATE_CHECKSUM, 0, 1, 1},
        {S3X_PARAM_DURABLE, 0, 1, 1},
        {S3X_PARAM_CHECKSUM_TYPE, S3X_CHECKSUM_TYPE_COMPOSITE, S3X_CHECKSUM_TYPE_FULL_OBJECT,
         S3X_CHECKSUM_TYPE_COMPOSITE},
    };
    for (size_t i = 0; i < sizeof doc / sizeof doc[0]; i++) {
        int64_t lo = 0, hi = 0;
        s3x_param_bounds(doc[i].p, &lo, &hi);
        CHECK(lo == doc[i].lo && hi == doc[i].hi && s3x_param_default(doc[i].p) == doc[i].def,
              "%s: [%" PRId64 ", %" PRId64 "] default %" PRId64 " as documented ([%" PRId64 ", %" PRId64
              "] default %" PRId64 ")",
              s3x_param_name(doc[i].p), lo, hi, s3x_param_default(doc[i].p), doc[i].lo, doc[i].hi, doc[i].def);
    }
    CHECK_EQ(s3x_param_default(S3X_PARAM_CONNECT_TIMEOUT_MS), 10000, "connect_timeout_ms default");
    CHECK_EQ(s3x_param_default(S3X_PARAM_REQUEST_TIMEOUT_MS), 0, "request_timeout_ms default");
    CHECK_EQ(s3x_param_default(S3X_PARAM_MAX_CONNECTIONS), 256, "max_connections default");
    CHECK_EQ(s3x_param_default(S3X_PARAM_MULTIPART_THRESHOLD), 8 * MiB, "multipart_threshold default");
    CHECK_EQ(s3x_param_default(S3X_PARAM_MEMORY_LIMIT), 0, "memory_limit default");
    CHECK_EQ(s3x_param_default(S3X_PARAM_SLOW_PART_TIMEOUT), S3X_SLOW_PART_OFF, "slow_part_timeout default");
    CHECK_EQ(s3x_param_default(S3X_PARAM_SIZE_HINT), 0, "size_hint default");
    int64_t lo = 0, hi = 0;
    s3x_param_bounds(S3X_PARAM_SLOW_PART_TIMEOUT, &lo, &hi);
    CHECK_EQ(lo, S3X_SLOW_PART_DYNAMIC, "slow_part_timeout accepts DYNAMIC (-1) and nothing lower");

    int64_t defs[S3X_PARAM__COUNT];
    s3x_params_defaults(defs);
    int same = 1;
    for (int i = 0; i < S3X_PARAM__COUNT; i++)
        if (defs[i] != s3x_param_default((s3x_param)i)) same = 0;
    CHECK(same, "s3x_params_defaults fills every default");
}

static void test_unknown(void) {
    static const int bad[] = {-1, -1000, S3X_PARAM__COUNT, S3X_PARAM__COUNT + 1, 100000};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s3x_param p = (s3x_param)bad[i];
        int64_t lo = 123, hi = 456;
        s3x_error_clear();
        CHECK_EQ(s3x_param_bounds(p, &lo, &hi), S3X_EINVAL, "bounds of an unknown knob");
        CHECK(lo == 123 && hi == 456, "unknown knob %d: out-params untouched", bad[i]);
        CHECK_EQ(s3x_error_last()->code, S3X_EINVAL, "thread error after an unknown knob");
        CHECK(contains(s3x_error_last()->message, "unknown"), "message says unknown: \"%s\"",
              s3x_error_last()->message);
        CHECK(s3x_param_name(p) == NULL, "no name for unknown knob %d", bad[i]);
        CHECK_EQ(s3x_param_default(p), 0, "default of an unknown knob");
        CHECK(s3x_param_info_get(p) == NULL, "no info for unknown knob %d", bad[i]);
        CHECK_EQ(s3x_param_check(p, 0, S3X_SCOPE_UPLOAD), S3X_EINVAL, "check of an unknown knob");
    }
}

/* ---- checks ----------------------------------------------------------------- */

static void expect_range_error(s3x_param p, int64_t v, unsigned scope) {
    int64_t lo, hi;
    s3x_param_bounds(p, &lo, &hi);
    s3x_error_clear();
    int rc = s3x_param_check(p, v, scope);
    CHECK_EQ(rc, S3X_EINVAL, "out-of-range value rejected");
    const char *m = s3x_error_last()->message;
    char range[96], val[40];
    snprintf(range, sizeof range, "[%" PRId64 ", %" PRId64 "]", lo, hi);
    snprintf(val, sizeof val, "%" PRId64, v);
    CHECK(contains(m, s3x_param_name(p)) && contains(m, range) && contains(m, val),
          "%s = %" PRId64 ": message names the knob, the value and the range %s: \"%s\"", s3x_param_name(p), v,
          range, m);
}

static void test_check(void) {
    for (int i = 0; i < S3X_PARAM__COUNT; i++) {
        s3x_param p = (s3x_param)i;
        const s3x_param_info *pi = s3x_param_info_get(p);
        if (!pi) continue;
        unsigned sc = pi->scope & S3X_SCOPE_CLIENT ? S3X_SCOPE_CLIENT
                      : pi->scope & S3X_SCOPE_UPLOAD   ? S3X_SCOPE_UPLOAD
                      : pi->scope & S3X_SCOPE_DOWNLOAD ? S3X_SCOPE_DOWNLOAD
                                                       : S3X_SCOPE_BATCH;
        if (pi->lo > INT64_MIN) expect_range_error(p, pi->lo - 1, sc);
        if (pi->hi < INT64_MAX) expect_range_error(p, pi->hi + 1, sc);
        expect_range_error(p, INT64_MIN, sc);
        if (pi->hi < INT64_MAX) expect_range_error(p, INT64_MAX, sc);
        /* Every scope it does not apply to rejects it, naming the knob. */
        for (unsigned other = 1; other <= S3X_SCOPE_BATCH; other <<= 1) {
            if (pi->scope & other) continue;
            s3x_error_clear();
            CHECK_EQ(s3x_param_check(p, pi->def, other), S3X_EINVAL, "knob of another scope rejected");
            const char *m = s3x_error_last()->message;
            CHECK(contains(m, pi->name) && contains(m, "does not apply"), "%s in scope %u: \"%s\"", pi->name, other,
                  m);
        }
    }
    /* A specific message. */
    s3x_error_clear();
    s3x_param_check(S3X_PARAM_PART_SIZE, 1, S3X_SCOPE_UPLOAD);
    CHECK_STREQ(s3x_error_last()->message, "knob part_size = 1 is out of range [5242880, 5368709120]",
                "part_size range message");
    s3x_param_check(S3X_PARAM_VERIFY_TLS, 1, S3X_SCOPE_UPLOAD);
    CHECK_STREQ(s3x_error_last()->message, "knob verify_tls does not apply to the upload manager",
                "scope message");
    CHECK_EQ(s3x_param_check(S3X_PARAM_SIZE_HINT, 0, S3X_SCOPE_DOWNLOAD), S3X_EINVAL,
                "size_hint is an upload knob only");
    CHECK_EQ(s3x_param_check(S3X_PARAM_VALIDATE_CHECKSUM, 1, S3X_SCOPE_UPLOAD), S3X_EINVAL,
                "validate_checksum is a download knob only");
    CHECK_EQ(s3x_param_check(S3X_PARAM_PART_SIZE, 8 * MiB, S3X_SCOPE_CLIENT), S3X_EINVAL,
                "part_size is not a client knob");
}

/* ---- the upload manager's setters and planner ------------------------------- */

static int64_t parts_for(int64_t size, int64_t part) { return size <= 0 ? 1 : (size + part - 1) / part; }

static void test_upload_set(s3x_upload *u, s3x_client *c) {
    int64_t v = -7;
    CHECK_EQ(s3x_upload_get(u, S3X_PARAM_PART_SIZE, &v), 0, "get part_size");
    CHECK_EQ(v, 8 * MiB, "part_size starts at its default");
    CHECK_EQ(s3x_upload_set(u, S3X_PARAM_PART_SIZE, 6 * MiB), 0, "set part_size 6 MiB");
    s3x_upload_get(u, S3X_PARAM_PART_SIZE, &v);
    CHECK_EQ(v, 6 * MiB, "part_size after set");
    s3x_error_clear();
    CHECK_EQ(s3x_upload_set(u, S3X_PARAM_PART_SIZE, 5 * MiB - 1), S3X_EINVAL, "part_size below 5 MiB rejected");
    CHECK(contains(s3x_error_last()->message, "part_size"), "message names part_size: \"%s\"",
          s3x_error_last()->message);
    s3x_upload_get(u, S3X_PARAM_PART_SIZE, &v);
    CHECK_EQ(v, 6 * MiB, "a rejected value is not applied (no clamping)");
    CHECK_EQ(s3x_upload_set(u, S3X_PARAM_CONCURRENCY, 0), S3X_EINVAL, "concurrency 0 rejected");
    CHECK_EQ(s3x_upload_set(u, S3X_PARAM_CONCURRENCY, 1025), S3X_EINVAL, "concurrency 1025 rejected");
    CHECK_EQ(s3x_upload_set(u, S3X_PARAM_SLOW_PART_TIMEOUT, -2), S3X_EINVAL, "slow_part_timeout -2 rejected");
    CHECK_EQ(s3x_upload_set(u, S3X_PARAM_SLOW_PART_TIMEOUT, S3X_SLOW_PART_DYNAMIC), 0, "DYNAMIC accepted");
    s3x_error_clear();
    CHECK_EQ(s3x_upload_set(u, S3X_PARAM_VERIFY_TLS, 0), S3X_EINVAL, "a client knob on the upload manager");
    CHECK(contains(s3x_error_last()->message, "verify_tls"), "names verify_tls: \"%s\"", s3x_error_last()->message);
    CHECK_EQ(s3x_upload_set(u, S3X_PARAM_VALIDATE_CHECKSUM, 0), S3X_EINVAL, "a download knob on the upload manager");
    CHECK_EQ(s3x_upload_set(u, S3X_PARAM_DURABLE, 1), S3X_EINVAL, "durable on the upload manager");
    CHECK_EQ(s3x_upload_set(u, S3X_PARAM__COUNT, 0), S3X_EINVAL, "unknown knob on the upload manager");
    CHECK_EQ(s3x_upload_set(u, (s3x_param)-1, 0), S3X_EINVAL, "negative knob on the upload manager");
    CHECK_EQ(s3x_upload_get(u, S3X_PARAM_VERIFY_TLS, &v), S3X_EINVAL, "get of a client knob");
    CHECK_EQ(s3x_upload_get(u, S3X_PARAM__COUNT, &v), S3X_EINVAL, "get of an unknown knob");
    CHECK_EQ(s3x_upload_get(u, S3X_PARAM_PART_SIZE, NULL), S3X_EINVAL, "get into NULL");
    CHECK_EQ(s3x_upload_set(NULL, S3X_PARAM_PART_SIZE, 8 * MiB), S3X_EINVAL, "set on NULL manager");
    /* The client rejects manager knobs. */
    CHECK_EQ(s3x_client_set(c, S3X_PARAM_PART_SIZE, 8 * MiB), S3X_EINVAL, "part_size on the client");
    CHECK_EQ(s3x_client_set(c, S3X_PARAM_MAX_CONNECTIONS, 0), S3X_EINVAL, "max_connections 0 on the client");
    CHECK_EQ(s3x_client_set(c, S3X_PARAM_MAX_CONNECTIONS, 64), 0, "max_connections 64 on the client");
    /* The download manager has its own scope. */
    s3x_download *d = NULL;
    CHECK_EQ(s3x_download_new(&d, c), 0, "s3x_download_new");
    if (d) {
        CHECK_EQ(s3x_download_set(d, S3X_PARAM_SIZE_HINT, 1), S3X_EINVAL, "size_hint on the download manager");
        CHECK_EQ(s3x_download_set(d, S3X_PARAM_VALIDATE_CHECKSUM, 0), 0, "validate_checksum on download");
        int64_t dv = -1;
        CHECK_EQ(s3x_download_get(d, S3X_PARAM_DURABLE, &dv), 0, "get durable");
        CHECK_EQ(dv, 1, "durable is on by default");
        CHECK_EQ(s3x_download_set(d, S3X_PARAM_DURABLE, 0), 0, "durable 0 on download");
        s3x_download_get(d, S3X_PARAM_DURABLE, &dv);
        CHECK_EQ(dv, 0, "durable 0 kept");
        CHECK_EQ(s3x_download_set(d, S3X_PARAM_DURABLE, 2), S3X_EINVAL, "durable 2 rejected");
        CHECK(contains(s3x_error_last()->message, "durable"), "message names durable: %s", s3x_error_last()->message);
        s3x_download_free(d);
    }
}

static void test_plan(s3x_upload *u) {
    s3x_upload_set(u, S3X_PARAM_PART_SIZE, 8 * MiB);
    s3x_upload_set(u, S3X_PARAM_SIZE_HINT, 0);
    CHECK_EQ(s3x_upload_plan_part_size(u, 0), 8 * MiB, "empty object: the knob");
    CHECK_EQ(s3x_upload_plan_part_size(u, 1), 8 * MiB, "1 byte: the knob");
    CHECK_EQ(s3x_upload_plan_part_size(u, 100 * MiB), 8 * MiB, "100 MiB at 8 MiB: the knob");
    CHECK_EQ(s3x_upload_plan_part_size(u, 10000 * 8 * MiB), 8 * MiB, "exactly 10,000 parts: the knob");
    CHECK_EQ(s3x_upload_plan_part_size(u, 10000 * 8 * MiB + 1), 9 * MiB, "one byte more: next MiB");
    CHECK_EQ(s3x_upload_plan_part_size(u, -1), 8 * MiB, "unknown size, no hint: the knob");

    s3x_upload_set(u, S3X_PARAM_PART_SIZE, 5 * MiB);
    /* 100 GiB / 10,000 = 10.24 MiB -> 11 MiB, 9,310 parts. */
    int64_t p = s3x_upload_plan_part_size(u, 100 * GiB);
    CHECK_EQ(p, 11 * MiB, "100 GiB at 5 MiB grows to 11 MiB");
    CHECK(parts_for(100 * GiB, p) <= 10000, "100 GiB: %" PRId64 " parts", parts_for(100 * GiB, p));
    /* 5 TiB / 10,000 = 524.3 MiB -> 525 MiB. */
    p = s3x_upload_plan_part_size(u, 5 * TiB);
    CHECK_EQ(p, 525 * MiB, "5 TiB at 5 MiB: 525 MiB parts");
    CHECK(p <= 5 * GiB && parts_for(5 * TiB, p) <= 10000, "5 TiB: %" PRId64 " parts of %" PRId64, parts_for(5 * TiB, p),
          p);
    /* Unknown size: the hint sizes the parts. */
    s3x_upload_set(u, S3X_PARAM_SIZE_HINT, 100 * GiB);
    CHECK_EQ(s3x_upload_plan_part_size(u, -1), 11 * MiB, "unknown size with a 100 GiB hint");
    CHECK_EQ(s3x_upload_plan_part_size(u, 10 * MiB), 5 * MiB, "known size ignores the hint");
    s3x_upload_set(u, S3X_PARAM_SIZE_HINT, 5 * TiB);
    CHECK_EQ(s3x_upload_plan_part_size(u, -1), 525 * MiB, "unknown size with a 5 TiB hint");
    int64_t hint_hi = 0;
    s3x_param_bounds(S3X_PARAM_SIZE_HINT, NULL, &hint_hi);
    s3x_upload_set(u, S3X_PARAM_SIZE_HINT, hint_hi);
    p = s3x_upload_plan_part_size(u, -1);
    CHECK(p <= 5 * GiB, "the largest size hint (%" PRId64 ") plans parts of at most 5 GiB (%" PRId64 ")", hint_hi, p);
    s3x_upload_set(u, S3X_PARAM_SIZE_HINT, 0);

    /* A knob that is not a MiB multiple is used as is when it fits. */
    s3x_upload_set(u, S3X_PARAM_PART_SIZE, 5 * MiB + 12345);
    CHECK_EQ(s3x_upload_plan_part_size(u, 1 * GiB), 5 * MiB + 12345, "odd knob used as is");
    CHECK_EQ(s3x_upload_plan_part_size(u, 100 * GiB), 11 * MiB, "odd knob grown to a MiB multiple");

    /* A sweep: sizes up to 5 TiB, several knobs. */
    static const int64_t knobs[] = {5 * MiB, 8 * MiB, 16 * MiB + 1, 64 * MiB, 1 * GiB, 5 * GiB};
    uint64_t r = 0x9E3779B97F4A7C15ull;
    int bad = 0;
    for (size_t k = 0; k < sizeof knobs / sizeof knobs[0]; k++) {
        s3x_upload_set(u, S3X_PARAM_PART_SIZE, knobs[k]);
        for (int i = 0; i < 2000; i++) {
            r ^= r << 13;
            r ^= r >> 7;
            r ^= r << 17;
            int64_t size = (int64_t)(r % (uint64_t)(5 * TiB + 1));
            if (i % 4 == 0) size >>= (r >> 58); /* plenty of small ones too */
            int64_t ps = s3x_upload_plan_part_size(u, size);
            int ok = ps >= knobs[k] && ps <= 5 * GiB && parts_for(size, ps) <= 10000;
            /* Grown only when needed, to the smallest MiB multiple that fits. */
            if (ps != knobs[k]) ok = ok && ps % MiB == 0 && parts_for(size, knobs[k]) > 10000 &&
                                    (ps - MiB < knobs[k] || parts_for(size, ps - MiB) > 10000);
            else ok = ok && parts_for(size, ps) <= 10000;
            if (!ok && bad++ < 5)
                printf("# knob %" PRId64 " size %" PRId64 ": planned %" PRId64 " (%" PRId64 " parts)\n", knobs[k],
                       size, ps, parts_for(size, ps));
        }
    }
    CHECK_EQ(bad, 0, "planned part sizes that break a rule (sweep of 12,000 sizes)");
    s3x_upload_set(u, S3X_PARAM_PART_SIZE, 8 * MiB);
}

int main(void) {
    test_table();
    test_unknown();
    test_check();
    s3x_client *c = NULL;
    int rc = s3x_client_new(&c);
    CHECK_EQ(rc, 0, "s3x_client_new (no network needed)");
    s3x_upload *u = NULL;
    if (c) {
        CHECK_EQ(s3x_upload_new(&u, c), 0, "s3x_upload_new");
        s3x_upload *none = (s3x_upload *)1;
        CHECK_EQ(s3x_upload_new(&none, NULL), S3X_EINVAL, "s3x_upload_new without a client");
        CHECK(none == NULL, "out is NULL on failure");
    }
    if (u) {
        test_upload_set(u, c);
        test_plan(u);
    }
    s3x_upload_free(u);
    s3x_client_free(c);
    s3x_upload_free(NULL);
    s3x_client_free(NULL);
    return tap_summary("test_params");
}
