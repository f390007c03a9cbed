/* AWS Signature Version 4 for S3 (private). Pure functions: no I/O, no globals. */
#ifndef S3X_SIGV4_H
#define S3X_SIGV4_H
#include <stddef.h>
#include <stdint.h>
#include "buf.h"

typedef struct s3x_kv {
    const char *key;
    const char *value;   /* may be "" (query flags such as "uploads") */
} s3x_kv;

/* Appends the SigV4 URI encoding of s[0..len) to out: every byte except the
 * unreserved set A-Z a-z 0-9 - . _ ~ becomes %XY (uppercase hex, UTF-8 bytes
 * encoded one by one). When encode_slash is 0, '/' is kept as is (object key
 * paths); when 1, it becomes %2F (query names and values). S3 never
 * normalises paths: "//" and "./" are kept. Returns 0 or S3X_ENOMEM. */
int s3x_uri_encode(s3x_buf *out, const char *s, size_t len, int encode_slash);

/* Lowercase hex SHA-256 of data; out must hold 65 bytes. */
void s3x_sha256_hex(const void *data, size_t len, char out[65]);

/* Hex of 32 raw bytes into out[65]. */
void s3x_hex32(const unsigned char in[32], char out[65]);

#define S3X_UNSIGNED_PAYLOAD "UNSIGNED-PAYLOAD"

typedef struct s3x_sigv4_input {
    const char *access_key;
    const char *secret_key;
    const char *region;        /* e.g. "us-east-1" */
    const char *service;       /* "s3" */
    const char *amz_date;      /* "YYYYMMDDTHHMMSSZ" (UTC); its first 8 chars are the scope date */
    const char *method;        /* "GET", "PUT", ... */
    const char *encoded_path;  /* already URI-encoded with encode_slash=0, begins with '/' */
    const s3x_kv *query;       /* NOT encoded; the signer encodes and sorts them */
    size_t nquery;
    const s3x_kv *headers;     /* every header to sign, any case/order, values untrimmed;
                                  must include host and x-amz-date, and x-amz-content-sha256
                                  (and x-amz-security-token when a session token is used) */
    size_t nheaders;
    const char *payload_hash;  /* hex SHA-256 of the body, or S3X_UNSIGNED_PAYLOAD */
} s3x_sigv4_input;

typedef struct s3x_sigv4_output {
    s3x_buf authorization;     /* "AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/s3/aws4_request, SignedHeaders=..., Signature=..." */
    s3x_buf canonical_request; /* for tests and debugging */
    s3x_buf string_to_sign;
    char signature[65];
} s3x_sigv4_output;

/* Canonical headers: names lowercased, values trimmed with inner runs of
 * whitespace collapsed to one space, sorted by name; duplicate names joined
 * with ','. Whitespace is what botocore's str.split() splits on
 * (s3x_utf8_space): space and tab, and in UTF-8 values also the Unicode
 * spaces such as U+00A0 (no-break space); bytes that are not valid UTF-8 are
 * kept as they are.
 * Canonical query: key and value encoded (encode_slash=1), sorted by encoded
 * key then encoded value, "k=v" joined by '&' ("k=" for empty values).
 * Returns 0, S3X_EINVAL (missing field), or S3X_ENOMEM. out must be zeroed
 * by the caller; release with s3x_sigv4_output_free. */
int s3x_sigv4_sign(const s3x_sigv4_input *in, s3x_sigv4_output *out);
void s3x_sigv4_output_free(s3x_sigv4_output *out);

/* UTF-8 helpers, shared with the config parser (ini.c) and the XML builder
 * (s3xml.c) so that all three agree on what a character and a space are. */

/* Decodes the character at s[0..n): returns its length (1-4) and sets *cp,
 * or returns 0 when the bytes are not valid UTF-8 there (a stray or missing
 * continuation byte, an overlong form, a surrogate, above U+10FFFF, or cut
 * short by n). Nothing is read past s[n-1]. */
size_t s3x_utf8_decode(const char *s, size_t n, uint32_t *cp);

/* The length of the whitespace character at s[0..n) (1-3 bytes), or 0. The
 * set is Python's str.isspace(), which botocore's header trimming and
 * configparser's stripping use: tab, LF, VT, FF, CR, 0x1C-0x1F, space, and
 * U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F,
 * U+3000 in UTF-8. */
size_t s3x_utf8_space(const char *s, size_t n);

/* Formats t (seconds since epoch, UTC) as "YYYYMMDDTHHMMSSZ" into out[17]. */
void s3x_amz_date(int64_t t, char out[17]);

#endif
