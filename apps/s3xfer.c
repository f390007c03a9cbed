/* s3xfer: the command-line tool. Uses the public C API only. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "s3xfer/s3xfer.h"

static const char *g_prog = "s3xfer";

/* The transfer running now, for the signal handler: Ctrl-C (or SIGTERM)
 * cancels it, which aborts a multipart upload / removes a temporary file
 * before the program exits. */
static s3x_upload *volatile g_upload;
static s3x_download *volatile g_download;
static volatile sig_atomic_t g_signalled;

static void on_signal(int sig) {
    g_signalled = sig;
    if (g_upload) s3x_upload_cancel(g_upload);
    if (g_download) s3x_download_cancel(g_download);
}

static void catch_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: %s [global options] COMMAND ARGS\n"
            "\n"
            "commands:\n"
            "  cp SRC DST          copy a local file (or - for stdin/stdout) to or from s3://bucket/key\n"
            "  ls s3://bucket[/prefix]   list objects\n"
            "  mb s3://bucket      make a bucket\n"
            "  rb s3://bucket      remove an empty bucket\n"
            "  rm s3://bucket/key  remove an object\n"
            "\n"
            "global options:\n"
            "  --endpoint-url URL  S3 endpoint (default: AWS_ENDPOINT_URL, else AWS)\n"
            "  --region REGION     signing region (default: AWS_REGION, else us-east-1)\n"
            "  --profile NAME      shared-credentials profile\n"
            "  --ca-bundle PATH    CA certificates for https endpoints\n"
            "  --no-verify-ssl     do not verify TLS certificates\n"
            "  --addressing-style auto|path|virtual\n"
            "  --unsigned-payload  sign requests with UNSIGNED-PAYLOAD (no SHA-256 of bodies)\n"
            "\n"
            "transfer options (cp):\n"
            "  --part-size SIZE            part / range size, e.g. 8MiB (5MiB .. 5GiB)\n"
            "  --concurrency N             requests in flight\n"
            "  --buffer-strategy auto|buffered|unbuffered   how upload parts are read\n"
            "  --pool bounded|cache|malloc part-buffer pool\n"
            "  --checksum none|crc32c|crc32|sha256|md5      per-part upload checksum\n"
            "  --checksum-location auto|header|trailer       where it travels (trailer: computed while sending)\n"
            "  --memory-limit SIZE         bytes of part buffers a transfer may hold\n"
            "  --multipart-threshold SIZE  uploads below this use one PutObject\n"
            "  --size-hint SIZE            expected size of stdin (sizes its parts)\n"
            "  --max-attempts N            attempts per request\n"
            "  --slow-part-timeout off|dynamic|MS   first-byte timeout for parts\n"
            "  --progress / --no-progress  progress bar (default: when stderr is a terminal)\n"
            "  -q, --quiet         print nothing on success\n"
            "  -h, --help          this help\n"
            "  --version           print the version\n",
            g_prog);
}

static int fail(const char *what) {
    const s3x_error *e = s3x_error_last();
    const char *msg = (e->message && *e->message) ? e->message : s3x_strerror(e->code);
    fprintf(stderr, "%s: %s: %s\n", g_prog, what, msg);
    return 1;
}

static int usage_error(const char *msg) {
    fprintf(stderr, "%s: %s (see %s --help)\n", g_prog, msg, g_prog);
    return 2;
}

typedef struct s3url {
    char *bucket;
    char *key; /* may be "" */
} s3url;

static int parse_s3(const char *s, s3url *u) {
    if (strncmp(s, "s3://", 5) != 0) return 0;
    const char *b = s + 5;
    const char *slash = strchr(b, '/');
    size_t blen = slash ? (size_t)(slash - b) : strlen(b);
    u->bucket = strndup(b, blen);
    u->key = strdup(slash ? slash + 1 : "");
    return 1;
}

static void s3url_free(s3url *u) {
    free(u->bucket);
    free(u->key);
}

/* ---- cp ----------------------------------------------------------------------- */

typedef struct knobs {
    int64_t v[S3X_PARAM__COUNT];
    int set[S3X_PARAM__COUNT];
    int progress; /* -1 auto (a terminal), 0 off, 1 on */
} knobs;

typedef struct bar {
    int64_t last_done;
    double t0, last_draw;
    int drawn;
} bar;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void human(char *out, size_t n, double v) {
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (v >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    snprintf(out, n, i ? "%.1f %s" : "%.0f %s", v, u[i]);
}

static int draw_bar(int64_t done, int64_t total, void *payload) {
    bar *b = payload;
    double t = now_s();
    if (done != total && t - b->last_draw < 0.2) return 0;
    b->last_draw = t;
    char d[32], tot[32], rate[32];
    human(d, sizeof d, (double)done);
    human(tot, sizeof tot, (double)(total < 0 ? 0 : total));
    human(rate, sizeof rate, t > b->t0 ? (double)done / (t - b->t0) : 0);
    if (total > 0) {
        int width = 30, fill = (int)((double)width * (double)done / (double)total);
        char line[64];
        for (int i = 0; i < width; i++) line[i] = i < fill ? '#' : '.';
        line[width] = '\0';
        fprintf(stderr, "\r[%s] %5.1f%% %s / %s  %s/s   ", line, 100.0 * (double)done / (double)total, d, tot, rate);
    } else {
        fprintf(stderr, "\r%s  %s/s   ", d, rate);
    }
    b->drawn = 1;
    return 0;
}

static void end_bar(bar *b) {
    if (b->drawn) fputc('\n', stderr);
}

static int apply_upload(s3x_upload *u, const knobs *k) {
    for (int i = 0; i < S3X_PARAM__COUNT; i++)
        if (k->set[i] && i != S3X_PARAM_VALIDATE_CHECKSUM && s3x_upload_set(u, (s3x_param)i, k->v[i])) return -1;
    return 0;
}

static int apply_download(s3x_download *d, const knobs *k) {
    for (int i = 0; i < S3X_PARAM__COUNT; i++) {
        if (!k->set[i]) continue;
        if (i == S3X_PARAM_BUFFER_STRATEGY || i == S3X_PARAM_CHECKSUM || i == S3X_PARAM_MULTIPART_THRESHOLD ||
            i == S3X_PARAM_LEAVE_PARTS_ON_ERROR || i == S3X_PARAM_SIZE_HINT || i == S3X_PARAM_CHECKSUM_LOCATION)
            continue; /* upload-only knobs */
        if (s3x_download_set(d, (s3x_param)i, k->v[i])) return -1;
    }
    return 0;
}

static void summary(const char *verb, const char *from, const char *to, const s3x_result *r) {
    char b[32], rate[32];
    human(b, sizeof b, (double)r->bytes);
    human(rate, sizeof rate, r->seconds > 0 ? (double)r->bytes / r->seconds : 0);
    printf("%s: %s to %s (%s in %.2f s, %s/s, %" PRId64 " part%s, %" PRId64 " request%s, %" PRId64 " retr%s)\n", verb,
           from, to, b, r->seconds, rate, r->parts, r->parts == 1 ? "" : "s", r->requests, r->requests == 1 ? "" : "s",
           r->retries, r->retries == 1 ? "y" : "ies");
}

static int cp_upload(s3x_client *c, const char *src, const s3url *dst, const knobs *k, int quiet) {
    if (!*dst->key) return usage_error("destination needs a key: s3://bucket/key");
    s3x_upload *u = NULL;
    if (s3x_upload_new(&u, c)) return fail("upload failed");
    if (apply_upload(u, k)) {
        s3x_upload_free(u);
        return fail("invalid option");
    }
    bar b = {0, now_s(), 0, 0};
    int show = k->progress > 0 || (k->progress < 0 && !quiet && isatty(STDERR_FILENO));
    if (show) s3x_upload_set_progress(u, draw_bar, &b);
    s3x_result r;
    g_upload = u;
    int rc = strcmp(src, "-") ? s3x_upload_file(u, dst->bucket, dst->key, src, &r)
                              : s3x_upload_fd(u, dst->bucket, dst->key, STDIN_FILENO, &r);
    g_upload = NULL;
    if (show) end_bar(&b);
    s3x_upload_free(u);
    if (rc && g_signalled) return fail("upload interrupted") ? 128 + g_signalled : 0;
    if (rc) return fail("upload failed");
    if (!quiet) {
        char to[1024];
        snprintf(to, sizeof to, "s3://%s/%s", dst->bucket, dst->key);
        summary("upload", src, to, &r);
    }
    return 0;
}

static int cp_download(s3x_client *c, const s3url *src, const char *dst, const knobs *k, int quiet) {
    if (!*src->key) return usage_error("source needs a key: s3://bucket/key");
    s3x_download *d = NULL;
    if (s3x_download_new(&d, c)) return fail("download failed");
    if (apply_download(d, k)) {
        s3x_download_free(d);
        return fail("invalid option");
    }
    int to_stdout = strcmp(dst, "-") == 0;
    bar b = {0, now_s(), 0, 0};
    int show = k->progress > 0 || (k->progress < 0 && !quiet && isatty(STDERR_FILENO));
    if (show) s3x_download_set_progress(d, draw_bar, &b);
    s3x_result r;
    g_download = d;
    int rc = to_stdout ? s3x_download_fd(d, src->bucket, src->key, STDOUT_FILENO, &r)
                       : s3x_download_file(d, src->bucket, src->key, dst, &r);
    g_download = NULL;
    if (show) end_bar(&b);
    s3x_download_free(d);
    if (rc && g_signalled) return fail("download interrupted") ? 128 + g_signalled : 0;
    if (rc) return fail("download failed");
    if (!quiet && !to_stdout) {
        char from[1024];
        snprintf(from, sizeof from, "s3://%s/%s", src->bucket, src->key);
        summary("download", from, dst, &r);
    }
    return 0;
}

static int cmd_cp(s3x_client *c, int argc, char **argv, const knobs *k, int quiet) {
    if (argc != 2) return usage_error("cp needs SRC and DST");
    s3url s = {0}, d = {0};
    int ss = parse_s3(argv[0], &s), ds = parse_s3(argv[1], &d);
    int rc;
    if (ss && ds) rc = usage_error("copying between two S3 locations is not supported yet");
    else if (!ss && !ds) rc = usage_error("one of SRC and DST must be an s3:// URL");
    else if (ds) rc = cp_upload(c, argv[0], &d, k, quiet);
    else rc = cp_download(c, &s, argv[1], k, quiet);
    s3url_free(&s);
    s3url_free(&d);
    return rc;
}

static int cmd_ls(s3x_client *c, int argc, char **argv) {
    if (argc != 1) return usage_error("ls needs s3://bucket[/prefix]");
    s3url u = {0};
    if (!parse_s3(argv[0], &u) || !*u.bucket) {
        s3url_free(&u);
        return usage_error("ls needs s3://bucket[/prefix]");
    }
    char *token = NULL;
    int rc = 0;
    for (;;) {
        s3x_list *l = NULL;
        if (s3x_list_objects(c, u.bucket, u.key, "/", token, 0, &l)) {
            rc = fail("ls failed");
            break;
        }
        for (size_t i = 0; i < l->nprefixes; i++) printf("%30s PRE %s\n", "", l->prefixes[i]);
        for (size_t i = 0; i < l->count; i++)
            printf("%-24s %12" PRId64 " %s\n", l->entries[i].last_modified ? l->entries[i].last_modified : "",
                   l->entries[i].size, l->entries[i].key);
        free(token);
        token = l->is_truncated && l->next_token ? strdup(l->next_token) : NULL;
        s3x_list_free(l);
        if (!token) break;
    }
    free(token);
    s3url_free(&u);
    return rc;
}

static int cmd_bucket(s3x_client *c, int argc, char **argv, int make, int quiet) {
    if (argc != 1) return usage_error(make ? "mb needs s3://bucket" : "rb needs s3://bucket");
    s3url u = {0};
    if (!parse_s3(argv[0], &u) || !*u.bucket || *u.key) {
        s3url_free(&u);
        return usage_error("expected s3://bucket");
    }
    int rc = make ? s3x_create_bucket(c, u.bucket) : s3x_delete_bucket(c, u.bucket);
    if (rc) rc = fail(make ? "make_bucket failed" : "remove_bucket failed");
    else if (!quiet) printf("%s: s3://%s\n", make ? "make_bucket" : "remove_bucket", u.bucket);
    s3url_free(&u);
    return rc;
}

static int cmd_rm(s3x_client *c, int argc, char **argv, int quiet) {
    if (argc != 1) return usage_error("rm needs s3://bucket/key");
    s3url u = {0};
    if (!parse_s3(argv[0], &u) || !*u.bucket || !*u.key) {
        s3url_free(&u);
        return usage_error("rm needs s3://bucket/key");
    }
    int rc = s3x_delete_object(c, u.bucket, u.key);
    if (rc) rc = fail("delete failed");
    else if (!quiet) printf("delete: s3://%s/%s\n", u.bucket, u.key);
    s3url_free(&u);
    return rc;
}

/* "8MiB", "8M", "100k", "5GiB", "123" -> bytes (or a plain count). */
static int parse_size(const char *s, int64_t *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || v < 0) return -1;
    int64_t mul = 1;
    if (*end) {
        char u = (char)(*end | 0x20);
        if (u == 'k') mul = 1024;
        else if (u == 'm') mul = 1024 * 1024;
        else if (u == 'g') mul = 1024LL * 1024 * 1024;
        else if (u == 't') mul = 1024LL * 1024 * 1024 * 1024;
        else if (u != 'b') return -1;
        end++;
        if (*end == 'i' || *end == 'I') end++;
        if (*end == 'b' || *end == 'B') end++;
        if (*end) return -1;
    }
    *out = (int64_t)(v * (double)mul);
    return 0;
}

static int set_size(knobs *k, s3x_param p, const char *arg, const char *flag) {
    int64_t v, lo, hi;
    if (parse_size(arg, &v) != 0) {
        fprintf(stderr, "%s: %s: '%s' is not a number or size\n", g_prog, flag, arg);
        return 2;
    }
    s3x_param_bounds(p, &lo, &hi);
    if (v < lo || v > hi) {
        fprintf(stderr, "%s: %s %s is out of range [%" PRId64 ", %" PRId64 "]\n", g_prog, flag, arg, lo, hi);
        return 2;
    }
    k->v[p] = v;
    k->set[p] = 1;
    return 0;
}

static int set_enum(knobs *k, s3x_param p, const char *arg, const char *flag, const char *a, const char *b,
                    const char *c, const char *d, const char *e) {
    const char *names[] = {a, b, c, d, e};
    for (int i = 0; i < 5; i++) {
        if (names[i] && !strcmp(arg, names[i])) {
            k->v[p] = i;
            k->set[p] = 1;
            return 0;
        }
    }
    fprintf(stderr, "%s: %s must be one of %s%s%s%s%s%s%s%s%s, got '%s'\n", g_prog, flag, a, b ? ", " : "", b ? b : "",
            c ? ", " : "", c ? c : "", d ? ", " : "", d ? d : "", e ? ", " : "", e ? e : "", arg);
    return 2;
}

int main(int argc, char **argv) {
    enum { O_ENDPOINT = 256, O_REGION, O_PROFILE, O_CA, O_NOVERIFY, O_ADDR, O_VERSION, O_PART, O_CONC, O_STRAT,
           O_POOL, O_CSUM, O_ATTEMPTS, O_SLOW, O_MEM, O_HINT, O_THRESH, O_PROGRESS, O_NOPROGRESS, O_UNSIGNED, O_CSUMLOC };
    static const struct option opts[] = {
        {"endpoint-url", required_argument, 0, O_ENDPOINT},
        {"region", required_argument, 0, O_REGION},
        {"profile", required_argument, 0, O_PROFILE},
        {"ca-bundle", required_argument, 0, O_CA},
        {"no-verify-ssl", no_argument, 0, O_NOVERIFY},
        {"addressing-style", required_argument, 0, O_ADDR},
        {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, O_VERSION},
        {"part-size", required_argument, 0, O_PART},
        {"concurrency", required_argument, 0, O_CONC},
        {"buffer-strategy", required_argument, 0, O_STRAT},
        {"pool", required_argument, 0, O_POOL},
        {"checksum", required_argument, 0, O_CSUM},
        {"checksum-location", required_argument, 0, O_CSUMLOC},
        {"max-attempts", required_argument, 0, O_ATTEMPTS},
        {"slow-part-timeout", required_argument, 0, O_SLOW},
        {"memory-limit", required_argument, 0, O_MEM},
        {"size-hint", required_argument, 0, O_HINT},
        {"multipart-threshold", required_argument, 0, O_THRESH},
        {"progress", no_argument, 0, O_PROGRESS},
        {"no-progress", no_argument, 0, O_NOPROGRESS},
        {"unsigned-payload", no_argument, 0, O_UNSIGNED},
        {0, 0, 0, 0},
    };
    const char *endpoint = NULL, *region = NULL, *profile = NULL, *ca = NULL, *addr = NULL;
    int noverify = 0, quiet = 0, unsigned_payload = 0;
    knobs k;
    memset(&k, 0, sizeof k);
    k.progress = -1;
    int ch, bad;
    /* Options may come before or after the command and its arguments. */
    while ((ch = getopt_long(argc, argv, "qh", opts, NULL)) != -1) {
        switch (ch) {
        case O_ENDPOINT: endpoint = optarg; break;
        case O_REGION: region = optarg; break;
        case O_PROFILE: profile = optarg; break;
        case O_CA: ca = optarg; break;
        case O_NOVERIFY: noverify = 1; break;
        case O_ADDR: addr = optarg; break;
        case 'q': quiet = 1; break;
        case 'h': usage(stdout); return 0;
        case O_VERSION: printf("s3xfer %s\n", s3x_version()); return 0;
        case O_PART: bad = set_size(&k, S3X_PARAM_PART_SIZE, optarg, "--part-size"); if (bad) return bad; break;
        case O_MEM: bad = set_size(&k, S3X_PARAM_MEMORY_LIMIT, optarg, "--memory-limit"); if (bad) return bad; break;
        case O_HINT: bad = set_size(&k, S3X_PARAM_SIZE_HINT, optarg, "--size-hint"); if (bad) return bad; break;
        case O_THRESH: bad = set_size(&k, S3X_PARAM_MULTIPART_THRESHOLD, optarg, "--multipart-threshold"); if (bad) return bad; break;
        case O_CONC: bad = set_size(&k, S3X_PARAM_CONCURRENCY, optarg, "--concurrency"); if (bad) return bad; break;
        case O_ATTEMPTS: bad = set_size(&k, S3X_PARAM_MAX_ATTEMPTS, optarg, "--max-attempts"); if (bad) return bad; break;
        case O_STRAT: bad = set_enum(&k, S3X_PARAM_BUFFER_STRATEGY, optarg, "--buffer-strategy", "auto", "buffered", "unbuffered", NULL, NULL); if (bad) return bad; break;
        case O_POOL: bad = set_enum(&k, S3X_PARAM_POOL, optarg, "--pool", "bounded", "cache", "malloc", NULL, NULL); if (bad) return bad; break;
        case O_CSUM: bad = set_enum(&k, S3X_PARAM_CHECKSUM, optarg, "--checksum", "none", "crc32c", "crc32", "sha256", "md5"); if (bad) return bad; break;
        case O_CSUMLOC: bad = set_enum(&k, S3X_PARAM_CHECKSUM_LOCATION, optarg, "--checksum-location", "auto", "header", "trailer", NULL, NULL); if (bad) return bad; break;
        case O_SLOW:
            if (!strcmp(optarg, "off")) { k.v[S3X_PARAM_SLOW_PART_TIMEOUT] = S3X_SLOW_PART_OFF; k.set[S3X_PARAM_SLOW_PART_TIMEOUT] = 1; }
            else if (!strcmp(optarg, "dynamic")) { k.v[S3X_PARAM_SLOW_PART_TIMEOUT] = S3X_SLOW_PART_DYNAMIC; k.set[S3X_PARAM_SLOW_PART_TIMEOUT] = 1; }
            else { bad = set_size(&k, S3X_PARAM_SLOW_PART_TIMEOUT, optarg, "--slow-part-timeout"); if (bad) return bad; }
            break;
        case O_PROGRESS: k.progress = 1; break;
        case O_NOPROGRESS: k.progress = 0; break;
        case O_UNSIGNED: unsigned_payload = 1; break;
        default: usage(stderr); return 2;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[optind];
    int cargc = argc - optind - 1;
    char **cargv = argv + optind + 1;

    catch_signals();
    s3x_client *c = NULL;
    if (s3x_client_new(&c)) return fail("cannot create client");
    int rc = 0;
    if (endpoint && s3x_client_set_string(c, S3X_CLIENT_ENDPOINT_URL, endpoint)) rc = fail("--endpoint-url");
    if (!rc && region && s3x_client_set_string(c, S3X_CLIENT_REGION, region)) rc = fail("--region");
    if (!rc && profile && s3x_client_set_string(c, S3X_CLIENT_PROFILE, profile)) rc = fail("--profile");
    if (!rc && ca && s3x_client_set_string(c, S3X_CLIENT_CA_BUNDLE, ca)) rc = fail("--ca-bundle");
    if (!rc && noverify && s3x_client_set(c, S3X_PARAM_VERIFY_TLS, 0)) rc = fail("--no-verify-ssl");
    if (!rc && unsigned_payload && s3x_client_set(c, S3X_PARAM_PAYLOAD_SIGNING, S3X_PAYLOAD_UNSIGNED))
        rc = fail("--unsigned-payload");
    if (!rc && addr) {
        int64_t v = !strcmp(addr, "auto") ? S3X_ADDRESSING_AUTO
                    : !strcmp(addr, "path") ? S3X_ADDRESSING_PATH
                    : !strcmp(addr, "virtual") ? S3X_ADDRESSING_VIRTUAL : -1;
        if (v < 0) rc = usage_error("--addressing-style must be auto, path or virtual");
        else if (s3x_client_set(c, S3X_PARAM_ADDRESSING_STYLE, v)) rc = fail("--addressing-style");
    }
    if (!rc) {
        if (!strcmp(cmd, "cp")) rc = cmd_cp(c, cargc, cargv, &k, quiet);
        else if (!strcmp(cmd, "ls")) rc = cmd_ls(c, cargc, cargv);
        else if (!strcmp(cmd, "mb")) rc = cmd_bucket(c, cargc, cargv, 1, quiet);
        else if (!strcmp(cmd, "rb")) rc = cmd_bucket(c, cargc, cargv, 0, quiet);
        else if (!strcmp(cmd, "rm")) rc = cmd_rm(c, cargc, cargv, quiet);
        else rc = usage_error("unknown command");
    }
    s3x_client_free(c);
    return rc;
}
