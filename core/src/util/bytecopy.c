#include "bytecopy.h"
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h>
#define S3X_HAVE_STREAM_STORES 1
/* 16 bytes from any address, and 16 stored past the cache to a 16-aligned
 * one; the casts go through void * because a char * carries no alignment. */
static inline __m128i load16(const char *p) { return _mm_loadu_si128((const __m128i *)(const void *)p); }
static inline void stream16(char *p, __m128i v) { _mm_stream_si128((__m128i *)(void *)p, v); }
#endif

int s3x_bytes_copy_plain;
int s3x_bytes_copy_cold = 1;

void *s3x_bytes_copy(void *dst, const void *src, size_t n) {
    size_t ahead = (size_t)(((uintptr_t)dst - (uintptr_t)src) & 4095u);
    if (n <= S3X_BYTES_COPY_PIECE || ahead == 0 || ahead >= 32 || s3x_bytes_copy_plain) return memcpy(dst, src, n);
    char *o = dst;
    const char *i = src;
    while (n > S3X_BYTES_COPY_PIECE) {
        memcpy(o, i, S3X_BYTES_COPY_PIECE);
        o += S3X_BYTES_COPY_PIECE;
        i += S3X_BYTES_COPY_PIECE;
        n -= S3X_BYTES_COPY_PIECE;
    }
    memcpy(o, i, n);
    return dst;
}

void *s3x_bytes_copy_to(void *dst, const void *src, size_t n, size_t region) {
#ifdef S3X_HAVE_STREAM_STORES
    if (region < S3X_BYTES_COLD_REGION || n < S3X_BYTES_COLD_MIN || s3x_bytes_copy_plain || !s3x_bytes_copy_cold)
        return s3x_bytes_copy(dst, src, n);
    char *o = dst;
    const char *i = src;
    size_t head = (size_t)(-(uintptr_t)o & 63u);
    memcpy(o, i, head);
    o += head;
    i += head;
    n -= head;
    for (; n >= 64; o += 64, i += 64, n -= 64) {
        __m128i a = load16(i), b = load16(i + 16), c = load16(i + 32), d = load16(i + 48);
        stream16(o, a);
        stream16(o + 16, b);
        stream16(o + 32, c);
        stream16(o + 48, d);
    }
    memcpy(o, i, n);
    _mm_sfence();
    return dst;
#else
    (void)region;
    return s3x_bytes_copy(dst, src, n);
#endif
}
