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

/* The same for a destination that will not be read again while it is still
 * in the cache: a piece of a region of `region` bytes, the whole of which is
 * written before it is read (a stream's range buffer, a download into
 * memory). From S3X_BYTES_COLD_REGION bytes of region and
 * S3X_BYTES_COLD_MIN bytes of copy, on x86-64, the whole cache lines of dst
 * are written with non-temporal stores, which do not read each line into
 * the cache before writing it (about 2x memcpy's speed into memory out of
 * the cache on the Intel machine of docs/performance.md, 16 KiB pieces),
 * and an sfence ends the copy, so the bytes are visible to any thread the
 * region is handed to afterwards. Elsewhere it is s3x_bytes_copy. */
void *s3x_bytes_copy_to(void *dst, const void *src, size_t n, size_t region);

#define S3X_BYTES_COLD_REGION ((size_t)4 << 20)
#define S3X_BYTES_COLD_MIN 8192

/* Benchmark-only: nonzero makes s3x_bytes_copy a plain memcpy (set once, from
 * S3X_COPY_PLAIN=1 in the environment when the first client is made), and
 * s3x_bytes_copy_to then also a plain memcpy. */
extern int s3x_bytes_copy_plain;
/* Benchmark-only: zero makes s3x_bytes_copy_to always s3x_bytes_copy (from
 * S3X_COPY_COLD=0, read with S3X_COPY_PLAIN). */
extern int s3x_bytes_copy_cold;

#endif
