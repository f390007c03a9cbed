/* Many objects on one batch: see s3xfer/bulk.h.
 *
 * A bulk call makes a batch on its client and gives it one source (see
 * batch_internal.h): a planner that, whenever fewer than a few hundred
 * transfers are queued, takes the next entries of the sorted local walk
 * (util/walk.h) and/or the listing (lister.h, pages fetched on the same
 * loop), decides what each needs, and adds the transfers. A sync is a merge
 * of the two sorted sequences, one entry of each in hand. What is pending is
 * bounded by the queue's low-water mark and two listing pages, whatever the
 * number of objects. Each transfer carries a small record (rec) that its
 * done callback reports and frees, and its batch slot is forgotten at once.
 *
 * Every outcome goes through report(): the counts of the summary, the
 * caller's callback, the first failure kept for the final error. */
#include "batch_internal.h"
#include "checksum.h"
#include "error.h"
#include "filter.h"
#include "lister.h"
#include "localpath.h"
#include "params_internal.h"
#include "walk.h"
#include "s3xfer/bulk.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum op { OP_UPLOAD_DIR, OP_DOWNLOAD_DIR, OP_SYNC_UP, OP_SYNC_DOWN, OP_DELETE, OP_COPY };

#define DELETE_BATCH 1000

/* One transfer the planner added. */
typedef struct rec {
    struct s3x_bulk *k;
    s3x_bulk_action action;
    char *key, *dest_key, *path;
    int64_t size;
    int64_t mtime_sec;          /* a download's object LastModified, to set on the file */
    long mtime_nsec;
    int set_mtime;
    const char *reason;
    int64_t moved;              /* bytes its progress reported so far */
    char **dkeys;               /* a DeleteObjects: its keys (owned) and their outcome */
    size_t ndkeys;
    s3x_delete_result *dout;
} rec;

struct s3x_bulk {
    s3x_client *client;
    int64_t params[S3X_PARAM__COUNT];
    unsigned flags;
    s3x_filter *filter;
    s3x_bulk_item_fn on_item;
    s3x_bulk_progress_fn on_progress;
    void *payload;
    atomic_int cancel;

    /* one call */
    int op;
    const char *dir, *bucket, *dst_bucket;
    char *prefix, *dst_prefix;  /* normalised: "" or ending in '/' */
    size_t prefix_len;
    s3x_batch *b;
    s3x_walk *walk;
    s3x_walk_entry le;          /* the local entry in hand */
    int have_local, local_end;
    s3x_lister *lst;
    const s3x_xml_object *ro;   /* the remote entry in hand (valid until the next lister call) */
    int have_remote, remote_end;
    int order;                  /* a sync's merge order (lister.h S3X_ORDER_*), once known */
    int order_known;
    int walk_flags;
    int rootfd;
    int started, stopping, cancelled;
    char *dkeys[DELETE_BATCH];  /* keys waiting for one DeleteObjects */
    int ndkeys;
    const char *del_reason;     /* why they are deleted (a sync: "not in the source") */
    s3x_bulk_summary sum;
    int64_t bytes_finished, bytes_inflight;
    int64_t pending;            /* transfers added and deletes gathered, not reported yet */
    int64_t req_other, retries_other;
    double t0, progress_at;
    int fatal;                  /* the run itself failed: its error is in fatal_err */
    s3x_saved_error fatal_err;
    int first_failed;
    s3x_saved_error first_err;
    char first_what[96];
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- handle ------------------------------------------------------------------------ */

int s3x_bulk_new(s3x_bulk **out, s3x_client *client) {
    if (!out) return s3x_seterr(S3X_EINVAL, "out is NULL");
    *out = NULL;
    if (!client) return s3x_seterr(S3X_EINVAL, "client is NULL");
    s3x_bulk *k = calloc(1, sizeof *k);
    if (!k) return s3x_seterr(S3X_ENOMEM, "out of memory");
    int rc = s3x_filter_new(&k->filter);
    if (rc) {
        free(k);
        return rc;
    }
    k->client = client;
    k->rootfd = -1;
    s3x_params_defaults(k->params);
    *out = k;
    return 0;
}

void s3x_bulk_free(s3x_bulk *k) {
    if (!k) return;
    s3x_filter_free(k->filter);
    free(k);
}

int s3x_bulk_set(s3x_bulk *k, s3x_param p, int64_t v) {
    if (!k) return s3x_seterr(S3X_EINVAL, "bulk is NULL");
    int rc = s3x_param_check(p, v, S3X_SCOPE_UPLOAD | S3X_SCOPE_DOWNLOAD | S3X_SCOPE_BATCH);
    if (!rc) k->params[p] = v;
    return rc;
}

int s3x_bulk_set_flags(s3x_bulk *k, unsigned flags) {
    if (!k) return s3x_seterr(S3X_EINVAL, "bulk is NULL");
    unsigned known = S3X_BULK_FOLLOW_SYMLINKS | S3X_BULK_SYNC_DELETE | S3X_BULK_DRYRUN | S3X_BULK_EXACT |
                     S3X_BULK_LISTING_BYTES | S3X_BULK_LISTING_DIRS;
    if (flags & ~known) return s3x_seterr(S3X_EINVAL, "unknown bulk flags 0x%x", flags & ~known);
    k->flags = flags;
    return 0;
}

int s3x_bulk_add_filter(s3x_bulk *k, int include, const char *pattern) {
    if (!k) return s3x_seterr(S3X_EINVAL, "bulk is NULL");
    return s3x_filter_add(k->filter, include ? S3X_FILTER_INCLUDE : S3X_FILTER_EXCLUDE, pattern);
}

void s3x_bulk_set_callbacks(s3x_bulk *k, s3x_bulk_item_fn on_item, s3x_bulk_progress_fn on_progress,
                            void *payload) {
    if (!k) return;
    k->on_item = on_item;
    k->on_progress = on_progress;
    k->payload = payload;
}

void s3x_bulk_cancel(s3x_bulk *k) {
    if (k) atomic_store(&k->cancel, 1);
}

/* ---- outcomes ------------------------------------------------------------------------ */

const char *s3x_bulk_action_name(s3x_bulk_action a) {
    switch (a) {
    case S3X_BULK_UPLOAD: return "upload";
    case S3X_BULK_DOWNLOAD: return "download";
    case S3X_BULK_COPY: return "copy";
    case S3X_BULK_DELETE_REMOTE:
    case S3X_BULK_DELETE_LOCAL: return "delete";
    case S3X_BULK_SKIP: return "skip";
    case S3X_BULK_MKDIR: return "mkdir";
    case S3X_BULK_REFUSED: return "refused";
    }
    return "unknown";
}

/* Counts an outcome and tells the caller. rc != 0: the thread's error is
 * that object's. */
static void report(s3x_bulk *k, s3x_bulk_action a, const char *key, const char *dest_key, const char *path,
                   int64_t size, int rc, const char *reason, const s3x_result *res) {
    if (a == S3X_BULK_REFUSED && !rc) rc = S3X_EINVAL;
    s3x_error e = {0};
    if (rc) {
        k->sum.objects_failed++;
        const s3x_error *le = s3x_error_last();
        e = *le;
        if (!k->first_failed) {
            k->first_failed = 1;
            s3x_error_save(&k->first_err);
            snprintf(k->first_what, sizeof k->first_what, "%s", s3x_bulk_action_name(a));
        }
    } else if (a == S3X_BULK_SKIP) {
        k->sum.objects_skipped++;
    } else {
        k->sum.objects_done++;
    }
    if (res) {
        k->sum.requests += res->requests;
        k->sum.retries += res->retries;
    }
    if (k->on_item) {
        s3x_bulk_item it = {a, key, dest_key, path, size, rc, rc ? &e : NULL, reason, res};
        k->on_item(&it, k->payload);
    }
    if (rc && k->params[S3X_PARAM_FAIL_FAST]) k->stopping = 1;
}

static void rec_free(rec *r) {
    if (!r) return;
    for (size_t i = 0; i < r->ndkeys; i++) free(r->dkeys[i]);
    free(r->dkeys);
    s3x_delete_result_free(r->dout);
    free(r->key);
    free(r->dest_key);
    free(r->path);
    free(r);
}

static void on_done(s3x_batch *b, s3x_batch_id id, int rc, const s3x_error *err, const s3x_result *res,
                    void *payload) {
    (void)err;
    rec *r = payload;
    s3x_bulk *k = r->k;
    k->pending--;
    k->bytes_inflight -= r->moved;
    if (!rc) k->bytes_finished += res->bytes;
    if (!rc && r->set_mtime && s3x_set_mtime(AT_FDCWD, r->path, r->mtime_sec, r->mtime_nsec)) {
        /* The file is complete; only its time could not be set: a later
         * sync would fetch it again, so the caller hears of it. */
        rc = s3x_error_last()->code;
    }
    report(k, r->action, r->key, r->dest_key, r->path, r->size, rc, r->reason, res);
    rec_free(r);
    s3x_batch_forget(b, id);
}

static int on_progress(int64_t done, int64_t total, void *payload) {
    (void)total;
    rec *r = payload;
    r->k->bytes_inflight += done - r->moved;
    r->moved = done;
    return atomic_load(&r->k->cancel) ? 1 : 0;
}

static rec *rec_new(s3x_bulk *k, s3x_bulk_action a, const char *key, const char *dest_key, const char *path,
                    int64_t size, const char *reason) {
    rec *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->k = k;
    r->action = a;
    r->size = size;
    r->reason = reason;
    if ((key && !(r->key = strdup(key))) || (dest_key && !(r->dest_key = strdup(dest_key))) ||
        (path && !(r->path = strdup(path)))) {
        rec_free(r);
        return NULL;
    }
    return r;
}

/* Adds one transfer, or reports why it could not be added. */
static void add_transfer(s3x_bulk *k, s3x_bulk_action a, const char *key, const char *dest_key, const char *path,
                         int64_t size, const char *reason, const char *last_modified) {
    if (k->flags & S3X_BULK_DRYRUN) {
        report(k, a, key, dest_key, path, size, 0, reason, NULL);
        return;
    }
    rec *r = rec_new(k, a, key, dest_key, path, size, reason);
    if (!r) {
        report(k, a, key, dest_key, path, size, s3x_seterr(S3X_ENOMEM, "out of memory"), reason, NULL);
        return;
    }
    if (a == S3X_BULK_DOWNLOAD && last_modified &&
        !s3x_parse_s3_time(last_modified, &r->mtime_sec, &r->mtime_nsec))
        r->set_mtime = 1;
    s3x_batch_cb cb = {on_done, on_progress, r};
    int rc;
    switch (a) {
    case S3X_BULK_UPLOAD: rc = s3x_batch_upload_file(k->b, k->bucket, key, path, &cb, NULL); break;
    case S3X_BULK_DOWNLOAD: rc = s3x_batch_download_file(k->b, k->bucket, key, path, &cb, NULL); break;
    case S3X_BULK_COPY:
        rc = s3x_batch_copy(k->b, k->bucket, key, k->dst_bucket, dest_key, &cb, NULL);
        break;
    default: rc = s3x_seterr(S3X_EINTERNAL, "cannot add a %s", s3x_bulk_action_name(a)); break;
    }
    if (rc) {
        report(k, a, key, dest_key, path, size, rc, reason, NULL);
        rec_free(r);
        return;
    }
    k->pending++;
    k->sum.bytes_found += size > 0 ? size : 0;
}

/* ---- deletes ------------------------------------------------------------------------- */

/* One DeleteObjects done: every key's outcome. */
static void on_deleted(s3x_batch *b, s3x_batch_id id, int rc, const s3x_error *err, const s3x_result *res,
                       void *payload) {
    (void)err;
    rec *r = payload;
    s3x_bulk *k = r->k;
    s3x_saved_error req_err = {0};
    if (rc) s3x_error_save(&req_err);
    k->sum.requests += res->requests;
    k->sum.retries += res->retries;
    for (size_t i = 0; i < r->ndkeys; i++) {
        int krc = rc;
        if (rc) {
            s3x_error_restore(&req_err); /* every key of a failed request fails with its error */
        } else if (i < r->dout->count && !r->dout->entries[i].ok) {
            const s3x_delete_entry *o = &r->dout->entries[i];
            krc = s3x_seterr(S3X_EHTTP, "delete s3://%s/%s: %s%s%s", k->bucket, r->dkeys[i], o->code ? o->code : "",
                             o->message && *o->message ? ": " : "", o->message ? o->message : "");
        }
        k->pending--;
        report(k, S3X_BULK_DELETE_REMOTE, r->dkeys[i], NULL, NULL, -1, krc, r->reason, NULL);
    }
    s3x_saved_error_free(&req_err);
    rec_free(r);
    s3x_batch_forget(b, id);
}

/* Queues the keys gathered so far as one DeleteObjects on the batch. */
static void flush_deletes(s3x_bulk *k) {
    if (!k->ndkeys) return;
    rec *r = rec_new(k, S3X_BULK_DELETE_REMOTE, NULL, NULL, NULL, -1, k->del_reason);
    int rc = r ? 0 : s3x_seterr(S3X_ENOMEM, "out of memory");
    if (r) {
        r->dkeys = malloc((size_t)k->ndkeys * sizeof *r->dkeys);
        if (!r->dkeys) rc = s3x_seterr(S3X_ENOMEM, "out of memory");
    }
    if (!rc) {
        memcpy(r->dkeys, k->dkeys, (size_t)k->ndkeys * sizeof *r->dkeys);
        r->ndkeys = (size_t)k->ndkeys;
        s3x_batch_cb cb = {on_deleted, NULL, r};
        rc = s3x_batch_delete_keys(k->b, k->bucket, r->dkeys, r->ndkeys, &r->dout, &cb);
        if (!rc) {
            k->ndkeys = 0; /* the keys are the record's now */
            return;
        }
        r->ndkeys = 0;
    }
    for (int i = 0; i < k->ndkeys; i++) {
        k->pending--;
        report(k, S3X_BULK_DELETE_REMOTE, k->dkeys[i], NULL, NULL, -1, rc, k->del_reason, NULL);
        free(k->dkeys[i]);
    }
    k->ndkeys = 0;
    rec_free(r);
}

static void delete_remote(s3x_bulk *k, const char *key, int64_t size, const char *reason) {
    if (k->flags & S3X_BULK_DRYRUN) {
        report(k, S3X_BULK_DELETE_REMOTE, key, NULL, NULL, size, 0, reason, NULL);
        return;
    }
    char *d = strdup(key);
    if (!d) {
        report(k, S3X_BULK_DELETE_REMOTE, key, NULL, NULL, size, s3x_seterr(S3X_ENOMEM, "out of memory"), reason, NULL);
        return;
    }
    k->pending++;
    k->del_reason = reason;
    k->dkeys[k->ndkeys++] = d;
    if (k->ndkeys == DELETE_BATCH) flush_deletes(k);
}

/* ---- the two sorted sequences ---------------------------------------------------------- */

static int symlink_skipped(const s3x_walk_entry *e) {
    return e->err && e->is_symlink;
}

/* The next local file to plan (filters applied; problems reported on the
 * way). 1: k->le holds it; 0: the walk is over; <0: the walk failed. */
static int next_local(s3x_bulk *k) {
    if (k->have_local) return 1;
    if (k->local_end) return 0;
    for (;;) {
        int rc = s3x_walk_next(k->walk, &k->le);
        if (rc <= 0) {
            k->local_end = 1;
            return rc;
        }
        const s3x_walk_entry *e = &k->le;
        if (e->is_dir && !e->err) continue; /* an empty directory: no object to make of it */
        if (!s3x_filter_match(k->filter, e->rel)) continue;
        if (e->err) {
            /* Only an upload reads local files; a download side reports
             * what it cannot look at as well, since a sync cannot judge it. */
            if (symlink_skipped(e)) {
                report(k, S3X_BULK_SKIP, NULL, NULL, e->path, -1, 0, "symbolic link (not followed)", NULL);
            } else {
                s3x_seterr_sys(e->err, e->sys_errno, "%s: %s", e->path, e->message ? e->message : "cannot be read");
                report(k, S3X_BULK_UPLOAD, NULL, NULL, e->path, -1, e->err, e->message, NULL);
            }
            continue;
        }
        k->have_local = 1;
        return 1;
    }
}

/* The next remote object to plan (filters applied on the key relative to
 * the prefix). 1: k->ro holds it; 0: none yet (a page is on its way);
 * S3X_LISTER_END; <0: the listing failed. */
static int next_remote(s3x_bulk *k) {
    if (k->have_remote) return 1;
    if (k->remote_end) return S3X_LISTER_END;
    for (;;) {
        int rc = s3x_lister_next(k->lst, &k->ro);
        if (rc != 1) {
            if (rc == S3X_LISTER_END || rc < 0) k->remote_end = 1;
            return rc;
        }
        if (!s3x_filter_match(k->filter, k->ro->key + k->prefix_len)) continue;
        k->have_remote = 1;
        return 1;
    }
}

static char *join(const char *a, const char *b, const char *c) {
    size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
    char *s = malloc(la + lb + lc + 1);
    if (!s) return NULL;
    memcpy(s, a, la);
    memcpy(s + la, b, lb);
    memcpy(s + la + lb, c, lc + 1);
    return s;
}

/* A local file to upload as prefix + rel. */
static void plan_upload(s3x_bulk *k, const s3x_walk_entry *e, const char *reason) {
    char *key = join(k->prefix, e->rel, "");
    if (!key) {
        report(k, S3X_BULK_UPLOAD, NULL, NULL, e->path, e->size, s3x_seterr(S3X_ENOMEM, "out of memory"), reason, NULL);
        return;
    }
    add_transfer(k, S3X_BULK_UPLOAD, key, NULL, e->path, e->size, reason, NULL);
    free(key);
}

/* An object to download beneath the directory, if its key can be a file
 * there (see bulk.h: safety of downloads). */
static void plan_download(s3x_bulk *k, const s3x_xml_object *o, const char *reason) {
    char rel[PATH_MAX];
    const char *why = NULL;
    int rc = s3x_key_to_relpath(o->key, k->prefix, rel, sizeof rel, &why);
    if (rc < 0) {
        report(k, S3X_BULK_REFUSED, o->key, NULL, NULL, o->size, rc, why, NULL);
        return;
    }
    if (rc == S3X_RELPATH_DIR) {
        if (!*rel) return; /* the prefix's own marker */
        char *dpath = join(k->dir, "/", rel);
        if (!dpath) rc = s3x_seterr(S3X_ENOMEM, "out of memory");
        else if (!(k->flags & S3X_BULK_DRYRUN)) rc = s3x_beneath_mkdirs(k->rootfd, rel);
        report(k, rc ? S3X_BULK_REFUSED : S3X_BULK_MKDIR, o->key, NULL, dpath, 0, rc, "directory marker", NULL);
        free(dpath);
        return;
    }
    char *path = join(k->dir, "/", rel);
    if (!path) {
        report(k, S3X_BULK_DOWNLOAD, o->key, NULL, NULL, o->size, s3x_seterr(S3X_ENOMEM, "out of memory"), reason, NULL);
        return;
    }
    if (!(k->flags & S3X_BULK_DRYRUN)) {
        int dfd = -1;
        const char *leaf = NULL;
        rc = s3x_beneath_prepare(k->rootfd, rel, &dfd, &leaf);
        if (dfd >= 0) close(dfd);
        if (rc) {
            report(k, S3X_BULK_REFUSED, o->key, NULL, path, o->size, rc, s3x_error_last()->message, NULL);
            free(path);
            return;
        }
    }
    add_transfer(k, S3X_BULK_DOWNLOAD, o->key, NULL, path, o->size, reason, o->last_modified);
    free(path);
}

static void plan_copy(s3x_bulk *k, const s3x_xml_object *o) {
    char *dkey = join(k->dst_prefix, o->key + k->prefix_len, "");
    if (!dkey) {
        report(k, S3X_BULK_COPY, o->key, NULL, NULL, o->size, s3x_seterr(S3X_ENOMEM, "out of memory"), NULL, NULL);
        return;
    }
    add_transfer(k, S3X_BULK_COPY, o->key, dkey, NULL, o->size, NULL, NULL);
    free(dkey);
}

/* A local file the source lacks (sync down --delete). */
static void delete_local(s3x_bulk *k, const s3x_walk_entry *e) {
    int rc = 0;
    if (!(k->flags & S3X_BULK_DRYRUN) && unlinkat(e->dirfd, e->name, 0) != 0 && errno != ENOENT)
        rc = s3x_seterr_errno(S3X_EIO, errno, "cannot delete %s", e->path);
    report(k, S3X_BULK_DELETE_LOCAL, NULL, NULL, e->path, e->size, rc, "not in the source", NULL);
}

/* MD5 of a file, base64, for --exact against a plain ETag. */
static int file_md5_b64(int dirfd, const char *name, char out[48]) {
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return -1;
    s3x_hasher h;
    if (s3x_hasher_init(&h, S3X_CHECKSUM_MD5)) {
        close(fd);
        return -1;
    }
    unsigned char buf[1 << 15];
    ssize_t n;
    int bad = 0;
    while ((n = read(fd, buf, sizeof buf)) != 0) {
        if (n < 0) {
            if (errno == EINTR) continue;
            bad = 1;
            break;
        }
        s3x_hasher_update(&h, buf, (size_t)n);
    }
    close(fd);
    s3x_hasher_final_b64(&h, out);
    return bad ? -1 : 0;
}

/* A plain (single-part) ETag's 32 hex digits as base64; -1 for any other ETag. */
static int etag_md5_b64(const char *etag, char out[48]) {
    const char *e = etag ? etag : "";
    if (*e == '"') e++;
    unsigned char md[16];
    for (int i = 0; i < 16; i++) {
        unsigned v = 0;
        for (int j = 0; j < 2; j++) {
            char c = e[2 * i + j];
            v <<= 4;
            if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
            else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
            else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
            else return -1;
        }
        md[i] = (unsigned char)v;
    }
    if (e[32] && !(e[32] == '"' && !e[33])) return -1;
    s3x_base64(md, 16, out);
    return 0;
}

/* Whether a local file and an object differ, and why (NULL: the same). */
static const char *differs(s3x_bulk *k, const s3x_walk_entry *e, const s3x_xml_object *o, int upload) {
    if (e->size != o->size) return "size differs";
    if (k->flags & S3X_BULK_EXACT) {
        char want[48], got[48];
        if (!etag_md5_b64(o->etag, want)) {
            if (file_md5_b64(e->dirfd, e->name, got)) return "cannot read the file to compare";
            return strcmp(want, got) ? "content differs (MD5)" : NULL;
        }
        /* A multipart ETag is not the content's MD5: fall back to time. */
    }
    int64_t osec = 0;
    long onsec = 0;
    if (!o->last_modified || s3x_parse_s3_time(o->last_modified, &osec, &onsec)) return "no modification time";
    if (upload) return e->mtime_sec > osec ? "newer locally" : NULL;
    return osec > e->mtime_sec ? "newer in the bucket" : NULL;
}

/* ---- the planner ------------------------------------------------------------------------ */

/* One step: plans at most one object. 1: planned (or skipped) one; 0:
 * waiting for the listing; 2: done; <0: the run failed. */
static int step(s3x_bulk *k) {
    int l = 0, r = 0;
    switch (k->op) {
    case OP_UPLOAD_DIR:
        l = next_local(k);
        if (l <= 0) return l < 0 ? l : 2;
        plan_upload(k, &k->le, NULL);
        k->have_local = 0;
        return 1;
    case OP_DOWNLOAD_DIR:
    case OP_COPY:
    case OP_DELETE:
        r = next_remote(k);
        if (r == 0) return 0;
        if (r < 0) return r;
        if (r == S3X_LISTER_END) return 2;
        if (k->op == OP_DOWNLOAD_DIR) plan_download(k, k->ro, NULL);
        else if (k->op == OP_COPY) plan_copy(k, k->ro);
        else delete_remote(k, k->ro->key, k->ro->size, NULL);
        k->have_remote = 0;
        return 1;
    default: break;
    }
    /* A sync: the merge of the two sorted sequences, in the order the
     * server lists keys in, which its first page tells (lister.h). */
    if (!k->order_known) {
        if (s3x_lister_pages(k->lst) < 1 && !s3x_lister_closed(k->lst)) return 0;
        const char *srv = s3x_lister_server(k->lst);
        int dirs = (k->flags & S3X_BULK_LISTING_DIRS) ||
                   (!(k->flags & S3X_BULK_LISTING_BYTES) && srv && strstr(srv, "SeaweedFS"));
        k->order = dirs ? S3X_ORDER_SEGMENTS : S3X_ORDER_BYTES;
        s3x_lister_set_order(k->lst, k->order);
        k->order_known = 1;
        if (!k->local_end) {
            int rc = s3x_walk_open(&k->walk, k->dir, k->walk_flags | (dirs ? S3X_WALK_DIR_ORDER : 0));
            if (rc) return rc;
        }
    }
    r = next_remote(k);
    if (r == 0) return 0;
    if (r < 0) return r;
    l = next_local(k);
    if (l < 0) return l;
    if (!l && r == S3X_LISTER_END) return 2;
    int up = k->op == OP_SYNC_UP;
    int cmp = !l ? 1 : r == S3X_LISTER_END ? -1 : s3x_order_cmp(k->le.rel, k->ro->key + k->prefix_len, k->order);
    if (cmp < 0) { /* only local */
        if (up) plan_upload(k, &k->le, "missing in the bucket");
        else if (k->flags & S3X_BULK_SYNC_DELETE) delete_local(k, &k->le);
        k->have_local = 0;
    } else if (cmp > 0) { /* only remote */
        if (!up) plan_download(k, k->ro, "missing locally");
        else if (k->flags & S3X_BULK_SYNC_DELETE) delete_remote(k, k->ro->key, k->ro->size, "not in the source");
        k->have_remote = 0;
    } else {
        const char *why = differs(k, &k->le, k->ro, up);
        if (!why) {
            report(k, S3X_BULK_SKIP, k->ro->key, NULL, k->le.path, k->le.size, 0, "up to date", NULL);
        } else if (up) {
            plan_upload(k, &k->le, why);
        } else {
            plan_download(k, k->ro, why);
        }
        k->have_local = k->have_remote = 0;
    }
    return 1;
}

static void fail_run(s3x_bulk *k, int rc) {
    if (!k->fatal) {
        k->fatal = rc;
        s3x_error_save(&k->fatal_err);
    }
}

static void fill_summary(s3x_bulk *k) {
    k->sum.seconds = now_s() - k->t0;
    k->sum.objects_found = k->sum.objects_done + k->sum.objects_skipped + k->sum.objects_failed + k->pending;
    k->sum.bytes_done = k->bytes_finished + k->bytes_inflight;
    if (k->b) {
        s3x_batch_stats st;
        s3x_batch_get_stats(k->b, &st);
        k->sum.peak_buffer_bytes = st.peak_buffer_bytes;
        k->sum.budget = st.budget;
    }
}

static int tell_progress(s3x_bulk *k, int last) {
    if (!k->on_progress) return 0;
    double t = now_s();
    if (!last && t - k->progress_at < 0.25) return 0;
    k->progress_at = t;
    fill_summary(k);
    s3x_bulk_summary s = k->sum;
    int64_t lr = 0, lt = 0;
    s3x_lister_counts(k->lst, &lr, &lt);
    s.requests += lr + k->req_other;
    s.retries += lt;
    return k->on_progress(&s, k->payload);
}

/* Every turn of the loop: progress, and a cancel stops everything. */
static void tick(s3x_batch *b, void *payload) {
    s3x_bulk *k = payload;
    if (k->cancelled) return;
    if (atomic_load(&k->cancel) || tell_progress(k, 0)) {
        atomic_store(&k->cancel, 1);
        k->cancelled = 1;
        fail_run(k, s3x_seterr(S3X_ECANCELLED, "cancelled"));
        k->stopping = 1;
        s3x_batch_cancel_all(b);
        s3x_lister_cancel(k->lst);
    }
}

/* The batch's source (batch_internal.h). */
static int pull(s3x_batch *b, int room, void *payload) {
    s3x_bulk *k = payload;
    if (k->stopping) {
        if (k->cancelled) s3x_batch_cancel_all(b);
        s3x_lister_cancel(k->lst);
        return s3x_lister_closed(k->lst) ? 0 : 1; /* the listing's transfer must end first */
    }
    if (!k->started) {
        k->started = 1;
        if (k->op != OP_UPLOAD_DIR) {
            int rc = s3x_lister_open(s3x_batch_sched(b), s3x_batch_params(b), k->bucket, k->prefix, &k->lst);
            if (rc) {
                fail_run(k, rc);
                return rc;
            }
        }
    }
    for (int n = 0; n < room && !k->stopping;) {
        int rc = step(k);
        if (rc == 1) {
            n++;
            continue;
        }
        if (rc == 0) return 1; /* the next page is on its way */
        if (rc < 0) {
            fail_run(k, rc);
            k->stopping = 1;
            break;
        }
        /* done */
        flush_deletes(k);
        k->sum.listing_done = 1;
        return s3x_lister_closed(k->lst) ? 0 : 1;
    }
    if (k->stopping) return 1; /* stopped on the next call */
    return 1;
}

/* ---- the calls ---------------------------------------------------------------------------- */

static char *folder_prefix(const char *p) {
    if (!p) p = "";
    size_t n = strlen(p);
    if (n && p[n - 1] != '/') return join(p, "/", "");
    return strdup(p);
}

static void reset_run(s3x_bulk *k) {
    k->b = NULL;
    k->walk = NULL;
    k->lst = NULL;
    k->have_local = k->local_end = k->have_remote = k->remote_end = 0;
    k->rootfd = -1;
    k->started = k->stopping = k->cancelled = 0;
    k->order_known = 0;
    k->order = S3X_ORDER_BYTES;
    k->ndkeys = 0;
    memset(&k->sum, 0, sizeof k->sum);
    k->pending = 0;
    k->bytes_finished = k->bytes_inflight = k->req_other = k->retries_other = 0;
    k->t0 = now_s();
    k->progress_at = 0;
    k->fatal = 0;
    k->first_failed = 0;
    k->prefix = k->dst_prefix = NULL;
    atomic_store(&k->cancel, 0);
}

/* Makes dir if missing (one level, as mkdir does) and opens it. */
static int open_root(const char *dir, int create) {
    if (create && mkdir(dir, 0777) != 0 && errno != EEXIST)
        return s3x_seterr_errno(S3X_EIO, errno, "cannot create directory %s", dir);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return s3x_seterr_errno(S3X_EIO, errno, "cannot open directory %s", dir);
    return fd;
}

static int run(s3x_bulk *k, int op, const char *dir, const char *bucket, const char *prefix, const char *dst_bucket,
               const char *dst_prefix, s3x_bulk_summary *out) {
    if (!k) return s3x_seterr(S3X_EINVAL, "bulk is NULL");
    reset_run(k);
    k->op = op;
    k->dir = dir;
    k->bucket = bucket;
    k->dst_bucket = dst_bucket;
    int rc = 0;
    if (!bucket || !*bucket) rc = s3x_seterr(S3X_EINVAL, "bucket name is empty");
    else if (s3x_client_bucket_addressing(NULL, bucket, NULL)) rc = S3X_EINVAL;
    else if (op == OP_COPY && (!dst_bucket || !*dst_bucket)) rc = s3x_seterr(S3X_EINVAL, "destination bucket is empty");
    else if (op == OP_COPY && s3x_client_bucket_addressing(NULL, dst_bucket, NULL)) rc = S3X_EINVAL;
    else if (op != OP_DELETE && op != OP_COPY && (!dir || !*dir)) rc = s3x_seterr(S3X_EINVAL, "directory is empty");
    if (rc) return rc;
    k->prefix = folder_prefix(prefix);
    k->dst_prefix = folder_prefix(dst_prefix);
    if (!k->prefix || !k->dst_prefix) rc = s3x_seterr(S3X_ENOMEM, "out of memory");
    k->prefix_len = k->prefix ? strlen(k->prefix) : 0;
    int walk_flags = (k->flags & S3X_BULK_FOLLOW_SYMLINKS) ? S3X_WALK_FOLLOW_SYMLINKS : 0;
    if (!rc && (op == OP_DOWNLOAD_DIR || op == OP_SYNC_DOWN) && !(k->flags & S3X_BULK_DRYRUN)) {
        int fd = open_root(dir, 1);
        if (fd < 0) rc = fd;
        else k->rootfd = fd;
    }
    if (!rc && (op == OP_DOWNLOAD_DIR || op == OP_SYNC_DOWN) && (k->flags & S3X_BULK_DRYRUN)) {
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        k->rootfd = fd; /* may be -1: a dry run into a directory not made yet */
    }
    k->walk_flags = walk_flags;
    if (!rc && op == OP_UPLOAD_DIR) rc = s3x_walk_open(&k->walk, dir, walk_flags);
    if (!rc && op == OP_SYNC_UP) {
        /* Opened once the listing's order is known; a directory that
         * cannot be walked fails now. */
        s3x_walk *probe = NULL;
        rc = s3x_walk_open(&probe, dir, walk_flags);
        s3x_walk_close(probe);
    }
    if (!rc && op == OP_SYNC_DOWN) {
        k->walk_flags = 0;
        if (k->rootfd < 0) k->local_end = 1;
    }
    if (!rc) rc = s3x_batch_new(&k->b, k->client);
    for (int p = 0; !rc && p < S3X_PARAM__COUNT; p++) {
        const s3x_param_info *pi = s3x_param_info_get((s3x_param)p);
        if (pi && (pi->scope & (S3X_SCOPE_UPLOAD | S3X_SCOPE_DOWNLOAD | S3X_SCOPE_BATCH)))
            rc = s3x_batch_set(k->b, (s3x_param)p, k->params[p]);
    }
    if (!rc) {
        s3x_batch_set_source(k->b, pull, tick, k);
        s3x_batch_run(k->b); /* per-object failures were reported one by one */
        tell_progress(k, 1);
    } else {
        fail_run(k, rc);
    }
    fill_summary(k);
    int64_t lr = 0, lt = 0;
    s3x_lister_counts(k->lst, &lr, &lt);
    k->sum.requests += lr + k->req_other;
    k->sum.retries += lt;
    for (int i = 0; i < k->ndkeys; i++) free(k->dkeys[i]);
    k->ndkeys = 0;
    s3x_batch_free(k->b);
    k->b = NULL;
    s3x_lister_free(k->lst);
    k->lst = NULL;
    s3x_walk_close(k->walk);
    k->walk = NULL;
    if (k->rootfd >= 0) close(k->rootfd);
    k->rootfd = -1;
    free(k->prefix);
    free(k->dst_prefix);
    k->prefix = k->dst_prefix = NULL;
    if (out) *out = k->sum;
    if (k->fatal) {
        rc = s3x_error_restore(&k->fatal_err);
    } else if (k->sum.objects_failed) {
        s3x_error_restore(&k->first_err);
        rc = s3x_seterr(S3X_EPARTIAL, "%" PRId64 " of %" PRId64 " objects failed; the first (%s): %s",
                        k->sum.objects_failed,
                        k->sum.objects_done + k->sum.objects_skipped + k->sum.objects_failed, k->first_what,
                        s3x_error_last()->message);
    } else {
        rc = 0;
    }
    s3x_saved_error_free(&k->fatal_err);
    s3x_saved_error_free(&k->first_err);
    return rc;
}

int s3x_bulk_upload_dir(s3x_bulk *k, const char *dir, const char *bucket, const char *prefix, s3x_bulk_summary *s) {
    return run(k, OP_UPLOAD_DIR, dir, bucket, prefix, NULL, NULL, s);
}

int s3x_bulk_download_dir(s3x_bulk *k, const char *bucket, const char *prefix, const char *dir, s3x_bulk_summary *s) {
    return run(k, OP_DOWNLOAD_DIR, dir, bucket, prefix, NULL, NULL, s);
}

int s3x_bulk_sync_up(s3x_bulk *k, const char *dir, const char *bucket, const char *prefix, s3x_bulk_summary *s) {
    return run(k, OP_SYNC_UP, dir, bucket, prefix, NULL, NULL, s);
}

int s3x_bulk_sync_down(s3x_bulk *k, const char *bucket, const char *prefix, const char *dir, s3x_bulk_summary *s) {
    return run(k, OP_SYNC_DOWN, dir, bucket, prefix, NULL, NULL, s);
}

int s3x_bulk_delete_prefix(s3x_bulk *k, const char *bucket, const char *prefix, s3x_bulk_summary *s) {
    return run(k, OP_DELETE, NULL, bucket, prefix, NULL, NULL, s);
}

int s3x_bulk_copy_prefix(s3x_bulk *k, const char *src_bucket, const char *src_prefix, const char *dst_bucket,
                         const char *dst_prefix, s3x_bulk_summary *s) {
    return run(k, OP_COPY, NULL, src_bucket, src_prefix, dst_bucket, dst_prefix, s);
}
