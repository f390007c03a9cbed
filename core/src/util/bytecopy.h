/* Bulk copies of transfer bytes (private). */
#ifndef S3X_BYTECOPY_H
#define S3X_BYTECOPY_H
#include <stddef.h>

/* Copies n bytes from src to dst (which must not overlap), as memcpy does,
 * and returns dst. When dst lies 1 to 31 bytes past src modulo 4096 and the
 * copy is larger than S3X_BYTES_COPY_PIECE, it is made in pieces of that
 * size. On this project's machine (glibc 2.36, an AMD EPYC with ERMS and
 * FSRM) memcpy copies more than 2048 bytes with the string instruction, which
 * moves about 2.8 GB/s at those distances against 13-15 GB/s at others, and
 * 2048-byte pieces (vector loads and stores) about 8.5 GB/s there; from 32
 * bytes on, memcpy is fast again and pieces would be slower
 * (benchmarks/copy_alias.py). The loop's copies from libcurl's buffer into
 * range buffers keep one distance for long runs of a range, and 2-5% of a
 * download's bytes were seen in the window. */
void *s3x_bytes_copy(void *dst, const void *src, size_t n);

#define S3X_BYTES_COPY_PIECE 2048

/* Benchmark-only: nonzero makes s3x_bytes_copy a plain memcpy (set once, from
 * S3X_COPY_PLAIN=1 in the environment when the first client is made). */
extern int s3x_bytes_copy_plain;

#endif
