/* S3 XML bodies (private): parsing responses and building request bodies with
 * libxml2. Parsing never touches the network, never expands entities, rejects
 * any document that carries a DTD (<!DOCTYPE ...>), and refuses inputs larger
 * than S3X_XML_MAX_BYTES. Every parse function returns 0, or S3X_EXML with the
 * thread's last error set to a message that says what was wrong (malformed,
 * truncated, too large, DTD present, missing element), or S3X_ENOMEM. Out
 * structures must be zeroed by the caller and released with their _free
 * function even after a failure. */
#ifndef S3X_S3XML_H
#define S3X_S3XML_H
#include <stddef.h>
#include <stdint.h>

#define S3X_XML_MAX_BYTES (8u * 1024u * 1024u) /* as http.c caps captured bodies */

/* <Error><Code/><Message/><RequestId/>...</Error>. Returns S3X_EXML if the
 * root is not Error. */
typedef struct s3x_xml_error {
    char *code, *message, *request_id, *resource;
} s3x_xml_error;
int s3x_xml_parse_error(const char *xml, size_t len, s3x_xml_error *out);
void s3x_xml_error_free(s3x_xml_error *e);

/* 1 if the document's root element is <Error> (used for CompleteMultipartUpload
 * 200 responses whose body is an error), 0 otherwise (including unparsable). */
int s3x_xml_is_error(const char *xml, size_t len);

/* <InitiateMultipartUploadResult><UploadId/> */
int s3x_xml_parse_initiate(const char *xml, size_t len, char **upload_id);

/* <CompleteMultipartUploadResult><Location/><Bucket/><Key/><ETag/> */
typedef struct s3x_xml_complete {
    char *location, *bucket, *key, *etag;
} s3x_xml_complete;
int s3x_xml_parse_complete(const char *xml, size_t len, s3x_xml_complete *out);
void s3x_xml_complete_free(s3x_xml_complete *c);

/* <ListBucketResult> (ListObjectsV2) */
typedef struct s3x_xml_object {
    char *key, *etag, *last_modified, *storage_class;
    int64_t size;
} s3x_xml_object;
typedef struct s3x_xml_list_objects {
    s3x_xml_object *objects; size_t nobjects;
    char **common_prefixes; size_t nprefixes;
    int is_truncated;
    char *next_continuation_token;   /* NULL when absent */
    int64_t key_count;
} s3x_xml_list_objects;
int s3x_xml_parse_list_objects(const char *xml, size_t len, s3x_xml_list_objects *out);
void s3x_xml_list_objects_free(s3x_xml_list_objects *l);

/* <ListPartsResult> */
typedef struct s3x_xml_part {
    int part_number;
    char *etag, *last_modified;
    int64_t size;
} s3x_xml_part;
typedef struct s3x_xml_list_parts {
    s3x_xml_part *parts; size_t nparts;
    int is_truncated;
    int next_part_number_marker;   /* 0 when absent */
} s3x_xml_list_parts;
int s3x_xml_parse_list_parts(const char *xml, size_t len, s3x_xml_list_parts *out);
void s3x_xml_list_parts_free(s3x_xml_list_parts *l);

/* <ListMultipartUploadsResult> */
typedef struct s3x_xml_upload {
    char *key, *upload_id, *initiated;
} s3x_xml_upload;
typedef struct s3x_xml_list_uploads {
    s3x_xml_upload *uploads; size_t nuploads;
    int is_truncated;
    char *next_key_marker, *next_upload_id_marker;  /* NULL when absent */
} s3x_xml_list_uploads;
int s3x_xml_parse_list_uploads(const char *xml, size_t len, s3x_xml_list_uploads *out);
void s3x_xml_list_uploads_free(s3x_xml_list_uploads *l);

/* Builds <CompleteMultipartUpload><Part><PartNumber/><ETag/>[<ChecksumCRC32C/>...]</Part>...
 * checksum_name is NULL or one of "ChecksumCRC32C", "ChecksumCRC32",
 * "ChecksumSHA256"; checksums[i] may be NULL. Text is XML-escaped; a value
 * XML 1.0 cannot carry (not UTF-8, a C0 control other than tab/LF/CR,
 * U+FFFE, U+FFFF) is refused with S3X_EINVAL naming the part, never sent
 * malformed or altered. *out is malloc'd, NUL-terminated; *out_len excludes
 * the NUL. */
typedef struct s3x_complete_part {
    int part_number;
    const char *etag;
    const char *checksum;   /* base64, or NULL */
} s3x_complete_part;
int s3x_xml_build_complete(const s3x_complete_part *parts, size_t nparts,
                           const char *checksum_name, char **out, size_t *out_len);

/* Builds <CreateBucketConfiguration><LocationConstraint>region</...> ; for
 * region "us-east-1" or NULL sets *out = NULL (no body needed). The region
 * is escaped or refused as ETags are above. */
int s3x_xml_build_create_bucket(const char *region, char **out, size_t *out_len);

/* STS answers (AssumeRole, AssumeRoleWithWebIdentity): either
 * <{action}Response><{action}Result><Credentials> with AccessKeyId,
 * SecretAccessKey, SessionToken and Expiration (all required, non-empty), or
 * <ErrorResponse><Error><Code/><Message/></Error>, which fills error_code and
 * error_message instead (and returns 0). The credentials are secrets: release
 * with s3x_xml_sts_free, which wipes them. */
typedef struct s3x_xml_sts {
    char *access_key, *secret_key, *session_token, *expiration;
    char *error_code, *error_message;
} s3x_xml_sts;
int s3x_xml_parse_sts(const char *xml, size_t len, const char *action, s3x_xml_sts *out);
void s3x_xml_sts_free(s3x_xml_sts *s);

/* <CopyObjectResult> (CopyObject) or <CopyPartResult> (UploadPartCopy):
 * ETag (required, non-empty), LastModified and a Checksum{CRC32C,CRC32,
 * SHA256,CRC64NVME} when the server computed one (checksum_name is then
 * that element's name, a static string). root is "CopyObjectResult" or
 * "CopyPartResult". An <Error> document fails with S3X_EXML naming its code
 * (the HTTP layer turns a 200 <Error> into S3X_EHTTP before this runs). */
typedef struct s3x_xml_copy {
    char *etag, *last_modified, *checksum;
    const char *checksum_name;
} s3x_xml_copy;
int s3x_xml_parse_copy(const char *xml, size_t len, const char *root, s3x_xml_copy *out);
void s3x_xml_copy_free(s3x_xml_copy *c);

/* <DeleteResult> (DeleteObjects): <Deleted><Key/></Deleted> and
 * <Error><Key/><Code/><Message/></Error> entries, in document order, at most
 * S3X_XML_DELETE_MAX of them (more is a broken answer to a request of at most
 * that many keys). ok is 1 for Deleted; code and message are NULL then. */
#define S3X_XML_DELETE_MAX 1000
typedef struct s3x_xml_deleted {
    char *key, *code, *message;
    int ok;
} s3x_xml_deleted;
typedef struct s3x_xml_delete_result {
    s3x_xml_deleted *entries; size_t n;
} s3x_xml_delete_result;
int s3x_xml_parse_delete_result(const char *xml, size_t len, s3x_xml_delete_result *out);
void s3x_xml_delete_result_free(s3x_xml_delete_result *d);

/* Builds <Delete>[<Quiet>true</Quiet>]<Object><Key>k</Key></Object>...</Delete>
 * for 1..S3X_XML_DELETE_MAX keys; keys are escaped or refused (S3X_EINVAL
 * naming the key's index) as ETags are above; an empty key is refused. */
int s3x_xml_build_delete(const char *const *keys, size_t n, int quiet, char **out, size_t *out_len);

/* Call once per process before threads start using the parser (idempotent). */
void s3x_xml_init(void);

#endif
