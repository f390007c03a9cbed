/* Request builders (private): the one place that knows what each S3 request
 * looks like (method, operation name, target, query parameters, headers), for
 * the single operations (ops.c) and the transfer kinds (upload.c,
 * download.c) alike.
 *
 * A builder describes a request; it does not touch the body, the response
 * sink or the engine fields, so it can be called again on a request that
 * s3x_http_req_reset has cleared for its next attempt. A fresh request is
 * first cleared with s3x_req_new.
 *
 * Lifetimes: the request stores pointers, never copies. Every string given
 * to a builder or helper (bucket, key, upload id, header and query values)
 * must stay alive and unchanged until the caller resets the request for the
 * last time. Numbers are formatted into storage the caller passes in
 * (s3x_req_num), for the same reason.
 *
 * Query parameters and headers go in only through s3x_req_query and
 * s3x_req_header, which refuse to write past the fixed arrays. Builders
 * return 0 or a negative S3X_E* code with the thread error set. */
#ifndef S3X_REQUESTS_H
#define S3X_REQUESTS_H

#include "client_internal.h"

/* Storage for one number sent as text (part number, marker, max-keys). */
typedef char s3x_req_num[24];

/* Clears r (all fields, including the engine's) for a new request. */
void s3x_req_new(s3x_http_req *r);

/* Appends a header (signed like every header of r). S3X_EINTERNAL, naming the
 * header and the request, when r already holds S3X_MAX_HEADERS; S3X_EINVAL
 * for a NULL name or value. */
int s3x_req_header(s3x_http_req *r, const char *name, const char *value);
/* Appends a query parameter (value "" for a bare "?uploads"). S3X_EINTERNAL,
 * naming the parameter, when r already holds S3X_MAX_QUERY. */
int s3x_req_query(s3x_http_req *r, const char *name, const char *value);

/* "bytes=first-last", or "bytes=first-" when last < 0, into buf. S3X_EINVAL
 * for a range that is not one (first < 0, last < first). */
int s3x_req_range(char *buf, size_t cap, int64_t first, int64_t last);

/* A checksum sent in headers with a body. */
typedef struct s3x_req_checksum {
    const char *header;    /* "x-amz-checksum-crc32c", "content-md5", ...; NULL = none in a header */
    const char *value;     /* its value (base64) */
    const char *algorithm; /* x-amz-sdk-checksum-algorithm ("CRC32C"); NULL = not sent */
} s3x_req_checksum;

/* ---- buckets ---------------------------------------------------------- */
int s3x_req_create_bucket(s3x_http_req *r, const char *bucket);
int s3x_req_delete_bucket(s3x_http_req *r, const char *bucket);
int s3x_req_head_bucket(s3x_http_req *r, const char *bucket);
/* ListObjectsV2; prefix, delimiter, token: NULL or "" to leave out;
 * max_keys 0 to leave out (the server's default), formatted into mk. */
int s3x_req_list_objects(s3x_http_req *r, const char *bucket, const char *prefix, const char *delimiter,
                         const char *token, int max_keys, s3x_req_num mk);
/* ListMultipartUploads; prefix, key_marker, id_marker: NULL or "" to leave out. */
int s3x_req_list_uploads(s3x_http_req *r, const char *bucket, const char *prefix, const char *key_marker,
                         const char *id_marker);

/* ---- objects ---------------------------------------------------------- */
/* PutObject; content_type and ck may be NULL. */
int s3x_req_put_object(s3x_http_req *r, const char *bucket, const char *key, const char *content_type,
                       const s3x_req_checksum *ck);
/* GetObject; range ("bytes=..."), if_match: NULL to leave out;
 * checksum_mode asks for the object's checksum headers. */
int s3x_req_get_object(s3x_http_req *r, const char *bucket, const char *key, const char *range,
                       const char *if_match, int checksum_mode);
/* HeadObject; if_match: NULL or "" to leave out. */
int s3x_req_head_object(s3x_http_req *r, const char *bucket, const char *key, const char *if_match,
                        int checksum_mode);
int s3x_req_delete_object(s3x_http_req *r, const char *bucket, const char *key);

/* ---- multipart -------------------------------------------------------- */
/* CreateMultipartUpload; content_type, checksum_algorithm
 * (x-amz-checksum-algorithm) may be NULL. */
int s3x_req_create_mpu(s3x_http_req *r, const char *bucket, const char *key, const char *content_type,
                       const char *checksum_algorithm);
/* UploadPart number part_number (1..10000, formatted into pn); ck may be NULL. */
int s3x_req_upload_part(s3x_http_req *r, const char *bucket, const char *key, const char *upload_id,
                        int part_number, s3x_req_num pn, const s3x_req_checksum *ck);
/* CompleteMultipartUpload (the caller sets the XML body). */
int s3x_req_complete_mpu(s3x_http_req *r, const char *bucket, const char *key, const char *upload_id);
int s3x_req_abort_mpu(s3x_http_req *r, const char *bucket, const char *key, const char *upload_id);
/* ListParts; marker > 0 is sent as part-number-marker (formatted into mk). */
int s3x_req_list_parts(s3x_http_req *r, const char *bucket, const char *key, const char *upload_id, int marker,
                       s3x_req_num mk);

/* ---- server-side copy and bulk delete ----------------------------------- */
/* The x-amz-copy-source value for bucket/key: "/bucket/key" percent-encoded
 * as botocore does (every byte but A-Z a-z 0-9 - . _ ~ and '/'), into *out
 * (malloc'd; the caller frees it once the request is done). */
int s3x_req_copy_source(const char *bucket, const char *key, char **out);
/* CopyObject of copy_source (s3x_req_copy_source) to bucket/key.
 * directive: NULL (the server's default, COPY), "COPY" or "REPLACE";
 * content_type is sent with REPLACE only; if_match (NULL: none) is
 * x-amz-copy-source-if-match; checksum_algorithm (NULL: none) asks for that
 * checksum on the copy. */
int s3x_req_copy_object(s3x_http_req *r, const char *bucket, const char *key, const char *copy_source,
                        const char *directive, const char *content_type, const char *if_match,
                        const char *checksum_algorithm);
/* UploadPartCopy of the bytes range ("bytes=A-B", s3x_req_range) of
 * copy_source into part part_number (formatted into pn); if_match as above. */
int s3x_req_upload_part_copy(s3x_http_req *r, const char *bucket, const char *key, const char *upload_id,
                             int part_number, s3x_req_num pn, const char *copy_source, const char *range,
                             const char *if_match);
/* DeleteObjects (POST ?delete; the caller sets the XML body, and its
 * base64 MD5 in content_md5, which S3 requires on this request). */
int s3x_req_delete_objects(s3x_http_req *r, const char *bucket, const char *content_md5);
/* Its body for n keys (1..1000; *body malloc'd) and the body's base64 MD5. */
int s3x_delete_body(const char *const *keys, size_t n, char **body, size_t *blen, char md5[48]);
/* Its answer, as each key's outcome in the order of keys (a key the answer
 * does not mention fails as "NotReported"). */
int s3x_delete_outcome(const char *const *keys, size_t n, const char *xml, size_t len, s3x_delete_result **out);
/* CreateMultipartUpload with user metadata: nmeta x-amz-meta-* headers
 * (names[i] full header names, values[i] their values). */
int s3x_req_create_mpu_meta(s3x_http_req *r, const char *bucket, const char *key, const char *content_type,
                            const char *checksum_algorithm, const char *const *names, const char *const *values,
                            size_t nmeta);

#endif
