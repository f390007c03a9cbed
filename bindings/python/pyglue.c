/* Python glue for the SWIG module: see pyglue.h. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>
#include "pyglue.h"

/* Server text becomes Python text in one of two ways (finding 7 of issue 11:
 * a server could send any bytes, and a strict decode raised UnicodeDecodeError
 * instead of the S3xferError the caller expects):
 *  - text_or_none: descriptive text (error messages, S3 codes, request ids,
 *    ETags, dates, content types) decodes invalid UTF-8 to U+FFFD. It is read
 *    and printed, never sent back, so a lossless form buys nothing and a str
 *    with lone surrogates would raise again the moment it is printed.
 *  - name_or_none: identifiers the caller may hand back to the server (keys,
 *    prefixes, upload ids, continuation tokens, version ids) decode with
 *    surrogateescape, as os.listdir() does for file names: the bytes survive
 *    the round trip (py_cstr_arg encodes the same way), and two different
 *    keys never collapse into one name, which U+FFFD would do. */
static PyObject *text_or_none(const char *s) {
    if (!s) Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
}

static PyObject *name_or_none(const char *s) {
    if (!s) Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "surrogateescape");
}

/* Builds the s3xfer.errors exception for the thread's last error and sets it. */
PyObject *py_raise_last(void) {
    const s3x_error *e = s3x_error_last();
    /* Copied before anything below can call into the library again. */
    PyObject *msg = text_or_none(e->message ? e->message : "");
    PyObject *code = text_or_none(e->s3_code ? e->s3_code : "");
    PyObject *rid = text_or_none(e->request_id ? e->request_id : "");
    int errcode = e->code, status = e->http_status, sys_errno = e->sys_errno;
    PyObject *mod = (msg && code && rid) ? PyImport_ImportModule("s3xfer.errors") : NULL;
    PyObject *exc = mod ? PyObject_CallMethod(mod, "_from_c", "iOiOOi", errcode, msg, status, code, rid, sys_errno)
                        : NULL;
    Py_XDECREF(mod);
    Py_XDECREF(msg);
    Py_XDECREF(code);
    Py_XDECREF(rid);
    if (!exc) return NULL;
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
    return NULL;
}

/* The "in" typemap of every const char * argument (s3xfer.i): None is NULL;
 * a str is encoded as UTF-8 with surrogateescape, so a name that came from a
 * listing (name_or_none) reaches the server byte for byte. A NUL inside the
 * str is refused: C would silently cut the name there, and "a\0b" would
 * address (or delete) the object "a". */
int py_cstr_arg(PyObject *o, const char *what, PyObject **holder, const char **out) {
    *holder = NULL;
    *out = NULL;
    if (o == Py_None) return 0;
    if (!PyUnicode_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be str, not %.100s", what, Py_TYPE(o)->tp_name);
        return -1;
    }
    PyObject *b = PyUnicode_AsEncodedString(o, "utf-8", "surrogateescape");
    if (!b) return -1;
    const char *s = PyBytes_AS_STRING(b);
    if (strlen(s) != (size_t)PyBytes_GET_SIZE(b)) {
        Py_DECREF(b);
        PyErr_Format(PyExc_ValueError, "%s contains a NUL character, which a request cannot carry", what);
        return -1;
    }
    *holder = b;
    *out = s;
    return 0;
}

/* A local path as the file system wants it (surrogateescape on POSIX, like
 * open()); NULs refused for the same reason as above. */
static PyObject *fs_path(PyObject *str) {
    PyObject *b = PyUnicode_EncodeFSDefault(str);
    if (b && strlen(PyBytes_AS_STRING(b)) != (size_t)PyBytes_GET_SIZE(b)) {
        Py_DECREF(b);
        PyErr_SetString(PyExc_ValueError, "the file name contains a NUL character");
        return NULL;
    }
    return b;
}

#define CALL(expr)                    \
    int rc_;                          \
    Py_BEGIN_ALLOW_THREADS rc_ = (expr); \
    Py_END_ALLOW_THREADS if (rc_ != 0) return py_raise_last()

PyObject *py_client_free(s3x_client *c) {
    s3x_client_free(c);
    Py_RETURN_NONE;
}

PyObject *py_client_set_string(s3x_client *c, int opt, const char *value) {
    if (s3x_client_set_string(c, (s3x_client_opt)opt, value)) return py_raise_last();
    Py_RETURN_NONE;
}

PyObject *py_client_set(s3x_client *c, int param, long long value) {
    if (s3x_client_set(c, (s3x_param)param, (int64_t)value)) return py_raise_last();
    Py_RETURN_NONE;
}

PyObject *py_client_get(s3x_client *c, int param) {
    int64_t v = 0;
    if (s3x_client_get(c, (s3x_param)param, &v)) return py_raise_last();
    return PyLong_FromLongLong((long long)v);
}

PyObject *py_client_resolve(s3x_client *c) {
    CALL(s3x_client_resolve(c));
    return Py_BuildValue("(NN)", name_or_none(s3x_client_endpoint(c)), name_or_none(s3x_client_region(c)));
}

PyObject *py_client_request_url(s3x_client *c, const char *bucket, const char *key) {
    char *url = NULL;
    CALL(s3x_client_request_url(c, bucket, key, &url));
    PyObject *o = PyUnicode_FromString(url);
    s3x_free(url);
    return o;
}

PyObject *py_client_credentials(s3x_client *c) {
    return Py_BuildValue("(NLd)", name_or_none(s3x_client_credentials_source(c)),
                         (long long)s3x_client_credentials_refreshes(c), s3x_client_credentials_expiry(c));
}

PyObject *py_param_info(int param) {
    int64_t lo = 0, hi = 0;
    if (s3x_param_bounds((s3x_param)param, &lo, &hi)) return py_raise_last();
    return Py_BuildValue("(sLLL)", s3x_param_name((s3x_param)param), (long long)lo, (long long)hi,
                         (long long)s3x_param_default((s3x_param)param));
}

PyObject *py_strerror(int code) { return PyUnicode_FromString(s3x_strerror(code)); }
PyObject *py_version(void) { return PyUnicode_FromString(s3x_version()); }

static PyObject *info_dict(const s3x_object_info *i) {
    return Py_BuildValue("{s:L,s:N,s:N,s:N,s:N}", "size", (long long)i->size, "etag", text_or_none(i->etag),
                         "last_modified", text_or_none(i->last_modified), "content_type",
                         text_or_none(i->content_type), "version_id", name_or_none(i->version_id));
}

PyObject *py_create_bucket(s3x_client *c, const char *bucket) {
    CALL(s3x_create_bucket(c, bucket));
    Py_RETURN_NONE;
}

PyObject *py_delete_bucket(s3x_client *c, const char *bucket) {
    CALL(s3x_delete_bucket(c, bucket));
    Py_RETURN_NONE;
}

PyObject *py_head_bucket(s3x_client *c, const char *bucket) {
    CALL(s3x_head_bucket(c, bucket));
    Py_RETURN_NONE;
}

PyObject *py_head_object(s3x_client *c, const char *bucket, const char *key) {
    s3x_object_info info;
    memset(&info, 0, sizeof info);
    CALL(s3x_head_object(c, bucket, key, &info));
    PyObject *d = info_dict(&info);
    s3x_object_info_clear(&info);
    return d;
}

PyObject *py_put_object(s3x_client *c, const char *bucket, const char *key, PyObject *data,
                        const char *content_type) {
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) != 0) return NULL;
    char *etag = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = s3x_put_object(c, bucket, key, view.buf, (size_t)view.len, content_type, &etag);
    Py_END_ALLOW_THREADS PyBuffer_Release(&view);
    if (rc) return py_raise_last();
    PyObject *r = text_or_none(etag);
    s3x_free(etag);
    return r;
}

PyObject *py_get_object(s3x_client *c, const char *bucket, const char *key, long long start, long long end) {
    void *data = NULL;
    size_t len = 0;
    s3x_object_info info;
    memset(&info, 0, sizeof info);
    CALL(s3x_get_object(c, bucket, key, start, end, &data, &len, &info));
    PyObject *b = PyBytes_FromStringAndSize(data, (Py_ssize_t)len);
    s3x_free(data);
    PyObject *d = info_dict(&info);
    s3x_object_info_clear(&info);
    if (!b || !d) {
        Py_XDECREF(b);
        Py_XDECREF(d);
        return NULL;
    }
    return Py_BuildValue("(NN)", b, d);
}

PyObject *py_delete_object(s3x_client *c, const char *bucket, const char *key) {
    CALL(s3x_delete_object(c, bucket, key));
    Py_RETURN_NONE;
}

PyObject *py_list_objects(s3x_client *c, const char *bucket, const char *prefix, const char *delimiter,
                          const char *token, int max_keys) {
    s3x_list *l = NULL;
    CALL(s3x_list_objects(c, bucket, prefix, delimiter, token, max_keys, &l));
    PyObject *objs = PyList_New((Py_ssize_t)l->count);
    PyObject *pre = PyList_New((Py_ssize_t)l->nprefixes);
    if (!objs || !pre) goto fail;
    for (size_t i = 0; i < l->count; i++) {
        PyObject *o = Py_BuildValue("{s:N,s:L,s:N,s:N}", "key", name_or_none(l->entries[i].key), "size",
                                    (long long)l->entries[i].size, "etag", text_or_none(l->entries[i].etag),
                                    "last_modified", text_or_none(l->entries[i].last_modified));
        if (!o) goto fail;
        PyList_SET_ITEM(objs, (Py_ssize_t)i, o);
    }
    for (size_t i = 0; i < l->nprefixes; i++) {
        PyObject *o = name_or_none(l->prefixes[i]);
        if (!o) goto fail;
        PyList_SET_ITEM(pre, (Py_ssize_t)i, o);
    }
    PyObject *res = Py_BuildValue("{s:N,s:N,s:O,s:N}", "objects", objs, "prefixes", pre, "is_truncated",
                                  l->is_truncated ? Py_True : Py_False, "next_token", name_or_none(l->next_token));
    s3x_list_free(l);
    return res;
fail:
    Py_XDECREF(objs);
    Py_XDECREF(pre);
    s3x_list_free(l);
    return NULL;
}

PyObject *py_create_multipart_upload(s3x_client *c, const char *bucket, const char *key, const char *content_type) {
    char *id = NULL;
    CALL(s3x_create_multipart_upload(c, bucket, key, content_type, &id));
    PyObject *r = name_or_none(id);
    s3x_free(id);
    return r;
}

PyObject *py_upload_part(s3x_client *c, const char *bucket, const char *key, const char *upload_id,
                         int part_number, PyObject *data) {
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) != 0) return NULL;
    char *etag = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = s3x_upload_part(c, bucket, key, upload_id, part_number, view.buf,
                                                (size_t)view.len, &etag);
    Py_END_ALLOW_THREADS PyBuffer_Release(&view);
    if (rc) return py_raise_last();
    PyObject *r = text_or_none(etag);
    s3x_free(etag);
    return r;
}

PyObject *py_complete_multipart_upload(s3x_client *c, const char *bucket, const char *key,
                                       const char *upload_id, PyObject *parts) {
    PyObject *seq = PySequence_Fast(parts, "parts must be a sequence of (part_number, etag)");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    s3x_part_ref *refs = calloc(n ? (size_t)n : 1, sizeof *refs);
    if (!refs) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
        int pn;
        const char *etag;
        if (!PyArg_ParseTuple(it, "is", &pn, &etag)) {
            free(refs);
            Py_DECREF(seq);
            return NULL;
        }
        refs[i].part_number = pn;
        refs[i].etag = etag; /* borrowed from the tuple, which seq keeps alive */
    }
    char *etag = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = s3x_complete_multipart_upload(c, bucket, key, upload_id, refs, (size_t)n, &etag);
    Py_END_ALLOW_THREADS free(refs);
    Py_DECREF(seq);
    if (rc) return py_raise_last();
    PyObject *r = text_or_none(etag);
    s3x_free(etag);
    return r;
}

PyObject *py_abort_multipart_upload(s3x_client *c, const char *bucket, const char *key, const char *upload_id) {
    CALL(s3x_abort_multipart_upload(c, bucket, key, upload_id));
    Py_RETURN_NONE;
}

PyObject *py_list_parts(s3x_client *c, const char *bucket, const char *key, const char *upload_id) {
    s3x_part_list *l = NULL;
    CALL(s3x_list_parts(c, bucket, key, upload_id, &l));
    PyObject *out = PyList_New((Py_ssize_t)l->count);
    for (size_t i = 0; out && i < l->count; i++) {
        PyObject *o = Py_BuildValue("{s:i,s:L,s:N}", "part_number", l->parts[i].part_number, "size",
                                    (long long)l->parts[i].size, "etag", text_or_none(l->parts[i].etag));
        if (!o) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)i, o);
    }
    s3x_part_list_free(l);
    return out;
}

PyObject *py_list_multipart_uploads(s3x_client *c, const char *bucket, const char *prefix) {
    s3x_upload_list *l = NULL;
    CALL(s3x_list_multipart_uploads(c, bucket, prefix, &l));
    PyObject *out = PyList_New((Py_ssize_t)l->count);
    for (size_t i = 0; out && i < l->count; i++) {
        PyObject *o = Py_BuildValue("{s:N,s:N,s:N}", "key", name_or_none(l->uploads[i].key), "upload_id",
                                    name_or_none(l->uploads[i].upload_id), "initiated",
                                    text_or_none(l->uploads[i].initiated));
        if (!o) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)i, o);
    }
    s3x_upload_list_free(l);
    return out;
}

/* ---- managers ------------------------------------------------------------ */

typedef struct py_cb {
    PyObject *progress;  /* borrowed */
    PyObject *stream;    /* borrowed: fileobj */
    PyObject *error;     /* exception raised by a callback (type, value, tb) */
    PyObject *etype, *etb;
    PyObject *scratch;   /* owned: the bytearray stream callbacks see (below) */
    int64_t last_done;
} py_cb;

static void keep_exception(py_cb *cb) {
    if (cb->error) {
        PyErr_Clear();
        return;
    }
    PyErr_Fetch(&cb->etype, &cb->error, &cb->etb);
    PyErr_NormalizeException(&cb->etype, &cb->error, &cb->etb);
    if (!cb->error) {
        cb->error = Py_None;
        Py_INCREF(Py_None);
    }
}

static int progress_tramp(int64_t done, int64_t total, void *payload) {
    py_cb *cb = payload;
    PyGILState_STATE g = PyGILState_Ensure();
    int stop = 0;
    if (PyErr_CheckSignals() != 0) {
        keep_exception(cb);
        stop = 1;
    } else if (cb->progress && cb->progress != Py_None) {
        PyObject *r = PyObject_CallFunction(cb->progress, "LL", (long long)done, (long long)total);
        if (!r) {
            keep_exception(cb);
            stop = 1;
        } else {
            Py_DECREF(r);
        }
    }
    PyGILState_Release(g);
    return stop;
}

/* Stream callbacks never see the engine's memory (finding 4 of issue 11).
 *
 * They used to get a memoryview over the pool buffer itself, released after
 * the call; but release() cannot revoke a slice taken from the view
 * (mv[:16] keeps the underlying buffer, not the view), nor a numpy array or
 * ctypes object exported from it, and the engine frees or reuses its buffers
 * the moment the callback returns: a callback that kept such an object read
 * and wrote freed pool memory afterwards. There is no way to revoke a raw
 * export, so the memory Python sees must be Python's: readinto() fills, and
 * write() is handed, a view of a bytearray owned by the callback state, and
 * the bytes are copied between it and the engine's buffer under the GIL.
 *
 * The view is not released after the call (there is nothing to protect any
 * more), and the bytearray is reused for the next call only if nothing but
 * us refers to it: a kept view, a slice (through the managed buffer) or an
 * export (through the view) holds a reference, so a callback that keeps
 * what it was given keeps intact, valid data, and the next call gets a
 * fresh bytearray. It is at most PY_SCRATCH_MAX bytes:
 * larger reads and writes are split (readinto may return short counts, and
 * the engine loops until the part is full or the stream ends), which bounds
 * the memory this adds to one transfer at 1 MiB beside its pool, and keeps
 * the copy inside the cache. */
#define PY_SCRATCH_MAX ((size_t)1 << 20)

static PyObject *scratch_take(py_cb *cb, size_t n) {
    PyObject *ba = cb->scratch;
    cb->scratch = NULL;
    if (ba && (Py_REFCNT(ba) != 1 || (size_t)PyByteArray_GET_SIZE(ba) < n)) Py_CLEAR(ba);
    if (!ba) ba = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)n);
    return ba;
}

static void scratch_give_back(py_cb *cb, PyObject *ba) {
    if (cb->scratch) Py_DECREF(ba); /* a nested call put one back first */
    else cb->scratch = ba;
}

/* A memoryview of the first n bytes of ba (read-only unless writable). */
static PyObject *scratch_view(PyObject *ba, size_t n, int writable) {
    PyObject *whole = PyMemoryView_FromObject(ba);
    if (!whole) return NULL;
    PyObject *part = (size_t)PyByteArray_GET_SIZE(ba) == n ? (Py_INCREF(whole), whole)
                                                            : PySequence_GetSlice(whole, 0, (Py_ssize_t)n);
    Py_DECREF(whole);
    if (!part || writable) return part;
    PyObject *ro = PyObject_CallMethod(part, "toreadonly", NULL);
    Py_DECREF(part);
    return ro;
}

static int64_t readinto_tramp(void *buf, size_t cap, void *payload) {
    py_cb *cb = payload;
    PyGILState_STATE g = PyGILState_Ensure();
    int64_t n = -1;
    size_t want = cap < PY_SCRATCH_MAX ? cap : PY_SCRATCH_MAX;
    PyObject *ba = scratch_take(cb, want);
    /* Our own export pins the bytearray's storage for the whole call: the
     * callback could release the view and resize the bytearray (mv.obj). */
    Py_buffer pin;
    int pinned = ba && PyObject_GetBuffer(ba, &pin, PyBUF_WRITABLE) == 0;
    PyObject *mv = pinned ? scratch_view(ba, want, 1) : NULL;
    if (mv) {
        PyObject *r = PyObject_CallMethod(cb->stream, "readinto", "O", mv);
        if (r) {
            n = r == Py_None ? 0 : PyLong_AsLongLong(r);
            if (n < 0 || (size_t)n > want) {
                if (!PyErr_Occurred())
                    PyErr_Format(PyExc_ValueError, "readinto() returned %lld for a buffer of %zu bytes",
                                 (long long)n, want);
                n = -1;
            }
            Py_DECREF(r);
        }
        if (n > 0) memcpy(buf, pin.buf, (size_t)n);
        if (n < 0) keep_exception(cb);
        Py_DECREF(mv);
    } else {
        keep_exception(cb);
    }
    if (pinned) PyBuffer_Release(&pin);
    if (ba) scratch_give_back(cb, ba);
    PyGILState_Release(g);
    return n;
}

static int write_tramp(const void *data, size_t len, void *payload) {
    py_cb *cb = payload;
    PyGILState_STATE g = PyGILState_Ensure();
    int stop = 0;
    size_t off = 0;
    while (off < len) {
        size_t n = len - off < PY_SCRATCH_MAX ? len - off : PY_SCRATCH_MAX;
        PyObject *ba = scratch_take(cb, n);
        PyObject *mv = NULL;
        if (ba) {
            memcpy(PyByteArray_AS_STRING(ba), (const char *)data + off, n);
            mv = scratch_view(ba, n, 0);
        }
        PyObject *r = mv ? PyObject_CallMethod(cb->stream, "write", "O", mv) : NULL;
        if (mv) Py_DECREF(mv);
        if (ba) scratch_give_back(cb, ba);
        if (!r) {
            keep_exception(cb);
            stop = 1;
            break;
        }
        long long w = r == Py_None ? (long long)n : PyLong_AsLongLong(r);
        Py_DECREF(r);
        if (w <= 0 || (size_t)w > n) {
            if (!PyErr_Occurred()) {
                if (w <= 0) PyErr_SetString(PyExc_OSError, "write() wrote nothing");
                else PyErr_Format(PyExc_ValueError, "write() returned %lld for %zu bytes", w, n);
            }
            keep_exception(cb);
            stop = 1;
            break;
        }
        /* A short write (a raw, non-blocking file) is finished from the
         * engine's bytes, copied again: rare enough not to matter. */
        off += (size_t)w;
    }
    PyGILState_Release(g);
    return stop;
}

static PyObject *result_dict(const s3x_result *r) {
    return Py_BuildValue(
        "{s:L,s:L,s:d,s:d,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:O,s:N,s:N,s:L,s:d,s:L,s:L,s:d,s:L,s:L}", "bytes",
        (long long)r->bytes, "parts", (long long)r->parts, "seconds", r->seconds, "io_seconds", r->io_seconds, "requests", (long long)r->requests, "retries",
        (long long)r->retries, "retries_http", (long long)r->retries_http, "retries_network",
        (long long)r->retries_network, "retries_timeout", (long long)r->retries_timeout, "retries_first_byte",
        (long long)r->retries_first_byte, "slow_part_timeout_ms", (long long)r->slow_part_timeout_ms, "part_size",
        (long long)r->part_size, "concurrency", (long long)r->concurrency, "pool_allocations",
        (long long)r->pool_allocations, "pool_bytes_allocated", (long long)r->pool_bytes_allocated,
        "peak_buffer_bytes", (long long)r->peak_buffer_bytes, "buffer_waits", (long long)r->buffer_waits,
        "multipart", r->multipart ? Py_True : Py_False, "etag", text_or_none(r->etag), "upload_id",
        name_or_none(r->upload_id), "retries_throttled", (long long)r->retries_throttled, "throttled_seconds",
        r->throttled_seconds, "fsyncs", (long long)r->fsyncs, "writeback_calls", (long long)r->writeback_calls,
        "sync_seconds", r->sync_seconds, "requests_received_elsewhere", (long long)r->requests_received_elsewhere,
        "receive_threads", (long long)r->receive_threads);
}

typedef int (*knob_setter)(void *h, s3x_param p, int64_t v);

static int apply_knobs(void *h, knob_setter set, PyObject *knobs) {
    if (!knobs || knobs == Py_None) return 0;
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(knobs, &pos, &k, &v)) {
        long pid = PyLong_AsLong(k);
        long long val = PyLong_AsLongLong(v);
        if (PyErr_Occurred()) return -1;
        if (set(h, (s3x_param)pid, (int64_t)val) != 0) {
            py_raise_last();
            return -1;
        }
    }
    return 0;
}

static int up_set(void *h, s3x_param p, int64_t v) { return s3x_upload_set(h, p, v); }
static int down_set(void *h, s3x_param p, int64_t v) { return s3x_download_set(h, p, v); }

/* After the C call: re-raise a callback's exception, else the C error. */
static PyObject *finish_call(int rc, py_cb *cb, const s3x_result *res) {
    if (cb->error) {
        if (cb->error == Py_None) {
            Py_DECREF(Py_None);
            PyErr_SetString(PyExc_RuntimeError, "a callback failed");
        } else {
            PyErr_Restore(cb->etype, cb->error, cb->etb);
        }
        cb->error = cb->etype = cb->etb = NULL;
        return NULL;
    }
    if (rc) return py_raise_last();
    return result_dict(res);
}

PyObject *py_upload(s3x_client *c, const char *bucket, const char *key, PyObject *source, PyObject *knobs,
                    PyObject *progress) {
    s3x_upload *u = NULL;
    if (s3x_upload_new(&u, c)) return py_raise_last();
    if (apply_knobs(u, up_set, knobs)) {
        s3x_upload_free(u);
        return NULL;
    }
    py_cb cb;
    memset(&cb, 0, sizeof cb);
    cb.progress = progress;
    s3x_upload_set_progress(u, progress_tramp, &cb);
    s3x_result res;
    memset(&res, 0, sizeof res);
    int rc;
    if (PyUnicode_Check(source)) {
        PyObject *fspath = fs_path(source);
        if (!fspath) {
            s3x_upload_free(u);
            return NULL;
        }
        const char *path = PyBytes_AS_STRING(fspath);
        Py_BEGIN_ALLOW_THREADS rc = s3x_upload_file(u, bucket, key, path, &res);
        Py_END_ALLOW_THREADS Py_DECREF(fspath);
    } else if (PyObject_CheckBuffer(source)) {
        Py_buffer view;
        if (PyObject_GetBuffer(source, &view, PyBUF_SIMPLE) != 0) {
            s3x_upload_free(u);
            return NULL;
        }
        Py_BEGIN_ALLOW_THREADS rc = s3x_upload_memory(u, bucket, key, view.buf, (size_t)view.len, &res);
        Py_END_ALLOW_THREADS PyBuffer_Release(&view);
    } else {
        cb.stream = source;
        Py_BEGIN_ALLOW_THREADS rc = s3x_upload_stream(u, bucket, key, readinto_tramp, &res, &cb);
        Py_END_ALLOW_THREADS
    }
    s3x_upload_free(u);
    Py_CLEAR(cb.scratch);
    return finish_call(rc, &cb, &res);
}

PyObject *py_download(s3x_client *c, const char *bucket, const char *key, PyObject *dest, PyObject *knobs,
                      PyObject *progress) {
    s3x_download *d = NULL;
    if (s3x_download_new(&d, c)) return py_raise_last();
    if (apply_knobs(d, down_set, knobs)) {
        s3x_download_free(d);
        return NULL;
    }
    py_cb cb;
    memset(&cb, 0, sizeof cb);
    cb.progress = progress;
    s3x_download_set_progress(d, progress_tramp, &cb);
    s3x_result res;
    memset(&res, 0, sizeof res);
    int rc;
    if (PyUnicode_Check(dest)) {
        PyObject *fspath = fs_path(dest);
        if (!fspath) {
            s3x_download_free(d);
            return NULL;
        }
        const char *path = PyBytes_AS_STRING(fspath);
        Py_BEGIN_ALLOW_THREADS rc = s3x_download_file(d, bucket, key, path, &res);
        Py_END_ALLOW_THREADS Py_DECREF(fspath);
    } else if (PyObject_CheckBuffer(dest) && !PyObject_HasAttrString(dest, "write")) {
        Py_buffer view;
        if (PyObject_GetBuffer(dest, &view, PyBUF_WRITABLE) != 0) {
            s3x_download_free(d);
            return NULL;
        }
        size_t len = 0;
        Py_BEGIN_ALLOW_THREADS rc = s3x_download_memory(d, bucket, key, view.buf, (size_t)view.len, &len, &res);
        Py_END_ALLOW_THREADS PyBuffer_Release(&view);
    } else {
        cb.stream = dest;
        Py_BEGIN_ALLOW_THREADS rc = s3x_download_stream(d, bucket, key, write_tramp, &res, &cb);
        Py_END_ALLOW_THREADS
    }
    s3x_download_free(d);
    Py_CLEAR(cb.scratch);
    return finish_call(rc, &cb, &res);
}

/* ---- batches --------------------------------------------------------------- */

static int batch_set(void *h, s3x_param p, int64_t v) { return s3x_batch_set(h, p, v); }
static int bulk_set(void *h, s3x_param p, int64_t v) { return s3x_bulk_set(h, p, v); }

int py_batch_apply_knobs(s3x_batch *b, PyObject *knobs) { return apply_knobs(b, batch_set, knobs); }

/* What the binding keeps for one transfer of a batch until its done
 * callback: the callables and the source or destination (references owned),
 * the buffer export of a bytes-like one, and the callback state. */
typedef struct py_bitem {
    py_cb cb;          /* progress and stream point at the references below */
    PyObject *progress;
    PyObject *done;
    PyObject *obj;
    Py_buffer view;
    int has_view;
} py_bitem;

static void bitem_free(py_bitem *it) {
    if (it->has_view) PyBuffer_Release(&it->view);
    Py_XDECREF(it->progress);
    Py_XDECREF(it->done);
    Py_XDECREF(it->obj);
    Py_CLEAR(it->cb.scratch);
    Py_XDECREF(it->cb.etype);
    Py_XDECREF(it->cb.error);
    Py_XDECREF(it->cb.etb);
    PyMem_RawFree(it);
}

/* Runs on the batch's thread: builds the exception (a callback's own first)
 * and the result, calls done(id, exc, result), frees the item. */
static void batch_done_tramp(s3x_batch *b, s3x_batch_id id, int rc, const s3x_error *err, const s3x_result *res,
                             void *payload) {
    (void)b;
    (void)err;
    py_bitem *it = payload;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *exc = NULL;
    if (it->cb.error && it->cb.error != Py_None) {
        exc = it->cb.error;
        Py_INCREF(exc);
        if (it->cb.etb) PyException_SetTraceback(exc, it->cb.etb);
    } else if (rc) {
        /* The batch restored this transfer's error as the thread's last. */
        py_raise_last();
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        PyErr_NormalizeException(&t, &v, &tb);
        exc = v;
        Py_XDECREF(t);
        Py_XDECREF(tb);
    }
    PyObject *r = result_dict(res);
    PyObject *ret = PyObject_CallFunction(it->done, "KOO", (unsigned long long)id, exc ? exc : Py_None,
                                          r ? r : Py_None);
    if (!ret) PyErr_WriteUnraisable(it->done);
    Py_XDECREF(ret);
    Py_XDECREF(r);
    Py_XDECREF(exc);
    bitem_free(it);
    PyGILState_Release(g);
}

PyObject *py_batch_free(s3x_batch *b) {
    Py_BEGIN_ALLOW_THREADS s3x_batch_free(b);
    Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

PyObject *py_batch_add(s3x_batch *b, int upload, const char *bucket, const char *key, PyObject *obj,
                       PyObject *done, PyObject *progress) {
    if (!PyCallable_Check(done)) {
        PyErr_SetString(PyExc_TypeError, "done must be callable");
        return NULL;
    }
    py_bitem *it = PyMem_RawCalloc(1, sizeof *it);
    if (!it) return PyErr_NoMemory();
    Py_INCREF(done);
    it->done = done;
    Py_INCREF(obj);
    it->obj = obj;
    if (progress && progress != Py_None) {
        Py_INCREF(progress);
        it->progress = progress;
        it->cb.progress = progress;
    }
    s3x_batch_cb cb = {batch_done_tramp, progress_tramp, it};
    s3x_batch_id id = 0;
    int rc;
    if (PyUnicode_Check(obj)) {
        PyObject *fspath = fs_path(obj);
        if (!fspath) {
            bitem_free(it);
            return NULL;
        }
        const char *path = PyBytes_AS_STRING(fspath);
        rc = upload ? s3x_batch_upload_file(b, bucket, key, path, &cb, &id)
                    : s3x_batch_download_file(b, bucket, key, path, &cb, &id);
        Py_DECREF(fspath);
    } else if (PyObject_CheckBuffer(obj) && !PyObject_HasAttrString(obj, "write")) {
        if (PyObject_GetBuffer(obj, &it->view, upload ? PyBUF_SIMPLE : PyBUF_WRITABLE) != 0) {
            bitem_free(it);
            return NULL;
        }
        it->has_view = 1;
        rc = upload ? s3x_batch_upload_memory(b, bucket, key, it->view.buf, (size_t)it->view.len, &cb, &id)
                    : s3x_batch_download_memory(b, bucket, key, it->view.buf, (size_t)it->view.len, &cb, &id);
    } else {
        it->cb.stream = obj;
        rc = upload ? s3x_batch_upload_stream(b, bucket, key, readinto_tramp, &it->cb, &cb, &id)
                    : s3x_batch_download_stream(b, bucket, key, write_tramp, &it->cb, &cb, &id);
    }
    if (rc) {
        bitem_free(it);
        return py_raise_last();
    }
    return PyLong_FromUnsignedLongLong((unsigned long long)id);
}

PyObject *py_batch_cancel(s3x_batch *b, unsigned long long id) {
    s3x_batch_cancel(b, (s3x_batch_id)id);
    Py_RETURN_NONE;
}

PyObject *py_batch_cancel_all(s3x_batch *b) {
    s3x_batch_cancel_all(b);
    Py_RETURN_NONE;
}

PyObject *py_batch_wait(s3x_batch *b, int timeout_ms) {
    int idle;
    Py_BEGIN_ALLOW_THREADS idle = s3x_batch_wait(b, timeout_ms);
    Py_END_ALLOW_THREADS return PyBool_FromLong(idle);
}

PyObject *py_batch_fd(s3x_batch *b) { return PyLong_FromLong(s3x_batch_fd(b)); }

PyObject *py_batch_ack(s3x_batch *b) {
    s3x_batch_ack(b);
    Py_RETURN_NONE;
}

PyObject *py_batch_stats(s3x_batch *b) {
    s3x_batch_stats s;
    s3x_batch_get_stats(b, &s);
    return Py_BuildValue("{s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L}", "added", (long long)s.added, "finished",
                         (long long)s.finished, "failed", (long long)s.failed, "running", (long long)s.running,
                         "bytes", (long long)s.bytes, "budget", (long long)s.budget, "peak_buffer_bytes",
                         (long long)s.peak_buffer_bytes, "buffer_waits", (long long)s.buffer_waits);
}

PyObject *py_client_throttle_state(s3x_client *c) {
    s3x_throttle_state st;
    if (s3x_client_throttle_state(c, &st, sizeof st)) return py_raise_last();
    return Py_BuildValue("{s:N,s:d,s:L,s:d,s:d}", "active", PyBool_FromLong(st.active), "rate", st.rate,
                         "throttles", (long long)st.throttles, "seconds", st.seconds, "seconds_total",
                         st.seconds_total);
}

/* ---- server-side copy and bulk delete ---- */

PyObject *py_copy(s3x_client *c, const char *src_bucket, const char *src_key, const char *dst_bucket,
                  const char *dst_key, int directive, const char *content_type, PyObject *knobs,
                  PyObject *progress) {
    s3x_upload *u = NULL;
    if (s3x_upload_new(&u, c)) return py_raise_last();
    if (apply_knobs(u, up_set, knobs)) {
        s3x_upload_free(u);
        return NULL;
    }
    py_cb cb;
    memset(&cb, 0, sizeof cb);
    cb.progress = progress;
    s3x_upload_set_progress(u, progress_tramp, &cb);
    s3x_result res;
    memset(&res, 0, sizeof res);
    s3x_copy_opts opts = {directive, content_type, NULL};
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = s3x_upload_copy(u, src_bucket, src_key, dst_bucket, dst_key, &opts, &res);
    Py_END_ALLOW_THREADS s3x_upload_free(u);
    return finish_call(rc, &cb, &res);
}

PyObject *py_delete_objects(s3x_client *c, const char *bucket, PyObject *keys) {
    PyObject *seq = PySequence_Fast(keys, "keys must be a sequence of str");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *holders = PyList_New(0);
    const char **ks = PyMem_RawCalloc(n > 0 ? (size_t)n : 1, sizeof *ks);
    PyObject *out = NULL;
    if (!holders || !ks) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *holder = NULL;
        if (py_cstr_arg(PySequence_Fast_GET_ITEM(seq, i), "key", &holder, &ks[i]) != 0) goto done;
        if (holder) {
            int bad = PyList_Append(holders, holder);
            Py_DECREF(holder);
            if (bad) goto done;
        }
        if (!ks[i]) {
            PyErr_SetString(PyExc_TypeError, "keys must be str, not None");
            goto done;
        }
    }
    s3x_delete_result *d = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = s3x_delete_objects(c, bucket, ks, (size_t)n, &d);
    Py_END_ALLOW_THREADS if (rc) {
        py_raise_last();
        goto done;
    }
    out = PyList_New((Py_ssize_t)d->count);
    for (size_t i = 0; out && i < d->count; i++) {
        s3x_delete_entry *e = &d->entries[i];
        PyObject *o = Py_BuildValue("{s:N,s:O,s:N,s:N}", "key", name_or_none(e->key), "ok", e->ok ? Py_True : Py_False,
                                    "code", text_or_none(e->code), "message", text_or_none(e->message));
        if (!o) Py_CLEAR(out);
        else PyList_SET_ITEM(out, (Py_ssize_t)i, o);
    }
    s3x_delete_result_free(d);
done:
    PyMem_RawFree(ks);
    Py_XDECREF(holders);
    Py_DECREF(seq);
    return out;
}

PyObject *py_batch_copy(s3x_batch *b, const char *src_bucket, const char *src_key, const char *dst_bucket,
                        const char *dst_key, int directive, const char *content_type, PyObject *done,
                        PyObject *progress) {
    if (!PyCallable_Check(done)) {
        PyErr_SetString(PyExc_TypeError, "done must be callable");
        return NULL;
    }
    py_bitem *it = PyMem_RawCalloc(1, sizeof *it);
    if (!it) return PyErr_NoMemory();
    Py_INCREF(done);
    it->done = done;
    Py_INCREF(Py_None);
    it->obj = Py_None;
    if (progress && progress != Py_None) {
        Py_INCREF(progress);
        it->progress = progress;
        it->cb.progress = progress;
    }
    s3x_batch_cb cb = {batch_done_tramp, progress_tramp, it};
    s3x_batch_id id = 0;
    s3x_copy_opts opts = {directive, content_type, NULL};
    if (s3x_batch_copy_ex(b, src_bucket, src_key, dst_bucket, dst_key, &opts, &cb, &id)) {
        bitem_free(it);
        return py_raise_last();
    }
    return PyLong_FromUnsignedLongLong((unsigned long long)id);
}

/* ---- bulk runs (s3xfer/bulk.h) ------------------------------------------------ */

/* The callbacks of one bulk call. They run on the calling thread, inside
 * the C call that released the GIL, and take it back. The first exception
 * a callback raises is kept (cb.error) and cancels the run: the item
 * callback cannot say "stop" through its return, so it cancels the job. */
typedef struct py_bulk_cb {
    py_cb cb;           /* progress (borrowed) and the kept exception */
    PyObject *on_item;  /* borrowed */
    s3x_bulk *bulk;
} py_bulk_cb;

static PyObject *bulk_summary_dict(const s3x_bulk_summary *s) {
    return Py_BuildValue("{s:L,s:N,s:L,s:L,s:L,s:L,s:L,s:d,s:L,s:L,s:L,s:L}", "objects_found",
                         (long long)s->objects_found, "listing_done", PyBool_FromLong(s->listing_done),
                         "objects_done", (long long)s->objects_done, "objects_skipped",
                         (long long)s->objects_skipped, "objects_failed", (long long)s->objects_failed,
                         "bytes_found", (long long)s->bytes_found, "bytes_done", (long long)s->bytes_done, "seconds",
                         s->seconds, "requests", (long long)s->requests, "retries", (long long)s->retries,
                         "peak_buffer_bytes", (long long)s->peak_buffer_bytes, "budget", (long long)s->budget);
}

/* A local path from the library: the file system's bytes, decoded as
 * os.fsdecode() does, so that open() gets the same bytes back. */
static PyObject *fs_name_or_none(const char *s) {
    if (!s) Py_RETURN_NONE;
    return PyUnicode_DecodeFSDefault(s);
}

static void bulk_item_tramp(const s3x_bulk_item *it, void *payload) {
    py_bulk_cb *b = payload;
    PyGILState_STATE g = PyGILState_Ensure();
    if (!b->cb.error && b->on_item && b->on_item != Py_None) {
        PyObject *err = Py_None;
        Py_INCREF(Py_None);
        if (it->rc) {
            const s3x_error *e = it->err;
            Py_DECREF(Py_None);
            err = Py_BuildValue("(iNiNNi)", e ? e->code : it->rc,
                                text_or_none(e && e->message ? e->message : s3x_strerror(it->rc)),
                                e ? e->http_status : 0, text_or_none(e && e->s3_code ? e->s3_code : ""),
                                text_or_none(e && e->request_id ? e->request_id : ""), e ? e->sys_errno : 0);
        }
        PyObject *res = NULL;
        if (it->result) {
            res = result_dict(it->result);
        } else {
            res = Py_None;
            Py_INCREF(Py_None);
        }
        PyObject *d = (err && res)
                          ? Py_BuildValue("{s:i,s:N,s:N,s:N,s:L,s:i,s:O,s:N,s:O}", "action", (int)it->action, "key",
                                          name_or_none(it->key), "dest_key", name_or_none(it->dest_key), "path",
                                          fs_name_or_none(it->path), "size", (long long)it->size, "rc", it->rc,
                                          "error", err, "reason", text_or_none(it->reason), "result", res)
                          : NULL;
        Py_XDECREF(err);
        Py_XDECREF(res);
        PyObject *r = d ? PyObject_CallFunctionObjArgs(b->on_item, d, NULL) : NULL;
        Py_XDECREF(d);
        if (!r) {
            keep_exception(&b->cb);
            s3x_bulk_cancel(b->bulk);
        }
        Py_XDECREF(r);
    }
    PyGILState_Release(g);
}

static int bulk_progress_tramp(const s3x_bulk_summary *s, void *payload) {
    py_bulk_cb *b = payload;
    PyGILState_STATE g = PyGILState_Ensure();
    int stop = b->cb.error != NULL;
    if (!stop && PyErr_CheckSignals() != 0) {
        keep_exception(&b->cb);
        stop = 1;
    } else if (!stop && b->cb.progress && b->cb.progress != Py_None) {
        PyObject *d = bulk_summary_dict(s);
        PyObject *r = d ? PyObject_CallFunctionObjArgs(b->cb.progress, d, NULL) : NULL;
        Py_XDECREF(d);
        if (!r) {
            keep_exception(&b->cb);
            stop = 1;
        }
        Py_XDECREF(r);
    }
    PyGILState_Release(g);
    return stop;
}

PyObject *py_bulk_run(s3x_client *c, int op, const char *a1, const char *a2, const char *a3, const char *a4,
                      PyObject *knobs, unsigned int flags, PyObject *filters, PyObject *on_item, PyObject *progress) {
    if (op < PY_BULK_UPLOAD_DIR || op > PY_BULK_COPY_PREFIX) {
        PyErr_Format(PyExc_ValueError, "unknown bulk operation %d", op);
        return NULL;
    }
    s3x_bulk *bulk = NULL;
    if (s3x_bulk_new(&bulk, c)) return py_raise_last();
    if (apply_knobs(bulk, bulk_set, knobs) != 0) goto fail;
    if (s3x_bulk_set_flags(bulk, flags)) {
        py_raise_last();
        goto fail;
    }
    if (filters && filters != Py_None) {
        PyObject *seq = PySequence_Fast(filters, "filters must be a sequence of (include, pattern)");
        if (!seq) goto fail;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
            PyObject *f = PySequence_Fast_GET_ITEM(seq, i);
            int include = 0;
            PyObject *pat = NULL, *holder = NULL;
            const char *p = NULL;
            if (!PyArg_ParseTuple(f, "pU", &include, &pat) || py_cstr_arg(pat, "a filter pattern", &holder, &p)) {
                Py_DECREF(seq);
                goto fail;
            }
            int rc = s3x_bulk_add_filter(bulk, include, p);
            Py_XDECREF(holder);
            if (rc) {
                Py_DECREF(seq);
                py_raise_last();
                goto fail;
            }
        }
        Py_DECREF(seq);
    }
    py_bulk_cb cb;
    memset(&cb, 0, sizeof cb);
    cb.cb.progress = progress;
    cb.on_item = on_item;
    cb.bulk = bulk;
    s3x_bulk_set_callbacks(bulk, bulk_item_tramp, bulk_progress_tramp, &cb);
    s3x_bulk_summary s;
    memset(&s, 0, sizeof s);
    int rc;
    Py_BEGIN_ALLOW_THREADS switch (op) {
    case PY_BULK_UPLOAD_DIR: rc = s3x_bulk_upload_dir(bulk, a1, a2, a3, &s); break;
    case PY_BULK_DOWNLOAD_DIR: rc = s3x_bulk_download_dir(bulk, a1, a2, a3, &s); break;
    case PY_BULK_SYNC_UP: rc = s3x_bulk_sync_up(bulk, a1, a2, a3, &s); break;
    case PY_BULK_SYNC_DOWN: rc = s3x_bulk_sync_down(bulk, a1, a2, a3, &s); break;
    case PY_BULK_DELETE_PREFIX: rc = s3x_bulk_delete_prefix(bulk, a1, a2, &s); break;
    default: rc = s3x_bulk_copy_prefix(bulk, a1, a2, a3, a4, &s); break;
    }
    Py_END_ALLOW_THREADS;
    /* The error, copied before the job is freed (nothing else runs between). */
    PyObject *err = Py_None;
    Py_INCREF(Py_None);
    if (rc) {
        const s3x_error *e = s3x_error_last();
        Py_DECREF(Py_None);
        err = Py_BuildValue("(iNiNNi)", e->code ? e->code : rc, text_or_none(e->message ? e->message : ""),
                            e->http_status, text_or_none(e->s3_code ? e->s3_code : ""),
                            text_or_none(e->request_id ? e->request_id : ""), e->sys_errno);
    }
    Py_BEGIN_ALLOW_THREADS s3x_bulk_free(bulk);
    Py_END_ALLOW_THREADS;
    /* A callback's exception is handed back (not raised here) so that the
     * caller can attach the summary before raising it. */
    PyObject *cbexc = Py_None;
    Py_INCREF(Py_None);
    if (cb.cb.error) {
        Py_DECREF(Py_None);
        if (cb.cb.error == Py_None) {
            Py_DECREF(Py_None);
            cbexc = PyObject_CallFunction(PyExc_RuntimeError, "s", "a callback failed");
        } else {
            cbexc = cb.cb.error;
            if (cb.cb.etb) PyException_SetTraceback(cbexc, cb.cb.etb);
        }
        Py_XDECREF(cb.cb.etype);
        Py_XDECREF(cb.cb.etb);
    }
    if (!err || !cbexc) {
        Py_XDECREF(err);
        Py_XDECREF(cbexc);
        return NULL;
    }
    return Py_BuildValue("(iNNN)", rc, bulk_summary_dict(&s), err, cbexc);
fail:
    s3x_bulk_free(bulk);
    return NULL;
}
