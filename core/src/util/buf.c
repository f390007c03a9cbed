#include "buf.h"
#include "s3xfer/s3xfer.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int s3x_buf_reserve(s3x_buf *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap) return 0;
    size_t need = b->len + extra + 1;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) {
        if (cap > ((size_t)-1) / 2) return S3X_ENOMEM;
        cap *= 2;
    }
    char *p = realloc(b->data, cap);
    if (!p) return S3X_ENOMEM;
    b->data = p;
    b->cap = cap;
    return 0;
}

int s3x_buf_append(s3x_buf *b, const void *p, size_t n) {
    int rc = s3x_buf_reserve(b, n);
    if (rc) return rc;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int s3x_buf_puts(s3x_buf *b, const char *s) { return s3x_buf_append(b, s, strlen(s)); }

int s3x_buf_vprintf(s3x_buf *b, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) return S3X_EINVAL;
    int rc = s3x_buf_reserve(b, (size_t)n);
    if (rc) return rc;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return 0;
}

int s3x_buf_printf(s3x_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = s3x_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

void s3x_buf_clear(s3x_buf *b) {
    b->len = 0;
    if (b->data) b->data[0] = '\0';
}

void s3x_buf_free(s3x_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

char *s3x_buf_detach(s3x_buf *b) {
    if (!b->data && s3x_buf_reserve(b, 0)) return NULL;
    if (!b->data) return NULL;
    b->data[b->len] = '\0';
    char *p = b->data;
    b->data = NULL;
    b->len = b->cap = 0;
    return p;
}

void s3x_wipe(void *p, size_t n) {
    if (p && n) explicit_bzero(p, n);
}

void s3x_free_secret(char *s) {
    if (!s) return;
    s3x_wipe(s, strlen(s));
    free(s);
}

char *s3x_strndup(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}
