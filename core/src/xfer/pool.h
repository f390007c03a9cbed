/* Part-buffer pools (private). Used from the transfer's loop thread only.
 *   MALLOC   a fresh buffer for every get, freed on put;
 *   CACHE    a free list that keeps every buffer it ever made (never bounded);
 *   BOUNDED  at most max_buffers buffers alive at once; get returns NULL
 *            when they are all in use and the caller waits for a put.
 * Every byte is counted so results can report what each kind did. */
#ifndef S3X_POOL_H
#define S3X_POOL_H
#include <stddef.h>
#include <stdint.h>

/* A byte budget shared by pools (a batch's): buffers alive, in use or
 * kept, never sum above limit. */
typedef struct s3x_membudget {
    int64_t limit;
    int64_t used;
    int64_t peak;
    int64_t waits;          /* gets refused because the budget was spent */
} s3x_membudget;

typedef struct s3x_pool {
    int kind;               /* s3x_pool_kind */
    s3x_membudget *budget;  /* NULL, or the budget every allocation is charged to */
    int mixed;              /* keeps buffers of every size (a batch's pool, shared by transfers of
                               different part sizes); set_size then drops nothing */
    size_t buf_size;        /* size of the buffers handed out now */
    int max_buffers;        /* BOUNDED: buffers alive at most */
    int alive;              /* buffers allocated and not yet freed */
    char **free_list;       /* (buffer, size) pairs kept for reuse */
    size_t *free_sizes;
    int nfree, free_cap;
    /* counters */
    int64_t allocations;
    int64_t bytes_allocated;
    int64_t held_bytes;     /* bytes of buffers alive (in use or kept) */
    int64_t peak_held_bytes;
    int64_t waits;
} s3x_pool;

void s3x_pool_init(s3x_pool *p, int kind, size_t buf_size, int max_buffers);
/* Changes the buffer size for later gets (buffers of the old size kept in
 * the free list are released). */
void s3x_pool_set_size(s3x_pool *p, size_t buf_size);
/* Sets how many buffers a BOUNDED pool may have alive; kept buffers beyond
 * the new limit are freed at once (a pool reused by a transfer with a lower
 * concurrency must not keep the earlier transfer's surplus). */
void s3x_pool_set_limit(s3x_pool *p, int max_buffers);
/* A buffer of buf_size bytes, or NULL: out of memory, or (BOUNDED) every
 * buffer is in use, or the budget is spent (kept buffers of other sizes are
 * freed first to make room). *oom is set to 1 when the reason is a failed
 * malloc. */
char *s3x_pool_get(s3x_pool *p, int *oom);
/* Returns a buffer of `size` bytes obtained from s3x_pool_get. */
void s3x_pool_put(s3x_pool *p, char *buf, size_t size);
/* Frees every kept buffer (counters stay). */
void s3x_pool_release(s3x_pool *p);
void s3x_pool_reset_counters(s3x_pool *p);

#endif
