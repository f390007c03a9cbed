/* aws-chunked request bodies with a trailing checksum (private).
 *
 * A body sent as STREAMING-UNSIGNED-PAYLOAD-TRAILER is framed as
 *     <hex size>\r\n<data>\r\n ... 0\r\n<checksum header>:<base64>\r\n\r\n
 * so its checksum is computed while the bytes go out and travels after them:
 * a part read in place is read once instead of once to hash and once to send.
 * Chunk sizes are fixed, so the encoded length (Content-Length) is known
 * before the first byte. */
#ifndef S3X_CHUNKED_H
#define S3X_CHUNKED_H
#include <stddef.h>
#include <stdint.h>
#include "checksum.h"

/* Data bytes per chunk: a chunk's header ("3fff7\r\n"), data and CRLF fill a
 * 256 KiB curl upload buffer exactly, so each read of a part is one pread. */
#define S3X_CHUNK_DATA (256 * 1024 - 9)

#define S3X_STREAMING_UNSIGNED_TRAILER "STREAMING-UNSIGNED-PAYLOAD-TRAILER"

/* Pulls up to cap decoded bytes into dst; returns how many (> 0), or < 0 on failure. */
typedef int64_t (*s3x_pull_fn)(char *dst, size_t cap, void *payload);

typedef struct s3x_chunked {
    int kind;               /* s3x_checksum in the trailer: CRC32C, CRC32 or SHA256 */
    int64_t size;           /* decoded body size */
    int64_t done;           /* decoded bytes emitted so far */
    int64_t chunk_left;     /* data bytes still to emit in the current chunk */
    int phase;
    char frame[128];        /* framing bytes waiting to be emitted */
    size_t frame_len, frame_off;
    int hashing;            /* h holds state to release */
    s3x_hasher h;
    char value[48];         /* base64 checksum, set once the trailer is framed */
} s3x_chunked;

/* 1 if kind can travel in a trailer (CRC32C, CRC32, SHA-256; not MD5). */
int s3x_chunked_kind_ok(int kind);
/* The encoded length of a size-byte body with a kind trailer, or -1 for a bad kind. */
int64_t s3x_chunked_length(int kind, int64_t size);
/* Starts an encoding (again, after a retry). Returns 0 or S3X_ENOMEM/S3X_EINVAL. */
int s3x_chunked_begin(s3x_chunked *c, int kind, int64_t size);
/* Writes up to cap encoded bytes into dst, pulling data through pull. Returns
 * the bytes written, 0 once everything (trailer included) has been written,
 * or -1 when pull failed. Never starts a data read of under 4 KiB when it has
 * already written something and the chunk has more: the caller gets a shorter
 * buffer rather than a tiny read. */
int64_t s3x_chunked_fill(s3x_chunked *c, char *dst, size_t cap, s3x_pull_fn pull, void *payload);
/* Releases the hasher (safe to call twice, or on a zeroed struct). */
void s3x_chunked_end(s3x_chunked *c);

#endif
