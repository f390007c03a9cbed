/* The client's private state and the HTTP request machinery shared by the
 * single operations and the managers (private). */
#ifndef S3X_CLIENT_INTERNAL_H
#define S3X_CLIENT_INTERNAL_H

#include <curl/curl.h>
#include <stdatomic.h>
#include "buf.h"
#include "chunked.h"
#include "creds.h"
#include <pthread.h>
#include "ratelimit.h"
#include "retrypolicy.h"
#include "sigv4.h"
#include "s3xfer/s3xfer.h"

struct s3x_client {
    char *opt[S3X_CLIENT_OPT__COUNT];   /* explicit settings (NULL = unset) */
    int64_t params[S3X_PARAM__COUNT];

    int resolved;
    char *endpoint;     /* scheme://host[:port], no trailing slash, no path */
    char *scheme;       /* "http" or "https" */
    char *hostport;     /* host[:port] as sent in the Host header */
    char *region;
    char *ca_bundle;
    char *vhost;        /* the host a bucket label goes in front of: hostport, or S3 Accelerate's */
    int endpoint_configured;  /* the endpoint was given (option, environment, profile), not computed */
    int profile_style;  /* s3x_profile_style (endpoint.h): the profile's s3 addressing_style */

    /* Credentials: the current snapshot and the provider that refreshes it.
     * cred_mu guards the pointer swap; a request signs with a reference of
     * its own (s3x_client_creds_acquire), never with fields read twice. */
    pthread_mutex_t cred_mu;
    s3x_creds *creds;
    s3x_cred_source *cred_src;
    int64_t cred_refreshes;
    double cred_retry_at;   /* wall time before which a failed advisory refresh is not retried */
    pthread_t cred_thread;  /* the advisory refresh, off the signing thread */
    int cred_thread_live;   /* cred_thread exists and must be joined */
    int cred_refreshing;    /* it is running (under cred_mu) */

    CURLM *multi;
    int main_running;   /* requests on multi (started, not yet finished or aborted) */
    /* Receiving loops beside the caller's (s3x_client_receive_threads - 1
     * of them, started on first use; http.c): each a thread with a multi
     * handle of its own that runs the requests marked loop_ok. */
    struct s3x_loop **loops;
    int auto_receive_threads;  /* what S3X_PARAM_RECEIVE_THREADS = 0 means here (cpus.h), set at creation */
    int nloops;
    int64_t loop_started;   /* requests started on a receiving loop (tests, diagnostics) */
    CURL **idle;        /* easy handles kept for reuse */
    size_t nidle, idle_cap;

    char *known_buckets[8];   /* buckets seen to exist (HeadBucket), most recent first */

    char sign_date[9];  /* signing-key cache: the date it was derived for */
    unsigned char sign_key[32];

    s3x_ratelimit rate;   /* adaptive request rate, shared by every transfer on this client */
    s3x_retry_state retry;  /* the single operations' jitter and retry budget (ops.c) */
    int retry_ready;        /* retry is seeded */
    /* What the slow-part timeout learned, carried to the next transfers
     * (xfer/retry.h; made by the first DYNAMIC transfer, plain memory). */
    struct s3x_fbt_carry *fbt_carry;
};

#define S3X_MAX_QUERY 8
#define S3X_MAX_HEADERS 32 /* a copy's CreateMultipartUpload carries the source's metadata */

typedef struct s3x_http_req s3x_http_req;
typedef void (*s3x_http_done_fn)(s3x_http_req *req, void *payload);

/* One HTTP request to S3. The caller fills the "request" part (pointers it
 * keeps alive until the request is finished), then runs it with
 * s3x_http_perform (blocking) or s3x_http_start + s3x_http_poll (many at
 * once on the client's multi handle). */
struct s3x_http_req {
    /* --- request ---------------------------------------------------- */
    const char *op;            /* operation name for messages: "PutObject" */
    const char *method;        /* "GET", "PUT", "POST", "DELETE", "HEAD" */
    const char *bucket;        /* NULL for service-level requests */
    const char *key;           /* NULL for bucket-level requests */
    s3x_kv query[S3X_MAX_QUERY];
    size_t nquery;
    s3x_kv headers[S3X_MAX_HEADERS];   /* extra headers, signed */
    size_t nheaders;

    /* body: memory (body/body_len) or a callback (read_fn, body_size bytes) */
    const char *body;
    size_t body_len;
    s3x_read_fn read_fn;
    void *read_payload;
    int64_t body_size;         /* for read_fn bodies */
    const char *payload_hash;  /* NULL: SHA-256 of a memory body per client knob, else UNSIGNED */
    int trailer_kind;          /* s3x_checksum sent after the body in an aws-chunked trailer
                                  (STREAMING-UNSIGNED-PAYLOAD-TRAILER; payload_hash is ignored);
                                  0 = none. Its value is in chunked.value once the body is sent. */

    /* response body sink: write_fn, else captured into resp_body */
    s3x_write_fn write_fn;
    void *write_payload;
    size_t resp_cap;           /* cap on captured bytes (0 = default 8 MiB, see http.c) */

    /* --- response --------------------------------------------------- */
    long status;
    s3x_buf resp_body;
    char *etag, *request_id, *content_range, *content_type, *last_modified, *version_id;
    char *server;              /* the Server header (which S3 implementation answered) */
    double retry_after_s;      /* Retry-After in seconds (bounded by S3X_RETRY_AFTER_MAX_S); -1 when absent */
    int checksum_kind;         /* s3x_checksum of an x-amz-checksum-* response header, or 0 */
    char *checksum_value;      /* its value (base64; "...-N" for composite checksums) */
    int want_meta;             /* keep x-amz-meta-* headers in meta (a copy's HeadObject) */
    s3x_buf meta;              /* "x-amz-meta-name\0value\0"..., names lowercased */
    int meta_over;             /* more metadata than S3 allows (or no memory): meta is incomplete */
    int64_t content_length;    /* -1 when absent */
    int64_t bytes_in;          /* response body bytes received */
    int64_t bytes_out;         /* request body bytes handed to curl */
    CURLcode curl_rc;
    int aborted_by_callback;   /* read/write callback asked to stop */
    int read_failed;           /* read_fn returned < 0 or ended early */
    int body_over_cap;         /* a captured body went (or was announced) over resp_cap */
    char errbuf[CURL_ERROR_SIZE];

    /* timings (seconds, CLOCK_MONOTONIC) */
    double t_start, t_sent, t_first_byte, t_end;

    /* --- engine ----------------------------------------------------- */
    CURL *easy;
    struct curl_slist *slist;
    s3x_buf url;
    size_t body_off;
    s3x_chunked chunked;       /* trailer_kind bodies: the encoder */
    int64_t wire_size, wire_out;   /* trailer_kind bodies: encoded length, bytes handed to curl */
    s3x_http_done_fn on_done;
    void *done_payload;
    void *user;                /* for the managers */
    int in_multi;
    int got_status;
    /* May run on a receiving loop's thread (S3X_PARAM_RECEIVE_THREADS): set
     * by the caller for a request whose callbacks (write_fn) touch only
     * state of its own or state under a lock, and which is read while it
     * runs only through s3x_req_first_byte. */
    int loop_ok;
    struct s3x_loop *loop;     /* the loop running it; NULL: the client's multi */
    int started_on_loop;       /* its last start went to a receiving loop (kept after it ends) */
    int loop_state;            /* under loop->mu (http.c) */
    CURLcode loop_rc;          /* its result, set by the loop's thread */
    s3x_http_req *loop_next;   /* in one of the loop's lists */
};

/* The time of a running request's first response byte (0: none yet); safe
 * while the request runs on another thread (on_header stores it atomically). */
static inline double s3x_req_first_byte(const s3x_http_req *r) {
    double t;
    __atomic_load(&r->t_first_byte, &t, __ATOMIC_RELAXED);
    return t;
}

double s3x_now(void);

/* The receiving threads the client uses: S3X_PARAM_RECEIVE_THREADS, or when
 * that is 0 (auto, the default) one for every two CPUs the process may use,
 * 1 to 8 (cpus.h). */
static inline int s3x_client_receive_threads(const s3x_client *c) {
    int64_t v = c->params[S3X_PARAM_RECEIVE_THREADS];
    return v > 0 ? (int)v : c->auto_receive_threads; /* s3x_client_new sets it, at least 1 */
}

/* Resolves settings if not done yet. */
int s3x_client_ensure(s3x_client *c);

/* A reference to credentials fit to sign with now: when the current ones
 * are inside their advisory refresh window they are refreshed first (a
 * failure there keeps them), inside the mandatory window a failed refresh
 * is an error (S3X_ECREDENTIALS naming the provider), so a request is never
 * signed with expired keys. Release with s3x_creds_unref. */
int s3x_client_creds_acquire(s3x_client *c, s3x_creds **out);

/* Builds the URL, signs, configures the easy handle. */
int s3x_http_prepare(s3x_client *c, s3x_http_req *r);
/* Blocking: prepare, run to completion, then s3x_http_check. */
int s3x_http_perform(s3x_client *c, s3x_http_req *r);
/* Non-blocking start on the client's multi handle (after prepare). */
int s3x_http_start(s3x_client *c, s3x_http_req *r);
/* Drives the multi handle for up to timeout_ms; calls each finished
 * request's on_done. Returns the number of requests still running, or <0. */
int s3x_http_poll(s3x_client *c, int timeout_ms);
/* Removes a running request from the multi handle (cancel). */
void s3x_http_abort(s3x_client *c, s3x_http_req *r);
/* Wakes a thread blocked in s3x_http_poll (callable from any thread). */
void s3x_http_wakeup(s3x_client *c);
/* Stops and frees the client's receiving loops (s3x_client_free; no request
 * may be running). */
void s3x_http_loops_stop(s3x_client *c);
/* Maps the outcome (curl error, HTTP status, error XML) to 0 or an error code
 * with the thread's last error set. */
int s3x_http_check(s3x_client *c, s3x_http_req *r);
/* Classifies a finished failed request as retryable (1) or not (0). */
int s3x_http_retryable(const s3x_http_req *r);
/* 1 when a finished request was throttled: 429, 503, or an error whose parsed
 * <Code> is a throttling or transient server code (SlowDown, Throttling,
 * ThrottlingException, RequestLimitExceeded, ServiceUnavailable,
 * InternalError, ...), in a 5xx, a 400 or the 200 of s3x_http_error_in_200. */
int s3x_http_throttled(const s3x_http_req *r);
/* 1 when a 200 response of CompleteMultipartUpload / CopyObject /
 * UploadPartCopy carries an <Error> body (the operation failed after the status). */
int s3x_http_error_in_200(const s3x_http_req *r);
/* Upper bound on a Retry-After honoured (seconds). */
#define S3X_RETRY_AFTER_MAX_S 60.0
/* Releases everything a request holds and returns its easy handle to the
 * client; the request may then be filled and run again. */
void s3x_http_req_reset(s3x_client *c, s3x_http_req *r);
/* Runs the response-header callback on one header line line[0..n) (status
 * line or "Name: value", CRLF optional) against r, as curl does during a
 * transfer: for the fuzzer and tests. 0 if the line was accepted, -1 if the
 * callback would have aborted the transfer. */
int s3x_http_parse_header_line(s3x_http_req *r, const char *line, size_t n);

#endif

/* S3 may answer CompleteMultipartUpload with 200 and still fail it in the
 * body: returns S3X_EHTTP with that error's code (thread error set) when the
 * response body is an <Error>, else 0. */
int s3x_http_check_complete_body(const s3x_http_req *r);
/* The object size from "bytes 0-9/1234" (1234), or -1. */
int64_t s3x_content_range_total(const char *content_range);

/* Checks a bucket name (names.h: the relaxed legacy rules) and, when
 * path_style is not NULL, decides how it is addressed on this resolved
 * client: explicit PATH or VIRTUAL knobs decide (a name that cannot be a
 * host label under VIRTUAL is refused); under AUTO, botocore's rules with the
 * profile's s3 addressing_style (docs/endpoints.md): path style for a
 * configured endpoint unless the profile says virtual, for an IP-address
 * endpoint, for names that cannot be a host label and for dotted names over
 * HTTPS; S3 Accelerate refuses the names it cannot host. Every URL's host is built only after this said yes. Returns 0 or
 * S3X_EINVAL (thread error set). */
int s3x_client_bucket_addressing(const s3x_client *c, const char *bucket, int *path_style);

/* The request's host and encoded path, and r->url from them (http.c). */
int s3x_http_build_url(s3x_client *c, s3x_http_req *r, s3x_buf *path, s3x_buf *host);

/* 1 if bucket was seen to exist by this client; remembers it when add. */
int s3x_client_bucket_known(s3x_client *c, const char *bucket);
void s3x_client_bucket_remember(s3x_client *c, const char *bucket);
