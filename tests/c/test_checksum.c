/* Part checksums: CRC32C (hardware and table paths), CRC32, base64 and the
 * base64 digests S3 expects in x-amz-checksum-* and Content-MD5 headers.
 *
 * The table (software) and SSE4.2 paths of CRC32C are static functions of
 * checksum.c; to check both on a machine where the public function always
 * takes the hardware path, this test compiles checksum.c into itself (its
 * symbols then come from here, not from the static library's copy) and
 * compares every path with a bitwise reference written below. */
#include "checksum.c"

#include "tap.h"

/* tap.h's CHECK_INTEQ evaluates `actual` twice (once for the test, once for
 * the message), which repeats side effects; this one evaluates it once. */
static int check_eq(long long actual, long long expected, const char *file, int line, const char *what) {
    return tap_check(actual == expected, file, line, "%s: expected %lld, got %lld", what, expected, actual);
}
#define CHECK_EQ(actual, expected, what) \
    check_eq((long long)(actual), (long long)(expected), __FILE__, __LINE__, (what))

#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- references ------------------------------------------------------------- */

static uint32_t ref_crc_reflected(uint32_t poly, uint32_t crc, const unsigned char *p, size_t n) {
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = (crc & 1u) ? (crc >> 1) ^ poly : crc >> 1;
    }
    return ~crc;
}
static uint32_t ref_crc32c(uint32_t crc, const void *p, size_t n) { return ref_crc_reflected(0x82F63B78u, crc, p, n); }
static uint32_t ref_crc32(uint32_t crc, const void *p, size_t n) { return ref_crc_reflected(0xEDB88320u, crc, p, n); }

/* The two private paths with the public function's pre/post inversion. */
static uint32_t path_sw(uint32_t crc, const void *p, size_t n) { return ~crc32c_sw(~crc, p, n); }
#if defined(__x86_64__) && defined(__GNUC__)
static int have_hw(void) { return __builtin_cpu_supports("sse4.2") ? 1 : 0; }
static uint32_t path_hw(uint32_t crc, const void *p, size_t n) { return ~crc32c_hw(~crc, p, n); }
#else
static int have_hw(void) { return 0; }
static uint32_t path_hw(uint32_t crc, const void *p, size_t n) { return path_sw(crc, p, n); }
#endif

static uint64_t g_rng = 0x243F6A8885A308D3ull;
static uint32_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 32);
}

/* ---- CRC32C known vectors --------------------------------------------------- */

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);

static void check_crc32c_vectors(crc_fn f, const char *name) {
    unsigned char buf[48];
    CHECK(f(0, "123456789", 9) == 0xE3069283u, "%s: CRC32C(\"123456789\") = 0x%08X, expected 0xE3069283", name,
          f(0, "123456789", 9));
    CHECK(f(0, "", 0) == 0, "%s: CRC32C of nothing is 0", name);
    CHECK(f(0x12345678u, "", 0) == 0x12345678u, "%s: an empty update keeps the crc", name);
    /* RFC 3720 B.4 */
    memset(buf, 0, 32);
    CHECK(f(0, buf, 32) == 0x8A9136AAu, "%s: 32 zero bytes = 0x%08X, expected 0x8A9136AA", name, f(0, buf, 32));
    memset(buf, 0xFF, 32);
    CHECK(f(0, buf, 32) == 0x62A8AB43u, "%s: 32 0xFF bytes = 0x%08X, expected 0x62A8AB43", name, f(0, buf, 32));
    for (int i = 0; i < 32; i++) buf[i] = (unsigned char)i;
    CHECK(f(0, buf, 32) == 0x46DD794Eu, "%s: 32 incrementing bytes = 0x%08X, expected 0x46DD794E", name,
          f(0, buf, 32));
    for (int i = 0; i < 32; i++) buf[i] = (unsigned char)(31 - i);
    CHECK(f(0, buf, 32) == 0x113FDB5Cu, "%s: 32 decrementing bytes = 0x%08X, expected 0x113FDB5C", name,
          f(0, buf, 32));
    static const unsigned char iscsi_read[48] = {
        0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18,
        0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    CHECK(f(0, iscsi_read, 48) == 0xD9963A56u, "%s: iSCSI SCSI Read (10) PDU = 0x%08X, expected 0xD9963A56", name,
          f(0, iscsi_read, 48));
    const char *fox = "The quick brown fox jumps over the lazy dog";
    CHECK(f(0, fox, strlen(fox)) == 0x22620404u, "%s: quick brown fox = 0x%08X, expected 0x22620404", name,
          f(0, fox, strlen(fox)));
}

static void test_crc32c_vectors(void) {
    check_crc32c_vectors(ref_crc32c, "reference");
    check_crc32c_vectors(s3x_crc32c, "s3x_crc32c");
    check_crc32c_vectors(path_sw, "table path");
    if (have_hw()) check_crc32c_vectors(path_hw, "sse4.2 path");
    printf("# sse4.2 crc32c %s\n", have_hw() ? "available: both paths checked" : "not available");
}

/* ---- CRC32C: paths agree, incremental == one-shot ---------------------------- */

static void test_crc32c_random(void) {
    enum { MAXLEN = 70000, PAD = 16 };
    unsigned char *mem = malloc(MAXLEN + PAD);
    if (!CHECK(mem != NULL, "malloc")) return;
    for (size_t i = 0; i < MAXLEN + PAD; i++) mem[i] = (unsigned char)rnd();
    int bad_pub = 0, bad_sw = 0, bad_hw = 0, bad_inc = 0, bad_mix = 0;
    for (int it = 0; it < 3000; it++) {
        size_t off = rnd() % PAD;
        size_t len;
        switch (it % 4) {
        case 0: len = rnd() % 64; break; /* the byte-at-a-time heads and tails */
        case 1: len = rnd() % 1024; break;
        case 2: len = rnd() % 8192; break;
        default: len = rnd() % MAXLEN; break;
        }
        const unsigned char *p = mem + off;
        uint32_t seed = (it % 3 == 0) ? 0 : rnd();
        uint32_t want = ref_crc32c(seed, p, len);
        if (s3x_crc32c(seed, p, len) != want && bad_pub++ < 3)
            printf("# public off=%zu len=%zu: 0x%08X vs 0x%08X\n", off, len, s3x_crc32c(seed, p, len), want);
        if (path_sw(seed, p, len) != want && bad_sw++ < 3)
            printf("# table off=%zu len=%zu: 0x%08X vs 0x%08X\n", off, len, path_sw(seed, p, len), want);
        if (have_hw() && path_hw(seed, p, len) != want && bad_hw++ < 3)
            printf("# sse4.2 off=%zu len=%zu: 0x%08X vs 0x%08X\n", off, len, path_hw(seed, p, len), want);
        /* Split at an odd point: two updates == one. */
        size_t cut = len ? rnd() % (len + 1) : 0;
        uint32_t inc = s3x_crc32c(s3x_crc32c(seed, p, cut), p + cut, len - cut);
        if (inc != want && bad_inc++ < 3) printf("# incremental off=%zu len=%zu cut=%zu\n", off, len, cut);
        /* And the paths can continue each other's crc. */
        uint32_t mix = path_hw(path_sw(seed, p, cut), p + cut, len - cut);
        uint32_t mix2 = path_sw(path_hw(seed, p, cut), p + cut, len - cut);
        if ((mix != want || mix2 != want) && bad_mix++ < 3) printf("# mixed paths off=%zu len=%zu cut=%zu\n", off, len, cut);
    }
    CHECK_EQ(bad_pub, 0, "s3x_crc32c mismatches vs bitwise reference (3000 random lengths/alignments)");
    CHECK_EQ(bad_sw, 0, "table path mismatches vs bitwise reference");
    CHECK_EQ(bad_hw, 0, "sse4.2 path mismatches vs bitwise reference");
    CHECK_EQ(bad_inc, 0, "incremental != one-shot");
    CHECK_EQ(bad_mix, 0, "table and sse4.2 paths do not continue each other");
    /* Many small updates, each 1..13 bytes, over 20 000 bytes. */
    uint32_t c = 0;
    size_t pos = 0;
    while (pos < 20000) {
        size_t k = 1 + rnd() % 13;
        if (pos + k > 20000) k = 20000 - pos;
        c = s3x_crc32c(c, mem + 3 + pos, k);
        pos += k;
    }
    CHECK(c == ref_crc32c(0, mem + 3, 20000), "byte-dribble updates == one-shot");
    free(mem);
}

/* ---- CRC32 ------------------------------------------------------------------ */

static void test_crc32(void) {
    CHECK(s3x_crc32(0, "123456789", 9) == 0xCBF43926u, "CRC32(\"123456789\") = 0x%08X, expected 0xCBF43926",
          s3x_crc32(0, "123456789", 9));
    CHECK(ref_crc32(0, "123456789", 9) == 0xCBF43926u, "reference CRC32 check value");
    CHECK(s3x_crc32(0, "", 0) == 0, "CRC32 of nothing");
    const char *fox = "The quick brown fox jumps over the lazy dog";
    CHECK(s3x_crc32(0, fox, strlen(fox)) == 0x414FA339u, "CRC32 quick brown fox = 0x%08X, expected 0x414FA339",
          s3x_crc32(0, fox, strlen(fox)));
    unsigned char buf[5000];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (unsigned char)rnd();
    int bad = 0;
    for (int it = 0; it < 500; it++) {
        size_t off = rnd() % 8, len = rnd() % (sizeof buf - 8), cut = len ? rnd() % (len + 1) : 0;
        uint32_t want = ref_crc32(0, buf + off, len);
        if (s3x_crc32(0, buf + off, len) != want) bad++;
        if (s3x_crc32(s3x_crc32(0, buf + off, cut), buf + off + cut, len - cut) != want) bad++;
    }
    CHECK_EQ(bad, 0, "CRC32 mismatches (one-shot and split) vs bitwise reference");
#if defined(__x86_64__) && defined(__GNUC__)
    /* The folding path on its own, from 64 bytes (its least) up, at every
     * alignment, from random registers, against zlib's tables and the
     * bitwise reference. */
    if (__builtin_cpu_supports("pclmul")) {
        static unsigned char big[70000];
        for (size_t i = 0; i < sizeof big; i++) big[i] = (unsigned char)rnd();
        bad = 0;
        for (int it = 0; it < 400; it++) {
            size_t off = (size_t)it % 16, len = it < 100 ? 64 + (size_t)it : 64 + rnd() % (sizeof big - 64 - 16);
            uint32_t c0 = (uint32_t)rnd() * 2654435761u;
            uint32_t want = crc32_zlib(c0, big + off, len);
            if (crc32_clmul(c0, big + off, len) != want) bad++;
            if (it < 40 && ref_crc32(c0, big + off, len) != want) bad++;
        }
        CHECK_EQ(bad, 0, "CRC32 by folding vs zlib and the reference, 64-70000 bytes");
        printf("# pclmul available: the folding path checked\n");
    }
#endif
}

/* ---- base64 ----------------------------------------------------------------- */

static void test_base64(void) {
    static const struct {
        const char *in, *out;
    } v[] = {{"", ""},         {"f", "Zg=="},         {"fo", "Zm8="},        {"foo", "Zm9v"},
             {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"}};
    char out[64];
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        memset(out, 'X', sizeof out);
        s3x_base64((const unsigned char *)v[i].in, strlen(v[i].in), out);
        CHECK_STREQ(out, v[i].out, "RFC 4648 base64 vector");
    }
    static const unsigned char hi[] = {0xFB, 0xFF, 0xBF};
    s3x_base64(hi, 3, out);
    CHECK_STREQ(out, "+/+/", "base64 uses + and / (not the URL alphabet)");
    s3x_base64(hi, 2, out);
    CHECK_STREQ(out, "+/8=", "base64 of FB FF");
    /* Every length 0..100 of random bytes against OpenSSL's encoder, and the
     * documented output size 4*ceil(n/3)+1 is enough (ASan checks the write). */
    unsigned char in[100];
    int bad = 0;
    for (size_t n = 0; n <= sizeof in; n++) {
        for (size_t i = 0; i < n; i++) in[i] = (unsigned char)rnd();
        size_t need = 4 * ((n + 2) / 3) + 1;
        char *mine = malloc(need);
        unsigned char theirs[160];
        if (!mine) continue;
        s3x_base64(in, n, mine);
        int tl = EVP_EncodeBlock(theirs, in, (int)n);
        if (strlen(mine) != (size_t)tl || memcmp(mine, theirs, (size_t)tl) != 0) bad++;
        free(mine);
    }
    CHECK_EQ(bad, 0, "base64 vs EVP_EncodeBlock, lengths 0..100");
}

/* ---- hashers ---------------------------------------------------------------- */

static void hash_b64(int kind, const void *data, size_t len, size_t cut, char out[48]) {
    s3x_hasher h;
    int rc = s3x_hasher_init(&h, kind);
    CHECK_EQ(rc, 0, "s3x_hasher_init");
    const unsigned char *p = data;
    s3x_hasher_update(&h, p, cut);
    s3x_hasher_update(&h, p + cut, len - cut);
    memset(out, 'X', 48);
    s3x_hasher_final_b64(&h, out);
    CHECK(h.md == NULL, "final releases the digest context");
}

static void test_hashers(void) {
    static const struct {
        int kind;
        const char *in, *out;
    } v[] = {
        {S3X_CHECKSUM_MD5, "", "1B2M2Y8AsgTpgAmY7PhCfg=="},
        {S3X_CHECKSUM_MD5, "123456789", "JfnnlDI7RTiF9RgfG2JNCw=="},
        {S3X_CHECKSUM_MD5, "abc", "kAFQmDzST7DWlj99KOF/cg=="},
        {S3X_CHECKSUM_SHA256, "", "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="},
        {S3X_CHECKSUM_SHA256, "abc", "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0="},
        {S3X_CHECKSUM_SHA256, "123456789", "FeKw08M4keuw8e9gnsQZQgwg4yDOlMZfvIwzEkSOsiU="},
        {S3X_CHECKSUM_CRC32C, "", "AAAAAA=="},
        {S3X_CHECKSUM_CRC32C, "123456789", "4waSgw=="}, /* E3 06 92 83, big-endian as S3 sends it */
        {S3X_CHECKSUM_CRC32, "", "AAAAAA=="},
        {S3X_CHECKSUM_CRC32, "123456789", "y/Q5Jg=="},   /* CB F4 39 26 */
        {S3X_CHECKSUM_CRC32, "abc", "NSRBwg=="},
        {S3X_CHECKSUM_NONE, "abc", ""},
    };
    char out[48];
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        size_t len = strlen(v[i].in);
        for (size_t cut = 0; cut <= len; cut++) {
            hash_b64(v[i].kind, v[i].in, len, cut, out);
            if (!CHECK_STREQ(out, v[i].out, "hasher base64 digest")) {
                printf("  kind %d, input \"%s\", split at %zu\n", v[i].kind, v[i].in, cut);
                break;
            }
        }
    }
    /* CRC32C over 32 zero bytes, split oddly: 8A 91 36 AA -> "ipE2qg==". */
    unsigned char z[32] = {0};
    hash_b64(S3X_CHECKSUM_CRC32C, z, 32, 13, out);
    CHECK_STREQ(out, "ipE2qg==", "CRC32C of 32 zero bytes in base64");
    /* A hasher dropped without final does not leak (ASan). */
    s3x_hasher h;
    CHECK_EQ(s3x_hasher_init(&h, S3X_CHECKSUM_SHA256), 0, "init sha256");
    s3x_hasher_update(&h, "x", 1);
    s3x_hasher_cleanup(&h);
    s3x_hasher_cleanup(&h); /* twice is harmless */
    CHECK(h.md == NULL, "cleanup clears the context");
    /* Names */
    CHECK_STREQ(s3x_checksum_header(S3X_CHECKSUM_CRC32C), "x-amz-checksum-crc32c", "header crc32c");
    CHECK_STREQ(s3x_checksum_header(S3X_CHECKSUM_CRC32), "x-amz-checksum-crc32", "header crc32");
    CHECK_STREQ(s3x_checksum_header(S3X_CHECKSUM_SHA256), "x-amz-checksum-sha256", "header sha256");
    CHECK_STREQ(s3x_checksum_header(S3X_CHECKSUM_MD5), "content-md5", "header md5");
    CHECK(s3x_checksum_header(S3X_CHECKSUM_NONE) == NULL, "no header for NONE");
    CHECK_STREQ(s3x_checksum_algorithm(S3X_CHECKSUM_CRC32C), "CRC32C", "algorithm crc32c");
    CHECK_STREQ(s3x_checksum_algorithm(S3X_CHECKSUM_SHA256), "SHA256", "algorithm sha256");
    CHECK(s3x_checksum_algorithm(S3X_CHECKSUM_MD5) == NULL, "no x-amz-checksum-algorithm for MD5");
    CHECK_STREQ(s3x_checksum_xml_name(S3X_CHECKSUM_CRC32), "ChecksumCRC32", "xml crc32");
    CHECK(s3x_checksum_xml_name(S3X_CHECKSUM_MD5) == NULL && s3x_checksum_xml_name(S3X_CHECKSUM_NONE) == NULL,
          "no CompleteMultipartUpload element for MD5/NONE");
}

/* Ranges hashed apart and combined give the CRC of the whole, for both
 * polynomials: random cuts of random bytes (an empty range included), many
 * ranges in a row as a download combines them, and a long range of zeros
 * (the shift by lengths past 2^32 bits). */
static void test_crc_combine(void) {
    enum { N = 200000 };
    unsigned char *buf = malloc(N);
    CHECK(buf != NULL, "buffer");
    if (!buf) return;
    srand(7);
    for (size_t i = 0; i < N; i++) buf[i] = (unsigned char)rand();
    static const int kinds[] = {S3X_CHECKSUM_CRC32C, S3X_CHECKSUM_CRC32};
    for (int k = 0; k < 2; k++) {
        int kind = kinds[k];
        uint32_t (*f)(uint32_t, const void *, size_t) = kind == S3X_CHECKSUM_CRC32C ? s3x_crc32c : s3x_crc32;
        uint32_t whole = f(0, buf, N);
        int ok = 1;
        for (int t = 0; t < 200; t++) {
            size_t cut = t == 0 ? 0 : t == 1 ? N : (size_t)rand() % (N + 1);
            uint32_t a = f(0, buf, cut), b = f(0, buf + cut, N - cut);
            if (s3x_crc_combine(kind, a, b, (int64_t)(N - cut)) != whole) ok = 0;
        }
        CHECK(ok, "kind %d: CRC(A) and CRC(B) combine into CRC(AB) at 200 cuts", kind);
        /* Many ranges, combined in order from the first. */
        uint32_t acc = 0;
        int64_t accn = 0;
        size_t off = 0;
        while (off < N) {
            size_t len = 1 + (size_t)rand() % 9000;
            if (len > N - off) len = N - off;
            uint32_t c = f(0, buf + off, len);
            acc = accn ? s3x_crc_combine(kind, acc, c, (int64_t)len) : c;
            accn += (int64_t)len;
            off += len;
        }
        CHECK_EQ(acc, whole, "ranges of 1-9000 bytes combined in order");
        /* Long ranges of zeros, made by doubling 4 KiB: checked against
         * hashing 64 MiB directly, then carried on to 1 GiB (lengths past
         * 2^32 bits go through the same shift). */
        unsigned char zero[4096] = {0};
        uint32_t z = f(0, zero, sizeof zero);
        int64_t zn = sizeof zero;
        for (; zn < ((int64_t)64 << 20); zn *= 2) z = s3x_crc_combine(kind, z, z, zn);
        uint32_t head = f(0, buf, 10);
        unsigned char *big = calloc((size_t)64 << 20, 1);
        CHECK(big != NULL, "64 MiB of zeros");
        if (big) {
            CHECK_EQ(z, f(0, big, (size_t)64 << 20), "64 MiB of zeros by doubling 4 KiB");
            CHECK_EQ(s3x_crc_combine(kind, head, z, zn), f(head, big, (size_t)64 << 20),
                     "10 bytes then 64 MiB of zeros");
            free(big);
        }
        for (; zn < ((int64_t)1 << 30); zn *= 2) z = s3x_crc_combine(kind, z, z, zn);
        CHECK(s3x_crc_combine(kind, head, z, (int64_t)1 << 30) != head, "1 GiB of zeros moves the CRC");
    }
    char out[48];
    s3x_crc_b64(0xE3069283u, out); /* CRC32C of "123456789" */
    CHECK_STREQ(out, "4waSgw==", "a CRC in base64, high byte first");
    free(buf);
}

int main(void) {
    test_crc32c_vectors();
    test_crc32c_random();
    test_crc32();
    test_base64();
    test_hashers();
    test_crc_combine();
    return tap_summary("test_checksum");
}
