#include "chunked.h"
#include "error.h"
#include <stdio.h>
#include <string.h>

#define MIN_READ 4096

enum { PH_HEAD, PH_DATA, PH_DONE };

int s3x_chunked_kind_ok(int kind) {
    return kind == S3X_CHECKSUM_CRC32C || kind == S3X_CHECKSUM_CRC32 || kind == S3X_CHECKSUM_SHA256;
}

static int hex_len(int64_t v) {
    int n = 1;
    while (v >>= 4) n++;
    return n;
}

static size_t b64_len(int kind) { return kind == S3X_CHECKSUM_SHA256 ? 44 : 8; }

int64_t s3x_chunked_length(int kind, int64_t size) {
    if (!s3x_chunked_kind_ok(kind) || size < 0) return -1;
    int64_t full = size / S3X_CHUNK_DATA, rem = size % S3X_CHUNK_DATA;
    int64_t n = full * (hex_len(S3X_CHUNK_DATA) + 2 + S3X_CHUNK_DATA + 2);
    if (rem) n += hex_len(rem) + 2 + rem + 2;
    /* "0\r\n" + "<header>:<value>\r\n" + "\r\n" */
    return n + 3 + (int64_t)(strlen(s3x_checksum_header(kind)) + 1 + b64_len(kind) + 2) + 2;
}

int s3x_chunked_begin(s3x_chunked *c, int kind, int64_t size) {
    s3x_chunked_end(c);
    memset(c, 0, sizeof *c);
    if (!s3x_chunked_kind_ok(kind) || size < 0)
        return s3x_seterr(S3X_EINVAL, "aws-chunked trailer: checksum kind %d cannot trail a body", kind);
    c->kind = kind;
    c->size = size;
    c->phase = PH_HEAD;
    if (s3x_hasher_init(&c->h, kind)) return s3x_seterr(S3X_ENOMEM, "out of memory starting a checksum");
    c->hashing = 1;
    return 0;
}

static void set_frame(s3x_chunked *c, int len) {
    c->frame_len = len > 0 ? (size_t)len : 0;
    c->frame_off = 0;
}

int64_t s3x_chunked_fill(s3x_chunked *c, char *dst, size_t cap, s3x_pull_fn pull, void *payload) {
    size_t w = 0;
    while (w < cap) {
        if (c->frame_off < c->frame_len) {
            size_t k = c->frame_len - c->frame_off;
            if (k > cap - w) k = cap - w;
            memcpy(dst + w, c->frame + c->frame_off, k);
            c->frame_off += k;
            w += k;
            continue;
        }
        if (c->phase == PH_DONE) break;
        if (c->phase == PH_HEAD) {
            if (c->done < c->size) {
                int64_t k = c->size - c->done < S3X_CHUNK_DATA ? c->size - c->done : S3X_CHUNK_DATA;
                set_frame(c, snprintf(c->frame, sizeof c->frame, "%llx\r\n", (unsigned long long)k));
                c->chunk_left = k;
                c->phase = PH_DATA;
            } else {
                s3x_hasher_final_b64(&c->h, c->value);
                c->hashing = 0;
                set_frame(c, snprintf(c->frame, sizeof c->frame, "0\r\n%s:%s\r\n\r\n", s3x_checksum_header(c->kind),
                                      c->value));
                c->phase = PH_DONE;
            }
            continue;
        }
        size_t want = cap - w;
        if ((int64_t)want > c->chunk_left) want = (size_t)c->chunk_left;
        if (w > 0 && want < MIN_READ && (int64_t)want < c->chunk_left) break;
        int64_t n = pull(dst + w, want, payload);
        if (n <= 0 || (size_t)n > want) return -1;
        s3x_hasher_update(&c->h, dst + w, (size_t)n);
        w += (size_t)n;
        c->done += n;
        c->chunk_left -= n;
        if (c->chunk_left == 0) {
            set_frame(c, snprintf(c->frame, sizeof c->frame, "\r\n"));
            c->phase = PH_HEAD;
        }
    }
    return (int64_t)w;
}

void s3x_chunked_end(s3x_chunked *c) {
    if (c->hashing) s3x_hasher_cleanup(&c->h);
    c->hashing = 0;
}
