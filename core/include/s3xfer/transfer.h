/* s3xfer: the upload and download managers.
 *
 * A manager moves one object at a time with many requests in flight on one
 * libcurl multi loop (the calling thread), inside a memory bound computed
 * from its knobs before the first request is sent.
 *
 * Thread rules: one thread uses a manager at a time, and the manager uses its
 * client for the whole transfer (do not use that client from elsewhere
 * meanwhile). s3x_upload_cancel / s3x_download_cancel may be called from any
 * thread. Progress callbacks run on the thread that called the transfer.
 */
#ifndef S3XFER_TRANSFER_H
#define S3XFER_TRANSFER_H

#include <stddef.h>
#include <stdint.h>
#include "s3xfer/export.h"
#include "s3xfer/params.h"
#include "s3xfer/client.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a transfer did. Filled on success and, as far as it got, on failure. */
typedef struct s3x_result {
    int64_t bytes;              /* object bytes moved */
    int64_t parts;              /* parts (upload) or ranges (download); 1 for a single request */
    double seconds;             /* wall time of the transfer */
    double io_seconds;          /* of which the transfer's thread spent reading the source or writing
                                   the destination and computing checksums (the rest it waits on the network) */
    int64_t requests;           /* HTTP requests sent, retries included */
    int64_t retries;            /* requests re-sent, all causes */
    int64_t retries_http;       /* ... after a retryable HTTP status (500, 503 SlowDown, ...) */
    int64_t retries_network;    /* ... after a reset / broken or short connection */
    int64_t retries_timeout;    /* ... after a timeout or a stalled connection */
    int64_t retries_first_byte; /* ... after the slow-part (first-byte) timeout */
    int64_t slow_part_timeout_ms; /* first-byte timeout in force at the end (0 = off) */
    int64_t part_size;          /* part size used (may exceed the knob: at most 10,000 parts) */
    int64_t concurrency;        /* requests in flight at most */
    int64_t pool_allocations;   /* buffers the pool allocated */
    int64_t pool_bytes_allocated; /* bytes the pool allocated, in total */
    int64_t peak_buffer_bytes;  /* most bytes of buffers held at one time */
    int64_t buffer_waits;       /* times a part waited for a free buffer */
    int multipart;              /* 1 when a multipart upload / ranged download was used */
    char etag[128];             /* ETag of the object (quotes included) */
    char upload_id[256];        /* multipart upload id (upload), or "" */
    /* Added after the fields above (ABI order kept). */
    int64_t retries_throttled;  /* requests re-sent after a throttling answer (SlowDown, 429, 503, 500;
                                   also counted in retries and retries_http) */
    double throttled_seconds;   /* wall seconds the transfer spent throttled: from a throttling answer
                                   to the next request that succeeded, summed over storms */
    /* Downloads to a file (0 otherwise). */
    int64_t fsyncs;             /* fsync calls on the file before its rename: 1 when durable, else 0 */
    int64_t writeback_calls;    /* early writeback requests while it was written (durable, Linux) */
    double sync_seconds;        /* wall seconds from the last byte received to the file being renamed,
                                   the final fsync included (also counted in seconds) */
    /* Downloads (0 otherwise). */
    int64_t requests_received_elsewhere; /* ranged GETs (retries included) received on one of the
                                   client's extra receiving threads (receive_threads below > 1),
                                   not on the transfer's own */
    int64_t receive_threads;    /* the receiving threads the client had for it: S3X_PARAM_RECEIVE_THREADS,
                                   or what its default 0 (auto) picked for this machine */
} s3x_result;

/* Progress: bytes done so far and the total (-1 when unknown). Called on the
 * transfer's thread after each part completes and at least every 250 ms
 * while the transfer runs (with bytes still in flight counted), so it doubles
 * as a heartbeat; `done` never goes back. Return 0 to go on, non-zero to
 * cancel the transfer (it then fails with S3X_ECANCELLED after cleaning up). */
typedef int (*s3x_progress_fn)(int64_t done, int64_t total, void *payload);

/* ---- upload manager --------------------------------------------------- */

typedef struct s3x_upload s3x_upload;

/* Creates an upload manager that sends through client (borrowed: it must
 * outlive the manager). Knobs start at their defaults.
 * Errors: S3X_EINVAL, S3X_ENOMEM. */
S3X_API int s3x_upload_new(s3x_upload **out, s3x_client *client);
/* Frees the manager and the buffers its pool keeps. Accepts NULL. */
S3X_API void s3x_upload_free(s3x_upload *u);
/* Knobs: PART_SIZE, MULTIPART_THRESHOLD, CONCURRENCY, BUFFER_STRATEGY, POOL,
 * MEMORY_LIMIT, CHECKSUM, LEAVE_PARTS_ON_ERROR, MAX_ATTEMPTS,
 * SLOW_PART_TIMEOUT, SIZE_HINT. Out-of-range values fail with S3X_EINVAL. */
S3X_API int s3x_upload_set(s3x_upload *u, s3x_param param, int64_t value);
S3X_API int s3x_upload_get(const s3x_upload *u, s3x_param param, int64_t *value);
S3X_API void s3x_upload_set_progress(s3x_upload *u, s3x_progress_fn fn, void *payload);
/* Asks a running transfer to stop; safe from any thread (and from a signal
 * handler). The transfer fails with S3X_ECANCELLED after aborting the
 * multipart upload. A cancel before a transfer starts is kept for it. */
S3X_API void s3x_upload_cancel(s3x_upload *u);

/* Uploads a regular file. Its size and mtime are checked at the end: a file
 * that changed meanwhile fails the upload with S3X_ECHANGED (aborted).
 * result may be NULL. */
S3X_API int s3x_upload_file(s3x_upload *u, const char *bucket, const char *key, const char *path,
                            s3x_result *result);
/* Uploads len bytes at data, sent in place (BUFFERED copies into pool buffers). */
S3X_API int s3x_upload_memory(s3x_upload *u, const char *bucket, const char *key, const void *data,
                              size_t len, s3x_result *result);
/* Uploads everything read from fd until end of file (a pipe, a socket,
 * stdin); always buffered. SIZE_HINT sizes the parts when known. */
S3X_API int s3x_upload_fd(s3x_upload *u, const char *bucket, const char *key, int fd,
                          s3x_result *result);
/* Uploads what read_fn yields until it returns 0 (or fails on < 0); buffered. */
S3X_API int s3x_upload_stream(s3x_upload *u, const char *bucket, const char *key, s3x_read_fn read_fn,
                              s3x_result *result, void *payload);

/* The part size the manager would use for an object of size bytes (-1 =
 * unknown size): the knob, grown so that at most 10,000 parts are needed.
 * For unknown sizes, this is the first part's size (see docs: growth rule). */
S3X_API int64_t s3x_upload_plan_part_size(const s3x_upload *u, int64_t size);

/* Server-side copy of src_bucket/src_key to dst_bucket/dst_key with this
 * manager's knobs: a HeadObject of the source, then one CopyObject below
 * MULTIPART_THRESHOLD, else UploadPartCopy ranges of PART_SIZE (grown so at
 * most 10,000 parts; objects over 5 GiB work), CONCURRENCY at once. Every
 * request is pinned to the source's ETag (x-amz-copy-source-if-match): a
 * source replaced during the copy fails it with S3X_ECHANGED. A failed or
 * cancelled multipart copy is aborted. opts may be NULL (metadata COPY).
 * The result's bytes, parts, requests, retries, etag, upload_id and
 * multipart are filled; no pool buffer is used. */
S3X_API int s3x_upload_copy(s3x_upload *u, const char *src_bucket, const char *src_key, const char *dst_bucket,
                            const char *dst_key, const s3x_copy_opts *opts, s3x_result *result);
/* The same with the default knobs, on an upload manager of its own for the
 * call (result may be NULL). */
S3X_API int s3x_copy(s3x_client *client, const char *src_bucket, const char *src_key, const char *dst_bucket,
                     const char *dst_key, const s3x_copy_opts *opts, s3x_result *result);

/* ---- download manager ------------------------------------------------- */

typedef struct s3x_download s3x_download;

S3X_API int s3x_download_new(s3x_download **out, s3x_client *client);
S3X_API void s3x_download_free(s3x_download *d);
/* Knobs: PART_SIZE, CONCURRENCY, POOL, MEMORY_LIMIT,
 * VALIDATE_CHECKSUM, MAX_ATTEMPTS, SLOW_PART_TIMEOUT. */
S3X_API int s3x_download_set(s3x_download *d, s3x_param param, int64_t value);
S3X_API int s3x_download_get(const s3x_download *d, s3x_param param, int64_t *value);
S3X_API void s3x_download_set_progress(s3x_download *d, s3x_progress_fn fn, void *payload);
S3X_API void s3x_download_cancel(s3x_download *d);

/* Downloads into path: ranges are written at their offsets into a temporary
 * file beside it, which is renamed onto path only when every byte arrived;
 * on failure the temporary file is removed and an existing path is untouched. */
S3X_API int s3x_download_file(s3x_download *d, const char *bucket, const char *key, const char *path,
                              s3x_result *result);
/* Downloads into a caller's buffer of cap bytes; *len receives the object
 * size. An object larger than cap fails with S3X_ELIMIT before any body is
 * kept. */
S3X_API int s3x_download_memory(s3x_download *d, const char *bucket, const char *key, void *buf,
                                size_t cap, size_t *len, s3x_result *result);
/* Downloads in order to write_fn (ranges arrive in any order and are
 * delivered in order; reordering memory is bounded by the memory limit). */
S3X_API int s3x_download_stream(s3x_download *d, const char *bucket, const char *key,
                                s3x_write_fn write_fn, s3x_result *result, void *payload);
/* Same, to a file descriptor (stdout, a pipe). */
S3X_API int s3x_download_fd(s3x_download *d, const char *bucket, const char *key, int fd,
                            s3x_result *result);

#ifdef __cplusplus
}
#endif
#endif
