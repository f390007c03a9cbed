/* The file writer thread: buffers written at their offsets in any order give
 * the exact bytes; with a writeback window the writer asks the kernel to
 * start writeback once per window's worth of bytes (Linux), without one it
 * never does; a failed write is reported and later submits are refused.
 * Writers sharing a pool: many files, fewer threads, every byte in place,
 * every end callback once, one writer's failure not another's. The hook
 * sees the buffers in the order submitted. */
#include "filewriter.h"
#include "tap.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MiB (1024 * 1024)

static unsigned char byte_at(int64_t off) { return (unsigned char)((off * 2654435761u) >> 13); }

/* A file in the build directory (a real disk here, unlike a tmpfs /tmp on
 * some machines). */
static int temp_file(char *path, size_t n) {
    snprintf(path, n, "test_filewriter-%ld.tmp", (long)getpid());
    return open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
}

/* Writes total bytes as S3X_WRITER_BUF chunks, in a scrambled order (every
 * odd chunk first, then every even one backwards), and checks the file. */
static void write_scrambled(int64_t total, int64_t window, s3x_writer_stats *st) {
    char path[64];
    int fd = temp_file(path, sizeof path);
    CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
    if (fd < 0) return;
    s3x_writer *w = NULL;
    CHECK(s3x_writer_start(&w, NULL, fd, 4, window) == 0, "writer starts");
    int64_t nchunks = (total + S3X_WRITER_BUF - 1) / S3X_WRITER_BUF;
    for (int pass = 0; pass < 2 && w; pass++) {
        for (int64_t k = 0; k < nchunks; k++) {
            int64_t i = pass == 0 ? k : nchunks - 1 - k;
            if ((i & 1) != (pass == 0)) continue;
            int64_t off = i * S3X_WRITER_BUF;
            size_t len = (size_t)(total - off < S3X_WRITER_BUF ? total - off : S3X_WRITER_BUF);
            char *b = s3x_writer_buffer(w);
            if (!b) break;
            for (size_t j = 0; j < len; j++) b[j] = (char)byte_at(off + (int64_t)j);
            CHECK(s3x_writer_submit(w, b, len, off) == 0, "submit at %lld", (long long)off);
        }
    }
    CHECK(s3x_writer_finish(w, st) == 0, "finish reports no error");
    struct stat sb;
    fstat(fd, &sb);
    CHECK(sb.st_size == total, "file size %lld, want %lld", (long long)sb.st_size, (long long)total);
    unsigned char *got = malloc((size_t)total + 1);
    ssize_t n = got ? pread(fd, got, (size_t)total, 0) : -1;
    int same = n == total;
    for (int64_t j = 0; same && j < total; j++) same = got[j] == byte_at(j);
    CHECK(same, "every byte at its offset (%lld bytes)", (long long)total);
    free(got);
    close(fd);
    unlink(path);
}

static void test_writeback_window(void) {
    s3x_writer_stats st;
    write_scrambled(40 * MiB + 12345, 8 * MiB, &st);
    CHECK(st.bytes_written == 40 * MiB + 12345, "bytes written %lld", (long long)st.bytes_written);
#if defined(__linux__)
    /* One request per full window of bytes; the tail is left to the fsync. */
    CHECK(st.writeback_calls == 5, "5 writeback requests for 40 MiB at 8 MiB, got %lld",
          (long long)st.writeback_calls);
#endif
    write_scrambled(40 * MiB + 12345, 0, &st);
    CHECK(st.writeback_calls == 0, "no window, no writeback request (got %lld)", (long long)st.writeback_calls);
    write_scrambled(100, 8 * MiB, &st);
    CHECK(st.writeback_calls == 0 && st.bytes_written == 100, "a small file: no request, 100 bytes");
}

static void test_failed_write(void) {
    /* A read-only descriptor: every pwrite fails with EBADF. */
    char path[64];
    int fd = temp_file(path, sizeof path);
    close(fd);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    s3x_writer *w = NULL;
    CHECK(s3x_writer_start(&w, NULL, fd, 2, 8 * MiB) == 0, "writer starts");
    char *b = s3x_writer_buffer(w);
    memset(b, 'x', 1000);
    CHECK(s3x_writer_submit(w, b, 1000, 0) == 0, "first submit is queued");
    int e = 0;
    for (int i = 0; i < 1000 && !e; i++) {
        e = s3x_writer_error(w);
        if (!e) usleep(1000);
    }
    CHECK(e == EBADF, "the write error is reported: %d", e);
    b = s3x_writer_buffer(w);
    CHECK(s3x_writer_submit(w, b, 1000, 1000) == EBADF, "a later submit is refused");
    s3x_writer_stats st;
    CHECK(s3x_writer_finish(w, &st) == EBADF, "finish reports the error");
    CHECK(st.bytes_written == 0 && st.writeback_calls == 0, "nothing counted as written");
    CHECK(s3x_writer_finish(NULL, &st) == 0 && st.bytes_written == 0, "finish(NULL) is 0 and zeroes stats");
    close(fd);
    unlink(path);
}

/* The hook sees every buffer in the order submitted, with its tag, length
 * and offset, and its bytes before they are written; nothing once a write
 * failed. */
typedef struct seen {
    int64_t tag[64], off[64];
    size_t len[64];
    int first_byte_ok;
    int n;
} seen;

static void record(void *arg, int64_t tag, const char *buf, size_t len, int64_t off) {
    seen *s = arg;
    if (s->n < 64) {
        s->tag[s->n] = tag;
        s->off[s->n] = off;
        s->len[s->n] = len;
        s->n++;
    }
    if ((unsigned char)buf[0] != byte_at(off)) s->first_byte_ok = 0;
}

static void test_hook(void) {
    char path[64];
    int fd = temp_file(path, sizeof path);
    CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
    if (fd < 0) return;
    s3x_writer *w = NULL;
    CHECK(s3x_writer_start(&w, NULL, fd, 2, 0) == 0, "writer starts");
    seen s = {.first_byte_ok = 1};
    s3x_writer_set_hook(w, record, &s);
    /* 20 buffers, tags and offsets out of order, fewer queue places than buffers */
    int ok = 1;
    for (int i = 0; i < 20; i++) {
        int64_t off = (int64_t)((i * 7) % 20) * 1000;
        char *b = s3x_writer_buffer(w);
        for (int j = 0; j < 1000; j++) b[j] = (char)byte_at(off + j);
        if (s3x_writer_submit_tagged(w, b, 1000, off, 100 + i) != 0) ok = 0;
    }
    CHECK(ok, "20 tagged submits");
    CHECK(s3x_writer_finish(w, NULL) == 0, "finish reports no error");
    CHECK(s.n == 20, "the hook saw 20 buffers, got %d", s.n);
    int order = s.n == 20;
    for (int i = 0; order && i < 20; i++)
        order = s.tag[i] == 100 + i && s.off[i] == (int64_t)((i * 7) % 20) * 1000 && s.len[i] == 1000;
    CHECK(order, "in the order submitted, with their tags, offsets and lengths");
    CHECK(s.first_byte_ok, "with their bytes");
    close(fd);
    unlink(path);
    /* A read-only descriptor: the first write fails, and the hook sees no
     * buffer after it. */
    fd = temp_file(path, sizeof path);
    close(fd);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    CHECK(s3x_writer_start(&w, NULL, fd, 4, 0) == 0, "writer starts");
    seen f = {.first_byte_ok = 1};
    s3x_writer_set_hook(w, record, &f);
    char *b = s3x_writer_buffer(w);
    memset(b, 0, 100);
    s3x_writer_submit_tagged(w, b, 100, 0, 1);
    for (int i = 0; i < 1000 && !s3x_writer_error(w); i++) usleep(1000);
    for (int i = 0; i < 3; i++) s3x_writer_submit_tagged(w, s3x_writer_buffer(w), 100, 100 * (i + 1), 2 + i);
    CHECK(s3x_writer_finish(w, NULL) == EBADF, "the write failed");
    CHECK(f.n == 1 && f.tag[0] == 1, "the hook saw the first buffer only (%d)", f.n);
    close(fd);
    unlink(path);
}

/* ---- writers sharing a pool ---- */

typedef struct shared_file {
    char path[80];
    int fd;
    int64_t size;
    s3x_writer *w;
} shared_file;

static pthread_mutex_t g_end_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_ends[64];

static void on_end(void *arg) {
    pthread_mutex_lock(&g_end_mu);
    g_ends[(intptr_t)arg]++;
    pthread_mutex_unlock(&g_end_mu);
}

static int ended_all(shared_file *f, int n) {
    for (int i = 0; i < n; i++)
        if (!s3x_writer_ended(f[i].w)) return 0;
    return 1;
}

/* 40 files (some of one chunk, some of many, one on a read-only descriptor)
 * written at once through a pool of 3 threads, their chunks interleaved as a
 * batch's ranges arrive; half end with an fsync. */
static void test_shared_pool(void) {
    enum { NF = 40, BAD = 7 };
    shared_file f[NF];
    s3x_wpool *pool = s3x_wpool_new(3);
    CHECK(pool != NULL, "pool made");
    if (!pool) return;
    CHECK(s3x_wpool_threads_started(pool) == 0, "no thread before the first writer");
    memset(g_ends, 0, sizeof g_ends);
    for (int i = 0; i < NF; i++) {
        snprintf(f[i].path, sizeof f[i].path, "test_filewriter-%ld-%d.tmp", (long)getpid(), i);
        f[i].fd = open(f[i].path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (i == BAD) {
            close(f[i].fd);
            f[i].fd = open(f[i].path, O_RDONLY | O_CLOEXEC);
        }
        f[i].size = (i % 4 == 0) ? 100 + i : (int64_t)(i % 5 + 1) * S3X_WRITER_BUF + 77 * i;
        CHECK(s3x_writer_start(&f[i].w, pool, f[i].fd, 2, i % 2 ? 8 * MiB : 0) == 0, "writer %d starts", i);
    }
    /* Chunk k of every file, for k = 0, 1, ...: each round touches every writer. */
    int more = 1;
    for (int64_t k = 0; more; k++) {
        more = 0;
        for (int i = 0; i < NF; i++) {
            int64_t off = k * S3X_WRITER_BUF;
            if (off >= f[i].size) continue;
            more = 1;
            size_t len = (size_t)(f[i].size - off < S3X_WRITER_BUF ? f[i].size - off : S3X_WRITER_BUF);
            char *b = s3x_writer_buffer(f[i].w);
            if (!b) continue;
            for (size_t j = 0; j < len; j++) b[j] = (char)byte_at(off + (int64_t)j + i);
            int e = s3x_writer_submit(f[i].w, b, len, off);
            if (i != BAD) CHECK(e == 0, "submit %d at %lld", i, (long long)off);
        }
    }
    for (int i = 0; i < NF; i++) s3x_writer_end_async(f[i].w, i % 2, on_end, (void *)(intptr_t)i);
    int done = 0;
    for (int t = 0; t < 10000 && !(done = ended_all(f, NF)); t++) usleep(1000);
    CHECK(done, "every writer ended within 10 s");
    int64_t threads = s3x_wpool_threads_started(pool);
    CHECK(threads >= 1 && threads <= 3, "40 writers on %lld threads (at most 3)", (long long)threads);
    int fsyncs = 0, ok = 1, ends_ok = 1;
    for (int i = 0; i < NF; i++) {
        s3x_writer_stats st;
        int e = s3x_writer_finish(f[i].w, &st);
        fsyncs += (int)st.fsyncs;
        if (i == BAD) {
            CHECK(e == EBADF, "the read-only file's writer reports EBADF (%d)", e);
        } else {
            if (e || st.bytes_written != f[i].size) ok = 0;
            unsigned char *got = malloc((size_t)f[i].size);
            ssize_t n = got ? pread(f[i].fd, got, (size_t)f[i].size, 0) : -1;
            int same = n == f[i].size;
            for (int64_t j = 0; same && j < f[i].size; j++) same = got[j] == byte_at(j + i);
            if (!same) ok = 0;
            CHECK(same, "file %d: every byte at its offset (%lld bytes)", i, (long long)f[i].size);
            free(got);
        }
        if (g_ends[i] != 1) ends_ok = 0;
        close(f[i].fd);
        unlink(f[i].path);
    }
    CHECK(ok, "every other writer finished with no error and counted its bytes");
    CHECK(ends_ok, "each end callback ran exactly once");
    /* The odd writers asked for an fsync; the failed one (7, odd) skips it. */
    CHECK(fsyncs == NF / 2 - 1, "%d fsyncs, want %d", fsyncs, NF / 2 - 1);
    s3x_wpool_free(pool);
    s3x_wpool_free(NULL);
}

/* A writer finished without an end: its queued writes are still made, with
 * no callback, and the pool goes on serving the next writer. */
static void test_pool_finish_without_end(void) {
    s3x_wpool *pool = s3x_wpool_new(1);
    char path[64];
    for (int round = 0; round < 3 && pool; round++) {
        int fd = temp_file(path, sizeof path);
        s3x_writer *w = NULL;
        CHECK(s3x_writer_start(&w, pool, fd, 4, 0) == 0, "writer %d starts", round);
        for (int k = 0; k < 4; k++) {
            char *b = s3x_writer_buffer(w);
            memset(b, 'a' + k, S3X_WRITER_BUF);
            s3x_writer_submit(w, b, S3X_WRITER_BUF, (int64_t)k * S3X_WRITER_BUF);
        }
        s3x_writer_stats st;
        CHECK(s3x_writer_finish(w, &st) == 0 && st.bytes_written == 4 * (int64_t)S3X_WRITER_BUF && st.fsyncs == 0,
              "round %d: 4 writes made, no fsync", round);
        struct stat sb;
        fstat(fd, &sb);
        CHECK(sb.st_size == 4 * (off_t)S3X_WRITER_BUF, "round %d: file size %lld", round, (long long)sb.st_size);
        close(fd);
        unlink(path);
    }
    CHECK(pool && s3x_wpool_threads_started(pool) == 1, "one thread served three writers in turn");
    s3x_wpool_free(pool);
}

int main(void) {
    test_writeback_window();
    test_failed_write();
    test_hook();
    test_shared_pool();
    test_pool_finish_without_end();
    return tap_summary("filewriter");
}
