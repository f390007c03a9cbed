/* Bucket, region and endpoint-host validation (see names.h). Pure functions,
 * libc only, so they are unit-tested and fuzzed without a network. */
#include "names.h"
#include <string.h>

static int is_lower_alnum(char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'); }
static int is_alnum(char ch) { return is_lower_alnum(ch) || (ch >= 'A' && ch <= 'Z'); }
static int is_digit(char ch) { return ch >= '0' && ch <= '9'; }

const char *s3x_bucket_name_problem(const char *b) {
    if (!b || !*b) return "the bucket name is empty";
    size_t n = strlen(b);
    if (n < 3) return "a bucket name has at least 3 characters";
    if (n > 255) return "a bucket name has at most 255 characters";
    for (size_t i = 0; i < n; i++) {
        char ch = b[i];
        if (!(is_alnum(ch) || ch == '.' || ch == '-' || ch == '_'))
            return "a bucket name may hold only letters, digits, '.', '-' and '_'";
    }
    if (!is_alnum(b[0]) || !is_alnum(b[n - 1])) return "a bucket name starts and ends with a letter or digit";
    if (strstr(b, "..")) return "a bucket name has no two dots in a row";
    return NULL;
}

static int ipv4_shaped(const char *b) {
    int dots = 0;
    for (const char *p = b; *p; p++) {
        if (*p == '.') dots++;
        else if (!is_digit(*p)) return 0;
    }
    return dots == 3;
}

int s3x_bucket_dns_compatible(const char *b) {
    if (!b) return 0;
    size_t n = strlen(b);
    if (n < 3 || n > 63 || ipv4_shaped(b)) return 0;
    size_t label = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = b[i];
        if (ch == '.') {
            if (label == 0 || b[i - 1] == '-') return 0;
            label = 0;
            continue;
        }
        if (!(is_lower_alnum(ch) || ch == '-')) return 0;
        if (label == 0 && ch == '-') return 0;
        label++;
    }
    return label > 0 && b[n - 1] != '-';
}

const char *s3x_region_problem(const char *r) {
    if (!r || !*r) return "the region is empty";
    size_t n = strlen(r);
    if (n > 64) return "a region name has at most 64 characters";
    for (size_t i = 0; i < n; i++)
        if (!(is_lower_alnum(r[i]) || r[i] == '-'))
            return "a region name holds only lowercase letters, digits and '-'";
    if (r[0] == '-' || r[n - 1] == '-') return "a region name starts and ends with a letter or digit";
    return NULL;
}

static const char *port_problem(const char *p, size_t n) {
    if (n == 0) return "the port after ':' is empty";
    if (n > 5) return "the port is not a number from 1 to 65535";
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!is_digit(p[i])) return "the port is not a number from 1 to 65535";
        v = v * 10 + (p[i] - '0');
    }
    if (v < 1 || v > 65535) return "the port is not a number from 1 to 65535";
    return NULL;
}

const char *s3x_authority_problem(const char *a, size_t n) {
    if (!a || n == 0) return "the endpoint URL has no host";
    if (memchr(a, '@', n)) return "the endpoint URL must not carry a user name or password";
    size_t hostlen;
    if (a[0] == '[') {
        const char *close = memchr(a, ']', n);
        if (!close) return "an IPv6 literal in the endpoint URL lacks its ']'";
        hostlen = (size_t)(close - a) + 1;
        if (hostlen < 3) return "the IPv6 literal in the endpoint URL is empty";
        for (size_t i = 1; i + 1 < hostlen; i++) {
            char ch = a[i];
            if (!(is_alnum(ch) || ch == ':' || ch == '.'))
                return "the IPv6 literal in the endpoint URL holds a character it cannot";
        }
    } else {
        const char *colon = memchr(a, ':', n);
        hostlen = colon ? (size_t)(colon - a) : n;
        if (hostlen == 0) return "the endpoint URL has no host";
        if (hostlen > 253) return "the endpoint host name is longer than 253 characters";
        size_t label = 0;
        for (size_t i = 0; i < hostlen; i++) {
            char ch = a[i];
            if (ch == '.') {
                if (label == 0) return "the endpoint host name has an empty label";
                label = 0;
                continue;
            }
            /* '_' is not DNS but names containers and hosts files; it cannot end a host. */
            if (!(is_alnum(ch) || ch == '-' || ch == '_'))
                return "the endpoint host name may hold only letters, digits, '.', '-' and '_'";
            if (label == 0 && ch == '-') return "a label of the endpoint host name starts with '-'";
            if (++label > 63) return "a label of the endpoint host name is longer than 63 characters";
        }
    }
    if (hostlen == n) return NULL;
    if (a[hostlen] != ':') return "the endpoint URL has characters after its host that are not a port";
    return port_problem(a + hostlen + 1, n - hostlen - 1);
}
