/* s3xfer: the client (endpoint, region, credentials, TLS, connections) and
 * the single S3 operations.
 *
 * Thread rules: one thread uses a client at a time (a client owns its
 * connection cache). Use one client per thread to run transfers in parallel.
 * The library prints nothing; secrets never appear in error messages.
 */
#ifndef S3XFER_CLIENT_H
#define S3XFER_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include "s3xfer/export.h"
#include "s3xfer/params.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct s3x_client s3x_client;

/* String settings of a client. Each one left unset falls back, when the
 * client first sends a request, to:
 *   ENDPOINT_URL   AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's
 *                  services section and endpoint_url (unless configured
 *                  endpoints are ignored), then the S3 endpoint of the
 *                  region's AWS partition (docs/endpoints.md)
 *   REGION         AWS_REGION, AWS_DEFAULT_REGION, the profile's region in the
 *                  shared config file, instance metadata, then "us-east-1"
 *   ACCESS_KEY / SECRET_KEY / SESSION_TOKEN
 *                  botocore's credential chain (docs/credentials.md): the
 *                  environment (skipped when PROFILE is set), the profile's
 *                  role_arn (STS AssumeRole), web identity, SSO, the shared
 *                  credentials file, credential_process, the config file, the
 *                  container endpoint, instance metadata (IMDSv2). Temporary
 *                  credentials are refreshed before they expire.
 *   PROFILE        AWS_PROFILE, then "default"
 *   CA_BUNDLE      AWS_CA_BUNDLE, then the system store. */
typedef enum s3x_client_opt {
    S3X_CLIENT_ENDPOINT_URL = 0,
    S3X_CLIENT_REGION,
    S3X_CLIENT_ACCESS_KEY,
    S3X_CLIENT_SECRET_KEY,
    S3X_CLIENT_SESSION_TOKEN,
    S3X_CLIENT_PROFILE,
    S3X_CLIENT_CA_BUNDLE,
    S3X_CLIENT_OPT__COUNT
} s3x_client_opt;

/* Creates a client with default settings. *out is NULL on failure.
 * Errors: S3X_ENOMEM. */
S3X_API int s3x_client_new(s3x_client **out);

/* Frees the client and closes its connections. Accepts NULL. */
S3X_API void s3x_client_free(s3x_client *client);

/* Sets (value non-NULL) or unsets (NULL) a string setting. The value is
 * copied. An endpoint must start with http:// or https://.
 * Errors: S3X_EINVAL (unknown option, bad endpoint), S3X_ENOMEM. */
S3X_API int s3x_client_set_string(s3x_client *client, s3x_client_opt opt, const char *value);

/* Sets a client knob (S3X_PARAM_ADDRESSING_STYLE, VERIFY_TLS,
 * CONNECT_TIMEOUT_MS, REQUEST_TIMEOUT_MS, PAYLOAD_SIGNING, MAX_CONNECTIONS,
 * RECEIVE_THREADS, and for the single operations' retries MAX_ATTEMPTS, RETRY_TIMEOUT,
 * RETRY_MODE).
 * Errors: S3X_EINVAL naming the knob when it is out of range or not a client knob. */
S3X_API int s3x_client_set(s3x_client *client, s3x_param param, int64_t value);
S3X_API int s3x_client_get(const s3x_client *client, s3x_param param, int64_t *value);

/* Resolves endpoint, region and credentials now (otherwise done on the first
 * request), so configuration errors surface early.
 * Errors: S3X_EINVAL (bad endpoint), S3X_ECREDENTIALS (none found). */
S3X_API int s3x_client_resolve(s3x_client *client);

/* The resolved endpoint URL and region (after s3x_client_resolve or a
 * request); NULL before. Owned by the client. */
S3X_API const char *s3x_client_endpoint(const s3x_client *client);
S3X_API const char *s3x_client_region(const s3x_client *client);

/* The URL a request for bucket (and key, or NULL) would be sent to, without
 * sending anything: resolves the client first. The request is signed for
 * s3x_client_region. *url is malloc'd (s3x_free).
 * Errors: those of s3x_client_resolve; S3X_EINVAL for a bucket the
 * addressing rules refuse; S3X_ENOMEM. */
S3X_API int s3x_client_request_url(s3x_client *client, const char *bucket, const char *key, char **url);

/* Which credential provider supplied the keys, by botocore's names:
 * "explicit", "env", "assume-role", "assume-role-with-web-identity",
 * "shared-credentials-file", "custom-process", "config-file",
 * "container-role", "iam-role", "sso" (docs/credentials.md). NULL before the
 * client is resolved. Never the keys. */
S3X_API const char *s3x_client_credentials_source(const s3x_client *client);

/* How many times temporary credentials were refreshed (before they
 * expired) since the client was resolved. */
S3X_API int64_t s3x_client_credentials_refreshes(const s3x_client *client);

/* When the current credentials expire (seconds since the epoch, UTC), or 0
 * when they do not (static keys) or the client is not resolved. */
S3X_API double s3x_client_credentials_expiry(s3x_client *client);

/* Throttling as the client sees it now: the adaptive request rate shared by
 * every transfer on the client (docs/reliability.md, "Adaptive request
 * rate"). While `active`, the server has been answering with throttling
 * errors (503 SlowDown, 429, ...) and the client's adaptive-mode transfers
 * send at most `rate` requests a second; a transfer in standard retry mode
 * is not held to the rate but the state is kept all the same.
 *
 * ABI: fields are only ever appended. Pass sizeof(s3x_throttle_state) as
 * `size`: a library newer than the caller's header fills only the fields
 * that fit, an older one fills what it knows and zeroes the rest. */
typedef struct s3x_throttle_state {
    int active;              /* 1 while the adaptive rate limits requests, else 0 */
    double rate;             /* requests/s allowed while active; 0 when not */
    int64_t throttles;       /* throttling answers the client has received since it was created */
    double seconds;          /* seconds since the rate last switched on; 0 when not active */
    double seconds_total;    /* seconds it has been on in all, the current storm included */
} s3x_throttle_state;

/* Fills *out (size bytes, see above) with the client's throttling state.
 * Cheap (no I/O, no allocation, no lock): meant for progress callbacks,
 * which run on the thread driving the client's transfers. Call it on that
 * thread, not while another thread runs transfers on the client (a batch
 * run in the background: use its own thread's callbacks).
 * Errors: S3X_EINVAL when client or out is NULL or size is smaller than the
 * first field. */
S3X_API int s3x_client_throttle_state(const s3x_client *client, s3x_throttle_state *out, size_t size);

/* Frees memory returned by s3xfer (strings, buffers). Accepts NULL. */
S3X_API void s3x_free(void *p);

/* ---------------------------------------------------------------------
 * Single operations. All block the calling thread. On failure they return a
 * negative code and s3x_error_last() carries the HTTP status, the S3 error
 * code (e.g. "NoSuchKey", "SignatureDoesNotMatch"), the message and the
 * request id. Bucket names and keys are UTF-8; keys may hold any character.
 *
 * Retries: every single operation retries as transfers do, with the same
 * policy (docs/reliability.md), on this client's knobs:
 *   - retried: throttling answers (503 SlowDown, 429, 500 InternalError and
 *     the other throttling or transient S3 error codes), 502/504, 400
 *     RequestTimeout, a reset or broken connection, a timeout;
 *   - not retried: answers a retry cannot change (403, 404, 409, 412, 416,
 *     other 4xx), TLS verification failures;
 *   - S3X_PARAM_MAX_ATTEMPTS (default 5) attempts per operation; throttling
 *     is retried for as long as S3X_PARAM_RETRY_TIMEOUT allows (default
 *     120000 ms with no attempt succeeding) whatever MAX_ATTEMPTS says;
 *   - waits between attempts: capped exponential backoff with full jitter,
 *     at least the server's Retry-After (up to 60 s); in RETRY_MODE ADAPTIVE
 *     (the default) a throttled retry's own backoff is capped at 2 s and costs
 *     nothing from the budget, and its answer lowers the request rate the
 *     client's transfers share (a single operation is not itself held at
 *     that rate's gate). A client-wide retry budget stops retrying a server that
 *     keeps failing. A call can therefore block for up to RETRY_TIMEOUT (plus
 *     REQUEST_TIMEOUT_MS per attempt) against a throttling server: set
 *     RETRY_TIMEOUT 0 and MAX_ATTEMPTS 1 for a single attempt.
 *   - replays: a body pulled from a read_fn is not re-sent once read_fn has
 *     given bytes, nor a GetObject repeated once write_fn has received bytes
 *     (they cannot be taken back): that failure is returned with "(not
 *     retried: ...)" in its message. CreateBucket, DeleteBucket and
 *     AbortMultipartUpload whose retry finds its work already done after a
 *     broken connection (BucketAlreadyOwnedByYou, NoSuchBucket, NoSuchUpload)
 *     succeed; CompleteMultipartUpload in that case fails with NoSuchUpload
 *     and says the earlier attempt may have completed the object.
 *     CreateMultipartUpload is retried even after a broken connection: an
 *     upload the lost answer created is left behind either way (see
 *     s3x_list_multipart_uploads to abort it).
 * The error of the last attempt is the one returned.
 * ------------------------------------------------------------------- */

/* Metadata of an object (HeadObject, and what GetObject saw). Release with
 * s3x_object_info_clear. */
typedef struct s3x_object_info {
    int64_t size;           /* Content-Length of the whole object */
    char *etag;             /* as the server sent it, quotes included */
    char *last_modified;    /* HTTP date */
    char *content_type;
    char *version_id;       /* or NULL */
} s3x_object_info;
S3X_API void s3x_object_info_clear(s3x_object_info *info);

S3X_API int s3x_create_bucket(s3x_client *client, const char *bucket);
S3X_API int s3x_delete_bucket(s3x_client *client, const char *bucket);
/* HeadBucket: 0 when the bucket exists and is reachable. */
S3X_API int s3x_head_bucket(s3x_client *client, const char *bucket);

/* HeadObject. A missing key fails with S3X_EHTTP, status 404, code "NoSuchKey". */
S3X_API int s3x_head_object(s3x_client *client, const char *bucket, const char *key,
                            s3x_object_info *out);

/* PutObject of len bytes at data (may be NULL when len is 0). content_type may
 * be NULL. etag_out (may be NULL) receives the ETag, free with s3x_free. */
S3X_API int s3x_put_object(s3x_client *client, const char *bucket, const char *key,
                           const void *data, size_t len, const char *content_type,
                           char **etag_out);

/* Reads body bytes for a streamed PutObject: fill buf with up to cap bytes and
 * return how many (0 only at the end), or a negative value to abort. */
typedef int64_t (*s3x_read_fn)(void *buf, size_t cap, void *payload);
/* Receives body bytes of a streamed GetObject; return 0 to go on, non-zero to abort. */
typedef int (*s3x_write_fn)(const void *data, size_t len, void *payload);

/* PutObject of exactly size bytes pulled from read_fn (payload last). The
 * body is sent UNSIGNED-PAYLOAD (it cannot be hashed ahead). A read_fn that
 * ends early or fails fails the request (S3X_EIO) without creating the object. */
S3X_API int s3x_put_object_stream(s3x_client *client, const char *bucket, const char *key,
                                  int64_t size, s3x_read_fn read_fn, char **etag_out,
                                  void *payload);

/* The most bytes s3x_get_object holds in memory (1 GiB): larger objects or
 * ranges belong in s3x_download_file/_fd/_stream, which bound their memory. */
#define S3X_GET_OBJECT_MAX_BYTES ((size_t)1 << 30)

/* GetObject into a new buffer (*data, *len; free *data with s3x_free).
 * range_start/range_end: inclusive byte range, or -1/-1 for the whole object;
 * range_end -1 with range_start >= 0 means "to the end". info (may be NULL)
 * receives the response's metadata (size = whole object size). A body over
 * S3X_GET_OBJECT_MAX_BYTES is refused with S3X_ELIMIT, as soon as its
 * Content-Length announces it. */
S3X_API int s3x_get_object(s3x_client *client, const char *bucket, const char *key,
                           int64_t range_start, int64_t range_end,
                           void **data, size_t *len, s3x_object_info *info);

/* GetObject streamed to write_fn. A short body (fewer bytes than announced)
 * is an error (S3X_ENETWORK). */
S3X_API int s3x_get_object_stream(s3x_client *client, const char *bucket, const char *key,
                                  int64_t range_start, int64_t range_end,
                                  s3x_write_fn write_fn, s3x_object_info *info, void *payload);

S3X_API int s3x_delete_object(s3x_client *client, const char *bucket, const char *key);

/* ListObjectsV2, one page. prefix, delimiter and continuation_token may be
 * NULL; max_keys 0 means the server's default (1000). Release with
 * s3x_list_free. */
typedef struct s3x_list_entry {
    char *key;
    int64_t size;
    char *etag;
    char *last_modified;
} s3x_list_entry;
typedef struct s3x_list {
    s3x_list_entry *entries;
    size_t count;
    char **prefixes;            /* CommonPrefixes (with a delimiter) */
    size_t nprefixes;
    int is_truncated;
    char *next_token;           /* continuation token for the next page, or NULL */
} s3x_list;
S3X_API int s3x_list_objects(s3x_client *client, const char *bucket, const char *prefix,
                             const char *delimiter, const char *continuation_token,
                             int max_keys, s3x_list **out);
S3X_API void s3x_list_free(s3x_list *list);

/* Multipart upload primitives (the upload manager uses these for you). */
S3X_API int s3x_create_multipart_upload(s3x_client *client, const char *bucket, const char *key,
                                        const char *content_type, char **upload_id);
S3X_API int s3x_upload_part(s3x_client *client, const char *bucket, const char *key,
                            const char *upload_id, int part_number, const void *data,
                            size_t len, char **etag_out);
typedef struct s3x_part_ref {
    int part_number;
    const char *etag;
} s3x_part_ref;
/* CompleteMultipartUpload. A 200 response whose body is an <Error> fails
 * with S3X_EHTTP and that error's code. */
S3X_API int s3x_complete_multipart_upload(s3x_client *client, const char *bucket,
                                          const char *key, const char *upload_id,
                                          const s3x_part_ref *parts, size_t nparts,
                                          char **etag_out);
S3X_API int s3x_abort_multipart_upload(s3x_client *client, const char *bucket,
                                       const char *key, const char *upload_id);

typedef struct s3x_part_info {
    int part_number;
    int64_t size;
    char *etag;
} s3x_part_info;
typedef struct s3x_part_list {
    s3x_part_info *parts;
    size_t count;
} s3x_part_list;
/* ListParts, every page. Release with s3x_part_list_free. */
S3X_API int s3x_list_parts(s3x_client *client, const char *bucket, const char *key,
                           const char *upload_id, s3x_part_list **out);
S3X_API void s3x_part_list_free(s3x_part_list *list);

typedef struct s3x_upload_entry {
    char *key;
    char *upload_id;
    char *initiated;
} s3x_upload_entry;
typedef struct s3x_upload_list {
    s3x_upload_entry *uploads;
    size_t count;
} s3x_upload_list;
/* ListMultipartUploads, every page; prefix may be NULL. Release with s3x_upload_list_free. */
S3X_API int s3x_list_multipart_uploads(s3x_client *client, const char *bucket,
                                       const char *prefix, s3x_upload_list **out);
S3X_API void s3x_upload_list_free(s3x_upload_list *list);

/* ---- server-side copy and bulk delete ---------------------------------- */

/* What a copy does with the source's metadata (x-amz-metadata-directive). */
typedef enum s3x_metadata_directive {
    S3X_METADATA_COPY = 0,    /* the copy keeps the source's content type and user metadata */
    S3X_METADATA_REPLACE = 1  /* the copy gets content_type below and no user metadata */
} s3x_metadata_directive;

/* Options of a copy; a NULL pointer means all defaults (zeroed struct). */
typedef struct s3x_copy_opts {
    int metadata_directive;     /* s3x_metadata_directive */
    const char *content_type;   /* REPLACE only; NULL: the server's default */
    const char *if_match;       /* copy only if the source's ETag is this (x-amz-copy-source-if-match); NULL: any */
} s3x_copy_opts;

/* CopyObject: one request in which the server copies src to dst (up to
 * 5 GiB; larger objects need s3x_upload_copy, which copies in parts). The
 * bytes never pass through the client. etag_out (may be NULL) receives the
 * new object's ETag (free with s3x_free). A 200 answer whose body is an
 * <Error> fails with S3X_EHTTP and that error's code; a missing source
 * fails with 404 NoSuchKey; a failed if_match with 412 PreconditionFailed.
 * Errors: S3X_EINVAL (names, directive), S3X_EHTTP, S3X_ENETWORK, S3X_EXML. */
S3X_API int s3x_copy_object(s3x_client *client, const char *src_bucket, const char *src_key,
                            const char *dst_bucket, const char *dst_key, const s3x_copy_opts *opts,
                            char **etag_out);

/* The most keys one DeleteObjects request may name. */
#define S3X_DELETE_MAX_KEYS 1000

/* One key's outcome in a DeleteObjects call. */
typedef struct s3x_delete_entry {
    char *key;
    int ok;          /* 1: deleted (or already absent: S3 reports that as deleted) */
    char *code;      /* the S3 error code when !ok ("AccessDenied", ...), else NULL */
    char *message;   /* its message, else NULL */
} s3x_delete_entry;
typedef struct s3x_delete_result {
    s3x_delete_entry *entries;  /* one per key given, in the order given */
    size_t count;
    size_t failed;              /* entries with ok == 0 */
} s3x_delete_result;

/* DeleteObjects: deletes n keys (1..S3X_DELETE_MAX_KEYS) of bucket in one
 * request (with the Content-MD5 S3 requires on it) and gives each key's
 * outcome in *out (release with s3x_delete_result_free). The call returns 0
 * when the request succeeded even if some keys failed: look at
 * (*out)->failed. A key the answer does not mention is reported failed
 * with code "NotReported". Errors: S3X_EINVAL (no keys, too many, an empty
 * key), S3X_EHTTP (the request as a whole), S3X_ENETWORK, S3X_EXML. */
S3X_API int s3x_delete_objects(s3x_client *client, const char *bucket, const char *const *keys, size_t n,
                               s3x_delete_result **out);
S3X_API void s3x_delete_result_free(s3x_delete_result *result);

#ifdef __cplusplus
}
#endif
#endif
