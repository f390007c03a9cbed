/* A tiny assertion helper for the C tests: every failed check prints one line
 * ("FAIL file:line: what"), and tap_summary() prints "N passed, M failed" and
 * gives main() its exit status. Header-only; include it from one .c file. */
#ifndef S3X_TEST_TAP_H
#define S3X_TEST_TAP_H
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int tap_passed, tap_failed;

#if defined(__GNUC__)
#define TAP_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TAP_PRINTF(a, b)
#endif

static inline int tap_check(int ok, const char *file, int line, const char *fmt, ...) TAP_PRINTF(4, 5);
static inline int tap_check(int ok, const char *file, int line, const char *fmt, ...) {
    if (ok) {
        tap_passed++;
        return 1;
    }
    tap_failed++;
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL %s:%d: ", file, line);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    return 0;
}

/* Prints s with control characters and non-ASCII bytes escaped. */
static inline void tap_print_escaped(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') printf("\\n");
        else if (c == '\t') printf("\\t");
        else if (c == '\\') printf("\\\\");
        else if (c < 0x20 || c >= 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
}

static inline int tap_memeq(const char *file, int line, const char *what, const char *actual, size_t alen,
                            const char *expected, size_t elen) {
    int ok = actual && alen == elen && memcmp(actual, expected, elen) == 0;
    if (ok) {
        tap_passed++;
        return 1;
    }
    tap_failed++;
    printf("FAIL %s:%d: %s\n  expected: \"", file, line, what);
    tap_print_escaped(expected, elen);
    printf("\"\n  actual:   ");
    if (actual) {
        printf("\"");
        tap_print_escaped(actual, alen);
        printf("\"\n");
    } else {
        printf("NULL\n");
    }
    fflush(stdout);
    return 0;
}

static inline int tap_streq(const char *file, int line, const char *what, const char *actual,
                            const char *expected) {
    return tap_memeq(file, line, what, actual, actual ? strlen(actual) : 0, expected, strlen(expected));
}

/* CHECK(cond, "printf format", args...) -- the message is required. */
#define CHECK(cond, ...) tap_check((cond) != 0, __FILE__, __LINE__, __VA_ARGS__)
#define CHECK_STREQ(actual, expected, what) tap_streq(__FILE__, __LINE__, (what), (actual), (expected))
#define CHECK_MEMEQ(actual, alen, expected, elen, what) \
    tap_memeq(__FILE__, __LINE__, (what), (actual), (alen), (expected), (elen))
#define CHECK_INTEQ(actual, expected, what)                                                              \
    tap_check((long long)(actual) == (long long)(expected), __FILE__, __LINE__, "%s: expected %lld, got %lld", \
              (what), (long long)(expected), (long long)(actual))

static inline int tap_summary(const char *name) {
    printf("%s: %d passed, %d failed\n", name, tap_passed, tap_failed);
    return tap_failed ? 1 : 0;
}

#endif
