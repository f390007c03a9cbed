/* File writers for downloads (private). The loop thread gathers a range's
 * bytes into buffers of S3X_WRITER_BUF bytes and hands each full one over; a
 * writer thread pwrites it at its offset while the loop goes back to the
 * sockets.
 *
 * Threads: the writers of one batch share a pool of threads (s3x_wpool),
 * started as writers wait and none is idle, up to a cap, and kept until the
 * pool is freed; a writer is run by one thread at a time. A batch of 5,000
 * small files so starts a handful of threads rather than 5,000, and reuses
 * its buffers (a fresh 256 KiB buffer costs 64 page faults on first touch).
 * A writer started without a pool gets a private one-thread pool.
 *
 * Writes of one object's bytes at their own offsets can land in any
 * order (a retried range rewrites the same bytes), so the only rule is that
 * every write is done before the file is synced and renamed.
 *
 * Writeback: when the file will be fsynced before its rename, an fsync at the
 * end that finds the whole object dirty in the page cache waits for all of it
 * to reach the disk at once (0.35 s for 1 GiB, 0.5-0.75 s for 4 GiB on the
 * development machine's disk), after the network is done. Given a window, the writer asks the kernel to start writing back each
 * window's worth of bytes as soon as it has written them (Linux
 * sync_file_range, asynchronous), so the disk works while the network does
 * and the final fsync finds little left. Elsewhere the window does nothing
 * and the fsync does all the work, as before. */
#ifndef S3X_FILEWRITER_H
#define S3X_FILEWRITER_H
#include <stddef.h>
#include <stdint.h>

#define S3X_WRITER_BUF (256u * 1024u)

typedef struct s3x_writer s3x_writer;
typedef struct s3x_wpool s3x_wpool;

/* A pool of at most max_threads writer threads (none started yet), or NULL
 * when out of memory. */
s3x_wpool *s3x_wpool_new(int max_threads);
/* Stops and joins the pool's threads and frees it. Every writer of the pool
 * must have been finished. Accepts NULL. */
void s3x_wpool_free(s3x_wpool *p);
/* Threads the pool has started so far (for tests and statistics). */
int64_t s3x_wpool_threads_started(s3x_wpool *p);

/* Bytes per writeback request when the file is to be made durable: small
 * enough that the disk starts early and, while it keeps up, dirty pages do
 * not pile up; large enough that the calls cost little (see docs/performance.md for the
 * windows measured; a build may override it, 0 turning writeback off). */
#ifndef S3X_WRITEBACK_WINDOW
#define S3X_WRITEBACK_WINDOW (8 * 1024 * 1024)
#endif

/* What the writer did, for the transfer's result. */
typedef struct s3x_writer_stats {
    int64_t writeback_calls;    /* writeback requests made to the kernel */
    int64_t bytes_written;      /* bytes pwritten (a retried range counts again) */
    int64_t fsyncs;             /* fsyncs made by s3x_writer_end_async */
} s3x_writer_stats;

/* At most max_queued buffers wait for the writer; submit blocks beyond that.
 * writeback_window: after each such number of bytes written, start the
 * kernel's writeback of them (0 = never: the kernel writes back when it
 * likes, which is right when nothing will fsync the file). */
int s3x_writer_start(s3x_writer **out, s3x_wpool *pool, int fd, int max_queued, int64_t writeback_window);
/* An empty buffer of S3X_WRITER_BUF bytes, or NULL when out of memory. */
char *s3x_writer_buffer(s3x_writer *w);
/* Gives back a buffer that was not submitted. */
void s3x_writer_release(s3x_writer *w, char *buf);
/* Queues len bytes of buf for offset off; the writer owns buf from now on.
 * Returns 0, or the errno of an earlier failed write (then nothing is queued
 * and buf is released). */
int s3x_writer_submit(s3x_writer *w, char *buf, size_t len, int64_t off);
/* The same with a tag for the hook (s3x_writer_submit's is 0). */
int s3x_writer_submit_tagged(s3x_writer *w, char *buf, size_t len, int64_t off, int64_t tag);
/* A hook sees every submitted buffer on the writer's thread just before it
 * is written, with its tag: in the order submitted, one call at a time, and
 * none after a write failed. Set it before the first submit; whatever it
 * keeps is the caller's to read once s3x_writer_finish has returned (or
 * after s3x_writer_ended says 1). */
typedef void (*s3x_writer_hook)(void *arg, int64_t tag, const char *buf, size_t len, int64_t off);
void s3x_writer_set_hook(s3x_writer *w, s3x_writer_hook hook, void *arg);
/* The errno of a failed write so far, or 0 (does not wait). */
int s3x_writer_error(s3x_writer *w);
/* Ends the writer on a pool thread, so the loop thread does not wait on the
 * disk: every queued write, then an fsync of the file when sync, then
 * done(arg) on that thread (to wake the loop). Nothing may be submitted
 * afterwards; s3x_writer_finish then collects the outcome at once. */
void s3x_writer_end_async(s3x_writer *w, int sync, void (*done)(void *), void *arg);
/* 1 once the writer has ended (after s3x_writer_end_async), else 0. */
int s3x_writer_ended(s3x_writer *w);
/* Waits for every queued write, frees the writer (and its pool when it was a
 * private one); returns
 * the errno of the first failed write, or 0. Accepts NULL. stats, when not
 * NULL, receives what the writer did (zeros for NULL w). */
int s3x_writer_finish(s3x_writer *w, s3x_writer_stats *stats);

#endif
