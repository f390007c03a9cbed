/* Region and endpoint resolution (net/endpoint.c): partitions, the order of
 * the sources, and that no setting from a file or the environment can put
 * anything but a checked host in a URL. botocore itself is the oracle in
 * tests/python/test_endpoints_oracle.py; these are the C-level checks. */
#include "client_internal.h"
#include "endpoint.h"
#include "error.h"
#include "s3xfer/s3xfer.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


static char g_config[256];

static const char *last_msg(void) { return s3x_error_last()->message; }

static void write_config(const char *text) {
    FILE *f = fopen(g_config, "w");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void clear_env(void) {
    const char *vars[] = {"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3",
                          "AWS_PROFILE", "AWS_USE_FIPS_ENDPOINT", "AWS_USE_DUALSTACK_ENDPOINT",
                          "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "AWS_S3_US_EAST_1_REGIONAL_ENDPOINT",
                          "AWS_EC2_METADATA_SERVICE_ENDPOINT"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
    setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
    setenv("AWS_CONFIG_FILE", g_config, 1);
    write_config("");
}

/* The URL of bucket/key on a fresh client (explicit keys: no chain), or
 * NULL with *rc set. */
static char *url_of(const char *bucket, const char *key, int *rc) {
    s3x_client *c = NULL;
    s3x_client_new(&c);
    s3x_client_set_string(c, S3X_CLIENT_ACCESS_KEY, "AK");
    s3x_client_set_string(c, S3X_CLIENT_SECRET_KEY, "SK");
    char *url = NULL;
    *rc = s3x_client_request_url(c, bucket, key, &url);
    s3x_client_free(c);
    return url;
}

static int url_is(const char *bucket, const char *want) {
    int rc;
    char *got = url_of(bucket, "k", &rc);
    int ok = got && !strcmp(got, want);
    if (!ok) printf("  (got %s, rc %d: %s)\n", got ? got : "nothing", rc, rc ? last_msg() : "");
    s3x_free(got);
    return ok;
}

static void test_partitions(void) {
    const char *p;
    CHECK(!strcmp(s3x_partition_suffix("eu-west-1", &p), "amazonaws.com") && !strcmp(p, "aws"), "aws");
    CHECK(!strcmp(s3x_partition_suffix("cn-northwest-1", &p), "amazonaws.com.cn") && !strcmp(p, "aws-cn"), "aws-cn");
    CHECK(!strcmp(s3x_partition_suffix("us-gov-west-1", &p), "amazonaws.com") && !strcmp(p, "aws-us-gov"),
          "aws-us-gov");
    CHECK(!strcmp(s3x_partition_suffix("us-iso-east-1", &p), "c2s.ic.gov"), "aws-iso");
    CHECK(!strcmp(s3x_partition_suffix("us-isob-east-1", &p), "sc2s.sgov.gov"), "aws-iso-b");
    CHECK(!strcmp(s3x_partition_suffix("eu-isoe-west-1", &p), "cloud.adc-e.uk"), "aws-iso-e");
    CHECK(!strcmp(s3x_partition_suffix("us-isof-south-1", &p), "csp.hci.ic.gov"), "aws-iso-f");
    CHECK(!strcmp(s3x_partition_suffix("eusc-de-east-1", &p), "amazonaws.eu"), "aws-eusc");
    CHECK(!strcmp(s3x_partition_suffix("mars-1", &p), "amazonaws.com") && !strcmp(p, "aws"),
          "an unknown shape is aws, as in botocore");
    CHECK(s3x_host_is_ip("10.0.0.1:9000") && s3x_host_is_ip("[::1]:1") && s3x_host_is_ip("1.2.3.4"), "IPs");
    CHECK(!s3x_host_is_ip("localhost:9000") && !s3x_host_is_ip("1.2.3") && !s3x_host_is_ip("1.2.3.4.5") &&
              !s3x_host_is_ip("1234.1.1.1") && !s3x_host_is_ip("s3.amazonaws.com"), "not IPs");
}

static void test_order(void) {
    clear_env();
    CHECK(url_is("bkt", "https://bkt.s3.amazonaws.com/k"), "nothing set: us-east-1, the global endpoint");
    write_config("[default]\nregion = eu-west-3\n[profile p]\nregion = ap-south-1\nendpoint_url = http://p.example\n");
    CHECK(url_is("bkt", "https://bkt.s3.eu-west-3.amazonaws.com/k"), "the default profile's region");
    setenv("AWS_PROFILE", "p", 1);
    CHECK(url_is("bkt", "http://p.example/bkt/k"), "the named profile's endpoint_url, path-style");
    setenv("AWS_DEFAULT_REGION", "eu-north-1", 1);
    setenv("AWS_ENDPOINT_URL", "https://g.example/", 1);
    CHECK(url_is("bkt", "https://g.example/bkt/k"), "AWS_ENDPOINT_URL over the profile (trailing '/' dropped)");
    setenv("AWS_ENDPOINT_URL_S3", "https://s.example:8443", 1);
    CHECK(url_is("bkt", "https://s.example:8443/bkt/k"), "AWS_ENDPOINT_URL_S3 over AWS_ENDPOINT_URL");
    setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "True", 1);
    CHECK(url_is("bkt", "https://bkt.s3.eu-north-1.amazonaws.com/k"), "ignored: the AWS endpoint of the env region");
    setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "yes", 1);
    CHECK(url_is("bkt", "https://s.example:8443/bkt/k"), "only 'true' is true");
    setenv("AWS_REGION", "sa-east-1", 1);
    s3x_client *c = NULL;
    s3x_client_new(&c);
    s3x_client_set_string(c, S3X_CLIENT_ACCESS_KEY, "AK");
    s3x_client_set_string(c, S3X_CLIENT_SECRET_KEY, "SK");
    CHECK(s3x_client_resolve(c) == 0 && !strcmp(s3x_client_region(c), "sa-east-1"), "AWS_REGION first");
    s3x_client_set_string(c, S3X_CLIENT_REGION, "ca-central-1");
    s3x_client_set_string(c, S3X_CLIENT_ENDPOINT_URL, "http://10.0.0.1:9000");
    char *url = NULL;
    CHECK(s3x_client_request_url(c, "bkt", NULL, &url) == 0 && !strcmp(url, "http://10.0.0.1:9000/bkt") &&
              !strcmp(s3x_client_region(c), "ca-central-1"), "the client's own settings first: %s",
          url ? url : last_msg());
    s3x_free(url);
    url = NULL;
    CHECK(s3x_client_request_url(c, NULL, NULL, &url) == 0 && !strcmp(url, "http://10.0.0.1:9000/"),
          "no bucket: the endpoint");
    s3x_free(url);
    s3x_client_free(c);
}

static void test_refusals(void) {
    int rc;
    char *u;
    clear_env();
    /* A configured endpoint from any source is checked: no user information
     * (never echoed), no path. */
    write_config("[default]\nendpoint_url = http://user:hunter2@evil.example\n");
    u = url_of("bkt", "k", &rc);
    CHECK(!u && rc == S3X_EINVAL && !strstr(last_msg(), "hunter2"), "profile endpoint with a password: %s",
          last_msg());
    write_config("[default]\nservices = s\n[services s]\ns3 =\n  endpoint_url = http://evil.example/x#\n");
    u = url_of("bkt", "k", &rc);
    CHECK(!u && rc == S3X_EINVAL && strstr(last_msg(), "path"), "services endpoint with a path: %s", last_msg());
    write_config("[default]\nservices = s\n[services s]\ns3 =\n  endpoint_url\n");
    u = url_of("bkt", "k", &rc);
    CHECK(!u && rc == S3X_EINVAL && strstr(last_msg(), "name = value"), "a nested line without '=': %s",
          last_msg());
    write_config("[default]\ns3 =\n  addressing_style = sideways\n");
    u = url_of("bkt", "k", &rc);
    CHECK(!u && rc == S3X_EINVAL && strstr(last_msg(), "sideways"), "a bad addressing_style: %s", last_msg());
    write_config("[default]\nregion = evil.example#\n");
    u = url_of("bkt", "k", &rc);
    CHECK(!u && rc == S3X_EINVAL && strstr(last_msg(), "config file"), "a hostile profile region: %s", last_msg());
    write_config("[default]\nregion = cn-north-1\nuse_fips_endpoint = true\n");
    u = url_of("bkt", "k", &rc);
    CHECK(!u && rc == S3X_EINVAL && strstr(last_msg(), "FIPS"), "FIPS in aws-cn: %s", last_msg());
    write_config("[default]\nregion = eu-west-1\ns3 =\n  use_accelerate_endpoint = true\n");
    CHECK(url_is("bkt", "https://bkt.s3-accelerate.amazonaws.com/k"), "accelerate");
    u = url_of("Bkt", "k", &rc);
    CHECK(!u && rc == S3X_EINVAL && strstr(last_msg(), "Accelerate"), "accelerate refuses 'Bkt': %s", last_msg());
    write_config("[default]\nregion = us-east-1\ns3_us_east_1_regional_endpoint = sometimes\n");
    u = url_of("bkt", "k", &rc);
    CHECK(!u && rc == S3X_EINVAL && strstr(last_msg(), "sometimes"), "a bad us-east-1 setting: %s", last_msg());
    clear_env();
}

int main(void) {
    snprintf(g_config, sizeof g_config, "%s/s3x-test-endpoint-%d.ini", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    test_partitions();
    test_order();
    test_refusals();
    unlink(g_config);
    return tap_summary("test_endpoint");
}
