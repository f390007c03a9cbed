/* Setting the per-thread last error (private). */
#ifndef S3X_ERROR_INTERNAL_H
#define S3X_ERROR_INTERNAL_H
#include "s3xfer/errors.h"

/* Sets the calling thread's last error (http_status 0, no S3 code) and
 * returns code, so callers can write: return s3x_seterr(S3X_EINVAL, "...", ...). */
int s3x_seterr(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Same, with the system's errno behind it (s3x_error.sys_errno), for a
 * failure the library found itself and names in its own words:
 * return s3x_seterr_sys(S3X_EIO, EISDIR, "%s is a directory", path). */
int s3x_seterr_sys(int code, int sys_errno, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Same, for a failure that a system call reported: the message is fmt's text
 * followed by ": " and the errno's text, so
 * return s3x_seterr_errno(S3X_EIO, errno, "cannot open %s", path)
 * says "cannot open /x: No such file or directory". */
int s3x_seterr_errno(int code, int sys_errno, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Puts fmt's text in front of the calling thread's last error's message,
 * keeping every other field (code, HTTP status, S3 code, request id, the
 * system's errno), and returns its code: a layer that knows more (an
 * object's name) adds it to an error set beneath it. */
int s3x_error_prefix(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Same, with the HTTP/S3 details of a failed response. Any string may be NULL. */
int s3x_seterr_http(int code, int http_status, const char *s3_code,
                    const char *request_id, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* A copy of an error, to carry it from one thread to another (s3x_error_save
 * into a struct, s3x_error_restore on the caller's thread). */
typedef struct s3x_saved_error {
    int code, http_status, sys_errno;
    char *message, *s3_code, *request_id;
} s3x_saved_error;
void s3x_error_save(s3x_saved_error *dst);    /* copies the current thread's error */
int s3x_error_restore(const s3x_saved_error *src); /* returns src->code */
void s3x_saved_error_free(s3x_saved_error *e);

#endif
