/* s3xfer: a batch of transfers on one engine.
 *
 * A batch runs many uploads and downloads at once on its client's libcurl
 * multi loop, under one connection limit (CONCURRENCY: requests in flight for
 * the whole batch) and one memory budget (MEMORY_LIMIT: bytes of part
 * buffers for the whole batch; 0 means (CONCURRENCY + 1) * PART_SIZE, the
 * bound one transfer has). New parts are fed round-robin over the transfers,
 * so a big object does not starve small ones. A transfer that finds the
 * budget spent waits for a buffer; one whose single part buffer could never
 * fit is refused when it is added, naming the knob to change.
 *
 * Each transfer has its own result and error, and its own completion
 * callback. One failure does not stop the others unless FAIL_FAST is set
 * (then the first failure cancels every transfer not yet finished).
 *
 * Two ways to drive it:
 *   - s3x_batch_run: blocks the calling thread until every transfer added
 *     (including those added from callbacks meanwhile) has finished.
 *     Callbacks run on that thread.
 *   - s3x_batch_start: runs the loop on one background thread owned by the
 *     batch, so a host event loop (asyncio, a GUI) is never blocked and needs
 *     no thread per transfer. Transfers may be added from any thread while it
 *     runs; completion and progress callbacks then run on the batch's thread.
 *     s3x_batch_fd gives a descriptor that becomes readable when a transfer
 *     finishes (an event loop waits on it); s3x_batch_wait blocks until the
 *     batch is idle. The background thread was chosen over a step function
 *     on the caller's thread because the loop's sockets change with every
 *     connection and libcurl 7.88 has no call that hands them to another
 *     event loop without a per-socket callback layer; one thread for the
 *     whole batch keeps the loop in one place either way.
 *
 * Thread rules: while a batch runs, its client belongs to the batch (do not
 * use that client from elsewhere meanwhile; give other work its own client).
 * s3x_batch_cancel, s3x_batch_cancel_all and the add calls may be called
 * from any thread while the batch runs in the background.
 */
#ifndef S3XFER_BATCH_H
#define S3XFER_BATCH_H

#include <stddef.h>
#include <stdint.h>
#include "s3xfer/export.h"
#include "s3xfer/errors.h"
#include "s3xfer/params.h"
#include "s3xfer/client.h"
#include "s3xfer/transfer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct s3x_batch s3x_batch;

/* A transfer's id: 1, 2, ... in the order of the add calls. */
typedef uint64_t s3x_batch_id;

/* A transfer finished: rc is 0 or its S3X_E* code, err its error (NULL on
 * success), result what it did. Pointers are valid during the call only.
 * The callback may add transfers or cancel others. */
typedef void (*s3x_batch_done_fn)(s3x_batch *b, s3x_batch_id id, int rc, const s3x_error *err,
                                  const s3x_result *result, void *payload);

/* Per-transfer callbacks, all optional (the struct itself may be NULL).
 * progress: as s3x_progress_fn for a single transfer; returning non-zero
 * cancels this transfer only. */
typedef struct s3x_batch_cb {
    s3x_batch_done_fn done;
    s3x_progress_fn progress;
    void *payload;
} s3x_batch_cb;

/* Creates a batch that sends through client (borrowed: it must outlive the
 * batch). Errors: S3X_EINVAL, S3X_ENOMEM. */
S3X_API int s3x_batch_new(s3x_batch **out, s3x_client *client);
/* Cancels what is still running, waits for it to stop (multipart uploads
 * aborted, temporary files removed), and frees the batch. Accepts NULL. */
S3X_API void s3x_batch_free(s3x_batch *b);

/* Knobs: every upload and download knob (they apply to each transfer added
 * after the call), with CONCURRENCY and MEMORY_LIMIT for the whole batch,
 * and FAIL_FAST. Set them before adding transfers. */
S3X_API int s3x_batch_set(s3x_batch *b, s3x_param param, int64_t value);
S3X_API int s3x_batch_get(const s3x_batch *b, s3x_param param, int64_t *value);

/* Adding transfers. Arguments are checked at once (a bad bucket name, an
 * empty key, a missing file or directory fail here with S3X_EINVAL/EIO and
 * nothing is added); strings are copied. Memory (data, buf) and descriptors
 * are borrowed until the transfer's done callback. *id receives the
 * transfer's id (id may be NULL). A transfer starts when the batch runs. */
S3X_API int s3x_batch_upload_file(s3x_batch *b, const char *bucket, const char *key, const char *path,
                                  const s3x_batch_cb *cb, s3x_batch_id *id);
S3X_API int s3x_batch_upload_memory(s3x_batch *b, const char *bucket, const char *key, const void *data,
                                    size_t len, const s3x_batch_cb *cb, s3x_batch_id *id);
S3X_API int s3x_batch_upload_fd(s3x_batch *b, const char *bucket, const char *key, int fd,
                                const s3x_batch_cb *cb, s3x_batch_id *id);
S3X_API int s3x_batch_upload_stream(s3x_batch *b, const char *bucket, const char *key, s3x_read_fn read_fn,
                                    void *read_payload, const s3x_batch_cb *cb, s3x_batch_id *id);
S3X_API int s3x_batch_download_file(s3x_batch *b, const char *bucket, const char *key, const char *path,
                                    const s3x_batch_cb *cb, s3x_batch_id *id);
/* Into buf of cap bytes; the object's size is in the result's bytes. */
S3X_API int s3x_batch_download_memory(s3x_batch *b, const char *bucket, const char *key, void *buf,
                                      size_t cap, const s3x_batch_cb *cb, s3x_batch_id *id);
S3X_API int s3x_batch_download_fd(s3x_batch *b, const char *bucket, const char *key, int fd,
                                  const s3x_batch_cb *cb, s3x_batch_id *id);
S3X_API int s3x_batch_download_stream(s3x_batch *b, const char *bucket, const char *key,
                                      s3x_write_fn write_fn, void *write_payload, const s3x_batch_cb *cb,
                                      s3x_batch_id *id);

/* Server-side copy of src_bucket/src_key to dst_bucket/dst_key (as
 * s3x_upload_copy, with the batch's knobs): the bytes never pass through
 * the client and take none of the memory budget; the copy's requests count
 * against CONCURRENCY like any part. s3x_batch_copy keeps the source's
 * metadata (COPY); s3x_batch_copy_ex takes options (may be NULL; strings
 * copied). The result's bytes are the object's size. */
S3X_API int s3x_batch_copy(s3x_batch *b, const char *src_bucket, const char *src_key, const char *dst_bucket,
                           const char *dst_key, const s3x_batch_cb *cb, s3x_batch_id *id);
S3X_API int s3x_batch_copy_ex(s3x_batch *b, const char *src_bucket, const char *src_key, const char *dst_bucket,
                              const char *dst_key, const s3x_copy_opts *opts, const s3x_batch_cb *cb,
                              s3x_batch_id *id);

/* Runs until every transfer added has finished. Returns 0 when all
 * succeeded, else the code of the first failure (each transfer's own error
 * went to its callback and is kept for s3x_batch_result). S3X_EINVAL if the
 * batch already runs in the background. */
S3X_API int s3x_batch_run(s3x_batch *b);

/* Starts the background thread (see the top of this file). Idempotent. */
S3X_API int s3x_batch_start(s3x_batch *b);
/* A descriptor that is readable while finished transfers have not been
 * acknowledged; read it (8 bytes) or call s3x_batch_ack to clear it. -1
 * before s3x_batch_start. */
S3X_API int s3x_batch_fd(const s3x_batch *b);
/* Clears the readiness of s3x_batch_fd. */
S3X_API void s3x_batch_ack(s3x_batch *b);
/* Waits until no transfer is queued or running, at most timeout_ms (-1 =
 * no limit). Returns 1 when idle, 0 on timeout. */
S3X_API int s3x_batch_wait(s3x_batch *b, int timeout_ms);

/* Cancels one transfer (it fails with S3X_ECANCELLED after its cleanup:
 * multipart upload aborted, temporary file removed); unknown or finished
 * ids are ignored. Safe from any thread. */
S3X_API void s3x_batch_cancel(s3x_batch *b, s3x_batch_id id);
/* Cancels every transfer queued or running. */
S3X_API void s3x_batch_cancel_all(s3x_batch *b);

/* A finished transfer's outcome, kept until the batch is freed or the id
 * forgotten: *rc its code, result (may be NULL) its result, and the error
 * restored as the calling thread's last error (s3x_error_last) when it
 * failed. Returns 0, or S3X_EINVAL for an id that is unknown, forgotten or
 * not finished yet. */
S3X_API int s3x_batch_result(s3x_batch *b, s3x_batch_id id, int *rc, s3x_result *result);
/* Drops a finished transfer's outcome (a long-lived batch of many
 * transfers keeps only what its caller still needs). */
S3X_API void s3x_batch_forget(s3x_batch *b, s3x_batch_id id);

/* Counts for the whole batch so far. */
typedef struct s3x_batch_stats {
    int64_t added, finished, failed;  /* transfers */
    int64_t running;                  /* started and not finished */
    int64_t bytes;                    /* object bytes moved by finished transfers */
    int64_t budget;                   /* the memory budget in force (bytes) */
    int64_t peak_buffer_bytes;        /* most bytes of part buffers held at one time, all transfers */
    int64_t buffer_waits;             /* times a part waited for the budget */
} s3x_batch_stats;
S3X_API void s3x_batch_get_stats(s3x_batch *b, s3x_batch_stats *out);

#ifdef __cplusplus
}
#endif
#endif
