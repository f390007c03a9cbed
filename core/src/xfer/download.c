/* The download manager: ranged GETs in parallel on the client's multi loop.
 * The first range (the probe) also tells the object's size and ETag; every
 * later range is pinned to that ETag with If-Match. Ranges go straight to
 * their offsets (file: pwrite into a temporary file; memory: the caller's
 * buffer) or, for in-order streams, into pool buffers that are delivered in
 * order. Whether a response is the range that was asked for, and whether
 * the whole object arrived, is decided by range.c: no length a server states
 * is used before it was checked there. */
#include "checksum.h"
#include "bytecopy.h"
#include "filewriter.h"
#include "error.h"
#include "params_internal.h"
#include "range.h"
#include "requests.h"
#include "kinds.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct s3x_download {
    s3x_xfer x;
};

enum dst_kind { DST_FILE, DST_MEM, DST_STREAM };

/* One range of the download (or, as the side part, the HEAD that asks for
 * the full-object checksum): what it asks for and where its bytes go. Its
 * request, attempts and state are the scheduler's (base); a stream's range
 * that arrived waits HELD until it is next in order. */
typedef struct rslot {
    s3x_part base;
    int index;                /* range number, 0-based */
    int64_t offset, size;     /* size is -1 for the first probe until known */
    s3x_dlask ask;            /* what this range's request asks for */
    s3x_dlverdict verdict;    /* what its response must deliver, once checked */
    int checked;              /* the response head was accepted (range.c) */
    int proto;                /* the response broke the protocol: perr says how */
    s3x_saved_error perr;
    int64_t got;              /* bytes of this range received in this attempt (read while it runs,
                                 perhaps on a receiving loop's thread: stored atomically) */
    char *buf;                /* DST_STREAM: pool buffer */
    size_t buf_size;
    int bad;                  /* a write failed (werr) */
    int werr;                 /* its errno */
    double io_s;              /* seconds in on_body, added to the result on the transfer's thread */
    char *stage;              /* DST_FILE: bytes gathered for one large pwrite */
    size_t staged;
    char range[64];
} rslot;

typedef struct drun {
    s3x_xfer *x;
    const char *bucket, *key;
    int kind;
    int fd;                   /* DST_FILE: the temporary file (-1 once closed) */
    const char *path;         /* DST_FILE: the destination */
    s3x_buf tmp;              /* DST_FILE: the temporary file's name */
    int replacing;            /* DST_FILE: an existing regular file is replaced ... */
    mode_t keep_mode;         /* ... and keeps these permission bits */
    int renamed;              /* DST_FILE: the temporary file became path */
    int ending;               /* DST_FILE: the writer is ending (writes, fsync) on its thread */
    double t_end;             /* when the last byte was in */
    int out_fd;               /* DST_STREAM to a descriptor (write_payload is the run) */
    int out_errno;            /* the errno of a failed write to out_fd */
    s3x_writer *writer;       /* DST_FILE: the thread that writes it */
    char *mem;                /* DST_MEM */
    size_t mem_cap;
    s3x_write_fn write_fn;    /* DST_STREAM */
    void *write_payload;
    int64_t part_size;
    s3x_dlplan plan;          /* size (-1 until the probe), ranges, ETag: range.c */
    char *etag;               /* the probe's ETag as sent, for If-Match */
    int next_index;           /* next range to assign */
    int next_deliver;         /* DST_STREAM: next range to hand over */
    int64_t bytes_done;       /* bytes of accepted ranges */
    int64_t delivered;        /* DST_STREAM: bytes handed to write_fn */
    s3x_transfer t;           /* this download on the scheduler: nslots ranges, then the HEAD */
    int nslots;
    int whole_in_first;       /* the first response carried the whole object */
    int waiting;              /* DST_STREAM: the next range waits for a buffer */
    char *checksum_hdr_name;  /* the object's full checksum: header name ... */
    char *checksum_value;     /* ... and value (full object only, not "-N") */
    s3x_hasher hasher;
    int hashing;              /* HASH_*: how the bytes meet the hasher */
    /* A ranged GET carries no checksum header (S3 and SeaweedFS send it only
     * for the whole object), so for a download of several ranges a HEAD
     * asks for the full-object checksum while the ranges run. Memory and
     * streams hash the bytes in order: a stream's as they are delivered
     * (deliveries wait for the HEAD's answer), memory's at the end; a
     * file's ranges are hashed apart and combined (fcrc below). */
    int head_state;           /* HEAD_* */
    /* A file of several ranges: its ranges reach the disk out of order, so
     * each range is hashed on its own by the writer's hook (hash_range) as
     * its buffers reach the writer thread, and once every write is done the
     * ranges' CRCs are combined into the object's (file_checksum). Which
     * CRCs the hook makes (FCRC_*) is set by the loop: both from the probe's
     * first byte, when it says the object is larger than the probe, then
     * the one the HEAD names, or none. */
    atomic_int fcrc;
    struct rcrc *rcrc;        /* per range, by index: the writer thread's until it ends */
    int64_t nrcrc;
    int rcrc_oom;
} drun;

enum { FCRC_OFF, FCRC_BOTH, FCRC_CRC32C, FCRC_CRC32 };
enum { RCRC_C32C = 1, RCRC_C32 = 2 };

/* One range's CRCs, over its bytes from its first in order. */
typedef struct rcrc {
    uint32_t c32c, c32;
    int64_t len;              /* bytes hashed */
    int has;                  /* RCRC_*: the CRCs made of all of them */
} rcrc;

enum { HASH_NONE, HASH_PROBE /* the probe's body, the whole object */, HASH_IN_ORDER };
enum { HEAD_NONE, HEAD_PENDING /* the side part runs */, HEAD_DONE };

static drun *run_of(const s3x_part *p) { return p->t->ctx; }
static rslot *slot_at(const drun *R, int i) { return (rslot *)s3x_transfer_part(&R->t, i); }

/* ---- handle -------------------------------------------------------------------- */

int s3x_download_new(s3x_download **out, s3x_client *client) {
    if (!out) return s3x_seterr(S3X_EINVAL, "out is NULL");
    *out = NULL;
    s3x_download *d = calloc(1, sizeof *d);
    if (!d) return s3x_seterr(S3X_ENOMEM, "out of memory");
    int rc = s3x_xfer_init(&d->x, client, S3X_SCOPE_DOWNLOAD);
    if (rc) {
        free(d);
        return rc;
    }
    *out = d;
    return 0;
}

void s3x_download_free(s3x_download *d) {
    if (!d) return;
    s3x_xfer_destroy(&d->x);
    free(d);
}

int s3x_download_set(s3x_download *d, s3x_param p, int64_t v) {
    if (!d) return s3x_seterr(S3X_EINVAL, "download manager is NULL");
    return s3x_xfer_set(&d->x, p, v);
}

int s3x_download_get(const s3x_download *d, s3x_param p, int64_t *v) {
    if (!d) return s3x_seterr(S3X_EINVAL, "download manager is NULL");
    return s3x_xfer_get(&d->x, p, v);
}

void s3x_download_set_progress(s3x_download *d, s3x_progress_fn fn, void *payload) {
    if (!d) return;
    d->x.progress = fn;
    d->x.progress_payload = payload;
}

void s3x_download_cancel(s3x_download *d) {
    if (!d) return;
    atomic_store(&d->x.cancel, 1);
    s3x_http_wakeup(d->x.client);
}

/* ---- bodies --------------------------------------------------------------------- */

/* Hands a range's gathered bytes to the writer thread; they end at
 * s->offset + s->got. */
static int flush_stage(drun *R, rslot *s) {
    if (!s->staged) return 0;
    int64_t off = s->offset + s->got - (int64_t)s->staged;
    int e = s3x_writer_submit_tagged(R->writer, s->stage, s->staged, off, s->index);
    s->staged = 0;
    s->stage = NULL;
    if (e) {
        s->werr = e;
        s->bad = 1;
        return -1;
    }
    return 0;
}

static int on_body_io(const void *data, size_t len, void *payload);

static int on_body(const void *data, size_t len, void *payload) {
    rslot *s = payload;
    double t = s3x_now();
    int rc = on_body_io(data, len, payload);
    s->io_s += s3x_now() - t; /* not res: this may run on a receiving loop's thread */
    return rc;
}

/* Fails the run with the thread's last error (set by range.c, which does
 * not know the object's name), naming the object; its other fields stay. */
static int fail_named(drun *R) {
    int code = s3x_error_prefix("GetObject s3://%s/%s: ", R->bucket, R->key);
    s3x_xfer_fail(R->x);
    return code;
}

/* Fails the run because writing the destination failed with err (an errno). */
static int fail_write(drun *R, int err) {
    s3x_seterr_errno(S3X_EIO, err, "writing the download of s3://%s/%s failed", R->bucket, R->key);
    s3x_xfer_fail(R->x);
    return S3X_EIO;
}

/* Keeps the thread's last error as this response's protocol failure: it is
 * reported when the request finishes, and other requests may set the thread
 * error in between. Returns 1 (stop the body). */
static int keep_proto_error(rslot *s) {
    if (!s->proto) {
        s->proto = 1;
        s3x_error_save(&s->perr);
    }
    return 1;
}

/* Starts hashing (how: HASH_*) when r carries the object's full checksum. */
static void begin_hash(drun *R, const s3x_http_req *r, int how) {
    s3x_hasher_cleanup(&R->hasher);
    R->hashing = HASH_NONE;
    /* Composite "-N" checksums of multipart objects are checksums of the
     * parts' checksums: they need the upload's part boundaries, which a
     * download does not know (see validate_checksum). */
    if (R->x->params[S3X_PARAM_VALIDATE_CHECKSUM] && r->checksum_kind && r->checksum_value &&
        !strchr(r->checksum_value, '-') && s3x_hasher_init(&R->hasher, r->checksum_kind) == 0) {
        free(R->checksum_value);
        R->checksum_value = strdup(r->checksum_value);
        free(R->checksum_hdr_name);
        R->checksum_hdr_name = strdup(s3x_checksum_header(r->checksum_kind));
        if (R->checksum_value && R->checksum_hdr_name) R->hashing = how;
    }
}

/* Checks a 2xx response's head against what its request asked (range.c),
 * once, before any of its body is used. Returns 0 or -1 (thread error set). */
static int check_head(drun *R, rslot *s) {
    if (s->checked) return 0;
    s3x_http_req *r = &s->base.req;
    s3x_dlresp resp = {r->status, r->content_range, r->content_length, r->etag};
    if (s3x_dlplan_check(&R->plan, &s->ask, &resp, &s->verdict)) return -1;
    s->checked = 1;
    if (s->ask.probe) begin_hash(R, r, HASH_PROBE);
    /* A file of several ranges: the hook hashes from the probe's first
     * byte, before the HEAD says which CRC (if any) the object has. */
    if (s->ask.probe && R->kind == DST_FILE && s->verdict.length < s->verdict.total &&
        R->x->params[S3X_PARAM_VALIDATE_CHECKSUM])
        atomic_store(&R->fcrc, FCRC_BOTH);
    return 0;
}

/* The writer's hook (its thread): hashes a buffer of range `index` that
 * starts `off` bytes into the object. An attempt delivers its range from
 * the first byte, in order, and the writer sees the buffers in the order
 * they were submitted, so a buffer at the range's start begins its hash
 * again (a retried range) and every other one continues it. */
static void hash_range(void *arg, int64_t index, const char *buf, size_t len, int64_t off) {
    drun *R = arg;
    int want = atomic_load(&R->fcrc);
    if (want == FCRC_OFF || index < 0 || R->rcrc_oom) return;
    if (index >= R->nrcrc) {
        int64_t n = index + 1 > 2 * R->nrcrc ? index + 1 : 2 * R->nrcrc;
        rcrc *grown = realloc(R->rcrc, (size_t)n * sizeof *grown);
        if (!grown) {
            R->rcrc_oom = 1; /* the check reads the file back instead */
            return;
        }
        memset(grown + R->nrcrc, 0, (size_t)(n - R->nrcrc) * sizeof *grown);
        R->rcrc = grown;
        R->nrcrc = n;
    }
    rcrc *c = &R->rcrc[index];
    int64_t at = off - index * R->part_size;
    if (at == 0) {
        c->len = 0;
        c->c32c = c->c32 = 0;
        c->has = RCRC_C32C | RCRC_C32;
    } else if (at != c->len) {
        c->has = 0; /* not in order: the check reads this range back */
    }
    if (want == FCRC_CRC32C) c->has &= RCRC_C32C;
    else if (want == FCRC_CRC32) c->has &= RCRC_C32;
    if (c->has & RCRC_C32C) c->c32c = s3x_crc32c(c->c32c, buf, len);
    if (c->has & RCRC_C32) c->c32 = s3x_crc32(c->c32, buf, len);
    c->len += (int64_t)len;
}

static int on_body_io(const void *data, size_t len, void *payload) {
    rslot *s = payload;
    drun *R = run_of(&s->base);
    s3x_http_req *r = &s->base.req;
    if (r->status >= 300) return 0; /* error bodies are captured by http.c */
    if (s->proto) return 1;
    if (check_head(R, s) || s3x_dlplan_body(&s->verdict, s->got, len)) return keep_proto_error(s);
    /* From here the bytes are within the range that was asked for. */
    int64_t off = s->verdict.offset + s->got;
    switch (R->kind) {
    case DST_FILE: {
        /* curl hands over at most 16 KiB at a time. The bytes are gathered
         * per range and written S3X_WRITER_BUF at a time (small writes cost
         * several times the system time), by the writer thread, so the loop
         * spends its time on the sockets rather than in the page cache. */
        (void)off;
        const char *p = data;
        size_t left = len;
        while (left) {
            if (!s->stage && !(s->stage = s3x_writer_buffer(R->writer))) {
                s->werr = ENOMEM;
                s->bad = 1;
                return 1;
            }
            size_t n = S3X_WRITER_BUF - s->staged;
            if (n > left) n = left;
            s3x_bytes_copy(s->stage + s->staged, p, n);
            s->staged += n;
            __atomic_store_n(&s->got, s->got + (int64_t)n, __ATOMIC_RELAXED);
            p += n;
            left -= n;
            if (s->staged == S3X_WRITER_BUF && flush_stage(R, s) != 0) return 1;
        }
        /* index first: R->hashing is the transfer thread's, and only
         * range 0 is sure to run there (loop_ok). */
        if (s->index == 0 && R->hashing == HASH_PROBE) s3x_hasher_update(&R->hasher, data, len);
        return 0;
    }
    case DST_MEM:
        /* Cannot happen after the checks (the object fits the buffer); kept
         * so that no bug elsewhere can write past the caller's buffer. */
        if ((uint64_t)off + len > R->mem_cap) {
            s3x_seterr(S3X_EINTERNAL, "a range would end past the %zu-byte buffer", R->mem_cap);
            return keep_proto_error(s);
        }
        /* The object is read by the caller once it is all in: if it is
         * large, out of the cache by then. */
        s3x_bytes_copy_to(R->mem + off, data, len, s->verdict.total > 0 ? (size_t)s->verdict.total : 0);
        break;
    case DST_STREAM:
        if (!s->buf || (uint64_t)s->got + len > s->buf_size) {
            s3x_seterr(S3X_EINTERNAL, "a range would end past its %zu-byte buffer", s->buf_size);
            return keep_proto_error(s);
        }
        /* A range is handed over once it is all in (deliver). */
        s3x_bytes_copy_to(s->buf + s->got, data, len, s->buf_size);
        break;
    }
    if (s->index == 0 && R->hashing == HASH_PROBE) s3x_hasher_update(&R->hasher, data, len);
    __atomic_store_n(&s->got, s->got + (int64_t)len, __ATOMIC_RELAXED);
    return 0;
}

/* ---- planning -------------------------------------------------------------------- */

/* Whether a file's ranges may go to the receiving loops (with
 * S3X_PARAM_RECEIVE_THREADS > 1; streams and memory always may). Over plain
 * HTTP they stay on the transfer's thread: its writer threads already take
 * the page-cache work off the loop, and on the 2-core machines we measure a
 * second receiving thread made plain file downloads slower. Over TLS the
 * loop's own work (decrypting) is what limits a download; on one 2-core
 * machine (AMD EPYC) a second receiving thread made file downloads faster,
 * by about 1.05, the spread of an A/A pair, and on another (Intel Xeon)
 * slower (docs/performance.md, "Two receiving threads for a file over
 * TLS"). S3X_RECEIVE_FILES=1 or 0 (benchmarks only) says yes or no whatever
 * the scheme. */
static int g_receive_files = -1;
static pthread_once_t g_receive_files_once = PTHREAD_ONCE_INIT;

static void receive_files_init(void) {
    const char *e = getenv("S3X_RECEIVE_FILES");
    if (e && !strcmp(e, "1")) g_receive_files = 1;
    else if (e && !strcmp(e, "0")) g_receive_files = 0;
}

static int receive_files(const drun *R) {
    pthread_once(&g_receive_files_once, receive_files_init);
    if (g_receive_files >= 0) return g_receive_files;
    const s3x_client *c = R->x->client;
    return c->scheme && !strcmp(c->scheme, "https");
}

/* Adds the seconds a range's attempt spent in on_body to the result. */
static void fold_io(drun *R, rslot *s) {
    R->x->res->io_seconds += s->io_s;
    s->io_s = 0;
}

/* Fills a range's request for its next attempt. */
static int prepare_range(drun *R, rslot *s) {
    s3x_http_req *r = &s->base.req;
    int rc = s->ask.ranged ? s3x_req_range(s->range, sizeof s->range, s->ask.first, s->ask.last) : 0;
    /* The probe asks for the object's checksum; the later ranges are pinned
     * to the ETag the probe saw. */
    int checksum_mode = s->ask.probe && R->x->params[S3X_PARAM_VALIDATE_CHECKSUM];
    if (!rc) rc = s3x_req_get_object(r, R->bucket, R->key, s->ask.ranged ? s->range : NULL,
                                     s->ask.probe ? NULL : R->etag, checksum_mode);
    if (rc) return rc;
    r->write_fn = on_body;
    r->write_payload = s;
    /* The ranges after the probe of a download into memory or a stream may
     * be received on another thread (S3X_PARAM_RECEIVE_THREADS): on_body then touches only the slot, the
     * plan (read only once the probe is learnt), the writer (locked) and
     * the caller's buffer at the range's own offset. The probe, range 0,
     * feeds the run's hasher and stays on the transfer's thread. */
    r->loop_ok = !s->ask.probe && s->index != 0 && (R->kind != DST_FILE || receive_files(R));
    fold_io(R, s);
    s->got = 0;
    s->staged = 0;
    s->bad = 0;
    s->werr = 0;
    s->checked = 0;
    s->proto = 0;
    s3x_saved_error_free(&s->perr);
    return 0;
}

/* Learns the object's size, ETag and ranges from the accepted probe. */
static int learn_object(drun *R, rslot *s) {
    s3x_http_req *r = &s->base.req;
    if (s3x_dlplan_learn(&R->plan, &s->verdict, r->etag)) return -1;
    R->etag = strdup(r->etag ? r->etag : "");
    if (!R->etag) return s3x_seterr(S3X_ENOMEM, "out of memory");
    s->size = s->got;
    R->whole_in_first = s->verdict.length == s->verdict.total;
    if (!R->whole_in_first && R->x->params[S3X_PARAM_VALIDATE_CHECKSUM]) {
        R->head_state = HEAD_PENDING;
        slot_at(R, R->nslots)->base.state = S3X_PART_QUEUED;
    }
    R->x->res->parts = R->plan.nranges;
    R->x->res->multipart = R->plan.nranges > 1;
    return 0;
}

static void release_buf(drun *R, rslot *s) {
    if (s->buf) {
        s3x_pool_put(R->x->bufs, s->buf, s->buf_size);
        s->buf = NULL;
    }
}

/* kind.check: a range's response before the retry policy judges it. A
 * 416 to the probe (an empty object) is asked again without a range; a
 * write error or a response that is not what was asked for fails the run;
 * a body shorter than its range is made a broken connection, retried. */
static int dl_check(s3x_transfer *t, s3x_part *p) {
    if (p->side) return S3X_CHECK_JUDGE;
    drun *R = t->ctx;
    rslot *s = (rslot *)p;
    s3x_http_req *r = &p->req;
    if (r->started_on_loop) R->x->res->requests_received_elsewhere++;
    /* The whole response (head and body as announced) arrived. */
    int complete = r->curl_rc == CURLE_OK && !p->fb_timeout && r->got_status;
    s3x_dlresp resp = {r->status, r->content_range, r->content_length, r->etag};
    if (complete) {
        /* A 416 to the probe means an empty object: fetch it without a range. */
        int empty = s3x_dlplan_empty_probe(&R->plan, &s->ask, &resp);
        if (empty < 0) {
            fail_named(R);
            return S3X_CHECK_HANDLED;
        }
        if (empty) {
            s->ask = s3x_dlplan_probe_whole(&R->plan);
            p->attempts--; /* not a failure: the same attempt, asked right */
            p->state = S3X_PART_QUEUED;
            return S3X_CHECK_HANDLED;
        }
    }
    fold_io(R, s);
    if (s->bad && s->werr) {
        fail_write(R, s->werr);
        return S3X_CHECK_HANDLED;
    }
    /* A response that is not what was asked for (another range, another
     * size, lengths that disagree, more bytes than the range) is not a
     * broken connection: asking again would get the same answer, so the run
     * fails at once with what was wrong. */
    if (s->proto || (complete && r->status >= 200 && r->status < 300 && check_head(R, s))) {
        if (s->proto) s3x_error_restore(&s->perr);
        fail_named(R);
        return S3X_CHECK_HANDLED;
    }
    if (complete && r->status >= 200 && r->status < 300) {
        if (R->kind == DST_FILE && flush_stage(R, s) != 0) {
            fail_write(R, s->werr);
            return S3X_CHECK_HANDLED;
        }
        /* Fewer bytes than the range (a body without Content-Length that
         * ended early) is a broken connection: retried like one, with the
         * message saying what was missing should it be the last attempt. */
        if (s3x_dlplan_complete(&s->verdict, s->got)) {
            snprintf(r->errbuf, sizeof r->errbuf, "%s", s3x_error_last()->message);
            r->curl_rc = CURLE_PARTIAL_FILE;
        }
    }
    return S3X_CHECK_JUDGE;
}

/* kind.failed: a 412 means the object changed: said so. A range's failure
 * fails the run; the HEAD's only means no checksum to check (the ranges are
 * checked on their own, as they are without a checksum), unless it is the
 * 412. */
static int dl_failed(s3x_transfer *t, s3x_part *p) {
    drun *R = t->ctx;
    s3x_http_req *r = &p->req;
    if (p->side) {
        R->head_state = HEAD_DONE;
        atomic_store(&R->fcrc, FCRC_OFF);
    }
    if (r->status == 412) {
        s3x_seterr_http(S3X_ECHANGED, 412, "PreconditionFailed", r->request_id,
                        "s3://%s/%s changed during the download (its ETag is no longer %s)", R->bucket, R->key,
                        R->etag ? R->etag : "?");
        return 1;
    }
    return !p->side;
}

/* The HEAD's answer: the object's full checksum, if it is still the object
 * the probe saw. */
static int take_head(drun *R, s3x_http_req *r) {
    R->head_state = HEAD_DONE;
    if (s3x_dlplan_check_whole(&R->plan, r->content_length, r->etag)) return fail_named(R);
    begin_hash(R, r, HASH_IN_ORDER);
    if (R->kind == DST_FILE) {
        /* SHA-256 cannot be made from the ranges' hashes: not checked. */
        int k = R->hashing ? R->hasher.kind : S3X_CHECKSUM_NONE;
        int want = k == S3X_CHECKSUM_CRC32C ? FCRC_CRC32C : k == S3X_CHECKSUM_CRC32 ? FCRC_CRC32 : FCRC_OFF;
        atomic_store(&R->fcrc, want);
        if (want == FCRC_OFF) R->hashing = HASH_NONE;
    }
    return S3X_PART_FREE;
}

/* kind.take: an accepted range (the probe also tells the object). */
static int dl_take(s3x_transfer *t, s3x_part *p) {
    drun *R = t->ctx;
    rslot *s = (rslot *)p;
    if (p->side) return take_head(R, &p->req);
    if (s->ask.probe) {
        if (learn_object(R, s)) return fail_named(R);
        R->next_index = 1;
    }
    R->bytes_done += s->got;
    s3x_xfer_progress(R->x, R->bytes_done, R->plan.total);
    return R->kind == DST_STREAM ? S3X_PART_HELD : S3X_PART_FREE;
}

/* DST_STREAM: hands over every held range that is next in order. */
static int deliver(drun *R) {
    for (;;) {
        rslot *ready = NULL;
        for (int i = 0; i < R->nslots; i++)
            if (slot_at(R, i)->base.state == S3X_PART_HELD && slot_at(R, i)->index == R->next_deliver)
                ready = slot_at(R, i);
        if (!ready) return 0;
        /* The hasher must see every byte in order, from the first. */
        if (R->head_state == HEAD_PENDING) return 0;
        if (R->hashing == HASH_IN_ORDER && ready->got > 0)
            s3x_hasher_update(&R->hasher, ready->buf, (size_t)ready->got);
        double t = s3x_now();
        int stop = ready->got > 0 && R->write_fn(ready->buf, (size_t)ready->got, R->write_payload) != 0;
        R->x->res->io_seconds += s3x_now() - t;
        if (stop && R->out_errno) return fail_write(R, R->out_errno);
        if (stop)
            return s3x_xfer_failf(R->x, S3X_ECANCELLED, "the consumer of s3://%s/%s stopped the download", R->bucket,
                                  R->key);
        R->delivered += ready->got;
        release_buf(R, ready);
        ready->base.state = S3X_PART_FREE;
        R->next_deliver++;
    }
}

/* kind.tick: the writer thread's errors, and in-order delivery. */
static int dl_tick(s3x_transfer *t) {
    drun *R = t->ctx;
    int we = R->writer ? s3x_writer_error(R->writer) : 0;
    if (we) return fail_write(R, we);
    if (R->kind == DST_STREAM && deliver(R)) return -1;
    return 0;
}

/* kind.feed: the next range, with a pool buffer for a stream. */
static int dl_feed(s3x_transfer *t, s3x_part *p) {
    drun *R = t->ctx;
    rslot *s = (rslot *)p;
    if (R->plan.total < 0 || R->next_index >= R->plan.nranges) return 0;
    if (R->kind == DST_STREAM) {
        int oom = 0;
        /* A batch's pool is shared by transfers of other part sizes. */
        s3x_pool_set_size(R->x->bufs, (size_t)R->part_size);
        char *b = s3x_pool_get(R->x->bufs, &oom);
        if (!b) {
            if (oom) return s3x_seterr(S3X_ENOMEM, "out of memory allocating a range buffer");
            if (!R->waiting) R->x->bufs->waits++; /* once per range that has to wait */
            R->waiting = 1;
            return 0;
        }
        R->waiting = 0;
        s->buf = b;
        s->buf_size = R->x->bufs->buf_size;
    }
    s->index = R->next_index++;
    s->ask = s3x_dlplan_range(&R->plan, s->index);
    s->offset = s->ask.first;
    s->size = s->ask.last - s->ask.first + 1;
    p->attempts = 0;
    p->state = S3X_PART_QUEUED;
    return 1;
}

/* The HEAD for the full-object checksum, pinned to the probe's ETag. */
static int prepare_head(drun *R, s3x_http_req *r) {
    return s3x_req_head_object(r, R->bucket, R->key, R->etag, 1);
}

static int dl_prepare(s3x_transfer *t, s3x_part *p) {
    return p->side ? prepare_head(t->ctx, &p->req) : prepare_range(t->ctx, (rslot *)p);
}

static int dl_more(s3x_transfer *t) {
    drun *R = t->ctx;
    return R->plan.total < 0 || R->next_index < R->plan.nranges;
}

static void dl_moving(s3x_transfer *t, int64_t *done, int64_t *total) {
    drun *R = t->ctx;
    *done = R->bytes_done;
    for (int i = 0; i < R->nslots; i++)
        if (slot_at(R, i)->base.state == S3X_PART_INFLIGHT)
            *done += __atomic_load_n(&slot_at(R, i)->got, __ATOMIC_RELAXED);
    *total = R->plan.total;
}

static void dl_release(s3x_transfer *t, s3x_part *p) { release_buf(t->ctx, (rslot *)p); }

static int dl_finish(s3x_transfer *t);
static void dl_close(s3x_transfer *t, int rc);

static const s3x_kind download_kind = {
    .name = "download",
    .part_size = sizeof(rslot),
    .feed = dl_feed,
    .prepare = dl_prepare,
    .check = dl_check,
    .failed = dl_failed,
    .take = dl_take,
    .tick = dl_tick,
    .more = dl_more,
    .moving = dl_moving,
    .release = dl_release,
    .finish = dl_finish,
    .close = dl_close,
};

static int checksum_mismatch(drun *R, const char *got) {
    return s3x_seterr(S3X_ECHECKSUM, "s3://%s/%s: %s is %s but the bytes received give %s", R->bucket, R->key,
                      R->checksum_hdr_name, R->checksum_value, got);
}

/* Compares a full-object checksum the server sent with what arrived.
 * Checked: the whole object in the probe (any destination); several
 * ranges into memory or a stream (the checksum from a HEAD, the bytes
 * hashed in order); several ranges into a file when the checksum is a CRC
 * (file_checksum, once the writer is done). Not checked: a SHA-256 of
 * several ranges into a file, whose ranges reach the disk out of order and
 * are not in memory in order anywhere (a SHA-256 cannot be made from the
 * ranges' own, so it would mean reading the file back: a second pass over
 * every byte); and composite "-N" checksums of multipart
 * uploads, which are checksums of the parts' checksums and need the
 * upload's part boundaries: x-amz-mp-parts-count gives only their number,
 * and learning each part's size takes a request per part (PartNumber GETs
 * or HEADs), up to 10,000, against parts whose sizes need not match the
 * download's ranges. */
static int validate_checksum(drun *R) {
    if (!R->hashing || !R->checksum_value) return 0;
    if (R->hashing == HASH_PROBE && !R->whole_in_first) return 0;
    if (R->hashing == HASH_IN_ORDER && R->kind == DST_FILE) return 0; /* file_checksum */
    if (R->hashing == HASH_IN_ORDER && R->kind == DST_MEM)
        s3x_hasher_update(&R->hasher, R->mem, (size_t)R->plan.total);
    char got[48];
    s3x_hasher_final_b64(&R->hasher, got);
    R->hashing = HASH_NONE;
    return strcmp(got, R->checksum_value) ? checksum_mismatch(R, got) : 0;
}

/* A range's CRC from the file itself, for a range the hook could not hash
 * (out of memory, or its bytes not in order). 0 or -1 (thread error set). */
static int crc_from_file(drun *R, int kind, int64_t off, int64_t len, uint32_t *out) {
    char *buf = malloc(S3X_WRITER_BUF);
    if (!buf) return s3x_seterr(S3X_ENOMEM, "out of memory");
    uint32_t c = 0;
    int rc = 0;
    while (len > 0 && !rc) {
        size_t want = len > (int64_t)S3X_WRITER_BUF ? S3X_WRITER_BUF : (size_t)len;
        ssize_t n = pread(R->fd, buf, want, (off_t)off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            int er = n < 0 ? errno : 0;
            rc = s3x_seterr_sys(S3X_EIO, er, "reading %s back for its checksum failed: %s", R->tmp.data,
                                er ? strerror(er) : "it ends early");
            break;
        }
        c = kind == S3X_CHECKSUM_CRC32C ? s3x_crc32c(c, buf, (size_t)n) : s3x_crc32(c, buf, (size_t)n);
        off += n;
        len -= n;
    }
    free(buf);
    *out = c;
    return rc;
}

/* Several ranges into a file, once every write is done: the object's CRC
 * from the ranges' CRCs, in order, against the one the HEAD gave. */
static int file_checksum(drun *R) {
    int want = atomic_load(&R->fcrc);
    if (R->hashing != HASH_IN_ORDER || (want != FCRC_CRC32C && want != FCRC_CRC32)) return 0;
    int kind = want == FCRC_CRC32C ? S3X_CHECKSUM_CRC32C : S3X_CHECKSUM_CRC32;
    int bit = want == FCRC_CRC32C ? RCRC_C32C : RCRC_C32;
    uint32_t crc = 0;
    for (int64_t i = 0; i < R->plan.nranges; i++) {
        s3x_dlask a = s3x_dlplan_range(&R->plan, i);
        int64_t n = a.last - a.first + 1;
        uint32_t c = 0;
        if (!R->rcrc_oom && i < R->nrcrc && (R->rcrc[i].has & bit) && R->rcrc[i].len == n) {
            c = bit == RCRC_C32C ? R->rcrc[i].c32c : R->rcrc[i].c32;
        } else if (crc_from_file(R, kind, a.first, n, &c)) {
            return -1;
        }
        crc = i ? s3x_crc_combine(kind, crc, c, n) : c;
    }
    char got[48];
    s3x_crc_b64(crc, got);
    R->hashing = HASH_NONE;
    return strcmp(got, R->checksum_value) ? checksum_mismatch(R, got) : 0;
}

/* The memory for a stream's in-order buffers: concurrency + 1 of them, or
 * what the memory limit holds (a batch's shared budget: one, the rest
 * waited for). */
static int setup_stream_pool(drun *R, int64_t *c) {
    s3x_xfer *x = R->x;
    int64_t limit = x->params[S3X_PARAM_MEMORY_LIMIT];
    int64_t nbuf = *c + 1;
    if (limit > 0) {
        if (limit < R->part_size)
            return s3x_seterr(S3X_ENOMEM, "memory_limit %" PRId64 " cannot hold one %" PRId64
                              "-byte range buffer; lower part_size or raise memory_limit", limit, R->part_size);
        if (limit / R->part_size < nbuf) nbuf = limit / R->part_size;
    }
    if (x->batched) return 0;
    if (!x->pool_ready || x->pool.kind != (int)x->params[S3X_PARAM_POOL]) {
        if (x->pool_ready) s3x_pool_release(&x->pool);
        s3x_pool_init(&x->pool, (int)x->params[S3X_PARAM_POOL], (size_t)R->part_size, (int)nbuf);
        x->pool_ready = 1;
    }
    s3x_pool_set_size(&x->pool, (size_t)R->part_size);
    /* Every pool kind is held to the memory limit here: reordering must
     * not grow memory, whatever the pool. */
    s3x_pool_set_limit(&x->pool, (int)nbuf);
    s3x_pool_reset_counters(&x->pool);
    if (*c > nbuf) *c = nbuf;
    return 0;
}

/* kind.finish: every range is in. The bytes must be all there (whatever
 * the destination: a stream or a buffer that ends short must not look like
 * success) and match the object's checksum; a file is synced, given its
 * mode and renamed into place. */
static void wake_loop(void *client) { s3x_http_wakeup(client); }

static int dl_finish(s3x_transfer *t) {
    drun *R = t->ctx;
    int rc = 0;
    s3x_result *res = R->x->res;
    if (R->kind == DST_FILE && R->ending) {
        /* The writer thread writes what is queued and fsyncs; the loop goes
         * on with other transfers meanwhile and is woken when it is done. */
        if (!s3x_writer_ended(R->writer)) return 2;
        s3x_writer_stats ws;
        int e = s3x_writer_finish(R->writer, &ws);
        R->writer = NULL;
        res->writeback_calls = ws.writeback_calls;
        res->fsyncs += ws.fsyncs;
        if (e) return s3x_seterr_errno(S3X_EIO, e, "writing %s failed", R->path);
        /* The bytes on disk are the ones hashed: checked before the rename,
         * so a mismatch leaves no file behind (dl_close removes it). */
        if (file_checksum(R)) return -1;
        /* A filesystem without Unix modes may refuse: the file then stays at
         * the owner-only mode, which is the safe side. */
        if (R->replacing) (void)fchmod(R->fd, R->keep_mode);
        int fd = R->fd;
        R->fd = -1;
        if (close(fd) != 0) return s3x_seterr_errno(S3X_EIO, errno, "writing %s failed", R->path);
        if (rename(R->tmp.data, R->path) != 0)
            return s3x_seterr_errno(S3X_EIO, errno, "cannot rename onto %s", R->path);
        R->renamed = 1;
        res->sync_seconds = s3x_now() - R->t_end;
        return 0;
    }
    if (s3x_dlplan_finish(&R->plan, R->kind == DST_STREAM ? R->delivered : R->bytes_done))
        rc = s3x_seterr(s3x_error_last()->code, "GetObject s3://%s/%s: %s", R->bucket, R->key, s3x_error_last()->message);
    if (!rc) rc = validate_checksum(R);
    if (rc || R->kind != DST_FILE) return rc;
    /* Every write must be done before the file is synced and renamed. */
    for (int i = 0; i < R->nslots + 1; i++) {
        rslot *p = slot_at(R, i);
        if (p->stage) s3x_writer_release(R->writer, p->stage);
        p->stage = NULL;
    }
    /* Durable: most of the file is on its way to the disk already (the
     * writer started its writeback while it wrote), so the fsync is short;
     * it runs on the writer thread all the same, so that a batch's other
     * transfers never wait for this file's disk. */
    R->t_end = s3x_now();
    R->ending = 1;
    s3x_writer_end_async(R->writer, R->x->params[S3X_PARAM_DURABLE] != 0, wake_loop, R->x->client);
    return 2;
}

/* kind.close: the result, then everything the run holds; a file download
 * that did not finish removes its temporary file. */
static void dl_close(s3x_transfer *t, int rc) {
    drun *R = t->ctx;
    s3x_xfer *x = R->x;
    (void)rc;
    x->res->bytes = R->bytes_done;
    if (R->etag) snprintf(x->res->etag, sizeof x->res->etag, "%s", R->etag);
    if (R->t.parts) {
        for (int i = 0; i < R->nslots + 1; i++) {
            rslot *p = slot_at(R, i);
            if (p->stage) s3x_writer_release(R->writer, p->stage);
            p->stage = NULL;
            s3x_saved_error_free(&p->perr);
        }
        s3x_sched_remove(R->t.sched, &R->t);
    }
    if (R->writer) (void)s3x_writer_finish(R->writer, NULL);
    if (R->kind == DST_FILE) {
        if (R->fd >= 0) close(R->fd);
        if (!R->renamed && R->tmp.data) unlink(R->tmp.data);
        s3x_buf_free(&R->tmp);
    }
    free(R->etag);
    free(R->rcrc);
    free(R->checksum_hdr_name);
    free(R->checksum_value);
    s3x_hasher_cleanup(&R->hasher);
    s3x_xfer_end(x);
    if (x->pool_ready && x->pool.kind == S3X_POOL_MALLOC) s3x_pool_release(&x->pool);
    free(R);
}

/* Adds the download to S: c ranges at once, one side part for the HEAD,
 * and the probe (the first range, alone) queued. */
static int open_download(s3x_sched *S, drun *R) {
    s3x_xfer *x = R->x;
    R->part_size = x->params[S3X_PARAM_PART_SIZE];
    x->res->part_size = R->part_size;
    x->res->receive_threads = s3x_client_receive_threads(x->client);
    int64_t c = x->params[S3X_PARAM_CONCURRENCY];
    int64_t capacity = R->kind != DST_MEM || R->mem_cap > (size_t)INT64_MAX ? -1 : (int64_t)R->mem_cap;
    int rc = s3x_dlplan_init(&R->plan, R->part_size, capacity);
    if (!rc && R->kind == DST_STREAM) rc = setup_stream_pool(R, &c);
    if (!rc) {
        R->nslots = (int)c;
        R->t.what = "download of";
        R->t.bucket = R->bucket;
        R->t.key = R->key;
        rc = s3x_sched_add(S, &R->t, &download_kind, R, x, R->nslots, 1);
    }
    rslot *s = rc ? NULL : slot_at(R, 0);
    if (s) {
        s->index = 0;
        s->ask = s3x_dlplan_probe(&R->plan);
        s->offset = 0;
        s->size = -1;
        if (R->kind == DST_STREAM) {
            int oom = 0;
            s3x_pool_set_size(x->bufs, (size_t)R->part_size);
            s->buf = s3x_pool_get(x->bufs, &oom);
            s->buf_size = x->bufs->buf_size;
            if (!s->buf) rc = s3x_seterr(S3X_ENOMEM, "out of memory allocating a range buffer");
        }
        if (!rc) s->base.state = S3X_PART_QUEUED;
    }
    return rc;
}

static drun *new_run(s3x_xfer *x, const char *bucket, const char *key, int kind) {
    drun *R = calloc(1, sizeof *R);
    if (!R) {
        s3x_seterr(S3X_ENOMEM, "out of memory");
        return NULL;
    }
    R->x = x;
    R->bucket = bucket;
    R->key = key;
    R->kind = kind;
    R->fd = -1;
    R->out_fd = -1;
    R->t.ctx = R;
    return R;
}

/* Opens R (set up by the caller) on S; on failure everything is undone. */
static int open_or_close(s3x_sched *S, drun *R, s3x_transfer **out) {
    int rc = open_download(S, R);
    if (rc) {
        dl_close(&R->t, rc);
        return rc;
    }
    *out = &R->t;
    return 0;
}

/* The temporary file beside path (so the rename is atomic), after checking
 * that path can be written. */
static int make_temp_file(s3x_sched *S, drun *R, const char *path) {
    if (!path || !*path) return s3x_seterr(S3X_EINVAL, "path is empty");
    R->path = path;
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return s3x_seterr_sys(S3X_EIO, EISDIR, "%s is a directory", path);
        if (S_ISREG(st.st_mode)) {
            R->replacing = 1;
            R->keep_mode = st.st_mode & 0777;
        }
    }
    char *copy = strdup(path);
    if (!copy) return s3x_seterr(S3X_ENOMEM, "out of memory");
    const char *dir = dirname(copy);
    int rc = 0;
    int dir_rc = stat(dir, &st);
    if (dir_rc != 0)
        rc = s3x_seterr_sys(S3X_EIO, errno, "cannot download to %s: directory %s does not exist", path, dir);
    else if (!S_ISDIR(st.st_mode))
        rc = s3x_seterr_sys(S3X_EIO, ENOTDIR, "cannot download to %s: %s is not a directory", path, dir);
    else if (access(dir, W_OK) != 0)
        rc = s3x_seterr_sys(S3X_EIO, errno, "cannot download to %s: directory %s is not writable", path, dir);
    free(copy);
    if (rc) return rc;
    /* The counter tells apart the temporary files of one process's
     * downloads started within the same clock tick (a batch). */
    static atomic_uint seq;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    /* The name stays within NAME_MAX whatever the target's length: a long
     * name keeps only its first 180 bytes in the temporary one. */
    const char *slash = strrchr(path, '/');
    size_t base_len = strlen(slash ? slash + 1 : path);
    int keep = (int)(strlen(path) - (base_len > 180 ? base_len - 180 : 0));
    if (s3x_buf_printf(&R->tmp, "%.*s.s3xfer-%ld-%lx-%x.part", keep, path, (long)getpid(), (unsigned long)ts.tv_nsec,
                       atomic_fetch_add(&seq, 1u)))
        return s3x_seterr(S3X_ENOMEM, "out of memory");
    /* A file that replaces another keeps its permission bits (a 0600 file
     * must not come back 0644), and until then the temporary file is
     * readable by its owner only, so the new contents of a private file are
     * never open to others on the way. A new file gets the umask's default
     * mode, as any program's new file would. Set-id and sticky bits are not
     * carried over: downloaded bytes should not become a set-id program. */
    R->fd = open(R->tmp.data, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, R->replacing ? 0600 : 0666);
    if (R->fd < 0) {
        rc = s3x_seterr_errno(S3X_EIO, errno, "cannot create %s", R->tmp.data);
        s3x_buf_free(&R->tmp);
        return rc;
    }
    /* A batch has many file downloads at once: each queues less. Durable:
     * writeback starts while the ranges arrive (filewriter.h), so the fsync
     * before the rename has little left to wait for. */
    int64_t window = R->x->params[S3X_PARAM_DURABLE] ? S3X_WRITEBACK_WINDOW : 0;
    /* A batch's file downloads share its scheduler's writer threads (a
     * single download keeps a thread of its own, as the pool would). */
    s3x_wpool *pool = NULL;
    if (R->x->batched) {
        if (!S->wpool) {
            int n = S->max_conns < S3X_WPOOL_MAX_THREADS ? S->max_conns : S3X_WPOOL_MAX_THREADS;
            S->wpool = s3x_wpool_new(n);
        }
        pool = S->wpool; /* NULL when out of memory: a private one is tried */
    }
    int e = s3x_writer_start(&R->writer, pool, R->fd, R->x->batched ? 8 : 32, window);
    if (e) return s3x_seterr(S3X_ENOMEM, "cannot start the file writer: %s", strerror(e));
    s3x_writer_set_hook(R->writer, hash_range, R);
    return 0;
}

int s3x_download_open_file(s3x_sched *S, s3x_xfer *x, const char *bucket, const char *key, const char *path,
                           s3x_transfer **out) {
    int rc = s3x_check_target(bucket, key);
    drun *R = rc ? NULL : new_run(x, bucket, key, DST_FILE);
    if (!rc && !R) rc = S3X_ENOMEM;
    if (!rc && (rc = make_temp_file(S, R, path))) dl_close(&R->t, rc);
    else if (!rc) return open_or_close(S, R, out);
    if (!R) s3x_xfer_end(x);
    return rc;
}

int s3x_download_open_memory(s3x_sched *S, s3x_xfer *x, const char *bucket, const char *key, void *buf,
                             size_t cap, s3x_transfer **out) {
    int rc = s3x_check_target(bucket, key);
    if (!rc && !buf && cap) rc = s3x_seterr(S3X_EINVAL, "buf is NULL");
    drun *R = rc ? NULL : new_run(x, bucket, key, DST_MEM);
    if (!R) {
        s3x_xfer_end(x);
        return rc ? rc : S3X_ENOMEM;
    }
    R->mem = buf;
    R->mem_cap = cap;
    return open_or_close(S, R, out);
}

static int fd_writer(const void *data, size_t len, void *payload) {
    drun *R = payload;
    const char *p = data;
    while (len) {
        ssize_t w = write(R->out_fd, p, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            R->out_errno = errno;
            return 1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int s3x_download_open_stream(s3x_sched *S, s3x_xfer *x, const char *bucket, const char *key, int fd,
                             s3x_write_fn write_fn, void *payload, s3x_transfer **out) {
    int rc = s3x_check_target(bucket, key);
    if (!rc && !write_fn && fd < 0) rc = s3x_seterr(S3X_EINVAL, "invalid file descriptor %d", fd);
    drun *R = rc ? NULL : new_run(x, bucket, key, DST_STREAM);
    if (!R) {
        s3x_xfer_end(x);
        return rc ? rc : S3X_ENOMEM;
    }
    if (write_fn) {
        R->write_fn = write_fn;
        R->write_payload = payload;
    } else {
        R->out_fd = fd;
        R->write_fn = fd_writer;
        R->write_payload = R;
    }
    return open_or_close(S, R, out);
}

/* ---- the blocking calls: one transfer on a scheduler of its own -------------------- */

typedef struct open_args {
    int how; /* 0 file, 1 memory, 2 stream */
    const char *path;
    void *buf;
    size_t cap;
    int fd;
    s3x_write_fn write_fn;
    void *payload;
} open_args;

static int run_one(s3x_download *d, const char *bucket, const char *key, const open_args *a, s3x_result *result) {
    if (!d) return s3x_seterr(S3X_EINVAL, "download manager is NULL");
    s3x_xfer *x = &d->x;
    s3x_xfer_begin(x, result);
    s3x_sched S;
    s3x_sched_init(&S, x->client, (int)x->params[S3X_PARAM_CONCURRENCY]);
    s3x_transfer *t = NULL;
    int rc = a->how == 0   ? s3x_download_open_file(&S, x, bucket, key, a->path, &t)
             : a->how == 1 ? s3x_download_open_memory(&S, x, bucket, key, a->buf, a->cap, &t)
                           : s3x_download_open_stream(&S, x, bucket, key, a->fd, a->write_fn, a->payload, &t);
    if (rc) return rc;
    if (s3x_sched_run(&S) != 0) rc = s3x_error_restore(&x->err);
    t->kind->close(t, rc);
    s3x_sched_fini(&S);
    return rc;
}

int s3x_download_file(s3x_download *d, const char *bucket, const char *key, const char *path, s3x_result *result) {
    s3x_result local;
    open_args a = {.how = 0, .path = path};
    return run_one(d, bucket, key, &a, result ? result : &local);
}

int s3x_download_memory(s3x_download *d, const char *bucket, const char *key, void *buf, size_t cap, size_t *len,
                        s3x_result *result) {
    s3x_result local;
    if (!result) result = &local;
    open_args a = {.how = 1, .buf = buf, .cap = cap};
    int rc = run_one(d, bucket, key, &a, result);
    if (len) *len = rc ? 0 : (size_t)result->bytes;
    return rc;
}

int s3x_download_stream(s3x_download *d, const char *bucket, const char *key, s3x_write_fn write_fn,
                        s3x_result *result, void *payload) {
    if (!write_fn) return s3x_seterr(S3X_EINVAL, "write_fn is NULL");
    s3x_result local;
    open_args a = {.how = 2, .fd = -1, .write_fn = write_fn, .payload = payload};
    return run_one(d, bucket, key, &a, result ? result : &local);
}

int s3x_download_fd(s3x_download *d, const char *bucket, const char *key, int fd, s3x_result *result) {
    if (fd < 0) return s3x_seterr(S3X_EINVAL, "invalid file descriptor %d", fd);
    s3x_result local;
    open_args a = {.how = 2, .fd = fd};
    return run_one(d, bucket, key, &a, result ? result : &local);
}
