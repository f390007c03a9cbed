/* Bucket, region and endpoint-authority validation (core/src/util/names.c): what
 * is accepted can never end, extend or redirect a URL's host. Input: a
 * control byte (which check), then the name. */
#include "fuzz.h"
#include "names.h"

static int has_any(const char *s, size_t n, const char *set) {
    for (size_t i = 0; i < n; i++)
        if (s[i] && strchr(set, s[i])) return 1;
    return 0;
}

static int only(const char *s, size_t n, int (*ok)(char)) {
    for (size_t i = 0; i < n; i++)
        if (!ok(s[i])) return 0;
    return 1;
}

static int bucket_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
           c == '_';
}
static int dns_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-'; }
static int region_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    char *s = malloc(size);
    if (!s) return 0;
    memcpy(s, data + 1, size - 1);
    s[size - 1] = '\0';
    size_t n = strlen(s);
    switch (data[0] % 3) {
    case 0:
        if (!s3x_bucket_name_problem(s)) {
            FUZZ_ASSERT(n >= 3 && n <= 255 && only(s, n, bucket_char), "accepted bucket '%s'", s);
            FUZZ_ASSERT(!strstr(s, "..") && s[0] != '.' && s[n - 1] != '.', "accepted dot segment '%s'", s);
        }
        if (s3x_bucket_dns_compatible(s)) {
            FUZZ_ASSERT(!s3x_bucket_name_problem(s), "DNS-compatible but not a bucket: '%s'", s);
            FUZZ_ASSERT(n <= 63 && only(s, n, dns_char), "accepted host label '%s'", s);
        }
        break;
    case 1:
        if (!s3x_region_problem(s)) FUZZ_ASSERT(n >= 1 && n <= 64 && only(s, n, region_char), "region '%s'", s);
        break;
    default:
        /* The authority is checked with its length: embedded NULs count. */
        if (!s3x_authority_problem((const char *)data + 1, size - 1))
            FUZZ_ASSERT(!memchr(data + 1, '\0', size - 1) && !has_any((const char *)data + 1, size - 1, "@/?#\\ %"),
                        "accepted authority of %zu bytes", size - 1);
        break;
    }
    free(s);
    return 0;
}
