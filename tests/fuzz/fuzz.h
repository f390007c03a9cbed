/* Helpers shared by the fuzz targets in tests/fuzz (see README.md there).
 *
 * A target is tests/fuzz/fuzz_<name>.c defining LLVMFuzzerTestOneInput. It
 * checks properties, not just "does not crash": FUZZ_ASSERT prints what broke
 * and aborts, which libFuzzer reports as a crash (and saves the input) and
 * which fails the corpus replay under ctest. Targets print nothing else. */
#ifndef S3X_FUZZ_H
#define S3X_FUZZ_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_ASSERT(cond, ...)                                                          \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "fuzz assertion failed at %s:%d: %s\n  ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                               \
            fputc('\n', stderr);                                                        \
            abort();                                                                    \
        }                                                                               \
    } while (0)

/* A cursor over the input, for targets that take structured input. Reads
 * past the end give zeros / empty pieces, so every input means something. */
typedef struct fuzz_in {
    const uint8_t *p;
    size_t n;
} fuzz_in;

static inline uint8_t fuzz_u8(fuzz_in *in) {
    if (!in->n) return 0;
    in->n--;
    return *in->p++;
}

static inline uint32_t fuzz_u16(fuzz_in *in) {
    uint32_t hi = fuzz_u8(in);
    return (hi << 8) | fuzz_u8(in);
}

/* The next piece up to (not including) a NUL byte, or the rest; *len is its
 * length. The NUL is consumed. Returns a malloc'd NUL-terminated copy (never
 * NULL: aborts when out of memory, which only a broken target would reach). */
static inline char *fuzz_piece(fuzz_in *in, size_t *len) {
    const uint8_t *z = in->n ? memchr(in->p, 0, in->n) : NULL;
    size_t k = z ? (size_t)(z - in->p) : in->n;
    char *s = malloc(k + 1);
    if (!s) abort();
    if (k) memcpy(s, in->p, k);
    s[k] = '\0';
    in->p += k;
    in->n -= k;
    if (z) {
        in->p++;
        in->n--;
    }
    if (len) *len = k;
    return s;
}

/* An exact-size heap copy of n bytes (so ASan sees any read past the end of
 * a buffer that is not NUL-terminated). */
static inline char *fuzz_copy(const void *p, size_t n) {
    char *s = malloc(n ? n : 1);
    if (!s) abort();
    if (n) memcpy(s, p, n);
    return s;
}

#endif
