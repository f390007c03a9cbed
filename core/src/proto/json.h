/* A strict reader for the small JSON documents credential providers return
 * (credential_process output, the ECS container endpoint, instance
 * metadata) (private).
 *
 * The input is untrusted: it must be one JSON object (RFC 8259, nothing
 * lenient: no comments, no trailing commas, no single quotes, no NaN), at
 * most S3X_JSON_MAX_BYTES long, valid UTF-8, nested at most
 * S3X_JSON_MAX_DEPTH deep. Only the top-level members are kept; nested
 * objects and arrays are checked and skipped. A member named twice at the
 * top level is an error (which one would be meant is not knowable), and so
 * is a string holding U+0000 (it would cut a C string short). Values may be
 * secrets: they never appear in messages, and are wiped when freed. */
#ifndef S3X_JSON_H
#define S3X_JSON_H
#include <stddef.h>

#define S3X_JSON_MAX_BYTES (64u * 1024u)
#define S3X_JSON_MAX_DEPTH 32

typedef enum s3x_json_kind {
    S3X_JSON_STRING = 1,
    S3X_JSON_NUMBER,
    S3X_JSON_TRUE,
    S3X_JSON_FALSE,
    S3X_JSON_NULL,
    S3X_JSON_OBJECT,
    S3X_JSON_ARRAY
} s3x_json_kind;

typedef struct s3x_json s3x_json;

/* Parses data[0..len) into *out (NULL after a failure). what names the
 * document in messages ("credential_process output"); a malformed document
 * gives error_code with a message naming what was wrong and the byte offset,
 * or S3X_ENOMEM. */
int s3x_json_parse(const char *data, size_t len, const char *what, int error_code, s3x_json **out);

/* Parses data as s3x_json_parse does (the whole document is checked), then
 * returns in *out the members of the object that is the value of the
 * top-level member member_name (an SSO portal answer nests the credentials
 * in "roleCredentials"). A document without such an object member gives
 * error_code. */
int s3x_json_parse_nested(const char *data, size_t len, const char *what, int error_code, const char *member_name,
                          s3x_json **out);

/* The top-level member key: its kind in *kind (may be NULL) and its value:
 * the decoded text of a string, the literal text of a number, true, false or
 * null, or NULL for an object or array. NULL with *kind 0 when absent. */
const char *s3x_json_get(const s3x_json *j, const char *key, s3x_json_kind *kind);

/* The top-level member key when it is a string, else NULL. */
const char *s3x_json_string(const s3x_json *j, const char *key);

size_t s3x_json_count(const s3x_json *j);
/* The i-th top-level member (file order): 0, or -1 past the end. */
int s3x_json_entry(const s3x_json *j, size_t i, const char **key, const char **value, s3x_json_kind *kind);

/* Wipes the values and frees; NULL is fine. */
void s3x_json_free(s3x_json *j);

/* Parses an ISO 8601 UTC time as AWS sends expirations:
 * "YYYY-MM-DDTHH:MM:SS[.fff]Z" or with "+00:00"/"-HH:MM" offsets. 0 and the
 * seconds since the epoch in *out, or -1. */
int s3x_parse_iso8601(const char *s, double *out);

#endif
