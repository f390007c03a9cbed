/* What the bulk layer asks of a batch beyond the public API (private).
 *
 * A source feeds a batch from its loop: a directory walk, a listing, a
 * merge of the two. The loop calls pull whenever fewer than
 * S3X_BATCH_LOW_WATER items are queued, with room = how many it may add, so
 * a run over a million objects never queues more than a few thousand
 * records. pull runs on the loop's thread: it may add items (the add calls),
 * open transfers of its own on the scheduler (a listing), and must not
 * block for long. It returns 1 while it has more to give (it is called
 * again on the next turn, after the loop waited on the sockets for at most
 * 100 ms when it added nothing), or 0 once it is done (never called again),
 * or <0 when it failed (thread error set; never called again). The batch is
 * idle only once its source is done and every item finished. */
#ifndef S3X_BATCH_INTERNAL_H
#define S3X_BATCH_INTERNAL_H
#include "s3xfer/batch.h"
#include "scheduler.h"

#define S3X_BATCH_LOW_WATER 512

typedef int (*s3x_batch_pull_fn)(s3x_batch *b, int room, void *payload);
/* Called on every turn of the loop while the batch is not idle, before
 * pull and after it is done (the source's progress reports and its cancel
 * checks go here, so they go on while the last transfers finish). */
typedef void (*s3x_batch_tick_fn)(s3x_batch *b, void *payload);
/* Sets the batch's one source (before it runs); tick may be NULL. */
void s3x_batch_set_source(s3x_batch *b, s3x_batch_pull_fn pull, s3x_batch_tick_fn tick, void *payload);
/* The loop's scheduler (valid on the loop's thread while it runs). */
s3x_sched *s3x_batch_sched(s3x_batch *b);
/* Queues one DeleteObjects of keys[0..n) (1..1000; borrowed until cb.done
 * is called); each key's outcome is left in *out once it succeeded (the
 * caller frees it), before cb.done. */
int s3x_batch_delete_keys(s3x_batch *b, const char *bucket, char **keys, size_t n, s3x_delete_result **out,
                          const s3x_batch_cb *cb);
/* The knobs items added now would get. */
const int64_t *s3x_batch_params(const s3x_batch *b);
#endif
