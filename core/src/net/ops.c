/* The single S3 operations of the public API. */
#include "client_internal.h"
#include "error.h"
#include "range.h"
#include "s3xml.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *xstrdup0(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s);
    char *p = malloc(n + 1);
    if (p) memcpy(p, s, n + 1);
    return p;
}

static int need(const char *what, const void *p) {
    if (!p) return s3x_seterr(S3X_EINVAL, "%s must not be NULL", what);
    return 0;
}

static int check_bucket(const char *bucket) {
    if (!bucket || !*bucket) return s3x_seterr(S3X_EINVAL, "bucket name is empty");
    return s3x_client_bucket_addressing(NULL, bucket, NULL);
}

static int check_key(const char *key) {
    if (!key || !*key) return s3x_seterr(S3X_EINVAL, "object key is empty");
    return 0;
}

static void init_req(s3x_http_req *r, const char *op, const char *method, const char *bucket,
                     const char *key) {
    memset(r, 0, sizeof *r);
    r->op = op;
    r->method = method;
    r->bucket = bucket;
    r->key = key;
    r->content_length = -1;
}

static int run(s3x_client *c, s3x_http_req *r) {
    int rc = s3x_http_perform(c, r);
    return rc;
}

static void fill_info(const s3x_http_req *r, s3x_object_info *info, int64_t size) {
    s3x_object_info_clear(info);
    info->size = size;
    info->etag = xstrdup0(r->etag);
    info->last_modified = xstrdup0(r->last_modified);
    info->content_type = xstrdup0(r->content_type);
    info->version_id = xstrdup0(r->version_id);
}

int s3x_create_bucket(s3x_client *c, const char *bucket) {
    int rc;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket))) return rc;
    if ((rc = s3x_client_ensure(c))) return rc;
    s3x_http_req r;
    init_req(&r, "CreateBucket", "PUT", bucket, NULL);
    char *body = NULL;
    size_t blen = 0;
    if ((rc = s3x_xml_build_create_bucket(c->region, &body, &blen))) return rc;
    r.body = body;
    r.body_len = blen;
    rc = run(c, &r);
    s3x_http_req_reset(c, &r);
    free(body);
    return rc;
}

static int simple(s3x_client *c, const char *op, const char *method, const char *bucket, const char *key) {
    s3x_http_req r;
    init_req(&r, op, method, bucket, key);
    int rc = run(c, &r);
    s3x_http_req_reset(c, &r);
    return rc;
}

int s3x_delete_bucket(s3x_client *c, const char *bucket) {
    int rc;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket))) return rc;
    return simple(c, "DeleteBucket", "DELETE", bucket, NULL);
}

int s3x_head_bucket(s3x_client *c, const char *bucket) {
    int rc;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket))) return rc;
    return simple(c, "HeadBucket", "HEAD", bucket, NULL);
}

int s3x_head_object(s3x_client *c, const char *bucket, const char *key, s3x_object_info *out) {
    int rc;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket)) || (rc = check_key(key))) return rc;
    s3x_http_req r;
    init_req(&r, "HeadObject", "HEAD", bucket, key);
    rc = run(c, &r);
    if (!rc && out) fill_info(&r, out, r.content_length);
    s3x_http_req_reset(c, &r);
    return rc;
}

static int finish_etag(s3x_http_req *r, char **etag_out) {
    if (!etag_out) return 0;
    *etag_out = xstrdup0(r->etag ? r->etag : "");
    return *etag_out ? 0 : s3x_seterr(S3X_ENOMEM, "out of memory");
}

int s3x_put_object(s3x_client *c, const char *bucket, const char *key, const void *data, size_t len,
                   const char *content_type, char **etag_out) {
    int rc;
    if (etag_out) *etag_out = NULL;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket)) || (rc = check_key(key))) return rc;
    if (len && !data) return s3x_seterr(S3X_EINVAL, "data is NULL but len is %zu", len);
    s3x_http_req r;
    init_req(&r, "PutObject", "PUT", bucket, key);
    r.body = data ? data : "";
    r.body_len = len;
    if (content_type) r.headers[r.nheaders++] = (s3x_kv){"content-type", content_type};
    rc = run(c, &r);
    if (!rc) rc = finish_etag(&r, etag_out);
    s3x_http_req_reset(c, &r);
    return rc;
}

int s3x_put_object_stream(s3x_client *c, const char *bucket, const char *key, int64_t size,
                          s3x_read_fn read_fn, char **etag_out, void *payload) {
    int rc;
    if (etag_out) *etag_out = NULL;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket)) || (rc = check_key(key)) ||
        (rc = read_fn ? 0 : s3x_seterr(S3X_EINVAL, "read_fn must not be NULL")))
        return rc;
    if (size < 0) return s3x_seterr(S3X_EINVAL, "size must be >= 0");
    s3x_http_req r;
    init_req(&r, "PutObject", "PUT", bucket, key);
    r.read_fn = read_fn;
    r.read_payload = payload;
    r.body_size = size;
    rc = run(c, &r);
    if (!rc) rc = finish_etag(&r, etag_out);
    s3x_http_req_reset(c, &r);
    return rc;
}

static int set_range(s3x_http_req *r, char *buf, size_t cap, int64_t start, int64_t end) {
    if (start < 0 && end < 0) return 0;
    if (start < 0 || (end >= 0 && end < start))
        return s3x_seterr(S3X_EINVAL, "invalid byte range %lld-%lld", (long long)start, (long long)end);
    if (end >= 0) snprintf(buf, cap, "bytes=%lld-%lld", (long long)start, (long long)end);
    else snprintf(buf, cap, "bytes=%lld-", (long long)start);
    r->headers[r->nheaders++] = (s3x_kv){"range", buf};
    return 0;
}

static int64_t object_size_of(const s3x_http_req *r) {
    int64_t t = s3x_content_range_total(r->content_range);
    return t >= 0 ? t : r->content_length;
}

/* A ranged GET must be answered with the bytes asked for: a 206 whose
 * Content-Range starts at range_start and ends at range_end (or the object's
 * last byte), with a Content-Length to match. A 200 means the server ignored
 * the Range header; its body is not what the caller asked for. */
static int check_range_answer(const s3x_http_req *r, const char *asked, int64_t start, int64_t end) {
    if (start < 0 && end < 0) return 0;
    s3x_crange cr;
    if (r->status != 206)
        return s3x_seterr(S3X_ENETWORK, "%s s3://%s/%s: asked for %s, got HTTP %ld without a range "
                          "(the server ignored the Range header)", r->op, r->bucket, r->key, asked, r->status);
    if (!r->content_range || s3x_crange_parse(r->content_range, strlen(r->content_range), &cr) || cr.first < 0)
        return s3x_seterr(S3X_ENETWORK, "%s s3://%s/%s: a 206 with a missing or malformed Content-Range", r->op,
                          r->bucket, r->key);
    int64_t want_last = end;
    if (cr.total >= 0 && (end < 0 || end >= cr.total)) want_last = cr.total - 1;
    if (cr.first != start || (want_last >= 0 && cr.last != want_last) ||
        (r->content_length >= 0 && r->content_length != cr.last - cr.first + 1))
        return s3x_seterr(S3X_ENETWORK, "%s s3://%s/%s: asked for %s, the server sent bytes %lld-%lld "
                          "(Content-Length %lld)", r->op, r->bucket, r->key, asked, (long long)cr.first,
                          (long long)cr.last, (long long)r->content_length);
    return 0;
}

static int check_complete_body(s3x_http_req *r) {
    /* A body shorter than Content-Length is a broken transfer, never success. */
    if (r->content_length >= 0 && r->bytes_in != r->content_length)
        return s3x_seterr(S3X_ENETWORK, "%s s3://%s/%s: body ended after %lld of %lld bytes", r->op,
                          r->bucket, r->key, (long long)r->bytes_in, (long long)r->content_length);
    return 0;
}

int s3x_get_object(s3x_client *c, const char *bucket, const char *key, int64_t range_start,
                   int64_t range_end, void **data, size_t *len, s3x_object_info *info) {
    int rc;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket)) || (rc = check_key(key)) ||
        (rc = need("data", data)) || (rc = need("len", len)))
        return rc;
    *data = NULL;
    *len = 0;
    s3x_http_req r;
    char range[64];
    init_req(&r, "GetObject", "GET", bucket, key);
    r.resp_cap = S3X_GET_OBJECT_MAX_BYTES;
    if ((rc = set_range(&r, range, sizeof range, range_start, range_end))) return rc;
    rc = run(c, &r);
    if (!rc) rc = check_complete_body(&r);
    if (!rc) rc = check_range_answer(&r, range, range_start, range_end);
    if (!rc) {
        if (info) fill_info(&r, info, object_size_of(&r));
        size_t n = r.resp_body.len;
        *data = s3x_buf_detach(&r.resp_body);
        if (!*data) rc = s3x_seterr(S3X_ENOMEM, "out of memory");
        else *len = n;
    }
    s3x_http_req_reset(c, &r);
    return rc;
}

int s3x_get_object_stream(s3x_client *c, const char *bucket, const char *key, int64_t range_start,
                          int64_t range_end, s3x_write_fn write_fn, s3x_object_info *info, void *payload) {
    int rc;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket)) || (rc = check_key(key)) ||
        (rc = write_fn ? 0 : s3x_seterr(S3X_EINVAL, "write_fn must not be NULL")))
        return rc;
    s3x_http_req r;
    char range[64];
    init_req(&r, "GetObject", "GET", bucket, key);
    r.write_fn = write_fn;
    r.write_payload = payload;
    if ((rc = set_range(&r, range, sizeof range, range_start, range_end))) return rc;
    rc = run(c, &r);
    if (!rc) rc = check_complete_body(&r);
    if (!rc) rc = check_range_answer(&r, range, range_start, range_end);
    if (!rc && info) fill_info(&r, info, object_size_of(&r));
    s3x_http_req_reset(c, &r);
    return rc;
}

int s3x_delete_object(s3x_client *c, const char *bucket, const char *key) {
    int rc;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket)) || (rc = check_key(key))) return rc;
    return simple(c, "DeleteObject", "DELETE", bucket, key);
}

/* ---- listing -------------------------------------------------------------- */

void s3x_list_free(s3x_list *l) {
    if (!l) return;
    for (size_t i = 0; i < l->count; i++) {
        free(l->entries[i].key);
        free(l->entries[i].etag);
        free(l->entries[i].last_modified);
    }
    free(l->entries);
    for (size_t i = 0; i < l->nprefixes; i++) free(l->prefixes[i]);
    free(l->prefixes);
    free(l->next_token);
    free(l);
}

int s3x_list_objects(s3x_client *c, const char *bucket, const char *prefix, const char *delimiter,
                     const char *token, int max_keys, s3x_list **out) {
    int rc;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket)) || (rc = need("out", out))) return rc;
    *out = NULL;
    if (max_keys < 0) return s3x_seterr(S3X_EINVAL, "max_keys must be >= 0");
    s3x_http_req r;
    init_req(&r, "ListObjectsV2", "GET", bucket, NULL);
    char mk[16];
    r.query[r.nquery++] = (s3x_kv){"list-type", "2"};
    if (prefix && *prefix) r.query[r.nquery++] = (s3x_kv){"prefix", prefix};
    if (delimiter && *delimiter) r.query[r.nquery++] = (s3x_kv){"delimiter", delimiter};
    if (token && *token) r.query[r.nquery++] = (s3x_kv){"continuation-token", token};
    if (max_keys > 0) {
        snprintf(mk, sizeof mk, "%d", max_keys);
        r.query[r.nquery++] = (s3x_kv){"max-keys", mk};
    }
    rc = run(c, &r);
    s3x_xml_list_objects lo;
    memset(&lo, 0, sizeof lo);
    if (!rc) rc = s3x_xml_parse_list_objects(r.resp_body.data, r.resp_body.len, &lo);
    s3x_list *l = NULL;
    if (!rc) {
        l = calloc(1, sizeof *l);
        if (l && lo.nobjects) l->entries = calloc(lo.nobjects, sizeof *l->entries);
        if (l && lo.nprefixes) l->prefixes = calloc(lo.nprefixes, sizeof *l->prefixes);
        if (!l || (lo.nobjects && !l->entries) || (lo.nprefixes && !l->prefixes)) {
            rc = s3x_seterr(S3X_ENOMEM, "out of memory");
        } else {
            /* Move strings out of the parse result. */
            for (size_t i = 0; i < lo.nobjects; i++) {
                l->entries[i].key = lo.objects[i].key;
                l->entries[i].etag = lo.objects[i].etag;
                l->entries[i].last_modified = lo.objects[i].last_modified;
                l->entries[i].size = lo.objects[i].size;
                lo.objects[i].key = lo.objects[i].etag = lo.objects[i].last_modified = NULL;
            }
            l->count = lo.nobjects;
            for (size_t i = 0; i < lo.nprefixes; i++) {
                l->prefixes[i] = lo.common_prefixes[i];
                lo.common_prefixes[i] = NULL;
            }
            l->nprefixes = lo.nprefixes;
            l->is_truncated = lo.is_truncated;
            l->next_token = lo.next_continuation_token;
            lo.next_continuation_token = NULL;
        }
    }
    s3x_xml_list_objects_free(&lo);
    s3x_http_req_reset(c, &r);
    if (rc) s3x_list_free(l);
    else *out = l;
    return rc;
}

/* ---- multipart -------------------------------------------------------------- */

int s3x_create_multipart_upload(s3x_client *c, const char *bucket, const char *key,
                                const char *content_type, char **upload_id) {
    int rc;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket)) || (rc = check_key(key)) ||
        (rc = need("upload_id", upload_id)))
        return rc;
    *upload_id = NULL;
    s3x_http_req r;
    init_req(&r, "CreateMultipartUpload", "POST", bucket, key);
    r.query[r.nquery++] = (s3x_kv){"uploads", ""};
    if (content_type) r.headers[r.nheaders++] = (s3x_kv){"content-type", content_type};
    rc = run(c, &r);
    if (!rc) rc = s3x_xml_parse_initiate(r.resp_body.data, r.resp_body.len, upload_id);
    s3x_http_req_reset(c, &r);
    return rc;
}

int s3x_upload_part(s3x_client *c, const char *bucket, const char *key, const char *upload_id,
                    int part_number, const void *data, size_t len, char **etag_out) {
    int rc;
    if (etag_out) *etag_out = NULL;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket)) || (rc = check_key(key)) ||
        (rc = need("upload_id", upload_id)))
        return rc;
    if (part_number < 1 || part_number > 10000)
        return s3x_seterr(S3X_EINVAL, "part number %d is out of range [1, 10000]", part_number);
    if (len && !data) return s3x_seterr(S3X_EINVAL, "data is NULL but len is %zu", len);
    s3x_http_req r;
    char pn[16];
    snprintf(pn, sizeof pn, "%d", part_number);
    init_req(&r, "UploadPart", "PUT", bucket, key);
    r.query[r.nquery++] = (s3x_kv){"partNumber", pn};
    r.query[r.nquery++] = (s3x_kv){"uploadId", upload_id};
    r.body = data ? data : "";
    r.body_len = len;
    rc = run(c, &r);
    if (!rc) rc = finish_etag(&r, etag_out);
    s3x_http_req_reset(c, &r);
    return rc;
}

int s3x_complete_multipart_upload(s3x_client *c, const char *bucket, const char *key,
                                  const char *upload_id, const s3x_part_ref *parts, size_t nparts,
                                  char **etag_out) {
    int rc;
    if (etag_out) *etag_out = NULL;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket)) || (rc = check_key(key)) ||
        (rc = need("upload_id", upload_id)) || (rc = need("parts", parts)))
        return rc;
    if (nparts == 0 || nparts > 10000)
        return s3x_seterr(S3X_EINVAL, "a multipart upload needs 1..10000 parts, got %zu", nparts);
    s3x_complete_part *cp = calloc(nparts, sizeof *cp);
    if (!cp) return s3x_seterr(S3X_ENOMEM, "out of memory");
    for (size_t i = 0; i < nparts; i++) {
        cp[i].part_number = parts[i].part_number;
        cp[i].etag = parts[i].etag;
    }
    char *body = NULL;
    size_t blen = 0;
    rc = s3x_xml_build_complete(cp, nparts, NULL, &body, &blen);
    free(cp);
    if (rc) return rc;
    s3x_http_req r;
    init_req(&r, "CompleteMultipartUpload", "POST", bucket, key);
    r.query[r.nquery++] = (s3x_kv){"uploadId", upload_id};
    r.headers[r.nheaders++] = (s3x_kv){"content-type", "application/xml"};
    r.body = body;
    r.body_len = blen;
    rc = run(c, &r);
    if (!rc) rc = s3x_http_check_complete_body(&r);
    if (!rc && etag_out) {
        s3x_xml_complete cr;
        memset(&cr, 0, sizeof cr);
        rc = s3x_xml_parse_complete(r.resp_body.data, r.resp_body.len, &cr);
        if (!rc) {
            *etag_out = cr.etag ? cr.etag : xstrdup0("");
            cr.etag = NULL;
        }
        s3x_xml_complete_free(&cr);
    }
    s3x_http_req_reset(c, &r);
    free(body);
    return rc;
}

int s3x_abort_multipart_upload(s3x_client *c, const char *bucket, const char *key, const char *upload_id) {
    int rc;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket)) || (rc = check_key(key)) ||
        (rc = need("upload_id", upload_id)))
        return rc;
    s3x_http_req r;
    init_req(&r, "AbortMultipartUpload", "DELETE", bucket, key);
    r.query[r.nquery++] = (s3x_kv){"uploadId", upload_id};
    rc = run(c, &r);
    s3x_http_req_reset(c, &r);
    return rc;
}

void s3x_part_list_free(s3x_part_list *l) {
    if (!l) return;
    for (size_t i = 0; i < l->count; i++) free(l->parts[i].etag);
    free(l->parts);
    free(l);
}

int s3x_list_parts(s3x_client *c, const char *bucket, const char *key, const char *upload_id,
                   s3x_part_list **out) {
    int rc;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket)) || (rc = check_key(key)) ||
        (rc = need("upload_id", upload_id)) || (rc = need("out", out)))
        return rc;
    *out = NULL;
    s3x_part_list *l = calloc(1, sizeof *l);
    if (!l) return s3x_seterr(S3X_ENOMEM, "out of memory");
    size_t cap = 0;
    int marker = 0;
    for (;;) {
        s3x_http_req r;
        char mk[16];
        init_req(&r, "ListParts", "GET", bucket, key);
        r.query[r.nquery++] = (s3x_kv){"uploadId", upload_id};
        if (marker) {
            snprintf(mk, sizeof mk, "%d", marker);
            r.query[r.nquery++] = (s3x_kv){"part-number-marker", mk};
        }
        rc = run(c, &r);
        s3x_xml_list_parts lp;
        memset(&lp, 0, sizeof lp);
        if (!rc) rc = s3x_xml_parse_list_parts(r.resp_body.data, r.resp_body.len, &lp);
        s3x_http_req_reset(c, &r);
        if (!rc && l->count + lp.nparts > cap) {
            size_t ncap = (l->count + lp.nparts) * 2;
            s3x_part_info *p = realloc(l->parts, ncap * sizeof *p);
            if (!p) rc = s3x_seterr(S3X_ENOMEM, "out of memory");
            else {
                l->parts = p;
                cap = ncap;
            }
        }
        if (!rc) {
            for (size_t i = 0; i < lp.nparts; i++) {
                s3x_part_info *pi = &l->parts[l->count++];
                pi->part_number = lp.parts[i].part_number;
                pi->size = lp.parts[i].size;
                pi->etag = lp.parts[i].etag;
                lp.parts[i].etag = NULL;
            }
        }
        int more = !rc && lp.is_truncated && lp.next_part_number_marker > marker;
        marker = lp.next_part_number_marker;
        s3x_xml_list_parts_free(&lp);
        if (rc || !more) break;
    }
    if (rc) s3x_part_list_free(l);
    else *out = l;
    return rc;
}

void s3x_upload_list_free(s3x_upload_list *l) {
    if (!l) return;
    for (size_t i = 0; i < l->count; i++) {
        free(l->uploads[i].key);
        free(l->uploads[i].upload_id);
        free(l->uploads[i].initiated);
    }
    free(l->uploads);
    free(l);
}

int s3x_list_multipart_uploads(s3x_client *c, const char *bucket, const char *prefix, s3x_upload_list **out) {
    int rc;
    if ((rc = need("client", c)) || (rc = check_bucket(bucket)) || (rc = need("out", out))) return rc;
    *out = NULL;
    s3x_upload_list *l = calloc(1, sizeof *l);
    if (!l) return s3x_seterr(S3X_ENOMEM, "out of memory");
    size_t cap = 0;
    char *key_marker = NULL, *id_marker = NULL;
    for (int page = 0; page < 100000; page++) {
        s3x_http_req r;
        init_req(&r, "ListMultipartUploads", "GET", bucket, NULL);
        r.query[r.nquery++] = (s3x_kv){"uploads", ""};
        if (prefix && *prefix) r.query[r.nquery++] = (s3x_kv){"prefix", prefix};
        if (key_marker) r.query[r.nquery++] = (s3x_kv){"key-marker", key_marker};
        if (id_marker) r.query[r.nquery++] = (s3x_kv){"upload-id-marker", id_marker};
        rc = run(c, &r);
        s3x_xml_list_uploads lu;
        memset(&lu, 0, sizeof lu);
        if (!rc) rc = s3x_xml_parse_list_uploads(r.resp_body.data, r.resp_body.len, &lu);
        s3x_http_req_reset(c, &r);
        if (!rc && l->count + lu.nuploads > cap) {
            size_t ncap = (l->count + lu.nuploads) * 2;
            s3x_upload_entry *p = realloc(l->uploads, ncap * sizeof *p);
            if (!p) rc = s3x_seterr(S3X_ENOMEM, "out of memory");
            else {
                l->uploads = p;
                cap = ncap;
            }
        }
        if (!rc) {
            for (size_t i = 0; i < lu.nuploads; i++) {
                s3x_upload_entry *u = &l->uploads[l->count++];
                u->key = lu.uploads[i].key;
                u->upload_id = lu.uploads[i].upload_id;
                u->initiated = lu.uploads[i].initiated;
                lu.uploads[i].key = lu.uploads[i].upload_id = lu.uploads[i].initiated = NULL;
            }
        }
        int more = !rc && lu.is_truncated && lu.next_key_marker;
        free(key_marker);
        free(id_marker);
        key_marker = lu.next_key_marker;
        id_marker = lu.next_upload_id_marker;
        lu.next_key_marker = lu.next_upload_id_marker = NULL;
        s3x_xml_list_uploads_free(&lu);
        if (rc || !more) break;
    }
    free(key_marker);
    free(id_marker);
    if (rc) s3x_upload_list_free(l);
    else *out = l;
    return rc;
}
