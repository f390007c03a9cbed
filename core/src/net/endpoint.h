/* Region and endpoint resolution as botocore resolves them for S3 (private;
 * docs/endpoints.md is the user's description and must stay true to this
 * file and endpoint.c). */
#ifndef S3X_ENDPOINT_H
#define S3X_ENDPOINT_H

/* How the profile's s3 section asks buckets to be addressed when the
 * client's own addressing_style knob is AUTO. */
typedef enum s3x_profile_style {
    S3X_STYLE_AUTO = 0,
    S3X_STYLE_PATH = 1,
    S3X_STYLE_VIRTUAL = 2,   /* botocore's "virtual": virtual when the name allows, else path */
} s3x_profile_style;

typedef struct s3x_endpoint_in {
    const char *profile;        /* the effective profile name (never NULL) */
    const char *region_opt;     /* the client's REGION option, or NULL */
    const char *endpoint_opt;   /* the client's ENDPOINT_URL option, or NULL */
    const char *ca_bundle;      /* for instance metadata (plain HTTP; kept for symmetry) */
    int verify_tls;
} s3x_endpoint_in;

typedef struct s3x_endpoint {
    char *region;          /* validated */
    const char *region_src;  /* static text naming where the region came from */
    char *endpoint;        /* scheme://host[:port], validated, no trailing '/' */
    int configured;        /* 1: the endpoint came from an option, the environment or the profile */
    char *accel_host;      /* S3 Accelerate: the host a bucket label is put in front of; else NULL */
    s3x_profile_style style;
} s3x_endpoint;

/* Resolves the region (option, AWS_REGION, AWS_DEFAULT_REGION, the
 * profile's region, instance metadata's placement/region when nothing else
 * is set and it is not disabled, else us-east-1) and the endpoint (option;
 * unless configured endpoints are ignored: AWS_ENDPOINT_URL_S3,
 * AWS_ENDPOINT_URL, the profile's services section, the profile's
 * endpoint_url; else the S3 endpoint of the region's AWS partition with the
 * FIPS, dual-stack, accelerate and us-east-1 global-endpoint settings).
 * 0, or a negative code with the thread's error set (S3X_EINVAL for a bad
 * setting, naming where it came from). *out is cleared first. */
int s3x_endpoint_resolve(const s3x_endpoint_in *in, s3x_endpoint *out);
void s3x_endpoint_clear(s3x_endpoint *e);

/* The DNS suffix of the AWS partition region belongs to ("amazonaws.com",
 * "amazonaws.com.cn", ...), and the partition's id in *partition. */
const char *s3x_partition_suffix(const char *region, const char **partition);

/* An endpoint URL is scheme://host[:port] with at most a trailing '/':
 * 0 or S3X_EINVAL naming what is wrong (the URL is echoed only when it has
 * no '@', which may come with a password). */
int s3x_endpoint_check(const char *url);

/* 1 when the authority host[:port] names an IP address (IPv4 or [IPv6]). */
int s3x_host_is_ip(const char *hostport);

#endif
