#include "checksum.h"
#include <openssl/evp.h>
#include <pthread.h>
#include <string.h>
#include <zlib.h>
#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

#define POLY_CRC32C 0x82F63B78u /* reflected */
#define POLY_CRC32 0xEDB88320u

/* ---- arithmetic modulo a CRC's polynomial --------------------------------------
 *
 * In the reflected bit order both CRCs use: bit 31 is x^0, bit 0 is x^31. */

static uint32_t gf2_mulmod(uint32_t a, uint32_t b, uint32_t poly) {
    uint32_t prod = 0;
    for (uint32_t bit = 1u << 31; bit; bit >>= 1) {
        if (a & bit) prod ^= b;
        b = b & 1 ? (b >> 1) ^ poly : b >> 1;
    }
    return prod;
}

/* x^e modulo poly. */
static uint32_t gf2_xpow(uint64_t e, uint32_t poly) {
    uint32_t result = 1u << 31; /* x^0 */
    uint32_t power = 1u << 30;  /* x^1 */
    for (; e; e >>= 1) {
        if (e & 1) result = gf2_mulmod(power, result, poly);
        power = gf2_mulmod(power, power, poly);
    }
    return result;
}

/* ---- CRC32C (Castagnoli) -------------------------------------------------- */

static uint32_t g_crc32c_table[8][256];
static int g_crc32c_ready;

static void crc32c_init_tables(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ POLY_CRC32C : c >> 1;
        g_crc32c_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            g_crc32c_table[t][i] = (g_crc32c_table[t - 1][i] >> 8) ^ g_crc32c_table[0][g_crc32c_table[t - 1][i] & 0xff];
    g_crc32c_ready = 1;
}

static uint32_t crc32c_sw(uint32_t crc, const unsigned char *p, size_t n) {
    if (!g_crc32c_ready) crc32c_init_tables();
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        v ^= crc;
        crc = g_crc32c_table[7][v & 0xff] ^ g_crc32c_table[6][(v >> 8) & 0xff] ^
              g_crc32c_table[5][(v >> 16) & 0xff] ^ g_crc32c_table[4][(v >> 24) & 0xff] ^
              g_crc32c_table[3][(v >> 32) & 0xff] ^ g_crc32c_table[2][(v >> 40) & 0xff] ^
              g_crc32c_table[1][(v >> 48) & 0xff] ^ g_crc32c_table[0][v >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) crc = (crc >> 8) ^ g_crc32c_table[0][(crc ^ *p++) & 0xff];
    return crc;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* The crc32 instruction has a latency of about 3 cycles and a throughput of
 * one per cycle, so one dependent chain runs at a third of what the unit can
 * do. Long inputs go in blocks of three lanes of LANE bytes, each lane its own
 * chain; the lanes' CRCs are then joined. Joining needs "the CRC register
 * after LANE more zero bytes", a linear map of the 32-bit register, applied
 * with four byte-indexed tables. */
#define LANE 4096

static uint32_t g_lane_shift[4][256];
static pthread_once_t g_lane_once = PTHREAD_ONCE_INIT;

__attribute__((target("sse4.2"))) static uint32_t zeros_after(uint32_t c, size_t n) {
    uint64_t r = c;
    for (size_t i = 0; i < n; i += 8) r = _mm_crc32_u64(r, 0);
    return (uint32_t)r;
}

static void lane_shift_init(void) {
    uint32_t bit[32];
    for (int i = 0; i < 32; i++) bit[i] = zeros_after(1u << i, LANE);
    for (int k = 0; k < 4; k++)
        for (int b = 0; b < 256; b++) {
            uint32_t v = 0;
            for (int i = 0; i < 8; i++)
                if (b & (1 << i)) v ^= bit[8 * k + i];
            g_lane_shift[k][b] = v;
        }
}

static inline uint32_t lane_shift(uint32_t c) {
    return g_lane_shift[0][c & 0xff] ^ g_lane_shift[1][(c >> 8) & 0xff] ^ g_lane_shift[2][(c >> 16) & 0xff] ^
           g_lane_shift[3][c >> 24];
}

static inline uint64_t load64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const unsigned char *p, size_t n) {
    uint64_t c = crc;
    while (n && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        n--;
    }
    if (n >= 3 * LANE) {
        pthread_once(&g_lane_once, lane_shift_init);
        while (n >= 3 * LANE) {
            uint64_t c1 = 0, c2 = 0;
            for (size_t i = 0; i < LANE; i += 8) {
                c = _mm_crc32_u64(c, load64(p + i));
                c1 = _mm_crc32_u64(c1, load64(p + LANE + i));
                c2 = _mm_crc32_u64(c2, load64(p + 2 * LANE + i));
            }
            /* crc(A B C) = shift(shift(crc(A)) ^ crc0(B)) ^ crc0(C) */
            c = lane_shift(lane_shift((uint32_t)c) ^ (uint32_t)c1) ^ (uint32_t)c2;
            p += 3 * LANE;
            n -= 3 * LANE;
        }
    }
    while (n >= 8) {
        c = _mm_crc32_u64(c, load64(p));
        p += 8;
        n -= 8;
    }
    while (n--) c = _mm_crc32_u8((uint32_t)c, *p++);
    return (uint32_t)c;
}
#endif

uint32_t s3x_crc32c(uint32_t crc, const void *data, size_t len) {
    crc = ~crc;
#if defined(__x86_64__) && defined(__GNUC__)
    static _Atomic int hw = -1; /* threads may ask at once: each finds the same answer */
    if (hw < 0) hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
    crc = hw ? crc32c_hw(crc, data, len) : crc32c_sw(crc, data, len);
#else
    crc = crc32c_sw(crc, data, len);
#endif
    return ~crc;
}

static uint32_t crc32_zlib(uint32_t crc, const unsigned char *p, size_t len) {
    /* zlib takes uInt lengths. */
    while (len) {
        uInt n = len > (1u << 30) ? (1u << 30) : (uInt)len;
        crc = (uint32_t)crc32(crc, p, n);
        p += n;
        len -= n;
    }
    return crc;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* CRC32 by folding (carry-less multiplication, PCLMULQDQ): zlib's tables
 * make about 4 GB/s here, folding several times that.
 *
 * A 16-byte block R, read little-endian, is a polynomial of degree < 128
 * in the reflected order (bit 0 of byte 0 is x^127), with its low 8 bytes
 * Q0 the high half: R = Q0 x^64 + Q1. Moved F bits further into the
 * message it counts as R x^F = Q0 x^(64+F) + Q1 x^F, and modulo the
 * polynomial each term is a 64-bit half times a 32-bit constant, a 96-bit
 * product that is xored into the block F bits later. A carry-less product
 * of two reflected 64-bit values comes out one place up (times x), so the
 * constants are x^(64+F-1) and x^(F-1) modulo P. Four blocks are folded 512
 * bits at a time (four independent chains), then into one; the last block
 * and the tail (under 16 bytes) go through the table code, which reduces
 * them to the 32-bit CRC. */
#include <wmmintrin.h>

static uint64_t g_fold[4][2]; /* F = 512, 384, 256, 128: {x^(64+F-1), x^(F-1)} mod P, as 64-bit reflected */
static pthread_once_t g_fold_once = PTHREAD_ONCE_INIT;

static void fold_init(void) {
    static const int f[4] = {512, 384, 256, 128};
    for (int i = 0; i < 4; i++) {
        /* bit 31 - d of the 32-bit value is x^d; bit 63 - d in 64 bits */
        g_fold[i][0] = (uint64_t)gf2_xpow((uint64_t)(64 + f[i] - 1), POLY_CRC32) << 32;
        g_fold[i][1] = (uint64_t)gf2_xpow((uint64_t)(f[i] - 1), POLY_CRC32) << 32;
    }
}

static inline __m128i load128(const unsigned char *p) {
    __m128i v; /* any alignment: memcpy becomes one unaligned load */
    memcpy(&v, p, sizeof v);
    return v;
}

__attribute__((target("pclmul,sse2"))) static inline __m128i fold(__m128i r, __m128i k) {
    return _mm_xor_si128(_mm_clmulepi64_si128(r, k, 0x00), _mm_clmulepi64_si128(r, k, 0x11));
}

__attribute__((target("pclmul,sse2"))) static uint32_t crc32_clmul(uint32_t crc, const unsigned char *p, size_t n) {
    pthread_once(&g_fold_once, fold_init);
    __m128i k512 = _mm_set_epi64x((long long)g_fold[0][1], (long long)g_fold[0][0]);
    __m128i x0 = load128(p), x1 = load128(p + 16);
    __m128i x2 = load128(p + 32), x3 = load128(p + 48);
    /* The register (inverted, as the CRC starts) joins the first 4 bytes. */
    x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128((int)~crc));
    p += 64;
    n -= 64;
    for (; n >= 64; p += 64, n -= 64) {
        x0 = _mm_xor_si128(fold(x0, k512), load128(p));
        x1 = _mm_xor_si128(fold(x1, k512), load128(p + 16));
        x2 = _mm_xor_si128(fold(x2, k512), load128(p + 32));
        x3 = _mm_xor_si128(fold(x3, k512), load128(p + 48));
    }
    __m128i k128 = _mm_set_epi64x((long long)g_fold[3][1], (long long)g_fold[3][0]);
    __m128i r = _mm_xor_si128(fold(x0, _mm_set_epi64x((long long)g_fold[1][1], (long long)g_fold[1][0])),
                              fold(x1, _mm_set_epi64x((long long)g_fold[2][1], (long long)g_fold[2][0])));
    r = _mm_xor_si128(r, _mm_xor_si128(fold(x2, k128), x3));
    for (; n >= 16; p += 16, n -= 16) r = _mm_xor_si128(fold(r, k128), load128(p));
    /* r is congruent to everything so far: its CRC from a zero register
     * (zlib's from 0xffffffff, which it inverts) is the CRC so far. */
    unsigned char last[16];
    memcpy(last, &r, sizeof last);
    return crc32_zlib(crc32_zlib(0xffffffffu, last, 16), p, n);
}
#endif

uint32_t s3x_crc32(uint32_t crc, const void *data, size_t len) {
    const unsigned char *p = data;
#if defined(__x86_64__) && defined(__GNUC__)
    static _Atomic int hw = -1; /* threads may ask at once: each finds the same answer */
    if (hw < 0) hw = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse2") ? 1 : 0;
    if (hw && len >= 256) return crc32_clmul(crc, p, len);
#endif
    return crc32_zlib(crc, p, len);
}

/* ---- combining CRCs ---------------------------------------------------------------
 *
 * The CRC of A followed by B from the CRCs of A and B and B's length: the
 * register after A, carried through len(B) zero bytes, xored with B's CRC
 * (the initial and final inversions cancel out). Carrying a value through
 * n zero bytes multiplies it by x^(8n) modulo the polynomial, and that
 * power is a product of the powers x^(2^k), which are squared one from the
 * other (gf2_xpow). */

uint32_t s3x_crc_combine(int kind, uint32_t crc1, uint32_t crc2, int64_t len2) {
    uint32_t poly = kind == S3X_CHECKSUM_CRC32C ? POLY_CRC32C : POLY_CRC32;
    if (len2 <= 0) return crc1;
    return gf2_mulmod(gf2_xpow(8 * (uint64_t)len2, poly), crc1, poly) ^ crc2;
}

void s3x_crc_b64(uint32_t crc, char out[48]) {
    unsigned char d[4] = {(unsigned char)(crc >> 24), (unsigned char)(crc >> 16), (unsigned char)(crc >> 8),
                          (unsigned char)crc};
    s3x_base64(d, 4, out);
}

/* ---- hashers ------------------------------------------------------------------ */

int s3x_hasher_init(s3x_hasher *h, int kind) {
    memset(h, 0, sizeof *h);
    h->kind = kind;
    if (kind == S3X_CHECKSUM_SHA256 || kind == S3X_CHECKSUM_MD5) {
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        if (!ctx) return -1;
        if (EVP_DigestInit_ex(ctx, kind == S3X_CHECKSUM_SHA256 ? EVP_sha256() : EVP_md5(), NULL) != 1) {
            EVP_MD_CTX_free(ctx);
            return -1;
        }
        h->md = ctx;
    }
    return 0;
}

void s3x_hasher_update(s3x_hasher *h, const void *data, size_t len) {
    switch (h->kind) {
    case S3X_CHECKSUM_CRC32C: h->crc = s3x_crc32c(h->crc, data, len); break;
    case S3X_CHECKSUM_CRC32: h->crc = s3x_crc32(h->crc, data, len); break;
    case S3X_CHECKSUM_SHA256:
    case S3X_CHECKSUM_MD5: EVP_DigestUpdate(h->md, data, len); break;
    default: break;
    }
}

void s3x_hasher_final_b64(s3x_hasher *h, char out[48]) {
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    out[0] = '\0';
    if (h->kind == S3X_CHECKSUM_CRC32C || h->kind == S3X_CHECKSUM_CRC32) {
        s3x_crc_b64(h->crc, out);
    } else if (h->md) {
        EVP_DigestFinal_ex(h->md, d, &n);
    }
    if (n) s3x_base64(d, n, out);
    s3x_hasher_cleanup(h);
}

void s3x_hasher_cleanup(s3x_hasher *h) {
    if (h->md) EVP_MD_CTX_free(h->md);
    h->md = NULL;
}

void s3x_base64(const unsigned char *in, size_t n, char *out) {
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n) v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < n) v |= in[i + 2];
        out[o++] = tbl[(v >> 18) & 63];
        out[o++] = tbl[(v >> 12) & 63];
        out[o++] = i + 1 < n ? tbl[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? tbl[v & 63] : '=';
    }
    out[o] = '\0';
}

const char *s3x_checksum_header(int kind) {
    switch (kind) {
    case S3X_CHECKSUM_CRC32C: return "x-amz-checksum-crc32c";
    case S3X_CHECKSUM_CRC32: return "x-amz-checksum-crc32";
    case S3X_CHECKSUM_SHA256: return "x-amz-checksum-sha256";
    case S3X_CHECKSUM_MD5: return "content-md5";
    default: return NULL;
    }
}

const char *s3x_checksum_algorithm(int kind) {
    switch (kind) {
    case S3X_CHECKSUM_CRC32C: return "CRC32C";
    case S3X_CHECKSUM_CRC32: return "CRC32";
    case S3X_CHECKSUM_SHA256: return "SHA256";
    default: return NULL;
    }
}

const char *s3x_checksum_xml_name(int kind) {
    switch (kind) {
    case S3X_CHECKSUM_CRC32C: return "ChecksumCRC32C";
    case S3X_CHECKSUM_CRC32: return "ChecksumCRC32";
    case S3X_CHECKSUM_SHA256: return "ChecksumSHA256";
    default: return NULL;
    }
}
