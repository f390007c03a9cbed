/* A writer thread for file downloads (private). The loop thread gathers a
 * range's bytes into buffers of S3X_WRITER_BUF bytes and hands each full one
 * over; the writer pwrites it at its offset while the loop goes back to the
 * sockets. Writes of one object's bytes at their own offsets can land in any
 * order (a retried range rewrites the same bytes), so the only rule is that
 * every write is done before the file is synced and renamed. */
#ifndef S3X_FILEWRITER_H
#define S3X_FILEWRITER_H
#include <stddef.h>
#include <stdint.h>

#define S3X_WRITER_BUF (256u * 1024u)

typedef struct s3x_writer s3x_writer;

/* At most max_queued buffers wait for the writer; submit blocks beyond that. */
int s3x_writer_start(s3x_writer **out, int fd, int max_queued);
/* An empty buffer of S3X_WRITER_BUF bytes, or NULL when out of memory. */
char *s3x_writer_buffer(s3x_writer *w);
/* Gives back a buffer that was not submitted. */
void s3x_writer_release(s3x_writer *w, char *buf);
/* Queues len bytes of buf for offset off; the writer owns buf from now on.
 * Returns 0, or the errno of an earlier failed write (then nothing is queued
 * and buf is released). */
int s3x_writer_submit(s3x_writer *w, char *buf, size_t len, int64_t off);
/* The errno of a failed write so far, or 0 (does not wait). */
int s3x_writer_error(s3x_writer *w);
/* Waits for every queued write, stops the thread, frees everything; returns
 * the errno of the first failed write, or 0. Accepts NULL. */
int s3x_writer_finish(s3x_writer *w);

#endif
