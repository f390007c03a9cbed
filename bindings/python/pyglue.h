/* Python glue for the SWIG module (private to the binding). Each function
 * takes and returns Python-friendly types, releases the GIL around blocking
 * calls, and on failure raises the s3xfer.errors exception built from
 * s3x_error_last() and returns NULL. */
#ifndef S3X_PYGLUE_H
#define S3X_PYGLUE_H
#ifndef SWIG
#include <Python.h>
#include "s3xfer/s3xfer.h"
#endif

PyObject *py_client_new(void);
#ifndef SWIG
PyObject *py_raise_last(void);
/* The conversion of every const char * argument (s3xfer.i's typemap): None
 * gives NULL; a str is encoded UTF-8 with surrogateescape into *holder (a new
 * bytes object the caller releases) and *out points into it; a str with a NUL
 * is a ValueError, anything else a TypeError naming `what`. 0 or -1. */
int py_cstr_arg(PyObject *o, const char *what, PyObject **holder, const char **out);
/* Sets knobs ({param id: int}) on a batch; 0, or -1 with an exception set. */
int py_batch_apply_knobs(s3x_batch *b, PyObject *knobs);
#endif
PyObject *py_client_free(s3x_client *c);
PyObject *py_client_set_string(s3x_client *c, int opt, const char *value);
PyObject *py_client_set(s3x_client *c, int param, long long value);
PyObject *py_client_get(s3x_client *c, int param);
/* (credentials_source, refreshes, expiry or 0.0) of a resolved client: names, never keys. */
PyObject *py_client_credentials(s3x_client *c);
PyObject *py_client_resolve(s3x_client *c);
PyObject *py_client_request_url(s3x_client *c, const char *bucket, const char *key);
PyObject *py_param_info(int param);
PyObject *py_strerror(int code);
PyObject *py_version(void);

PyObject *py_create_bucket(s3x_client *c, const char *bucket);
PyObject *py_delete_bucket(s3x_client *c, const char *bucket);
PyObject *py_head_bucket(s3x_client *c, const char *bucket);
PyObject *py_head_object(s3x_client *c, const char *bucket, const char *key);
PyObject *py_put_object(s3x_client *c, const char *bucket, const char *key, PyObject *data,
                        const char *content_type);
PyObject *py_get_object(s3x_client *c, const char *bucket, const char *key, long long start, long long end);
PyObject *py_delete_object(s3x_client *c, const char *bucket, const char *key);
PyObject *py_list_objects(s3x_client *c, const char *bucket, const char *prefix, const char *delimiter,
                          const char *token, int max_keys);
PyObject *py_create_multipart_upload(s3x_client *c, const char *bucket, const char *key, const char *content_type);
PyObject *py_upload_part(s3x_client *c, const char *bucket, const char *key, const char *upload_id,
                         int part_number, PyObject *data);
PyObject *py_complete_multipart_upload(s3x_client *c, const char *bucket, const char *key,
                                       const char *upload_id, PyObject *parts);
PyObject *py_abort_multipart_upload(s3x_client *c, const char *bucket, const char *key, const char *upload_id);
PyObject *py_list_parts(s3x_client *c, const char *bucket, const char *key, const char *upload_id);
PyObject *py_list_multipart_uploads(s3x_client *c, const char *bucket, const char *prefix);
/* s3x_delete_objects: keys a sequence of str (1..1000); a list of dicts
 * {key, ok, code, message} in the order given. */
PyObject *py_delete_objects(s3x_client *c, const char *bucket, PyObject *keys);

/* Batches (a transfer manager). knobs as above (every upload and download
 * knob, plus fail_fast). The batch runs on its own thread (s3x_batch_start);
 * done(id, exc, result) is called on that thread with the GIL held: exc is
 * None or the exception (a callback's own, else one built from the C
 * error), result the result dict. progress(done, total) as for managers;
 * if it raises, that transfer alone is cancelled and done gets its
 * exception. obj: as for py_upload / py_download. */
PyObject *py_batch_new(s3x_client *c, PyObject *knobs);
PyObject *py_batch_free(s3x_batch *b);
PyObject *py_batch_add(s3x_batch *b, int upload, const char *bucket, const char *key, PyObject *obj,
                       PyObject *done, PyObject *progress);
/* A server-side copy on the batch (s3x_batch_copy_ex); directive 0 COPY, 1 REPLACE. */
PyObject *py_batch_copy(s3x_batch *b, const char *src_bucket, const char *src_key, const char *dst_bucket,
                        const char *dst_key, int directive, const char *content_type, PyObject *done,
                        PyObject *progress);
PyObject *py_batch_cancel(s3x_batch *b, unsigned long long id);
PyObject *py_batch_cancel_all(s3x_batch *b);
/* Waits (GIL released) until idle or timeout_ms (-1: no limit); True when idle. */
PyObject *py_batch_wait(s3x_batch *b, int timeout_ms);
PyObject *py_batch_fd(s3x_batch *b);
PyObject *py_batch_ack(s3x_batch *b);
PyObject *py_batch_stats(s3x_batch *b);

#endif

/* Bulk runs (s3xfer/bulk.h), one call for the six operations:
 *   UPLOAD_DIR(dir, bucket, prefix)   DOWNLOAD_DIR(bucket, prefix, dir)
 *   SYNC_UP(dir, bucket, prefix)      SYNC_DOWN(bucket, prefix, dir)
 *   DELETE_PREFIX(bucket, prefix)     COPY_PREFIX(src_bucket, src_prefix, dst_bucket, dst_prefix)
 * knobs: {param id: int} (every batch knob, FAIL_FAST included); flags:
 * S3X_BULK_*; filters: a sequence of (include: bool, pattern: str), in order.
 * on_item(dict) per object: action (an s3x_bulk_action), key, dest_key, path,
 * size, rc, error (None, or (code, message, http_status, s3_code,
 * request_id)), reason, result (a result dict or None). progress(dict) with
 * the summary so far. Both run with the GIL re-acquired on the calling
 * thread; the first exception either raises cancels the run. Returns (rc,
 * summary dict, error tuple or None, the callback's exception or None): rc
 * 0, S3X_EPARTIAL or another code, which the caller turns into an
 * exception (the callback's first, with the summary attached). */
enum { PY_BULK_UPLOAD_DIR = 1, PY_BULK_DOWNLOAD_DIR, PY_BULK_SYNC_UP, PY_BULK_SYNC_DOWN, PY_BULK_DELETE_PREFIX,
       PY_BULK_COPY_PREFIX };
PyObject *py_bulk_run(s3x_client *c, int op, const char *a1, const char *a2, const char *a3, const char *a4,
                      PyObject *knobs, unsigned int flags, PyObject *filters, PyObject *on_item, PyObject *progress);

/* Managers. knobs: dict {param id: int}. progress: callable(done, total) or None.
 * Upload source: str path, a bytes-like object, or an object with readinto().
 * Stream callbacks (readinto, write) get a memoryview of a bytearray of the
 * binding's own, at most 1 MiB, never of the engine's buffers: what they keep
 * stays valid (see pyglue.c). */
PyObject *py_upload(s3x_client *c, const char *bucket, const char *key, PyObject *source, PyObject *knobs,
                    PyObject *progress);
/* Server-side copy (s3x_upload_copy) with upload knobs; directive 0 COPY, 1 REPLACE. */
PyObject *py_copy(s3x_client *c, const char *src_bucket, const char *src_key, const char *dst_bucket,
                  const char *dst_key, int directive, const char *content_type, PyObject *knobs,
                  PyObject *progress);
/* Download destination: str path, a writable bytes-like (bytearray/memoryview),
 * or an object with write(). */
PyObject *py_download(s3x_client *c, const char *bucket, const char *key, PyObject *dest, PyObject *knobs,
                      PyObject *progress);
/* The client's throttling state (s3x_client_throttle_state) as a dict:
 * active (bool), rate, throttles, seconds, seconds_total. Cheap: meant for
 * progress callbacks, which run on the thread that drives the client. */
PyObject *py_client_throttle_state(s3x_client *c);
