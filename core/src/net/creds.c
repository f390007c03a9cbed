/* The credential provider chain (creds.h): botocore's order and rules, in C,
 * so the C API, Python and the CLI resolve credentials alike.
 *
 * Everything a provider reads from the network or a child process is
 * untrusted: bodies are capped (S3X_JSON_MAX_BYTES), parsed strictly
 * (json.c, s3xml.c), and never echoed into messages. Secrets are wiped
 * before they are freed. */
#include "creds.h"
#include "buf.h"
#include "error.h"
#include "ini.h"
#include "json.h"
#include "names.h"
#include "s3xml.h"
#include "s3xfer/s3xfer.h"
#include "sigv4.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* ---- snapshots ---------------------------------------------------------- */

double s3x_wall_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

s3x_creds *s3x_creds_new(const char *ak, const char *sk, const char *tok, double expiry) {
    s3x_creds *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    atomic_init(&c->refs, 1);
    c->access_key = s3x_strndup(ak, strlen(ak));
    c->secret_key = s3x_strndup(sk, strlen(sk));
    c->session_token = tok && *tok ? s3x_strndup(tok, strlen(tok)) : NULL;
    c->expiry = expiry;
    c->fetched = s3x_wall_now();
    if (!c->access_key || !c->secret_key || (tok && *tok && !c->session_token)) {
        s3x_creds_unref(c);
        return NULL;
    }
    return c;
}

s3x_creds *s3x_creds_ref(s3x_creds *c) {
    if (c) atomic_fetch_add(&c->refs, 1);
    return c;
}

void s3x_creds_unref(s3x_creds *c) {
    if (!c || atomic_fetch_sub(&c->refs, 1) != 1) return;
    s3x_free_secret(c->access_key);
    s3x_free_secret(c->secret_key);
    s3x_free_secret(c->session_token);
    s3x_wipe(c, sizeof *c);
    free(c);
}

void s3x_creds_windows(const s3x_creds *c, double *advisory, double *mandatory) {
    double life = c->expiry - c->fetched;
    if (life < 0) life = 0;
    *advisory = life / 2 < 15 * 60 ? life / 2 : 15 * 60;
    *mandatory = life / 4 < 10 * 60 ? life / 4 : 10 * 60;
}

/* ---- the chain's context -------------------------------------------------- */

typedef enum kind {
    K_NONE = 0, K_EXPLICIT, K_ENV, K_ASSUME_ROLE, K_WEB_IDENTITY, K_SHARED_FILE, K_PROCESS, K_CONFIG_FILE,
    K_CONTAINER, K_IMDS, K_SSO
} kind;

static const char *const kind_names[] = {"none", "explicit", "env", "assume-role", "assume-role-with-web-identity",
                                         "shared-credentials-file", "custom-process", "config-file",
                                         "container-role", "iam-role", "sso"};

struct s3x_cred_source {
    kind k;
    int explicit_profile;
    char *access_key, *secret_key, *session_token, *profile, *region, *ca_bundle;
    int verify_tls;
};

/* One resolution: the settings, the two files (loaded once), and the list
 * of providers tried with why each had nothing. */
typedef struct ctx {
    const s3x_cred_source *s;
    s3x_ini *cfg, *cred;
    int loaded;
    s3x_buf tried;
} ctx;

const char *s3x_env_nonempty(const char *name) {
    const char *v = getenv(name);
    return (v && *v) ? v : NULL;
}

static void note(ctx *x, const char *provider, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(ctx *x, const char *provider, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    s3x_buf_printf(&x->tried, "%s%s: ", x->tried.len ? "; " : "", provider);
    s3x_buf_vprintf(&x->tried, fmt, ap);
    va_end(ap);
}

char *s3x_home_path(const char *env, const char *rel) {
    const char *p = s3x_env_nonempty(env);
    if (p) return s3x_strndup(p, strlen(p));
    const char *home = s3x_env_nonempty("HOME");
    if (!home) return NULL;
    s3x_buf b = S3X_BUF_INIT;
    if (s3x_buf_printf(&b, "%s/%s", home, rel)) {
        s3x_buf_free(&b);
        return NULL;
    }
    return s3x_buf_detach(&b);
}

static int load_files(ctx *x) {
    if (x->loaded) return 0;
    x->loaded = 1;
    char *p = s3x_home_path("AWS_CONFIG_FILE", ".aws/config");
    int rc = p ? s3x_ini_load(p, "shared config file", S3X_ECREDENTIALS, &x->cfg) : 0;
    free(p);
    if (rc) return rc;
    p = s3x_home_path("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
    rc = p ? s3x_ini_load(p, "shared credentials file", S3X_ECREDENTIALS, &x->cred) : 0;
    free(p);
    return rc;
}

static const char *profile_name(const ctx *x) {
    if (x->s->profile) return x->s->profile;
    const char *p = s3x_env_nonempty("AWS_PROFILE");
    return p ? p : "default";
}

static const char *cfg_get(const ctx *x, const char *profile, const char *key) {
    return s3x_ini_get(x->cfg, s3x_ini_profile_section(x->cfg, profile), key);
}

/* A profile's setting as botocore merges the files: the credentials file's
 * section over the config file's. */
static const char *prof_get(const ctx *x, const char *profile, const char *key) {
    const char *v = s3x_ini_get(x->cred, profile, key);
    return v ? v : cfg_get(x, profile, key);
}

static int profile_exists(const ctx *x, const char *profile) {
    return s3x_ini_has_section(x->cred, profile) || s3x_ini_profile_section(x->cfg, profile) != NULL;
}

static int has_static_keys(const ctx *x, const char *profile) {
    return prof_get(x, profile, "aws_access_key_id") && prof_get(x, profile, "aws_secret_access_key");
}

static int make(s3x_creds **out, const char *ak, const char *sk, const char *tok, double expiry) {
    *out = s3x_creds_new(ak, sk, tok, expiry);
    return *out ? 1 : s3x_seterr(S3X_ENOMEM, "out of memory storing credentials");
}

/* ---- HTTP for STS, the container endpoint and instance metadata ---------- */

typedef struct http_call {
    const char *method, *url;
    struct curl_slist *headers;
    const char *body;
    size_t body_len;
    long connect_ms, total_ms;
    int no_proxy;
    /* out */
    long status;
    s3x_buf resp;
    int over_cap;
    CURLcode curl_rc;
    char errbuf[CURL_ERROR_SIZE];
} http_call;

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
    http_call *h = ud;
    size_t len = size * n;
    if (h->resp.len + len > S3X_JSON_MAX_BYTES) {
        h->over_cap = 1;
        return 0;
    }
    return s3x_buf_append(&h->resp, p, len) ? 0 : len;
}

/* 0 when a response arrived (any status), else S3X_ECONNECT/ETIMEOUT with
 * a message naming what. */
static int http_run(const ctx *x, http_call *h, const char *what) {
    CURL *e = curl_easy_init();
    if (!e) return s3x_seterr(S3X_ENOMEM, "curl_easy_init failed");
    curl_easy_setopt(e, CURLOPT_URL, h->url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, h->errbuf);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, h->connect_ms);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, h->total_ms);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, h);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_USERAGENT, "s3xfer/" S3XFER_VERSION);
    if (h->no_proxy) curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, x->s->verify_tls ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, x->s->verify_tls ? 2L : 0L);
    if (x->s->ca_bundle) curl_easy_setopt(e, CURLOPT_CAINFO, x->s->ca_bundle);
    if (h->headers) curl_easy_setopt(e, CURLOPT_HTTPHEADER, h->headers);
    if (!strcmp(h->method, "POST")) {
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, h->body ? h->body : "");
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)h->body_len);
    } else if (strcmp(h->method, "GET")) {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, h->method);
    }
    h->curl_rc = curl_easy_perform(e);
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &h->status);
    curl_easy_cleanup(e);
    if (h->over_cap)
        return s3x_seterr(S3X_ECREDENTIALS, "%s: the response is larger than %u bytes, refused", what,
                          (unsigned)S3X_JSON_MAX_BYTES);
    if (h->curl_rc == CURLE_OK) return 0;
    int code = h->curl_rc == CURLE_OPERATION_TIMEDOUT ? S3X_ETIMEOUT : S3X_ECONNECT;
    return s3x_seterr(code, "%s: %s", what, h->errbuf[0] ? h->errbuf : curl_easy_strerror(h->curl_rc));
}

static void http_free(http_call *h) {
    if (h->resp.data) s3x_wipe(h->resp.data, h->resp.len);
    s3x_buf_free(&h->resp);
    /* The lines hold tokens and signatures. */
    for (struct curl_slist *l = h->headers; l; l = l->next) s3x_wipe(l->data, strlen(l->data));
    curl_slist_free_all(h->headers);
    h->headers = NULL;
}

/* Adds "name: value" (value NULL: name is the whole line). */
static int add_header(http_call *h, const char *name, const char *v) {
    s3x_buf b = S3X_BUF_INIT;
    int rc = v ? s3x_buf_printf(&b, "%s: %s", name, v) : s3x_buf_puts(&b, name);
    struct curl_slist *n = rc ? NULL : curl_slist_append(h->headers, b.data);
    if (b.data) s3x_wipe(b.data, b.len);
    s3x_buf_free(&b);
    if (!n) return s3x_seterr(S3X_ENOMEM, "out of memory building a credentials request");
    h->headers = n;
    return 0;
}

/* The credentials in a JSON document (container endpoint, instance
 * metadata, credential_process): names of the keys differ by source. */
static int creds_from_json(const s3x_json *j, const char *what, const char *tok_name, int expiration_required,
                           s3x_creds **out) {
    const char *ak = s3x_json_string(j, "AccessKeyId"), *sk = s3x_json_string(j, "SecretAccessKey");
    const char *tok = s3x_json_string(j, tok_name), *exp = s3x_json_string(j, "Expiration");
    s3x_json_kind k;
    if (!ak || !*ak || !sk || !*sk)
        return s3x_seterr(S3X_ECREDENTIALS, "%s has no AccessKeyId and SecretAccessKey strings", what);
    if (s3x_json_get(j, tok_name, &k) && k != S3X_JSON_STRING && k != S3X_JSON_NULL)
        return s3x_seterr(S3X_ECREDENTIALS, "%s: %s is not a string", what, tok_name);
    double expiry = 0;
    if (exp) {
        if (s3x_parse_iso8601(exp, &expiry))
            return s3x_seterr(S3X_ECREDENTIALS, "%s: Expiration \"%.40s\" is not an ISO 8601 time", what, exp);
    } else if (s3x_json_get(j, "Expiration", &k) && k != S3X_JSON_NULL) {
        return s3x_seterr(S3X_ECREDENTIALS, "%s: Expiration is not a string", what);
    } else if (expiration_required) {
        return s3x_seterr(S3X_ECREDENTIALS, "%s has no Expiration", what);
    }
    if (expiry != 0 && expiry <= s3x_wall_now())
        return s3x_seterr(S3X_ECREDENTIALS, "%s gave credentials that expired already (Expiration %.40s)", what, exp);
    return make(out, ak, sk, tok, expiry);
}

/* ---- STS ----------------------------------------------------------------- */

static int form_add(s3x_buf *b, const char *k, const char *v) {
    int rc = s3x_buf_printf(b, "%s%s=", b->len ? "&" : "", k);
    if (!rc) rc = s3x_uri_encode(b, v, strlen(v), 1);
    return rc;
}

static int sts_endpoint(const ctx *x, s3x_buf *url) {
    const char *ep = s3x_env_nonempty("AWS_ENDPOINT_URL_STS");
    if (!ep) ep = s3x_env_nonempty("AWS_ENDPOINT_URL");
    if (ep) {
        size_t n = strlen(ep);
        while (n && ep[n - 1] == '/') n--;
        return s3x_buf_printf(url, "%.*s/", (int)n, ep);
    }
    const char *region = x->s->region ? x->s->region : "us-east-1";
    const char *suffix = !strncmp(region, "cn-", 3) ? "amazonaws.com.cn" : "amazonaws.com";
    return s3x_buf_printf(url, "https://sts.%s.%s/", region, suffix);
}

/* Calls STS action with the form body; signs with signer when not NULL. */
static int sts_call(const ctx *x, const char *action, const char *body, const s3x_creds *signer, const char *who,
                    s3x_creds **out) {
    http_call h;
    memset(&h, 0, sizeof h);
    s3x_buf url = S3X_BUF_INIT;
    char what[160];
    snprintf(what, sizeof what, "STS %s for %s", action, who);
    int rc = sts_endpoint(x, &url) ? s3x_seterr(S3X_ENOMEM, "out of memory") : 0;
    h.method = "POST";
    h.url = url.data;
    h.body = body;
    h.body_len = strlen(body);
    h.connect_ms = 5000;
    h.total_ms = 30000;
    if (!rc) rc = add_header(&h, "Content-Type: application/x-www-form-urlencoded; charset=utf-8", NULL);
    if (!rc) rc = add_header(&h, "Expect:", NULL);
    if (!rc && signer) {
        const char *auth = strstr(url.data, "://") + 3;
        size_t hl = strcspn(auth, "/");
        char *host = s3x_strndup(auth, hl);
        char date[17], hash[65];
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(date, sizeof date, "%Y%m%dT%H%M%SZ", &tm);
        s3x_sha256_hex(body, h.body_len, hash);
        s3x_kv hdrs[5];
        size_t nh = 0;
        hdrs[nh++] = (s3x_kv){"host", host ? host : ""};
        hdrs[nh++] = (s3x_kv){"x-amz-date", date};
        hdrs[nh++] = (s3x_kv){"x-amz-content-sha256", hash};
        hdrs[nh++] = (s3x_kv){"content-type", "application/x-www-form-urlencoded; charset=utf-8"};
        if (signer->session_token) hdrs[nh++] = (s3x_kv){"x-amz-security-token", signer->session_token};
        s3x_sigv4_input in = {
            .access_key = signer->access_key, .secret_key = signer->secret_key,
            .region = x->s->region ? x->s->region : "us-east-1", .service = "sts", .amz_date = date,
            .method = "POST", .encoded_path = "/", .headers = hdrs, .nheaders = nh, .payload_hash = hash,
        };
        s3x_sigv4_output so;
        memset(&so, 0, sizeof so);
        rc = host ? s3x_sigv4_sign(&in, &so) : s3x_seterr(S3X_ENOMEM, "out of memory");
        if (!rc) rc = add_header(&h, "X-Amz-Date", date);
        if (!rc) rc = add_header(&h, "X-Amz-Content-SHA256", hash);
        if (!rc && signer->session_token) rc = add_header(&h, "X-Amz-Security-Token", signer->session_token);
        if (!rc) rc = add_header(&h, "Authorization", so.authorization.data);
        if (so.authorization.data) s3x_wipe(so.authorization.data, so.authorization.len);
        s3x_sigv4_output_free(&so);
        free(host);
    }
    if (!rc) rc = http_run(x, &h, what);
    s3x_xml_sts sts;
    memset(&sts, 0, sizeof sts);
    if (!rc) {
        rc = s3x_xml_parse_sts(h.resp.data ? h.resp.data : "", h.resp.len, action, &sts);
        if (rc) {
            if (h.status != 200)
                rc = s3x_seterr(S3X_ECREDENTIALS, "%s failed: HTTP %ld with an unreadable body", what, h.status);
            else
                rc = s3x_seterr(S3X_ECREDENTIALS, "%s: %s", what, s3x_error_last()->message);
        } else if (sts.error_code) {
            rc = s3x_seterr_http(S3X_ECREDENTIALS, (int)h.status, sts.error_code, NULL, "%s failed: %s: %.300s",
                                 what, sts.error_code, sts.error_message ? sts.error_message : "");
        } else if (h.status != 200) {
            rc = s3x_seterr(S3X_ECREDENTIALS, "%s failed: HTTP %ld", what, h.status);
        } else {
            double expiry = 0;
            if (s3x_parse_iso8601(sts.expiration, &expiry))
                rc = s3x_seterr(S3X_ECREDENTIALS, "%s: Expiration \"%.40s\" is not an ISO 8601 time", what,
                                sts.expiration);
            else
                rc = make(out, sts.access_key, sts.secret_key, sts.session_token, expiry);
        }
    } else if (rc != S3X_ENOMEM) {
        rc = s3x_seterr(S3X_ECREDENTIALS, "%s", s3x_error_last()->message);
    }
    s3x_xml_sts_free(&sts);
    http_free(&h);
    s3x_buf_free(&url);
    return rc;
}

static void session_name(char out[48]) { snprintf(out, 48, "s3xfer-session-%lld", (long long)time(NULL)); }

/* ---- environment ---------------------------------------------------------- */

static int try_env(ctx *x, s3x_creds **out) {
    const char *ak = s3x_env_nonempty("AWS_ACCESS_KEY_ID"), *sk = s3x_env_nonempty("AWS_SECRET_ACCESS_KEY");
    if (!ak && !sk) {
        note(x, "env", "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set");
        return 0;
    }
    if (!ak || !sk)
        return s3x_seterr(S3X_ECREDENTIALS, "%s is set but %s is not", ak ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
                          ak ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
    const char *tok = s3x_env_nonempty("AWS_SESSION_TOKEN");
    if (!tok) tok = s3x_env_nonempty("AWS_SECURITY_TOKEN");
    return make(out, ak, sk, tok, 0);
}

/* ---- web identity ---------------------------------------------------------- */

static int read_small_file(const char *path, const char *what, size_t cap, char **out) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return s3x_seterr(S3X_ECREDENTIALS, "cannot open %s %s: %s", what, path, strerror(errno));
    s3x_buf b = S3X_BUF_INIT;
    char tmp[4096];
    int rc = 0;
    for (;;) {
        ssize_t n = read(fd, tmp, sizeof tmp);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            rc = s3x_seterr(S3X_ECREDENTIALS, "cannot read %s %s: %s", what, path, strerror(errno));
            break;
        }
        if (n == 0) break;
        if (b.len + (size_t)n > cap) {
            rc = s3x_seterr(S3X_ECREDENTIALS, "%s %s is larger than %zu bytes", what, path, cap);
            break;
        }
        if (s3x_buf_append(&b, tmp, (size_t)n)) {
            rc = s3x_seterr(S3X_ENOMEM, "out of memory reading %s", what);
            break;
        }
    }
    close(fd);
    s3x_wipe(tmp, sizeof tmp);
    if (rc) {
        if (b.data) s3x_wipe(b.data, b.len);
        s3x_buf_free(&b);
        return rc;
    }
    *out = s3x_buf_detach(&b);
    return *out ? 0 : s3x_seterr(S3X_ENOMEM, "out of memory");
}

static int web_identity(ctx *x, const char *token_file, const char *role_arn, const char *session, const char *who,
                        s3x_creds **out) {
    char *token = NULL;
    int rc = read_small_file(token_file, "web identity token file", 64 * 1024, &token);
    if (rc) return rc;
    char gen[48];
    if (!session) {
        session_name(gen);
        session = gen;
    }
    s3x_buf body = S3X_BUF_INIT;
    rc = form_add(&body, "Action", "AssumeRoleWithWebIdentity");
    if (!rc) rc = form_add(&body, "Version", "2011-06-15");
    if (!rc) rc = form_add(&body, "RoleArn", role_arn);
    if (!rc) rc = form_add(&body, "RoleSessionName", session);
    if (!rc) rc = form_add(&body, "WebIdentityToken", token);
    if (rc) rc = s3x_seterr(S3X_ENOMEM, "out of memory");
    else rc = sts_call(x, "AssumeRoleWithWebIdentity", body.data, NULL, who, out);
    if (body.data) s3x_wipe(body.data, body.len);
    s3x_buf_free(&body);
    s3x_free_secret(token);
    return rc < 0 ? rc : 1;
}

static int try_web_identity(ctx *x, s3x_creds **out) {
    const char *profile = profile_name(x);
    const char *file = s3x_env_nonempty("AWS_WEB_IDENTITY_TOKEN_FILE");
    const char *arn = s3x_env_nonempty("AWS_ROLE_ARN");
    const char *sess = s3x_env_nonempty("AWS_ROLE_SESSION_NAME");
    if (!file) file = cfg_get(x, profile, "web_identity_token_file");
    if (!arn) arn = cfg_get(x, profile, "role_arn");
    if (!sess) sess = cfg_get(x, profile, "role_session_name");
    if (!file) {
        note(x, "assume-role-with-web-identity", "AWS_WEB_IDENTITY_TOKEN_FILE is not set");
        return 0;
    }
    if (!arn)
        return s3x_seterr(S3X_ECREDENTIALS, "a web identity token file is set but no role: set AWS_ROLE_ARN");
    return web_identity(x, file, arn, sess, "the web identity token", out);
}

/* ---- credential_process ---------------------------------------------------- */

void s3x_argv_free(char **argv) {
    if (!argv) return;
    for (char **p = argv; *p; p++) free(*p);
    free(argv);
}

int s3x_split_command(const char *cmd, char ***argv_out, const char **why) {
    *argv_out = NULL;
    size_t cap = 8, n = 0;
    char **argv = calloc(cap, sizeof *argv);
    if (!argv) {
        *why = "out of memory";
        return -1;
    }
    const char *p = cmd;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
        if (!*p) break;
        s3x_buf w = S3X_BUF_INIT;
        int bad = 0;
        if (s3x_buf_puts(&w, "")) bad = 1;
        while (!bad && *p && !(*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) {
            if (*p == '\'') {
                const char *e = strchr(p + 1, '\'');
                if (!e) {
                    *why = "unbalanced single quote";
                    bad = 2;
                    break;
                }
                if (s3x_buf_append(&w, p + 1, (size_t)(e - p - 1))) bad = 1;
                p = e + 1;
            } else if (*p == '"') {
                p++;
                while (*p && *p != '"') {
                    if (*p == '\\' && (p[1] == '\\' || p[1] == '"')) p++;
                    if (s3x_buf_append(&w, p, 1)) bad = 1;
                    p++;
                }
                if (!*p) {
                    *why = "unbalanced double quote";
                    bad = 2;
                    break;
                }
                p++;
            } else if (*p == '\\') {
                if (!p[1]) {
                    *why = "a backslash at the end";
                    bad = 2;
                    break;
                }
                if (s3x_buf_append(&w, p + 1, 1)) bad = 1;
                p += 2;
            } else {
                if (s3x_buf_append(&w, p, 1)) bad = 1;
                p++;
            }
        }
        if (!bad && n + 1 >= cap) {
            char **na = realloc(argv, cap * 2 * sizeof *na);
            if (!na) bad = 1;
            else {
                argv = na;
                memset(argv + cap, 0, cap * sizeof *argv);
                cap *= 2;
            }
        }
        if (bad) {
            if (bad == 1) *why = "out of memory";
            s3x_buf_free(&w);
            s3x_argv_free(argv);
            return -1;
        }
        argv[n++] = s3x_buf_detach(&w);
    }
    if (!n) {
        *why = "no program";
        s3x_argv_free(argv);
        return -1;
    }
    *argv_out = argv;
    return 0;
}

/* Printable text of a child's stderr for a message: the last line(s), at
 * most 400 bytes, control characters shown as '?'. */
static void tidy_stderr(s3x_buf *err, char *out, size_t cap) {
    size_t n = err->len;
    while (n && (err->data[n - 1] == '\n' || err->data[n - 1] == '\r' || err->data[n - 1] == ' ')) n--;
    size_t start = n > cap - 1 ? n - (cap - 1) : 0;
    size_t j = 0;
    for (size_t i = start; i < n && j + 1 < cap; i++) {
        unsigned char c = (unsigned char)err->data[i];
        out[j++] = (c < 0x20 || c == 0x7f) ? (c == '\n' ? ' ' : '?') : (char)c;
    }
    out[j] = '\0';
}

static int run_process(const char *cmd, const char *profile, s3x_buf *outb, char *errtext, size_t errcap,
                       int *status) {
    char **argv = NULL;
    const char *why = NULL;
    if (s3x_split_command(cmd, &argv, &why))
        return s3x_seterr(S3X_ECREDENTIALS, "credential_process of profile '%s' cannot be split into words: %s",
                          profile, why);
    int po[2] = {-1, -1}, pe[2] = {-1, -1};
    int rc = 0;
    if (pipe2(po, O_CLOEXEC) || pipe2(pe, O_CLOEXEC)) {
        rc = s3x_seterr(S3X_ECREDENTIALS, "credential_process: pipe failed: %s", strerror(errno));
        goto done_fds;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, po[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
    pid_t pid;
    int serr = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(po[1]);
    close(pe[1]);
    po[1] = pe[1] = -1;
    if (serr) {
        rc = s3x_seterr(S3X_ECREDENTIALS, "credential_process of profile '%s': cannot run '%.200s': %s", profile,
                        argv[0], strerror(serr));
        goto done_fds;
    }
    s3x_buf errb = S3X_BUF_INIT;
    int too_big = 0;
    struct pollfd fds[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
    int open_fds = 2;
    char tmp[4096];
    while (open_fds) {
        int pr = poll(fds, 2, -1);
        if (pr < 0 && errno == EINTR) continue;
        if (pr < 0) break;
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            ssize_t n = read(fds[i].fd, tmp, sizeof tmp);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                fds[i].fd = -1;
                open_fds--;
                continue;
            }
            if (i == 0) {
                if (outb->len + (size_t)n > S3X_JSON_MAX_BYTES) too_big = 1;
                else if (s3x_buf_append(outb, tmp, (size_t)n)) too_big = 1;
            } else if (errb.len < 64 * 1024) {
                s3x_buf_append(&errb, tmp, (size_t)n);
            }
        }
    }
    s3x_wipe(tmp, sizeof tmp);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    *status = st;
    tidy_stderr(&errb, errtext, errcap);
    s3x_buf_free(&errb);
    if (too_big)
        rc = s3x_seterr(S3X_ECREDENTIALS, "credential_process of profile '%s' wrote more than %u bytes, refused",
                        profile, (unsigned)S3X_JSON_MAX_BYTES);
done_fds:
    for (int i = 0; i < 2; i++) {
        if (po[i] >= 0) close(po[i]);
        if (pe[i] >= 0) close(pe[i]);
    }
    s3x_argv_free(argv);
    return rc;
}

static int credential_process(ctx *x, const char *profile, const char *cmd, s3x_creds **out) {
    (void)x;
    s3x_buf ob = S3X_BUF_INIT;
    char errtext[401];
    errtext[0] = '\0';
    int status = 0;
    int rc = run_process(cmd, profile, &ob, errtext, sizeof errtext, &status);
    char what[200];
    snprintf(what, sizeof what, "credential_process output of profile '%s'", profile);
    if (!rc && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        char how[48];
        if (WIFEXITED(status)) snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(status));
        else snprintf(how, sizeof how, "was killed by signal %d", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        rc = s3x_seterr(S3X_ECREDENTIALS, "credential_process of profile '%s' %s%s%s", profile, how,
                        errtext[0] ? "; its stderr: " : " (nothing on stderr)", errtext);
    }
    s3x_json *j = NULL;
    if (!rc) {
        rc = s3x_json_parse(ob.data, ob.len, what, S3X_ECREDENTIALS, &j);
        if (rc && errtext[0]) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", s3x_error_last()->message);
            rc = s3x_seterr(rc, "%s; its stderr: %s", msg, errtext);
        }
    }
    if (!rc) {
        s3x_json_kind k;
        const char *v = s3x_json_get(j, "Version", &k);
        if (!v || k != S3X_JSON_NUMBER || strcmp(v, "1"))
            rc = s3x_seterr(S3X_ECREDENTIALS, "%s: Version must be the number 1 (got %s)", what,
                            !v ? "none" : k == S3X_JSON_NUMBER ? v : "a non-number");
    }
    if (!rc) rc = creds_from_json(j, what, "SessionToken", 0, out);
    s3x_json_free(j);
    if (ob.data) s3x_wipe(ob.data, ob.len);
    s3x_buf_free(&ob);
    return rc < 0 ? rc : 1;
}

static int try_process(ctx *x, s3x_creds **out) {
    const char *profile = profile_name(x);
    const char *cmd = cfg_get(x, profile, "credential_process");
    if (!cmd) {
        note(x, "custom-process", "profile '%s' has no credential_process", profile);
        return 0;
    }
    return credential_process(x, profile, cmd, out);
}

/* ---- container ------------------------------------------------------------- */

static int host_allowed(const char *url, char *host_out, size_t cap) {
    const char *a = strstr(url, "://");
    if (!a || (strncmp(url, "http://", 7) && strncmp(url, "https://", 8))) return 0;
    a += 3;
    size_t n = strcspn(a, "/?#");
    const char *at = memchr(a, '@', n);
    if (at) {
        n -= (size_t)(at + 1 - a);
        a = at + 1;
    }
    size_t hl;
    if (*a == '[') {
        const char *e = memchr(a, ']', n);
        if (!e) return 0;
        a++;
        hl = (size_t)(e - a);
    } else {
        const char *c = memchr(a, ':', n);
        hl = c ? (size_t)(c - a) : n;
    }
    if (hl == 0 || hl >= cap) return 0;
    memcpy(host_out, a, hl);
    host_out[hl] = '\0';
    static const char *const allowed[] = {"localhost", "169.254.170.2", "169.254.170.23", "fd00:ec2::23", "::1"};
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
        if (!strcasecmp(host_out, allowed[i])) return 1;
    /* 127.0.0.0/8 in dotted-quad form (botocore: ipaddress.is_loopback). */
    unsigned b[4];
    char tail;
    if (sscanf(host_out, "%u.%u.%u.%u%c", &b[0], &b[1], &b[2], &b[3], &tail) == 4 && b[0] == 127 && b[1] < 256 &&
        b[2] < 256 && b[3] < 256) {
        for (const char *p = host_out; *p; p++)
            if (!isdigit((unsigned char)*p) && *p != '.') return 0;
        return 1;
    }
    return 0;
}

static int container(ctx *x, s3x_creds **out) {
    const char *rel = s3x_env_nonempty("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
    const char *full = s3x_env_nonempty("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    s3x_buf url = S3X_BUF_INIT;
    int rc = 0;
    if (rel) {
        rc = s3x_buf_printf(&url, "http://169.254.170.2%s%s", rel[0] == '/' ? "" : "/", rel);
    } else {
        char host[256];
        if (!host_allowed(full, host, sizeof host))
            return s3x_seterr(S3X_ECREDENTIALS,
                              "AWS_CONTAINER_CREDENTIALS_FULL_URI must be an http(s) URL whose host is a loopback "
                              "address, localhost, 169.254.170.2, 169.254.170.23 or fd00:ec2::23");
        rc = s3x_buf_puts(&url, full);
    }
    if (rc) return s3x_seterr(S3X_ENOMEM, "out of memory");
    char *token = NULL;
    const char *tfile = s3x_env_nonempty("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
    if (tfile) rc = read_small_file(tfile, "container authorization token file", 16 * 1024, &token);
    else if (s3x_env_nonempty("AWS_CONTAINER_AUTHORIZATION_TOKEN"))
        token = s3x_strndup(getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN"), strlen(getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN")));
    if (!rc && token && strpbrk(token, "\r\n"))
        rc = s3x_seterr(S3X_ECREDENTIALS, "the container authorization token holds a line break (not a legal header value)");
    const char *what = "container credentials endpoint";
    s3x_json *j = NULL;
    for (int attempt = 0; !rc && attempt < 3; attempt++) {
        http_call h;
        memset(&h, 0, sizeof h);
        h.method = "GET";
        h.url = url.data;
        h.connect_ms = 2000;
        h.total_ms = 2000;
        h.no_proxy = 1;
        rc = add_header(&h, "Accept: application/json", NULL);
        if (!rc && token) rc = add_header(&h, "Authorization", token);
        if (!rc) rc = http_run(x, &h, what);
        int again = 0;
        if (rc == S3X_ECONNECT || rc == S3X_ETIMEOUT) again = attempt < 2;
        else if (!rc && h.status >= 500) {
            rc = s3x_seterr(S3X_ECREDENTIALS, "%s answered HTTP %ld", what, h.status);
            again = attempt < 2;
        } else if (!rc && h.status != 200) {
            rc = s3x_seterr(S3X_ECREDENTIALS, "%s answered HTTP %ld", what, h.status);
        } else if (!rc) {
            rc = s3x_json_parse(h.resp.data, h.resp.len, "container credentials response", S3X_ECREDENTIALS, &j);
            if (!rc) rc = creds_from_json(j, "container credentials response", "Token", 0, out);
        }
        http_free(&h);
        if (!again) break;
        rc = 0;
    }
    if (rc == S3X_ECONNECT || rc == S3X_ETIMEOUT)
        rc = s3x_seterr(S3X_ECREDENTIALS, "%s", s3x_error_last()->message);
    s3x_json_free(j);
    s3x_free_secret(token);
    s3x_buf_free(&url);
    return rc < 0 ? rc : 1;
}

static int try_container(ctx *x, s3x_creds **out) {
    if (!s3x_env_nonempty("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") && !s3x_env_nonempty("AWS_CONTAINER_CREDENTIALS_FULL_URI")) {
        note(x, "container-role", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI and _FULL_URI are not set");
        return 0;
    }
    return container(x, out);
}

/* ---- instance metadata (IMDSv2) -------------------------------------------- */

static int imds_get(ctx *x, const char *base, const char *path, const char *token, http_call *h) {
    memset(h, 0, sizeof *h);
    s3x_buf url = S3X_BUF_INIT;
    int rc = s3x_buf_printf(&url, "%s%s", base, path) ? s3x_seterr(S3X_ENOMEM, "out of memory") : 0;
    h->method = "GET";
    h->url = url.data;
    h->connect_ms = 1000;
    h->total_ms = 1000;
    h->no_proxy = 1;
    if (!rc && token) rc = add_header(h, "X-aws-ec2-metadata-token", token);
    for (int attempt = 0; !rc && attempt < 2; attempt++) {
        s3x_buf_clear(&h->resp);
        rc = http_run(x, h, "instance metadata");
        if (!rc && h->status >= 500) rc = S3X_EHTTP;
        if (!rc || attempt == 1) break;
        rc = 0;
    }
    s3x_buf_free(&url);
    return rc;
}

/* The metadata service's base URL (AWS_EC2_METADATA_SERVICE_ENDPOINT for
 * tests, else the link-local address) into base, and how to show it. */
static const char *imds_base(char *base, size_t cap) {
    const char *ep = s3x_env_nonempty("AWS_EC2_METADATA_SERVICE_ENDPOINT");
    snprintf(base, cap, "%s", ep ? ep : "http://169.254.169.254");
    for (size_t n = strlen(base); n && base[n - 1] == '/'; n--) base[n - 1] = '\0';
    /* The endpoint is the user's own setting, but may carry a password. */
    return strchr(base, '@') ? "(the endpoint)" : base;
}

static int imds_disabled(void) {
    const char *dis = getenv("AWS_EC2_METADATA_DISABLED");
    return dis && !strcasecmp(dis, "true");
}

/* The IMDSv2 session token: 1 with *token (malloc'd) or with *token NULL
 * when the service only speaks IMDSv1, 0 when the service is not there or
 * refused (a note for who), <0 out of memory. */
static int imds_token(ctx *x, const char *base, const char *shown, const char *who, int attempts, char **token) {
    *token = NULL;
    http_call h;
    for (int attempt = 0; attempt < attempts; attempt++) {
        memset(&h, 0, sizeof h);
        s3x_buf url = S3X_BUF_INIT;
        if (s3x_buf_printf(&url, "%s/latest/api/token", base)) return s3x_seterr(S3X_ENOMEM, "out of memory");
        h.method = "PUT";
        h.url = url.data;
        h.connect_ms = 1000;
        h.total_ms = 1000;
        h.no_proxy = 1;
        int rc = add_header(&h, "X-aws-ec2-metadata-token-ttl-seconds: 21600", NULL);
        if (!rc) rc = http_run(x, &h, "instance metadata");
        s3x_buf_free(&url);
        if (!rc && h.status == 200 && h.resp.len && h.resp.len < 1024 && !memchr(h.resp.data, '\n', h.resp.len) &&
            !memchr(h.resp.data, '\r', h.resp.len)) {
            *token = s3x_buf_detach(&h.resp);
        }
        int status = rc ? 0 : (int)h.status;
        http_free(&h);
        if (rc == S3X_ENOMEM) return rc;
        if (*token) return 1;
        if (!rc && (status == 403 || status == 404 || status == 405)) return 1; /* IMDSv1 only: go on without */
        if (!rc && status < 500) {
            note(x, who, "the metadata service at %s refused a token (HTTP %d)", shown, status);
            return 0;
        }
        if (attempt == attempts - 1) {
            note(x, who, "no answer from the metadata service at %s (%s; %d attempt%s, 1 s timeouts)", shown,
                 rc ? s3x_error_last()->message : "server error", attempts, attempts > 1 ? "s" : "");
            return 0;
        }
    }
    return 0;
}

/* 1 found, 0 not (with a note), <0 out of memory. Every other failure
 * means "not on EC2" to botocore: a note, and the chain ends there. */
static int imds(ctx *x, s3x_creds **out) {
    if (imds_disabled()) {
        note(x, "iam-role", "AWS_EC2_METADATA_DISABLED is true");
        return 0;
    }
    char base[512];
    const char *shown = imds_base(base, sizeof base);
    char *token = NULL;
    int rc = imds_token(x, base, shown, "iam-role", 2, &token);
    if (rc <= 0) return rc;
    http_call h;
    rc = imds_get(x, base, "/latest/meta-data/iam/security-credentials/", token, &h);
    char role[256] = "";
    if (!rc && h.status == 200 && h.resp.len) {
        size_t n = strcspn(h.resp.data, "\r\n");
        if (n > 0 && n < sizeof role) {
            memcpy(role, h.resp.data, n);
            role[n] = '\0';
        }
    }
    int status = rc ? 0 : (int)h.status;
    http_free(&h);
    int ok = 1;
    for (const char *p = role; *p; p++)
        if (!(isalnum((unsigned char)*p) || strchr("+=,.@_-", *p))) ok = 0;
    if (!role[0] || !ok) {
        if (rc == S3X_ENOMEM) ok = -1;
        note(x, "iam-role", "the metadata service at %s gave no IAM role (%s)", shown,
             rc ? "no answer" : status == 200 ? "not a role name" : status == 404 ? "HTTP 404: no role attached" : "HTTP error");
        s3x_free_secret(token);
        return ok < 0 ? S3X_ENOMEM : 0;
    }
    s3x_buf path = S3X_BUF_INIT;
    rc = s3x_buf_printf(&path, "/latest/meta-data/iam/security-credentials/%s", role);
    if (!rc) rc = imds_get(x, base, path.data, token, &h);
    s3x_buf_free(&path);
    s3x_free_secret(token);
    if (rc || h.status != 200) {
        status = rc ? 0 : (int)h.status;
        http_free(&h);
        note(x, "iam-role", "the metadata service at %s gave no credentials for role %s (%s)", shown, role,
             status ? "HTTP error" : "no answer");
        return 0;
    }
    s3x_json *j = NULL;
    rc = s3x_json_parse(h.resp.data, h.resp.len, "instance metadata credentials", S3X_ECREDENTIALS, &j);
    http_free(&h);
    if (!rc) {
        const char *code = s3x_json_string(j, "Code");
        if (code && strcmp(code, "Success"))
            rc = s3x_seterr(S3X_ECREDENTIALS, "instance metadata credentials: Code is \"%.40s\", not Success", code);
    }
    if (!rc) rc = creds_from_json(j, "instance metadata credentials", "Token", 0, out);
    s3x_json_free(j);
    return rc < 0 ? rc : 1;
}

/* ---- SSO (IAM Identity Center) ----------------------------------------------- */

/* The SSO settings of a profile, as botocore's SSOProvider reads them: the
 * profile's sso_account_id and sso_role_name, and sso_start_url and
 * sso_region from its [sso-session NAME] (sso_session = NAME) or, legacy,
 * from the profile itself. 1 when the profile uses SSO (settings filled), 0
 * when it does not, or a negative code for an incomplete configuration. */
typedef struct sso_cfg {
    const char *account, *role, *start_url, *region, *session;
} sso_cfg;

static int sso_settings(const ctx *x, const char *profile, sso_cfg *c) {
    memset(c, 0, sizeof *c);
    c->account = cfg_get(x, profile, "sso_account_id");
    c->role = cfg_get(x, profile, "sso_role_name");
    if (!c->account && !c->role) return 0;
    c->session = cfg_get(x, profile, "sso_session");
    c->start_url = cfg_get(x, profile, "sso_start_url");
    c->region = cfg_get(x, profile, "sso_region");
    if (c->session) {
        const char *sect = s3x_ini_named_section(x->cfg, "sso-session", c->session);
        if (!sect)
            return s3x_seterr(S3X_ECREDENTIALS, "profile '%s' names sso_session '%.64s', but the config file has no "
                              "[sso-session %.64s] section", profile, c->session, c->session);
        const char *keys[] = {"sso_start_url", "sso_region"};
        const char **dst[] = {&c->start_url, &c->region};
        for (int i = 0; i < 2; i++) {
            const char *v = s3x_ini_get(x->cfg, sect, keys[i]);
            if (v && *dst[i] && strcmp(v, *dst[i]))
                return s3x_seterr(S3X_ECREDENTIALS, "profile '%s': %s differs between the profile and its "
                                  "sso-session '%.64s' (botocore refuses that too)", profile, keys[i], c->session);
            if (v) *dst[i] = v;
        }
    }
    char missing[128] = "";
    const char *names[] = {"sso_role_name", "sso_account_id", "sso_start_url", "sso_region"};
    const char *vals[] = {c->role, c->account, c->start_url, c->region};
    for (int i = 0; i < 4; i++)
        if (!vals[i] || !*vals[i])
            snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%s", missing[0] ? ", " : "",
                     names[i]);
    if (missing[0])
        return s3x_seterr(S3X_ECREDENTIALS, "profile '%s' is configured for SSO but is missing %s", profile, missing);
    return 1;
}

/* botocore's SSO token cache file: ~/.aws/sso/cache/<sha1 hex of the
 * session name, or of the start URL for a legacy profile>.json. */
static char *sso_cache_path(const char *key) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (!EVP_Digest(key, strlen(key), md, &mdlen, EVP_sha1(), NULL) || mdlen != 20) return NULL;
    char hex[41];
    for (unsigned i = 0; i < 20; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
    const char *home = s3x_env_nonempty("HOME");
    if (!home) return NULL;
    s3x_buf b = S3X_BUF_INIT;
    if (s3x_buf_printf(&b, "%s/.aws/sso/cache/%s.json", home, hex)) {
        s3x_buf_free(&b);
        return NULL;
    }
    return s3x_buf_detach(&b);
}

/* The portal's GetRoleCredentials URL: AWS_ENDPOINT_URL_SSO, then
 * AWS_ENDPOINT_URL (botocore's configured endpoints for the sso client), else
 * https://portal.sso.REGION.amazonaws.com. */
static int sso_url(const sso_cfg *c, s3x_buf *url) {
    const char *ep = s3x_env_nonempty("AWS_ENDPOINT_URL_SSO");
    if (!ep) ep = s3x_env_nonempty("AWS_ENDPOINT_URL");
    int rc;
    if (ep) {
        size_t n = strlen(ep);
        while (n && ep[n - 1] == '/') n--;
        rc = s3x_buf_printf(url, "%.*s", (int)n, ep);
    } else {
        const char *suffix = !strncmp(c->region, "cn-", 3) ? "amazonaws.com.cn" : "amazonaws.com";
        rc = s3x_buf_printf(url, "https://portal.sso.%s.%s", c->region, suffix);
    }
    if (!rc) rc = s3x_buf_puts(url, "/federation/credentials?account_id=");
    if (!rc) rc = s3x_uri_encode(url, c->account, strlen(c->account), 1);
    if (!rc) rc = s3x_buf_puts(url, "&role_name=");
    if (!rc) rc = s3x_uri_encode(url, c->role, strlen(c->role), 1);
    return rc;
}

static int sso(ctx *x, const char *profile, s3x_creds **out) {
    sso_cfg c;
    int rc = sso_settings(x, profile, &c);
    if (rc <= 0) {
        if (rc == 0) note(x, "sso", "profile '%s' has no sso_account_id / sso_role_name", profile);
        return rc;
    }
    if (s3x_region_problem(c.region))
        return s3x_seterr(S3X_ECREDENTIALS, "profile '%s': sso_region is not a region name", profile);
    const char *who = c.session ? c.session : c.start_url;
    char *path = sso_cache_path(who);
    if (!path) return s3x_seterr(S3X_ECREDENTIALS, "profile '%s' uses SSO, but HOME is not set to find the token "
                                 "cache", profile);
    /* The token is found by a hash of the session name (or start URL):
     * a missing file means no `aws sso login` was run for it. */
    struct stat st;
    if (stat(path, &st) != 0) {
        rc = s3x_seterr(S3X_ECREDENTIALS, "profile '%s' uses SSO, but there is no cached SSO token for %s '%.80s' "
                        "(%s); run `aws sso login --profile %s`", profile, c.session ? "sso-session" : "start URL",
                        who, path, profile);
        free(path);
        return rc;
    }
    char *text = NULL;
    rc = read_small_file(path, "SSO token cache file", S3X_JSON_MAX_BYTES, &text);
    s3x_json *tok = NULL;
    if (!rc) rc = s3x_json_parse(text, strlen(text), "the SSO token cache file", S3X_ECREDENTIALS, &tok);
    s3x_free_secret(text);
    const char *access = tok ? s3x_json_string(tok, "accessToken") : NULL;
    const char *expires = tok ? s3x_json_string(tok, "expiresAt") : NULL;
    double exp_at = 0;
    if (!rc && (!access || !*access || !expires))
        rc = s3x_seterr(S3X_ECREDENTIALS, "the SSO token cache file %s has no accessToken and expiresAt; run `aws "
                        "sso login --profile %s`", path, profile);
    else if (!rc && s3x_parse_iso8601(expires, &exp_at))
        rc = s3x_seterr(S3X_ECREDENTIALS, "the SSO token cache file %s: expiresAt \"%.40s\" is not an ISO 8601 "
                        "time", path, expires);
    else if (!rc && exp_at <= s3x_wall_now())
        rc = s3x_seterr(S3X_ECREDENTIALS, "the SSO token for profile '%s' expired at %.40s; run `aws sso login "
                        "--profile %s`", profile, expires, profile);
    free(path);
    http_call h;
    memset(&h, 0, sizeof h);
    s3x_buf url = S3X_BUF_INIT;
    if (!rc && sso_url(&c, &url)) rc = s3x_seterr(S3X_ENOMEM, "out of memory");
    if (!rc) {
        h.method = "GET";
        h.url = url.data;
        h.connect_ms = 5000;
        h.total_ms = 30000;
        rc = add_header(&h, "x-amz-sso_bearer_token", access);
    }
    s3x_json_free(tok);
    char what[200];
    snprintf(what, sizeof what, "SSO GetRoleCredentials for profile '%s'", profile);
    if (!rc) rc = http_run(x, &h, what);
    if (!rc && (h.status == 401 || h.status == 403))
        rc = s3x_seterr(S3X_ECREDENTIALS, "%s: the portal refused the cached SSO token (HTTP %ld: expired or "
                        "revoked); run `aws sso login --profile %s`", what, h.status, profile);
    else if (!rc && h.status != 200)
        rc = s3x_seterr(S3X_ECREDENTIALS, "%s failed: HTTP %ld", what, h.status);
    s3x_json *j = NULL;
    if (!rc)
        rc = s3x_json_parse_nested(h.resp.data ? h.resp.data : "", h.resp.len, what, S3X_ECREDENTIALS,
                                   "roleCredentials", &j);
    http_free(&h);
    s3x_buf_free(&url);
    if (!rc) {
        const char *ak = s3x_json_string(j, "accessKeyId"), *sk = s3x_json_string(j, "secretAccessKey");
        const char *st_ = s3x_json_string(j, "sessionToken");
        s3x_json_kind k = 0;
        const char *ms = s3x_json_get(j, "expiration", &k);
        char *end = NULL;
        double e = ms && k == S3X_JSON_NUMBER ? strtod(ms, &end) : 0;
        if (!ak || !*ak || !sk || !*sk || !st_ || !*st_)
            rc = s3x_seterr(S3X_ECREDENTIALS, "%s: the answer has no accessKeyId, secretAccessKey and sessionToken",
                            what);
        else if (!end || *end || e <= 0)
            rc = s3x_seterr(S3X_ECREDENTIALS, "%s: the answer's expiration is not a time in milliseconds", what);
        else if (e / 1000.0 <= s3x_wall_now())
            rc = s3x_seterr(S3X_ECREDENTIALS, "%s gave credentials that expired already", what);
        else
            rc = make(out, ak, sk, st_, e / 1000.0);
    }
    s3x_json_free(j);
    return rc < 0 ? rc : 1;
}

static int try_sso(ctx *x, s3x_creds **out) { return sso(x, profile_name(x), out); }

/* ---- shared files ---------------------------------------------------------- */

static int static_from(ctx *x, const s3x_ini *ini, const char *section, s3x_creds **out) {
    (void)x;
    const char *ak = s3x_ini_get(ini, section, "aws_access_key_id");
    const char *sk = s3x_ini_get(ini, section, "aws_secret_access_key");
    if (!ak || !sk) return 0;
    /* botocore takes the older name first when both are there. */
    const char *tok = s3x_ini_get(ini, section, "aws_security_token");
    if (!tok) tok = s3x_ini_get(ini, section, "aws_session_token");
    return make(out, ak, sk, tok, 0);
}

static int try_shared_file(ctx *x, s3x_creds **out) {
    const char *profile = profile_name(x);
    int rc = static_from(x, x->cred, profile, out);
    if (!rc) note(x, "shared-credentials-file", "no keys for profile '%s'%s", profile, x->cred ? "" : " (no file)");
    return rc;
}

static int try_config_file(ctx *x, s3x_creds **out) {
    const char *profile = profile_name(x);
    int rc = static_from(x, x->cfg, s3x_ini_profile_section(x->cfg, profile), out);
    if (!rc) note(x, "config-file", "no keys for profile '%s'%s", profile, x->cfg ? "" : " (no file)");
    return rc;
}

/* ---- roles ------------------------------------------------------------------ */

#define MAX_ROLE_CHAIN 16

static int assume_role(ctx *x, const char *profile, const char **visited, size_t nvisited, s3x_creds **out);

/* The credentials a source_profile supplies, as botocore resolves them:
 * static keys first, then its web identity or credential_process, then its
 * own role. */
static int source_profile_creds(ctx *x, const char *src, const char **visited, size_t nvisited, s3x_creds **out) {
    if (has_static_keys(x, src)) {
        const char *tok = prof_get(x, src, "aws_security_token");
        if (!tok) tok = prof_get(x, src, "aws_session_token");
        return make(out, prof_get(x, src, "aws_access_key_id"), prof_get(x, src, "aws_secret_access_key"), tok, 0);
    }
    const char *arn = prof_get(x, src, "role_arn");
    const char *wit = cfg_get(x, src, "web_identity_token_file");
    if (arn && (prof_get(x, src, "source_profile") || prof_get(x, src, "credential_source") || !wit))
        return assume_role(x, src, visited, nvisited, out);
    if (wit) {
        if (!arn)
            return s3x_seterr(S3X_ECREDENTIALS, "profile '%s' has web_identity_token_file but no role_arn", src);
        char who[160];
        snprintf(who, sizeof who, "profile '%s'", src);
        return web_identity(x, wit, arn, cfg_get(x, src, "role_session_name"), who, out);
    }
    if (cfg_get(x, src, "sso_account_id") || cfg_get(x, src, "sso_role_name")) return sso(x, src, out);
    const char *proc = cfg_get(x, src, "credential_process");
    if (proc) return credential_process(x, src, proc, out);
    if (!profile_exists(x, src))
        return s3x_seterr(S3X_ECREDENTIALS, "source_profile '%s' (of profile '%s') is not in the config or credentials file",
                          src, visited[nvisited - 1]);
    return s3x_seterr(S3X_ECREDENTIALS, "source_profile '%s' (of profile '%s') has no credentials", src,
                      visited[nvisited - 1]);
}

static int assume_role(ctx *x, const char *profile, const char **visited, size_t nvisited, s3x_creds **out) {
    const char *arn = prof_get(x, profile, "role_arn");
    const char *src = prof_get(x, profile, "source_profile");
    const char *cs = prof_get(x, profile, "credential_source");
    if (prof_get(x, profile, "mfa_serial"))
        return s3x_seterr(S3X_ECREDENTIALS,
                          "profile '%s' needs an MFA code (mfa_serial is set) and s3xfer cannot prompt for one: "
                          "use credentials from a session that has it (for example aws sts get-session-token)",
                          profile);
    if (src && cs)
        return s3x_seterr(S3X_ECREDENTIALS, "profile '%s' has both source_profile and credential_source: give one",
                          profile);
    if (!src && !cs)
        return s3x_seterr(S3X_ECREDENTIALS,
                          "profile '%s' has role_arn but neither source_profile nor credential_source: the role "
                          "has no credentials to be assumed with",
                          profile);
    if (nvisited >= MAX_ROLE_CHAIN)
        return s3x_seterr(S3X_ECREDENTIALS, "profile '%s': the chain of roles is longer than %d profiles", profile,
                          MAX_ROLE_CHAIN);
    visited[nvisited++] = profile;
    const char *dur = prof_get(x, profile, "duration_seconds");
    if (dur) {
        char *end = NULL;
        long v = strtol(dur, &end, 10);
        if (!*dur || *end || v < 900 || v > 43200)
            return s3x_seterr(S3X_ECREDENTIALS, "profile '%s': duration_seconds must be an integer from 900 to 43200",
                              profile);
    }
    s3x_creds *source = NULL;
    int rc;
    if (src) {
        for (size_t i = 0; i < nvisited - 1; i++)
            if (!strcmp(visited[i], src)) {
                s3x_buf chain = S3X_BUF_INIT;
                for (size_t k = 0; k < nvisited; k++) s3x_buf_printf(&chain, "%s -> ", visited[k]);
                s3x_buf_puts(&chain, src);
                rc = s3x_seterr(S3X_ECREDENTIALS, "source_profile loop: %s", chain.data ? chain.data : src);
                s3x_buf_free(&chain);
                return rc;
            }
        if (!strcmp(src, profile)) {
            /* A profile may source itself only for its own static keys. */
            if (!has_static_keys(x, profile))
                return s3x_seterr(S3X_ECREDENTIALS, "source_profile loop: profile '%s' sources itself without keys",
                                  profile);
            const char *tok = prof_get(x, src, "aws_session_token");
            rc = make(&source, prof_get(x, src, "aws_access_key_id"), prof_get(x, src, "aws_secret_access_key"), tok, 0);
        } else {
            rc = source_profile_creds(x, src, visited, nvisited, &source);
        }
    } else if (!strcmp(cs, "Environment")) {
        rc = try_env(x, &source);
        if (rc == 0)
            rc = s3x_seterr(S3X_ECREDENTIALS, "profile '%s': credential_source Environment but %s", profile,
                            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set");
    } else if (!strcmp(cs, "EcsContainer")) {
        if (!s3x_env_nonempty("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") && !s3x_env_nonempty("AWS_CONTAINER_CREDENTIALS_FULL_URI"))
            return s3x_seterr(S3X_ECREDENTIALS, "profile '%s': credential_source EcsContainer but no container "
                              "credentials are configured", profile);
        rc = container(x, &source);
    } else if (!strcmp(cs, "Ec2InstanceMetadata")) {
        rc = imds(x, &source);
        if (rc == 0)
            rc = s3x_seterr(S3X_ECREDENTIALS, "profile '%s': credential_source Ec2InstanceMetadata: %s", profile,
                            x->tried.data ? x->tried.data : "nothing");
    } else {
        return s3x_seterr(S3X_ECREDENTIALS,
                          "profile '%s': credential_source '%.40s' is not one of Environment, Ec2InstanceMetadata, "
                          "EcsContainer",
                          profile, cs);
    }
    if (rc < 0) return rc;
    char sess[48];
    const char *name = prof_get(x, profile, "role_session_name");
    if (!name) {
        session_name(sess);
        name = sess;
    }
    s3x_buf body = S3X_BUF_INIT;
    rc = form_add(&body, "Action", "AssumeRole");
    if (!rc) rc = form_add(&body, "Version", "2011-06-15");
    if (!rc) rc = form_add(&body, "RoleArn", arn);
    if (!rc) rc = form_add(&body, "RoleSessionName", name);
    const char *ext = prof_get(x, profile, "external_id");
    if (!rc && ext) rc = form_add(&body, "ExternalId", ext);
    if (!rc && dur) rc = form_add(&body, "DurationSeconds", dur);
    char who[160];
    snprintf(who, sizeof who, "profile '%s'", profile);
    if (rc) rc = s3x_seterr(S3X_ENOMEM, "out of memory");
    else rc = sts_call(x, "AssumeRole", body.data, source, who, out);
    s3x_buf_free(&body);
    s3x_creds_unref(source);
    return rc < 0 ? rc : 1;
}

static int try_assume_role(ctx *x, s3x_creds **out) {
    const char *profile = profile_name(x);
    if (!prof_get(x, profile, "role_arn")) {
        note(x, "assume-role", "profile '%s' has no role_arn", profile);
        return 0;
    }
    /* A role_arn with only web_identity_token_file belongs to web identity. */
    if (!prof_get(x, profile, "source_profile") && !prof_get(x, profile, "credential_source") &&
        cfg_get(x, profile, "web_identity_token_file")) {
        note(x, "assume-role", "profile '%s' is a web identity profile", profile);
        return 0;
    }
    const char *visited[MAX_ROLE_CHAIN];
    return assume_role(x, profile, visited, 0, out);
}

/* ---- the chain --------------------------------------------------------------- */

typedef int (*provider_fn)(ctx *x, s3x_creds **out);

static int fetch_kind(ctx *x, kind k, s3x_creds **out) {
    switch (k) {
    case K_EXPLICIT: return make(out, x->s->access_key, x->s->secret_key, x->s->session_token, 0);
    case K_ENV: return try_env(x, out);
    case K_ASSUME_ROLE: return try_assume_role(x, out);
    case K_WEB_IDENTITY: return try_web_identity(x, out);
    case K_SHARED_FILE: return try_shared_file(x, out);
    case K_PROCESS: return try_process(x, out);
    case K_CONFIG_FILE: return try_config_file(x, out);
    case K_CONTAINER: return try_container(x, out);
    case K_IMDS: return imds(x, out);
    case K_SSO: return try_sso(x, out);
    default: return 0;
    }
}

static char *dup_or_null(const char *s) { return s ? s3x_strndup(s, strlen(s)) : NULL; }

void s3x_cred_source_free(s3x_cred_source *s) {
    if (!s) return;
    s3x_free_secret(s->access_key);
    s3x_free_secret(s->secret_key);
    s3x_free_secret(s->session_token);
    free(s->profile);
    free(s->region);
    free(s->ca_bundle);
    free(s);
}

const char *s3x_cred_source_name(const s3x_cred_source *s) { return s ? kind_names[s->k] : NULL; }

static int run(s3x_cred_source *s, kind only, s3x_creds **out) {
    ctx x;
    memset(&x, 0, sizeof x);
    x.s = s;
    int rc = 0;
    if (only && only != K_EXPLICIT && only != K_ENV) rc = load_files(&x);
    if (!rc && only) {
        rc = fetch_kind(&x, only, out);
        if (rc == 0)
            rc = s3x_seterr(S3X_ECREDENTIALS, "refreshing credentials from %s: %s", kind_names[only],
                            x.tried.data ? x.tried.data : "nothing found");
    } else if (!rc) {
        static const kind order[] = {K_ENV, K_ASSUME_ROLE, K_WEB_IDENTITY, K_SSO, K_SHARED_FILE, K_PROCESS,
                                     K_CONFIG_FILE, K_CONTAINER, K_IMDS};
        const char *profile = profile_name(&x);
        int named = s->profile || s3x_env_nonempty("AWS_PROFILE");
        for (size_t i = 0; i < sizeof order / sizeof order[0] && !rc; i++) {
            if (order[i] == K_ENV && s->explicit_profile) {
                note(&x, "env", "skipped: a profile was given");
                continue;
            }
            /* The files are read only once the environment had nothing. */
            if (order[i] != K_ENV && (rc = load_files(&x))) break;
            /* A named profile that is in neither file is an error once the
             * chain reaches the profile's providers (botocore: ProfileNotFound). */
            if (order[i] == K_ASSUME_ROLE && named && strcmp(profile, "default") && !profile_exists(&x, profile))
                rc = s3x_seterr(S3X_ECREDENTIALS, "profile '%s' is not in the shared config file nor the shared "
                                "credentials file", profile);
            else
                rc = fetch_kind(&x, order[i], out);
            if (rc > 0) s->k = order[i];
        }
        if (rc == 0)
            rc = s3x_seterr(S3X_ECREDENTIALS, "no credentials found; tried %s",
                            x.tried.data ? x.tried.data : "nothing");
    }
    s3x_buf_free(&x.tried);
    s3x_ini_free(x.cfg);
    s3x_ini_free(x.cred);
    return rc < 0 ? rc : 0;
}

int s3x_cred_chain_resolve(const s3x_cred_settings *st, s3x_cred_source **src, s3x_creds **out) {
    *src = NULL;
    *out = NULL;
    s3x_cred_source *s = calloc(1, sizeof *s);
    if (!s) return s3x_seterr(S3X_ENOMEM, "out of memory");
    s->access_key = dup_or_null(st->access_key);
    s->secret_key = dup_or_null(st->secret_key);
    s->session_token = dup_or_null(st->session_token);
    s->profile = dup_or_null(st->profile);
    s->region = dup_or_null(st->region);
    s->ca_bundle = dup_or_null(st->ca_bundle);
    s->verify_tls = st->verify_tls;
    s->explicit_profile = st->profile != NULL;
    if ((st->access_key && !s->access_key) || (st->secret_key && !s->secret_key) ||
        (st->session_token && !s->session_token) || (st->profile && !s->profile) || (st->region && !s->region) ||
        (st->ca_bundle && !s->ca_bundle)) {
        s3x_cred_source_free(s);
        return s3x_seterr(S3X_ENOMEM, "out of memory");
    }
    int rc;
    if (st->access_key || st->secret_key) {
        if (!st->access_key || !st->secret_key) {
            s3x_cred_source_free(s);
            return s3x_seterr(S3X_ECREDENTIALS, "both an access key and a secret key must be given (only the %s was set)",
                              st->access_key ? "access key" : "secret key");
        }
        s->k = K_EXPLICIT;
        rc = run(s, K_EXPLICIT, out);
    } else {
        rc = run(s, K_NONE, out);
    }
    if (rc) {
        s3x_cred_source_free(s);
        return rc;
    }
    *src = s;
    return 0;
}

int s3x_cred_source_fetch(s3x_cred_source *s, s3x_creds **out) {
    *out = NULL;
    return run(s, s->k, out);
}

int s3x_imds_region(int verify_tls, const char *ca_bundle, char *out, size_t cap) {
    out[0] = '\0';
    if (imds_disabled()) return 0;
    s3x_cred_source src = {.verify_tls = verify_tls, .ca_bundle = (char *)ca_bundle};
    ctx x;
    memset(&x, 0, sizeof x);
    x.s = &src;
    char base[512];
    const char *shown = imds_base(base, sizeof base);
    char *token = NULL;
    /* One attempt: off EC2 the region lookup must not hold up every client
     * that has no region configured for long. */
    int rc = imds_token(&x, base, shown, "region", 1, &token);
    s3x_buf_free(&x.tried);
    if (rc <= 0) return rc;
    http_call h;
    rc = imds_get(&x, base, "/latest/meta-data/placement/region", token, &h);
    s3x_free_secret(token);
    int found = 0;
    if (!rc && h.status == 200 && h.resp.len && h.resp.len < cap) {
        memcpy(out, h.resp.data, h.resp.len);
        out[h.resp.len] = '\0';
        out[strcspn(out, "\r\n")] = '\0';
        found = out[0] != '\0';
    }
    http_free(&h);
    s3x_buf_free(&x.tried);
    if (rc == S3X_ENOMEM) return rc;
    return found;
}
