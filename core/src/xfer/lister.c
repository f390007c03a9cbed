/* A listing run as a transfer: see lister.h. */
#include "lister.h"
#include "error.h"
#include "params_internal.h"
#include "requests.h"
#include <stdlib.h>
#include <string.h>

struct s3x_lister {
    s3x_transfer t;
    s3x_xfer x;
    s3x_result res;
    char *bucket, *prefix;
    size_t prefix_len;
    s3x_req_num mk;
    s3x_xml_list_objects cur, next; /* the page being consumed; the one fetched ahead */
    size_t pos;                     /* next object of cur */
    int have_cur, have_next;
    char *token;                    /* continuation token of the page to fetch next (NULL: the first) */
    int fetching;                   /* the side part is queued or in flight */
    int fetched_last;               /* the page that is not truncated has arrived */
    int64_t pages;
    char *server;                   /* the Server header of the first page, or NULL */
    int order;                      /* S3X_ORDER_*: the order keys are checked to ascend in */
    char *last_key;                 /* the last key given out (order check) */
    int64_t given;
    int closed;
};

static s3x_lister *of(s3x_transfer *t) { return t->ctx; }

static int ls_feed(s3x_transfer *t, s3x_part *p) {
    (void)t;
    (void)p;
    return 0;
}

static int ls_prepare(s3x_transfer *t, s3x_part *p) {
    s3x_lister *l = of(t);
    return s3x_req_list_objects(&p->req, l->bucket, l->prefix_len ? l->prefix : NULL, NULL, l->token, 0, l->mk);
}

/* Checks a page against what came before, then keeps it. */
static int ls_take(s3x_transfer *t, s3x_part *p) {
    s3x_lister *l = of(t);
    s3x_http_req *r = &p->req;
    s3x_xml_list_objects lo;
    memset(&lo, 0, sizeof lo);
    l->fetching = 0;
    int rc = s3x_xml_parse_list_objects(r->resp_body.data, r->resp_body.len, &lo);
    if (rc) return rc;
    l->pages++;
    if (l->pages == 1 && r->server) l->server = strdup(r->server);
    if (!rc && lo.is_truncated && (!lo.next_continuation_token || !*lo.next_continuation_token))
        rc = s3x_seterr(S3X_EXML, "listing s3://%s/%s: page %lld is truncated but has no continuation token",
                        l->bucket, l->prefix, (long long)l->pages);
    if (!rc && lo.is_truncated && l->token && !strcmp(l->token, lo.next_continuation_token))
        rc = s3x_seterr(S3X_EXML, "listing s3://%s/%s: the server sent the same continuation token again",
                        l->bucket, l->prefix);
    if (rc) {
        s3x_xml_list_objects_free(&lo);
        return rc;
    }
    free(l->token);
    l->token = NULL;
    if (lo.is_truncated) {
        l->token = lo.next_continuation_token;
        lo.next_continuation_token = NULL;
    } else {
        l->fetched_last = 1;
    }
    if (!l->have_cur) {
        l->cur = lo;
        l->pos = 0;
        l->have_cur = 1;
    } else {
        l->next = lo;
        l->have_next = 1;
    }
    return S3X_PART_FREE;
}

/* Asks for the next page when there is room for it: one page ahead of the
 * one being consumed. */
static int ls_tick(s3x_transfer *t) {
    s3x_lister *l = of(t);
    if (l->fetching || l->fetched_last || l->have_next) return 0;
    s3x_part *p = s3x_transfer_part(t, 0);
    if (p->state != S3X_PART_FREE) return 0;
    p->attempts = 0;
    p->state = S3X_PART_QUEUED;
    l->fetching = 1;
    return 0;
}

static int ls_more(s3x_transfer *t) {
    (void)t;
    return 0;
}

/* Alive while pages remain to fetch (a page waits for room meanwhile). */
static int ls_pending(s3x_transfer *t) { return !of(t)->fetched_last; }

static void ls_moving(s3x_transfer *t, int64_t *done, int64_t *total) {
    *done = of(t)->pages;
    *total = -1;
}

static void ls_release(s3x_transfer *t, s3x_part *p) {
    (void)t;
    (void)p;
}

static void ls_close(s3x_transfer *t, int rc) {
    s3x_lister *l = of(t);
    (void)rc;
    if (t->sched) s3x_sched_remove(t->sched, t);
    s3x_xfer_end(&l->x);
    l->closed = 1;
}

static const s3x_kind lister_kind = {
    .name = "list",
    .part_size = sizeof(s3x_part),
    .feed = ls_feed,
    .prepare = ls_prepare,
    .take = ls_take,
    .tick = ls_tick,
    .more = ls_more,
    .pending = ls_pending,
    .moving = ls_moving,
    .release = ls_release,
    .close = ls_close,
};

int s3x_lister_open(s3x_sched *S, const int64_t *params, const char *bucket, const char *prefix, s3x_lister **out) {
    *out = NULL;
    s3x_lister *l = calloc(1, sizeof *l);
    if (!l) return s3x_seterr(S3X_ENOMEM, "out of memory");
    l->bucket = strdup(bucket);
    l->prefix = strdup(prefix ? prefix : "");
    if (!l->bucket || !l->prefix) {
        s3x_lister_free(l);
        return s3x_seterr(S3X_ENOMEM, "out of memory");
    }
    l->prefix_len = strlen(l->prefix);
    int rc = s3x_xfer_init(&l->x, S->client, S3X_SCOPE_DOWNLOAD);
    if (rc) {
        free(l->bucket);
        free(l->prefix);
        free(l);
        return rc;
    }
    memcpy(l->x.params, params, sizeof l->x.params);
    s3x_xfer_begin(&l->x, &l->res);
    l->t.what = "listing of";
    l->t.bucket = l->bucket;
    l->t.key = l->prefix;
    if ((rc = s3x_sched_add(S, &l->t, &lister_kind, l, &l->x, 0, 1))) {
        s3x_xfer_end(&l->x);
        l->closed = 1;
        s3x_lister_free(l);
        return rc;
    }
    *out = l;
    return 0;
}

int s3x_order_cmp(const char *a, const char *b, int order) {
    if (order != S3X_ORDER_SEGMENTS) return strcmp(a, b);
    const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;
    for (;; x++, y++) {
        /* '/' sorts below every other byte; the end of a string below all. */
        int cx = *x == '/' ? 1 : *x ? *x + 1 : 0;
        int cy = *y == '/' ? 1 : *y ? *y + 1 : 0;
        if (cx != cy || !cx) return cx - cy;
    }
}

/* A key given out must be under the prefix and after the one before it. */
static int check_key(s3x_lister *l, const char *k) {
    if (!k || strncmp(k, l->prefix, l->prefix_len) != 0)
        return s3x_seterr(S3X_EXML, "listing s3://%s/%s: page %lld holds a key outside the prefix", l->bucket,
                          l->prefix, (long long)l->pages);
    if (l->last_key) {
        int ok = l->order == S3X_ORDER_ANY ? (strcmp(k, l->last_key) > 0 ||
                                              s3x_order_cmp(k, l->last_key, S3X_ORDER_SEGMENTS) > 0)
                                           : s3x_order_cmp(k, l->last_key, l->order) > 0;
        if (!ok)
            return s3x_seterr(S3X_EXML,
                              "listing s3://%s/%s: the server %s keys (after key %lld of the listing, in %s order); "
                              "a repeated continuation token does this",
                              l->bucket, l->prefix, strcmp(k, l->last_key) ? "reorders" : "repeats",
                              (long long)l->given,
                              l->order == S3X_ORDER_SEGMENTS ? "directory" : l->order == S3X_ORDER_BYTES ? "byte" : "any");
    }
    size_t n = strlen(k);
    char *c = realloc(l->last_key, n + 1);
    if (!c) return s3x_seterr(S3X_ENOMEM, "out of memory");
    memcpy(c, k, n + 1);
    l->last_key = c;
    l->given++;
    return 0;
}

void s3x_lister_set_order(s3x_lister *l, int order) { l->order = order; }

const char *s3x_lister_server(const s3x_lister *l) { return l->server; }

int s3x_lister_pages(const s3x_lister *l) { return l ? (int)l->pages : 0; }

int s3x_lister_next(s3x_lister *l, const s3x_xml_object **obj) {
    for (;;) {
        if (l->have_cur && l->pos < l->cur.nobjects) {
            const s3x_xml_object *o = &l->cur.objects[l->pos++];
            int rc = check_key(l, o->key);
            if (rc) {
                s3x_xfer_fail(&l->x); /* the loop stops the listing's transfer */
                return rc;
            }
            *obj = o;
            return 1;
        }
        if (l->have_cur) {
            s3x_xml_list_objects_free(&l->cur);
            memset(&l->cur, 0, sizeof l->cur);
            l->have_cur = 0;
        }
        if (!l->have_next) break;
        l->cur = l->next;
        memset(&l->next, 0, sizeof l->next);
        l->have_next = 0;
        l->have_cur = 1;
        l->pos = 0;
    }
    if (l->x.failed) return s3x_error_restore(&l->x.err);
    if (l->fetched_last) return S3X_LISTER_END;
    if (l->closed) return s3x_seterr(S3X_EINTERNAL, "the listing of s3://%s/%s stopped early", l->bucket, l->prefix);
    return 0;
}

void s3x_lister_counts(const s3x_lister *l, int64_t *requests, int64_t *retries) {
    *requests = l ? l->res.requests : 0;
    *retries = l ? l->res.retries : 0;
}

void s3x_lister_cancel(s3x_lister *l) {
    if (l) atomic_store(&l->x.cancel, 1);
}

int s3x_lister_closed(const s3x_lister *l) { return !l || l->closed; }

void s3x_lister_free(s3x_lister *l) {
    if (!l) return;
    if (l->have_cur) s3x_xml_list_objects_free(&l->cur);
    if (l->have_next) s3x_xml_list_objects_free(&l->next);
    s3x_xfer_destroy(&l->x);
    free(l->token);
    free(l->last_key);
    free(l->server);
    free(l->bucket);
    free(l->prefix);
    free(l);
}
