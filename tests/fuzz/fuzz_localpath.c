/* Keys to local paths and the helpers of a directory transfer
 * (core/src/util/localpath.c, filter.c). Input: a control byte, then
 * NUL-separated pieces.
 *   mode 0, 3: s3x_key_to_relpath(key, prefix): anything accepted is a
 *     relative path with no "..", "." or empty segment, no leading '/',
 *     segments within NAME_MAX and the whole below PATH_MAX, and it is the
 *     key's own tail (nothing is invented); refusals come with a reason.
 *     Pieces: key, prefix (mode 3: no prefix).
 *   mode 1: s3x_glob_match / filters: a pattern without '*', '?' or '['
 *     matches exactly itself; "*" + it + "*" matches any string holding it
 *     (for valid UTF-8, since characters are matched, not bytes);
 *     a filter list's answer is the kind of its last matching pattern.
 *     Pieces: pattern, string.
 *   mode 2: s3x_parse_s3_time: an accepted time has nanoseconds in range
 *     and formats back (gmtime) to the same date and time fields. */
#include "filter.h"
#include "fuzz.h"
#include "localpath.h"
#include "s3xfer/s3xfer.h"
#include <time.h>

static void check_rel(const char *key, const char *out, int dir) {
    size_t n = strlen(out);
    FUZZ_ASSERT(n < 4096, "accepted a path of %zu bytes", n);
    if (n == 0) {
        FUZZ_ASSERT(dir, "an empty path for the file key '%s'", key);
        return;
    }
    FUZZ_ASSERT(out[0] != '/', "leading '/' in '%s'", out);
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && out[i] != '/') continue;
        size_t len = i - start;
        FUZZ_ASSERT(len > 0, "empty segment in '%s'", out);
        FUZZ_ASSERT(len <= 255, "a segment of %zu bytes in '%s'", len, out);
        FUZZ_ASSERT(!(len == 1 && out[start] == '.'), "'.' segment in '%s'", out);
        FUZZ_ASSERT(!(len == 2 && out[start] == '.' && out[start + 1] == '.'), "'..' segment in '%s'", out);
        start = i + 1;
    }
    /* The path is the key's tail (before a marker's '/'). */
    size_t kn = strlen(key) - (dir ? 1 : 0);
    FUZZ_ASSERT(kn >= n && memcmp(key + kn - n, out, n) == 0, "'%s' is not the tail of '%s'", out, key);
}

static void fuzz_key(fuzz_in *in, int with_prefix) {
    char *key = fuzz_piece(in, NULL);
    char *prefix = with_prefix ? fuzz_piece(in, NULL) : NULL;
    char out[4096];
    const char *why = NULL;
    int rc = s3x_key_to_relpath(key, prefix, out, sizeof out, &why);
    if (rc == 0 || rc == S3X_RELPATH_DIR) {
        FUZZ_ASSERT(why == NULL, "a reason for an accepted key");
        check_rel(key, out, rc == S3X_RELPATH_DIR);
        if (rc == S3X_RELPATH_DIR) FUZZ_ASSERT(key[strlen(key) - 1] == '/', "a marker without '/': '%s'", key);
        else FUZZ_ASSERT(key[strlen(key) - 1] != '/', "a file key ending in '/': '%s'", key);
        if (prefix && *prefix) FUZZ_ASSERT(!strncmp(key, prefix, strlen(prefix)), "key not under its prefix");
    } else {
        FUZZ_ASSERT(rc == S3X_EINVAL && why && *why, "refusal %d without a reason", rc);
    }
    free(key);
    free(prefix);
}

/* 1 when s is well-formed UTF-8 (no overlong forms, no surrogates): then a
 * byte substring is also a substring of characters. */
static int valid_utf8(const char *str) {
    const unsigned char *s = (const unsigned char *)str;
    while (*s) {
        unsigned char c = *s;
        size_t len;
        uint32_t cp, min;
        if (c < 0x80) {
            s++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F, min = 0x80;
        else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F, min = 0x800;
        else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07, min = 0x10000;
        else return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[k] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (s[k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        s += len;
    }
    return 1;
}

static void fuzz_glob(fuzz_in *in) {
    char *pat = fuzz_piece(in, NULL);
    char *s = fuzz_piece(in, NULL);
    if (!strpbrk(pat, "*?[")) {
        FUZZ_ASSERT(s3x_glob_match(pat, pat), "'%s' does not match itself", pat);
        FUZZ_ASSERT(s3x_glob_match(pat, s) == !strcmp(pat, s), "literal '%s' on '%s'", pat, s);
        size_t n = strlen(pat);
        char *star = malloc(n + 3);
        if (!star) abort();
        star[0] = '*';
        memcpy(star + 1, pat, n);
        star[n + 1] = '*';
        star[n + 2] = '\0';
        /* Matching is by characters (as Python's fnmatch on str): a byte
         * substring that splits a character is not a match, so compare
         * with strstr only where every byte string is whole characters. */
        if (valid_utf8(pat) && valid_utf8(s))
            FUZZ_ASSERT(s3x_glob_match(star, s) == (strstr(s, pat) != NULL), "'%s' on '%s'", star, s);
        free(star);
    }
    FUZZ_ASSERT(s3x_glob_match("*", s), "'*' must match everything");
    /* A list of (pattern, exclude) then (pattern, include): the later wins. */
    s3x_filter *f = NULL;
    if (s3x_filter_new(&f) == 0) {
        int m = s3x_glob_match(pat, s);
        if (s3x_filter_add(f, S3X_FILTER_EXCLUDE, "*") == 0 && s3x_filter_add(f, S3X_FILTER_INCLUDE, pat) == 0)
            FUZZ_ASSERT(s3x_filter_match(f, s) == m, "exclude *, include '%s' on '%s'", pat, s);
        s3x_filter_free(f);
    }
    free(pat);
    free(s);
}

static void fuzz_time(fuzz_in *in) {
    char *s = fuzz_piece(in, NULL);
    int64_t sec = 0;
    long ns = 0;
    if (s3x_parse_s3_time(s, &sec, &ns) == 0) {
        FUZZ_ASSERT(ns >= 0 && ns <= 999999999L, "nanoseconds %ld", ns);
        FUZZ_ASSERT(sec >= -62167219200LL && sec <= 253402300800LL, "seconds %lld out of years 0-9999",
                    (long long)sec);
        int y, mo, d, h, mi, se;
        FUZZ_ASSERT(sscanf(s, "%4d-%2d-%2d%*c%2d:%2d:%2d", &y, &mo, &d, &h, &mi, &se) == 6, "fields of '%s'", s);
        if (se < 60) {
            time_t t = (time_t)sec;
            struct tm tm;
            FUZZ_ASSERT(gmtime_r(&t, &tm) != NULL, "gmtime");
            FUZZ_ASSERT(tm.tm_year + 1900 == y && tm.tm_mon + 1 == mo && tm.tm_mday == d && tm.tm_hour == h &&
                            tm.tm_min == mi && tm.tm_sec == se,
                        "'%s' read as %lld", s, (long long)sec);
        }
    }
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_in in = {data, size};
    switch (fuzz_u8(&in) % 4) {
    case 0: fuzz_key(&in, 1); break;
    case 1: fuzz_glob(&in); break;
    case 2: fuzz_time(&in); break;
    default: fuzz_key(&in, 0); break;
    }
    return 0;
}
