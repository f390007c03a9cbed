/* s3xfer: knobs.
 *
 * Every tunable is one value of s3x_param, an int64_t, set with the setter of
 * the handle it applies to (s3x_client_set, s3x_upload_set, s3x_download_set,
 * s3x_batch_set).
 * s3x_param_bounds() tells the accepted range; a setter rejects a value out of
 * range (or a knob that does not apply to that handle) with S3X_EINVAL and a
 * message naming the knob and its range. Values are never clamped silently.
 */
#ifndef S3XFER_PARAMS_H
#define S3XFER_PARAMS_H

#include <stdint.h>
#include "s3xfer/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum s3x_param {
    /* --- client ------------------------------------------------------ */
    S3X_PARAM_ADDRESSING_STYLE = 0, /* s3x_addressing; default AUTO */
    S3X_PARAM_VERIFY_TLS,           /* 0 or 1; default 1 */
    S3X_PARAM_CONNECT_TIMEOUT_MS,   /* default 10000 */
    S3X_PARAM_REQUEST_TIMEOUT_MS,   /* whole-request cap for single operations; 0 = none (default) */
    S3X_PARAM_PAYLOAD_SIGNING,      /* s3x_payload_signing; default AUTO */
    S3X_PARAM_MAX_CONNECTIONS,      /* connections per host the client may open; default 256 */

    /* --- upload and download managers -------------------------------- */
    S3X_PARAM_PART_SIZE,            /* bytes; upload 5 MiB .. 5 GiB (default 8 MiB) */
    S3X_PARAM_MULTIPART_THRESHOLD,  /* bytes (upload); below it one PutObject (default 8 MiB) */
    S3X_PARAM_CONCURRENCY,          /* requests in flight, 1 .. 1024 (default 16) */
    S3X_PARAM_BUFFER_STRATEGY,      /* s3x_buffer_strategy (upload); default AUTO */
    S3X_PARAM_POOL,                 /* s3x_pool_kind; default BOUNDED */
    S3X_PARAM_MEMORY_LIMIT,         /* bytes of part buffers the manager may hold; 0 = no limit (default) */
    S3X_PARAM_CHECKSUM,             /* s3x_checksum (upload); default CRC32C */
    S3X_PARAM_LEAVE_PARTS_ON_ERROR, /* 0 or 1 (upload); default 0: a failed upload is aborted */
    S3X_PARAM_MAX_ATTEMPTS,         /* attempts per request, 1 .. 100 (default 5). Also a client knob: the
                                       attempts of each single operation (s3x_put_object, ...) */
    S3X_PARAM_SLOW_PART_TIMEOUT,    /* S3X_SLOW_PART_OFF (0), S3X_SLOW_PART_DYNAMIC (-1), or a fixed timeout in ms */
    S3X_PARAM_VALIDATE_CHECKSUM,    /* 0 or 1 (download); default 1 */
    S3X_PARAM_SIZE_HINT,            /* bytes expected from a stream of unknown length; 0 = unknown (default) */
    S3X_PARAM_STALL_TIMEOUT_MS,     /* a request moving less than STALL_MIN_RATE for this long is dropped and
                                       retried; 0 = off; default 30000 */
    S3X_PARAM_STALL_MIN_RATE,       /* bytes/s below which a request counts as stalled; default 1 */
    S3X_PARAM_CHECKSUM_LOCATION,    /* s3x_checksum_location (upload); default AUTO */
    S3X_PARAM_RETRY_TIMEOUT,        /* ms, 0 .. 86400000 (default 120000): how long a transfer keeps retrying
                                       throttling answers (503 SlowDown, 429, 500, ...) with no request
                                       succeeding, whatever MAX_ATTEMPTS says; 0 = throttling is retried
                                       MAX_ATTEMPTS times like any other error. Also a client knob: the
                                       window of each single operation. See docs/reliability.md */
    S3X_PARAM_RETRY_MODE,           /* s3x_retry_mode; default ADAPTIVE. Also a client knob (single operations) */
    S3X_PARAM_FAIL_FAST,            /* 0 or 1 (batch); default 0: a failed transfer does not stop the others;
                                       1: the first failure cancels every transfer not yet finished */
    S3X_PARAM_DURABLE,              /* 0 or 1 (download to a file); default 1: the file is on disk (fsync)
                                       before it is renamed into place, so after a crash or power loss the
                                       path holds the old file or the whole new one. 0: no fsync; a power
                                       loss soon after the download may leave the renamed file empty or
                                       partial (the kernel writes it back within about 30 s) */
    S3X_PARAM_CHECKSUM_TYPE,        /* s3x_checksum_type (multipart upload); default COMPOSITE */
    S3X_PARAM_RECEIVE_THREADS,      /* client, 0 .. 8 (default 0, auto): threads that receive the ranged GETs
                                       of downloads. 0: one for every two CPUs the process may use (its
                                       affinity mask, lowered by a cgroup CPU limit), at least 1 and at
                                       most 8, so 1 on 2 or 3 CPUs. 1: every request runs on the
                                       thread that drives the transfer. N > 1: N - 1 more threads, each
                                       with connections of its own, take ranges as they start (the least
                                       busy first); the rest of the transfer stays on the driving thread.
                                       Downloads to a file over plain HTTP keep one receiving thread
                                       (their writer threads do the file's work); over https (where
                                       decrypting is the receiving thread's cost) they use the N too.
                                       See docs/performance.md */

    S3X_PARAM__COUNT
} s3x_param;

typedef enum s3x_addressing {
    S3X_ADDRESSING_AUTO = 0,   /* botocore's rules and the profile's s3 addressing_style (docs/endpoints.md) */
    S3X_ADDRESSING_PATH = 1,
    S3X_ADDRESSING_VIRTUAL = 2
} s3x_addressing;

typedef enum s3x_payload_signing {
    S3X_PAYLOAD_SIGNED = 0,    /* x-amz-content-sha256 is the SHA-256 of the body */
    S3X_PAYLOAD_UNSIGNED = 1,  /* UNSIGNED-PAYLOAD: the body is not hashed for the signature */
    S3X_PAYLOAD_AUTO = 2       /* unsigned when the request carries a checksum of its body, which the
                                  server checks: UNSIGNED-PAYLOAD with an x-amz-checksum-* or
                                  Content-MD5 header, or STREAMING-UNSIGNED-PAYLOAD-TRAILER with the
                                  checksum in a trailer (S3X_PARAM_CHECKSUM_LOCATION); else SIGNED */
} s3x_payload_signing;

typedef enum s3x_buffer_strategy {
    S3X_BUFFER_AUTO = 0,       /* unbuffered for seekable files, buffered otherwise */
    S3X_BUFFER_BUFFERED = 1,   /* each part is read into a pool buffer before it is sent */
    S3X_BUFFER_UNBUFFERED = 2  /* each part is read in place (pread at its offset) while it is sent */
} s3x_buffer_strategy;

typedef enum s3x_pool_kind {
    S3X_POOL_BOUNDED = 0,      /* at most concurrency+1 buffers ever; a part waits for a free one */
    S3X_POOL_CACHE = 1,        /* unbounded free list that keeps every buffer it ever made */
    S3X_POOL_MALLOC = 2        /* a fresh buffer per part, freed after use */
} s3x_pool_kind;

typedef enum s3x_checksum {
    S3X_CHECKSUM_NONE = 0,
    S3X_CHECKSUM_CRC32C = 1,
    S3X_CHECKSUM_CRC32 = 2,
    S3X_CHECKSUM_SHA256 = 3,
    S3X_CHECKSUM_MD5 = 4       /* Content-MD5 per part */
} s3x_checksum;

/* Where an upload part's checksum travels. */
typedef enum s3x_checksum_location {
    S3X_CHECKSUM_LOCATION_AUTO = 0,    /* TRAILER when the part body is sent unsigned and the checksum
                                          can trail it (CRC32C, CRC32, SHA-256), else HEADER */
    S3X_CHECKSUM_LOCATION_HEADER = 1,  /* an x-amz-checksum-* / Content-MD5 header: each part is hashed
                                          before it is sent (an UNBUFFERED part is read twice) */
    S3X_CHECKSUM_LOCATION_TRAILER = 2  /* an aws-chunked trailer (STREAMING-UNSIGNED-PAYLOAD-TRAILER):
                                          hashed while it is sent. Needs an unsigned payload (payload
                                          signing AUTO or UNSIGNED) and not MD5; an upload that cannot
                                          send one fails with S3X_EINVAL before any request */
} s3x_checksum_location;

/* What a multipart upload's object checksum covers (S3's checksum types). A
 * single PutObject's checksum is always of the whole object. */
typedef enum s3x_checksum_type {
    S3X_CHECKSUM_TYPE_COMPOSITE = 0,   /* S3's default: a checksum of the parts' checksums, "<value>-<parts>";
                                          a download cannot check it from its own ranges */
    S3X_CHECKSUM_TYPE_FULL_OBJECT = 1  /* the CRC of the whole object (CRC32C or CRC32 only), made from the
                                          parts' CRCs and sent with the completion, which the server checks
                                          against the parts; downloads check it (x-amz-checksum-type
                                          FULL_OBJECT; a server that does not know it may refuse it) */
} s3x_checksum_type;

/* How retries of throttling answers are paced (botocore's names). */
typedef enum s3x_retry_mode {
    S3X_RETRY_MODE_STANDARD = 0,  /* each request backs off on its own (capped exponential, full jitter);
                                     every retry spends from the retry budget */
    S3X_RETRY_MODE_ADAPTIVE = 1   /* as standard, and the client's shared request rate drops on throttling
                                     (multiplicatively) and climbs back on success; throttled retries then
                                     spend nothing from the retry budget, the rate protects the server */
} s3x_retry_mode;

#define S3X_SLOW_PART_OFF 0
#define S3X_SLOW_PART_DYNAMIC (-1)

/* The accepted range [lo, hi] of a knob. Returns S3X_EINVAL for an unknown knob. */
S3X_API int s3x_param_bounds(s3x_param param, int64_t *lo, int64_t *hi);

/* The knob's name as used in messages, Python and the CLI ("part_size"), or NULL. */
S3X_API const char *s3x_param_name(s3x_param param);

/* The knob's default value (0 for an unknown knob). */
S3X_API int64_t s3x_param_default(s3x_param param);

#ifdef __cplusplus
}
#endif
#endif
