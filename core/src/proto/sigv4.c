/* AWS Signature Version 4 for S3: canonical request, string to sign, signature.
 *
 * HMAC-SHA256 is built here on top of one EVP_MD_CTX that is reused for every
 * hash of a signature (HMAC(), EVP_MAC and EVP_Q_digest fetch the algorithm
 * on each call, which costs more than the hashing of a small request). */
#include "sigv4.h"
#include "error.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char HEXLC[] = "0123456789abcdef";
static const char HEXUC[] = "0123456789ABCDEF";

/* 1 for A-Z a-z 0-9 - . _ ~ (RFC 3986 unreserved). */
static int is_unreserved(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_' || c == '~';
}

static int is_hex_upper(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F');
}

/* RFC 7230 tchar: the characters allowed in a header name or a method. */
static int is_tchar(unsigned char c) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) return 1;
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Writes the encoding of s[0..len) at dst (room for 3*len bytes); returns the
 * number of bytes written. */
static size_t uri_encode_into(char *dst, const unsigned char *s, size_t len, int encode_slash) {
    char *p = dst;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = s[i];
        if (is_unreserved(c) || (c == '/' && !encode_slash)) {
            *p++ = (char)c;
        } else {
            *p++ = '%';
            *p++ = HEXUC[c >> 4];
            *p++ = HEXUC[c & 15];
        }
    }
    return (size_t)(p - dst);
}

int s3x_uri_encode(s3x_buf *out, const char *s, size_t len, int encode_slash) {
    if (len > ((size_t)-1 - 1) / 3) return S3X_ENOMEM;
    int rc = s3x_buf_reserve(out, len * 3);
    if (rc) return rc;
    if (len) out->len += uri_encode_into(out->data + out->len, (const unsigned char *)s, len, encode_slash);
    out->data[out->len] = '\0';
    return 0;
}

void s3x_hex32(const unsigned char in[32], char out[65]) {
    for (size_t i = 0; i < 32; i++) {
        out[2 * i] = HEXLC[in[i] >> 4];
        out[2 * i + 1] = HEXLC[in[i] & 15];
    }
    out[64] = '\0';
}

void s3x_sha256_hex(const void *data, size_t len, char out[65]) {
    unsigned char md[32];
    unsigned int mdlen = 0;
    if (!EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) || mdlen != 32) {
        /* Only possible when OpenSSL itself is broken (no SHA-256 provider);
         * an all-zero digest can never match, so the request fails loudly. */
        memset(md, 0, sizeof md);
    }
    s3x_hex32(md, out);
}

/* ---- HMAC-SHA256 over a reused digest context (RFC 2104) ---- */

#define SHA256_BLOCK 64

/* A digest context and the SHA-256 implementation it runs. */
typedef struct hctx {
    EVP_MD_CTX *ctx;
    const EVP_MD *sha;
} hctx;

static int sha256_parts(const hctx *h, const void *a, size_t alen, const void *b, size_t blen,
                        unsigned char out[32]) {
    unsigned int n = 0;
    if (!EVP_DigestInit_ex2(h->ctx, h->sha, NULL)) return -1;
    if (alen && !EVP_DigestUpdate(h->ctx, a, alen)) return -1;
    if (blen && !EVP_DigestUpdate(h->ctx, b, blen)) return -1;
    if (!EVP_DigestFinal_ex(h->ctx, out, &n) || n != 32) return -1;
    return 0;
}

static int hmac_sha256(const hctx *ctx, const void *key, size_t keylen, const void *msg, size_t msglen,
                       unsigned char out[32]) {
    unsigned char k[SHA256_BLOCK], pad[SHA256_BLOCK], inner[32];
    int rc = -1;
    memset(k, 0, sizeof k);
    if (keylen > SHA256_BLOCK) {
        if (sha256_parts(ctx, key, keylen, NULL, 0, k)) goto done;
    } else if (keylen) {
        memcpy(k, key, keylen);
    }
    for (size_t i = 0; i < SHA256_BLOCK; i++) pad[i] = (unsigned char)(k[i] ^ 0x36);
    if (sha256_parts(ctx, pad, sizeof pad, msg, msglen, inner)) goto done;
    for (size_t i = 0; i < SHA256_BLOCK; i++) pad[i] = (unsigned char)(k[i] ^ 0x5c);
    if (sha256_parts(ctx, pad, sizeof pad, inner, sizeof inner, out)) goto done;
    rc = 0;
done:
    OPENSSL_cleanse(k, sizeof k);
    OPENSSL_cleanse(pad, sizeof pad);
    OPENSSL_cleanse(inner, sizeof inner);
    return rc;
}

/* ---- canonicalisation ---- */

/* A string inside a scratch buffer, by offset (the buffer moves as it grows). */
typedef struct span {
    size_t off, len;
} span;

typedef struct qent {
    const char *k, *v;
    size_t klen, vlen;
} qent;

typedef struct hent {
    const char *name, *value;
    size_t nlen, vlen;
    size_t idx; /* position in the input: keeps duplicate headers in their order */
} hent;

static int cmp_bytes(const char *a, size_t alen, const char *b, size_t blen) {
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c) return c;
    return alen < blen ? -1 : (alen > blen ? 1 : 0);
}

static int cmp_qent(const void *pa, const void *pb) {
    const qent *a = pa, *b = pb;
    int c = cmp_bytes(a->k, a->klen, b->k, b->klen);
    return c ? c : cmp_bytes(a->v, a->vlen, b->v, b->vlen);
}

static int cmp_hent(const void *pa, const void *pb) {
    const hent *a = pa, *b = pb;
    int c = cmp_bytes(a->name, a->nlen, b->name, b->nlen);
    if (c) return c;
    return a->idx < b->idx ? -1 : (a->idx > b->idx ? 1 : 0);
}

/* Rejects values that would corrupt the credential scope or a line of the
 * string to sign. */
static int check_scope_part(const char *what, const char *s) {
    if (!s || !*s) return s3x_seterr(S3X_EINVAL, "SigV4: %s is missing", what);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p <= 0x20 || *p == 0x7f || *p == '/' || *p == ',')
            return s3x_seterr(S3X_EINVAL, "SigV4: %s contains an invalid character (0x%02x)", what, *p);
    }
    return 0;
}

static int check_amz_date(const char *d) {
    if (!d) return s3x_seterr(S3X_EINVAL, "SigV4: amz_date is missing");
    size_t n = strlen(d);
    int ok = n == 16 && d[8] == 'T' && d[15] == 'Z';
    for (size_t i = 0; ok && i < 15; i++)
        if (i != 8 && !(d[i] >= '0' && d[i] <= '9')) ok = 0;
    if (!ok) return s3x_seterr(S3X_EINVAL, "SigV4: amz_date \"%.32s\" is not YYYYMMDDTHHMMSSZ", d);
    return 0;
}

static int check_path(const char *p) {
    if (!p) return s3x_seterr(S3X_EINVAL, "SigV4: encoded_path is missing");
    if (p[0] != '/') return s3x_seterr(S3X_EINVAL, "SigV4: encoded_path must begin with '/'");
    for (size_t i = 0; p[i]; i++) {
        unsigned char c = (unsigned char)p[i];
        if (is_unreserved(c) || c == '/') continue;
        if (c == '%' && is_hex_upper((unsigned char)p[i + 1]) && is_hex_upper((unsigned char)p[i + 2])) {
            i += 2;
            continue;
        }
        return s3x_seterr(S3X_EINVAL,
                          "SigV4: encoded_path has an unencoded byte 0x%02x at offset %zu "
                          "(encode it with s3x_uri_encode, encode_slash=0)", c, i);
    }
    return 0;
}

static int check_payload_hash(const char *h) {
    if (!h || !*h) return s3x_seterr(S3X_EINVAL, "SigV4: payload_hash is missing");
    size_t n = strlen(h);
    int hex = n == 64;
    for (size_t i = 0; hex && i < n; i++)
        if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f'))) hex = 0;
    /* STREAMING-* are the aws-chunked forms (STREAMING-UNSIGNED-PAYLOAD-TRAILER...). */
    if (hex || strcmp(h, S3X_UNSIGNED_PAYLOAD) == 0 || strncmp(h, "STREAMING-", 10) == 0) {
        for (const char *p = h; *p; p++)
            if (!is_tchar((unsigned char)*p)) goto bad;
        return 0;
    }
bad:
    return s3x_seterr(S3X_EINVAL, "SigV4: payload_hash must be 64 lowercase hex digits, UNSIGNED-PAYLOAD "
                                  "or STREAMING-...");
}

size_t s3x_utf8_decode(const char *s, size_t n, uint32_t *cp) {
    const unsigned char *u = (const unsigned char *)s;
    if (n == 0) return 0;
    unsigned char c = u[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len;
    uint32_t v, min;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        v = c & 0x1fu;
        min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        v = c & 0x0fu;
        min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        v = c & 0x07u;
        min = 0x10000;
    } else {
        return 0; /* a continuation byte, C0/C1 (always overlong) or F5-FF */
    }
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((u[i] & 0xc0) != 0x80) return 0;
        v = (v << 6) | (u[i] & 0x3fu);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
    *cp = v;
    return len;
}

size_t s3x_utf8_space(const char *s, size_t n) {
    if (n == 0) return 0;
    unsigned char c = (unsigned char)s[0];
    if (c < 0x80) return (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) ? 1 : 0;
    uint32_t cp;
    size_t len = s3x_utf8_decode(s, n, &cp);
    if (!len) return 0;
    switch (cp) {
    case 0x85: case 0xa0: case 0x1680: case 0x2028: case 0x2029: case 0x202f: case 0x205f: case 0x3000:
        return len;
    default:
        return cp >= 0x2000 && cp <= 0x200a ? len : 0;
    }
}

/* Appends value with leading and trailing whitespace removed and each inner
 * run of whitespace turned into one space: botocore's ' '.join(v.split()),
 * where v is a str, so its split() knows the Unicode spaces (a no-break space
 * between words becomes a plain space). The value's bytes are walked one
 * UTF-8 character at a time (a byte at a time where they are not UTF-8), so
 * a space is only ever recognised where a character starts. */
static void trimall_into(s3x_buf *b, const char *v, size_t n) {
    char *dst = b->data + b->len;
    size_t w = 0, i = 0;
    int pending = 0; /* whitespace seen since the last word */
    while (i < n) {
        size_t sp = s3x_utf8_space(v + i, n - i);
        if (sp) {
            pending = w > 0;
            i += sp;
            continue;
        }
        if (pending) dst[w++] = ' ';
        pending = 0;
        uint32_t cp;
        size_t len = s3x_utf8_decode(v + i, n - i, &cp);
        if (!len) len = 1;
        memcpy(dst + w, v + i, len);
        w += len;
        i += len;
    }
    b->len += w;
    b->data[b->len] = '\0';
}

static int ascii_ieq(const char *a, const char *b) {
    for (;; a++, b++) {
        char x = *a, y = *b;
        if (x >= 'A' && x <= 'Z') x = (char)(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z') y = (char)(y - 'A' + 'a');
        if (x != y) return 0;
        if (!x) return 1;
    }
}

/* The first header named lname (any case), or NULL. */
static const char *find_header(const s3x_sigv4_input *in, const char *lname) {
    for (size_t i = 0; i < in->nheaders; i++)
        if (ascii_ieq(in->headers[i].key, lname)) return in->headers[i].value;
    return NULL;
}

/* 1 if v, trimmed of whitespace as the canonical form trims it, equals want. */
static int trimmed_equals(const char *v, const char *want) {
    size_t n = strlen(v), wl = strlen(want), i = 0, sp;
    while ((sp = s3x_utf8_space(v + i, n - i))) i += sp;
    if (n - i < wl || memcmp(v + i, want, wl) != 0) return 0;
    for (i += wl; (sp = s3x_utf8_space(v + i, n - i)); i += sp) {}
    return i == n;
}

static int check_input(const s3x_sigv4_input *in) {
    int rc;
    if (!in) return s3x_seterr(S3X_EINVAL, "SigV4: no input");
    if ((rc = check_scope_part("access key", in->access_key))) return rc;
    if (!in->secret_key || !*in->secret_key) return s3x_seterr(S3X_EINVAL, "SigV4: secret key is missing");
    if ((rc = check_scope_part("region", in->region))) return rc;
    if ((rc = check_scope_part("service", in->service))) return rc;
    if ((rc = check_amz_date(in->amz_date))) return rc;
    if (!in->method || !*in->method) return s3x_seterr(S3X_EINVAL, "SigV4: method is missing");
    for (const char *p = in->method; *p; p++)
        if (!is_tchar((unsigned char)*p)) return s3x_seterr(S3X_EINVAL, "SigV4: invalid method");
    if ((rc = check_path(in->encoded_path))) return rc;
    if ((rc = check_payload_hash(in->payload_hash))) return rc;
    if (in->nquery && !in->query) return s3x_seterr(S3X_EINVAL, "SigV4: query is NULL but nquery > 0");
    for (size_t i = 0; i < in->nquery; i++)
        if (!in->query[i].key) return s3x_seterr(S3X_EINVAL, "SigV4: query parameter %zu has no name", i);
    if (!in->nheaders || !in->headers) return s3x_seterr(S3X_EINVAL, "SigV4: no headers to sign");
    for (size_t i = 0; i < in->nheaders; i++) {
        const char *k = in->headers[i].key, *v = in->headers[i].value;
        if (!k || !*k) return s3x_seterr(S3X_EINVAL, "SigV4: header %zu has no name", i);
        for (const char *p = k; *p; p++)
            if (!is_tchar((unsigned char)*p))
                return s3x_seterr(S3X_EINVAL, "SigV4: header name \"%.64s\" has an invalid character", k);
        if (!v) return s3x_seterr(S3X_EINVAL, "SigV4: header %.64s has no value", k);
        for (const unsigned char *p = (const unsigned char *)v; *p; p++)
            if ((*p < 0x20 && *p != '\t') || *p == 0x7f)
                return s3x_seterr(S3X_EINVAL, "SigV4: header %.64s has a control character in its value", k);
    }
    const char *v = find_header(in, "host");
    if (!v || trimmed_equals(v, ""))
        return s3x_seterr(S3X_EINVAL, "SigV4: a non-empty host header must be signed");
    v = find_header(in, "x-amz-date");
    if (!v) return s3x_seterr(S3X_EINVAL, "SigV4: the x-amz-date header must be signed");
    if (!trimmed_equals(v, in->amz_date))
        return s3x_seterr(S3X_EINVAL, "SigV4: x-amz-date header \"%.32s\" differs from amz_date", v);
    /* S3 refuses a request without x-amz-content-sha256, and one whose header
     * differs from the hash in the canonical request (XAmzContentSHA256Mismatch).
     * Other services (the generic SigV4 test suite) need not send the header. */
    v = find_header(in, "x-amz-content-sha256");
    if (!v && strcmp(in->service, "s3") == 0)
        return s3x_seterr(S3X_EINVAL, "SigV4: the x-amz-content-sha256 header must be signed for S3");
    if (v && !trimmed_equals(v, in->payload_hash))
        return s3x_seterr(S3X_EINVAL, "SigV4: x-amz-content-sha256 header differs from payload_hash");
    return 0;
}

/* Appends the canonical query string to out. */
static int canonical_query(const s3x_sigv4_input *in, s3x_buf *out, s3x_buf *scratch) {
    size_t n = in->nquery;
    if (!n) return 0;
    if (n > ((size_t)-1) / (2 * sizeof(span)) || n > ((size_t)-1) / sizeof(qent)) return S3X_ENOMEM;
    span *sp = malloc(n * 2 * sizeof *sp);
    qent *q = malloc(n * sizeof *q);
    int rc = S3X_ENOMEM;
    if (!sp || !q) goto done;
    s3x_buf_clear(scratch);
    for (size_t i = 0; i < n; i++) {
        const char *k = in->query[i].key, *v = in->query[i].value ? in->query[i].value : "";
        size_t kl = strlen(k), vl = strlen(v);
        sp[2 * i].off = scratch->len;
        if ((rc = s3x_uri_encode(scratch, k, kl, 1))) goto done;
        sp[2 * i].len = scratch->len - sp[2 * i].off;
        sp[2 * i + 1].off = scratch->len;
        if ((rc = s3x_uri_encode(scratch, v, vl, 1))) goto done;
        sp[2 * i + 1].len = scratch->len - sp[2 * i + 1].off;
    }
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        q[i].k = scratch->data + sp[2 * i].off;
        q[i].klen = sp[2 * i].len;
        q[i].v = scratch->data + sp[2 * i + 1].off;
        q[i].vlen = sp[2 * i + 1].len;
        total += q[i].klen + q[i].vlen + 2;
    }
    qsort(q, n, sizeof *q, cmp_qent);
    if ((rc = s3x_buf_reserve(out, total))) goto done;
    for (size_t i = 0; i < n; i++) {
        if (i) out->data[out->len++] = '&';
        memcpy(out->data + out->len, q[i].k, q[i].klen);
        out->len += q[i].klen;
        out->data[out->len++] = '=';
        memcpy(out->data + out->len, q[i].v, q[i].vlen);
        out->len += q[i].vlen;
    }
    out->data[out->len] = '\0';
    rc = 0;
done:
    free(sp);
    free(q);
    return rc;
}

/* Appends the canonical headers block (each "name:value\n") to out and the
 * signed header list to signed_hdrs. */
static int canonical_headers(const s3x_sigv4_input *in, s3x_buf *out, s3x_buf *signed_hdrs,
                             s3x_buf *scratch) {
    size_t n = in->nheaders;
    if (n > ((size_t)-1) / (2 * sizeof(span)) || n > ((size_t)-1) / sizeof(hent)) return S3X_ENOMEM;
    span *sp = malloc(n * 2 * sizeof *sp);
    hent *h = malloc(n * sizeof *h);
    int rc = S3X_ENOMEM;
    if (!sp || !h) goto done;
    s3x_buf_clear(scratch);
    for (size_t i = 0; i < n; i++) {
        const char *k = in->headers[i].key, *v = in->headers[i].value;
        size_t kl = strlen(k), vl = strlen(v);
        if ((rc = s3x_buf_reserve(scratch, kl + vl))) goto done;
        sp[2 * i].off = scratch->len;
        for (size_t j = 0; j < kl; j++) {
            char c = k[j];
            scratch->data[scratch->len++] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
        }
        sp[2 * i].len = kl;
        sp[2 * i + 1].off = scratch->len;
        trimall_into(scratch, v, vl);
        sp[2 * i + 1].len = scratch->len - sp[2 * i + 1].off;
    }
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        h[i].name = scratch->data + sp[2 * i].off;
        h[i].nlen = sp[2 * i].len;
        h[i].value = scratch->data + sp[2 * i + 1].off;
        h[i].vlen = sp[2 * i + 1].len;
        h[i].idx = i;
        total += h[i].nlen + h[i].vlen + 2;
    }
    qsort(h, n, sizeof *h, cmp_hent);
    if ((rc = s3x_buf_reserve(out, total))) goto done;
    if ((rc = s3x_buf_reserve(signed_hdrs, total))) goto done;
    for (size_t i = 0; i < n; i++) {
        int same = i > 0 && cmp_bytes(h[i].name, h[i].nlen, h[i - 1].name, h[i - 1].nlen) == 0;
        if (same) {
            out->len--; /* drop the '\n': continue the previous line */
            out->data[out->len++] = ',';
        } else {
            if (signed_hdrs->len) signed_hdrs->data[signed_hdrs->len++] = ';';
            memcpy(signed_hdrs->data + signed_hdrs->len, h[i].name, h[i].nlen);
            signed_hdrs->len += h[i].nlen;
            memcpy(out->data + out->len, h[i].name, h[i].nlen);
            out->len += h[i].nlen;
            out->data[out->len++] = ':';
        }
        memcpy(out->data + out->len, h[i].value, h[i].vlen);
        out->len += h[i].vlen;
        out->data[out->len++] = '\n';
    }
    out->data[out->len] = '\0';
    signed_hdrs->data[signed_hdrs->len] = '\0';
    rc = 0;
done:
    free(sp);
    free(h);
    return rc;
}

/* Appends each string of a NULL-terminated list. */
#if defined(__GNUC__)
__attribute__((sentinel))
#endif
static int buf_cat(s3x_buf *b, ...) {
    va_list ap;
    int rc = 0;
    va_start(ap, b);
    for (const char *s; !rc && (s = va_arg(ap, const char *)) != NULL;) rc = s3x_buf_puts(b, s);
    va_end(ap);
    return rc;
}

/* kDate = HMAC("AWS4" + secret, date), kRegion, kService, kSigning, then the
 * signature = HMAC(kSigning, string to sign). */
static int derive_and_sign(const hctx *ctx, const s3x_sigv4_input *in, const s3x_buf *sts,
                           unsigned char sig[32]) {
    size_t sl = strlen(in->secret_key);
    unsigned char k[32];
    char *ksecret = malloc(sl + 4);
    if (!ksecret) return S3X_ENOMEM;
    memcpy(ksecret, "AWS4", 4);
    memcpy(ksecret + 4, in->secret_key, sl);
    int rc = S3X_EINTERNAL;
    if (hmac_sha256(ctx, ksecret, sl + 4, in->amz_date, 8, k)) goto done;
    if (hmac_sha256(ctx, k, 32, in->region, strlen(in->region), k)) goto done;
    if (hmac_sha256(ctx, k, 32, in->service, strlen(in->service), k)) goto done;
    if (hmac_sha256(ctx, k, 32, "aws4_request", 12, k)) goto done;
    if (hmac_sha256(ctx, k, 32, sts->data, sts->len, sig)) goto done;
    rc = 0;
done:
    OPENSSL_cleanse(ksecret, sl + 4);
    free(ksecret);
    OPENSSL_cleanse(k, sizeof k);
    return rc;
}

int s3x_sigv4_sign(const s3x_sigv4_input *in, s3x_sigv4_output *out) {
    if (!out) return s3x_seterr(S3X_EINVAL, "SigV4: no output");
    s3x_buf_clear(&out->authorization);
    s3x_buf_clear(&out->canonical_request);
    s3x_buf_clear(&out->string_to_sign);
    out->signature[0] = '\0';
    int rc = check_input(in);
    if (rc) return rc;

    s3x_buf scratch = S3X_BUF_INIT, shdrs = S3X_BUF_INIT;
    s3x_buf *cr = &out->canonical_request, *sts = &out->string_to_sign;
    unsigned char md[32], sig[32];
    char hex[65], scope_date[9];
    memcpy(scope_date, in->amz_date, 8);
    scope_date[8] = '\0';
    /* One explicit fetch per signature instead of an implicit one per hash. */
    EVP_MD *sha = EVP_MD_fetch(NULL, "SHA256", NULL);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!sha) {
        rc = S3X_EINTERNAL;
        goto done;
    }
    if (!ctx) {
        rc = S3X_ENOMEM;
        goto done;
    }

    if ((rc = s3x_buf_puts(cr, in->method)) || (rc = s3x_buf_append(cr, "\n", 1)) ||
        (rc = s3x_buf_puts(cr, in->encoded_path)) || (rc = s3x_buf_append(cr, "\n", 1)) ||
        (rc = canonical_query(in, cr, &scratch)) || (rc = s3x_buf_append(cr, "\n", 1)) ||
        (rc = canonical_headers(in, cr, &shdrs, &scratch)) || (rc = s3x_buf_append(cr, "\n", 1)) ||
        (rc = s3x_buf_append(cr, shdrs.data, shdrs.len)) || (rc = s3x_buf_append(cr, "\n", 1)) ||
        (rc = s3x_buf_puts(cr, in->payload_hash)))
        goto done;

    hctx h = {ctx, sha};
    if (sha256_parts(&h, cr->data, cr->len, NULL, 0, md)) {
        rc = S3X_EINTERNAL;
        goto done;
    }
    s3x_hex32(md, hex);
    if ((rc = buf_cat(sts, "AWS4-HMAC-SHA256\n", in->amz_date, "\n", scope_date, "/", in->region, "/",
                      in->service, "/aws4_request\n", hex, (const char *)NULL)))
        goto done;
    if ((rc = derive_and_sign(&h, in, sts, sig))) goto done;
    s3x_hex32(sig, out->signature);
    rc = buf_cat(&out->authorization, "AWS4-HMAC-SHA256 Credential=", in->access_key, "/", scope_date, "/",
                 in->region, "/", in->service, "/aws4_request, SignedHeaders=", shdrs.data,
                 ", Signature=", out->signature, (const char *)NULL);
done:
    if (rc == S3X_ENOMEM) s3x_seterr(rc, "SigV4: out of memory");
    if (rc == S3X_EINTERNAL) s3x_seterr(rc, "SigV4: OpenSSL SHA-256 failed");
    if (rc) out->signature[0] = '\0';
    OPENSSL_cleanse(sig, sizeof sig);
    EVP_MD_CTX_free(ctx);
    EVP_MD_free(sha);
    s3x_buf_free(&scratch);
    s3x_buf_free(&shdrs);
    return rc;
}

void s3x_sigv4_output_free(s3x_sigv4_output *out) {
    if (!out) return;
    s3x_buf_free(&out->authorization);
    s3x_buf_free(&out->canonical_request);
    s3x_buf_free(&out->string_to_sign);
    out->signature[0] = '\0';
}

/* Days since 1970-01-01 to a proleptic Gregorian date (H. Hinnant's algorithm). */
static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d) {
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t yy = (int64_t)yoe + era * 400;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = yy + (*m <= 2);
}

static void put_digits(char *dst, unsigned v, int n) {
    for (int i = n - 1; i >= 0; i--) {
        dst[i] = (char)('0' + v % 10);
        v /= 10;
    }
}

void s3x_amz_date(int64_t t, char out[17]) {
    /* Clamped to years 0000..9999, the only ones the format can hold. */
    const int64_t lo = -62167219200LL, hi = 253402300799LL;
    if (t < lo) t = lo;
    if (t > hi) t = hi;
    int64_t days = t / 86400, secs = t % 86400;
    if (secs < 0) {
        secs += 86400;
        days--;
    }
    int64_t y;
    unsigned m, d;
    civil_from_days(days, &y, &m, &d);
    put_digits(out, (unsigned)y, 4);
    put_digits(out + 4, m, 2);
    put_digits(out + 6, d, 2);
    out[8] = 'T';
    put_digits(out + 9, (unsigned)(secs / 3600), 2);
    put_digits(out + 11, (unsigned)(secs / 60 % 60), 2);
    put_digits(out + 13, (unsigned)(secs % 60), 2);
    out[15] = 'Z';
    out[16] = '\0';
}
