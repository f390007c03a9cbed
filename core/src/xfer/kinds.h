/* Opening a transfer of each kind on a scheduler (private): what the
 * blocking calls and a batch share. An open call checks its arguments, does
 * the transfer's first steps (an upload's HeadBucket and
 * CreateMultipartUpload, a file download's temporary file) and adds the
 * transfer to S; the scheduler then runs its parts and its kind's finish
 * (CompleteMultipartUpload; sync and rename), and the owner calls
 * t->kind->close(t, rc) once it stopped, which aborts what failed, removes
 * it from S and frees it. x (knobs, result, error, cancel flag) must have
 * been begun (s3x_xfer_begin) and outlive the transfer. On failure an open
 * call has cleaned up after itself (x ended) and the error is set. Strings,
 * memory and descriptors are borrowed until close. */
#ifndef S3X_KINDS_H
#define S3X_KINDS_H
#include "scheduler.h"

int s3x_upload_open_file(s3x_sched *S, s3x_xfer *x, const char *bucket, const char *key, const char *path,
                         s3x_transfer **out);
int s3x_upload_open_memory(s3x_sched *S, s3x_xfer *x, const char *bucket, const char *key, const void *data,
                           size_t len, s3x_transfer **out);
/* From fd (read_fn NULL) or from read_fn: read until the end, buffered. */
int s3x_upload_open_stream(s3x_sched *S, s3x_xfer *x, const char *bucket, const char *key, int fd,
                           s3x_read_fn read_fn, void *payload, s3x_transfer **out);

int s3x_download_open_file(s3x_sched *S, s3x_xfer *x, const char *bucket, const char *key, const char *path,
                           s3x_transfer **out);
int s3x_download_open_memory(s3x_sched *S, s3x_xfer *x, const char *bucket, const char *key, void *buf,
                             size_t cap, s3x_transfer **out);
/* To fd (write_fn NULL) or to write_fn, in order. */
int s3x_download_open_stream(s3x_sched *S, s3x_xfer *x, const char *bucket, const char *key, int fd,
                             s3x_write_fn write_fn, void *payload, s3x_transfer **out);

/* A server-side copy of src to dst (copy.c): HEAD of the source, then one
 * CopyObject or a multipart upload of UploadPartCopy ranges. opts may be
 * NULL; its strings are borrowed until close. */
int s3x_copy_open(s3x_sched *S, s3x_xfer *x, const char *src_bucket, const char *src_key, const char *dst_bucket,
                  const char *dst_key, const s3x_copy_opts *opts, s3x_transfer **out);
/* The part size of a multipart copy of size bytes: part_size, grown (whole
 * MiB) so there are at most 10,000 parts. */
int64_t s3x_copy_plan_part_size(int64_t part_size, int64_t size);

/* DeleteObjects of n keys (1..1000, borrowed until close) of bucket; each
 * key's outcome is left in *out (the caller frees it) once it succeeded. */
int s3x_delete_open(s3x_sched *S, s3x_xfer *x, const char *bucket, const char *const *keys, size_t n,
                    s3x_delete_result **out, s3x_transfer **t);

/* The target checks every transfer starts with. */
int s3x_check_target(const char *bucket, const char *key);

#endif
