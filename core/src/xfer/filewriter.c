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
} job;

struct s3x_writer {
    int fd;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work, space;
    job *q;
    int cap, head, count;
    int busy;          /* the thread is writing a job it took */
    int stop;
    int err;           /* errno of the first failed write */
    char **free_bufs;
    int nfree, free_cap;

    /* Writeback, on the writer thread only (read by finish after the join). */
    /* Ending on the writer thread (s3x_writer_end_async). */
    int sync_at_end;
    void (*on_end)(void *);
    void *on_end_arg;
    int ended;               /* under mu */
    int64_t wb_window;       /* 0 = off */
    int64_t wb_pending;      /* bytes written since the last request */
    int64_t wb_lo, wb_hi;    /* the span they cover */
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

static void keep_buffer(s3x_writer *w, char *buf) {
    /* under mu */
    if (w->nfree == w->free_cap) {
        int cap = w->free_cap ? w->free_cap * 2 : 16;
        char **p = realloc(w->free_bufs, (size_t)cap * sizeof *p);
        if (!p) {
            free(buf);
            return;
        }
        w->free_bufs = p;
        w->free_cap = cap;
    }
    w->free_bufs[w->nfree++] = buf;
}

static void *writer_main(void *arg) {
    s3x_writer *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->count && !w->stop) pthread_cond_wait(&w->work, &w->mu);
        if (!w->count && w->stop) {
            if (w->sync_at_end && !w->err) {
                pthread_mutex_unlock(&w->mu);
                int r;
                do r = fsync(w->fd);
                while (r != 0 && errno == EINTR);
                int e = r ? errno : 0;
                pthread_mutex_lock(&w->mu);
                if (e && !w->err) w->err = e;
                w->stats.fsyncs++;
            }
            w->ended = 1;
            break;
        }
        job j = w->q[w->head];
        w->head = (w->head + 1) % w->cap;
        w->count--;
        w->busy = 1;
        int failed = w->err;
        pthread_mutex_unlock(&w->mu);
        int e = failed ? 0 : write_all(w->fd, j.buf, j.len, j.off);
        if (!failed && !e) note_written(w, j.off, j.len);
        pthread_mutex_lock(&w->mu);
        if (e && !w->err) w->err = e;
        keep_buffer(w, j.buf);
        w->busy = 0;
        pthread_cond_broadcast(&w->space);
    }
    void (*cb)(void *) = w->on_end;
    void *cb_arg = w->on_end_arg;
    pthread_mutex_unlock(&w->mu);
    if (cb) cb(cb_arg);
    return NULL;
}

int s3x_writer_start(s3x_writer **out, int fd, int max_queued, int64_t writeback_window) {
    *out = NULL;
    s3x_writer *w = calloc(1, sizeof *w);
    if (!w) return ENOMEM;
    w->fd = fd;
    w->wb_window = writeback_window > 0 ? writeback_window : 0;
    w->cap = max_queued > 0 ? max_queued : 1;
    w->q = calloc((size_t)w->cap, sizeof *w->q);
    if (!w->q) {
        free(w);
        return ENOMEM;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->work, NULL);
    pthread_cond_init(&w->space, NULL);
    int e = pthread_create(&w->thread, NULL, writer_main, w);
    if (e) {
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->work);
        pthread_cond_destroy(&w->space);
        free(w->q);
        free(w);
        return e;
    }
    *out = w;
    return 0;
}

char *s3x_writer_buffer(s3x_writer *w) {
    pthread_mutex_lock(&w->mu);
    char *b = w->nfree ? w->free_bufs[--w->nfree] : NULL;
    pthread_mutex_unlock(&w->mu);
    return b ? b : malloc(S3X_WRITER_BUF);
}

void s3x_writer_release(s3x_writer *w, char *buf) {
    if (!buf) return;
    pthread_mutex_lock(&w->mu);
    keep_buffer(w, buf);
    pthread_mutex_unlock(&w->mu);
}

int s3x_writer_submit(s3x_writer *w, char *buf, size_t len, int64_t off) {
    pthread_mutex_lock(&w->mu);
    while (w->count == w->cap && !w->err) pthread_cond_wait(&w->space, &w->mu);
    int e = w->err;
    if (e) {
        keep_buffer(w, buf);
    } else {
        w->q[(w->head + w->count) % w->cap] = (job){buf, len, off};
        w->count++;
        pthread_cond_signal(&w->work);
    }
    pthread_mutex_unlock(&w->mu);
    return e;
}

int s3x_writer_error(s3x_writer *w) {
    pthread_mutex_lock(&w->mu);
    int e = w->err;
    pthread_mutex_unlock(&w->mu);
    return e;
}

void s3x_writer_end_async(s3x_writer *w, int sync, void (*done)(void *), void *arg) {
    pthread_mutex_lock(&w->mu);
    w->sync_at_end = sync;
    w->on_end = done;
    w->on_end_arg = arg;
    w->stop = 1;
    pthread_cond_signal(&w->work);
    pthread_mutex_unlock(&w->mu);
}

int s3x_writer_ended(s3x_writer *w) {
    pthread_mutex_lock(&w->mu);
    int e = w->ended;
    pthread_mutex_unlock(&w->mu);
    return e;
}

int s3x_writer_finish(s3x_writer *w, s3x_writer_stats *stats) {
    if (stats) memset(stats, 0, sizeof *stats);
    if (!w) return 0;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_signal(&w->work);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    int e = w->err;
    if (stats) *stats = w->stats;
    for (int i = 0; i < w->nfree; i++) free(w->free_bufs[i]);
    free(w->free_bufs);
    for (int i = 0; i < w->count; i++) free(w->q[(w->head + i) % w->cap].buf);
    free(w->q);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->work);
    pthread_cond_destroy(&w->space);
    free(w);
    return e;
}
