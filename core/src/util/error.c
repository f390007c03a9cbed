#include "error.h"
#include "buf.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One last-error record per thread; strings are owned by the record. */
typedef struct tls_error {
    s3x_error pub;
    char *message, *s3_code, *request_id;
} tls_error;

static _Thread_local tls_error g_err;

static char *dup_or_empty(const char *s) {
    size_t n = s ? strlen(s) : 0;
    char *p = malloc(n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static void set_fields(int code, int status, int sys_errno, const char *s3_code, const char *request_id,
                       char *message /* owned */) {
    /* Copy first: the new values may point into the current record. */
    char *c = dup_or_empty(s3_code), *r = dup_or_empty(request_id);
    free(g_err.message);
    free(g_err.s3_code);
    free(g_err.request_id);
    g_err.message = message;
    g_err.s3_code = c;
    g_err.request_id = r;
    g_err.pub.code = code;
    g_err.pub.http_status = status;
    g_err.pub.sys_errno = sys_errno;
    g_err.pub.message = g_err.message ? g_err.message : "out of memory";
    g_err.pub.s3_code = g_err.s3_code ? g_err.s3_code : "";
    g_err.pub.request_id = g_err.request_id ? g_err.request_id : "";
}

/* fmt's text followed by tail (NULL: nothing), malloc'ed; NULL when out of
 * memory. */
__attribute__((format(printf, 1, 0))) static char *vformat_then(const char *fmt, va_list ap, const char *tail) {
    s3x_buf b = S3X_BUF_INIT;
    if (s3x_buf_vprintf(&b, fmt, ap) || (tail && s3x_buf_puts(&b, tail))) {
        s3x_buf_free(&b);
        return NULL;
    }
    return s3x_buf_detach(&b);
}

__attribute__((format(printf, 1, 0))) static char *vformat(const char *fmt, va_list ap) {
    return vformat_then(fmt, ap, NULL);
}

int s3x_seterr(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *m = vformat(fmt, ap);
    va_end(ap);
    set_fields(code, 0, 0, NULL, NULL, m);
    return code;
}

int s3x_seterr_sys(int code, int sys_errno, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *m = vformat(fmt, ap);
    va_end(ap);
    set_fields(code, 0, sys_errno, NULL, NULL, m);
    return code;
}

int s3x_seterr_errno(int code, int sys_errno, const char *fmt, ...) {
    char why[160];
    snprintf(why, sizeof why, ": %s", strerror(sys_errno));
    va_list ap;
    va_start(ap, fmt);
    char *m = vformat_then(fmt, ap, why);
    va_end(ap);
    set_fields(code, 0, sys_errno, NULL, NULL, m);
    return code;
}

int s3x_error_prefix(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *m = vformat_then(fmt, ap, g_err.pub.message ? g_err.pub.message : "");
    va_end(ap);
    set_fields(g_err.pub.code, g_err.pub.http_status, g_err.pub.sys_errno, g_err.s3_code, g_err.request_id, m);
    return g_err.pub.code;
}

int s3x_seterr_http(int code, int http_status, const char *s3_code, const char *request_id,
                    const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *m = vformat(fmt, ap);
    va_end(ap);
    set_fields(code, http_status, 0, s3_code, request_id, m);
    return code;
}

const s3x_error *s3x_error_last(void) {
    if (!g_err.pub.message) {
        g_err.pub.message = "";
        g_err.pub.s3_code = "";
        g_err.pub.request_id = "";
    }
    return &g_err.pub;
}

void s3x_error_clear(void) {
    free(g_err.message);
    free(g_err.s3_code);
    free(g_err.request_id);
    memset(&g_err, 0, sizeof g_err);
}

void s3x_error_save(s3x_saved_error *dst) {
    const s3x_error *e = s3x_error_last();
    dst->code = e->code;
    dst->http_status = e->http_status;
    dst->sys_errno = e->sys_errno;
    dst->message = dup_or_empty(e->message);
    dst->s3_code = dup_or_empty(e->s3_code);
    dst->request_id = dup_or_empty(e->request_id);
}

int s3x_error_restore(const s3x_saved_error *src) {
    set_fields(src->code, src->http_status, src->sys_errno, src->s3_code, src->request_id,
               dup_or_empty(src->message));
    return src->code;
}

void s3x_saved_error_free(s3x_saved_error *e) {
    free(e->message);
    free(e->s3_code);
    free(e->request_id);
    memset(e, 0, sizeof *e);
}

const char *s3x_strerror(int code) {
    switch (code) {
    case S3X_OK: return "success";
    case S3X_EINVAL: return "invalid argument";
    case S3X_ENOMEM: return "out of memory";
    case S3X_EIO: return "local I/O error";
    case S3X_ECONNECT: return "could not connect";
    case S3X_ETIMEOUT: return "timed out";
    case S3X_ENETWORK: return "network error";
    case S3X_ETLS: return "TLS certificate verification failed";
    case S3X_EHTTP: return "server returned an error";
    case S3X_EXML: return "malformed XML response";
    case S3X_ECREDENTIALS: return "no credentials";
    case S3X_ECANCELLED: return "cancelled";
    case S3X_ECHECKSUM: return "checksum mismatch";
    case S3X_ECHANGED: return "source or object changed during transfer";
    case S3X_ELIMIT: return "S3 limit exceeded";
    case S3X_EINTERNAL: return "internal error";
    case S3X_EPARTIAL: return "some objects failed";
    default: return "unknown error";
    }
}
