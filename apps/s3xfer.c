/* s3xfer: the command-line tool. Uses the public C API only. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "s3xfer/s3xfer.h"

static const char *g_prog = "s3xfer";

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

typedef struct file_src {
    int fd;
} file_src;

static int64_t read_fd(void *buf, size_t cap, void *payload) {
    file_src *s = payload;
    for (;;) {
        ssize_t n = read(s->fd, buf, cap);
        if (n >= 0) return n;
        if (errno != EINTR) return -1;
    }
}

static int write_fd(const void *data, size_t len, void *payload) {
    int fd = *(int *)payload;
    const char *p = data;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return 1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int cp_upload(s3x_client *c, const char *src, const s3url *dst, int quiet) {
    if (!*dst->key) return usage_error("destination needs a key: s3://bucket/key");
    int fd = strcmp(src, "-") ? open(src, O_RDONLY | O_CLOEXEC) : STDIN_FILENO;
    if (fd < 0) {
        fprintf(stderr, "%s: cannot open %s: %s\n", g_prog, src, strerror(errno));
        return 1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
        fprintf(stderr, "%s: %s: %s\n", g_prog, src, S_ISDIR(st.st_mode) ? "is a directory" : strerror(errno));
        if (fd != STDIN_FILENO) close(fd);
        return 1;
    }
    int rc;
    char *etag = NULL;
    int64_t size = 0;
    if (S_ISREG(st.st_mode)) {
        size = st.st_size;
        file_src s = {fd};
        rc = s3x_put_object_stream(c, dst->bucket, dst->key, size, read_fd, &etag, &s);
    } else {
        /* A pipe: read it whole (single PUT needs the length up front). */
        size_t cap = 1 << 20, len = 0;
        char *buf = malloc(cap);
        rc = buf ? 0 : -1;
        for (;;) {
            if (!buf) break;
            if (len == cap) {
                char *nb = realloc(buf, cap * 2);
                if (!nb) { rc = -1; break; }
                buf = nb;
                cap *= 2;
            }
            ssize_t n = read(fd, buf + len, cap - len);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) { rc = -1; break; }
            if (n == 0) break;
            len += (size_t)n;
        }
        if (rc) {
            free(buf);
            fprintf(stderr, "%s: reading %s failed: %s\n", g_prog, src, strerror(errno));
            return 1;
        }
        size = (int64_t)len;
        rc = s3x_put_object(c, dst->bucket, dst->key, buf, len, NULL, &etag);
        free(buf);
    }
    if (fd != STDIN_FILENO) close(fd);
    if (rc) return fail("upload failed");
    if (!quiet) printf("upload: %s to s3://%s/%s (%" PRId64 " bytes, ETag %s)\n", src, dst->bucket, dst->key, size, etag);
    s3x_free(etag);
    return 0;
}

static int cp_download(s3x_client *c, const s3url *src, const char *dst, int quiet) {
    if (!*src->key) return usage_error("source needs a key: s3://bucket/key");
    s3x_object_info info;
    memset(&info, 0, sizeof info);
    if (strcmp(dst, "-") == 0) {
        int fd = STDOUT_FILENO;
        int rc = s3x_get_object_stream(c, src->bucket, src->key, -1, -1, write_fd, &info, &fd);
        s3x_object_info_clear(&info);
        return rc ? fail("download failed") : 0;
    }
    /* Write beside the target and rename only when every byte arrived. */
    size_t n = strlen(dst) + 32;
    char *tmp = malloc(n);
    if (!tmp) return 1;
    snprintf(tmp, n, "%s.s3xfer-%ld.tmp", dst, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "%s: cannot create %s: %s\n", g_prog, dst, strerror(errno));
        free(tmp);
        return 1;
    }
    int rc = s3x_get_object_stream(c, src->bucket, src->key, -1, -1, write_fd, &info, &fd);
    if (close(fd) != 0 && !rc) {
        fprintf(stderr, "%s: writing %s failed: %s\n", g_prog, dst, strerror(errno));
        rc = -1;
        unlink(tmp);
        free(tmp);
        s3x_object_info_clear(&info);
        return 1;
    }
    if (rc) {
        unlink(tmp);
        free(tmp);
        s3x_object_info_clear(&info);
        return fail("download failed");
    }
    if (rename(tmp, dst) != 0) {
        fprintf(stderr, "%s: cannot rename onto %s: %s\n", g_prog, dst, strerror(errno));
        unlink(tmp);
        free(tmp);
        s3x_object_info_clear(&info);
        return 1;
    }
    if (!quiet) printf("download: s3://%s/%s to %s (%" PRId64 " bytes)\n", src->bucket, src->key, dst, info.size);
    free(tmp);
    s3x_object_info_clear(&info);
    return 0;
}

static int cmd_cp(s3x_client *c, int argc, char **argv, int quiet) {
    if (argc != 2) return usage_error("cp needs SRC and DST");
    s3url s = {0}, d = {0};
    int ss = parse_s3(argv[0], &s), ds = parse_s3(argv[1], &d);
    int rc;
    if (ss && ds) rc = usage_error("copying between two S3 locations is not supported yet");
    else if (!ss && !ds) rc = usage_error("one of SRC and DST must be an s3:// URL");
    else if (ds) rc = cp_upload(c, argv[0], &d, quiet);
    else rc = cp_download(c, &s, argv[1], quiet);
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

int main(int argc, char **argv) {
    enum { O_ENDPOINT = 256, O_REGION, O_PROFILE, O_CA, O_NOVERIFY, O_ADDR, O_VERSION };
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
        {0, 0, 0, 0},
    };
    const char *endpoint = NULL, *region = NULL, *profile = NULL, *ca = NULL, *addr = NULL;
    int noverify = 0, quiet = 0;
    int ch;
    /* '+': stop at the first non-option (the command). */
    while ((ch = getopt_long(argc, argv, "+qh", opts, NULL)) != -1) {
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

    s3x_client *c = NULL;
    if (s3x_client_new(&c)) return fail("cannot create client");
    int rc = 0;
    if (endpoint && s3x_client_set_string(c, S3X_CLIENT_ENDPOINT_URL, endpoint)) rc = fail("--endpoint-url");
    if (!rc && region && s3x_client_set_string(c, S3X_CLIENT_REGION, region)) rc = fail("--region");
    if (!rc && profile && s3x_client_set_string(c, S3X_CLIENT_PROFILE, profile)) rc = fail("--profile");
    if (!rc && ca && s3x_client_set_string(c, S3X_CLIENT_CA_BUNDLE, ca)) rc = fail("--ca-bundle");
    if (!rc && noverify && s3x_client_set(c, S3X_PARAM_VERIFY_TLS, 0)) rc = fail("--no-verify-ssl");
    if (!rc && addr) {
        int64_t v = !strcmp(addr, "auto") ? S3X_ADDRESSING_AUTO
                    : !strcmp(addr, "path") ? S3X_ADDRESSING_PATH
                    : !strcmp(addr, "virtual") ? S3X_ADDRESSING_VIRTUAL : -1;
        if (v < 0) rc = usage_error("--addressing-style must be auto, path or virtual");
        else if (s3x_client_set(c, S3X_PARAM_ADDRESSING_STYLE, v)) rc = fail("--addressing-style");
    }
    if (!rc) {
        if (!strcmp(cmd, "cp")) rc = cmd_cp(c, cargc, cargv, quiet);
        else if (!strcmp(cmd, "ls")) rc = cmd_ls(c, cargc, cargv);
        else if (!strcmp(cmd, "mb")) rc = cmd_bucket(c, cargc, cargv, 1, quiet);
        else if (!strcmp(cmd, "rb")) rc = cmd_bucket(c, cargc, cargv, 0, quiet);
        else if (!strcmp(cmd, "rm")) rc = cmd_rm(c, cargc, cargv, quiet);
        else rc = usage_error("unknown command");
    }
    s3x_client_free(c);
    return rc;
}
