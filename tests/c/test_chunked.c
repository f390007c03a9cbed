/* aws-chunked bodies with a trailing checksum: the encoded length matches
 * what is produced, the framing decodes back to the body, the trailer carries
 * the body's checksum, whatever buffer sizes curl asks with; a failing source
 * stops the encoding; no tiny reads when a buffer is nearly full. */
#include "chunked.h"
#include "checksum.h"
#include "error.h"

#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct src {
    const char *data;
    int64_t size, off;
    int64_t fail_at;      /* pull fails once off reaches this (-1: never) */
    size_t max_piece;     /* a pull returns at most this much (0: all asked) */
    size_t smallest_ask;  /* smallest cap pull was called with */
    int pulls;
} src;

static int64_t pull(char *dst, size_t cap, void *payload) {
    src *s = payload;
    s->pulls++;
    if (cap < s->smallest_ask) s->smallest_ask = cap;
    if (s->fail_at >= 0 && s->off >= s->fail_at) return -1;
    size_t n = cap;
    if (s->max_piece && n > s->max_piece) n = s->max_piece;
    if ((int64_t)n > s->size - s->off) n = (size_t)(s->size - s->off);
    memcpy(dst, s->data + s->off, n);
    s->off += (int64_t)n;
    return (int64_t)n;
}

/* Decodes an aws-chunked body; returns the decoded length or -1, and the
 * trailer line ("name:value") in trailer. */
static int64_t decode(const char *in, size_t n, char *out, char *trailer, size_t tcap) {
    size_t i = 0;
    int64_t o = 0;
    for (;;) {
        const char *crlf = memmem(in + i, n - i, "\r\n", 2);
        if (!crlf) return -1;
        char *end;
        long long k = strtoll(in + i, &end, 16);
        if (end != crlf || k < 0) return -1;
        i = (size_t)(crlf - in) + 2;
        if (k == 0) break;
        if (i + (size_t)k + 2 > n || memcmp(in + i + k, "\r\n", 2) != 0) return -1;
        memcpy(out + o, in + i, (size_t)k);
        o += k;
        i += (size_t)k + 2;
    }
    const char *crlf = memmem(in + i, n - i, "\r\n", 2);
    if (!crlf || (size_t)(crlf - (in + i)) >= tcap) return -1;
    memcpy(trailer, in + i, (size_t)(crlf - (in + i)));
    trailer[crlf - (in + i)] = '\0';
    i = (size_t)(crlf - in) + 2;
    if (n - i != 2 || memcmp(in + i, "\r\n", 2) != 0) return -1;
    return o;
}

static void expected_trailer(int kind, const char *data, int64_t size, char *out, size_t cap) {
    s3x_hasher h;
    s3x_hasher_init(&h, kind);
    s3x_hasher_update(&h, data, (size_t)size);
    char b64[48];
    s3x_hasher_final_b64(&h, b64);
    snprintf(out, cap, "%s:%s", s3x_checksum_header(kind), b64);
}

/* Encodes size bytes of data with curl-like buffers of cap bytes; checks
 * length, framing, trailer. */
static void roundtrip(int kind, const char *data, int64_t size, size_t cap, size_t max_piece) {
    int64_t len = s3x_chunked_length(kind, size);
    char *enc = malloc((size_t)len + cap), *dec = malloc((size_t)size + 1);
    s3x_chunked c;
    memset(&c, 0, sizeof c);
    CHECK(s3x_chunked_begin(&c, kind, size) == 0, "begin kind %d size %lld", kind, (long long)size);
    src s = {data, size, 0, -1, max_piece, (size_t)-1, 0};
    int64_t w = 0, n;
    int calls = 0;
    char *buf = malloc(cap);
    while ((n = s3x_chunked_fill(&c, buf, cap, pull, &s)) > 0) {
        memcpy(enc + w, buf, (size_t)n);
        w += n;
        if (++calls > 10000000) break;
    }
    CHECK(n == 0, "fill ends with 0, got %lld", (long long)n);
    CHECK(w == len, "kind %d size %lld cap %zu: %lld bytes encoded, s3x_chunked_length says %lld", kind,
          (long long)size, cap, (long long)w, (long long)len);
    char trailer[128], want[128];
    int64_t d = decode(enc, (size_t)w, dec, trailer, sizeof trailer);
    CHECK(d == size, "kind %d size %lld cap %zu: decodes to %lld bytes", kind, (long long)size, cap, (long long)d);
    if (d == size) CHECK(memcmp(dec, data, (size_t)size) == 0, "decoded bytes match (size %lld)", (long long)size);
    expected_trailer(kind, data, size, want, sizeof want);
    if (d >= 0) CHECK_STREQ(trailer, want, "trailer line");
    CHECK(strlen(c.value) > 0 && strstr(want, c.value) != NULL, "value %s is the trailer's", c.value);
    s3x_chunked_end(&c);
    free(buf);
    free(enc);
    free(dec);
}

int main(void) {
    const int64_t big = 3 * (int64_t)S3X_CHUNK_DATA + 12345;
    char *data = malloc((size_t)big);
    unsigned x = 12345;
    for (int64_t i = 0; i < big; i++) {
        x = x * 1103515245u + 12345u;
        data[i] = (char)(x >> 16);
    }

    /* lengths by hand: "0\r\n" + "x-amz-checksum-crc32c:" + 8 + "\r\n" + "\r\n" */
    CHECK_INTEQ(s3x_chunked_length(S3X_CHECKSUM_CRC32C, 0), 3 + 22 + 8 + 2 + 2, "empty body, crc32c");
    CHECK_INTEQ(s3x_chunked_length(S3X_CHECKSUM_CRC32C, 1), (1 + 2 + 1 + 2) + 3 + 22 + 8 + 2 + 2, "1 byte");
    CHECK_INTEQ(s3x_chunked_length(S3X_CHECKSUM_SHA256, 0), 3 + 22 + 44 + 2 + 2, "empty body, sha256");
    CHECK_INTEQ(s3x_chunked_length(S3X_CHECKSUM_CRC32, S3X_CHUNK_DATA), 256 * 1024 + 3 + 21 + 8 + 2 + 2,
                "one full chunk is exactly 256 KiB of framing and data");
    CHECK_INTEQ(s3x_chunked_length(S3X_CHECKSUM_MD5, 10), -1, "md5 cannot trail");
    CHECK_INTEQ(s3x_chunked_length(S3X_CHECKSUM_NONE, 10), -1, "nothing to trail");
    CHECK(s3x_chunked_kind_ok(S3X_CHECKSUM_CRC32C) && s3x_chunked_kind_ok(S3X_CHECKSUM_CRC32) &&
              s3x_chunked_kind_ok(S3X_CHECKSUM_SHA256) && !s3x_chunked_kind_ok(S3X_CHECKSUM_MD5),
          "kinds that can trail");
    s3x_chunked bad;
    memset(&bad, 0, sizeof bad);
    CHECK(s3x_chunked_begin(&bad, S3X_CHECKSUM_MD5, 10) == S3X_EINVAL, "begin refuses md5");

    const int kinds[] = {S3X_CHECKSUM_CRC32C, S3X_CHECKSUM_CRC32, S3X_CHECKSUM_SHA256};
    const int64_t sizes[] = {0, 1, 4095, S3X_CHUNK_DATA - 1, S3X_CHUNK_DATA, S3X_CHUNK_DATA + 1, big};
    const size_t caps[] = {1, 7, 4096, 64 * 1024, 256 * 1024, 256 * 1024 + 5, 1024 * 1024};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            for (size_t j = 0; j < sizeof caps / sizeof caps[0]; j++) {
                if (caps[j] < 4096 && sizes[i] > 100000) continue; /* slow and says nothing new */
                roundtrip(kinds[k], data, sizes[i], caps[j], 0);
            }
    /* a source that hands out short reads (a pipe, a slow disk) */
    roundtrip(S3X_CHECKSUM_CRC32C, data, big, 256 * 1024, 1000);

    /* 256 KiB buffers: every call is one chunk, one read of the whole chunk */
    {
        s3x_chunked c;
        memset(&c, 0, sizeof c);
        s3x_chunked_begin(&c, S3X_CHECKSUM_CRC32C, 3 * (int64_t)S3X_CHUNK_DATA);
        src s = {data, 3 * (int64_t)S3X_CHUNK_DATA, 0, -1, 0, (size_t)-1, 0};
        char *buf = malloc(256 * 1024);
        for (int i = 0; i < 3; i++) {
            int64_t n = s3x_chunked_fill(&c, buf, 256 * 1024, pull, &s);
            CHECK_INTEQ(n, 256 * 1024, "a full chunk per 256 KiB call");
        }
        CHECK_INTEQ(s.pulls, 3, "one read per chunk");
        CHECK(s.smallest_ask == S3X_CHUNK_DATA, "each read asks for a whole chunk (%zu)", s.smallest_ask);
        s3x_chunked_end(&c);
        free(buf);
    }
    /* buffers slightly off the chunk size: no read under 4 KiB except a chunk's end */
    {
        s3x_chunked c;
        memset(&c, 0, sizeof c);
        s3x_chunked_begin(&c, S3X_CHECKSUM_CRC32C, big);
        src s = {data, big, 0, -1, 0, (size_t)-1, 0};
        char *buf = malloc(256 * 1024 + 100);
        while (s3x_chunked_fill(&c, buf, 256 * 1024 + 100, pull, &s) > 0) {}
        CHECK(s.smallest_ask >= 4096, "smallest read %zu bytes", s.smallest_ask);
        s3x_chunked_end(&c);
        free(buf);
    }
    /* a failing source */
    {
        s3x_chunked c;
        memset(&c, 0, sizeof c);
        s3x_chunked_begin(&c, S3X_CHECKSUM_SHA256, big);
        src s = {data, big, 0, 100000, 0, (size_t)-1, 0};
        char buf[65536];
        int64_t n;
        while ((n = s3x_chunked_fill(&c, buf, sizeof buf, pull, &s)) > 0) {}
        CHECK_INTEQ(n, -1, "a failed pull fails the fill");
        s3x_chunked_end(&c);
        s3x_chunked_end(&c); /* twice is harmless */
    }
    /* begin again after a partial encoding (a retried request) */
    {
        s3x_chunked c;
        memset(&c, 0, sizeof c);
        s3x_chunked_begin(&c, S3X_CHECKSUM_SHA256, big);
        src s = {data, big, 0, -1, 0, (size_t)-1, 0};
        char buf[65536];
        s3x_chunked_fill(&c, buf, sizeof buf, pull, &s);
        CHECK(s3x_chunked_begin(&c, S3X_CHECKSUM_SHA256, big) == 0, "begin again");
        CHECK_INTEQ(c.done, 0, "starts from byte 0");
        s3x_chunked_end(&c);
    }
    free(data);
    return tap_summary("test_chunked");
}
