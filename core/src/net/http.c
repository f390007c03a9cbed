/* HTTP requests to S3 over libcurl: URL building, signing, the multi loop
 * and mapping outcomes to s3xfer errors. */
#include "client_internal.h"
#include <inttypes.h>
#include "buf.h"
#include "bytecopy.h"
#include "error.h"
#include "range.h"
#include "s3xml.h"
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* S3's largest documents are list pages: 1,000 keys of at most 1,024 bytes,
 * each character escaped as an entity of at most 6 bytes, plus ~1 KiB of
 * fields per entry, stay under 8 MiB. A larger document is not S3's. */
#define DEFAULT_RESP_CAP (8u * 1024u * 1024u)
#define ERROR_BODY_CAP (1u * 1024u * 1024u)

double s3x_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}


/* ---- curl callbacks ---------------------------------------------------- */

/* Decoded body bytes: from the caller's read_fn, or copied from memory. */
static int64_t pull_body(char *dst, size_t cap, void *ud) {
    s3x_http_req *r = ud;
    if (r->read_fn) return r->read_fn(dst, cap, r->read_payload);
    size_t left = r->body_len - r->body_off;
    size_t n = left < cap ? left : cap;
    s3x_bytes_copy(dst, r->body + r->body_off, n);
    r->body_off += n;
    return (int64_t)n;
}

static size_t on_read(char *dst, size_t size, size_t nitems, void *ud) {
    s3x_http_req *r = ud;
    size_t cap = size * nitems;
    int64_t n = 0;
    if (r->trailer_kind) {
        n = s3x_chunked_fill(&r->chunked, dst, cap, pull_body, r);
        if (n < 0 || (n == 0 && r->wire_out < r->wire_size)) {
            r->read_failed = 1;
            return CURL_READFUNC_ABORT;
        }
        r->wire_out += n;
        r->bytes_out = r->chunked.done;
        if (r->wire_out >= r->wire_size && r->t_sent == 0) r->t_sent = s3x_now();
        return (size_t)n;
    }
    int64_t total = r->read_fn ? r->body_size : (int64_t)r->body_len;
    int64_t left = total - r->bytes_out;
    if (left <= 0) return 0;
    if ((int64_t)cap > left) cap = (size_t)left;
    n = pull_body(dst, cap, r);
    if (n <= 0 || n > (int64_t)cap) {
        r->read_failed = 1;
        return CURL_READFUNC_ABORT;
    }
    r->bytes_out += n;
    if (r->bytes_out >= total && r->t_sent == 0) r->t_sent = s3x_now();
    return (size_t)n;
}

static int header_is(const char *line, size_t n, const char *name, const char **val, size_t *vlen) {
    size_t k = strlen(name);
    if (n <= k || line[k] != ':' || strncasecmp(line, name, k) != 0) return 0;
    const char *v = line + k + 1;
    const char *e = line + n;
    while (v < e && (*v == ' ' || *v == '\t')) v++;
    while (e > v && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' ')) e--;
    *val = v;
    *vlen = (size_t)(e - v);
    return 1;
}

static void set_field(char **field, const char *v, size_t n) {
    free(*field);
    *field = s3x_strndup(v, n);
}

/* Retry-After: delay-seconds or an HTTP-date (RFC 9110 10.2.3). Anything
 * else counts as absent (-1). Bounded here so a hostile or confused server
 * cannot park a transfer: the retry window bounds it again in the judge. */
static double parse_retry_after(const char *v, size_t vl) {
    char tmp[64];
    if (vl == 0 || vl >= sizeof tmp) return -1;
    memcpy(tmp, v, vl);
    tmp[vl] = 0;
    double s;
    if (tmp[0] >= '0' && tmp[0] <= '9') {
        int64_t secs = 0;
        for (size_t i = 0; i < vl; i++) {
            if (tmp[i] < '0' || tmp[i] > '9') return -1;
            if (secs < 1000000) secs = secs * 10 + (tmp[i] - '0');
        }
        s = (double)secs;
    } else {
        time_t when = curl_getdate(tmp, NULL);
        if (when == (time_t)-1) return -1;
        s = difftime(when, time(NULL));
        if (s < 0) s = 0;
    }
    return s > S3X_RETRY_AFTER_MAX_S ? S3X_RETRY_AFTER_MAX_S : s;
}

/* A user metadata header "x-amz-meta-name: value" into r->meta as
 * "x-amz-meta-name\0value\0" (name lowercased, as S3 sends and signs it),
 * for a copy that carries the source's metadata; one over S3's 2 KiB of
 * metadata is not S3's and is dropped with the rest (meta_over). */
static void keep_meta(s3x_http_req *r, const char *line, size_t n) {
    const char *colon = memchr(line, ':', n);
    if (!colon) return;
    size_t kl = (size_t)(colon - line);
    const char *v;
    size_t vl;
    char name[128];
    if (kl >= sizeof name) {
        r->meta_over = 1;
        return;
    }
    for (size_t i = 0; i < kl; i++) name[i] = (char)tolower((unsigned char)line[i]);
    name[kl] = 0;
    if (!header_is(line, n, name, &v, &vl)) return;
    if (r->meta.len + kl + vl + 2 > 8192) {
        r->meta_over = 1;
        return;
    }
    if (s3x_buf_append(&r->meta, name, kl + 1) || s3x_buf_append(&r->meta, v, vl) || s3x_buf_append(&r->meta, "", 1))
        r->meta_over = 1;
}

static size_t on_header(char *line, size_t size, size_t nitems, void *ud) {
    s3x_http_req *r = ud;
    size_t n = size * nitems;
    if (r->t_first_byte == 0) {
        double now = s3x_now();
        /* Read while the request runs, perhaps from another thread
         * (s3x_req_first_byte). */
        __atomic_store(&r->t_first_byte, &now, __ATOMIC_RELAXED);
    }
    if (r->t_sent == 0) r->t_sent = r->t_first_byte;
    if (n >= 5 && strncmp(line, "HTTP/", 5) == 0) {
        /* A new status line (after a 100 Continue, say) starts a fresh header set. */
        const char *sp = memchr(line, ' ', n);
        /* The 3-digit code, read within the line: strtol skipped a CR/LF
         * after "HTTP/1.1 " and read on past the line (found by fuzzing). */
        long status = 0;
        for (const char *d = sp ? sp + 1 : line + n; d < line + n && d < sp + 4 && *d >= '0' && *d <= '9'; d++)
            status = status * 10 + (*d - '0');
        r->status = status;
        r->got_status = 1;
        r->retry_after_s = -1;
        /* Lengths of an interim response (100 Continue) say nothing about
         * the final one's body. */
        r->content_length = -1;
        free(r->content_range);
        r->content_range = NULL;
        return n;
    }
    const char *v;
    size_t vl;
    if (header_is(line, n, "etag", &v, &vl)) set_field(&r->etag, v, vl);
    else if (header_is(line, n, "x-amz-request-id", &v, &vl)) set_field(&r->request_id, v, vl);
    else if (header_is(line, n, "content-range", &v, &vl)) set_field(&r->content_range, v, vl);
    else if (header_is(line, n, "content-type", &v, &vl)) set_field(&r->content_type, v, vl);
    else if (header_is(line, n, "last-modified", &v, &vl)) set_field(&r->last_modified, v, vl);
    else if (header_is(line, n, "x-amz-version-id", &v, &vl)) set_field(&r->version_id, v, vl);
    else if (header_is(line, n, "server", &v, &vl)) set_field(&r->server, v, vl);
    else if (header_is(line, n, "x-amz-checksum-crc32c", &v, &vl)) {
        set_field(&r->checksum_value, v, vl);
        r->checksum_kind = S3X_CHECKSUM_CRC32C;
    } else if (header_is(line, n, "x-amz-checksum-crc32", &v, &vl)) {
        set_field(&r->checksum_value, v, vl);
        r->checksum_kind = S3X_CHECKSUM_CRC32;
    } else if (header_is(line, n, "x-amz-checksum-sha256", &v, &vl)) {
        set_field(&r->checksum_value, v, vl);
        r->checksum_kind = S3X_CHECKSUM_SHA256;
    }
    else if (header_is(line, n, "retry-after", &v, &vl)) r->retry_after_s = parse_retry_after(v, vl);
    else if (r->want_meta && n > 11 && !strncasecmp(line, "x-amz-meta-", 11)) keep_meta(r, line, n);
    else if (header_is(line, n, "content-length", &v, &vl)) {
        /* Digits only, no overflow (strtoll took "+1", "-5" and saturated
         * huge values). A value that is not a length counts as absent:
         * downloads then go by Content-Range and the bytes counted, and
         * never by a length they could not check (range.c). */
        int64_t cl;
        r->content_length = s3x_content_length_parse(v, vl, &cl) == 0 ? cl : -1;
    }
    return n;
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *ud) {
    s3x_http_req *r = ud;
    size_t n = size * nmemb;
    r->bytes_in += (int64_t)n;
    if (r->status >= 300 || !r->write_fn) {
        size_t cap = r->status >= 300 ? ERROR_BODY_CAP : (r->resp_cap ? r->resp_cap : DEFAULT_RESP_CAP);
        /* Refuse an announced oversize body at once rather than after
         * holding cap bytes of it. */
        int announced_over = r->status < 300 && r->content_length > 0 && (uint64_t)r->content_length > cap;
        if (announced_over || r->resp_body.len + n > cap) {
            if (r->status >= 300) return n;  /* keep what we have of the error body */
            r->aborted_by_callback = 1;
            r->body_over_cap = 1;
            return 0;
        }
        if (s3x_buf_append(&r->resp_body, data, n)) {
            r->aborted_by_callback = 1;
            return 0;
        }
        return n;
    }
    if (r->write_fn(data, n, r->write_payload) != 0) {
        r->aborted_by_callback = 1;
        return 0;
    }
    return n;
}

/* ---- building and signing --------------------------------------------- */

typedef struct enc_kv {
    char *k, *v;
} enc_kv;

static int cmp_enc_kv(const void *a, const void *b) {
    const enc_kv *x = a, *y = b;
    int c = strcmp(x->k, y->k);
    return c ? c : strcmp(x->v, y->v);
}

static int append_query(s3x_buf *url, const s3x_http_req *r) {
    enc_kv kv[S3X_MAX_QUERY];
    size_t n = r->nquery;
    int rc = 0;
    memset(kv, 0, sizeof kv);
    for (size_t i = 0; i < n && !rc; i++) {
        s3x_buf k = S3X_BUF_INIT, v = S3X_BUF_INIT;
        rc = s3x_uri_encode(&k, r->query[i].key, strlen(r->query[i].key), 1);
        const char *val = r->query[i].value ? r->query[i].value : "";
        if (!rc) rc = s3x_uri_encode(&v, val, strlen(val), 1);
        kv[i].k = s3x_buf_detach(&k);
        kv[i].v = s3x_buf_detach(&v);
        if (!kv[i].k || !kv[i].v) rc = S3X_ENOMEM;
    }
    if (!rc && n) {
        qsort(kv, n, sizeof kv[0], cmp_enc_kv);
        for (size_t i = 0; i < n && !rc; i++)
            rc = s3x_buf_printf(url, "%c%s=%s", i ? '&' : '?', kv[i].k, kv[i].v);
    }
    for (size_t i = 0; i < n; i++) {
        free(kv[i].k);
        free(kv[i].v);
    }
    return rc;
}

static void amz_now(char out[17]) { s3x_amz_date((int64_t)time(NULL), out); }

/* s3x_http_prepare in steps: the URL, the payload hash, the signed header
 * list, the easy handle and its options. */

/* The request's host and encoded path, and r->url from them. The host is
 * built only from a validated bucket and the validated endpoint authority:
 * no name can redirect a signed request. */
int s3x_http_build_url(s3x_client *c, s3x_http_req *r, s3x_buf *path, s3x_buf *host) {
    int path_style = 0;
    int rc;
    if (r->bucket && (rc = s3x_client_bucket_addressing(c, r->bucket, &path_style))) return rc;
    if (r->bucket && path_style) {
        rc = s3x_buf_printf(path, "/%s", r->bucket);
        if (!rc && r->key) rc = s3x_buf_puts(path, "/");
        if (!rc) rc = s3x_buf_puts(host, c->hostport);
    } else if (r->bucket) {
        rc = s3x_buf_printf(host, "%s.%s", r->bucket, c->vhost ? c->vhost : c->hostport);
        if (!rc) rc = s3x_buf_puts(path, "/");
    } else {
        rc = s3x_buf_puts(path, "/");
        if (!rc) rc = s3x_buf_puts(host, c->hostport);
    }
    if (!rc && r->key) rc = s3x_uri_encode(path, r->key, strlen(r->key), 0);
    s3x_buf_clear(&r->url);
    if (!rc) rc = s3x_buf_printf(&r->url, "%s://%s%s", c->scheme, host->data, path->data);
    if (!rc) rc = append_query(&r->url, r);
    return rc;
}

/* The x-amz-content-sha256 value: the caller's, the streaming-trailer
 * marker (and the aws-chunked encoder started), UNSIGNED-PAYLOAD, or the
 * SHA-256 of a memory body (into hash). *decoded: the body's length. */
static int choose_payload_hash(s3x_client *c, s3x_http_req *r, char hash[65], int64_t *decoded,
                               const char **payload_hash) {
    *payload_hash = r->payload_hash;
    *decoded = r->read_fn ? r->body_size : (int64_t)r->body_len;
    if (r->trailer_kind) {
        /* The checksum trails the body (aws-chunked), computed as it is sent. */
        int rc = s3x_chunked_begin(&r->chunked, r->trailer_kind, *decoded);
        if (rc) return rc;
        r->wire_size = s3x_chunked_length(r->trailer_kind, *decoded);
        r->wire_out = 0;
        *payload_hash = S3X_STREAMING_UNSIGNED_TRAILER;
    } else if (!*payload_hash) {
        int64_t mode = c->params[S3X_PARAM_PAYLOAD_SIGNING];
        int has_checksum = 0;
        for (size_t i = 0; i < r->nheaders; i++)
            if (!strncasecmp(r->headers[i].key, "x-amz-checksum-", 15) || !strcasecmp(r->headers[i].key, "content-md5"))
                has_checksum = 1;
        if (r->read_fn || mode == S3X_PAYLOAD_UNSIGNED || (mode == S3X_PAYLOAD_AUTO && has_checksum)) {
            *payload_hash = S3X_UNSIGNED_PAYLOAD;
        } else {
            s3x_sha256_hex(r->body ? r->body : "", r->body ? r->body_len : 0, hash);
            *payload_hash = hash;
        }
    }
    return 0;
}

/* Appends "key: value" to r->slist. 0 or S3X_ENOMEM. */
static int slist_add(s3x_http_req *r, s3x_buf *line, const char *key, const char *value) {
    s3x_buf_clear(line);
    if (value ? s3x_buf_printf(line, "%s: %s", key, value) : s3x_buf_puts(line, key)) return S3X_ENOMEM;
    struct curl_slist *ns = curl_slist_append(r->slist, line->data);
    if (!ns) return S3X_ENOMEM;
    r->slist = ns;
    return 0;
}

/* Signs the request (our headers plus the caller's) and builds r->slist:
 * the signed headers, Authorization, and no Expect (no 100-continue round
 * trip) nor default Accept. The Authorization line is wiped after use. */
static int sign_headers(s3x_client *c, s3x_http_req *r, const char *host, const char *path,
                        const char *payload_hash, int64_t decoded) {
    s3x_creds *cr = NULL;
    int crc = s3x_client_creds_acquire(c, &cr);
    if (crc) return crc;
    char date[17];
    amz_now(date);
    s3x_kv hdrs[S3X_MAX_HEADERS + 7];
    size_t nh = 0;
    hdrs[nh++] = (s3x_kv){"host", host};
    hdrs[nh++] = (s3x_kv){"x-amz-date", date};
    hdrs[nh++] = (s3x_kv){"x-amz-content-sha256", payload_hash};
    if (cr->session_token) hdrs[nh++] = (s3x_kv){"x-amz-security-token", cr->session_token};
    char decoded_len[24];
    if (r->trailer_kind) {
        snprintf(decoded_len, sizeof decoded_len, "%" PRId64, decoded);
        hdrs[nh++] = (s3x_kv){"content-encoding", "aws-chunked"};
        hdrs[nh++] = (s3x_kv){"x-amz-decoded-content-length", decoded_len};
        hdrs[nh++] = (s3x_kv){"x-amz-trailer", s3x_checksum_header(r->trailer_kind)};
    }
    for (size_t i = 0; i < r->nheaders; i++) hdrs[nh++] = r->headers[i];

    s3x_sigv4_input in = {
        .access_key = cr->access_key, .secret_key = cr->secret_key, .region = c->region,
        .service = "s3", .amz_date = date, .method = r->method, .encoded_path = path,
        .query = r->query, .nquery = r->nquery, .headers = hdrs, .nheaders = nh,
        .payload_hash = payload_hash,
    };
    s3x_sigv4_output out;
    memset(&out, 0, sizeof out);
    int rc = s3x_sigv4_sign(&in, &out);
    if (rc) {
        s3x_sigv4_output_free(&out);
        s3x_creds_unref(cr);
        return rc;
    }
    curl_slist_free_all(r->slist);
    r->slist = NULL;
    s3x_buf line = S3X_BUF_INIT;
    for (size_t i = 0; i < nh && !rc; i++) rc = slist_add(r, &line, hdrs[i].key, hdrs[i].value);
    if (!rc) {
        rc = slist_add(r, &line, "Authorization", out.authorization.data);
        if (line.data) s3x_wipe(line.data, line.len);
    }
    if (!rc) rc = slist_add(r, &line, "Expect:", NULL);
    if (!rc) rc = slist_add(r, &line, "Accept:", NULL);
    s3x_buf_free(&line);
    s3x_sigv4_output_free(&out);
    s3x_creds_unref(cr); /* after the slist holds copies of the token */
    if (rc) return s3x_seterr(S3X_ENOMEM, "out of memory building request headers");
    return 0;
}

/* An easy handle for r: its own from a previous attempt, an idle one of the
 * client's, or a new one. */
static int take_easy(s3x_client *c, s3x_http_req *r) {
    if (r->easy) return 0;
    if (c->nidle) r->easy = c->idle[--c->nidle];
    else r->easy = curl_easy_init();
    if (!r->easy) return s3x_seterr(S3X_ENOMEM, "curl_easy_init failed");
    return 0;
}

/* The easy handle's options: URL, headers, callbacks, timeouts, buffer
 * sizes, TLS, and the method with its body. */
static void set_easy_options(s3x_client *c, s3x_http_req *r, int64_t decoded) {
    CURL *e = r->easy;
    curl_easy_setopt(e, CURLOPT_URL, r->url.data);
    curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->slist);
    curl_easy_setopt(e, CURLOPT_PRIVATE, r);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
    r->errbuf[0] = '\0';
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)c->params[S3X_PARAM_CONNECT_TIMEOUT_MS]);
    if (c->params[S3X_PARAM_REQUEST_TIMEOUT_MS] > 0)
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)c->params[S3X_PARAM_REQUEST_TIMEOUT_MS]);
    /* Buffers per connection: large only in the direction the bytes flow.
     * (Every request in flight holds them, so at concurrency 64 a 1 MiB upload
     * buffer plus a 256 KiB receive buffer would cost 80 MiB by themselves.) */
    int big_body_out = r->read_fn || r->body_len > 64 * 1024;
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, big_body_out ? 16L * 1024L : 256L * 1024L);
    /* A body read in place (pread) gets a 256 KiB buffer: fewer, larger reads.
     * A body already in memory is only copied through it, so curl's default
     * 64 KiB is enough, and a part buffer plus 256 KiB per connection would
     * outgrow (C+1) x P + 32 MiB at concurrency 100. */
    if (r->read_fn) curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE, 256L * 1024L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, c->params[S3X_PARAM_VERIFY_TLS] ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, c->params[S3X_PARAM_VERIFY_TLS] ? 2L : 0L);
    if (c->ca_bundle) curl_easy_setopt(e, CURLOPT_CAINFO, c->ca_bundle);
    /* TLS 1.3 suites in the order AWS's own clients (s2n) and Go ask for
     * them: AES-128-GCM first. OpenSSL's default puts AES-256-GCM first,
     * which costs about 10% more CPU per byte here (`openssl speed`: 3.7
     * against 3.3 GB/s) for no protection S3 asks for. The server still picks;
     * a backend without the option ignores it. */
    curl_easy_setopt(e, CURLOPT_TLS13_CIPHERS,
                     "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256");
    curl_easy_setopt(e, CURLOPT_USERAGENT, "s3xfer/" S3XFER_VERSION);

    int has_body = r->body || r->read_fn || !strcmp(r->method, "PUT") || !strcmp(r->method, "POST");
    /* Without a body the request is "sent" as soon as it starts: the time to
     * first byte is then measured from here. */
    if (!has_body) r->t_sent = r->t_start;
    if (!strcmp(r->method, "HEAD")) {
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else if (has_body) {
        curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(e, CURLOPT_READDATA, r);
        curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)(r->trailer_kind ? r->wire_size : decoded));
        if (strcmp(r->method, "PUT")) curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r->method);
    } else if (strcmp(r->method, "GET")) {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r->method);
    }
}

int s3x_http_prepare(s3x_client *c, s3x_http_req *r) {
    int rc = s3x_client_ensure(c);
    if (rc) return rc;
    r->status = 0;
    r->content_length = -1;
    r->retry_after_s = -1;
    r->t_start = s3x_now();
    s3x_buf path = S3X_BUF_INIT, host = S3X_BUF_INIT;
    char hash[65];
    const char *payload_hash = NULL;
    int64_t decoded = 0;
    rc = s3x_http_build_url(c, r, &path, &host);
    if (!rc) rc = choose_payload_hash(c, r, hash, &decoded, &payload_hash);
    if (!rc) rc = sign_headers(c, r, host.data, path.data, payload_hash, decoded);
    if (!rc) rc = take_easy(c, r);
    if (!rc) set_easy_options(c, r, decoded);
    s3x_buf_free(&path);
    s3x_buf_free(&host);
    if (rc == S3X_ENOMEM && s3x_error_last()->code != S3X_ENOMEM)
        rc = s3x_seterr(S3X_ENOMEM, "out of memory preparing %s", r->op);
    return rc;
}

/* ---- running ------------------------------------------------------------ */

static void apply_multi_limits(s3x_client *c) {
    curl_multi_setopt(c->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)c->params[S3X_PARAM_MAX_CONNECTIONS]);
    curl_multi_setopt(c->multi, CURLMOPT_MAXCONNECTS, (long)c->params[S3X_PARAM_MAX_CONNECTIONS]);
}

/* ---- receiving loops ------------------------------------------------------
 *
 * With N = s3x_client_receive_threads > 1 the client has N - 1 loops beside
 * the caller's multi handle: a thread each, with a multi handle (and so
 * connections) of its own. A request marked loop_ok is started on the least
 * busy of the N; on a loop it is received there (its header and write
 * callbacks run on that thread) and handed back when it ends: the caller's
 * s3x_http_poll takes it from the loop's done list and calls its on_done, so
 * everything but the receiving stays on the caller's thread.
 *
 * A request on a loop is in one of these states (under the loop's mutex): */
enum { LS_NONE, LS_QUEUED, LS_RUNNING, LS_DROPPING, LS_DONE };
/* LS_QUEUED: on the add list, for the thread to add to its multi;
 * LS_RUNNING: in the thread's multi; LS_DROPPING: on the drop list, the
 * caller waiting for the thread to take it out (s3x_http_abort); LS_DONE:
 * finished, on the done list. Only the loop's thread touches its multi and
 * the easy handles in it (curl_multi_wakeup excepted, which any thread may
 * call). */

typedef struct s3x_loop {
    s3x_client *c;
    CURLM *multi;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;         /* a drop was carried out */
    s3x_http_req *add, *drop, *done;
    int held;                  /* requests given to this loop and not yet handed back */
    int stop;
    long max_conns, applied;   /* the client's MAX_CONNECTIONS as last seen, and as set on multi */
} s3x_loop;

static void list_push(s3x_http_req **head, s3x_http_req *r) {
    r->loop_next = *head;
    *head = r;
}

static void list_unlink(s3x_http_req **head, s3x_http_req *r) {
    for (s3x_http_req **p = head; *p; p = &(*p)->loop_next)
        if (*p == r) {
            *p = r->loop_next;
            r->loop_next = NULL;
            return;
        }
}

/* The loop's thread, with l->mu held: adds the queued requests to its
 * multi, takes out the dropped ones. */
static void loop_take_lists(s3x_loop *l) {
    if (l->applied != l->max_conns) {
        curl_multi_setopt(l->multi, CURLMOPT_MAX_HOST_CONNECTIONS, l->max_conns);
        curl_multi_setopt(l->multi, CURLMOPT_MAXCONNECTS, l->max_conns);
        l->applied = l->max_conns;
    }
    int dropped = 0;
    while (l->drop) {
        s3x_http_req *r = l->drop;
        l->drop = r->loop_next;
        curl_multi_remove_handle(l->multi, r->easy);
        r->loop_state = LS_NONE;
        dropped = 1;
    }
    if (dropped) pthread_cond_broadcast(&l->cv);
    while (l->add) {
        s3x_http_req *r = l->add;
        l->add = r->loop_next;
        if (curl_multi_add_handle(l->multi, r->easy) == CURLM_OK) {
            r->loop_state = LS_RUNNING;
        } else {
            r->loop_rc = CURLE_OUT_OF_MEMORY;
            r->loop_state = LS_DONE;
            list_push(&l->done, r);
        }
    }
}

static void *loop_main(void *arg) {
    s3x_loop *l = arg;
    pthread_mutex_lock(&l->mu);
    while (!l->stop) {
        loop_take_lists(l);
        pthread_mutex_unlock(&l->mu);
        int running = 0, left, ended = 0;
        curl_multi_perform(l->multi, &running);
        CURLMsg *m;
        while ((m = curl_multi_info_read(l->multi, &left))) {
            if (m->msg != CURLMSG_DONE) continue;
            CURL *e = m->easy_handle;
            CURLcode res = m->data.result;
            s3x_http_req *r = NULL;
            curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&r);
            curl_multi_remove_handle(l->multi, e);
            pthread_mutex_lock(&l->mu);
            if (r && r->loop_state == LS_DROPPING) {
                /* Aborted while it ended: the caller is waiting for it. */
                list_unlink(&l->drop, r);
                r->loop_state = LS_NONE;
                pthread_cond_broadcast(&l->cv);
            } else if (r) {
                r->loop_rc = res;
                r->loop_state = LS_DONE;
                list_push(&l->done, r);
                ended = 1;
            }
            pthread_mutex_unlock(&l->mu);
        }
        if (ended) curl_multi_wakeup(l->c->multi);
        curl_multi_poll(l->multi, NULL, 0, 1000, NULL);
        pthread_mutex_lock(&l->mu);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* Starts loops up to s3x_client_receive_threads - 1; a loop that cannot be started
 * leaves the requests on the loops there are (or on the caller's). */
static void ensure_loops(s3x_client *c) {
    int want = s3x_client_receive_threads(c) - 1;
    if (c->nloops >= want) return;
    s3x_loop **grown = realloc(c->loops, (size_t)want * sizeof *grown);
    if (!grown) return;
    c->loops = grown;
    while (c->nloops < want) {
        s3x_loop *l = calloc(1, sizeof *l);
        if (!l) return;
        l->c = c;
        l->multi = curl_multi_init();
        if (!l->multi) {
            free(l);
            return;
        }
        pthread_mutex_init(&l->mu, NULL);
        pthread_cond_init(&l->cv, NULL);
        if (pthread_create(&l->thread, NULL, loop_main, l)) {
            pthread_cond_destroy(&l->cv);
            pthread_mutex_destroy(&l->mu);
            curl_multi_cleanup(l->multi);
            free(l);
            return;
        }
        c->loops[c->nloops++] = l;
    }
}

void s3x_http_loops_stop(s3x_client *c) {
    for (int i = 0; i < c->nloops; i++) {
        s3x_loop *l = c->loops[i];
        pthread_mutex_lock(&l->mu);
        l->stop = 1;
        pthread_mutex_unlock(&l->mu);
        curl_multi_wakeup(l->multi);
        pthread_join(l->thread, NULL);
        curl_multi_cleanup(l->multi);
        pthread_cond_destroy(&l->cv);
        pthread_mutex_destroy(&l->mu);
        free(l);
    }
    free(c->loops);
    c->loops = NULL;
    c->nloops = 0;
}

/* The loop for r: NULL (the caller's multi) or the least busy loop, when r
 * may run on one and the caller's multi is not the least busy. */
static s3x_loop *pick_loop(s3x_client *c, s3x_http_req *r) {
    int want = s3x_client_receive_threads(c) - 1; /* fewer after the knob was lowered */
    if (!r->loop_ok || want < 1) return NULL;
    ensure_loops(c);
    int n = c->nloops < want ? c->nloops : want;
    s3x_loop *best = NULL;
    int least = c->main_running;
    for (int i = 0; i < n; i++) {
        s3x_loop *l = c->loops[i];
        pthread_mutex_lock(&l->mu);
        int held = l->held;
        pthread_mutex_unlock(&l->mu);
        if (held < least) {
            least = held;
            best = l;
        }
    }
    return best;
}

int s3x_http_start(s3x_client *c, s3x_http_req *r) {
    s3x_loop *l = pick_loop(c, r);
    r->started_on_loop = l != NULL;
    if (l) {
        pthread_mutex_lock(&l->mu);
        l->max_conns = (long)c->params[S3X_PARAM_MAX_CONNECTIONS]; /* set by the loop's thread */
        r->loop = l;
        r->loop_state = LS_QUEUED;
        list_push(&l->add, r);
        l->held++;
        pthread_mutex_unlock(&l->mu);
        r->in_multi = 1;
        c->loop_started++;
        curl_multi_wakeup(l->multi);
        return 0;
    }
    apply_multi_limits(c);
    CURLMcode mc = curl_multi_add_handle(c->multi, r->easy);
    if (mc != CURLM_OK)
        return s3x_seterr(S3X_EINTERNAL, "curl_multi_add_handle: %s", curl_multi_strerror(mc));
    r->in_multi = 1;
    c->main_running++;
    return 0;
}

/* A request that has left every multi handle: its outcome, then on_done. */
static void ended(s3x_http_req *r, CURLcode res) {
    r->in_multi = 0;
    r->loop = NULL;
    r->curl_rc = res;
    long st = 0;
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &st);
    if (st) r->status = st;
    r->t_end = s3x_now();
    if (r->on_done) r->on_done(r, r->done_payload);
}

static void finish(s3x_client *c, CURL *e, CURLcode res) {
    s3x_http_req *r = NULL;
    curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&r);
    curl_multi_remove_handle(c->multi, e);
    if (!r) return;
    c->main_running--;
    ended(r, res);
}

/* Hands finished requests to their callbacks; returns how many. */
static int drain_messages(s3x_client *c) {
    CURLMsg *m;
    int left, n = 0;
    while ((m = curl_multi_info_read(c->multi, &left)))
        if (m->msg == CURLMSG_DONE) {
            finish(c, m->easy_handle, m->data.result);
            n++;
        }
    return n;
}

/* The requests the loops finished: handed to their callbacks here, on the
 * caller's thread, one at a time (a callback may abort another request of
 * the done list); returns how many. *held: the requests the loops still hold. */
static int drain_loops(s3x_client *c, int *held) {
    int n = 0;
    *held = 0;
    for (int i = 0; i < c->nloops; i++) {
        s3x_loop *l = c->loops[i];
        for (;;) {
            pthread_mutex_lock(&l->mu);
            s3x_http_req *r = l->done;
            if (r) {
                l->done = r->loop_next;
                r->loop_next = NULL;
                r->loop_state = LS_NONE;
                l->held--;
            } else {
                *held += l->held;
            }
            pthread_mutex_unlock(&l->mu);
            if (!r) break;
            ended(r, r->loop_rc);
            n++;
        }
    }
    return n;
}

int s3x_http_poll(s3x_client *c, int timeout_ms) {
    int running = 0, held = 0;
    CURLMcode mc = curl_multi_perform(c->multi, &running);
    if (mc != CURLM_OK) return s3x_seterr(S3X_EINTERNAL, "curl_multi_perform: %s", curl_multi_strerror(mc));
    /* Requests that just finished may let the caller start others: it gets
     * the chance before anything waits. */
    int finished = drain_messages(c);
    finished += drain_loops(c, &held);
    /* With nothing on the wire the wait still happens (curl_multi_poll
     * sleeps until the timeout or a wakeup): a loop whose parts all wait for
     * a backoff, the rate's gate or a writer thread must not spin. A
     * receiving loop that finishes a request wakes it. */
    if (timeout_ms > 0 && !finished) {
        mc = curl_multi_poll(c->multi, NULL, 0, timeout_ms, NULL);
        if (mc != CURLM_OK) return s3x_seterr(S3X_EINTERNAL, "curl_multi_poll: %s", curl_multi_strerror(mc));
        mc = curl_multi_perform(c->multi, &running);
        if (mc != CURLM_OK) return s3x_seterr(S3X_EINTERNAL, "curl_multi_perform: %s", curl_multi_strerror(mc));
        drain_messages(c);
        drain_loops(c, &held);
    }
    return running + held;
}

void s3x_http_wakeup(s3x_client *c) { curl_multi_wakeup(c->multi); }

void s3x_http_abort(s3x_client *c, s3x_http_req *r) {
    if (!r->in_multi || !r->easy) return;
    s3x_loop *l = r->loop;
    if (l) {
        pthread_mutex_lock(&l->mu);
        if (r->loop_state == LS_QUEUED) {
            list_unlink(&l->add, r);
        } else if (r->loop_state == LS_DONE) {
            list_unlink(&l->done, r);
        } else if (r->loop_state == LS_RUNNING) {
            r->loop_state = LS_DROPPING;
            list_push(&l->drop, r);
            curl_multi_wakeup(l->multi);
            while (r->loop_state != LS_NONE) pthread_cond_wait(&l->cv, &l->mu);
        }
        r->loop_state = LS_NONE;
        l->held--;
        pthread_mutex_unlock(&l->mu);
        r->loop = NULL;
    } else {
        curl_multi_remove_handle(c->multi, r->easy);
        c->main_running--;
    }
    r->in_multi = 0;
    r->curl_rc = CURLE_ABORTED_BY_CALLBACK;
    r->t_end = s3x_now();
}

typedef struct sync_state {
    int done;
} sync_state;

static void sync_done(s3x_http_req *r, void *p) {
    (void)r;
    ((sync_state *)p)->done = 1;
}

int s3x_http_perform(s3x_client *c, s3x_http_req *r) {
    int rc = s3x_http_prepare(c, r);
    if (rc) return rc;
    sync_state st = {0};
    s3x_http_done_fn prev = r->on_done;
    void *prev_p = r->done_payload;
    r->on_done = sync_done;
    r->done_payload = &st;
    rc = s3x_http_start(c, r);
    while (!rc && !st.done) {
        int n = s3x_http_poll(c, 1000);
        if (n < 0) rc = n;
    }
    r->on_done = prev;
    r->done_payload = prev_p;
    if (rc) {
        s3x_http_abort(c, r);
        return rc;
    }
    return s3x_http_check(c, r);
}

/* ---- outcomes ------------------------------------------------------------ */

static const char *status_code_name(long status, const char *op) {
    switch (status) {
    case 400: return "BadRequest";
    case 403: return "AccessDenied";
    case 404:
        if (op && !strcmp(op, "HeadObject")) return "NoSuchKey";
        if (op && !strcmp(op, "HeadBucket")) return "NoSuchBucket";
        return "NotFound";
    case 405: return "MethodNotAllowed";
    case 409: return "Conflict";
    case 412: return "PreconditionFailed";
    case 416: return "InvalidRange";
    case 500: return "InternalError";
    case 503: return "ServiceUnavailable";
    default: return "";
    }
}

static void describe_target(s3x_buf *b, const s3x_http_req *r) {
    if (r->bucket && r->key) s3x_buf_printf(b, "s3://%s/%s", r->bucket, r->key);
    else if (r->bucket) s3x_buf_printf(b, "s3://%s", r->bucket);
    else s3x_buf_puts(b, "service");
}

int s3x_http_check(s3x_client *c, s3x_http_req *r) {
    s3x_buf target = S3X_BUF_INIT;
    describe_target(&target, r);
    const char *tgt = target.data ? target.data : "?";
    int rc = 0;
    if (r->read_failed) {
        rc = s3x_seterr(S3X_EIO, "%s %s: reading the request body failed or ended early (%lld of %lld bytes)",
                        r->op, tgt, (long long)r->bytes_out, (long long)r->body_size);
    } else if (r->body_over_cap && r->status < 300) {
        size_t cap = r->resp_cap ? r->resp_cap : DEFAULT_RESP_CAP;
        if (!strcmp(r->op, "GetObject"))
            rc = s3x_seterr(S3X_ELIMIT,
                            "%s %s: the object (%lld bytes) is larger than the %zu bytes a get into memory holds; "
                            "download it to a file, fd or stream (s3x_download_*, Python download_file/"
                            "download_fileobj) instead",
                            r->op, tgt, (long long)r->content_length, cap);
        else
            rc = s3x_seterr(S3X_EXML, "%s %s: the response body is larger than %zu bytes, more than any S3 "
                            "response of this kind; refused", r->op, tgt, cap);
    } else if (r->aborted_by_callback && r->status < 300) {
        rc = s3x_seterr(r->write_fn ? S3X_ECANCELLED : S3X_ENOMEM,
                        r->write_fn ? "%s %s: the body consumer stopped the transfer"
                                    : "%s %s: out of memory holding the response body",
                        r->op, tgt);
    } else if (r->curl_rc != CURLE_OK) {
        const char *detail = r->errbuf[0] ? r->errbuf : curl_easy_strerror(r->curl_rc);
        int code;
        const char *what;
        switch (r->curl_rc) {
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_RESOLVE_PROXY:
        case CURLE_COULDNT_CONNECT:
            code = S3X_ECONNECT; what = "could not connect to"; break;
        case CURLE_PEER_FAILED_VERIFICATION:
#if LIBCURL_VERSION_NUM < 0x073e00
        case CURLE_SSL_CACERT:
#endif
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_SSL_ISSUER_ERROR:
            code = S3X_ETLS; what = "TLS verification failed for"; break;
        case CURLE_SSL_CONNECT_ERROR:
            code = S3X_ECONNECT; what = "TLS handshake failed with"; break;
        case CURLE_OPERATION_TIMEDOUT:
            code = S3X_ETIMEOUT; what = "timed out talking to"; break;
        case CURLE_ABORTED_BY_CALLBACK:
            code = S3X_ECANCELLED; what = "cancelled while talking to"; break;
        default:
            code = S3X_ENETWORK; what = "connection failed with"; break;
        }
        /* Name the host really contacted (bucket.host under virtual-hosted
         * addressing), taken from the URL the request was sent to. */
        const char *url = r->url.data ? r->url.data : c->endpoint;
        const char *auth = strstr(url, "://");
        auth = auth ? auth + 3 : url;
        int scheme_len = (int)(auth - url);
        int auth_len = (int)strcspn(auth, "/?#");
        rc = s3x_seterr(code, "%s %s: %s %.*s%.*s: %s", r->op, tgt, what, scheme_len, url, auth_len, auth, detail);
    } else if (r->status >= 300 || r->status == 0) {
        s3x_xml_error xe;
        memset(&xe, 0, sizeof xe);
        const char *s3code = status_code_name(r->status, r->op);
        const char *msg = NULL;
        const char *reqid = r->request_id;
        if (r->resp_body.len && s3x_xml_parse_error(r->resp_body.data, r->resp_body.len, &xe) == 0) {
            if (xe.code && *xe.code) s3code = xe.code;
            msg = xe.message;
            if (xe.request_id && *xe.request_id && !reqid) reqid = xe.request_id;
        }
        rc = s3x_seterr_http(S3X_EHTTP, (int)r->status, s3code, reqid, "%s %s: HTTP %ld%s%s%s%s", r->op, tgt,
                             r->status, *s3code ? " " : "", s3code, msg && *msg ? ": " : "", msg ? msg : "");
        s3x_xml_error_free(&xe);
    }
    s3x_buf_free(&target);
    return rc;
}

/* The <Code> of an error body, or NULL (caller frees). */
static char *error_code(const s3x_http_req *r) {
    if (!r->resp_body.len || !r->resp_body.data) return NULL;
    s3x_xml_error xe;
    memset(&xe, 0, sizeof xe);
    char *code = NULL;
    if (s3x_xml_parse_error(r->resp_body.data, r->resp_body.len, &xe) == 0 && xe.code && *xe.code) {
        code = xe.code;
        xe.code = NULL;
    }
    s3x_xml_error_free(&xe);
    return code;
}

static int throttling_code(const char *c) {
    static const char *const codes[] = {"SlowDown", "Throttling", "ThrottlingException", "ThrottledException",
                                        "RequestThrottled", "RequestThrottledException", "TooManyRequestsException",
                                        "ProvisionedThroughputExceededException", "RequestLimitExceeded",
                                        "BandwidthLimitExceeded", "LimitExceededException", "EC2ThrottledException",
                                        "ServiceUnavailable", "InternalError", "PriorRequestNotComplete", NULL};
    for (int i = 0; codes[i]; i++)
        if (!strcmp(c, codes[i])) return 1;
    return 0;
}

int s3x_http_error_in_200(const s3x_http_req *r) {
    /* Only operations that S3 documents as able to fail after sending 200
     * (their work runs after the status line): a GetObject body is the
     * object's bytes, whatever they look like. */
    if (r->curl_rc != CURLE_OK || r->status != 200 || r->write_fn || !r->resp_body.len) return 0;
    if (strcmp(r->op, "CompleteMultipartUpload") && strcmp(r->op, "CopyObject") && strcmp(r->op, "UploadPartCopy"))
        return 0;
    return s3x_xml_is_error(r->resp_body.data, r->resp_body.len);
}

int s3x_http_throttled(const s3x_http_req *r) {
    if (r->curl_rc != CURLE_OK || r->read_failed || r->aborted_by_callback) return 0;
    if (r->status == 429 || r->status == 503) return 1;
    char *code = NULL;
    int t = 0;
    if (r->status == 500 || r->status == 400 || (r->status == 200 && s3x_http_error_in_200(r)) ||
        (r->status >= 500 && r->status < 600)) {
        code = error_code(r);
        if (code) t = throttling_code(code);
        else if (r->status == 500) t = 1; /* a bare 500: S3's InternalError without a body (HEAD) */
    }
    free(code);
    return t;
}

int s3x_http_retryable(const s3x_http_req *r) {
    if (r->read_failed || r->aborted_by_callback) return 0;
    if (r->curl_rc != CURLE_OK) {
        switch (r->curl_rc) {
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_ABORTED_BY_CALLBACK:
        case CURLE_URL_MALFORMAT:
        case CURLE_OUT_OF_MEMORY:
            return 0;
        default:
            return 1;
        }
    }
    if (r->status == 500 || r->status == 502 || r->status == 503 || r->status == 504 || r->status == 429) return 1;
    if (s3x_http_throttled(r)) return 1;
    if (r->status != 400) return 0;
    /* Decided on the parsed <Code>, never on a substring of the body (a
     * message or a key can contain any text). */
    char *code = error_code(r);
    int again = 0;
    if (code) {
        if (!strcmp(code, "RequestTimeout")) again = 1;
        /* The server saw a body that does not match its checksum: bytes damaged
         * on the way. Every attempt sends the body again from its source (a
         * changed file is caught separately), so a retry can succeed. Not a
         * completion's: its body is our list of parts, and its BadDigest says
         * the parts do not make the object's declared checksum, which the
         * same list sent again cannot change. */
        else if ((r->read_fn || r->body_len) && strcmp(r->op, "CompleteMultipartUpload") &&
                 (!strcmp(code, "BadDigest") || !strcmp(code, "InvalidDigest") ||
                  !strcmp(code, "XAmzContentChecksumMismatch")))
            again = 1;
    }
    free(code);
    return again;
}

void s3x_http_req_reset(s3x_client *c, s3x_http_req *r) {
    if (r->in_multi) s3x_http_abort(c, r);
    if (r->easy) {
        curl_easy_reset(r->easy);
        if (c->nidle == c->idle_cap) {
            size_t cap = c->idle_cap ? c->idle_cap * 2 : 16;
            CURL **p = realloc(c->idle, cap * sizeof *p);
            if (p) {
                c->idle = p;
                c->idle_cap = cap;
            }
        }
        if (c->nidle < c->idle_cap) c->idle[c->nidle++] = r->easy;
        else curl_easy_cleanup(r->easy);
        r->easy = NULL;
    }
    curl_slist_free_all(r->slist);
    r->slist = NULL;
    s3x_buf_free(&r->url);
    s3x_buf_free(&r->resp_body);
    s3x_buf_free(&r->meta);
    r->meta_over = 0;
    free(r->etag);
    free(r->request_id);
    free(r->content_range);
    free(r->content_type);
    free(r->last_modified);
    free(r->version_id);
    free(r->server);
    free(r->checksum_value);
    r->checksum_value = NULL;
    r->checksum_kind = 0;
    r->etag = r->request_id = r->content_range = r->content_type = r->last_modified = r->version_id = r->server = NULL;
    r->status = 0;
    r->got_status = 0;
    r->bytes_in = r->bytes_out = 0;
    r->body_off = 0;
    s3x_chunked_end(&r->chunked);
    r->wire_out = 0;
    r->curl_rc = CURLE_OK;
    r->aborted_by_callback = r->read_failed = r->body_over_cap = 0;
    r->t_start = r->t_sent = r->t_first_byte = r->t_end = 0;
}

int s3x_http_check_complete_body(const s3x_http_req *r) {
    if (!s3x_xml_is_error(r->resp_body.data, r->resp_body.len)) return 0;
    s3x_xml_error xe;
    memset(&xe, 0, sizeof xe);
    s3x_xml_parse_error(r->resp_body.data, r->resp_body.len, &xe);
    const char *code = xe.code && *xe.code ? xe.code : "InternalError";
    int rc = s3x_seterr_http(S3X_EHTTP, (int)r->status, code, xe.request_id && *xe.request_id ? xe.request_id : r->request_id,
                             "%s s3://%s/%s: %s%s%s (in a 200 response)", r->op, r->bucket, r->key, code,
                             xe.message && *xe.message ? ": " : "", xe.message ? xe.message : "");
    s3x_xml_error_free(&xe);
    return rc;
}

int64_t s3x_content_range_total(const char *cr) {
    /* The strict parser: "bytes 0-9/1234x" or "bytes 9-0/5" states no size. */
    s3x_crange c;
    if (!cr || s3x_crange_parse(cr, strlen(cr), &c) != 0) return -1;
    return c.total;
}

/* For the header fuzzer (tests/fuzz/fuzz_http_header.c): the header callback
 * on one line, as curl would hand it over, without a transfer. */
int s3x_http_parse_header_line(s3x_http_req *r, const char *line, size_t n) {
    return on_header((char *)line, 1, n, r) == n ? 0 : -1;
}
