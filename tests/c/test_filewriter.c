/* The file writer thread: buffers written at their offsets in any order give
 * the exact bytes; with a writeback window the writer asks the kernel to
 * start writeback once per window's worth of bytes (Linux), without one it
 * never does; a failed write is reported and later submits are refused. */
#include "filewriter.h"
#include "tap.h"

#include <errno.h>
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
    CHECK(s3x_writer_start(&w, fd, 4, window) == 0, "writer starts");
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
    CHECK(s3x_writer_start(&w, fd, 2, 8 * MiB) == 0, "writer starts");
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

int main(void) {
    test_writeback_window();
    test_failed_write();
    return tap_summary("filewriter");
}
