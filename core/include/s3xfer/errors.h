/* s3xfer: error codes and the per-thread last error.
 *
 * Every fallible function returns 0 on success or a negative S3X_E* code.
 * The details of the most recent failure on the calling thread are kept until
 * the next failing call on that thread and can be read with s3x_error_last().
 */
#ifndef S3XFER_ERRORS_H
#define S3XFER_ERRORS_H

#include "s3xfer/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum s3x_errcode {
    S3X_OK = 0,
    S3X_EINVAL = -1,      /* bad argument or knob value */
    S3X_ENOMEM = -2,      /* allocation failed or memory limit cannot fit the transfer */
    S3X_EIO = -3,         /* local file or stream I/O failed */
    S3X_ECONNECT = -4,    /* could not connect / resolve / TLS handshake */
    S3X_ETIMEOUT = -5,    /* request timed out */
    S3X_ENETWORK = -6,    /* connection broke mid-request, short body */
    S3X_ETLS = -7,        /* certificate verification failed */
    S3X_EHTTP = -8,       /* the server answered with an error status (see status / s3_code) */
    S3X_EXML = -9,        /* a response body could not be parsed */
    S3X_ECREDENTIALS = -10, /* no credentials could be found */
    S3X_ECANCELLED = -11, /* cancelled by the caller (callback or s3x_*_cancel) */
    S3X_ECHECKSUM = -12,  /* a checksum did not match */
    S3X_ECHANGED = -13,   /* the source or the object changed during the transfer */
    S3X_ELIMIT = -14,     /* an S3 limit would be exceeded (part count, part size) */
    S3X_EINTERNAL = -15,  /* a bug: please report it */
    S3X_EPARTIAL = -16    /* a run of many objects: some failed (each reported on its own) */
} s3x_errcode;

typedef struct s3x_error {
    int code;              /* an s3x_errcode */
    int http_status;       /* 0 when no HTTP response was received */
    const char *message;   /* human-readable, never NULL */
    const char *s3_code;   /* S3 error code such as "NoSuchKey", or "" */
    const char *request_id;/* x-amz-request-id or "" */
    int sys_errno;         /* the system's errno behind a local failure (ENOSPC,
                            * EFBIG, ENOENT, EISDIR, EACCES...), 0 when none:
                            * set with S3X_EIO, and with other codes where a
                            * system call's failure is the cause */
} s3x_error;

/* The last error raised on the calling thread. Never NULL; the strings stay
 * valid until the next s3xfer call on this thread that fails, or
 * s3x_error_clear(). When no error happened, code is S3X_OK. */
S3X_API const s3x_error *s3x_error_last(void);

/* Resets the calling thread's last error to S3X_OK. */
S3X_API void s3x_error_clear(void);

/* A static, human-readable name for an error code ("invalid argument"...). */
S3X_API const char *s3x_strerror(int code);

#ifdef __cplusplus
}
#endif
#endif
