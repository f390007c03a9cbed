/* Part checksums (private): CRC32C, CRC32, SHA-256, MD5, base64. */
#ifndef S3X_CHECKSUM_H
#define S3X_CHECKSUM_H
#include <stddef.h>
#include <stdint.h>
#include "s3xfer/params.h"

uint32_t s3x_crc32c(uint32_t crc, const void *data, size_t len);
uint32_t s3x_crc32(uint32_t crc, const void *data, size_t len);
/* The CRC (CRC32C or CRC32, as kind) of A followed by B, from A's CRC, B's
 * CRC and B's length: ranges hashed apart make the whole object's CRC. */
uint32_t s3x_crc_combine(int kind, uint32_t crc1, uint32_t crc2, int64_t len2);
/* A CRC as S3 headers carry it: base64 of its 4 bytes, high byte first. */
void s3x_crc_b64(uint32_t crc, char out[48]);

/* Incremental checksum of one kind. */
typedef struct s3x_hasher {
    int kind;               /* s3x_checksum */
    uint32_t crc;
    void *md;               /* EVP_MD_CTX* for SHA-256 / MD5 */
} s3x_hasher;

int s3x_hasher_init(s3x_hasher *h, int kind);
void s3x_hasher_update(s3x_hasher *h, const void *data, size_t len);
/* Writes the base64 digest (as S3 headers carry it) into out (>= 48 bytes)
 * and releases the hasher. */
void s3x_hasher_final_b64(s3x_hasher *h, char out[48]);
void s3x_hasher_cleanup(s3x_hasher *h);

/* Standard base64 of n bytes into out (NUL-terminated; needs 4*ceil(n/3)+1). */
void s3x_base64(const unsigned char *in, size_t n, char *out);

/* Header names for a kind: "x-amz-checksum-crc32c", ... "content-md5"; NULL for NONE. */
const char *s3x_checksum_header(int kind);
/* Algorithm name for x-amz-checksum-algorithm ("CRC32C"...); NULL for NONE/MD5. */
const char *s3x_checksum_algorithm(int kind);
/* Element name in CompleteMultipartUpload ("ChecksumCRC32C"...); NULL for NONE/MD5. */
const char *s3x_checksum_xml_name(int kind);

#endif
