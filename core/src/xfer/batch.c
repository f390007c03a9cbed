/* A batch: many transfers on one part scheduler (see s3xfer/batch.h).
 *
 * Who owns what:
 *   - the batch owns its items (one per transfer added: the arguments, the
 *     knobs copied at the add, the result and error once finished), the
 *     scheduler, the shared buffer pool and its memory budget;
 *   - an item that runs owns a transfer of its kind (an upload's or a
 *     download's run, opened by kinds.h) until the kind's close;
 *   - the loop (s3x_batch_run's thread, or the batch's own thread) is the
 *     only one to touch the scheduler, the pool and running transfers;
 *     other threads only queue items, set cancel flags and read finished
 *     outcomes, under the batch's mutex.
 *
 * An item is QUEUED until the loop opens it: at most `active_max` are open
 * at once, so a batch of a million objects holds a million small records,
 * not a million open files, runs or writer threads. */
#include "batch_internal.h"
#include "error.h"
#include "kinds.h"
#include "params_internal.h"
#include "s3xfer/batch.h"
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

enum { IT_QUEUED, IT_RUNNING, IT_DONE };
enum { HOW_FILE, HOW_MEM, HOW_STREAM, HOW_COPY, HOW_DELETE };

typedef struct item {
    s3x_batch_id id;
    int upload;               /* 1 upload, 0 download */
    int how;                  /* HOW_* */
    char *bucket, *key, *path;
    char *src_bucket, *src_key;    /* HOW_COPY: the source (bucket, key: the destination) */
    char *content_type, *if_match; /* HOW_COPY options */
    char **dkeys;             /* HOW_DELETE: the keys (borrowed), their outcome left in *dout */
    size_t ndkeys;
    s3x_delete_result **dout;
    int directive;
    const void *data;         /* upload memory */
    void *buf;                /* download memory */
    size_t len;               /* data's length or buf's capacity */
    int fd;                   /* a stream from or to a descriptor, else -1 */
    s3x_read_fn read_fn;
    s3x_write_fn write_fn;
    void *io_payload;
    s3x_batch_cb cb;
    int64_t params[S3X_PARAM__COUNT];
    int state;                /* IT_* */
    atomic_int cancel;        /* asked (QUEUED or RUNNING) */
    s3x_xfer x;               /* while RUNNING */
    s3x_transfer *t;
    s3x_result res;
    int rc;
    s3x_saved_error err;
    struct item *next;        /* the queue */
} item;

struct s3x_batch {
    s3x_client *client;
    int64_t params[S3X_PARAM__COUNT];
    s3x_sched sched;
    s3x_pool pool;
    s3x_membudget budget;
    int pool_ready;

    pthread_mutex_t mu;
    pthread_cond_t cv_work;   /* the background loop waits for items */
    pthread_cond_t cv_idle;   /* s3x_batch_wait waits for idleness */
    item **items;             /* by id - 1 - base; NULL once forgotten */
    size_t nitems, cap;       /* slots used (ids base+1 .. base+nitems) and allocated */
    uint64_t base;            /* ids before base+1 were all forgotten and their slots dropped */
    size_t lead;              /* items[0 .. lead) are known to be forgotten */
    int64_t nqueued;          /* items QUEUED */
    s3x_batch_pull_fn pull;   /* the source (batch_internal.h), or NULL */
    s3x_batch_tick_fn tick;
    void *pull_payload;
    int source_done;
    item *qhead, *qtail;      /* QUEUED, in order */
    int active;               /* RUNNING */
    int active_max;
    int looping;              /* a loop runs (run or thread) */
    int stopping;             /* free: the thread ends */
    int thread_started;
    pthread_t thread;
    int efd;                  /* eventfd: finished transfers (background) */
    int first_rc;
    s3x_saved_error first_err;
    s3x_batch_stats stats;
};

/* ---- handle ------------------------------------------------------------------- */

int s3x_batch_new(s3x_batch **out, s3x_client *client) {
    if (!out) return s3x_seterr(S3X_EINVAL, "out is NULL");
    *out = NULL;
    if (!client) return s3x_seterr(S3X_EINVAL, "client is NULL");
    s3x_batch *b = calloc(1, sizeof *b);
    if (!b) return s3x_seterr(S3X_ENOMEM, "out of memory");
    b->client = client;
    s3x_params_defaults(b->params);
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv_work, NULL);
    pthread_cond_init(&b->cv_idle, NULL);
    b->efd = -1;
    *out = b;
    return 0;
}

int s3x_batch_set(s3x_batch *b, s3x_param p, int64_t v) {
    if (!b) return s3x_seterr(S3X_EINVAL, "batch is NULL");
    int rc = s3x_param_check(p, v, S3X_SCOPE_UPLOAD | S3X_SCOPE_DOWNLOAD | S3X_SCOPE_BATCH);
    if (rc) return rc;
    pthread_mutex_lock(&b->mu);
    b->params[p] = v;
    pthread_mutex_unlock(&b->mu);
    return 0;
}

int s3x_batch_get(const s3x_batch *b, s3x_param p, int64_t *v) {
    if (!b) return s3x_seterr(S3X_EINVAL, "batch is NULL");
    if (!v) return s3x_seterr(S3X_EINVAL, "value is NULL");
    const s3x_param_info *pi = s3x_param_info_get(p);
    if (!pi || !(pi->scope & (S3X_SCOPE_UPLOAD | S3X_SCOPE_DOWNLOAD | S3X_SCOPE_BATCH)))
        return s3x_seterr(S3X_EINVAL, "knob %s does not apply to a batch", pi ? pi->name : "?");
    *v = b->params[p];
    return 0;
}

/* The memory budget: MEMORY_LIMIT, or the bound one transfer has. */
static int64_t budget_of(const int64_t *params) {
    int64_t limit = params[S3X_PARAM_MEMORY_LIMIT];
    if (limit > 0) return limit;
    return (params[S3X_PARAM_CONCURRENCY] + 1) * params[S3X_PARAM_PART_SIZE];
}

static void item_free(item *it) {
    if (!it) return;
    free(it->bucket);
    free(it->key);
    free(it->path);
    free(it->src_bucket);
    free(it->src_key);
    free(it->content_type);
    free(it->if_match);
    s3x_saved_error_free(&it->err);
    free(it);
}

void s3x_batch_free(s3x_batch *b) {
    if (!b) return;
    s3x_batch_cancel_all(b);
    pthread_mutex_lock(&b->mu);
    b->stopping = 1;
    pthread_cond_broadcast(&b->cv_work);
    pthread_mutex_unlock(&b->mu);
    if (b->thread_started) {
        s3x_http_wakeup(b->client);
        pthread_join(b->thread, NULL);
    }
    for (size_t i = 0; i < b->nitems; i++) item_free(b->items[i]);
    free(b->items);
    s3x_sched_fini(&b->sched);
    if (b->pool_ready) s3x_pool_release(&b->pool);
    if (b->efd >= 0) close(b->efd);
    s3x_saved_error_free(&b->first_err);
    pthread_cond_destroy(&b->cv_work);
    pthread_cond_destroy(&b->cv_idle);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

/* ---- adding ------------------------------------------------------------------- */

static char *dup_or_null(const char *s, int *oom) {
    if (!s) return NULL;
    char *d = strdup(s);
    if (!d) *oom = 1;
    return d;
}

/* Checks what can be checked now, copies the strings, queues the item. */
static int add(s3x_batch *b, item *proto, const s3x_batch_cb *cb, s3x_batch_id *id) {
    if (!b) return s3x_seterr(S3X_EINVAL, "batch is NULL");
    int rc = s3x_check_target(proto->bucket, proto->key);
    if (rc) return rc;
    if (proto->how == HOW_COPY && (rc = s3x_check_target(proto->src_bucket, proto->src_key))) return rc;
    if (proto->how == HOW_FILE && (!proto->path || !*proto->path)) return s3x_seterr(S3X_EINVAL, "path is empty");
    if (proto->upload && proto->how == HOW_MEM && proto->len && !proto->data)
        return s3x_seterr(S3X_EINVAL, "data is NULL but len is %zu", proto->len);
    if (!proto->upload && proto->how == HOW_MEM && proto->len && !proto->buf) return s3x_seterr(S3X_EINVAL, "buf is NULL");
    if (proto->how == HOW_STREAM && proto->fd < 0 && !proto->read_fn && !proto->write_fn)
        return s3x_seterr(S3X_EINVAL, "invalid file descriptor %d", proto->fd);
    item *it = calloc(1, sizeof *it);
    if (!it) return s3x_seterr(S3X_ENOMEM, "out of memory");
    *it = *proto;
    int oom = 0;
    it->bucket = dup_or_null(proto->bucket, &oom);
    it->key = dup_or_null(proto->key, &oom);
    it->path = dup_or_null(proto->path, &oom);
    it->src_bucket = dup_or_null(proto->src_bucket, &oom);
    it->src_key = dup_or_null(proto->src_key, &oom);
    it->content_type = dup_or_null(proto->content_type, &oom);
    it->if_match = dup_or_null(proto->if_match, &oom);
    if (cb) it->cb = *cb;
    it->state = IT_QUEUED;
    pthread_mutex_lock(&b->mu);
    if (!oom && b->nitems == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        item **n = realloc(b->items, cap * sizeof *n);
        if (n) {
            b->items = n;
            b->cap = cap;
        } else {
            oom = 1;
        }
    }
    if (oom) {
        pthread_mutex_unlock(&b->mu);
        item_free(it);
        return s3x_seterr(S3X_ENOMEM, "out of memory");
    }
    memcpy(it->params, b->params, sizeof it->params);
    b->items[b->nitems++] = it;
    it->id = b->base + b->nitems;
    b->nqueued++;
    if (b->qtail) b->qtail->next = it;
    else b->qhead = it;
    b->qtail = it;
    b->stats.added++;
    if (id) *id = it->id;
    pthread_cond_broadcast(&b->cv_work);
    pthread_mutex_unlock(&b->mu);
    /* A loop blocked on the sockets looks at the queue now. */
    if (b->thread_started) s3x_http_wakeup(b->client);
    return 0;
}

int s3x_batch_upload_file(s3x_batch *b, const char *bucket, const char *key, const char *path,
                          const s3x_batch_cb *cb, s3x_batch_id *id) {
    item p = {.upload = 1, .how = HOW_FILE, .bucket = (char *)bucket, .key = (char *)key, .path = (char *)path, .fd = -1};
    return add(b, &p, cb, id);
}

int s3x_batch_upload_memory(s3x_batch *b, const char *bucket, const char *key, const void *data, size_t len,
                            const s3x_batch_cb *cb, s3x_batch_id *id) {
    item p = {.upload = 1, .how = HOW_MEM, .bucket = (char *)bucket, .key = (char *)key, .data = data, .len = len, .fd = -1};
    return add(b, &p, cb, id);
}

int s3x_batch_upload_fd(s3x_batch *b, const char *bucket, const char *key, int fd, const s3x_batch_cb *cb,
                        s3x_batch_id *id) {
    if (fd < 0) return s3x_seterr(S3X_EINVAL, "invalid file descriptor %d", fd);
    item p = {.upload = 1, .how = HOW_STREAM, .bucket = (char *)bucket, .key = (char *)key, .fd = fd};
    return add(b, &p, cb, id);
}

int s3x_batch_upload_stream(s3x_batch *b, const char *bucket, const char *key, s3x_read_fn read_fn,
                            void *read_payload, const s3x_batch_cb *cb, s3x_batch_id *id) {
    if (!read_fn) return s3x_seterr(S3X_EINVAL, "read_fn is NULL");
    item p = {.upload = 1, .how = HOW_STREAM, .bucket = (char *)bucket, .key = (char *)key, .fd = -1,
              .read_fn = read_fn, .io_payload = read_payload};
    return add(b, &p, cb, id);
}

int s3x_batch_download_file(s3x_batch *b, const char *bucket, const char *key, const char *path,
                            const s3x_batch_cb *cb, s3x_batch_id *id) {
    item p = {.upload = 0, .how = HOW_FILE, .bucket = (char *)bucket, .key = (char *)key, .path = (char *)path, .fd = -1};
    return add(b, &p, cb, id);
}

int s3x_batch_download_memory(s3x_batch *b, const char *bucket, const char *key, void *buf, size_t cap,
                              const s3x_batch_cb *cb, s3x_batch_id *id) {
    item p = {.upload = 0, .how = HOW_MEM, .bucket = (char *)bucket, .key = (char *)key, .buf = buf, .len = cap, .fd = -1};
    return add(b, &p, cb, id);
}

int s3x_batch_download_fd(s3x_batch *b, const char *bucket, const char *key, int fd, const s3x_batch_cb *cb,
                          s3x_batch_id *id) {
    if (fd < 0) return s3x_seterr(S3X_EINVAL, "invalid file descriptor %d", fd);
    item p = {.upload = 0, .how = HOW_STREAM, .bucket = (char *)bucket, .key = (char *)key, .fd = fd};
    return add(b, &p, cb, id);
}

int s3x_batch_download_stream(s3x_batch *b, const char *bucket, const char *key, s3x_write_fn write_fn,
                              void *write_payload, const s3x_batch_cb *cb, s3x_batch_id *id) {
    if (!write_fn) return s3x_seterr(S3X_EINVAL, "write_fn is NULL");
    item p = {.upload = 0, .how = HOW_STREAM, .bucket = (char *)bucket, .key = (char *)key, .fd = -1,
              .write_fn = write_fn, .io_payload = write_payload};
    return add(b, &p, cb, id);
}

int s3x_batch_copy_ex(s3x_batch *b, const char *src_bucket, const char *src_key, const char *dst_bucket,
                      const char *dst_key, const s3x_copy_opts *opts, const s3x_batch_cb *cb, s3x_batch_id *id) {
    if (opts && opts->metadata_directive != S3X_METADATA_COPY && opts->metadata_directive != S3X_METADATA_REPLACE)
        return s3x_seterr(S3X_EINVAL, "metadata_directive %d is neither S3X_METADATA_COPY nor S3X_METADATA_REPLACE",
                          opts->metadata_directive);
    item p = {.upload = 1, .how = HOW_COPY, .bucket = (char *)dst_bucket, .key = (char *)dst_key, .fd = -1,
              .src_bucket = (char *)src_bucket, .src_key = (char *)src_key,
              .content_type = opts ? (char *)opts->content_type : NULL, .if_match = opts ? (char *)opts->if_match : NULL,
              .directive = opts ? opts->metadata_directive : S3X_METADATA_COPY};
    return add(b, &p, cb, id);
}

int s3x_batch_delete_keys(s3x_batch *b, const char *bucket, char **keys, size_t n, s3x_delete_result **out,
                          const s3x_batch_cb *cb) {
    if (!keys || n == 0) return s3x_seterr(S3X_EINVAL, "no keys to delete");
    item p = {.upload = 1, .how = HOW_DELETE, .bucket = (char *)bucket, .key = keys[0], .fd = -1,
              .dkeys = keys, .ndkeys = n, .dout = out};
    return add(b, &p, cb, NULL);
}

int s3x_batch_copy(s3x_batch *b, const char *src_bucket, const char *src_key, const char *dst_bucket,
                   const char *dst_key, const s3x_batch_cb *cb, s3x_batch_id *id) {
    return s3x_batch_copy_ex(b, src_bucket, src_key, dst_bucket, dst_key, NULL, cb, id);
}

/* ---- the loop ---------------------------------------------------------------------- */

/* Bytes a new buffer could get now: the budget left, plus kept buffers
 * that would be freed to make room. */
static int64_t budget_room(const s3x_batch *b) {
    int64_t room = b->budget.limit - b->budget.used;
    for (int i = 0; i < b->pool.nfree; i++) room += (int64_t)b->pool.free_sizes[i];
    return room;
}

/* A transfer that reads its first part while it opens (a stream upload) or
 * holds a buffer for its first range (a stream download) needs room for one
 * part now; others take their buffers as they feed. */
static int64_t needs_at_open(const item *it) {
    if (it->how != HOW_STREAM) return 0;
    return it->params[S3X_PARAM_PART_SIZE];
}

/* An item finished (or never started): its outcome is recorded, its done
 * callback called (without the lock), waiters told. */
static void finish_item(s3x_batch *b, item *it, int rc) {
    if (rc) s3x_error_save(&it->err);
    pthread_mutex_lock(&b->mu);
    if (it->state == IT_RUNNING) b->active--;
    it->state = IT_DONE;
    it->rc = rc;
    b->stats.finished++;
    b->stats.bytes += it->res.bytes;
    if (rc) {
        b->stats.failed++;
        if (!b->first_rc) {
            b->first_rc = rc;
            s3x_error_save(&b->first_err);
        }
    }
    int fail_fast = rc && it->params[S3X_PARAM_FAIL_FAST];
    pthread_mutex_unlock(&b->mu);
    if (fail_fast) s3x_batch_cancel_all(b);
    if (it->cb.done) {
        /* The callback sees this transfer's error as the thread's last. */
        if (rc) s3x_error_restore(&it->err);
        s3x_error e = {it->err.code, it->err.http_status, it->err.message ? it->err.message : "",
                       it->err.s3_code ? it->err.s3_code : "", it->err.request_id ? it->err.request_id : "",
                       it->err.sys_errno};
        it->cb.done(b, it->id, rc, rc ? &e : NULL, &it->res, it->cb.payload);
    }
    if (b->efd >= 0) {
        uint64_t one = 1;
        ssize_t w = write(b->efd, &one, sizeof one);
        (void)w;
    }
}

/* The scheduler says a transfer ended: close it (aborting what a failure
 * left) and record its outcome. */
static void on_end(s3x_sched *s, s3x_transfer *t, void *payload) {
    (void)s;
    s3x_batch *b = payload;
    item *it = t->owner;
    if (!it) { /* a transfer of the source's own (a listing): it keeps its outcome */
        int trc = t->ok ? 0 : s3x_error_restore(&t->x->err);
        t->kind->close(t, trc);
        return;
    }
    int rc = t->ok ? 0 : s3x_error_restore(&it->x.err);
    if (!t->ok && !rc) rc = s3x_seterr(S3X_EINTERNAL, "a transfer failed without an error");
    t->kind->close(t, rc);
    if (rc && it->x.err.code) s3x_error_restore(&it->x.err);
    it->t = NULL;
    s3x_xfer_destroy(&it->x);
    finish_item(b, it, rc);
}

/* Opens one item on the scheduler: its knobs, the shared pool, its first
 * steps. A failure to open finishes it at once with its error. */
static void open_item(s3x_batch *b, item *it) {
    s3x_xfer *x = &it->x;
    s3x_xfer_init(x, b->client, it->upload ? S3X_SCOPE_UPLOAD : S3X_SCOPE_DOWNLOAD);
    memcpy(x->params, it->params, sizeof x->params);
    x->params[S3X_PARAM_CONCURRENCY] = b->sched.max_conns;
    x->params[S3X_PARAM_MEMORY_LIMIT] = b->budget.limit;
    x->batched = 1;
    x->bufs = &b->pool;
    x->progress = it->cb.progress;
    x->progress_payload = it->cb.payload;
    /* A cancel that came while the item was being opened (init cleared
     * the flag) is kept. */
    if (atomic_load(&it->cancel)) atomic_store(&x->cancel, 1);
    s3x_xfer_begin(x, &it->res);
    s3x_sched *S = &b->sched;
    const char *bk = it->bucket, *k = it->key;
    int rc;
    s3x_transfer *t = NULL;
    if (it->how == HOW_DELETE) {
        rc = s3x_delete_open(S, x, bk, (const char *const *)it->dkeys, it->ndkeys, it->dout, &t);
    } else if (it->how == HOW_COPY) {
        s3x_copy_opts o = {it->directive, it->content_type, it->if_match};
        rc = s3x_copy_open(S, x, it->src_bucket, it->src_key, bk, k, &o, &t);
    } else if (it->upload) {
        rc = it->how == HOW_FILE  ? s3x_upload_open_file(S, x, bk, k, it->path, &t)
             : it->how == HOW_MEM ? s3x_upload_open_memory(S, x, bk, k, it->data, it->len, &t)
                                  : s3x_upload_open_stream(S, x, bk, k, it->fd, it->read_fn, it->io_payload, &t);
    } else {
        rc = it->how == HOW_FILE  ? s3x_download_open_file(S, x, bk, k, it->path, &t)
             : it->how == HOW_MEM ? s3x_download_open_memory(S, x, bk, k, it->buf, it->len, &t)
                                  : s3x_download_open_stream(S, x, bk, k, it->fd, it->write_fn, it->io_payload, &t);
    }
    if (rc) {
        s3x_xfer_destroy(x);
        finish_item(b, it, rc);
        return;
    }
    t->owner = it;
    it->t = t;
}

/* Opens queued items while fewer than active_max run. Cancelled ones end
 * without a request; one whose single part buffer could never fit the
 * budget is refused; one that needs a buffer at once waits for room. */
static void activate(s3x_batch *b) {
    for (;;) {
        pthread_mutex_lock(&b->mu);
        item *it = b->qhead;
        if (!it || b->active >= b->active_max) {
            pthread_mutex_unlock(&b->mu);
            return;
        }
        int64_t need = needs_at_open(it);
        int cancelled = atomic_load(&it->cancel);
        if (!cancelled && need > b->budget.limit) {
            /* refused below */
        } else if (!cancelled && need > 0 && need > budget_room(b) && b->active > 0) {
            pthread_mutex_unlock(&b->mu);
            return; /* waits for room; the queue keeps its order */
        }
        b->qhead = it->next;
        if (!b->qhead) b->qtail = NULL;
        it->next = NULL;
        b->nqueued--;
        it->state = IT_RUNNING;
        b->active++;
        b->stats.running = b->active;
        pthread_mutex_unlock(&b->mu);
        if (cancelled) {
            finish_item(b, it, s3x_seterr(S3X_ECANCELLED, "%s s3://%s/%s cancelled",
                                          it->how == HOW_COPY ? "copy to" : it->how == HOW_DELETE ? "delete in" : it->upload ? "upload to" : "download of", it->bucket, it->key));
        } else if (need > b->budget.limit) {
            finish_item(b, it, s3x_seterr(S3X_ENOMEM, "%s s3://%s/%s: a part buffer of %" PRId64
                                          " bytes cannot fit the batch's memory_limit %" PRId64
                                          "; lower part_size or raise memory_limit",
                                          it->upload ? "upload to" : "download of", it->bucket, it->key, need,
                                          b->budget.limit));
        } else {
            open_item(b, it);
        }
    }
}

/* The loop's state is set up on its first run: the knobs in force then
 * (concurrency, budget, pool kind) are the batch's from then on. */
static void setup_loop(s3x_batch *b) {
    if (b->pool_ready) return;
    int64_t c = b->params[S3X_PARAM_CONCURRENCY];
    s3x_sched_init(&b->sched, b->client, (int)c);
    b->sched.on_end = on_end;
    b->sched.end_payload = b;
    b->budget.limit = budget_of(b->params);
    b->stats.budget = b->budget.limit;
    /* Open transfers: one per connection and a few more, so a connection
     * freed by a small object finds the next one ready. */
    b->active_max = (int)(c + 4);
    int kind = (int)b->params[S3X_PARAM_POOL];
    s3x_pool_init(&b->pool, kind, (size_t)b->params[S3X_PARAM_PART_SIZE], INT32_MAX);
    b->pool.budget = &b->budget;
    b->pool.mixed = 1;
    b->pool_ready = 1;
}

static int idle_locked(const s3x_batch *b) {
    return !b->qhead && b->active == 0 && (!b->pull || b->source_done);
}

/* Lets the source add items while the queue runs low. */
static void pull_source(s3x_batch *b) {
    if (b->tick) b->tick(b, b->pull_payload);
    if (!b->pull || b->source_done) return;
    pthread_mutex_lock(&b->mu);
    int64_t room = S3X_BATCH_LOW_WATER - b->nqueued;
    pthread_mutex_unlock(&b->mu);
    if (room <= 0) return;
    int rc = b->pull(b, (int)room, b->pull_payload);
    if (rc <= 0) {
        pthread_mutex_lock(&b->mu);
        b->source_done = 1;
        pthread_mutex_unlock(&b->mu);
    }
}

void s3x_batch_set_source(s3x_batch *b, s3x_batch_pull_fn pull, s3x_batch_tick_fn tick, void *payload) {
    pthread_mutex_lock(&b->mu);
    b->pull = pull;
    b->tick = tick;
    b->pull_payload = payload;
    b->source_done = 0;
    pthread_mutex_unlock(&b->mu);
}

s3x_sched *s3x_batch_sched(s3x_batch *b) { return &b->sched; }

const int64_t *s3x_batch_params(const s3x_batch *b) { return b->params; }

/* Runs until idle (background: until stopping, waiting for work). */
static void loop(s3x_batch *b, int background) {
    for (;;) {
        pull_source(b);
        activate(b);
        int n = s3x_sched_turn(&b->sched, 100);
        (void)n;
        pthread_mutex_lock(&b->mu);
        b->stats.running = b->active;
        if (idle_locked(b)) {
            pthread_cond_broadcast(&b->cv_idle);
            if (!background || b->stopping) {
                pthread_mutex_unlock(&b->mu);
                return;
            }
            while (idle_locked(b) && !b->stopping) pthread_cond_wait(&b->cv_work, &b->mu);
        }
        pthread_mutex_unlock(&b->mu);
    }
}

int s3x_batch_run(s3x_batch *b) {
    if (!b) return s3x_seterr(S3X_EINVAL, "batch is NULL");
    pthread_mutex_lock(&b->mu);
    if (b->looping) {
        pthread_mutex_unlock(&b->mu);
        return s3x_seterr(S3X_EINVAL, "the batch is already running%s",
                          b->thread_started ? " in the background" : "");
    }
    b->looping = 1;
    b->first_rc = 0;
    s3x_saved_error_free(&b->first_err);
    setup_loop(b);
    pthread_mutex_unlock(&b->mu);
    loop(b, 0);
    pthread_mutex_lock(&b->mu);
    b->looping = 0;
    int rc = b->first_rc;
    if (rc) s3x_error_restore(&b->first_err);
    pthread_mutex_unlock(&b->mu);
    return rc;
}

static void *thread_main(void *arg) {
    loop(arg, 1);
    return NULL;
}

int s3x_batch_start(s3x_batch *b) {
    if (!b) return s3x_seterr(S3X_EINVAL, "batch is NULL");
    pthread_mutex_lock(&b->mu);
    if (b->thread_started) {
        pthread_mutex_unlock(&b->mu);
        return 0;
    }
    if (b->looping) {
        pthread_mutex_unlock(&b->mu);
        return s3x_seterr(S3X_EINVAL, "the batch is already running (s3x_batch_run)");
    }
    b->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (b->efd < 0) {
        int e = errno;
        pthread_mutex_unlock(&b->mu);
        return s3x_seterr_errno(S3X_EIO, e, "eventfd");
    }
    setup_loop(b);
    b->looping = 1;
    int e = pthread_create(&b->thread, NULL, thread_main, b);
    if (e) {
        b->looping = 0;
        pthread_mutex_unlock(&b->mu);
        return s3x_seterr(S3X_ENOMEM, "cannot start the batch's thread: %s", strerror(e));
    }
    b->thread_started = 1;
    pthread_mutex_unlock(&b->mu);
    return 0;
}

int s3x_batch_fd(const s3x_batch *b) { return b ? b->efd : -1; }

void s3x_batch_ack(s3x_batch *b) {
    if (!b || b->efd < 0) return;
    uint64_t v;
    ssize_t r = read(b->efd, &v, sizeof v);
    (void)r;
}

int s3x_batch_wait(s3x_batch *b, int timeout_ms) {
    if (!b) return 1;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    if (timeout_ms >= 0) {
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&b->mu);
    int rc = 0;
    while (!idle_locked(b) && rc == 0) {
        if (!b->looping) break; /* nothing drives it: never idle by waiting */
        rc = timeout_ms >= 0 ? pthread_cond_timedwait(&b->cv_idle, &b->mu, &until)
                             : pthread_cond_wait(&b->cv_idle, &b->mu);
    }
    int idle = idle_locked(b);
    pthread_mutex_unlock(&b->mu);
    return idle;
}

/* ---- cancel and outcomes ------------------------------------------------------------ */

static item *find_locked(s3x_batch *b, s3x_batch_id id) {
    if (id <= b->base || id > b->base + b->nitems) return NULL;
    return b->items[id - 1 - b->base];
}

/* Drops the leading slots of forgotten items once they are most of the
 * array, so a long run that forgets what it is done with keeps a table the
 * size of what is still pending, not of everything it ever ran. */
static void compact_locked(s3x_batch *b) {
    while (b->lead < b->nitems && !b->items[b->lead]) b->lead++;
    if (b->lead < 1024 || b->lead < b->nitems / 2) return;
    memmove(b->items, b->items + b->lead, (b->nitems - b->lead) * sizeof *b->items);
    b->nitems -= b->lead;
    b->base += b->lead;
    b->lead = 0;
}

static void cancel_locked(item *it) {
    if (it->state == IT_DONE) return;
    atomic_store(&it->cancel, 1);
    if (it->state == IT_RUNNING) atomic_store(&it->x.cancel, 1);
}

void s3x_batch_cancel(s3x_batch *b, s3x_batch_id id) {
    if (!b) return;
    pthread_mutex_lock(&b->mu);
    item *it = find_locked(b, id);
    if (it) cancel_locked(it);
    pthread_mutex_unlock(&b->mu);
    s3x_http_wakeup(b->client);
}

void s3x_batch_cancel_all(s3x_batch *b) {
    if (!b) return;
    pthread_mutex_lock(&b->mu);
    for (size_t i = 0; i < b->nitems; i++)
        if (b->items[i]) cancel_locked(b->items[i]);
    pthread_mutex_unlock(&b->mu);
    s3x_http_wakeup(b->client);
}

int s3x_batch_result(s3x_batch *b, s3x_batch_id id, int *rc, s3x_result *result) {
    if (!b) return s3x_seterr(S3X_EINVAL, "batch is NULL");
    pthread_mutex_lock(&b->mu);
    item *it = find_locked(b, id);
    if (!it || it->state != IT_DONE) {
        pthread_mutex_unlock(&b->mu);
        return s3x_seterr(S3X_EINVAL, "transfer %" PRIu64 " is %s", (uint64_t)id,
                          !it ? "unknown or forgotten" : "not finished");
    }
    if (rc) *rc = it->rc;
    if (result) *result = it->res;
    if (it->rc) s3x_error_restore(&it->err);
    pthread_mutex_unlock(&b->mu);
    return 0;
}

void s3x_batch_forget(s3x_batch *b, s3x_batch_id id) {
    if (!b) return;
    pthread_mutex_lock(&b->mu);
    item *it = find_locked(b, id);
    if (it && it->state == IT_DONE) {
        item_free(it);
        b->items[id - 1 - b->base] = NULL;
        compact_locked(b);
    }
    pthread_mutex_unlock(&b->mu);
}

void s3x_batch_get_stats(s3x_batch *b, s3x_batch_stats *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!b) return;
    pthread_mutex_lock(&b->mu);
    *out = b->stats;
    out->running = b->active;
    out->budget = b->pool_ready ? b->budget.limit : budget_of(b->params);
    out->peak_buffer_bytes = b->budget.peak;
    out->buffer_waits = b->budget.waits;
    pthread_mutex_unlock(&b->mu);
}
