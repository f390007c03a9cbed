#include "pool.h"
#include "s3xfer/params.h"
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Part buffers of a few MiB are mapped on their own, starting on a 2 MiB
 * boundary, and offered to the kernel for transparent huge pages (where it
 * has them on madvise, as Debian's default is). A part buffer's pages are
 * first touched once per process by the bytes that fill it: in 4 KiB pages
 * an 8 MiB buffer takes 2,048 page faults, in huge pages 4 (docs/
 * performance.md, "Part buffers in huge pages"). The buffer keeps its exact
 * size: only whole 2 MiB pieces inside it can be huge pages, the rest is
 * 4 KiB pages, so what it costs the memory budget is what it holds. */
#define HUGE_PAGE ((size_t)2 << 20)
#define HUGE_MIN ((size_t)2 << 20)

/* Under AddressSanitizer part buffers stay malloc's, which it guards. */
#if defined(__SANITIZE_ADDRESS__)
#define POOL_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POOL_SANITIZED 1
#endif
#endif

static int huge_off;
static pthread_once_t huge_once = PTHREAD_ONCE_INIT;

/* S3X_POOL_NO_HUGE=1 (benchmarks only: the same build with and without)
 * keeps every buffer malloc's. Read once, so a buffer is freed the way it
 * was made. */
static void huge_init(void) {
    const char *v = getenv("S3X_POOL_NO_HUGE");
    huge_off = v && *v && strcmp(v, "0") != 0;
#ifdef POOL_SANITIZED
    huge_off = 1;
#endif
}

static int mapped(size_t size) {
    pthread_once(&huge_once, huge_init);
    return size >= HUGE_MIN && !huge_off;
}

static size_t page_round(size_t n) {
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    return (n + pg - 1) / pg * pg;
}

static char *buffer_new(size_t size) {
    if (!mapped(size)) return malloc(size ? size : 1);
    if (size > SIZE_MAX / 2) return NULL;
    size_t len = page_round(size);
    char *m = mmap(NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    /* Keep the len bytes from the first 2 MiB boundary; unmap the rest. */
    char *b = (char *)(((uintptr_t)m + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (b > m) munmap(m, (size_t)(b - m));
    munmap(b + len, (size_t)(m + len + HUGE_PAGE - (b + len)));
#ifdef MADV_HUGEPAGE
    (void)madvise(b, len, MADV_HUGEPAGE); /* a hint: refused or ignored, the buffer is the same */
#endif
    return b;
}

static void buffer_free(char *buf, size_t size) {
    if (mapped(size))
        munmap(buf, page_round(size));
    else
        free(buf);
}

void s3x_pool_init(s3x_pool *p, int kind, size_t buf_size, int max_buffers) {
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->buf_size = buf_size;
    p->max_buffers = max_buffers;
}

static void free_buffer(s3x_pool *p, char *buf, size_t size) {
    buffer_free(buf, size);
    if (p->budget) p->budget->used -= (int64_t)size;
    p->alive--;
    p->held_bytes -= (int64_t)size;
}

void s3x_pool_set_size(s3x_pool *p, size_t buf_size) {
    if (buf_size == p->buf_size) return;
    p->buf_size = buf_size;
    if (p->mixed) return;
    int keep = 0;
    for (int i = 0; i < p->nfree; i++) {
        if (p->free_sizes[i] == buf_size) {
            p->free_list[keep] = p->free_list[i];
            p->free_sizes[keep++] = p->free_sizes[i];
        } else {
            free_buffer(p, p->free_list[i], p->free_sizes[i]);
        }
    }
    p->nfree = keep;
}

void s3x_pool_set_limit(s3x_pool *p, int max_buffers) {
    p->max_buffers = max_buffers;
    if (p->kind != S3X_POOL_BOUNDED) return;
    while (p->alive > max_buffers && p->nfree > 0) {
        p->nfree--;
        free_buffer(p, p->free_list[p->nfree], p->free_sizes[p->nfree]);
    }
}

char *s3x_pool_get(s3x_pool *p, int *oom) {
    if (oom) *oom = 0;
    if (p->kind != S3X_POOL_MALLOC) {
        for (int i = p->nfree - 1; i >= 0; i--) {
            if (p->free_sizes[i] == p->buf_size) {
                char *b = p->free_list[i];
                p->free_list[i] = p->free_list[p->nfree - 1];
                p->free_sizes[i] = p->free_sizes[p->nfree - 1];
                p->nfree--;
                return b;
            }
        }
    }
    /* The free list only ever holds buffers of the current size (set_size and
     * put drop others), so an exhausted bounded pool has nothing to recycle. */
    if (p->kind == S3X_POOL_BOUNDED && p->alive >= p->max_buffers) return NULL;
    s3x_membudget *mb = p->budget;
    if (mb && mb->used + (int64_t)p->buf_size > mb->limit) {
        /* Kept buffers of other sizes give their room back first. */
        for (int i = p->nfree - 1; i >= 0 && mb->used + (int64_t)p->buf_size > mb->limit; i--) {
            free_buffer(p, p->free_list[i], p->free_sizes[i]);
            p->free_list[i] = p->free_list[p->nfree - 1];
            p->free_sizes[i] = p->free_sizes[p->nfree - 1];
            p->nfree--;
        }
        if (mb->used + (int64_t)p->buf_size > mb->limit) {
            mb->waits++;
            return NULL;
        }
    }
    char *b = buffer_new(p->buf_size);
    if (!b) {
        if (oom) *oom = 1;
        return NULL;
    }
    if (mb) {
        mb->used += (int64_t)p->buf_size;
        if (mb->used > mb->peak) mb->peak = mb->used;
    }
    p->alive++;
    p->allocations++;
    p->bytes_allocated += (int64_t)p->buf_size;
    p->held_bytes += (int64_t)p->buf_size;
    if (p->held_bytes > p->peak_held_bytes) p->peak_held_bytes = p->held_bytes;
    return b;
}

void s3x_pool_put(s3x_pool *p, char *buf, size_t size) {
    if (!buf) return;
    if (p->kind == S3X_POOL_MALLOC || (size != p->buf_size && !p->mixed)) {
        free_buffer(p, buf, size);
        return;
    }
    if (p->nfree == p->free_cap) {
        int cap = p->free_cap ? p->free_cap * 2 : 16;
        char **fl = realloc(p->free_list, (size_t)cap * sizeof *fl);
        if (fl) p->free_list = fl;
        size_t *fs = fl ? realloc(p->free_sizes, (size_t)cap * sizeof *fs) : NULL;
        if (fs) p->free_sizes = fs;
        if (!fl || !fs) {
            free_buffer(p, buf, size);
            return;
        }
        p->free_cap = cap;
    }
    p->free_list[p->nfree] = buf;
    p->free_sizes[p->nfree++] = size;
}

void s3x_pool_release(s3x_pool *p) {
    for (int i = 0; i < p->nfree; i++) free_buffer(p, p->free_list[i], p->free_sizes[i]);
    p->nfree = 0;
    free(p->free_list);
    free(p->free_sizes);
    p->free_list = NULL;
    p->free_sizes = NULL;
    p->free_cap = 0;
}

void s3x_pool_reset_counters(s3x_pool *p) {
    p->allocations = 0;
    p->bytes_allocated = 0;
    p->peak_held_bytes = p->held_bytes;
    p->waits = 0;
}
