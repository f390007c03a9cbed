/* A listing of bucket/prefix (ListObjectsV2) run as a transfer on a
 * scheduler (private): its pages are side requests on the same loop as the
 * transfers they feed, with the same retries and rate gate, so listing a
 * million keys never blocks the loop and transfers start while it goes on.
 *
 * Memory: the page being consumed and at most one more, fetched ahead
 * while the first is consumed. Keys are checked, as they are given out, to
 * be under the prefix and to ascend (a sync's merge relies on it); a server
 * that repeats or reorders keys (a cycling continuation token, say) fails
 * the listing rather than looping.
 *
 * Orders: S3 lists keys in ascending byte order (S3X_ORDER_BYTES). Servers
 * built on a directory tree (SeaweedFS) list a directory's entries by name
 * and each subdirectory's keys at its name's place, which is byte order
 * with '/' below every other byte (S3X_ORDER_SEGMENTS): "a/b" before "a-b".
 * S3X_ORDER_ANY accepts a key that ascends in either (enough to catch a
 * loop when the order does not matter).
 *
 * Ownership: the lister belongs to its caller (s3x_lister_free); its
 * transfer belongs to the scheduler until it ends, and the scheduler's
 * owner then calls t->kind->close(t, rc) as for any transfer (the transfer's
 * owner pointer is NULL, which tells a batch it is not one of its items). */
#ifndef S3X_LISTER_H
#define S3X_LISTER_H
#include "scheduler.h"
#include "s3xml.h"

typedef struct s3x_lister s3x_lister;

/* Starts listing bucket/prefix (prefix may be "" or NULL) on S with the
 * knobs in params. Returns 0 or <0 (thread error set). */
int s3x_lister_open(s3x_sched *S, const int64_t *params, const char *bucket, const char *prefix,
                    s3x_lister **out);
/* The next object: 1 with *obj set (valid until the next call), 0 when none
 * is available yet (a page is on its way: call again after a loop turn),
 * S3X_LISTER_END when the listing is complete, or <0 when it failed (the
 * thread error says why). */
#define S3X_LISTER_END 2
int s3x_lister_next(s3x_lister *l, const s3x_xml_object **obj);
enum { S3X_ORDER_ANY = 0, S3X_ORDER_BYTES = 1, S3X_ORDER_SEGMENTS = 2 };
/* <0, 0, >0 as a sorts before, with, after b in that order. */
int s3x_order_cmp(const char *a, const char *b, int order);
/* The order the keys given out from now on are checked in (ANY at first). */
void s3x_lister_set_order(s3x_lister *l, int order);
/* The Server header of the first page (NULL before it, or without one). */
const char *s3x_lister_server(const s3x_lister *l);
/* Pages received so far. */
int s3x_lister_pages(const s3x_lister *l);
/* Requests and retries of the listing so far. */
void s3x_lister_counts(const s3x_lister *l, int64_t *requests, int64_t *retries);
/* Stops the listing (cancels its transfer; the loop ends it). */
void s3x_lister_cancel(s3x_lister *l);
/* 1 once its transfer has ended and been closed (safe to free). */
int s3x_lister_closed(const s3x_lister *l);
/* Frees a lister whose transfer has been closed (or never started). */
void s3x_lister_free(s3x_lister *l);
#endif
