/* The download's decisions (range.c): the strict Content-Range and
 * Content-Length parsers, and the checks of each response against the range
 * it answers, the size and ETag the probe learned, and the final count. A
 * server may state any length; these are the cases of issue 11 (findings 3
 * and 5) and every malformed form we could think of. */
#include "range.h"
#include "client_internal.h" /* s3x_content_range_total */
#include "error.h"
#include "tap.h"
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int check_eq(long long actual, long long expected, const char *file, int line, const char *what) {
    return tap_check(actual == expected, file, line, "%s: expected %lld, got %lld", what, expected, actual);
}
#define CHECK_EQ(actual, expected, what) check_eq((long long)(actual), (long long)(expected), __FILE__, __LINE__, (what))

#define MiB (INT64_C(1) << 20)

/* The thread's last error message contains needle. */
static int msg_has(const char *needle) { return strstr(s3x_error_last()->message, needle) != NULL; }

/* ---- Content-Range ---------------------------------------------------------------- */

static int parse(const char *s, s3x_crange *c) { return s3x_crange_parse(s, strlen(s), c); }

static void good_cr(const char *s, int64_t first, int64_t last, int64_t total) {
    s3x_crange c = {7, 7, 7};
    int rc = parse(s, &c);
    char what[160];
    snprintf(what, sizeof what, "\"%s\" parses", s);
    if (CHECK(rc == 0, "%s", what)) {
        snprintf(what, sizeof what, "\"%s\" first", s);
        CHECK_EQ(c.first, first, what);
        snprintf(what, sizeof what, "\"%s\" last", s);
        CHECK_EQ(c.last, last, what);
        snprintf(what, sizeof what, "\"%s\" total", s);
        CHECK_EQ(c.total, total, what);
    }
}

static void bad_cr(const char *s) {
    s3x_crange c = {7, 8, 9};
    int rc = parse(s, &c);
    CHECK(rc == -1, "\"%s\" is refused", s);
    CHECK(c.first == 7 && c.last == 8 && c.total == 9, "\"%s\": out is left untouched", s);
}

static void test_content_range_good(void) {
    good_cr("bytes 0-9/10", 0, 9, 10);
    good_cr("bytes 0-0/1", 0, 0, 1);
    good_cr("bytes 5-9/1234", 5, 9, 1234);
    good_cr("BYTES 0-9/10", 0, 9, 10); /* range units compare without case */
    good_cr("Bytes 0-9/10", 0, 9, 10);
    good_cr("bytes 0-9/*", 0, 9, -1);
    good_cr("bytes */0", -1, -1, 0);
    good_cr("bytes */1234", -1, -1, 1234);
    good_cr("bytes 0008-0009/0010", 8, 9, 10); /* 1*DIGIT allows leading zeros */
    good_cr("bytes 0-8388607/5497558138880", 0, 8388607, INT64_C(5497558138880));
    /* The parser bounds numbers to int64_t only; 5 TiB is a later check. */
    good_cr("bytes 0-8388607/9223372036854775807", 0, 8388607, INT64_MAX);
    good_cr("bytes 9223372036854775805-9223372036854775806/9223372036854775807", INT64_MAX - 2, INT64_MAX - 1,
            INT64_MAX);
    /* Exactly n bytes are read: what follows is not part of the value. */
    s3x_crange c;
    CHECK(s3x_crange_parse("bytes 0-9/10XYZ", 12, &c) == 0 && c.total == 10, "the length given is respected");
    /* "bytes 0-9/1" when cut one byte short: last >= total. */
    CHECK(s3x_crange_parse("bytes 0-9/10", 11, &c) == -1, "a value cut short is parsed as cut");
}

static void test_content_range_malformed(void) {
    const char *bad[] = {
        "",
        "bytes",
        "bytes ",
        "bytes  0-9/10",        /* two spaces */
        "bytes\t0-9/10",        /* a tab */
        "bytes=0-9/10",         /* the request's syntax */
        "bytes0-9/10",
        " bytes 0-9/10",        /* leading space (http.c trims; the parser does not) */
        "bytes 0-9/10 ",        /* trailing space */
        "bytes 0-9/10\r",
        "bytes 0-9/10\n",
        "bytes 0-9/10;x",
        "bytes 0-9/10,20-29/30",
        "bytes 0-9",            /* no size */
        "bytes 0-9/",
        "bytes 0-/10",
        "bytes -9/10",          /* a suffix range is request syntax only */
        "bytes 0-9-10/10",
        "bytes 0--9/10",
        "bytes -0-9/10",
        "bytes +0-9/10",
        "bytes 0-+9/10",
        "bytes 0-9/+10",
        "bytes 0-9/-10",
        "bytes 0 -9/10",
        "bytes 0- 9/10",
        "bytes 0-9 /10",
        "bytes 0-9/ 10",
        "bytes 0x0-0x9/0x10",
        "bytes 0-9/1e3",
        "bytes 0.0-9/10",
        "bytes a-b/c",
        "bytes 0-9/**",
        "bytes */*",
        "bytes */",
        "bytes *",
        "bytes */10x",
        "bytes *-9/10",
        "bytes 0-*/10",
        "items 0-9/10",
        "octets 0-9/10",
        "byte 0-9/10",
        "bytesx 0-9/10",
        "0-9/10",
        "bytes 9-0/10",         /* first > last */
        "bytes 10-19/10",       /* last >= total */
        "bytes 0-10/10",        /* off by one: last == total */
        "bytes 0-0/0",          /* nothing can be sent of an empty object */
        "bytes 5-4/10",
        /* overflow: one past INT64_MAX, and far beyond */
        "bytes 0-9/9223372036854775808",
        "bytes 0-9223372036854775808/9223372036854775809",
        "bytes 9223372036854775808-9223372036854775809/9223372036854775810",
        "bytes 0-9/99999999999999999999999999999999",
        "bytes */9223372036854775808",
        "bytes 0-9/18446744073709551616",   /* 2^64: wraps to 0 in a careless parser */
        "bytes 0-9/18446744073709551626",   /* 2^64 + 10: wraps to 10 */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) bad_cr(bad[i]);
    /* an embedded NUL inside the given length */
    s3x_crange c = {7, 8, 9};
    CHECK(s3x_crange_parse("bytes 0-9\0/10", 13, &c) == -1 && c.first == 7, "an embedded NUL is refused");
    CHECK(s3x_crange_parse(NULL, 0, &c) == -1, "NULL is refused");
    /* The old lenient parser read only the text after the last '/'. */
    CHECK(s3x_content_range_total("bytes 0-9/10") == 10, "total of a good range");
    CHECK(s3x_content_range_total("bytes */0") == 0, "total of an unsatisfied range");
    CHECK(s3x_content_range_total("garbage/10") == -1, "no total from garbage");
    CHECK(s3x_content_range_total("bytes 9-0/10") == -1, "no total from an inverted range");
    CHECK(s3x_content_range_total("bytes 0-9/9223372036854775808") == -1, "no total from an overflow");
    CHECK(s3x_content_range_total("bytes 0-9/*") == -1, "no total when the server does not know it");
    CHECK(s3x_content_range_total(NULL) == -1, "no total from NULL");
}

static void test_content_length(void) {
    int64_t v = 42;
    CHECK(s3x_content_length_parse("0", 1, &v) == 0 && v == 0, "0");
    CHECK(s3x_content_length_parse("8388608", 7, &v) == 0 && v == 8388608, "8388608");
    CHECK(s3x_content_length_parse("9223372036854775807", 19, &v) == 0 && v == INT64_MAX, "INT64_MAX");
    const char *bad[] = {"", "-1", "+1", " 1", "1 ", "1x", "0x10", "1e3", "9223372036854775808",
                         "18446744073709551616", "99999999999999999999999", "1,2", "1.0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = 42;
        CHECK(s3x_content_length_parse(bad[i], strlen(bad[i]), &v) == -1 && v == 42, "Content-Length \"%s\" refused",
              bad[i]);
    }
    CHECK(s3x_content_length_parse(NULL, 0, &v) == -1, "NULL refused");
}

/* ---- the checks ------------------------------------------------------------------------- */

static s3x_dlresp resp206(const char *cr, int64_t cl, const char *etag) {
    s3x_dlresp r = {206, cr, cl, etag};
    return r;
}

static s3x_dlplan planned(int64_t part, int64_t total, const char *etag) {
    s3x_dlplan p;
    s3x_dlplan_init(&p, part, -1);
    s3x_dlverdict v = {0, total < part ? total : part, total};
    s3x_dlplan_learn(&p, &v, etag);
    return p;
}

static void test_probe(void) {
    s3x_dlplan p;
    s3x_dlverdict v;
    CHECK(s3x_dlplan_init(&p, 8 * MiB, -1) == 0, "init");
    s3x_dlask a = s3x_dlplan_probe(&p);
    CHECK(a.probe && a.ranged && a.first == 0 && a.last == 8 * MiB - 1, "the probe asks for bytes 0..part_size-1");

    /* good: a large object's first part, a small object whole */
    s3x_dlresp r = resp206("bytes 0-8388607/20971520", 8 * MiB, "\"e\"");
    CHECK(s3x_dlplan_check(&p, &a, &r, &v) == 0 && v.offset == 0 && v.length == 8 * MiB && v.total == 20 * MiB,
          "a 20 MiB object's first 8 MiB are accepted");
    r = resp206("bytes 0-99/100", 100, NULL);
    CHECK(s3x_dlplan_check(&p, &a, &r, &v) == 0 && v.length == 100 && v.total == 100,
          "a 100-byte object comes whole in the probe (min(part_size, T) bytes)");
    r = resp206("bytes 0-8388607/8388608", -1, NULL);
    CHECK(s3x_dlplan_check(&p, &a, &r, &v) == 0 && v.length == 8 * MiB, "no Content-Length (chunked) is allowed");
    r = resp206("bytes 0-8388607/8388609", 8 * MiB, NULL);
    CHECK(s3x_dlplan_check(&p, &a, &r, &v) == 0 && v.length == 8 * MiB && v.total == 8 * MiB + 1,
          "part_size + 1 bytes: the first part");

    /* finding 3: a short first range, exactly what the issue reproduced */
    r = resp206("bytes 0-5242879/20971520", 5 * MiB, NULL);
    CHECK(s3x_dlplan_check(&p, &a, &r, &v) == S3X_ENETWORK && msg_has("asked for bytes 0-8388607") &&
              msg_has("sent bytes 0-5242879"),
          "a short first range is refused and the message names both ranges: %s", s3x_error_last()->message);
    /* off by one either way */
    r = resp206("bytes 0-8388606/20971520", 8 * MiB - 1, NULL);
    CHECK(s3x_dlplan_check(&p, &a, &r, &v) == S3X_ENETWORK, "one byte short");
    r = resp206("bytes 0-8388608/20971520", 8 * MiB + 1, NULL);
    CHECK(s3x_dlplan_check(&p, &a, &r, &v) == S3X_ENETWORK, "one byte too many");
    r = resp206("bytes 0-98/100", 99, NULL);
    CHECK(s3x_dlplan_check(&p, &a, &r, &v) == S3X_ENETWORK, "a small object's last byte missing");
    r = resp206("bytes 1-100/101", 100, NULL);
    CHECK(s3x_dlplan_check(&p, &a, &r, &v) == S3X_ENETWORK, "the right length from the wrong offset");
    /* Content-Length that disagrees with the range */
    r = resp206("bytes 0-8388607/20971520", 8 * MiB + 1, NULL);
    CHECK(s3x_dlplan_check(&p, &a, &r, &v) == S3X_ENETWORK && msg_has("Content-Length 8388609 disagrees"),
          "Content-Length larger than the range: %s", s3x_error_last()->message);
    r = resp206("bytes 0-8388607/20971520", 5 * MiB, NULL);
    CHECK(s3x_dlplan_check(&p, &a, &r, &v) == S3X_ENETWORK, "Content-Length smaller than the range");
    /* no, bad or size-less Content-Range */
    r = resp206(NULL, 8 * MiB, NULL);
    CHECK(s3x_dlplan_check(&p, &a, &r, &v) == S3X_ENETWORK && msg_has("no Content-Range"), "206 without Content-Range");
    r = resp206("bytes 0-8388607/*", 8 * MiB, NULL);
    CHECK(s3x_dlplan_check(&p, &a, &r, &v) == S3X_ENETWORK && msg_has("does not say the object's size"),
          "a probe that does not tell the size");
    r = resp206("bytes */20971520", 0, NULL);
    CHECK(s3x_dlplan_check(&p, &a, &r, &v) == S3X_ENETWORK, "an unsatisfied-range form in a 206");
    r = resp206("bytes 0-8388607/2097152\x1b[2J", 8 * MiB, NULL);
    CHECK(s3x_dlplan_check(&p, &a, &r, &v) == S3X_ENETWORK && msg_has("\\x1b[2J") && !msg_has("\x1b"),
          "server text in the message is escaped: %s", s3x_error_last()->message);

    /* finding 5: sizes beyond S3's 5 TiB, up to 2^63-1 */
    r = resp206("bytes 0-8388607/9223372036854775807", 8 * MiB, NULL);
    CHECK(s3x_dlplan_check(&p, &a, &r, &v) == S3X_ELIMIT && msg_has("9223372036854775807") && msg_has("5 TiB"),
          "a 2^63-1 object is refused: %s", s3x_error_last()->message);
    r = resp206("bytes 0-8388607/5497558138881", 8 * MiB, NULL);
    CHECK(s3x_dlplan_check(&p, &a, &r, &v) == S3X_ELIMIT, "5 TiB + 1 is refused");
    r = resp206("bytes 0-8388607/5497558138880", 8 * MiB, NULL);
    CHECK(s3x_dlplan_check(&p, &a, &r, &v) == 0 && v.total == S3X_MAX_OBJECT_SIZE, "exactly 5 TiB is accepted");
    r = resp206("bytes 0-8388607/9223372036854775808", 8 * MiB, NULL);
    CHECK(s3x_dlplan_check(&p, &a, &r, &v) == S3X_ENETWORK, "2^63 does not even parse");

    /* 200: the whole object in one piece, when it is what the probe asked for */
    s3x_dlresp ok200 = {200, NULL, 100, "\"e\""};
    CHECK(s3x_dlplan_check(&p, &a, &ok200, &v) == 0 && v.length == 100 && v.total == 100,
          "200 with a 100-byte object to the probe: accepted");
    ok200.content_length = 8 * MiB;
    CHECK(s3x_dlplan_check(&p, &a, &ok200, &v) == 0 && v.total == 8 * MiB, "200 with exactly part_size bytes");
    ok200.content_length = 0;
    CHECK(s3x_dlplan_check(&p, &a, &ok200, &v) == 0 && v.total == 0, "200 with an empty object");
    s3x_dlresp big200 = {200, NULL, 8 * MiB + 1, NULL};
    CHECK(s3x_dlplan_check(&p, &a, &big200, &v) == S3X_ENETWORK && msg_has("ignored the Range header"),
          "200 with more than the probe asked for: the server ignored Range: %s", s3x_error_last()->message);
    s3x_dlresp nolen200 = {200, NULL, -1, NULL};
    CHECK(s3x_dlplan_check(&p, &a, &nolen200, &v) == S3X_ENETWORK && msg_has("did not say the object's size"),
          "200 without Content-Length");
    s3x_dlresp huge200 = {200, NULL, INT64_MAX, NULL};
    CHECK(s3x_dlplan_check(&p, &a, &huge200, &v) == S3X_ELIMIT, "200 with 2^63-1 bytes");
    /* A 200 with a Content-Range is read as a 206 (rclone serve s3 answers
     * ranged GETs so): its first part must not pass for the whole object. */
    s3x_dlresp cr200 = {200, "bytes 0-8388607/1073741824", 8 * MiB, NULL};
    CHECK(s3x_dlplan_check(&p, &a, &cr200, &v) == 0 && v.total == 1024 * MiB && v.length == 8 * MiB &&
              v.offset == 0,
          "200 + Content-Range to the probe: 8 MiB of a 1 GiB object, not an 8 MiB object");
    cr200.content_range = "bytes 0-9/10";
    cr200.content_length = 100;
    CHECK(s3x_dlplan_check(&p, &a, &cr200, &v) == S3X_ENETWORK && msg_has("disagrees with Content-Range"),
          "200 + Content-Range that disagrees with Content-Length: refused (%s)", s3x_error_last()->message);
    cr200.content_range = "bytes 5-8388607/1073741824";
    cr200.content_length = 8 * MiB - 5;
    CHECK(s3x_dlplan_check(&p, &a, &cr200, &v) == S3X_ENETWORK && msg_has("asked for bytes 0-8388607"),
          "200 + Content-Range of other bytes: refused");
    /* other statuses */
    s3x_dlresp r204 = {204, NULL, 0, NULL};
    CHECK(s3x_dlplan_check(&p, &a, &r204, &v) == S3X_ENETWORK && msg_has("unexpected HTTP 204"), "204 to a GET");
    s3x_dlresp r201 = {201, "bytes 0-99/100", 100, NULL};
    CHECK(s3x_dlplan_check(&p, &a, &r201, &v) == S3X_ENETWORK, "201 to a GET");

    /* the destination's capacity (a memory download) */
    s3x_dlplan small;
    s3x_dlplan_init(&small, 8 * MiB, 10);
    r = resp206("bytes 0-99/100", 100, NULL);
    CHECK(s3x_dlplan_check(&small, &a, &r, &v) == S3X_ELIMIT && msg_has("larger than the 10-byte buffer"),
          "an object larger than the buffer");
    ok200.content_length = 10;
    CHECK(s3x_dlplan_check(&small, &a, &ok200, &v) == 0, "an object as large as the buffer");

    /* a bad ask is a caller bug, not a server's */
    s3x_dlask inv = {0, 1, 5, 4};
    CHECK(s3x_dlplan_check(&p, &inv, &r, &v) == S3X_EINTERNAL, "an inverted ask");
    s3x_dlask early = {0, 1, 8 * MiB, 16 * MiB - 1};
    CHECK(s3x_dlplan_check(&p, &early, &r, &v) == S3X_EINTERNAL, "a range before the size is known");
}

static void test_empty_probe(void) {
    s3x_dlplan p;
    s3x_dlplan_init(&p, 8 * MiB, -1);
    s3x_dlask a = s3x_dlplan_probe(&p);
    s3x_dlresp r416 = {416, "bytes */0", 0, NULL};
    CHECK(s3x_dlplan_empty_probe(&p, &a, &r416) == 1, "416 with bytes */0: an empty object");
    r416.content_range = NULL;
    CHECK(s3x_dlplan_empty_probe(&p, &a, &r416) == 1, "416 without Content-Range: an empty object");
    r416.content_range = "garbage";
    CHECK(s3x_dlplan_empty_probe(&p, &a, &r416) == 1, "416 with an unreadable Content-Range: as S3 would mean it");
    r416.content_range = "bytes */100";
    CHECK(s3x_dlplan_empty_probe(&p, &a, &r416) == S3X_ENETWORK && msg_has("416"),
          "416 that says the object has 100 bytes contradicts itself");
    s3x_dlresp r404 = {404, NULL, 0, NULL};
    CHECK(s3x_dlplan_empty_probe(&p, &a, &r404) == 0, "404 is an ordinary error");
    s3x_dlask whole = s3x_dlplan_probe_whole(&p);
    r416.content_range = "bytes */0";
    CHECK(s3x_dlplan_empty_probe(&p, &whole, &r416) == 0, "416 to the request without Range is an ordinary error");
    CHECK(!whole.ranged && whole.probe, "the refetch has no Range");
    s3x_dlverdict v;
    s3x_dlresp e200 = {200, NULL, 0, NULL};
    CHECK(s3x_dlplan_check(&p, &whole, &e200, &v) == 0 && v.total == 0, "the refetch gets an empty 200");
    s3x_dlresp grown = {200, NULL, 9 * MiB, NULL};
    CHECK(s3x_dlplan_check(&p, &whole, &grown, &v) == S3X_ECHANGED, "the refetch gets a 9 MiB object");
    s3x_dlresp small = {200, NULL, 5, NULL};
    CHECK(s3x_dlplan_check(&p, &whole, &small, &v) == 0 && v.total == 5, "the refetch gets a small object whole");
    s3x_dlresp p206 = resp206("bytes 0-4/5", 5, NULL);
    CHECK(s3x_dlplan_check(&p, &whole, &p206, &v) == S3X_ENETWORK, "a 206 to a request without Range");
}

static void test_later_ranges(void) {
    s3x_dlplan p = planned(8 * MiB, 20 * MiB, "\"abc\"");
    CHECK_EQ(p.total, 20 * MiB, "learned total");
    CHECK_EQ(p.nranges, 3, "20 MiB in 8 MiB ranges");
    s3x_dlask a1 = s3x_dlplan_range(&p, 1), a2 = s3x_dlplan_range(&p, 2);
    CHECK(!a1.probe && a1.ranged && a1.first == 8 * MiB && a1.last == 16 * MiB - 1, "range 1");
    CHECK(a2.first == 16 * MiB && a2.last == 20 * MiB - 1, "range 2 is the short last one");
    s3x_dlask out = s3x_dlplan_range(&p, 3);
    CHECK(out.last < out.first, "no range 3");
    out = s3x_dlplan_range(&p, -1);
    CHECK(out.last < out.first, "no range -1");

    s3x_dlverdict v;
    s3x_dlresp r = resp206("bytes 8388608-16777215/20971520", 8 * MiB, "\"abc\"");
    CHECK(s3x_dlplan_check(&p, &a1, &r, &v) == 0 && v.offset == 8 * MiB && v.length == 8 * MiB, "range 1 accepted");
    r = resp206("bytes 16777216-20971519/20971520", 4 * MiB, "W/\"abc\"");
    CHECK(s3x_dlplan_check(&p, &a2, &r, &v) == 0 && v.length == 4 * MiB, "range 2 accepted (a weakened ETag)");
    r = resp206("bytes 16777216-20971519/20971520", 4 * MiB, NULL);
    CHECK(s3x_dlplan_check(&p, &a2, &r, &v) == 0, "no ETag in a later range");

    /* the wrong range with the right length */
    r = resp206("bytes 0-8388607/20971520", 8 * MiB, "\"abc\"");
    CHECK(s3x_dlplan_check(&p, &a1, &r, &v) == S3X_ENETWORK && msg_has("asked for bytes 8388608-16777215"),
          "the first range again for the second: %s", s3x_error_last()->message);
    r = resp206("bytes 8388609-16777216/20971520", 8 * MiB, "\"abc\"");
    CHECK(s3x_dlplan_check(&p, &a1, &r, &v) == S3X_ENETWORK, "one byte off");
    r = resp206("bytes 16777216-20971520/20971521", 4 * MiB + 1, "\"abc\"");
    CHECK(s3x_dlplan_check(&p, &a2, &r, &v) == S3X_ECHANGED, "the last range one byte longer (total grew)");
    /* a total that changes */
    r = resp206("bytes 8388608-16777215/25165824", 8 * MiB, "\"abc\"");
    CHECK(s3x_dlplan_check(&p, &a1, &r, &v) == S3X_ECHANGED && msg_has("first 20971520 bytes, now 25165824"),
          "the total changed between ranges: %s", s3x_error_last()->message);
    r = resp206("bytes 8388608-16777215/*", 8 * MiB, "\"abc\"");
    CHECK(s3x_dlplan_check(&p, &a1, &r, &v) == S3X_ENETWORK, "a later range without a size");
    r = resp206("bytes 8388608-16777215/9223372036854775807", 8 * MiB, "\"abc\"");
    CHECK(s3x_dlplan_check(&p, &a1, &r, &v) == S3X_ELIMIT, "a later range says 2^63-1");
    /* another ETag */
    r = resp206("bytes 8388608-16777215/20971520", 8 * MiB, "\"xyz\"");
    CHECK(s3x_dlplan_check(&p, &a1, &r, &v) == S3X_ECHANGED && msg_has("ETag"), "another ETag");
    r = resp206("bytes 8388608-16777215/20971520", 8 * MiB, "\"abc\"x");
    CHECK(s3x_dlplan_check(&p, &a1, &r, &v) == S3X_ECHANGED, "an ETag one byte longer");
    /* the server ignored Range */
    s3x_dlresp whole = {200, NULL, 20 * MiB, "\"abc\""};
    CHECK(s3x_dlplan_check(&p, &a1, &whole, &v) == S3X_ENETWORK && msg_has("ignored the Range header"),
          "200 to a later range");
    s3x_dlresp cr200 = {200, "bytes 8388608-16777215/20971520", 8 * MiB, "\"abc\""};
    CHECK(s3x_dlplan_check(&p, &a1, &cr200, &v) == 0 && v.offset == 8 * MiB && v.length == 8 * MiB,
          "200 + the asked Content-Range to a later range: read as its 206");
    cr200.content_range = "bytes 8388608-16777215/20971521";
    CHECK(s3x_dlplan_check(&p, &a1, &cr200, &v) == S3X_ECHANGED, "... with another total: the object changed");
    /* Content-Length larger than the range */
    r = resp206("bytes 8388608-16777215/20971520", 12 * MiB, "\"abc\"");
    CHECK(s3x_dlplan_check(&p, &a1, &r, &v) == S3X_ENETWORK, "Content-Length larger than the range");

    /* long ETags are compared whole */
    char longtag[400];
    memset(longtag, 'a', sizeof longtag - 1);
    longtag[sizeof longtag - 1] = '\0';
    s3x_dlplan q = planned(8 * MiB, 20 * MiB, longtag);
    r = resp206("bytes 8388608-16777215/20971520", 8 * MiB, longtag);
    CHECK(s3x_dlplan_check(&q, &a1, &r, &v) == 0, "a 399-byte ETag matches itself");
    char other[400];
    memcpy(other, longtag, sizeof other);
    other[398] = 'b';
    r.etag = other;
    CHECK(s3x_dlplan_check(&q, &a1, &r, &v) == S3X_ECHANGED, "a long ETag that differs past the stored prefix");
}

static void test_head(void) {
    s3x_dlplan p = planned(8 * MiB, 20 * MiB, "\"abc\"");
    CHECK(s3x_dlplan_check_whole(&p, 20 * MiB, "\"abc\"") == 0, "a HEAD that agrees");
    CHECK(s3x_dlplan_check_whole(&p, -1, NULL) == 0, "a HEAD that says nothing");
    CHECK(s3x_dlplan_check_whole(&p, 20 * MiB + 1, "\"abc\"") == S3X_ECHANGED && msg_has("(HEAD)"),
          "a HEAD of another size");
    CHECK(s3x_dlplan_check_whole(&p, 20 * MiB, "\"xyz\"") == S3X_ECHANGED, "a HEAD with another ETag");
    s3x_dlplan early;
    s3x_dlplan_init(&early, 8 * MiB, -1);
    CHECK(s3x_dlplan_check_whole(&early, 5, NULL) == S3X_EINTERNAL, "a HEAD before the probe");
}

static void test_body_and_end(void) {
    s3x_dlverdict v = {8 * MiB, 8 * MiB, 20 * MiB};
    CHECK(s3x_dlplan_body(&v, 0, 16384) == 0, "first chunk");
    CHECK(s3x_dlplan_body(&v, 8 * MiB - 16384, 16384) == 0, "last chunk exactly");
    CHECK(s3x_dlplan_body(&v, 8 * MiB - 16384, 16385) == S3X_ENETWORK && msg_has("more than the 8388608 bytes"),
          "one byte past the range is refused");
    CHECK(s3x_dlplan_body(&v, 8 * MiB, 1) == S3X_ENETWORK, "any byte after the range");
    CHECK(s3x_dlplan_body(&v, 0, SIZE_MAX) == S3X_ENETWORK, "a huge chunk does not wrap");
    CHECK(s3x_dlplan_body(&v, -1, 1) == S3X_ENETWORK, "a negative count");
    CHECK(s3x_dlplan_complete(&v, 8 * MiB) == 0, "complete");
    CHECK(s3x_dlplan_complete(&v, 8 * MiB - 1) == S3X_ENETWORK && msg_has("ended after 8388607 of the 8388608"),
          "a short body: %s", s3x_error_last()->message);
    CHECK(s3x_dlplan_complete(&v, 8 * MiB + 1) == S3X_ENETWORK, "a long body");
    s3x_dlverdict empty = {0, 0, 0};
    CHECK(s3x_dlplan_body(&empty, 0, 0) == 0 && s3x_dlplan_body(&empty, 0, 1) == S3X_ENETWORK,
          "an empty object takes no bytes");

    s3x_dlplan p;
    s3x_dlplan_init(&p, 8 * MiB, -1);
    CHECK(s3x_dlplan_finish(&p, 0) == S3X_ENETWORK, "nothing learned");
    p = planned(8 * MiB, 20 * MiB, NULL);
    CHECK(s3x_dlplan_finish(&p, 20 * MiB) == 0, "all bytes");
    CHECK(s3x_dlplan_finish(&p, 15 * MiB) == S3X_ENETWORK && msg_has("received 15728640 of the object's 20971520"),
          "15 of 20 MiB is not success: %s", s3x_error_last()->message);
    CHECK(s3x_dlplan_finish(&p, 20 * MiB + 1) == S3X_ENETWORK, "more than the object");
}

static void test_plan(void) {
    s3x_dlplan p;
    CHECK(s3x_dlplan_init(&p, 0, -1) == S3X_EINVAL, "part size 0");
    CHECK(s3x_dlplan_init(&p, -5, -1) == S3X_EINVAL, "negative part size");
    CHECK(s3x_dlplan_init(&p, S3X_MAX_OBJECT_SIZE + 1, -1) == S3X_EINVAL, "part size above 5 TiB");
    CHECK(s3x_dlplan_init(&p, 1, -7) == 0 && p.capacity == -1, "a negative capacity means none");
    /* nranges without overflow at the edges */
    s3x_dlverdict v = {0, 1, S3X_MAX_OBJECT_SIZE};
    s3x_dlplan_init(&p, 5 * MiB, -1);
    CHECK(s3x_dlplan_learn(&p, &v, NULL) == 0 && p.nranges == 1048576, "5 TiB in 5 MiB ranges");
    s3x_dlplan_init(&p, 1, -1);
    CHECK(s3x_dlplan_learn(&p, &v, NULL) == S3X_ELIMIT && p.total == -1, "5 TiB in 1-byte ranges is too many");
    s3x_dlplan_init(&p, 8 * MiB, -1);
    v.total = 0;
    CHECK(s3x_dlplan_learn(&p, &v, NULL) == 0 && p.nranges == 1, "an empty object is one range");
    v.total = 8 * MiB;
    CHECK(s3x_dlplan_learn(&p, &v, NULL) == 0 && p.nranges == 1, "exactly one part");
    v.total = 8 * MiB + 1;
    CHECK(s3x_dlplan_learn(&p, &v, NULL) == 0 && p.nranges == 2, "one byte more is two");
    v.total = INT64_MAX;
    CHECK(s3x_dlplan_learn(&p, &v, NULL) == S3X_EINTERNAL, "an unchecked size is not learned");
    /* the last range of a 5 TiB object */
    s3x_dlplan_init(&p, 5 * MiB, -1);
    v.total = S3X_MAX_OBJECT_SIZE;
    s3x_dlplan_learn(&p, &v, NULL);
    s3x_dlask last = s3x_dlplan_range(&p, p.nranges - 1);
    CHECK(last.last == S3X_MAX_OBJECT_SIZE - 1 && last.first == S3X_MAX_OBJECT_SIZE - 5 * MiB, "5 TiB's last range");
}

int main(void) {
    test_content_range_good();
    test_content_range_malformed();
    test_content_length();
    test_probe();
    test_empty_probe();
    test_later_ranges();
    test_head();
    test_body_and_end();
    test_plan();
    return tap_summary("test_range");
}
