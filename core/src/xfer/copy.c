/* The copy transfer kind: the server copies an object to another place, the
 * bytes never passing through the client.
 *
 * Steps, all on the scheduler's loop:
 *   1. HeadObject of the source (side part): size, ETag, content type, user
 *      metadata and full-object checksum;
 *   2. below MULTIPART_THRESHOLD, one CopyObject (a fed part, so it counts
 *      against the connection limit like any part);
 *   3. else CreateMultipartUpload (side part; with directive COPY it carries
 *      the source's content type and metadata, since a multipart upload does
 *      not inherit them as CopyObject does), UploadPartCopy of PART_SIZE
 *      ranges in parallel (grown so there are at most 10,000 parts), then
 *      CompleteMultipartUpload (side part). A failure or cancel aborts the
 *      upload (close), so nothing is left behind.
 *
 * Every copy request names the source's ETag in x-amz-copy-source-if-match:
 * a source replaced after the HEAD fails with 412, reported as S3X_ECHANGED,
 * instead of producing an object stitched from two versions.
 *
 * Copy parts carry no body: they take no pool buffer, so a batch's memory
 * budget is never charged for them. */
#include "checksum.h"
#include "error.h"
#include "kinds.h"
#include "params_internal.h"
#include "requests.h"
#include "s3xml.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1024LL * 1024LL)
#define GiB (1024LL * MiB)
#define MAX_PARTS 10000
#define MAX_PART (5 * GiB)
#define MAX_OBJECT (5 * 1024 * GiB)
/* Metadata headers a CreateMultipartUpload can carry beside its own two. */
#define MAX_META (S3X_MAX_HEADERS - 4)

typedef struct cslot {
    s3x_part base;
    int part_number;          /* 0: the single CopyObject */
    int64_t offset, size;
    char range[64];
    s3x_req_num pn;
} cslot;

typedef struct cpart {
    char *etag;
    char *checksum;
} cpart;

enum { SIDE_NONE, SIDE_HEAD, SIDE_CREATE, SIDE_COMPLETE };
enum { PH_HEAD, PH_CREATING, PH_PARTS, PH_COMPLETING, PH_DONE };

typedef struct crun {
    s3x_xfer *x;
    const char *src_bucket, *src_key, *dst_bucket, *dst_key;
    int directive;            /* s3x_metadata_directive */
    const char *content_type; /* REPLACE: the caller's */
    const char *if_match;     /* the caller's precondition on the source, or NULL */
    char *source;             /* x-amz-copy-source */
    /* the source, as the HEAD saw it */
    int64_t size;
    char *etag;
    char *src_type;
    char *meta;               /* "name\0value\0"... */
    const char *meta_names[MAX_META], *meta_values[MAX_META];
    size_t nmeta;
    int checksum;             /* s3x_checksum of the source's checksum header, or 0 */
    int checksum_full;        /* ... and it is a full-object one (not "...-N") */
    /* the plan */
    int single;
    int64_t part_size;
    int nparts;
    int next_part;            /* next part number to feed (1-based); single: 1 until fed */
    int no_more_parts;
    int64_t bytes_done;
    cpart *parts;
    char *upload_id;
    int side_op, phase;
    char *complete_body;
    size_t complete_len;
    s3x_transfer t;
} crun;

int64_t s3x_copy_plan_part_size(int64_t part_size, int64_t size) {
    int64_t need = size / MAX_PARTS + (size % MAX_PARTS != 0);
    if (need > part_size) part_size = (need + MiB - 1) / MiB * MiB;
    return part_size;
}


/* The copy's precondition: the caller's, else the ETag the HEAD saw. */
static const char *pin(const crun *R) { return R->if_match ? R->if_match : R->etag; }

static void queue_side(crun *R, int op) {
    s3x_part *p = s3x_transfer_part(&R->t, R->t.nparts);
    R->side_op = op;
    p->attempts = 0;
    p->state = S3X_PART_QUEUED;
}

/* ---- the plan, once the HEAD answered ------------------------------------------- */

/* Copies the metadata headers the HEAD kept into the run (the request that
 * held them is reset before the CreateMultipartUpload is built). */
static int keep_metadata(crun *R, const s3x_http_req *r) {
    if (r->meta_over)
        return s3x_seterr(S3X_ELIMIT, "copy of s3://%s/%s: the source's user metadata is larger than S3 allows "
                          "(or could not be read); use metadata directive REPLACE", R->src_bucket, R->src_key);
    if (!r->meta.len) return 0;
    R->meta = malloc(r->meta.len);
    if (!R->meta) return s3x_seterr(S3X_ENOMEM, "out of memory");
    memcpy(R->meta, r->meta.data, r->meta.len);
    for (size_t off = 0; off < r->meta.len;) {
        if (R->nmeta == MAX_META)
            return s3x_seterr(S3X_ELIMIT, "copy of s3://%s/%s: the source has more than %d user metadata entries, "
                              "more than a multipart copy here can carry; use metadata directive REPLACE",
                              R->src_bucket, R->src_key, MAX_META);
        R->meta_names[R->nmeta] = R->meta + off;
        off += strlen(R->meta + off) + 1;
        R->meta_values[R->nmeta++] = R->meta + off;
        off += strlen(R->meta + off) + 1;
    }
    return 0;
}

static int plan(crun *R) {
    s3x_xfer *x = R->x;
    if (R->size > MAX_OBJECT)
        return s3x_seterr(S3X_ELIMIT, "copy of s3://%s/%s: %" PRId64 " bytes is larger than S3's 5 TiB limit",
                          R->src_bucket, R->src_key, R->size);
    R->single = R->size < x->params[S3X_PARAM_MULTIPART_THRESHOLD] || R->size == 0;
    R->part_size = R->single ? R->size : s3x_copy_plan_part_size(x->params[S3X_PARAM_PART_SIZE], R->size);
    if (!R->single && R->part_size > MAX_PART)
        return s3x_seterr(S3X_ELIMIT, "copy of s3://%s/%s: %" PRId64 " bytes needs parts of %" PRId64
                          " bytes, above S3's 5 GiB limit", R->src_bucket, R->src_key, R->size, R->part_size);
    if (R->single && R->size > MAX_PART)
        return s3x_seterr(S3X_ELIMIT, "copy of s3://%s/%s: CopyObject takes at most 5 GiB, the source has %" PRId64
                          " bytes; lower multipart_threshold", R->src_bucket, R->src_key, R->size);
    R->nparts = R->single ? 1 : (int)((R->size + R->part_size - 1) / R->part_size);
    x->res->part_size = R->part_size;
    x->res->multipart = !R->single;
    R->next_part = 1;
    if (!R->single) {
        R->parts = calloc((size_t)R->nparts, sizeof *R->parts);
        if (!R->parts) return s3x_seterr(S3X_ENOMEM, "out of memory");
    }
    return 0;
}

static int take_head(crun *R, s3x_http_req *r) {
    if (!r->etag || !*r->etag)
        return s3x_seterr(S3X_EXML, "copy of s3://%s/%s: the source's HeadObject answer has no ETag", R->src_bucket,
                          R->src_key);
    if (r->content_length < 0)
        return s3x_seterr(S3X_ENETWORK, "copy of s3://%s/%s: the source's HeadObject answer has no Content-Length",
                          R->src_bucket, R->src_key);
    R->size = r->content_length;
    if (!(R->etag = strdup(r->etag))) return s3x_seterr(S3X_ENOMEM, "out of memory");
    if (r->content_type && !(R->src_type = strdup(r->content_type))) return s3x_seterr(S3X_ENOMEM, "out of memory");
    R->checksum = r->checksum_kind;
    /* "...-N" is a composite of N parts; without it the checksum is the whole object's. */
    R->checksum_full = R->checksum && r->checksum_value && !strchr(r->checksum_value, '-');
    int rc = keep_metadata(R, r);
    if (!rc) rc = plan(R);
    return rc;
}

/* ---- the side part: HEAD, Create, Complete ---------------------------------------- */

static const char *checksum_algorithm(const crun *R) {
    return R->checksum ? s3x_checksum_algorithm(R->checksum) : NULL;
}

static int prepare_side(crun *R, s3x_http_req *r) {
    s3x_req_new(r);
    if (R->side_op == SIDE_HEAD) {
        /* checksum_mode: the source's full-object checksum, to ask for the same one on the copy. */
        int rc = s3x_req_head_object(r, R->src_bucket, R->src_key, R->if_match, 1);
        r->want_meta = 1;
        return rc;
    }
    if (R->side_op == SIDE_CREATE) {
        int copy = R->directive == S3X_METADATA_COPY;
        int rc = s3x_req_create_mpu_meta(r, R->dst_bucket, R->dst_key, copy ? R->src_type : R->content_type,
                                         checksum_algorithm(R), R->meta_names, R->meta_values, copy ? R->nmeta : 0);
        /* A source with a full-object CRC keeps one: S3 combines the parts'
         * CRCs into the whole object's (SHA-256 cannot be combined, so it
         * stays a checksum of the parts). */
        if (!rc && R->checksum_full && (R->checksum == S3X_CHECKSUM_CRC32 || R->checksum == S3X_CHECKSUM_CRC32C))
            rc = s3x_req_header(r, "x-amz-checksum-type", "FULL_OBJECT");
        return rc;
    }
    int rc = s3x_req_complete_mpu(r, R->dst_bucket, R->dst_key, R->upload_id);
    r->body = R->complete_body;
    r->body_len = R->complete_len;
    return rc;
}

/* The side part succeeded; returns the side part's next state, or <0. */
static int take_side(crun *R, s3x_http_req *r) {
    int rc, op = R->side_op;
    R->side_op = SIDE_NONE;
    if (op == SIDE_HEAD) {
        if ((rc = take_head(R, r))) return rc;
        if (R->single) {
            R->phase = PH_PARTS;
            return S3X_PART_FREE;
        }
        R->phase = PH_CREATING;
        queue_side(R, SIDE_CREATE);
        return S3X_PART_QUEUED;
    }
    if (op == SIDE_CREATE) {
        if ((rc = s3x_xml_parse_initiate(r->resp_body.data, r->resp_body.len, &R->upload_id))) return rc;
        snprintf(R->x->res->upload_id, sizeof R->x->res->upload_id, "%s", R->upload_id);
        R->phase = PH_PARTS;
        return S3X_PART_FREE;
    }
    if ((rc = s3x_http_check_complete_body(r))) return rc;
    s3x_xml_complete c;
    memset(&c, 0, sizeof c);
    rc = s3x_xml_parse_complete(r->resp_body.data, r->resp_body.len, &c);
    if (!rc) snprintf(R->x->res->etag, sizeof R->x->res->etag, "%s", c.etag);
    s3x_xml_complete_free(&c);
    if (rc) return rc;
    R->phase = PH_DONE;
    return S3X_PART_FREE;
}

/* ---- the kind ---------------------------------------------------------------------- */

static int cp_feed(s3x_transfer *t, s3x_part *p) {
    crun *R = t->ctx;
    cslot *s = (cslot *)p;
    if (R->phase != PH_PARTS || R->no_more_parts) return 0;
    if (R->single) {
        s->part_number = 0;
        s->offset = 0;
        s->size = R->size;
        R->no_more_parts = 1;
    } else {
        int n = R->next_part++;
        s->part_number = n;
        s->offset = (int64_t)(n - 1) * R->part_size;
        s->size = R->size - s->offset < R->part_size ? R->size - s->offset : R->part_size;
        int rc = s3x_req_range(s->range, sizeof s->range, s->offset, s->offset + s->size - 1);
        if (rc) return rc;
        if (n >= R->nparts) R->no_more_parts = 1;
    }
    p->attempts = 0;
    p->state = S3X_PART_QUEUED;
    return 1;
}

static int cp_prepare(s3x_transfer *t, s3x_part *p) {
    crun *R = t->ctx;
    cslot *s = (cslot *)p;
    s3x_http_req *r = &p->req;
    if (p->side) return prepare_side(R, r);
    s3x_req_new(r);
    if (s->part_number == 0) {
        int replace = R->directive == S3X_METADATA_REPLACE;
        return s3x_req_copy_object(r, R->dst_bucket, R->dst_key, R->source, replace ? "REPLACE" : "COPY",
                                   R->content_type, pin(R), checksum_algorithm(R));
    }
    return s3x_req_upload_part_copy(r, R->dst_bucket, R->dst_key, R->upload_id, s->part_number, s->pn, R->source,
                                    s->range, pin(R));
}

/* A copy request refused by its precondition means the source changed
 * after the HEAD (or is not the version the caller named). */
static int cp_failed(s3x_transfer *t, s3x_part *p) {
    crun *R = t->ctx;
    const s3x_error *e = s3x_error_last();
    if (p->req.status == 412 && (!p->side || R->side_op == SIDE_HEAD))
        s3x_seterr_http(S3X_ECHANGED, 412, e->s3_code ? e->s3_code : "PreconditionFailed", e->request_id,
                        "copy of s3://%s/%s: the source changed during the copy (its ETag is no longer %s)",
                        R->src_bucket, R->src_key, pin(R) ? pin(R) : "the one named");
    else if (p->side && R->side_op == SIDE_HEAD && p->req.status == 404)
        s3x_seterr_http(S3X_EHTTP, 404, "NoSuchKey", e->request_id,
                        "copy of s3://%s/%s: the source object does not exist (NoSuchKey)", R->src_bucket,
                        R->src_key);
    return 1;
}

static int cp_take(s3x_transfer *t, s3x_part *p) {
    crun *R = t->ctx;
    cslot *s = (cslot *)p;
    s3x_http_req *r = &p->req;
    if (p->side) return take_side(R, r);
    int rc = s3x_http_check_complete_body(r);
    if (rc) return rc;
    s3x_xml_copy cr;
    memset(&cr, 0, sizeof cr);
    rc = s3x_xml_parse_copy(r->resp_body.data, r->resp_body.len,
                            s->part_number == 0 ? "CopyObjectResult" : "CopyPartResult", &cr);
    if (rc) {
        s3x_xml_copy_free(&cr);
        return rc;
    }
    if (s->part_number == 0) {
        snprintf(R->x->res->etag, sizeof R->x->res->etag, "%s", cr.etag);
        s3x_xml_copy_free(&cr);
    } else {
        cpart *d = &R->parts[s->part_number - 1];
        free(d->etag);
        free(d->checksum);
        d->etag = cr.etag;
        /* A part checksum of the kind asked for goes into the completion. */
        d->checksum = cr.checksum_name && R->checksum &&
                              !strcmp(cr.checksum_name, s3x_checksum_xml_name(R->checksum))
                          ? cr.checksum
                          : NULL;
        if (!d->checksum) free(cr.checksum);
        free(cr.last_modified);
    }
    R->bytes_done += s->size;
    R->x->res->parts++;
    s3x_xfer_progress(R->x, R->bytes_done, R->size);
    return S3X_PART_FREE;
}

static int cp_more(s3x_transfer *t) { return !((crun *)t->ctx)->no_more_parts; }

static int cp_hold(s3x_transfer *t) { return ((crun *)t->ctx)->phase < PH_PARTS; }

static void cp_moving(s3x_transfer *t, int64_t *done, int64_t *total) {
    crun *R = t->ctx;
    *done = R->bytes_done;
    *total = R->phase == PH_HEAD ? -1 : R->size;
}

static void cp_release(s3x_transfer *t, s3x_part *p) {
    (void)t;
    (void)p; /* copy parts hold no buffer */
}

static int build_complete(crun *R) {
    s3x_complete_part *cp = calloc((size_t)R->nparts, sizeof *cp);
    if (!cp) return s3x_seterr(S3X_ENOMEM, "out of memory");
    int all_sums = R->checksum != 0;
    for (int i = 0; i < R->nparts; i++) {
        if (!R->parts[i].etag) {
            free(cp);
            return s3x_seterr(S3X_EINTERNAL, "copy part %d has no ETag at completion", i + 1);
        }
        cp[i].part_number = i + 1;
        cp[i].etag = R->parts[i].etag;
        cp[i].checksum = R->parts[i].checksum;
        if (!cp[i].checksum) all_sums = 0;
    }
    /* Part checksums go in only when every part has one (the server gave
     * none: it keeps no checksum of this kind, so none is named). */
    int rc = s3x_xml_build_complete(cp, (size_t)R->nparts, all_sums ? s3x_checksum_xml_name(R->checksum) : NULL,
                                    &R->complete_body, &R->complete_len);
    free(cp);
    return rc;
}

static int cp_finish(s3x_transfer *t) {
    crun *R = t->ctx;
    R->x->res->bytes = R->bytes_done;
    if (R->single || R->phase == PH_DONE) return 0;
    if (R->phase == PH_COMPLETING) return 1;
    int rc = build_complete(R);
    if (rc) return rc;
    R->phase = PH_COMPLETING;
    queue_side(R, SIDE_COMPLETE);
    return 1;
}

static void abort_upload(crun *R) {
    if (!R->upload_id || R->phase == PH_DONE || R->x->params[S3X_PARAM_LEAVE_PARTS_ON_ERROR]) return;
    s3x_http_req r;
    s3x_req_new(&r);
    if (s3x_req_abort_mpu(&r, R->dst_bucket, R->dst_key, R->upload_id)) return;
    /* Cleanup must not be stopped by the cancel that caused it. */
    int was = atomic_exchange(&R->x->cancel, 0);
    s3x_xfer_perform(R->x, &r);
    atomic_store(&R->x->cancel, was);
    s3x_http_req_reset(R->x->client, &r);
}

static void end_run(crun *R, int rc) {
    if (rc) {
        s3x_saved_error keep;
        s3x_error_save(&keep);
        abort_upload(R);
        s3x_error_restore(&keep);
        s3x_saved_error_free(&keep);
    }
    if (R->t.parts) s3x_sched_remove(R->t.sched, &R->t);
    if (R->parts)
        for (int i = 0; i < R->nparts; i++) {
            free(R->parts[i].etag);
            free(R->parts[i].checksum);
        }
    free(R->parts);
    free(R->source);
    free(R->etag);
    free(R->src_type);
    free(R->meta);
    free(R->upload_id);
    free(R->complete_body);
    s3x_xfer_end(R->x);
    free(R);
}

static void cp_close(s3x_transfer *t, int rc) { end_run(t->ctx, rc); }

static const s3x_kind copy_kind = {
    .name = "copy",
    .part_size = sizeof(cslot),
    .feed = cp_feed,
    .prepare = cp_prepare,
    .failed = cp_failed,
    .take = cp_take,
    .more = cp_more,
    .moving = cp_moving,
    .release = cp_release,
    .hold = cp_hold,
    .finish = cp_finish,
    .close = cp_close,
};

/* Some servers (SeaweedFS) create a missing bucket on the first write; a
 * copy into a bucket that does not exist must fail instead, as an upload
 * does (upload.c). A client checks each bucket once and remembers it. */
static int check_dst_bucket(crun *R) {
    s3x_client *c = R->x->client;
    if (s3x_client_bucket_known(c, R->dst_bucket)) return 0;
    s3x_http_req r;
    s3x_req_new(&r);
    int rc = s3x_req_head_bucket(&r, R->dst_bucket);
    if (!rc) rc = s3x_xfer_perform(R->x, &r);
    long status = r.status;
    s3x_http_req_reset(c, &r);
    if (rc == 0) {
        s3x_client_bucket_remember(c, R->dst_bucket);
        return 0;
    }
    if (status == 404)
        return s3x_seterr_http(S3X_EHTTP, 404, "NoSuchBucket", NULL, "copy to s3://%s/%s: bucket %s does not exist",
                               R->dst_bucket, R->dst_key, R->dst_bucket);
    if (status == 403) return 0; /* not allowed to ask: let the copy itself tell */
    return rc;
}

int s3x_copy_open(s3x_sched *S, s3x_xfer *x, const char *src_bucket, const char *src_key, const char *dst_bucket,
                  const char *dst_key, const s3x_copy_opts *opts, s3x_transfer **out) {
    int rc = s3x_check_target(src_bucket, src_key);
    if (!rc) rc = s3x_check_target(dst_bucket, dst_key);
    if (!rc && opts && opts->metadata_directive != S3X_METADATA_COPY &&
        opts->metadata_directive != S3X_METADATA_REPLACE)
        rc = s3x_seterr(S3X_EINVAL, "metadata_directive %d is neither S3X_METADATA_COPY nor S3X_METADATA_REPLACE",
                        opts->metadata_directive);
    crun *R = NULL;
    if (!rc && !(R = calloc(1, sizeof *R))) rc = s3x_seterr(S3X_ENOMEM, "out of memory");
    if (rc) {
        s3x_xfer_end(x);
        return rc;
    }
    R->x = x;
    R->src_bucket = src_bucket;
    R->src_key = src_key;
    R->dst_bucket = dst_bucket;
    R->dst_key = dst_key;
    if (opts) {
        R->directive = opts->metadata_directive;
        R->content_type = opts->content_type;
        R->if_match = opts->if_match && *opts->if_match ? opts->if_match : NULL;
    }
    R->t.ctx = R;
    R->t.what = "copy to";
    R->t.bucket = dst_bucket;
    R->t.key = dst_key;
    R->phase = PH_HEAD;
    rc = s3x_req_copy_source(src_bucket, src_key, &R->source);
    if (!rc) rc = check_dst_bucket(R);
    int64_t c = x->params[S3X_PARAM_CONCURRENCY];
    if (!rc) rc = s3x_sched_add(S, &R->t, &copy_kind, R, x, (int)(c > 0 ? c : 1), 1);
    if (rc) {
        end_run(R, rc);
        return rc;
    }
    queue_side(R, SIDE_HEAD);
    *out = &R->t;
    return 0;
}
