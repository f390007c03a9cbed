/* Client settings, their resolution from the environment and shared files,
 * and the handle's lifetime. */
#include "client_internal.h"
#include "bytecopy.h"
#include "cpus.h"
#include "endpoint.h"
#include "error.h"
#include "ini.h"
#include "params_internal.h"
#include "names.h"
#include "s3xml.h"
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_init_rc;

static void global_init(void) {
    g_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
    s3x_xml_init();
    const char *plain = getenv("S3X_COPY_PLAIN");
    s3x_bytes_copy_plain = plain && !strcmp(plain, "1");
    const char *cold = getenv("S3X_COPY_COLD");
    s3x_bytes_copy_cold = !(cold && !strcmp(cold, "0"));
}

const char *s3x_version(void) { return S3XFER_VERSION; }

void s3x_free(void *p) { free(p); }

static char *xstrdup(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s);
    char *p = malloc(n + 1);
    if (p) memcpy(p, s, n + 1);
    return p;
}

int s3x_client_new(s3x_client **out) {
    if (!out) return s3x_seterr(S3X_EINVAL, "s3x_client_new: out is NULL");
    *out = NULL;
    pthread_once(&g_once, global_init);
    if (g_init_rc) return s3x_seterr(S3X_EINTERNAL, "libcurl global initialisation failed");
    s3x_client *c = calloc(1, sizeof *c);
    if (!c) return s3x_seterr(S3X_ENOMEM, "out of memory creating a client");
    s3x_params_defaults(c->params);
    c->auto_receive_threads = s3x_auto_receive_threads(s3x_cpus_available());
    pthread_mutex_init(&c->cred_mu, NULL);
    c->multi = curl_multi_init();
    if (!c->multi) {
        pthread_mutex_destroy(&c->cred_mu);
        free(c);
        return s3x_seterr(S3X_ENOMEM, "curl_multi_init failed");
    }
    *out = c;
    return 0;
}

/* Waits for the advisory refresh thread, if one was started. */
static void join_refresh(s3x_client *c) {
    if (!c->cred_thread_live) return;
    pthread_join(c->cred_thread, NULL);
    c->cred_thread_live = 0;
}

static void clear_resolved(s3x_client *c) {
    join_refresh(c);
    char **fields[] = {&c->endpoint, &c->scheme, &c->hostport, &c->region, &c->ca_bundle, &c->vhost};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        s3x_free_secret(*fields[i]);  /* wiped whatever it is: cheap, and keys are among them */
        *fields[i] = NULL;
    }
    pthread_mutex_lock(&c->cred_mu);
    s3x_creds *old = c->creds;
    c->creds = NULL;
    pthread_mutex_unlock(&c->cred_mu);
    s3x_creds_unref(old);
    s3x_cred_source_free(c->cred_src);
    c->cred_src = NULL;
    c->resolved = 0;
    c->endpoint_configured = 0;
    c->profile_style = S3X_STYLE_AUTO;
    c->sign_date[0] = '\0';
    s3x_wipe(c->sign_key, sizeof c->sign_key);
}

int s3x_client_bucket_known(s3x_client *c, const char *bucket) {
    for (size_t i = 0; i < sizeof c->known_buckets / sizeof c->known_buckets[0]; i++)
        if (c->known_buckets[i] && !strcmp(c->known_buckets[i], bucket)) return 1;
    return 0;
}

void s3x_client_bucket_remember(s3x_client *c, const char *bucket) {
    const size_t n = sizeof c->known_buckets / sizeof c->known_buckets[0];
    if (s3x_client_bucket_known(c, bucket)) return;
    char *copy = xstrdup(bucket);
    if (!copy) return;
    free(c->known_buckets[n - 1]);
    memmove(&c->known_buckets[1], &c->known_buckets[0], (n - 1) * sizeof c->known_buckets[0]);
    c->known_buckets[0] = copy;
}

void s3x_client_free(s3x_client *c) {
    if (!c) return;
    s3x_http_loops_stop(c);
    for (size_t i = 0; i < sizeof c->known_buckets / sizeof c->known_buckets[0]; i++) free(c->known_buckets[i]);
    for (size_t i = 0; i < c->nidle; i++) curl_easy_cleanup(c->idle[i]);
    free(c->idle);
    if (c->multi) curl_multi_cleanup(c->multi);
    clear_resolved(c);
    for (int i = 0; i < S3X_CLIENT_OPT__COUNT; i++) s3x_free_secret(c->opt[i]);
    s3x_wipe(c->sign_key, sizeof c->sign_key);
    pthread_mutex_destroy(&c->cred_mu);
    free(c->fbt_carry);
    free(c);
}

static int check_endpoint(const char *v) { return s3x_endpoint_check(v); }

int s3x_client_bucket_addressing(const s3x_client *c, const char *bucket, int *path_style) {
    const char *problem = s3x_bucket_name_problem(bucket);
    if (problem) return s3x_seterr(S3X_EINVAL, "invalid bucket name: %s", problem);
    if (!path_style) return 0;
    int64_t knob = c->params[S3X_PARAM_ADDRESSING_STYLE];
    int dns = s3x_bucket_dns_compatible(bucket);
    int dotted = strchr(bucket, '.') != NULL;
    if (c->vhost) {
        /* S3 Accelerate has no path-style form: it wins over a path-style
         * setting, and botocore refuses the names it cannot host. */
        if (!dns || dotted)
            return s3x_seterr(S3X_EINVAL,
                              "bucket '%s' cannot be used with S3 Accelerate (it needs a name of 3-63 lowercase "
                              "letters, digits and '-', without dots); botocore refuses it too",
                              bucket);
        *path_style = 0;
        return 0;
    }
    if (knob == S3X_ADDRESSING_PATH) {
        *path_style = 1;
        return 0;
    }
    if (knob == S3X_ADDRESSING_VIRTUAL) {
        if (!dns)
            return s3x_seterr(S3X_EINVAL,
                              "bucket '%s' cannot be a host name (virtual-hosted addressing needs 3-63 lowercase "
                              "letters, digits, '.' and '-'); set addressing_style to path or auto",
                              bucket);
        *path_style = 0;
        return 0;
    }
    /* AUTO: botocore's endpoint rules, with the profile's addressing_style. */
    if (c->profile_style == S3X_STYLE_PATH ||
        (c->endpoint_configured && c->profile_style != S3X_STYLE_VIRTUAL) || !c->hostport ||
        s3x_host_is_ip(c->hostport)) {
        *path_style = 1;
        return 0;
    }
    /* A dotted bucket under a TLS wildcard certificate cannot match: path
     * style is the only way it verifies (botocore does the same). */
    *path_style = !(dns && (!dotted || !strcmp(c->scheme, "http")));
    return 0;
}

int s3x_client_set_string(s3x_client *c, s3x_client_opt opt, const char *value) {
    if (!c) return s3x_seterr(S3X_EINVAL, "client is NULL");
    if ((int)opt < 0 || opt >= S3X_CLIENT_OPT__COUNT)
        return s3x_seterr(S3X_EINVAL, "unknown client option %d", (int)opt);
    if (value && opt == S3X_CLIENT_ENDPOINT_URL) {
        int rc = check_endpoint(value);
        if (rc) return rc;
    }
    if (value && opt == S3X_CLIENT_REGION) {
        int rc = s3x_region_check(value, "the client's region option");
        if (rc) return rc;
    }
    char *copy = NULL;
    if (value && !(copy = xstrdup(value))) return s3x_seterr(S3X_ENOMEM, "out of memory");
    s3x_free_secret(c->opt[opt]);
    c->opt[opt] = copy;
    clear_resolved(c);
    return 0;
}

int s3x_client_set(s3x_client *c, s3x_param p, int64_t v) {
    if (!c) return s3x_seterr(S3X_EINVAL, "client is NULL");
    int rc = s3x_param_check(p, v, S3X_SCOPE_CLIENT);
    if (rc) return rc;
    c->params[p] = v;
    if (p == S3X_PARAM_ADDRESSING_STYLE) clear_resolved(c);
    return 0;
}

int s3x_client_get(const s3x_client *c, s3x_param p, int64_t *v) {
    if (!c || !v) return s3x_seterr(S3X_EINVAL, "client or value is NULL");
    const s3x_param_info *pi = s3x_param_info_get(p);
    if (!pi || !(pi->scope & S3X_SCOPE_CLIENT))
        return s3x_seterr(S3X_EINVAL, "knob %s does not apply to the client", pi ? pi->name : "?");
    *v = c->params[p];
    return 0;
}

const char *s3x_client_endpoint(const s3x_client *c) { return c ? c->endpoint : NULL; }
const char *s3x_client_region(const s3x_client *c) { return c ? c->region : NULL; }

int s3x_client_resolve(s3x_client *c) {
    if (!c) return s3x_seterr(S3X_EINVAL, "client is NULL");
    if (c->resolved) return 0;
    int rc;
    clear_resolved(c);
    const char *explicit_profile = c->opt[S3X_CLIENT_PROFILE];
    const char *profile = explicit_profile ? explicit_profile : s3x_env_nonempty("AWS_PROFILE");
    if (!profile) profile = "default";

    const char *ca = c->opt[S3X_CLIENT_CA_BUNDLE];
    if (!ca) ca = s3x_env_nonempty("AWS_CA_BUNDLE");
    if (ca && !(c->ca_bundle = xstrdup(ca))) goto oom;

    /* region and endpoint (endpoint.c) */
    s3x_endpoint_in ein = {.profile = profile, .region_opt = c->opt[S3X_CLIENT_REGION],
                           .endpoint_opt = c->opt[S3X_CLIENT_ENDPOINT_URL], .ca_bundle = c->ca_bundle,
                           .verify_tls = c->params[S3X_PARAM_VERIFY_TLS] != 0};
    s3x_endpoint ep;
    if ((rc = s3x_endpoint_resolve(&ein, &ep))) {
        clear_resolved(c);
        return rc;
    }
    c->region = ep.region;
    c->vhost = ep.accel_host;
    c->endpoint_configured = ep.configured;
    c->profile_style = (int)ep.style;
    ep.region = ep.accel_host = NULL;
    {
        char *url = ep.endpoint;
        ep.endpoint = NULL;
        const char *sep = strstr(url, "://");
        const char *host = sep + 3;
        c->scheme = strndup(url, (size_t)(sep - url));
        size_t hlen = strlen(host);
        /* The Host header omits the scheme's default port. */
        if (!strcmp(c->scheme ? c->scheme : "", "http") && hlen > 3 && !strcmp(host + hlen - 3, ":80")) hlen -= 3;
        if (!strcmp(c->scheme ? c->scheme : "", "https") && hlen > 4 && !strcmp(host + hlen - 4, ":443")) hlen -= 4;
        c->hostport = strndup(host, hlen);
        c->endpoint = url;
        if (!c->scheme || !c->hostport) goto oom;
    }
    s3x_endpoint_clear(&ep);

    /* credentials: the provider chain (creds.c), last, because STS calls
     * use the region and the CA bundle resolved above */
    s3x_cred_settings cs = {
        .access_key = c->opt[S3X_CLIENT_ACCESS_KEY], .secret_key = c->opt[S3X_CLIENT_SECRET_KEY],
        .session_token = c->opt[S3X_CLIENT_SESSION_TOKEN], .profile = explicit_profile, .region = c->region,
        .ca_bundle = c->ca_bundle, .verify_tls = c->params[S3X_PARAM_VERIFY_TLS] != 0,
    };
    s3x_creds *cr = NULL;
    if ((rc = s3x_cred_chain_resolve(&cs, &c->cred_src, &cr))) {
        clear_resolved(c);
        return rc;
    }
    pthread_mutex_lock(&c->cred_mu);
    c->creds = cr;
    pthread_mutex_unlock(&c->cred_mu);
    c->cred_refreshes = 0;
    c->cred_retry_at = 0;
    c->resolved = 1;
    return 0;
oom:
    clear_resolved(c);
    return s3x_seterr(S3X_ENOMEM, "out of memory resolving client settings");
}

int s3x_client_ensure(s3x_client *c) { return c->resolved ? 0 : s3x_client_resolve(c); }

int s3x_client_request_url(s3x_client *c, const char *bucket, const char *key, char **url) {
    if (!url) return s3x_seterr(S3X_EINVAL, "s3x_client_request_url: url is NULL");
    *url = NULL;
    if (!c) return s3x_seterr(S3X_EINVAL, "client is NULL");
    if (key && !bucket) return s3x_seterr(S3X_EINVAL, "a key needs a bucket");
    int rc = s3x_client_ensure(c);
    if (rc) return rc;
    /* The same builder every request goes through (http.c). */
    s3x_http_req r;
    memset(&r, 0, sizeof r);
    r.bucket = bucket;
    r.key = key;
    s3x_buf path = S3X_BUF_INIT, host = S3X_BUF_INIT;
    rc = s3x_http_build_url(c, &r, &path, &host);
    if (!rc) *url = s3x_buf_detach(&r.url);
    else if (rc == S3X_ENOMEM) rc = s3x_seterr(S3X_ENOMEM, "out of memory building a URL");
    s3x_buf_free(&r.url);
    s3x_buf_free(&path);
    s3x_buf_free(&host);
    return rc;
}

/* The early refresh, on a thread of its own so the loop that signs is not
 * held up by an STS, metadata or process call: success swaps the snapshot,
 * failure keeps the current keys and waits a second to try again. */
static void *refresh_main(void *arg) {
    s3x_client *c = arg;
    s3x_creds *fresh = NULL, *old = NULL;
    int rc = s3x_cred_source_fetch(c->cred_src, &fresh);
    pthread_mutex_lock(&c->cred_mu);
    if (!rc) {
        /* Keys that expire no later than the current ones (a provider that
         * hands out the same set until close to its end) are taken, and the
         * next early try waits a second. */
        if (c->creds && fresh->expiry != 0 && fresh->expiry <= c->creds->expiry) c->cred_retry_at = s3x_wall_now() + 1.0;
        old = c->creds;
        c->creds = fresh; /* the fetch's reference becomes the client's */
        c->cred_refreshes++;
    } else {
        c->cred_retry_at = s3x_wall_now() + 1.0;
    }
    c->cred_refreshing = 0;
    pthread_mutex_unlock(&c->cred_mu);
    s3x_creds_unref(old);
    return NULL;
}

int s3x_client_creds_acquire(s3x_client *c, s3x_creds **out) {
    *out = NULL;
    pthread_mutex_lock(&c->cred_mu);
    s3x_creds *cur = s3x_creds_ref(c->creds);
    double retry_at = c->cred_retry_at;
    pthread_mutex_unlock(&c->cred_mu);
    if (!cur) return s3x_seterr(S3X_EINTERNAL, "credentials used before they were resolved");
    if (cur->expiry == 0) {
        *out = cur;
        return 0;
    }
    double now = s3x_wall_now(), advisory, mandatory, left = cur->expiry - now;
    s3x_creds_windows(cur, &advisory, &mandatory);
    /* Ahead of the advisory window by its own width, new keys are fetched
     * on a thread of their own, so the loop that signs is not held up by
     * an STS, metadata or process call; they normally arrive long before
     * the windows below, where signing waits as botocore's does. */
    double ahead = advisory + (advisory - mandatory);
    if (left > advisory && left <= ahead && now >= retry_at) {
        pthread_mutex_lock(&c->cred_mu);
        if (!c->cred_refreshing) {
            if (c->cred_thread_live) pthread_join(c->cred_thread, NULL); /* it ended: it cleared the flag */
            c->cred_refreshing = 1;
            c->cred_thread_live = pthread_create(&c->cred_thread, NULL, refresh_main, c) == 0;
            if (!c->cred_thread_live) c->cred_refreshing = 0;
        }
        pthread_mutex_unlock(&c->cred_mu);
    } else if (left <= advisory && c->cred_thread_live) {
        /* The early refresh is still on its way (or its keys are in): take
         * them rather than fetch a second time. */
        join_refresh(c);
        s3x_creds_unref(cur);
        pthread_mutex_lock(&c->cred_mu);
        cur = s3x_creds_ref(c->creds);
        retry_at = c->cred_retry_at;
        pthread_mutex_unlock(&c->cred_mu);
        if (cur->expiry == 0) {
            *out = cur;
            return 0;
        }
        left = cur->expiry - now;
        s3x_creds_windows(cur, &advisory, &mandatory);
    }
    /* After a failed advisory refresh the next try waits a second (a
     * failing credential_process is not run for every request); inside the
     * mandatory window every request tries. */
    if (left <= mandatory || (left <= advisory && now >= retry_at)) {
        s3x_creds *fresh = NULL;
        int rc = s3x_cred_source_fetch(c->cred_src, &fresh);
        if (!rc) {
            pthread_mutex_lock(&c->cred_mu);
            s3x_creds *old = c->creds;
            c->creds = s3x_creds_ref(fresh);
            c->cred_refreshes++;
            pthread_mutex_unlock(&c->cred_mu);
            s3x_creds_unref(old);
            s3x_creds_unref(cur);
            cur = fresh;
        } else if (left > mandatory) {
            pthread_mutex_lock(&c->cred_mu);
            c->cred_retry_at = now + 1.0;
            pthread_mutex_unlock(&c->cred_mu);
        } else {
            /* botocore: a failed advisory refresh keeps the old keys; a
             * failed mandatory one is an error. */
            char why[512];
            snprintf(why, sizeof why, "%s", s3x_error_last()->message);
            s3x_creds_unref(cur);
            return s3x_seterr(S3X_ECREDENTIALS, "credentials from %s %s and could not be refreshed: %s",
                              s3x_cred_source_name(c->cred_src), left > 0 ? "are about to expire" : "expired", why);
        }
    }
    *out = cur;
    return 0;
}

const char *s3x_client_credentials_source(const s3x_client *c) {
    return c && c->resolved ? s3x_cred_source_name(c->cred_src) : NULL;
}

int64_t s3x_client_credentials_refreshes(const s3x_client *c) { return c ? c->cred_refreshes : 0; }

double s3x_client_credentials_expiry(s3x_client *c) {
    if (!c || !c->resolved) return 0;
    pthread_mutex_lock(&c->cred_mu);
    double e = c->creds ? c->creds->expiry : 0;
    pthread_mutex_unlock(&c->cred_mu);
    return e;
}

void s3x_object_info_clear(s3x_object_info *info) {
    if (!info) return;
    free(info->etag);
    free(info->last_modified);
    free(info->content_type);
    free(info->version_id);
    memset(info, 0, sizeof *info);
}
