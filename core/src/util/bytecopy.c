#include "bytecopy.h"
#include <stdint.h>
#include <string.h>

int s3x_bytes_copy_plain;

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
