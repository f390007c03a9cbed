/* The aws-chunked encoder (core/src/proto/chunked.c). The input chooses the
 * checksum, the body's size (up to about 1 MiB, so bodies span several
 * 256 KiB chunks; its bytes repeat the input), the sizes of the buffers the
 * encoder is asked to fill, and how many bytes each pull returns.
 *
 * Properties: the encoder writes exactly s3x_chunked_length() bytes, never
 * more than asked, returns 0 only when done; the framing decodes back to the
 * body, every chunk but the last is S3X_CHUNK_DATA bytes, and the trailer
 * carries the checksum header with the checksum computed here independently
 * (CRC32C, CRC32 or SHA-256 of the whole body). */
#include "fuzz.h"
#include "checksum.h"
#include "chunked.h"
#include "error.h"

#include <openssl/evp.h>

typedef struct src {
    const uint8_t *body;
    size_t size, off;
    fuzz_in *ctl; /* how many bytes each pull gives */
} src;

static int64_t pull(char *dst, size_t cap, void *payload) {
    src *s = payload;
    FUZZ_ASSERT(cap > 0, "pull asked for 0 bytes");
    FUZZ_ASSERT(s->off + cap <= s->size, "pull asked past the end of the body (%zu + %zu > %zu)", s->off, cap,
                s->size);
    size_t k = cap;
    uint8_t b = fuzz_u8(s->ctl);
    if (b & 0x80) k = 1 + (size_t)(b & 0x7f) * 97 % cap; /* a short read */
    memcpy(dst, s->body + s->off, k);
    s->off += k;
    return (int64_t)k;
}

static void expected_b64(int kind, const uint8_t *body, size_t n, char out[48]) {
    unsigned char raw[32];
    size_t rn = 4;
    if (kind == S3X_CHECKSUM_SHA256) {
        unsigned int len = 0;
        FUZZ_ASSERT(EVP_Digest(body, n, raw, &len, EVP_sha256(), NULL) && len == 32, "sha256");
        rn = 32;
    } else {
        uint32_t v = kind == S3X_CHECKSUM_CRC32C ? s3x_crc32c(0, body, n) : s3x_crc32(0, body, n);
        raw[0] = (unsigned char)(v >> 24);
        raw[1] = (unsigned char)(v >> 16);
        raw[2] = (unsigned char)(v >> 8);
        raw[3] = (unsigned char)v;
    }
    s3x_base64(raw, rn, out);
}

/* Decodes the framing of enc[0..n) and checks it against body and trailer. */
static void decode(const char *enc, size_t n, const uint8_t *body, size_t size, int kind, const char *value) {
    size_t i = 0, got = 0;
    for (;;) {
        size_t start = i;
        uint64_t k = 0;
        while (i < n && ((enc[i] >= '0' && enc[i] <= '9') || (enc[i] >= 'a' && enc[i] <= 'f'))) {
            k = k * 16 + (uint64_t)(enc[i] <= '9' ? enc[i] - '0' : enc[i] - 'a' + 10);
            i++;
        }
        FUZZ_ASSERT(i > start && i - start <= 8 && (enc[start] != '0' || i - start == 1), "chunk size at %zu", start);
        FUZZ_ASSERT(i + 2 <= n && enc[i] == '\r' && enc[i + 1] == '\n', "CRLF after the chunk size");
        i += 2;
        if (k == 0) break;
        FUZZ_ASSERT(k == S3X_CHUNK_DATA || got + k == size, "a chunk of %llu bytes before the last",
                    (unsigned long long)k);
        FUZZ_ASSERT(i + k + 2 <= n && got + k <= size, "chunk runs past the end");
        FUZZ_ASSERT(!memcmp(enc + i, body + got, k), "chunk data differs from the body at %zu", got);
        i += k;
        got += k;
        FUZZ_ASSERT(enc[i] == '\r' && enc[i + 1] == '\n', "CRLF after the chunk data");
        i += 2;
    }
    FUZZ_ASSERT(got == size, "decoded %zu of %zu bytes", got, size);
    char want[48], line[128];
    expected_b64(kind, body, size, want);
    FUZZ_ASSERT(!strcmp(value, want), "trailer value %s, the body's checksum is %s", value, want);
    int ln = snprintf(line, sizeof line, "%s:%s\r\n\r\n", s3x_checksum_header(kind), want);
    FUZZ_ASSERT(n - i == (size_t)ln && !memcmp(enc + i, line, (size_t)ln), "trailer is not \"%s\"", line);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_in in = {data, size};
    static const int kinds[] = {S3X_CHECKSUM_CRC32C, S3X_CHECKSUM_CRC32, S3X_CHECKSUM_SHA256};
    int kind = kinds[fuzz_u8(&in) % 3];
    uint32_t sel = fuzz_u16(&in);
    /* Sizes around the chunk boundary are the interesting ones. */
    size_t bsize;
    switch (sel >> 14) {
    case 0: bsize = sel & 0x3fff; break;
    case 1: bsize = S3X_CHUNK_DATA - 64 + (sel & 127); break;
    case 2: bsize = 2 * (size_t)S3X_CHUNK_DATA - 64 + (sel & 127); break;
    default: bsize = (sel & 0x3fff) * 32u; break; /* up to 512 KiB */
    }
    uint8_t *body = malloc(bsize ? bsize : 1);
    if (!body) abort();
    for (size_t i = 0; i < bsize; i++) body[i] = size ? data[i % size] ^ (uint8_t)(i >> 8) : (uint8_t)i;

    s3x_chunked c;
    memset(&c, 0, sizeof c);
    FUZZ_ASSERT(s3x_chunked_begin(&c, kind, (int64_t)bsize) == 0, "begin");
    int64_t total = s3x_chunked_length(kind, (int64_t)bsize);
    FUZZ_ASSERT(total > (int64_t)bsize, "length %lld for %zu bytes", (long long)total, bsize);
    char *enc = malloc((size_t)total + 1);
    if (!enc) abort();
    src s = {body, bsize, 0, &in};
    size_t w = 0;
    for (int guard = 0;; guard++) {
        FUZZ_ASSERT(guard < 10000000, "no progress");
        /* Buffer sizes: from 1 byte to a full 256 KiB curl buffer. */
        uint8_t b = fuzz_u8(&in);
        size_t cap = b == 0 ? 256 * 1024 : (b < 128 ? b : (size_t)(b - 127) * 2048);
        if ((size_t)total - w < cap) cap = (size_t)total - w + 1; /* room for one byte too many */
        char *dst = malloc(cap);
        if (!dst) abort();
        int64_t got = s3x_chunked_fill(&c, dst, cap, pull, &s);
        FUZZ_ASSERT(got >= 0 && (size_t)got <= cap, "fill returned %lld for a %zu-byte buffer", (long long)got, cap);
        FUZZ_ASSERT(w + (size_t)got <= (size_t)total, "more than s3x_chunked_length bytes");
        memcpy(enc + w, dst, (size_t)got);
        free(dst);
        w += (size_t)got;
        if (got == 0) break;
    }
    FUZZ_ASSERT(w == (size_t)total, "fill ended after %zu of %lld bytes", w, (long long)total);
    FUZZ_ASSERT(s.off == bsize, "pulled %zu of %zu body bytes", s.off, bsize);
    decode(enc, w, body, bsize, kind, c.value);
    s3x_chunked_end(&c);
    s3x_chunked_end(&c); /* safe twice */
    free(enc);
    free(body);
    return 0;
}
