/* Names that reach a URL: bucket names (relaxed and DNS rules), regions and
 * endpoint authorities; and that a client refuses them before any request:
 * a hostile bucket, region or endpoint never becomes a URL's host. */
#include "client_internal.h"
#include "names.h"
#include "s3xfer/s3xfer.h"
#include "tap.h"
#include <stdlib.h>
#include <string.h>

static void test_bucket_names(void) {
    const char *good[] = {"abc", "my-bucket", "my.bucket.name", "a1b", "Legacy_Bucket", "UPPER",
                          "t-0123456789abcdef0123", "1.2.3.4.5"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        CHECK(s3x_bucket_name_problem(good[i]) == NULL, "bucket '%s' is accepted", good[i]);
    const char *bad[] = {"",          "ab",          "evil.example#", "a/b",         "a?b",     "a#b",
                         "user@host", "host:8080",   "a b",           "a\tb",        "a\rb",    "-abc",
                         "abc-",      ".abc",        "abc.",          "a..b",        "..",      "...",
                         "a%2fb",     "a\\b",        "caf\xc3\xa9",   "a[b]",        "a;b",     "evil.example%23"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(s3x_bucket_name_problem(bad[i]) != NULL, "bucket '%s' is refused", bad[i]);
    CHECK(s3x_bucket_name_problem(NULL) != NULL, "a NULL bucket is refused");
    char longname[300];
    memset(longname, 'a', sizeof longname);
    longname[255] = '\0';
    CHECK(s3x_bucket_name_problem(longname) == NULL, "255 characters are accepted (legacy rules)");
    longname[255] = 'a';
    longname[256] = '\0';
    CHECK(s3x_bucket_name_problem(longname) != NULL, "256 characters are refused");
}

static void test_dns_compatible(void) {
    const char *yes[] = {"abc", "my-bucket", "my.bucket", "a-b.c-d", "123"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        CHECK(s3x_bucket_dns_compatible(yes[i]), "'%s' can be a host label", yes[i]);
    const char *no[] = {"UPPER", "under_score", "ab", "a.-b", "a-.b", "-ab", "ab-", "192.168.1.1", "a..b", ".ab"};
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        CHECK(!s3x_bucket_dns_compatible(no[i]), "'%s' cannot be a host label", no[i]);
    char n64[65];
    memset(n64, 'a', 64);
    n64[64] = '\0';
    CHECK(!s3x_bucket_dns_compatible(n64), "64 characters cannot be a host label");
}

static void test_regions(void) {
    const char *good[] = {"us-east-1", "eu-central-1", "cn-north-1", "us-gov-west-1", "local", "a"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        CHECK(s3x_region_problem(good[i]) == NULL, "region '%s' is accepted", good[i]);
    const char *bad[] = {"",          "localhost:18444#", "a#", "a?b", "a@b", "a/b", "a:1",
                         "US-EAST-1", "-us",              "us-", "us east", "us.east", "r\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(s3x_region_problem(bad[i]) != NULL, "region '%s' is refused", bad[i]);
}

static int auth_ok(const char *a) { return s3x_authority_problem(a, strlen(a)) == NULL; }

static void test_authorities(void) {
    const char *good[] = {"localhost", "127.0.0.1:8333", "s3.us-east-1.amazonaws.com", "[::1]:9000",
                          "minio_1:9000", "host.example.", "[fe80::1]"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) CHECK(auth_ok(good[i]), "authority '%s' accepted", good[i]);
    const char *bad[] = {"",          "user:pw@host", "host:0",   "host:65536", "host:",   "host:80x", "-host",
                         "a..b",      "[::1",         "[]",       "host#x",     "ho st",   "h\rst",    "[::1]x",
                         "host:1:2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) CHECK(!auth_ok(bad[i]), "authority '%s' refused", bad[i]);
}

/* The client refuses what would redirect a request, before any request. */
static void test_client_refuses(void) {
    s3x_client *c = NULL;
    CHECK(s3x_client_new(&c) == 0, "client");
    if (!c) return;
    CHECK(s3x_client_set_string(c, S3X_CLIENT_ENDPOINT_URL, "http://user:hunter2@127.0.0.1:9") == S3X_EINVAL,
          "an endpoint with a password is refused");
    CHECK(strstr(s3x_error_last()->message, "hunter2") == NULL, "and the password is not echoed: %s",
          s3x_error_last()->message);
    CHECK(s3x_client_set_string(c, S3X_CLIENT_ENDPOINT_URL, "http://127.0.0.1:9/path") == S3X_EINVAL,
          "an endpoint with a path is refused");
    CHECK(s3x_client_set_string(c, S3X_CLIENT_ENDPOINT_URL, "http://127.0.0.1:9#frag") == S3X_EINVAL,
          "an endpoint with a fragment is refused");
    CHECK(s3x_client_set_string(c, S3X_CLIENT_ENDPOINT_URL, "http://127.0.0.1:9/") == 0,
          "an endpoint with a trailing slash is fine");
    CHECK(s3x_client_set_string(c, S3X_CLIENT_REGION, "localhost:18444#") == S3X_EINVAL,
          "a region with ':' and '#' is refused");
    CHECK(strstr(s3x_error_last()->message, "region") != NULL, "the message names the region: %s",
          s3x_error_last()->message);

    /* A region from the environment is checked when the client resolves. */
    setenv("AWS_REGION", "localhost:18444#", 1);
    setenv("AWS_ACCESS_KEY_ID", "AK", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "SK", 1);
    s3x_client *e = NULL;
    CHECK(s3x_client_new(&e) == 0, "client");
    if (e) {
        CHECK(s3x_client_resolve(e) == S3X_EINVAL, "AWS_REGION with '#' fails resolution");
        CHECK(strstr(s3x_error_last()->message, "AWS_REGION") != NULL, "the message names AWS_REGION: %s",
              s3x_error_last()->message);
        s3x_client_free(e);
    }
    unsetenv("AWS_REGION");

    /* Virtual-hosted addressing: the bucket is a host label, so a bucket that
     * is not one never reaches the host. */
    CHECK(s3x_client_set_string(c, S3X_CLIENT_ENDPOINT_URL, "https://s3.example.test") == 0, "endpoint");
    CHECK(s3x_client_set(c, S3X_PARAM_ADDRESSING_STYLE, S3X_ADDRESSING_VIRTUAL) == 0, "virtual");
    CHECK(s3x_client_resolve(c) == 0, "resolve");
    int ps = -1;
    CHECK(s3x_client_bucket_addressing(c, "evil.example#", &ps) == S3X_EINVAL, "'evil.example#' is refused");
    CHECK(s3x_client_bucket_addressing(c, "ok-bucket", &ps) == 0 && ps == 0, "a DNS bucket is virtual-hosted");
    CHECK(s3x_client_bucket_addressing(c, "Legacy_Bucket", &ps) == S3X_EINVAL,
          "under explicit virtual addressing a legacy name is refused");
    CHECK(strstr(s3x_error_last()->message, "addressing_style") != NULL, "naming the knob: %s",
          s3x_error_last()->message);
    CHECK(s3x_client_set(c, S3X_PARAM_ADDRESSING_STYLE, S3X_ADDRESSING_AUTO) == 0, "auto");
    CHECK(s3x_client_resolve(c) == 0, "resolve");
    CHECK(s3x_client_bucket_addressing(c, "Legacy_Bucket", &ps) == 0 && ps == 1, "under auto it goes path-style");
    CHECK(s3x_client_bucket_addressing(c, "my.dotted.bucket", &ps) == 0 && ps == 1,
          "a dotted bucket over HTTPS goes path-style under auto");
    CHECK(s3x_client_bucket_addressing(c, "plain", &ps) == 0 && ps == 1,
          "under auto a configured endpoint is addressed path-style (botocore forces it)");
    /* The AWS endpoint (none configured): virtual-hosted when the name can be a host label. */
    CHECK(s3x_client_set_string(c, S3X_CLIENT_ENDPOINT_URL, NULL) == 0, "no endpoint");
    CHECK(s3x_client_set_string(c, S3X_CLIENT_REGION, "eu-west-1") == 0, "region");
    CHECK(s3x_client_resolve(c) == 0, "resolve: %s", s3x_error_last()->message);
    CHECK(s3x_client_bucket_addressing(c, "plain", &ps) == 0 && ps == 0, "a plain one is virtual-hosted");
    CHECK(s3x_client_bucket_addressing(c, "my.dotted.bucket", &ps) == 0 && ps == 1,
          "a dotted bucket over HTTPS goes path-style under auto");
    CHECK(s3x_client_bucket_addressing(c, "Legacy_Bucket", &ps) == 0 && ps == 1, "a legacy name goes path-style");

    /* The URL a request is built into: host = bucket + endpoint only. */
    s3x_http_req r;
    memset(&r, 0, sizeof r);
    r.op = "GetObject";
    r.method = "GET";
    r.bucket = "evil.example#";
    r.key = "k";
    CHECK(s3x_http_prepare(c, &r) == S3X_EINVAL, "preparing a request for a hostile bucket fails");
    CHECK(r.url.data == NULL || strstr(r.url.data, "evil") == NULL, "and no URL holds it");
    s3x_http_req_reset(c, &r);
    s3x_client_free(c);
}

int main(void) {
    /* Region resolution ends at instance metadata: never reach for it here. */
    setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
    unsetenv("AWS_ENDPOINT_URL");
    unsetenv("AWS_ENDPOINT_URL_S3");
    test_bucket_names();
    test_dns_compatible();
    test_regions();
    test_authorities();
    test_client_refuses();
    return tap_summary("test_names");
}
