/* What credential providers read from outside (core/src/proto/json.c,
 * s3x_xml_parse_sts in s3xml.c, and in core/src/net/creds.c the
 * credential_process command splitter). The first byte picks the parser
 * (mod 4): 0 a JSON document (credential_process output, container and
 * instance metadata answers), 1 an STS AssumeRole* answer, 2 a
 * credential_process command line, 3 an ISO 8601 expiration.
 *
 * Properties: JSON: 0 or the chosen error code (or S3X_ENOMEM) with a
 * message; on success member names are unique, strings are valid UTF-8
 * without NUL, numbers are whole JSON numbers, and writing the members back
 * out as JSON parses to the same members. STS: 0, S3X_EXML or S3X_ENOMEM;
 * on success either an error code or all four credential fields, non-empty.
 * Command: quoting each word back (single quotes) splits to the same words.
 * Time: a parsed time printed back (when whole seconds, UTC) reads the same. */
#include "fuzz.h"
#include "buf.h"
#include "creds.h"
#include "error.h"
#include "json.h"
#include "s3xml.h"
#include "sigv4.h"
#include <math.h>
#include <time.h>

static void valid_utf8(const char *s) {
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t l = s3x_utf8_decode(s + i, n - i, &cp);
        FUZZ_ASSERT(l, "not UTF-8 at %zu", i);
        i += l;
    }
}

static void put_json_string(s3x_buf *b, const char *s) {
    s3x_buf_puts(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p < 0x20 || *p == '"' || *p == '\\') s3x_buf_printf(b, "\\u%04x", *p);
        else s3x_buf_append(b, p, 1);
    }
    s3x_buf_puts(b, "\"");
}

static void fuzz_json(const char *x, size_t n) {
    s3x_json *j = (s3x_json *)&j;
    int rc = s3x_json_parse(x, n, "fuzz json", S3X_ECREDENTIALS, &j);
    if (rc) {
        FUZZ_ASSERT(rc == S3X_ECREDENTIALS || rc == S3X_ENOMEM, "rc %d", rc);
        FUZZ_ASSERT(j == NULL, "out set after failure");
        FUZZ_ASSERT(!strncmp(s3x_error_last()->message, "fuzz json", 9), "message: %s", s3x_error_last()->message);
        return;
    }
    s3x_buf again = S3X_BUF_INIT;
    s3x_buf_puts(&again, "{");
    size_t count = s3x_json_count(j);
    for (size_t i = 0; i < count; i++) {
        const char *k, *v;
        s3x_json_kind kind;
        FUZZ_ASSERT(s3x_json_entry(j, i, &k, &v, &kind) == 0, "entry %zu", i);
        valid_utf8(k);
        FUZZ_ASSERT(kind >= S3X_JSON_STRING && kind <= S3X_JSON_ARRAY, "kind %d", (int)kind);
        for (size_t m = 0; m < i; m++) {
            const char *k2;
            s3x_json_entry(j, m, &k2, NULL, NULL);
            FUZZ_ASSERT(strcmp(k, k2), "member %s twice", k);
        }
        s3x_json_kind gk;
        FUZZ_ASSERT(s3x_json_get(j, k, &gk) == v && gk == kind, "get(%s) is not the entry", k);
        if (i) s3x_buf_puts(&again, ",");
        put_json_string(&again, k);
        s3x_buf_puts(&again, ":");
        switch (kind) {
        case S3X_JSON_STRING:
            valid_utf8(v);
            put_json_string(&again, v);
            break;
        case S3X_JSON_NUMBER: {
            char *end = NULL;
            (void)strtod(v, &end);
            FUZZ_ASSERT(end && !*end && *v, "number \"%s\" is not whole", v);
            s3x_buf_puts(&again, v);
            break;
        }
        case S3X_JSON_TRUE: FUZZ_ASSERT(!strcmp(v, "true"), "true"); s3x_buf_puts(&again, v); break;
        case S3X_JSON_FALSE: FUZZ_ASSERT(!strcmp(v, "false"), "false"); s3x_buf_puts(&again, v); break;
        case S3X_JSON_NULL: FUZZ_ASSERT(!strcmp(v, "null"), "null"); s3x_buf_puts(&again, v); break;
        case S3X_JSON_OBJECT: FUZZ_ASSERT(v == NULL, "object value"); s3x_buf_puts(&again, "{}"); break;
        case S3X_JSON_ARRAY: FUZZ_ASSERT(v == NULL, "array value"); s3x_buf_puts(&again, "[]"); break;
        }
    }
    s3x_buf_puts(&again, "}");
    if (again.len <= S3X_JSON_MAX_BYTES) {
        s3x_json *j2 = NULL;
        FUZZ_ASSERT(s3x_json_parse(again.data, again.len, "again", S3X_ECREDENTIALS, &j2) == 0, "re-parse: %s",
                    s3x_error_last()->message);
        FUZZ_ASSERT(s3x_json_count(j2) == count, "member count changed");
        for (size_t i = 0; i < count; i++) {
            const char *k, *v, *k2, *v2;
            s3x_json_kind a, b;
            s3x_json_entry(j, i, &k, &v, &a);
            s3x_json_entry(j2, i, &k2, &v2, &b);
            FUZZ_ASSERT(!strcmp(k, k2) && a == b && ((!v && !v2) || (v && v2 && !strcmp(v, v2))), "member %zu changed",
                        i);
        }
        s3x_json_free(j2);
    }
    s3x_buf_free(&again);
    s3x_json_free(j);
}

static void fuzz_sts(const char *x, size_t n) {
    s3x_xml_sts s;
    memset(&s, 0, sizeof s);
    int rc = s3x_xml_parse_sts(x, n, "AssumeRole", &s);
    FUZZ_ASSERT(rc == 0 || rc == S3X_EXML || rc == S3X_ENOMEM, "rc %d", rc);
    if (rc) {
        FUZZ_ASSERT(!s.access_key && !s.secret_key && !s.session_token && !s.expiration && !s.error_code, "not empty");
        return;
    }
    if (!s.error_code)
        FUZZ_ASSERT(s.access_key && *s.access_key && s.secret_key && *s.secret_key && s.session_token &&
                        *s.session_token && s.expiration && *s.expiration,
                    "credentials incomplete");
    s3x_xml_sts_free(&s);
}

static void fuzz_split(const char *x, size_t n) {
    (void)n;
    char **argv = NULL;
    const char *why = NULL;
    if (s3x_split_command(x, &argv, &why)) {
        FUZZ_ASSERT(why && argv == NULL, "failure without a reason");
        return;
    }
    FUZZ_ASSERT(argv && argv[0], "no words");
    s3x_buf b = S3X_BUF_INIT;
    size_t words = 0;
    for (char **p = argv; *p; p++, words++) {
        s3x_buf_puts(&b, " '");
        for (const char *c = *p; *c; c++) {
            if (*c == '\'') s3x_buf_puts(&b, "'\"'\"'");
            else s3x_buf_append(&b, c, 1);
        }
        s3x_buf_puts(&b, "'");
    }
    char **again = NULL;
    FUZZ_ASSERT(s3x_split_command(b.data, &again, &why) == 0, "re-split failed: %s", why);
    size_t i = 0;
    for (; again[i] && argv[i]; i++) FUZZ_ASSERT(!strcmp(again[i], argv[i]), "word %zu changed", i);
    FUZZ_ASSERT(!again[i] && !argv[i] && i == words, "word count changed");
    s3x_argv_free(again);
    s3x_argv_free(argv);
    s3x_buf_free(&b);
}

static void fuzz_time(const char *x, size_t n) {
    (void)n;
    double t;
    if (s3x_parse_iso8601(x, &t)) return;
    FUZZ_ASSERT(isfinite(t), "not finite");
    if (strlen(x) == 20 && x[19] == 'Z' && x[10] == 'T') {
        time_t tt = (time_t)t;
        struct tm tm;
        char back[32];
        /* Formatted by hand: strftime's %Y does not pad years below 1000
         * ("0026" would come back as "26"; found by this target). */
        if (gmtime_r(&tt, &tm) &&
            snprintf(back, sizeof back, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec) == 20 &&
            !strstr(x, ":60Z")) {
            /* Day 31 of a short month rolls over, as timegm does: only check
             * dates that exist. */
            int day = (x[8] - '0') * 10 + (x[9] - '0');
            if (tm.tm_mday == day) FUZZ_ASSERT(!strcmp(back, x), "%s read back as %s", x, back);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    /* An exact-size copy (the parsers take a length), and NUL-terminated
     * for the command and the time, which are C strings. */
    size_t n = size - 1;
    char *x = fuzz_copy(data + 1, n);
    char *z = malloc(n + 1);
    if (!z) abort();
    memcpy(z, data + 1, n);
    z[n] = '\0';
    switch (data[0] % 4) {
    case 0: fuzz_json(x, n); break;
    case 1: fuzz_sts(x, n); break;
    case 2: fuzz_split(z, n); break;
    default: fuzz_time(z, n); break;
    }
    free(x);
    free(z);
    return 0;
}
