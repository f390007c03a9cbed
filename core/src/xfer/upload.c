/* The upload manager: a multipart upload with up to `concurrency` parts in
 * flight on the client's multi loop, parts read into pool buffers (BUFFERED)
 * or read in place at their offsets while curl sends them (UNBUFFERED). */
#include "checksum.h"
#include "bytecopy.h"
#include <openssl/evp.h>
#include "error.h"
#include "params_internal.h"
#include "requests.h"
#include "s3xml.h"
#include "kinds.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MiB (1024LL * 1024LL)
#define GiB (1024LL * MiB)
#define MAX_PARTS 10000
#define MIN_PART (5 * MiB)
#define MAX_PART (5 * GiB)
#define MAX_OBJECT (5 * 1024 * GiB)
#define GROWTH_EVERY 2000 /* unknown sizes: the part size doubles every 2000 parts */
#define SCRATCH (1 * MiB)

struct s3x_upload {
    s3x_xfer x;
};

enum src_kind { SRC_FILE, SRC_MEM, SRC_STREAM };

typedef struct source {
    int kind;
    int fd;                   /* SRC_FILE, or SRC_STREAM from an fd */
    int own_fd;               /* fd was opened here: closed with the run */
    const char *path;
    const char *mem;
    int64_t size;             /* -1 for streams */
    struct stat st0;          /* SRC_FILE: as it was at the start */
    s3x_read_fn read_fn;      /* SRC_STREAM */
    void *read_payload;
    int eof;                  /* SRC_STREAM reached its end */
    int64_t consumed;         /* SRC_STREAM bytes read so far */
} source;

/* One part of the upload: which bytes of the source, and where they are
 * while sent. Its request, attempts and state are the scheduler's (base). */
typedef struct slot {
    s3x_part base;
    int part_number;
    int64_t offset, size;
    char *buf;                /* pool buffer (BUFFERED) */
    size_t buf_size;
    int64_t pos;              /* UNBUFFERED read position within the part */
    char checksum[48];
    char sha_hex[65];
    s3x_req_num pn;
} slot;

typedef struct done_part {
    char *etag;
    char checksum[48];
    int64_t size;
} done_part;

typedef struct run {
    s3x_xfer *x;
    const char *bucket, *key;
    source src;
    int buffered;
    int checksum;
    int full_object;          /* a multipart upload's checksum is the whole object's CRC (checksum_type) */
    char full_checksum[48];   /* ... made from the parts' CRCs for the completion */
    int trailer;              /* the checksum goes in an aws-chunked trailer, computed while sending */
    int signed_payload;
    int64_t part_size;        /* current part size */
    int64_t next_offset;      /* next byte of the source to assign to a part */
    int next_part;            /* next part number to assign */
    int no_more_parts;
    int64_t bytes_done;
    char *upload_id;
    done_part *parts;         /* [parts_cap] */
    int parts_cap;
    int max_part_done;
    s3x_transfer t;           /* this upload on the scheduler: its parts are slots */
    int waiting;              /* the next part is waiting for a buffer */
    int single;               /* one PutObject, no multipart upload */
    /* The multipart upload's own requests run as the transfer's side part,
     * on the loop like its parts: CreateMultipartUpload before any part
     * starts (parts are held meanwhile), CompleteMultipartUpload after the
     * last one. */
    int side_op;              /* SIDE_* */
    int phase;                /* PHASE_* */
    time_t create_started;
    int create_maybe_twice;   /* an attempt broke after it was sent: another upload may exist */
    char *complete_body;
    size_t complete_len;
    char *scratch;            /* UNBUFFERED checksum pre-pass */
} run;

enum { SIDE_NONE, SIDE_CREATE, SIDE_COMPLETE };
enum { PHASE_PARTS, PHASE_CREATING, PHASE_COMPLETING, PHASE_COMPLETED };

/* ---- handle ------------------------------------------------------------------- */

int s3x_upload_new(s3x_upload **out, s3x_client *client) {
    if (!out) return s3x_seterr(S3X_EINVAL, "out is NULL");
    *out = NULL;
    s3x_upload *u = calloc(1, sizeof *u);
    if (!u) return s3x_seterr(S3X_ENOMEM, "out of memory");
    int rc = s3x_xfer_init(&u->x, client, S3X_SCOPE_UPLOAD);
    if (rc) {
        free(u);
        return rc;
    }
    *out = u;
    return 0;
}

void s3x_upload_free(s3x_upload *u) {
    if (!u) return;
    s3x_xfer_destroy(&u->x);
    free(u);
}

int s3x_upload_set(s3x_upload *u, s3x_param p, int64_t v) {
    if (!u) return s3x_seterr(S3X_EINVAL, "upload manager is NULL");
    return s3x_xfer_set(&u->x, p, v);
}

int s3x_upload_get(const s3x_upload *u, s3x_param p, int64_t *v) {
    if (!u) return s3x_seterr(S3X_EINVAL, "upload manager is NULL");
    return s3x_xfer_get(&u->x, p, v);
}

void s3x_upload_set_progress(s3x_upload *u, s3x_progress_fn fn, void *payload) {
    if (!u) return;
    u->x.progress = fn;
    u->x.progress_payload = payload;
}

void s3x_upload_cancel(s3x_upload *u) {
    if (!u) return;
    atomic_store(&u->x.cancel, 1);
    s3x_http_wakeup(u->x.client);
}

static int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

static int64_t plan_part_size(const s3x_xfer *x, int64_t size) {
    int64_t p = x->params[S3X_PARAM_PART_SIZE];
    if (size < 0) {
        int64_t hint = x->params[S3X_PARAM_SIZE_HINT];
        if (hint > 0) size = hint;
        else return p;
    }
    int64_t need = size / MAX_PARTS + (size % MAX_PARTS != 0); /* no overflow near INT64_MAX */
    if (need > p) p = round_up(need, MiB);
    return p;
}

int64_t s3x_upload_plan_part_size(const s3x_upload *u, int64_t size) { return plan_part_size(&u->x, size); }

/* Part size of part n of a stream of unknown size: doubles every GROWTH_EVERY
 * parts, never above 5 GiB nor above what the memory limit can hold. With a
 * size hint the parts already fit the hint, so growth only starts once the
 * stream has gone past it. */
static int64_t stream_part_size(const run *R, int n) {
    int64_t p = R->part_size;
    int64_t hint = R->x->params[S3X_PARAM_SIZE_HINT];
    int first = 1;
    if (hint > 0) {
        int64_t hint_parts = hint / p + (hint % p != 0);
        first = hint_parts >= MAX_PARTS ? MAX_PARTS : (int)hint_parts + 1;
    }
    int steps = n < first ? 0 : (n - first) / GROWTH_EVERY + (hint > 0 ? 1 : 0);
    int64_t limit = R->x->params[S3X_PARAM_MEMORY_LIMIT];
    int64_t c = R->x->params[S3X_PARAM_CONCURRENCY];
    for (int i = 0; i < steps; i++) {
        int64_t q = p * 2;
        if (q > MAX_PART) break;
        if (limit > 0 && (c + 1) * q > limit) break;
        p = q;
    }
    return p;
}

/* ---- reading ------------------------------------------------------------------- */

static int read_full_at(int fd, char *dst, size_t n, int64_t off, const char *path) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, dst + got, n - got, (off_t)(off + (int64_t)got));
        if (r < 0) {
            if (errno == EINTR) continue;
            return s3x_seterr_errno(S3X_EIO, errno, "reading %s at offset %" PRId64, path, off + (int64_t)got);
        }
        if (r == 0)
            return s3x_seterr(S3X_ECHANGED, "%s is shorter than when the upload started (ends before offset %" PRId64 ")",
                              path, off + (int64_t)got);
        got += (size_t)r;
    }
    return 0;
}

/* Fills up to n bytes from a stream; returns bytes read (short only at EOF) or <0. */
static int64_t read_stream(source *s, char *dst, size_t n) {
    size_t got = 0;
    while (got < n && !s->eof) {
        int64_t r;
        if (s->read_fn) {
            r = s->read_fn(dst + got, n - got, s->read_payload);
        } else {
            ssize_t k = read(s->fd, dst + got, n - got);
            if (k < 0 && errno == EINTR) continue;
            r = k;
        }
        if (r < 0) {
            if (s->read_fn) return s3x_seterr(S3X_EIO, "the stream's read callback failed (returned %" PRId64 ")", r);
            return s3x_seterr_errno(S3X_EIO, errno, "reading the input stream");
        }
        if (r == 0) s->eof = 1;
        got += (size_t)r;
    }
    s->consumed += (int64_t)got;
    return (int64_t)got;
}

static int64_t unbuffered_pread(run *R, slot *s, void *dst, size_t cap);

static run *run_of(const s3x_part *p) { return p->t->ctx; }
static slot *slot_at(const run *R, int i) { return (slot *)s3x_transfer_part(&R->t, i); }

/* curl's body source for UNBUFFERED file parts: pread in place. */
static int64_t unbuffered_read(void *dst, size_t cap, void *payload) {
    slot *s = payload;
    run *R = run_of(&s->base);
    double t = s3x_now();
    int64_t n = unbuffered_pread(R, s, dst, cap);
    R->x->res->io_seconds += s3x_now() - t;
    return n;
}

static int64_t unbuffered_pread(run *R, slot *s, void *dst, size_t cap) {
    int64_t left = s->size - s->pos;
    if (left <= 0) return 0;
    if ((int64_t)cap > left) cap = (size_t)left;
    for (;;) {
        ssize_t n = pread(R->src.fd, dst, cap, (off_t)(s->offset + s->pos));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1; /* the file shrank or failed: the request fails */
        s->pos += n;
        return n;
    }
}

/* Checksum (and SHA-256 for signed payloads) of a part's bytes. */
static int digest_part(run *R, slot *s, const char *data) {
    s->checksum[0] = '\0';
    s->sha_hex[0] = '\0';
    int want_sum = R->checksum != S3X_CHECKSUM_NONE && !R->trailer;
    int want_sha = R->signed_payload;
    if (!want_sum && !want_sha) return 0;
    s3x_hasher h, sha;
    if (want_sum && s3x_hasher_init(&h, R->checksum)) return s3x_seterr(S3X_ENOMEM, "checksum init failed");
    if (want_sha && s3x_hasher_init(&sha, S3X_CHECKSUM_SHA256)) {
        if (want_sum) s3x_hasher_cleanup(&h);
        return s3x_seterr(S3X_ENOMEM, "checksum init failed");
    }
    int rc = 0;
    if (data) {
        if (want_sum) s3x_hasher_update(&h, data, (size_t)s->size);
        if (want_sha) s3x_hasher_update(&sha, data, (size_t)s->size);
    } else {
        /* UNBUFFERED: one pre-pass over the part through a small scratch buffer. */
        if (!R->scratch && !(R->scratch = malloc(SCRATCH))) rc = s3x_seterr(S3X_ENOMEM, "out of memory");
        for (int64_t off = 0; !rc && off < s->size; off += SCRATCH) {
            size_t n = (size_t)((s->size - off) < SCRATCH ? (s->size - off) : SCRATCH);
            rc = read_full_at(R->src.fd, R->scratch, n, s->offset + off, R->src.path);
            if (!rc && want_sum) s3x_hasher_update(&h, R->scratch, n);
            if (!rc && want_sha) s3x_hasher_update(&sha, R->scratch, n);
        }
    }
    if (want_sum) s3x_hasher_final_b64(&h, s->checksum);
    if (want_sha) {
        unsigned char d[32];
        unsigned int dl = 0;
        EVP_DigestFinal_ex(sha.md, d, &dl);
        s3x_hex32(d, s->sha_hex);
        s3x_hasher_cleanup(&sha);
    }
    return rc;
}

/* ---- requests ------------------------------------------------------------------- */

static void slot_release_buffer(run *R, slot *s) {
    if (s->buf) {
        s3x_pool_put(R->x->bufs, s->buf, s->buf_size);
        s->buf = NULL;
    }
}

static int single_put(const run *R) { return R->upload_id == NULL; }

static int prepare_side(run *R, s3x_http_req *r);
static int take_side(run *R, s3x_http_req *r);

/* kind.prepare: fills the request of a part whose number, offset, size and
 * bytes are set. */
static int up_prepare(s3x_transfer *t, s3x_part *p) {
    run *R = t->ctx;
    slot *s = (slot *)p;
    s3x_http_req *r = &p->req;
    if (p->side) {
        /* A cancel while CreateMultipartUpload is on the wire waits for its
         * answer, so the upload it may create is known and aborted. */
        p->drain = R->side_op == SIDE_CREATE;
        return prepare_side(R, r);
    }
    s3x_req_checksum ck = {NULL, NULL, NULL};
    if (R->checksum != S3X_CHECKSUM_NONE) {
        if (!R->trailer) ck = (s3x_req_checksum){s3x_checksum_header(R->checksum), s->checksum, NULL};
        if (single_put(R)) ck.algorithm = s3x_checksum_algorithm(R->checksum);
    }
    int rc = single_put(R) ? s3x_req_put_object(r, R->bucket, R->key, NULL, &ck)
                           : s3x_req_upload_part(r, R->bucket, R->key, R->upload_id, s->part_number, s->pn, &ck);
    if (rc) return rc;
    r->trailer_kind = R->trailer ? R->checksum : 0;
    r->payload_hash = R->signed_payload ? s->sha_hex : S3X_UNSIGNED_PAYLOAD;
    if (R->buffered) {
        r->body = s->buf;
        r->body_len = (size_t)s->size;
    } else if (R->src.kind == SRC_MEM) {
        r->body = R->src.mem + s->offset;
        r->body_len = (size_t)s->size;
    } else {
        s->pos = 0;
        r->read_fn = unbuffered_read;
        r->read_payload = s;
        r->body_size = s->size;
    }
    return 0;
}

/* kind.take: a part the server accepted: its ETag and checksum for the
 * completion. */
static int up_take(s3x_transfer *t, s3x_part *p) {
    run *R = t->ctx;
    slot *s = (slot *)p;
    s3x_http_req *r = &p->req;
    if (p->side) return take_side(R, r) ? -1 : S3X_PART_FREE;
    done_part *d = &R->parts[s->part_number - 1];
    free(d->etag);
    d->etag = strdup(r->etag ? r->etag : "");
    memcpy(d->checksum, R->trailer ? r->chunked.value : s->checksum, sizeof d->checksum);
    d->size = s->size;
    if (single_put(R) && r->etag) snprintf(R->x->res->etag, sizeof R->x->res->etag, "%s", r->etag);
    if (s->part_number > R->max_part_done) R->max_part_done = s->part_number;
    R->bytes_done += s->size;
    R->x->res->parts++;
    slot_release_buffer(R, s);
    s3x_xfer_progress(R->x, R->bytes_done, R->src.size);
    return S3X_PART_FREE;
}

static void up_release(s3x_transfer *t, s3x_part *p) { slot_release_buffer(t->ctx, (slot *)p); }

/* kind.hold: parts wait while the multipart upload is being created. */
static int up_hold(s3x_transfer *t) { return ((run *)t->ctx)->phase == PHASE_CREATING; }

/* kind.check: an attempt of CreateMultipartUpload that broke after it was
 * sent may have created an upload anyway (cleaned up once one succeeds). */
static int up_check(s3x_transfer *t, s3x_part *p) {
    run *R = t->ctx;
    const s3x_http_req *r = &p->req;
    if (p->side && R->side_op == SIDE_CREATE && r->curl_rc != CURLE_OK && r->curl_rc != CURLE_COULDNT_CONNECT &&
        r->curl_rc != CURLE_COULDNT_RESOLVE_HOST)
        R->create_maybe_twice = 1;
    return S3X_CHECK_JUDGE;
}

static int up_more(s3x_transfer *t) { return !((run *)t->ctx)->no_more_parts; }

static void up_moving(s3x_transfer *t, int64_t *done, int64_t *total) {
    run *R = t->ctx;
    *done = R->bytes_done;
    for (int i = 0; i < t->nparts; i++)
        if (slot_at(R, i)->base.state == S3X_PART_INFLIGHT) *done += slot_at(R, i)->base.req.bytes_out;
    *total = R->src.size;
}

/* kind.feed: assigns the next part to a free slot: reads it (BUFFERED) and
 * digests it. Returns 1 if queued, 0 if nothing to do now (no more parts,
 * or no free buffer), <0 on error (thread error set). */
static int feed_slot_io(run *R, slot *s);

static int up_feed(s3x_transfer *t, s3x_part *p) {
    run *R = t->ctx;
    double t0 = s3x_now();
    int rc = feed_slot_io(R, (slot *)p);
    R->x->res->io_seconds += s3x_now() - t0;
    return rc;
}

static int feed_slot_io(run *R, slot *s) {
    if (R->no_more_parts) return 0;
    int64_t size;
    int number = R->next_part;
    if (R->src.size >= 0) {
        if (R->next_offset >= R->src.size && !(R->src.size == 0 && number == 1)) {
            R->no_more_parts = 1;
            return 0;
        }
        size = R->src.size - R->next_offset;
        if (size > R->part_size) size = R->part_size;
    } else {
        if (R->src.eof) {
            R->no_more_parts = 1;
            return 0;
        }
        size = stream_part_size(R, number);
        if (number > MAX_PARTS) {
            return s3x_seterr(S3X_ELIMIT, "the stream needs more than %d parts at up to %" PRId64
                              " bytes each; set a size hint or a larger part size", MAX_PARTS, size);
        }
    }
    if (R->buffered) {
        s3x_pool *p = R->x->bufs;
        int64_t want = R->src.size >= 0 ? R->part_size : size;
        if ((int64_t)p->buf_size != want) s3x_pool_set_size(p, (size_t)want);
        int oom = 0;
        char *b = s3x_pool_get(p, &oom);
        if (!b) {
            if (oom) return s3x_seterr(S3X_ENOMEM, "out of memory allocating a %" PRId64 "-byte part buffer", size);
            if (!R->waiting) p->waits++; /* once per part that has to wait */
            R->waiting = 1;
            return 0;
        }
        R->waiting = 0;
        s->buf = b;
        s->buf_size = p->buf_size;
        int rc = 0;
        if (R->src.kind == SRC_FILE) {
            rc = read_full_at(R->src.fd, b, (size_t)size, R->next_offset, R->src.path);
        } else if (R->src.kind == SRC_MEM) {
            s3x_bytes_copy(b, R->src.mem + R->next_offset, (size_t)size);
        } else {
            int64_t got = read_stream(&R->src, b, (size_t)size);
            if (got < 0) rc = (int)got;
            else if (got == 0 && number > 1) {
                slot_release_buffer(R, s);
                R->no_more_parts = 1;
                return 0;
            } else size = got;
        }
        if (rc) {
            slot_release_buffer(R, s);
            return rc;
        }
    }
    s->part_number = number;
    s->offset = R->next_offset;
    s->size = size;
    s->base.attempts = 0;
    int rc = digest_part(R, s, R->buffered ? s->buf : (R->src.kind == SRC_MEM ? R->src.mem + s->offset : NULL));
    if (rc) {
        slot_release_buffer(R, s);
        return rc;
    }
    R->next_part++;
    R->next_offset += size;
    if (R->src.size >= 0 && R->next_offset >= R->src.size) R->no_more_parts = 1;
    s->base.state = S3X_PART_QUEUED;
    return 1;
}

static int up_finish(s3x_transfer *t);
static void up_close(s3x_transfer *t, int rc);

static const s3x_kind upload_kind = {
    .name = "upload",
    .part_size = sizeof(slot),
    .feed = up_feed,
    .prepare = up_prepare,
    .take = up_take,
    .more = up_more,
    .moving = up_moving,
    .release = up_release,
    .check = up_check,
    .hold = up_hold,
    .finish = up_finish,
    .close = up_close,
};

/* ---- the run -------------------------------------------------------------------- */

/* Some servers create a missing bucket on the first write; an upload to a
 * bucket that does not exist must fail instead, before anything is written.
 * A client checks each bucket once (HeadBucket) and remembers it. */
static int check_bucket_exists(run *R) {
    s3x_client *c = R->x->client;
    if (s3x_client_bucket_known(c, R->bucket)) return 0;
    s3x_http_req r;
    s3x_req_new(&r);
    int rc = s3x_req_head_bucket(&r, R->bucket);
    if (!rc) rc = s3x_xfer_perform(R->x, &r);
    long status = r.status;
    s3x_http_req_reset(c, &r);
    if (rc == 0) {
        s3x_client_bucket_remember(c, R->bucket);
        return 0;
    }
    if (status == 404)
        return s3x_seterr_http(S3X_EHTTP, 404, "NoSuchBucket", NULL, "upload to s3://%s/%s: bucket %s does not exist",
                               R->bucket, R->key, R->bucket);
    if (status == 403) return 0; /* not allowed to ask: let the upload itself tell */
    return rc;
}

/* "2026-12-02T14:21:06Z" or "...06.123Z" -> seconds since the epoch, or -1. */
static time_t parse_iso8601(const char *s) {
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    if (!s || sscanf(s, "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                     &tm.tm_sec) != 6)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return timegm(&tm);
}

/* A CreateMultipartUpload whose response was lost may have created an
 * upload anyway, and its retry another one. Abort the uploads of this key
 * that started around our attempts and are not the one in use, so none is
 * left behind. (Another writer racing us on the same key within that minute
 * would lose its upload: two writers of one key race anyway.) */
static void abort_lost_uploads(run *R, time_t started) {
    s3x_upload_list *l = NULL;
    if (s3x_list_multipart_uploads(R->x->client, R->bucket, R->key, &l) != 0) return;
    time_t now = time(NULL);
    for (size_t i = 0; i < l->count; i++) {
        s3x_upload_entry *e = &l->uploads[i];
        time_t t = parse_iso8601(e->initiated);
        if (strcmp(e->key, R->key) || !strcmp(e->upload_id, R->upload_id) || t < started - 60 || t > now + 60)
            continue;
        s3x_abort_multipart_upload(R->x->client, R->bucket, R->key, e->upload_id);
    }
    s3x_upload_list_free(l);
}

/* The side part's request: CreateMultipartUpload or CompleteMultipartUpload. */
static int prepare_side(run *R, s3x_http_req *r) {
    s3x_req_new(r);
    if (R->side_op == SIDE_CREATE) {
        int rc = s3x_req_create_mpu(r, R->bucket, R->key, NULL, s3x_checksum_algorithm(R->checksum));
        if (!rc && R->full_object) rc = s3x_req_header(r, "x-amz-checksum-type", "FULL_OBJECT");
        return rc;
    }
    int rc = s3x_req_complete_mpu(r, R->bucket, R->key, R->upload_id);
    /* The whole object's CRC: the server checks it against the parts. */
    if (!rc && R->full_object) rc = s3x_req_header(r, "x-amz-checksum-type", "FULL_OBJECT");
    if (!rc && R->full_object) rc = s3x_req_header(r, s3x_checksum_header(R->checksum), R->full_checksum);
    if (rc) return rc;
    r->body = R->complete_body;
    r->body_len = R->complete_len;
    return 0;
}

/* Queues the side part for op. */
static void queue_side(run *R, int op) {
    s3x_part *p = s3x_transfer_part(&R->t, R->t.nparts);
    R->side_op = op;
    p->attempts = 0;
    p->state = S3X_PART_QUEUED;
}

/* Starts the multipart upload: its parts wait until it exists. */
static void begin_create(run *R) {
    R->phase = PHASE_CREATING;
    R->create_started = time(NULL);
    queue_side(R, SIDE_CREATE);
}

/* The side part succeeded: the upload id, or the completed object (a 200
 * whose body is a retryable <Error> was already retried by the judge). */
static int take_side(run *R, s3x_http_req *r) {
    int rc;
    if (R->side_op == SIDE_CREATE) {
        if ((rc = s3x_xml_parse_initiate(r->resp_body.data, r->resp_body.len, &R->upload_id))) return rc;
        snprintf(R->x->res->upload_id, sizeof R->x->res->upload_id, "%s", R->upload_id);
        if (R->create_maybe_twice) abort_lost_uploads(R, R->create_started);
        R->phase = PHASE_PARTS;
    } else {
        if ((rc = s3x_http_check_complete_body(r))) return rc;
        s3x_xml_complete c;
        memset(&c, 0, sizeof c);
        rc = s3x_xml_parse_complete(r->resp_body.data, r->resp_body.len, &c);
        if (!rc && c.etag) snprintf(R->x->res->etag, sizeof R->x->res->etag, "%s", c.etag);
        s3x_xml_complete_free(&c);
        if (rc) return rc;
        R->phase = PHASE_COMPLETED;
    }
    R->side_op = SIDE_NONE;
    return 0;
}

/* A checksum header's base64 CRC as a number; -1 if it is not one. */
static int crc_of_b64(const char *b64, uint32_t *out) {
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (strlen(b64) != 8 || strcmp(b64 + 6, "==") != 0) return -1;
    uint64_t bits = 0;
    for (int i = 0; i < 6; i++) {
        const char *c = strchr(tbl, b64[i]);
        if (!c || !*c) return -1;
        bits = bits << 6 | (uint64_t)(c - tbl);
    }
    if (bits & 0xf) return -1; /* 36 bits for 32: the last 4 are zero */
    *out = (uint32_t)(bits >> 4);
    return 0;
}

/* FULL_OBJECT: the whole object's CRC, from the parts' CRCs and sizes in
 * order (checksum.c combines them): no byte is hashed twice. */
static int full_object_checksum(run *R) {
    uint32_t crc = 0;
    for (int i = 0; i < R->max_part_done; i++) {
        uint32_t c;
        if (crc_of_b64(R->parts[i].checksum, &c))
            return s3x_seterr(S3X_EINTERNAL, "part %d has no %s to make the full-object checksum from", i + 1,
                              s3x_checksum_algorithm(R->checksum));
        crc = i ? s3x_crc_combine(R->checksum, crc, c, R->parts[i].size) : c;
    }
    s3x_crc_b64(crc, R->full_checksum);
    return 0;
}

/* The completion's body, from every part's ETag and checksum. */
static int build_complete(run *R) {
    int n = R->max_part_done;
    s3x_complete_part *cp = calloc((size_t)n, sizeof *cp);
    if (!cp) return s3x_seterr(S3X_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        cp[i].part_number = i + 1;
        cp[i].etag = R->parts[i].etag;
        cp[i].checksum = R->parts[i].checksum[0] ? R->parts[i].checksum : NULL;
        if (!cp[i].etag) {
            free(cp);
            return s3x_seterr(S3X_EINTERNAL, "part %d has no ETag at completion", i + 1);
        }
    }
    int rc = s3x_xml_build_complete(cp, (size_t)n, s3x_checksum_xml_name(R->checksum), &R->complete_body,
                                    &R->complete_len);
    free(cp);
    return rc ? rc : R->full_object ? full_object_checksum(R) : 0;
}

static void abort_mpu(run *R) {
    if (!R->upload_id || R->x->params[S3X_PARAM_LEAVE_PARTS_ON_ERROR]) return;
    s3x_http_req r;
    s3x_req_new(&r);
    if (s3x_req_abort_mpu(&r, R->bucket, R->key, R->upload_id)) return;
    /* Cleanup must not be stopped by the cancel that caused it. */
    int was = atomic_exchange(&R->x->cancel, 0);
    s3x_xfer_perform(R->x, &r);
    atomic_store(&R->x->cancel, was);
    s3x_http_req_reset(R->x->client, &r);
}

static int file_unchanged(run *R) {
    struct stat st;
    if (fstat(R->src.fd, &st) != 0) return s3x_seterr_errno(S3X_EIO, errno, "stat %s", R->src.path);
    if (st.st_size != R->src.st0.st_size || st.st_mtim.tv_sec != R->src.st0.st_mtim.tv_sec ||
        st.st_mtim.tv_nsec != R->src.st0.st_mtim.tv_nsec)
        return s3x_seterr(S3X_ECHANGED, "%s changed during the upload (size %lld -> %lld, or its mtime changed)",
                          R->src.path, (long long)R->src.st0.st_size, (long long)st.st_size);
    return 0;
}

static int check_memory(run *R, int single) {
    int64_t limit = R->x->params[S3X_PARAM_MEMORY_LIMIT];
    if (!R->buffered || limit <= 0) return 0;
    /* In a batch the budget is shared: a transfer needs room for one part
     * and waits for the rest. */
    int64_t c = single || R->x->batched ? 0 : R->x->params[S3X_PARAM_CONCURRENCY];
    int64_t need = (c + 1) * R->part_size;
    if (R->x->batched && need > limit)
        return s3x_seterr(S3X_ENOMEM,
                          "upload to s3://%s/%s: a part buffer of %" PRId64 " bytes cannot fit the batch's memory_limit %" PRId64
                          "; lower part_size (or multipart_threshold) or raise memory_limit",
                          R->bucket, R->key, R->part_size, limit);
    if (need > limit)
        return s3x_seterr(S3X_ENOMEM,
                          "memory_limit %" PRId64 " cannot hold concurrency+1 = %" PRId64 " part buffers of %" PRId64
                          " bytes (%" PRId64 " bytes); lower concurrency or part_size, or raise memory_limit",
                          limit, c + 1, R->part_size, need);
    return 0;
}

/* ---- the run: named steps --------------------------------------------------------- */

/* How the parts' bytes are checked and signed (header checksum, trailer or
 * signed payload), and whether they are read into buffers. */
static int choose_body(run *R) {
    s3x_xfer *x = R->x;
    R->checksum = (int)x->params[S3X_PARAM_CHECKSUM];
    int64_t signing = x->client->params[S3X_PARAM_PAYLOAD_SIGNING];
    R->signed_payload = signing == S3X_PAYLOAD_SIGNED || (signing == S3X_PAYLOAD_AUTO && R->checksum == S3X_CHECKSUM_NONE);
    int64_t location = x->params[S3X_PARAM_CHECKSUM_LOCATION];
    int can_trail = R->checksum != S3X_CHECKSUM_NONE && !R->signed_payload && s3x_chunked_kind_ok(R->checksum);
    if (location == S3X_CHECKSUM_LOCATION_TRAILER && R->checksum != S3X_CHECKSUM_NONE && !can_trail)
        return s3x_seterr(S3X_EINVAL, "checksum_location trailer needs an unsigned payload (payload_signing auto or "
                                      "unsigned) and a crc32c, crc32 or sha256 checksum; this upload has %s%s",
                          R->checksum == S3X_CHECKSUM_MD5 ? "checksum md5" : "payload_signing signed",
                          R->checksum == S3X_CHECKSUM_MD5 && R->signed_payload ? " and payload_signing signed" : "");
    R->trailer = can_trail && location != S3X_CHECKSUM_LOCATION_HEADER;
    R->full_object = x->params[S3X_PARAM_CHECKSUM_TYPE] == S3X_CHECKSUM_TYPE_FULL_OBJECT;
    if (R->full_object && R->checksum != S3X_CHECKSUM_CRC32C && R->checksum != S3X_CHECKSUM_CRC32)
        return s3x_seterr(S3X_EINVAL, "checksum_type full_object needs a crc32c or crc32 checksum (the whole "
                                      "object's is made from the parts'); this upload has checksum %s",
                          R->checksum == S3X_CHECKSUM_NONE  ? "none"
                          : R->checksum == S3X_CHECKSUM_MD5 ? "md5"
                                                            : "sha256");
    int64_t strategy = x->params[S3X_PARAM_BUFFER_STRATEGY];
    if (R->src.kind == SRC_STREAM) {
        if (strategy == S3X_BUFFER_UNBUFFERED)
            return s3x_seterr(S3X_EINVAL, "buffer_strategy unbuffered needs a seekable source (a file or memory); "
                                          "streams are always buffered");
        R->buffered = 1;
    } else {
        R->buffered = strategy == S3X_BUFFER_BUFFERED;
    }
    return 0;
}

/* The part size, and whether one PutObject is enough (*single); refuses
 * what S3 or the memory limit cannot take before any request. */
static int plan_parts(run *R, int *single) {
    const source *src = &R->src;
    R->part_size = plan_part_size(R->x, src->size);
    /* Known sizes below the threshold go in one PutObject: one part, the
     * whole object (S3 takes up to 5 GiB in one request). */
    *single = src->size >= 0 && src->size < R->x->params[S3X_PARAM_MULTIPART_THRESHOLD];
    if (*single) R->part_size = src->size;
    if (src->size > MAX_OBJECT)
        return s3x_seterr(S3X_ELIMIT, "an object of %" PRId64 " bytes is larger than S3's 5 TiB limit", src->size);
    if (R->part_size > MAX_PART)
        return s3x_seterr(S3X_ELIMIT, "an object of %" PRId64 " bytes needs parts of %" PRId64
                          " bytes, above S3's 5 GiB limit", src->size, R->part_size);
    return check_memory(R, *single);
}

/* BUFFERED: the pool holds concurrency + 1 buffers (one being read while
 * every part is in flight). */
static void setup_pool(run *R) {
    s3x_xfer *x = R->x;
    int64_t c = x->params[S3X_PARAM_CONCURRENCY];
    if (!x->pool_ready || x->pool.kind != (int)x->params[S3X_PARAM_POOL]) {
        if (x->pool_ready) s3x_pool_release(&x->pool);
        s3x_pool_init(&x->pool, (int)x->params[S3X_PARAM_POOL], (size_t)R->part_size, (int)(c + 1));
        x->pool_ready = 1;
    }
    s3x_pool_set_limit(&x->pool, (int)(c + 1));
    s3x_pool_reset_counters(&x->pool);
}

/* The upload as one transfer on the scheduler: as many parts at once as
 * the concurrency, or as the object has. */
static int setup_parts(run *R, s3x_sched *S, int single) {
    int64_t nslots = R->x->params[S3X_PARAM_CONCURRENCY];
    /* Known sizes need a record per part, streams up to S3's limit. */
    R->parts_cap = MAX_PARTS;
    if (R->src.size >= 0) {
        int64_t nparts = single || R->src.size == 0 ? 1 : (R->src.size + R->part_size - 1) / R->part_size;
        if (nslots > nparts) nslots = nparts;
        if (nparts < MAX_PARTS) R->parts_cap = (int)nparts;
    }
    R->parts = calloc((size_t)R->parts_cap, sizeof *R->parts);
    if (!R->parts) return s3x_seterr(S3X_ENOMEM, "out of memory");
    R->t.what = "upload to";
    R->t.bucket = R->bucket;
    R->t.key = R->key;
    return s3x_sched_add(S, &R->t, &upload_kind, R, R->x, (int)nslots, 1);
}

/* A stream: reads the first part; if the stream ends inside it and below
 * the threshold, one PutObject is enough (*single), else the multipart
 * upload is created. The part is queued for the scheduler. */
static int begin_stream(run *R, int *single) {
    s3x_xfer *x = R->x;
    slot *s = slot_at(R, 0);
    s3x_pool *p = x->bufs;
    s3x_pool_set_size(p, (size_t)R->part_size);
    int oom = 0;
    s->buf = s3x_pool_get(p, &oom);
    if (!s->buf) return s3x_seterr(S3X_ENOMEM, "out of memory allocating a part buffer");
    s->buf_size = p->buf_size;
    int64_t got = read_stream(&R->src, s->buf, (size_t)R->part_size);
    if (got < 0) return (int)got;
    *single = R->src.eof && got < x->params[S3X_PARAM_MULTIPART_THRESHOLD];
    int rc;
    if (!*single) begin_create(R);
    s->part_number = 1;
    s->offset = 0;
    s->size = got;
    s->base.attempts = 0;
    if ((rc = digest_part(R, s, s->buf))) return rc;
    R->next_part = 2;
    R->next_offset = got;
    if (R->src.eof) R->no_more_parts = 1;
    s->base.state = S3X_PART_QUEUED;
    return 0;
}

/* After the parts: the file must not have changed, then the completion. */
static int finish_upload(run *R, int single) {
    int rc;
    if (!single && R->phase == PHASE_COMPLETED) return 0;
    if (R->src.kind == SRC_FILE && (rc = file_unchanged(R))) return rc;
    R->x->res->bytes = R->bytes_done;
    if (single) return 0;
    if ((rc = build_complete(R))) return rc;
    R->phase = PHASE_COMPLETING;
    queue_side(R, SIDE_COMPLETE);
    return 1;
}

/* On failure the multipart upload is aborted (the failure's error kept);
 * everything the run holds is given back. */
static void end_run(run *R, int rc) {
    if (rc) {
        s3x_saved_error keep;
        s3x_error_save(&keep);
        abort_mpu(R);
        s3x_error_restore(&keep);
        s3x_saved_error_free(&keep);
    }
    if (R->t.parts) s3x_sched_remove(R->t.sched, &R->t);
    if (R->parts)
        for (int i = 0; i < R->parts_cap; i++) free(R->parts[i].etag);
    free(R->parts);
    free(R->scratch);
    free(R->upload_id);
    free(R->complete_body);
    s3x_xfer *x = R->x;
    s3x_xfer_end(x);
    if (x->pool_ready && x->pool.kind == S3X_POOL_MALLOC) s3x_pool_release(&x->pool);
    if (R->src.own_fd) close(R->src.fd);
    free(R);
}

/* kind.finish: every part is in; the file must not have changed, then the
 * completion, on the side part (1: in progress, called again once it is
 * done). */
static int up_finish(s3x_transfer *t) {
    run *R = t->ctx;
    return finish_upload(R, R->single);
}

/* kind.close */
static void up_close(s3x_transfer *t, int rc) { end_run(t->ctx, rc); }

/* The first steps of an upload, up to its first part: the body's shape, the
 * part plan, the parts on S, the bucket check, the multipart upload. */
static int open_upload(s3x_sched *S, s3x_xfer *x, const char *bucket, const char *key, const source *src,
                       s3x_transfer **out) {
    run *R = calloc(1, sizeof *R);
    if (!R) {
        if (src->own_fd) close(src->fd);
        s3x_xfer_end(x);
        return s3x_seterr(S3X_ENOMEM, "out of memory");
    }
    R->x = x;
    R->bucket = bucket;
    R->key = key;
    R->src = *src;
    R->next_part = 1;
    R->t.ctx = R;
    int single = 0;
    int rc = choose_body(R);
    if (!rc) rc = plan_parts(R, &single);
    if (!rc) {
        x->res->part_size = R->part_size;
        if (R->buffered && !x->batched) setup_pool(R);
        rc = setup_parts(R, S, single);
    }
    if (!rc) rc = check_bucket_exists(R);
    if (!rc && src->kind == SRC_STREAM) rc = begin_stream(R, &single);
    else if (!rc && !single) begin_create(R);
    R->single = single;
    if (rc) {
        end_run(R, rc);
        return rc;
    }
    x->res->multipart = !single;
    *out = &R->t;
    return 0;
}

int s3x_check_target(const char *bucket, const char *key) {
    if (!bucket || !*bucket) return s3x_seterr(S3X_EINVAL, "bucket name is empty");
    if (s3x_client_bucket_addressing(NULL, bucket, NULL)) return S3X_EINVAL;
    if (!key || !*key) return s3x_seterr(S3X_EINVAL, "object key is empty");
    return 0;
}

/* Opens path for an upload: a regular file (*is_stream 0), or a FIFO or
 * device to read as a stream (*is_stream 1). */
static int open_file_source(const char *path, source *s, int *is_stream) {
    memset(s, 0, sizeof *s);
    *is_stream = 0;
    if (!path) return s3x_seterr(S3X_EINVAL, "path is NULL");
    s->path = path;
    s->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (s->fd < 0) return s3x_seterr_errno(S3X_EIO, errno, "cannot open %s", path);
    s->own_fd = 1;
    int rc = 0;
    if (fstat(s->fd, &s->st0) != 0) {
        rc = s3x_seterr_errno(S3X_EIO, errno, "cannot stat %s", path);
    } else if (S_ISDIR(s->st0.st_mode)) {
        rc = s3x_seterr_sys(S3X_EIO, EISDIR, "%s is a directory", path);
    } else if (!S_ISREG(s->st0.st_mode)) {
        s->kind = SRC_STREAM;
        s->size = -1;
        *is_stream = 1;
    } else {
        s->kind = SRC_FILE;
        s->size = s->st0.st_size;
        posix_fadvise(s->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    }
    if (rc) close(s->fd);
    return rc;
}

int s3x_upload_open_file(s3x_sched *S, s3x_xfer *x, const char *bucket, const char *key, const char *path,
                         s3x_transfer **out) {
    source s;
    int is_stream = 0;
    int rc = s3x_check_target(bucket, key);
    if (!rc) rc = open_file_source(path, &s, &is_stream);
    if (rc) {
        s3x_xfer_end(x);
        return rc;
    }
    return open_upload(S, x, bucket, key, &s, out);
}

int s3x_upload_open_memory(s3x_sched *S, s3x_xfer *x, const char *bucket, const char *key, const void *data,
                           size_t len, s3x_transfer **out) {
    int rc = s3x_check_target(bucket, key);
    if (!rc && len && !data) rc = s3x_seterr(S3X_EINVAL, "data is NULL but len is %zu", len);
    if (rc) {
        s3x_xfer_end(x);
        return rc;
    }
    source s;
    memset(&s, 0, sizeof s);
    s.kind = SRC_MEM;
    s.mem = data ? data : "";
    s.size = (int64_t)len;
    s.fd = -1;
    return open_upload(S, x, bucket, key, &s, out);
}

int s3x_upload_open_stream(s3x_sched *S, s3x_xfer *x, const char *bucket, const char *key, int fd,
                           s3x_read_fn read_fn, void *payload, s3x_transfer **out) {
    int rc = s3x_check_target(bucket, key);
    if (!rc && !read_fn && fd < 0) rc = s3x_seterr(S3X_EINVAL, "invalid file descriptor %d", fd);
    if (rc) {
        s3x_xfer_end(x);
        return rc;
    }
    source s;
    memset(&s, 0, sizeof s);
    s.kind = SRC_STREAM;
    s.fd = read_fn ? -1 : fd;
    s.size = -1;
    s.read_fn = read_fn;
    s.read_payload = payload;
    s.path = "the input stream";
    return open_upload(S, x, bucket, key, &s, out);
}

/* ---- the blocking calls: one transfer on a scheduler of its own -------------------- */

typedef struct open_args {
    int how; /* 0 file, 1 memory, 2 stream, 3 server-side copy */
    const char *path;
    const void *data;
    size_t len;
    int fd;
    s3x_read_fn read_fn;
    void *payload;
    const char *src_bucket, *src_key; /* copy */
    const s3x_copy_opts *copy;
} open_args;

static int run_one(s3x_upload *u, const char *bucket, const char *key, const open_args *a, s3x_result *result) {
    if (!u) return s3x_seterr(S3X_EINVAL, "upload manager is NULL");
    s3x_result local;
    if (!result) result = &local;
    s3x_xfer *x = &u->x;
    s3x_xfer_begin(x, result);
    s3x_sched S;
    s3x_sched_init(&S, x->client, (int)x->params[S3X_PARAM_CONCURRENCY]);
    s3x_transfer *t = NULL;
    int rc = a->how == 0   ? s3x_upload_open_file(&S, x, bucket, key, a->path, &t)
             : a->how == 1 ? s3x_upload_open_memory(&S, x, bucket, key, a->data, a->len, &t)
             : a->how == 3 ? s3x_copy_open(&S, x, a->src_bucket, a->src_key, bucket, key, a->copy, &t)
                           : s3x_upload_open_stream(&S, x, bucket, key, a->fd, a->read_fn, a->payload, &t);
    if (rc) return rc;
    if (s3x_sched_run(&S) != 0) rc = s3x_error_restore(&x->err);
    t->kind->close(t, rc);
    return rc;
}

int s3x_upload_file(s3x_upload *u, const char *bucket, const char *key, const char *path, s3x_result *result) {
    open_args a = {.how = 0, .path = path};
    return run_one(u, bucket, key, &a, result);
}

int s3x_upload_memory(s3x_upload *u, const char *bucket, const char *key, const void *data, size_t len,
                      s3x_result *result) {
    open_args a = {.how = 1, .data = data, .len = len};
    return run_one(u, bucket, key, &a, result);
}

int s3x_upload_fd(s3x_upload *u, const char *bucket, const char *key, int fd, s3x_result *result) {
    open_args a = {.how = 2, .fd = fd};
    return run_one(u, bucket, key, &a, result);
}

int s3x_upload_stream(s3x_upload *u, const char *bucket, const char *key, s3x_read_fn read_fn, s3x_result *result,
                      void *payload) {
    if (!read_fn) return s3x_seterr(S3X_EINVAL, "read_fn is NULL");
    open_args a = {.how = 2, .fd = -1, .read_fn = read_fn, .payload = payload};
    return run_one(u, bucket, key, &a, result);
}

int s3x_upload_copy(s3x_upload *u, const char *src_bucket, const char *src_key, const char *dst_bucket,
                    const char *dst_key, const s3x_copy_opts *opts, s3x_result *result) {
    open_args a = {.how = 3, .fd = -1, .src_bucket = src_bucket, .src_key = src_key, .copy = opts};
    return run_one(u, dst_bucket, dst_key, &a, result);
}

int s3x_copy(s3x_client *client, const char *src_bucket, const char *src_key, const char *dst_bucket,
             const char *dst_key, const s3x_copy_opts *opts, s3x_result *result) {
    s3x_upload *u = NULL;
    int rc = s3x_upload_new(&u, client);
    if (!rc) rc = s3x_upload_copy(u, src_bucket, src_key, dst_bucket, dst_key, opts, result);
    s3x_upload_free(u);
    return rc;
}
