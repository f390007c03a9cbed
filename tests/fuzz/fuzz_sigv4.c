/* SigV4 canonicalisation (core/src/sigv4.c): URI encoding, the canonical
 * query and the canonical headers.
 *
 * Input: a control byte, then NUL-separated strings: the object key, then
 * name/value pairs, each a query parameter or a header as the control byte's
 * bits say. Properties:
 * - s3x_uri_encode emits only unreserved bytes, '/' (when kept) and %XX,
 *   and decodes back to its input;
 * - signing succeeds for every request whose header names are tokens and
 *   whose values have no control characters, and fails with S3X_EINVAL
 *   otherwise;
 * - the canonical request has the documented shape: sorted encoded query
 *   pairs, lowercase sorted header names matching SignedHeaders, values
 *   trimmed and collapsed exactly as botocore's ' '.join(value.split())
 *   (computed here by a second implementation that matches whitespace byte
 *   sequences, not code points);
 * - the signature does not depend on the order of headers of different
 *   names, nor on the order of query parameters. */
#include "fuzz.h"
#include "error.h"
#include "sigv4.h"

#define DATE "20240229T120000Z"
#define HASH "UNSIGNED-PAYLOAD"

static int unreserved(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_' || c == '~';
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static void check_encode(const char *s, size_t n, int slash) {
    s3x_buf b = S3X_BUF_INIT;
    FUZZ_ASSERT(s3x_uri_encode(&b, s, n, slash) == 0, "encode failed");
    size_t j = 0;
    for (size_t i = 0; i < b.len; j++) {
        unsigned char c = (unsigned char)b.data[i];
        int byte;
        if (c == '%') {
            FUZZ_ASSERT(i + 2 < b.len + 1 && hexval(b.data[i + 1]) >= 0 && hexval(b.data[i + 2]) >= 0, "bad %%XX");
            byte = hexval(b.data[i + 1]) * 16 + hexval(b.data[i + 2]);
            FUZZ_ASSERT(!unreserved((unsigned char)byte) && !(byte == '/' && !slash), "needless escape of 0x%02x", byte);
            i += 3;
        } else {
            FUZZ_ASSERT(unreserved(c) || (c == '/' && !slash), "unescaped 0x%02x", c);
            byte = c;
            i++;
        }
        FUZZ_ASSERT(j < n && (unsigned char)s[j] == byte, "decodes to something else at byte %zu", j);
    }
    FUZZ_ASSERT(j == n, "decodes to %zu bytes of %zu", j, n);
    s3x_buf_free(&b);
}

/* botocore's ' '.join(v.split()) on the UTF-8 bytes: whitespace found as
 * byte sequences. */
static const char *const WS[] = {" ", "\t", "\xc2\x85", "\xc2\xa0", "\xe1\x9a\x80", "\xe2\x80\x80", "\xe2\x80\x81",
                                 "\xe2\x80\x82", "\xe2\x80\x83", "\xe2\x80\x84", "\xe2\x80\x85", "\xe2\x80\x86",
                                 "\xe2\x80\x87", "\xe2\x80\x88", "\xe2\x80\x89", "\xe2\x80\x8a", "\xe2\x80\xa8",
                                 "\xe2\x80\xa9", "\xe2\x80\xaf", "\xe2\x81\x9f", "\xe3\x80\x80"};

static size_t ws_at(const char *s) {
    for (size_t i = 0; i < sizeof WS / sizeof WS[0]; i++) {
        size_t l = strlen(WS[i]);
        if (!strncmp(s, WS[i], l)) return l;
    }
    return 0;
}

static char *reference_trim(const char *v) {
    char *out = malloc(strlen(v) + 1);
    if (!out) abort();
    size_t w = 0;
    int pending = 0;
    for (const char *p = v; *p;) {
        size_t l = ws_at(p);
        if (l) {
            pending = w > 0;
            p += l;
        } else {
            if (pending) out[w++] = ' ';
            pending = 0;
            out[w++] = *p++;
        }
    }
    out[w] = '\0';
    return out;
}

static int is_tchar(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int sign(const char *path, const s3x_kv *q, size_t nq, const s3x_kv *h, size_t nh, s3x_sigv4_output *out) {
    s3x_sigv4_input in;
    memset(&in, 0, sizeof in);
    in.access_key = "AKIDEXAMPLE";
    in.secret_key = "secret";
    in.region = "us-east-1";
    in.service = "s3";
    in.amz_date = DATE;
    in.method = "GET";
    in.encoded_path = path;
    in.query = q;
    in.nquery = nq;
    in.headers = h;
    in.nheaders = nh;
    in.payload_hash = HASH;
    memset(out, 0, sizeof *out);
    return s3x_sigv4_sign(&in, out);
}

static int cmp_bytes(const char *a, size_t an, const char *b, size_t bn) {
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : (an < bn ? -1 : (an > bn ? 1 : 0));
}

static char lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c; }

static int name_cmp_ci(const char *a, const char *b) {
    for (;; a++, b++) {
        char x = lower(*a), y = lower(*b);
        if (x != y || !x) return (unsigned char)x - (unsigned char)y;
    }
}

enum { MAXKV = 24 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_in in = {data, size};
    uint8_t ctl = fuzz_u8(&in);
    size_t klen;
    char *key = fuzz_piece(&in, &klen);
    check_encode(key, klen, 0);
    check_encode(key, klen, 1);

    s3x_buf path = S3X_BUF_INIT;
    s3x_buf_puts(&path, "/bucket/");
    FUZZ_ASSERT(s3x_uri_encode(&path, key, klen, 0) == 0, "encode");

    s3x_kv q[MAXKV], h[MAXKV + 3], hs[MAXKV + 3];
    char *strs[4 * MAXKV];
    size_t nq = 0, nh = 0, ns = 0;
    int valid = 1;
    h[nh++] = (s3x_kv){"Host", "bucket.s3.amazonaws.com"};
    h[nh++] = (s3x_kv){"x-amz-date", DATE};
    h[nh++] = (s3x_kv){"X-Amz-Content-SHA256", HASH};
    for (int i = 0; in.n && nq < MAXKV && nh < MAXKV + 3 && ns + 2 <= sizeof strs / sizeof strs[0]; i++) {
        char *k = fuzz_piece(&in, NULL), *v = fuzz_piece(&in, NULL);
        strs[ns++] = k;
        strs[ns++] = v;
        if ((ctl >> (i % 8)) & 1) {
            q[nq++] = (s3x_kv){k, v};
            continue;
        }
        /* Names that would replace the required headers are left out. */
        if (!name_cmp_ci(k, "host") || !name_cmp_ci(k, "x-amz-date") || !name_cmp_ci(k, "x-amz-content-sha256")) continue;
        h[nh++] = (s3x_kv){k, v};
        if (!*k) valid = 0;
        for (const char *p = k; *p; p++) valid &= is_tchar((unsigned char)*p);
        for (const unsigned char *p = (const unsigned char *)v; *p; p++)
            if ((*p < 0x20 && *p != '\t') || *p == 0x7f) valid = 0;
    }

    s3x_sigv4_output out;
    int rc = sign(path.data, q, nq, h, nh, &out);
    if (!valid) {
        FUZZ_ASSERT(rc == S3X_EINVAL, "an invalid header was signed (rc %d)", rc);
        goto done;
    }
    FUZZ_ASSERT(rc == 0, "a valid request was refused: %s", s3x_error_last()->message);

    /* method, path, query, headers..., "", signed headers, payload hash */
    const char *cr = out.canonical_request.data;
    const char *l1 = strchr(cr, '\n');
    const char *l2 = l1 ? strchr(l1 + 1, '\n') : NULL;
    const char *l3 = l2 ? strchr(l2 + 1, '\n') : NULL;
    FUZZ_ASSERT(l3 && !strncmp(cr, "GET\n", 4), "shape");
    FUZZ_ASSERT((size_t)(l2 - l1 - 1) == path.len && !memcmp(l1 + 1, path.data, path.len), "path changed");
    /* The query: k=v pairs of encoded bytes, in order. */
    {
        const char *p = l2 + 1, *prev = NULL;
        size_t prevlen = 0, pairs = 0;
        while (p < l3) {
            const char *amp = memchr(p, '&', (size_t)(l3 - p));
            const char *e = amp ? amp : l3;
            FUZZ_ASSERT(memchr(p, '=', (size_t)(e - p)), "pair without '='");
            for (const char *c = p; c < e; c++)
                FUZZ_ASSERT(unreserved((unsigned char)*c) || *c == '%' || *c == '=', "raw byte 0x%02x in the query",
                            (unsigned char)*c);
            if (prev) { /* sorted by encoded key, then encoded value */
                const char *pe = memchr(prev, '=', prevlen), *ce = memchr(p, '=', (size_t)(e - p));
                int c = cmp_bytes(prev, (size_t)(pe - prev), p, (size_t)(ce - p));
                if (!c) c = cmp_bytes(pe + 1, (size_t)(prev + prevlen - pe - 1), ce + 1, (size_t)(e - ce - 1));
                FUZZ_ASSERT(c <= 0, "query pairs out of order");
            }
            prev = p;
            prevlen = (size_t)(e - p);
            pairs++;
            p = amp ? amp + 1 : l3;
        }
        FUZZ_ASSERT(pairs == nq, "%zu query pairs for %zu parameters", pairs, nq);
    }
    /* Headers: "name:value\n" lines, names lowercase and ascending. */
    {
        const char *p = l3 + 1;
        s3x_buf names = S3X_BUF_INIT;
        const char *prev = NULL;
        size_t prevlen = 0;
        while (*p != '\n') {
            const char *nl = strchr(p, '\n'), *colon = memchr(p, ':', (size_t)(nl - p));
            FUZZ_ASSERT(nl && colon, "header line");
            size_t nlen = (size_t)(colon - p);
            for (const char *c = p; c < colon; c++) FUZZ_ASSERT(!(*c >= 'A' && *c <= 'Z'), "uppercase name");
            if (prev) {
                int c = memcmp(prev, p, prevlen < nlen ? prevlen : nlen);
                FUZZ_ASSERT(c < 0 || (c == 0 && prevlen < nlen), "header names not ascending and unique");
            }
            if (names.len) s3x_buf_puts(&names, ";");
            s3x_buf_append(&names, p, nlen);
            /* Every value joined on this line is trimmed like botocore does. */
            s3x_buf want = S3X_BUF_INIT;
            for (size_t i = 0; i < nh; i++) {
                if (strlen(h[i].key) != nlen) continue;
                size_t j = 0;
                while (j < nlen && lower(h[i].key[j]) == p[j]) j++;
                if (j != nlen) continue;
                char *t = reference_trim(h[i].value);
                if (want.data) s3x_buf_puts(&want, ",");
                else s3x_buf_puts(&want, "");
                s3x_buf_puts(&want, t);
                free(t);
            }
            FUZZ_ASSERT(want.data && (size_t)(nl - colon - 1) == want.len && !memcmp(colon + 1, want.data, want.len),
                        "value of %.*s is not botocore's trimming: got \"%.*s\" want \"%s\"", (int)nlen, p,
                        (int)(nl - colon - 1), colon + 1, want.data ? want.data : "(none)");
            s3x_buf_free(&want);
            prev = p;
            prevlen = nlen;
            p = nl + 1;
        }
        const char *sh = p + 1, *shend = strchr(sh, '\n');
        FUZZ_ASSERT(shend && (size_t)(shend - sh) == names.len && !memcmp(sh, names.data, names.len),
                    "SignedHeaders differ from the canonical header names");
        FUZZ_ASSERT(!strcmp(shend + 1, HASH), "payload hash line");
        s3x_buf_free(&names);
    }
    /* Order independence: headers stably sorted by name (duplicates keep
     * their order, which is significant), query reversed. */
    {
        size_t n2 = 0;
        for (size_t i = 0; i < nh; i++) {
            size_t j = n2++;
            while (j > 0 && name_cmp_ci(hs[j - 1].key, h[i].key) > 0) {
                hs[j] = hs[j - 1];
                j--;
            }
            hs[j] = h[i];
        }
        s3x_kv qr[MAXKV];
        for (size_t i = 0; i < nq; i++) qr[i] = q[nq - 1 - i];
        s3x_sigv4_output out2;
        rc = sign(path.data, qr, nq, hs, n2, &out2);
        FUZZ_ASSERT(rc == 0 && !strcmp(out.signature, out2.signature), "signature depends on the order");
        s3x_sigv4_output_free(&out2);
    }
done:
    s3x_sigv4_output_free(&out);
    s3x_buf_free(&path);
    for (size_t i = 0; i < ns; i++) free(strs[i]);
    free(key);
    return 0;
}
