/* Region and endpoint resolution (endpoint.h): botocore's order and S3
 * endpoint rules for the settings s3xfer supports, so that a configuration
 * that works with the AWS CLI sends s3xfer's requests to the same host,
 * signed for the same region (tests/python/test_endpoints_oracle.py checks
 * this against botocore itself). */
#include "endpoint.h"
#include "buf.h"
#include "creds.h"
#include "error.h"
#include "ini.h"
#include "names.h"
#include "s3xfer/s3xfer.h"

#include <ctype.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- partitions ------------------------------------------------------------ */

/* botocore's partitions.json: a region belongs to the partition whose regex
 * it matches (the explicit region lists are all matched by the regexes,
 * except the "*-global" pseudo-regions, which are not valid here); one that
 * matches none is treated as aws, as botocore does. */
static const struct {
    const char *id, *regex, *suffix;
} partitions[] = {
    {"aws", "^(us|eu|ap|sa|ca|me|af|il|mx)-[a-z0-9_]+-[0-9]+$", "amazonaws.com"},
    {"aws-cn", "^cn-[a-z0-9_]+-[0-9]+$", "amazonaws.com.cn"},
    {"aws-eusc", "^eusc-(de)-[a-z0-9_]+-[0-9]+$", "amazonaws.eu"},
    {"aws-iso", "^us-iso-[a-z0-9_]+-[0-9]+$", "c2s.ic.gov"},
    {"aws-iso-b", "^us-isob-[a-z0-9_]+-[0-9]+$", "sc2s.sgov.gov"},
    {"aws-iso-e", "^eu-isoe-[a-z0-9_]+-[0-9]+$", "cloud.adc-e.uk"},
    {"aws-iso-f", "^us-isof-[a-z0-9_]+-[0-9]+$", "csp.hci.ic.gov"},
    {"aws-us-gov", "^us-gov-[a-z0-9_]+-[0-9]+$", "amazonaws.com"},
};

const char *s3x_partition_suffix(const char *region, const char **partition) {
    for (size_t i = 0; i < sizeof partitions / sizeof partitions[0]; i++) {
        regex_t re;
        if (regcomp(&re, partitions[i].regex, REG_EXTENDED | REG_NOSUB)) continue;
        int m = regexec(&re, region, 0, NULL, 0) == 0;
        regfree(&re);
        if (m) {
            if (partition) *partition = partitions[i].id;
            return partitions[i].suffix;
        }
    }
    if (partition) *partition = "aws";
    return "amazonaws.com";
}

/* ---- small helpers ----------------------------------------------------------- */

static char *xstrdup(const char *s) { return s ? s3x_strndup(s, strlen(s)) : NULL; }

/* botocore's ensure_boolean: only "true" (any case) is true. */
static int is_true(const char *v) { return v && !strcasecmp(v, "true"); }

int s3x_host_is_ip(const char *hostport) {
    if (hostport[0] == '[') return 1;
    size_t n = strcspn(hostport, ":");
    int dots = 0, digits = 0;
    for (size_t i = 0; i < n; i++) {
        if (hostport[i] == '.') {
            if (!digits) return 0;
            dots++;
            digits = 0;
        } else if (isdigit((unsigned char)hostport[i]) && digits < 3) {
            digits++;
        } else {
            return 0;
        }
    }
    return dots == 3 && digits > 0;
}

int s3x_endpoint_check(const char *v) {
    const char *shown = strchr(v, '@') ? "(not shown: it holds '@')" : v;
    if (strncmp(v, "http://", 7) && strncmp(v, "https://", 8))
        return s3x_seterr(S3X_EINVAL, "endpoint URL %s must start with http:// or https://", shown);
    const char *auth = strstr(v, "://") + 3;
    size_t n = strcspn(auth, "/?#");
    const char *problem = s3x_authority_problem(auth, n);
    if (problem) return s3x_seterr(S3X_EINVAL, "endpoint URL %s: %s", shown, problem);
    for (const char *p = auth + n; *p; p++)
        if (*p != '/')
            return s3x_seterr(S3X_EINVAL, "endpoint URL %s must not have a path, query or fragment", shown);
    return 0;
}

static int check_region(const char *region, const char *source) {
    const char *problem = s3x_region_problem(region);
    if (!problem) return 0;
    int printable = 1;
    for (const char *p = region; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) printable = 0;
    return s3x_seterr(S3X_EINVAL, "region '%s' from %s is not a region name: %s", printable ? region : "?", source,
                      problem);
}

/* The profile's settings: the config file's section for the profile. */
typedef struct prof {
    s3x_ini *ini;
    const char *section;
    const char *name;
    const char *path;
} prof;

static const char *pget(const prof *p, const char *key) { return s3x_ini_get(p->ini, p->section, key); }

/* A sub-setting of the profile's nested setting parent ("s3"): 0 with *out
 * malloc'd or NULL, or S3X_EINVAL for a malformed nested value. */
static int pget_nested(const prof *p, const char *parent, const char *sub, char **out) {
    size_t bad = 0;
    int rc = s3x_ini_nested(pget(p, parent), sub, out, &bad);
    if (rc == -2) return s3x_seterr(S3X_ENOMEM, "out of memory reading the shared config file");
    if (rc)
        return s3x_seterr(S3X_EINVAL,
                          "shared config file %s, profile '%s': line %zu of the nested setting '%s' is not "
                          "'name = value' (botocore refuses it too)",
                          p->path, p->name, bad, parent);
    return 0;
}

/* ---- the endpoint ------------------------------------------------------------ */

/* The configured endpoint, botocore's ConfiguredEndpointProvider order:
 * AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the services section's s3
 * endpoint_url, the profile's endpoint_url; none of them when
 * AWS_IGNORE_CONFIGURED_ENDPOINT_URLS (or the profile's
 * ignore_configured_endpoint_urls) is true. *src names the source. */
static int configured_endpoint(const prof *p, char **out, const char **src) {
    *out = NULL;
    const char *ign = getenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS");
    if (!ign) ign = pget(p, "ignore_configured_endpoint_urls");
    if (is_true(ign)) return 0;
    const char *v;
    if ((v = s3x_env_nonempty("AWS_ENDPOINT_URL_S3"))) {
        *src = "AWS_ENDPOINT_URL_S3";
        return (*out = xstrdup(v)) ? 0 : S3X_ENOMEM;
    }
    if ((v = s3x_env_nonempty("AWS_ENDPOINT_URL"))) {
        *src = "AWS_ENDPOINT_URL";
        return (*out = xstrdup(v)) ? 0 : S3X_ENOMEM;
    }
    const char *svc = pget(p, "services");
    if (svc) {
        const char *sect = s3x_ini_named_section(p->ini, "services", svc);
        if (!sect)
            return s3x_seterr(S3X_EINVAL,
                              "profile '%s' uses the services section '%.64s', but the shared config file %s has "
                              "no [services %.64s] section",
                              p->name, svc, p->path, svc);
        size_t bad = 0;
        int rc = s3x_ini_nested(s3x_ini_get(p->ini, sect, "s3"), "endpoint_url", out, &bad);
        if (rc == -2) return S3X_ENOMEM;
        if (rc)
            return s3x_seterr(S3X_EINVAL, "shared config file %s, [%s]: line %zu of 's3' is not 'name = value'",
                              p->path, sect, bad);
        if (*out && **out) {
            *src = "the s3 endpoint_url of the profile's services section";
            return 0;
        }
        free(*out);
        *out = NULL;
    }
    if ((v = pget(p, "endpoint_url")) && *v) {
        *src = "the profile's endpoint_url";
        return (*out = xstrdup(v)) ? 0 : S3X_ENOMEM;
    }
    return 0;
}

/* The S3 endpoint of the region's partition (botocore's endpoint rules for
 * S3 without a bucket ARN): "https://s3[-fips][.dualstack].REGION.SUFFIX", or
 * "https://s3.amazonaws.com" for us-east-1 under the legacy global setting
 * (botocore's default), and the accelerate host when asked for. */
static int aws_endpoint(const prof *p, s3x_endpoint *e) {
    const char *partition;
    const char *suffix = s3x_partition_suffix(e->region, &partition);
    char *nested = NULL;
    int rc;

    /* FIPS: AWS_USE_FIPS_ENDPOINT, else the profile's use_fips_endpoint. */
    const char *v = getenv("AWS_USE_FIPS_ENDPOINT");
    if (!v) v = pget(p, "use_fips_endpoint");
    int fips = is_true(v);

    /* Dual-stack: the profile's s3 use_dualstack_endpoint when true, else
     * AWS_USE_DUALSTACK_ENDPOINT, else the profile's use_dualstack_endpoint. */
    if ((rc = pget_nested(p, "s3", "use_dualstack_endpoint", &nested))) return rc;
    int dualstack = is_true(nested);
    free(nested);
    nested = NULL;
    if (!dualstack) {
        v = getenv("AWS_USE_DUALSTACK_ENDPOINT");
        if (!v) v = pget(p, "use_dualstack_endpoint");
        dualstack = is_true(v);
    }

    if ((rc = pget_nested(p, "s3", "use_accelerate_endpoint", &nested))) return rc;
    int accelerate = is_true(nested);
    free(nested);
    nested = NULL;

    /* us-east-1: botocore's default ("legacy") is the global endpoint. */
    const char *r1src = "AWS_S3_US_EAST_1_REGIONAL_ENDPOINT";
    v = getenv("AWS_S3_US_EAST_1_REGIONAL_ENDPOINT");
    if (!v && (v = pget(p, "s3_us_east_1_regional_endpoint"))) r1src = "the profile's s3_us_east_1_regional_endpoint";
    if (!v) {
        if ((rc = pget_nested(p, "s3", "us_east_1_regional_endpoint", &nested))) return rc;
        v = nested;
        r1src = "the profile's s3 us_east_1_regional_endpoint";
    }
    int global = 1;
    if (v && !strcmp(v, "regional")) global = 0;
    else if (v && strcmp(v, "legacy")) {
        rc = s3x_seterr(S3X_EINVAL, "us-east-1 regional endpoint setting '%.32s' from %s is not legacy or regional",
                        v, r1src);
        free(nested);
        return rc;
    }
    free(nested);

    if (fips && !strcmp(partition, "aws-cn"))
        return s3x_seterr(S3X_EINVAL, "region %s (partition aws-cn) has no S3 FIPS endpoint; unset "
                          "AWS_USE_FIPS_ENDPOINT / use_fips_endpoint (botocore refuses it too)", e->region);
    if (accelerate && fips)
        return s3x_seterr(S3X_EINVAL, "S3 Accelerate cannot be used with FIPS endpoints (botocore refuses it too)");
    if (accelerate && !strcmp(partition, "aws-cn"))
        return s3x_seterr(S3X_EINVAL, "S3 Accelerate cannot be used in region %s (botocore refuses it too)",
                          e->region);

    s3x_buf b = S3X_BUF_INIT;
    if (fips || dualstack || !global || strcmp(e->region, "us-east-1"))
        rc = s3x_buf_printf(&b, "https://s3%s%s.%s.%s", fips ? "-fips" : "", dualstack ? ".dualstack" : "",
                            e->region, suffix);
    else
        rc = s3x_buf_puts(&b, "https://s3.amazonaws.com");
    if (!rc && accelerate) {
        s3x_buf a = S3X_BUF_INIT;
        rc = s3x_buf_printf(&a, "s3-accelerate%s.%s", dualstack ? ".dualstack" : "", suffix);
        e->accel_host = rc ? NULL : s3x_buf_detach(&a);
        s3x_buf_free(&a);
    }
    if (rc) {
        s3x_buf_free(&b);
        return S3X_ENOMEM;
    }
    e->endpoint = s3x_buf_detach(&b);
    return 0;
}

void s3x_endpoint_clear(s3x_endpoint *e) {
    free(e->region);
    free(e->endpoint);
    free(e->accel_host);
    memset(e, 0, sizeof *e);
}

int s3x_endpoint_resolve(const s3x_endpoint_in *in, s3x_endpoint *e) {
    memset(e, 0, sizeof *e);
    prof p = {.name = in->profile};
    char *path = s3x_home_path("AWS_CONFIG_FILE", ".aws/config");
    p.path = path ? path : "(none)";
    int rc = path ? s3x_ini_load(path, "shared config file", S3X_EINVAL, &p.ini) : 0;
    if (rc) goto out;
    p.section = s3x_ini_profile_section(p.ini, in->profile);

    /* region */
    const char *region = in->region_opt, *src = "the client's region option";
    if (!region && (region = s3x_env_nonempty("AWS_REGION"))) src = "AWS_REGION";
    if (!region && (region = s3x_env_nonempty("AWS_DEFAULT_REGION"))) src = "AWS_DEFAULT_REGION";
    if (!region) {
        const char *r = pget(&p, "region");
        if (r && *r) {
            region = r;
            src = "the profile's region in the shared config file";
        }
    }
    char imds_region[65];
    if (!region) {
        int found = s3x_imds_region(in->verify_tls, in->ca_bundle, imds_region, sizeof imds_region);
        if (found < 0) {
            rc = found;
            goto out;
        }
        if (found) {
            region = imds_region;
            src = "instance metadata (placement/region)";
        }
    }
    if (!region) {
        region = "us-east-1";
        src = "the default";
    }
    if ((rc = check_region(region, src))) goto out;
    e->region_src = src;
    if (!(e->region = xstrdup(region))) goto oom;

    /* addressing style from the profile's s3 section */
    char *style = NULL;
    if ((rc = pget_nested(&p, "s3", "addressing_style", &style))) goto out;
    if (style) {
        if (!strcmp(style, "path")) e->style = S3X_STYLE_PATH;
        else if (!strcmp(style, "virtual")) e->style = S3X_STYLE_VIRTUAL;
        else if (strcmp(style, "auto")) {
            rc = s3x_seterr(S3X_EINVAL, "profile '%s': s3 addressing_style '%.32s' is not auto, path or virtual",
                            in->profile, style);
            free(style);
            goto out;
        }
        free(style);
    }

    /* endpoint */
    const char *esrc = "the client's endpoint_url option";
    char *conf = NULL;
    if (in->endpoint_opt) {
        conf = xstrdup(in->endpoint_opt);
        if (!conf) goto oom;
    } else if ((rc = configured_endpoint(&p, &conf, &esrc))) {
        if (rc == S3X_ENOMEM) goto oom;
        goto out;
    }
    if (conf) {
        e->configured = 1;
        if ((rc = s3x_endpoint_check(conf))) {
            free(conf);
            goto out;
        }
        char *nested = NULL;
        if ((rc = pget_nested(&p, "s3", "use_accelerate_endpoint", &nested))) {
            free(conf);
            goto out;
        }
        int accel = is_true(nested);
        free(nested);
        if (accel) {
            free(conf);
            rc = s3x_seterr(S3X_EINVAL, "the endpoint from %s cannot be combined with S3 Accelerate (the "
                            "profile's s3 use_accelerate_endpoint); botocore refuses it too", esrc);
            goto out;
        }
        size_t n = strlen(conf);
        while (n && conf[n - 1] == '/') conf[--n] = '\0';
        e->endpoint = conf;
    } else if ((rc = aws_endpoint(&p, e))) {
        if (rc == S3X_ENOMEM) goto oom;
        goto out;
    }
    rc = 0;
    goto out;
oom:
    rc = s3x_seterr(S3X_ENOMEM, "out of memory resolving the endpoint");
out:
    if (rc) s3x_endpoint_clear(e);
    s3x_ini_free(p.ini);
    free(path);
    return rc;
}
