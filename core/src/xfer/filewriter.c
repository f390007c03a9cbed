#include "filewriter.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct job {
    char *buf;
    size_t len;
    int64_t off;
    int64_t tag;
} job;

/* Free buffers kept for reuse by every writer of a pool: enough for each
 * thread's queue to refill without a fresh allocation (whose first touch of
 * 256 KiB costs 64 page faults), few enough to be a small, fixed cost. */
#define WPOOL_KEEP_BUFS 32

/* Everything below is under the pool's mutex, except what a thread does with
 * the writer it is running (writes, writeback, fsync), which no other thread
 * touches while w->running is set. */
struct s3x_wpool {
    pthread_mutex_t mu;
    pthread_cond_t work;      /* a writer was listed, or the pool stops */
    s3x_writer *head, *tail;  /* writers with work and no thread on them */
    pthread_t *threads;
    int nthreads, max_threads, idle;
    int stop;
    char **free_bufs;
    int nfree;
    int64_t started;          /* threads started over the pool's life */
    int owned;                /* made by s3x_writer_start for one writer */
};

struct s3x_writer {
    s3x_wpool *pool;
    int fd;
    pthread_cond_t space;     /* the queue has room, or the writer failed */
    pthread_cond_t done;      /* the writer ended and no thread is on it */
    job *q;
    int cap, head, count;
    int listed;               /* on the pool's list */
    int running;              /* a pool thread is working on it */
    s3x_writer *next;
    int stop;
    int err;                  /* errno of the first failed write */

    /* Ending on a pool thread (s3x_writer_end_async). */
    int sync_at_end;
    void (*on_end)(void *);
    void *on_end_arg;
    int ended;
    int64_t wb_window;       /* 0 = off */
    int64_t wb_pending;      /* bytes written since the last request */
    int64_t wb_lo, wb_hi;    /* the span they cover */
    s3x_writer_hook hook;    /* sees each buffer before it is written */
    void *hook_arg;
    s3x_writer_stats stats;
};

/* Starts the kernel's writeback of what was written since the last call,
 * without waiting for it (Linux). The span is of the bytes written since:
 * ranges land out of order, so it can cover pages written back already,
 * which the kernel skips. A filesystem that refuses (ENOSYS,
 * EINVAL, ESPIPE...) turns it off for the file: the final fsync still does
 * all the work, so nothing is lost but the head start. */
static void start_writeback(s3x_writer *w) {
#if defined(__linux__) && defined(SYNC_FILE_RANGE_WRITE)
    int r;
    do r = sync_file_range(w->fd, (off_t)w->wb_lo, (off_t)(w->wb_hi - w->wb_lo), SYNC_FILE_RANGE_WRITE);
    while (r != 0 && errno == EINTR);
    if (r != 0) w->wb_window = 0;
    else w->stats.writeback_calls++;
#else
    w->wb_window = 0;
#endif
    w->wb_pending = 0;
}

static void note_written(s3x_writer *w, int64_t off, size_t len) {
    w->stats.bytes_written += (int64_t)len;
    if (!w->wb_window) return;
    int64_t end = off + (int64_t)len;
    if (!w->wb_pending || off < w->wb_lo) w->wb_lo = off;
    if (!w->wb_pending || end > w->wb_hi) w->wb_hi = end;
    w->wb_pending += (int64_t)len;
    if (w->wb_pending >= w->wb_window) start_writeback(w);
}

static int write_all(int fd, const char *p, size_t left, int64_t off) {
    while (left) {
        ssize_t n = pwrite(fd, p, left, (off_t)off);
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        p += n;
        left -= (size_t)n;
        off += n;
    }
    return 0;
}

static void keep_buffer(s3x_wpool *p, char *buf) {
    /* under mu */
    if (p->nfree < WPOOL_KEEP_BUFS) p->free_bufs[p->nfree++] = buf;
    else free(buf);
}

static void *pool_main(void *arg);

/* Starts one more thread when a writer waits and none is idle (under mu).
 * A failure is not an error while another thread runs: it will get there. */
static int grow(s3x_wpool *p) {
    if (p->idle > 0 || p->nthreads >= p->max_threads) return 0;
    int e = pthread_create(&p->threads[p->nthreads], NULL, pool_main, p);
    if (e) return p->nthreads ? 0 : e;
    p->nthreads++;
    p->started++;
    return 0;
}

/* Puts w on the list of writers with work, unless a thread has it already
 * (that thread looks again before letting it go). Under mu. */
static void list_writer(s3x_wpool *p, s3x_writer *w) {
    if (w->listed || w->running) return;
    w->listed = 1;
    w->next = NULL;
    if (p->tail) p->tail->next = w;
    else p->head = w;
    p->tail = w;
    (void)grow(p);
    pthread_cond_signal(&p->work);
}

/* Runs w until its queue is empty, then ends it if it was told to stop. With
 * mu held on entry and return. A writer is run by one thread at a time, so
 * its writeback span and its end follow its writes as on a thread of its own. */
static void run_writer(s3x_wpool *p, s3x_writer *w) {
    /* At most a queue's worth per turn: then the writer goes to the back of
     * the list, so that one busy file does not keep a thread from others. */
    for (int budget = w->cap; w->count && budget > 0; budget--) {
        job j = w->q[w->head];
        w->head = (w->head + 1) % w->cap;
        w->count--;
        int failed = w->err;
        pthread_mutex_unlock(&p->mu);
        if (!failed && w->hook) w->hook(w->hook_arg, j.tag, j.buf, j.len, j.off);
        int e = failed ? 0 : write_all(w->fd, j.buf, j.len, j.off);
        if (!failed && !e) note_written(w, j.off, j.len);
        pthread_mutex_lock(&p->mu);
        if (e && !w->err) w->err = e;
        keep_buffer(p, j.buf);
        pthread_cond_broadcast(&w->space);
    }
    if (w->count || !w->stop || w->ended) return;
    if (w->sync_at_end && !w->err) {
        pthread_mutex_unlock(&p->mu);
        int r;
        do r = fsync(w->fd);
        while (r != 0 && errno == EINTR);
        int e = r ? errno : 0;
        pthread_mutex_lock(&p->mu);
        if (e && !w->err) w->err = e;
        w->stats.fsyncs++;
    }
    w->ended = 1;
}

static void *pool_main(void *arg) {
    s3x_wpool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->head && !p->stop) {
            p->idle++;
            pthread_cond_wait(&p->work, &p->mu);
            p->idle--;
        }
        if (!p->head) break;
        s3x_writer *w = p->head;
        p->head = w->next;
        if (!p->head) p->tail = NULL;
        w->listed = 0;
        w->running = 1;
        if (p->head) (void)grow(p);
        run_writer(p, w);
        w->running = 0;
        if (w->ended) {
            /* Once done is signalled, s3x_writer_finish may free w: read
             * what the callback needs first. */
            void (*cb)(void *) = w->on_end;
            void *cb_arg = w->on_end_arg;
            w->on_end = NULL;
            pthread_cond_broadcast(&w->done);
            if (cb) {
                pthread_mutex_unlock(&p->mu);
                cb(cb_arg);
                pthread_mutex_lock(&p->mu);
            }
        } else if (w->count || w->stop) {
            list_writer(p, w);
        }
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

s3x_wpool *s3x_wpool_new(int max_threads) {
    s3x_wpool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->max_threads = max_threads > 0 ? max_threads : 1;
    p->threads = calloc((size_t)p->max_threads, sizeof *p->threads);
    p->free_bufs = calloc(WPOOL_KEEP_BUFS, sizeof *p->free_bufs);
    if (!p->threads || !p->free_bufs) {
        free(p->threads);
        free(p->free_bufs);
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    return p;
}

void s3x_wpool_free(s3x_wpool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->nthreads; i++) pthread_join(p->threads[i], NULL);
    for (int i = 0; i < p->nfree; i++) free(p->free_bufs[i]);
    free(p->free_bufs);
    free(p->threads);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work);
    free(p);
}

int64_t s3x_wpool_threads_started(s3x_wpool *p) {
    pthread_mutex_lock(&p->mu);
    int64_t n = p->started;
    pthread_mutex_unlock(&p->mu);
    return n;
}

int s3x_writer_start(s3x_writer **out, s3x_wpool *pool, int fd, int max_queued, int64_t writeback_window) {
    *out = NULL;
    int owned = 0;
    if (!pool) {
        if (!(pool = s3x_wpool_new(1))) return ENOMEM;
        pool->owned = owned = 1;
    }
    s3x_writer *w = calloc(1, sizeof *w);
    if (w) w->cap = max_queued > 0 ? max_queued : 1;
    if (w && !(w->q = calloc((size_t)w->cap, sizeof *w->q))) {
        free(w);
        w = NULL;
    }
    if (!w) {
        if (owned) s3x_wpool_free(pool);
        return ENOMEM;
    }
    w->pool = pool;
    w->fd = fd;
    w->wb_window = writeback_window > 0 ? writeback_window : 0;
    pthread_cond_init(&w->space, NULL);
    pthread_cond_init(&w->done, NULL);
    /* A thread at the start, so that a writer that cannot be served is
     * known now rather than at its first write. */
    pthread_mutex_lock(&pool->mu);
    int e = pool->nthreads ? 0 : grow(pool);
    pthread_mutex_unlock(&pool->mu);
    if (e) {
        pthread_cond_destroy(&w->space);
        pthread_cond_destroy(&w->done);
        free(w->q);
        free(w);
        if (owned) s3x_wpool_free(pool);
        return e;
    }
    *out = w;
    return 0;
}

char *s3x_writer_buffer(s3x_writer *w) {
    s3x_wpool *p = w->pool;
    pthread_mutex_lock(&p->mu);
    char *b = p->nfree ? p->free_bufs[--p->nfree] : NULL;
    pthread_mutex_unlock(&p->mu);
    return b ? b : malloc(S3X_WRITER_BUF);
}

void s3x_writer_release(s3x_writer *w, char *buf) {
    if (!buf) return;
    pthread_mutex_lock(&w->pool->mu);
    keep_buffer(w->pool, buf);
    pthread_mutex_unlock(&w->pool->mu);
}

void s3x_writer_set_hook(s3x_writer *w, s3x_writer_hook hook, void *arg) {
    pthread_mutex_lock(&w->pool->mu);
    w->hook = hook;
    w->hook_arg = arg;
    pthread_mutex_unlock(&w->pool->mu);
}

int s3x_writer_submit(s3x_writer *w, char *buf, size_t len, int64_t off) {
    return s3x_writer_submit_tagged(w, buf, len, off, 0);
}

int s3x_writer_submit_tagged(s3x_writer *w, char *buf, size_t len, int64_t off, int64_t tag) {
    s3x_wpool *p = w->pool;
    pthread_mutex_lock(&p->mu);
    while (w->count == w->cap && !w->err) pthread_cond_wait(&w->space, &p->mu);
    int e = w->err;
    if (e) {
        keep_buffer(p, buf);
    } else {
        w->q[(w->head + w->count) % w->cap] = (job){buf, len, off, tag};
        w->count++;
        list_writer(p, w);
    }
    pthread_mutex_unlock(&p->mu);
    return e;
}

int s3x_writer_error(s3x_writer *w) {
    pthread_mutex_lock(&w->pool->mu);
    int e = w->err;
    pthread_mutex_unlock(&w->pool->mu);
    return e;
}

void s3x_writer_end_async(s3x_writer *w, int sync, void (*done)(void *), void *arg) {
    s3x_wpool *p = w->pool;
    pthread_mutex_lock(&p->mu);
    w->sync_at_end = sync;
    w->on_end = done;
    w->on_end_arg = arg;
    w->stop = 1;
    list_writer(p, w);
    pthread_mutex_unlock(&p->mu);
}

int s3x_writer_ended(s3x_writer *w) {
    pthread_mutex_lock(&w->pool->mu);
    int e = w->ended && !w->running;
    pthread_mutex_unlock(&w->pool->mu);
    return e;
}

int s3x_writer_finish(s3x_writer *w, s3x_writer_stats *stats) {
    if (stats) memset(stats, 0, sizeof *stats);
    if (!w) return 0;
    s3x_wpool *p = w->pool;
    pthread_mutex_lock(&p->mu);
    if (!w->stop) {
        /* Not ended by s3x_writer_end_async: the queued writes are still
         * made (as before a close), with no fsync and no callback. */
        w->stop = 1;
        w->on_end = NULL;
    }
    if (!w->ended) list_writer(p, w);
    while (!w->ended || w->running) pthread_cond_wait(&w->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    int e = w->err;
    if (stats) *stats = w->stats;
    pthread_cond_destroy(&w->space);
    pthread_cond_destroy(&w->done);
    free(w->q);
    free(w);
    if (p->owned) s3x_wpool_free(p);
    return e;
}
