/* s3xfer: the command-line tool. Uses the public C API only. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

const char *const cli_prog = "s3xfer";

static void usage(FILE *f) {
    fprintf(f,
            "usage: %s [global options] COMMAND ARGS\n"
            "\n"
            "commands:\n"
            "  cp SRC DST          copy a local file (or - for stdin/stdout) to or from s3://bucket/key,\n"
            "                      or s3://a/k to s3://b/k2 on the server (the bytes stay there); a DST\n"
            "                      ending in '/', a bucket alone or a directory gets SRC's base name added\n"
            "  cp -r SRC DST       copy a directory to or from s3://bucket/prefix/, or a prefix to another\n"
            "  sync SRC DST        make DST (a directory or s3://bucket/prefix/) hold what SRC holds\n"
            "  rm -r s3://bucket/prefix/   remove every object under a prefix\n"
            "  ls s3://bucket[/prefix]   list objects\n"
            "  mb s3://bucket      make a bucket\n"
            "  rb s3://bucket      remove an empty bucket\n"
            "  rm s3://bucket/key  remove an object\n"
            "\n"
            "global options:\n"
            "  --endpoint-url URL  S3 endpoint (default: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the\n"
            "                      profile's endpoint_url, else AWS for the region; docs/endpoints.md)\n"
            "  --region REGION     signing region (default: AWS_REGION, AWS_DEFAULT_REGION, the\n"
            "                      profile's region, instance metadata, else us-east-1)\n"
            "  --profile NAME      profile of the shared config/credentials files (roles,\n"
            "                      credential_process, ...: docs/credentials.md)\n"
            "  --ca-bundle PATH    CA certificates for https endpoints\n"
            "  --no-verify-ssl     do not verify TLS certificates\n"
            "  --addressing-style auto|path|virtual\n"
            "  --unsigned-payload  sign requests with UNSIGNED-PAYLOAD (no SHA-256 of bodies)\n"
            "  --receive-threads N|auto\n"
            "                      threads receiving downloads, 1 .. 8 (default auto, also 0:\n"
            "                      one per two CPUs this process may use; to a file over plain\n"
            "                      http one is kept; docs/performance.md)\n"
            "\n",
            cli_prog);
    fputs("transfer options (cp):\n"
            "  --part-size SIZE            part / range size, e.g. 8MiB (5MiB .. 5GiB)\n"
            "  --concurrency N             requests in flight\n"
            "  --buffer-strategy auto|buffered|unbuffered   how upload parts are read\n"
            "  --pool bounded|cache|malloc part-buffer pool\n"
            "  --checksum none|crc32c|crc32|sha256|md5      per-part upload checksum\n"
            "  --checksum-location auto|header|trailer       where it travels (trailer: computed while sending)\n"
            "  --checksum-type composite|full-object         a multipart upload's object checksum: of the parts'\n"
            "                              (S3's default) or the whole object's CRC (crc32c, crc32)\n"
            "  --memory-limit SIZE         bytes of part buffers a transfer may hold (0: no limit)\n"
            "  --multipart-threshold SIZE  uploads below this use one PutObject\n"
            "  --size-hint SIZE            expected size of stdin (sizes its parts; 0: unknown)\n"
            "  --max-attempts N            attempts per request\n"
            "  --slow-part-timeout off|dynamic|MS   first-byte timeout for parts\n"
            "  --retry-timeout MS          keep retrying throttling (503 SlowDown, 429, 500) for up to MS\n"
            "                              with no request succeeding (default 120000; 0: max-attempts only)\n"
            "  --retry-mode standard|adaptive   adaptive (default): a request rate shared by the\n"
            "                              client's transfers, cut on throttling, regained on success\n"
            "  --no-fsync                  downloads: rename the file into place without fsync (faster to a\n"
            "                              slow disk; after a power loss it may be empty or partial)\n"
            "  --progress / --no-progress  progress bar (default: when stderr is a terminal); while the\n"
            "                              server throttles, it shows the throttled retries, seconds and rate\n"
            "  --json                      JSON lines for scripts (cp, mb, rb, rm; see Output below)\n"
            "  -q, --quiet         print nothing on success\n"

            "  -h, --help          this help\n"
            "  --version           print the version\n"
            "\n"
            "SIZE is a whole number of bytes with an optional unit: B, KiB, MiB, GiB, TiB\n"
            "(powers of 1024; K, M, G, T mean the same; any case), e.g. 8MiB or 8388608.\n"
            "Fractions, signs and exponents are refused, and so are KB, MB, GB, TB (ambiguous).\n"
            "N and MS are whole numbers. A value out of the library's range is refused too.\n"
            "\n"
            "Output: keys, prefixes and server messages are printed with visible escapes for\n"
            "anything a terminal would act on: \\\\ for a backslash, \\n \\r \\t, and \\xHH for\n"
            "each byte of other controls (C0, DEL, C1 U+0080..U+009F as their UTF-8 bytes,\n"
            "bidirectional overrides U+202A..U+202E, U+2066..U+2069) and of invalid UTF-8.\n"
            "\n",
            f);
    /* Several strings: C99 compilers need only take 4095 characters in one. */
    fputs("many objects (cp -r, sync, rm -r; docs/bulk.md):\n"
          "  -r, --recursive     cp and rm: every file under the directory, every object under the\n"
          "                      prefix (s3://b/p means the keys under \"p/\")\n"
          "  --include PAT / --exclude PAT   glob filters on the relative path, in the order given;\n"
          "                      the last match wins ('*' matches '/' too, '?' one character)\n"
          "  --follow-symlinks   upload: follow symbolic links (default: skipped, with a warning)\n"
          "  --fail-fast         stop at the first object that fails\n"
          "  --delete            sync: delete at the destination what the source lacks\n"
          "  --dryrun            print what would be done, change nothing\n"
          "  --exact             sync: compare content (ETag/MD5) instead of size and time\n"
          "One line per object (\"upload: a/b to s3://b/p/a/b\"), failures on stderr with the\n"
          "reason, then a summary line; --json: one {\"type\":\"object\"} record per object and a\n"
          "{\"type\":\"summary\"} record. Exit status 1 when any object failed.\n"
          "\n",
          f);
    fputs("--json: one JSON object per line on stdout (on stderr for cp s3://b/k -, whose\n"
            "stdout carries the object), in place of the summary and the bar. With --progress,\n"
            "{\"type\":\"progress\"} records (bytes, total, seconds, bytes_per_second, throttle:\n"
            "active, rate, throttles, seconds, seconds_total) every 0.2 s at most; then one\n"
            "{\"type\":\"result\"} record: command, outcome ok|failed|interrupted, exit_code,\n"
            "source, destination, bucket, key, result (every field of s3x_result, including\n"
            "retries_throttled and throttled_seconds), throttle, and on failure error (code,\n"
            "name, message, http_status, s3_code, request_id). Messages stay on stderr. Strings\n"
            "are JSON-escaped: controls, DEL, C1, bidirectional controls and U+2028/9 as \\uXXXX,\n"
            "a byte that is not UTF-8 as \\udcXX (Python's surrogateescape). ls ignores --json.\n"
            "\n"
            "Exit status: 0 success, 1 failure, 2 usage error, 128+N when ended by signal N\n"
            "(130 SIGINT, 143 SIGTERM, 129 SIGHUP). A signal cancels a running transfer and\n"
            "returns after its cleanup (a multipart upload is aborted, a partial download\n"
            "removed); any other command ends at once, and so does a second signal.\n",
          f);
}

int cli_parse_s3(const char *s, cli_s3url *u) {
    if (strncmp(s, "s3://", 5) != 0) return 0;
    const char *b = s + 5;
    const char *slash = strchr(b, '/');
    size_t blen = slash ? (size_t)(slash - b) : strlen(b);
    u->bucket = strndup(b, blen);
    u->key = strdup(slash ? slash + 1 : "");
    if (!u->bucket || !u->key) {
        cli_s3url_free(u);
        return -1;
    }
    return 1;
}

void cli_s3url_free(cli_s3url *u) {
    free(u->bucket);
    free(u->key);
    u->bucket = u->key = NULL;
}

/* "s3://bucket/key", escaped, to f. */
static void put_s3url(FILE *f, const char *bucket, const char *key) {
    fputs("s3://", f);
    cli_put_escaped(f, bucket);
    if (key) {
        fputc('/', f);
        cli_put_escaped(f, key);
    }
}

/* ---- cp ----------------------------------------------------------------------- */

typedef struct knobs {
    int64_t v[S3X_PARAM__COUNT];
    int set[S3X_PARAM__COUNT];
    const char *flag[S3X_PARAM__COUNT]; /* the option that set it, and its text, for messages */
    const char *arg[S3X_PARAM__COUNT];
    int progress; /* -1 auto (a terminal), 0 off, 1 on */
    int json;     /* --json: JSON lines instead of the bar and the summary */
} knobs;

static void human(char *out, size_t n, double v) {
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (v >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    snprintf(out, n, i ? "%.1f %s" : "%.0f %s", v, u[i]);
}

/* A knob the library refused: the option and the value the user wrote, then
 * the library's reason (it names the knob and its range). */
static int knob_refused(const knobs *k, int i) {
    const s3x_error *e = s3x_error_last();
    fprintf(stderr, "%s: %s ", cli_prog, k->flag[i] ? k->flag[i] : "option");
    cli_put_escaped(stderr, k->arg[i] ? k->arg[i] : "");
    fputs(": ", stderr);
    cli_put_escaped(stderr, e->message && *e->message ? e->message : s3x_strerror(e->code));
    fputc('\n', stderr);
    return 2;
}

static int apply_upload(s3x_upload *u, const knobs *k) {
    for (int i = 0; i < S3X_PARAM__COUNT; i++)
        if (k->set[i] && i != S3X_PARAM_VALIDATE_CHECKSUM && i != S3X_PARAM_DURABLE &&
            s3x_upload_set(u, (s3x_param)i, k->v[i]))
            return knob_refused(k, i);
    return 0;
}

static int apply_download(s3x_download *d, const knobs *k) {
    for (int i = 0; i < S3X_PARAM__COUNT; i++) {
        if (!k->set[i]) continue;
        if (i == S3X_PARAM_BUFFER_STRATEGY || i == S3X_PARAM_CHECKSUM || i == S3X_PARAM_MULTIPART_THRESHOLD ||
            i == S3X_PARAM_LEAVE_PARTS_ON_ERROR || i == S3X_PARAM_SIZE_HINT || i == S3X_PARAM_CHECKSUM_LOCATION ||
            i == S3X_PARAM_CHECKSUM_TYPE)
            continue; /* upload-only knobs */
        if (s3x_download_set(d, (s3x_param)i, k->v[i])) return knob_refused(k, i);
    }
    return 0;
}

static void summary(const char *verb, int upload, const char *path, const cli_s3url *s3, const s3x_result *r) {
    char b[32], rate[32];
    human(b, sizeof b, (double)r->bytes);
    human(rate, sizeof rate, r->seconds > 0 ? (double)r->bytes / r->seconds : 0);
    printf("%s: ", verb);
    if (upload) cli_put_escaped(stdout, path);
    else put_s3url(stdout, s3->bucket, s3->key);
    fputs(" to ", stdout);
    if (upload) put_s3url(stdout, s3->bucket, s3->key);
    else cli_put_escaped(stdout, path);
    printf(" (%s in %.2f s, %s/s, %" PRId64 " part%s, %" PRId64 " request%s, %" PRId64 " retr%s)\n", b, r->seconds,
           rate, r->parts, r->parts == 1 ? "" : "s", r->requests, r->requests == 1 ? "" : "s", r->retries,
           r->retries == 1 ? "y" : "ies");
    if (r->sync_seconds > 0 || r->writeback_calls)
        printf("  %s (%.2f s after the last byte, %" PRId64 " early writeback request%s)\n",
               r->fsyncs ? "synced to disk before the rename" : "renamed without fsync", r->sync_seconds,
               r->writeback_calls, r->writeback_calls == 1 ? "" : "s");
    if (r->receive_threads > 1)
        printf("  received on %" PRId64 " threads (%" PRId64 " ranged GET%s on the extra ones)\n", r->receive_threads,
               r->requests_received_elsewhere, r->requests_received_elsewhere == 1 ? "" : "s");
    if (r->retries_throttled)
        printf("  throttled by the server: %" PRId64 " retr%s, %.1f s spent throttled\n", r->retries_throttled,
               r->retries_throttled == 1 ? "y" : "ies", r->throttled_seconds);
}

/* The tool's own end of a stream (stdin, stdout, a FIFO). The library would
 * block in read() or write() with no way for a signal to end the wait (it
 * retries EINTR); these wait in poll() on the stream and on the signal pipe. */
typedef struct stream_io {
    int fd;
    int err;         /* errno of a failed read or write */
    int interrupted; /* a signal stopped it */
} stream_io;

/* 1 when fd is ready for events, 0 when a signal arrived, -1 on error. */
static int wait_ready(stream_io *s, short events) {
    for (;;) {
        struct pollfd p[2] = {{s->fd, events, 0}, {cli_signal_fd(), POLLIN, 0}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR) continue;
            s->err = errno;
            return -1;
        }
        if (p[1].revents) {
            s->interrupted = 1;
            return 0;
        }
        if (p[0].revents) return 1; /* errors and hangups show in the read or write */
    }
}

static int64_t stream_read(void *buf, size_t cap, void *payload) {
    stream_io *s = payload;
    for (;;) {
        int w = wait_ready(s, POLLIN);
        if (w <= 0) return -1;
        ssize_t n = read(s->fd, buf, cap);
        if (n >= 0) return n;
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
        s->err = errno;
        return -1;
    }
}

static int stream_write(const void *data, size_t len, void *payload) {
    stream_io *s = payload;
    const char *p = data;
    while (len) {
        int w = wait_ready(s, POLLOUT);
        if (w <= 0) return 1;
        ssize_t n = write(s->fd, p, len);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
            s->err = errno;
            return 1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* A transfer ended by a signal: say so (the library's message says what was
 * cleaned up) and return 128+N, as shells report a command killed by N. */
static int interrupted(int sig, const char *what, int rc) {
    fprintf(stderr, "%s: %s: %s", cli_prog, cli_signal_name(sig), what);
    if (rc) {
        const s3x_error *e = s3x_error_last();
        char *hidden = cli_hide_userinfo(e->message);
        fputs(" cancelled: ", stderr);
        cli_put_escaped(stderr, hidden ? hidden : e->message);
        free(hidden);
    } else {
        fputs(" had completed when the signal arrived", stderr);
    }
    fputc('\n', stderr);
    return 128 + sig;
}

/* ---- cp: progress and --json --------------------------------------------------- */

/* The bar shows by default on a terminal; JSON progress records only when
 * asked for (--progress), so that the records a script reads do not depend
 * on where stderr goes. */
static int show_progress(const knobs *k, int quiet) {
    if (k->json) return k->progress > 0;
    return k->progress > 0 || (k->progress < 0 && !quiet && isatty(STDERR_FILENO));
}

/* Adaptive (the library's default) unless --retry-mode standard. */
static int adaptive(const knobs *k) {
    return !k->set[S3X_PARAM_RETRY_MODE] || k->v[S3X_PARAM_RETRY_MODE] == S3X_RETRY_MODE_ADAPTIVE;
}

/* cp's final --json record. path is the local side, s3 the object; rc is
 * the exit status, lib_rc what the library returned, sig the signal that
 * ended the transfer, io_err the errno of the tool's own stream (stream_name). */
static void json_cp_result(FILE *f, s3x_client *c, int upload, const char *path, const cli_s3url *s3,
                           const s3x_result *r, int rc, int lib_rc, int sig, int io_err, const char *stream_name) {
    cli_outcome o;
    char msg[512];
    memset(&o, 0, sizeof o);
    if (lib_rc && io_err && !sig) {
        o.failed = 1;
        o.code = S3X_EIO;
        o.sys_errno = io_err;
        o.s3_code = o.request_id = "";
        snprintf(msg, sizeof msg, "%s %s: %s", upload ? "reading" : "writing", stream_name, strerror(io_err));
        o.message = msg;
    } else if (lib_rc) {
        cli_outcome_from_error(&o, rc);
    }
    o.exit_code = rc;
    o.signal = sig;
    size_t n = 5 + strlen(s3->bucket) + 1 + strlen(s3->key) + 1;
    char *url = malloc(n);
    if (url) snprintf(url, n, "s3://%s/%s", s3->bucket, s3->key);
    const char *u = url ? url : "";
    cli_json_result(f, c, "cp", upload ? "upload" : "download", upload ? path : u, upload ? u : path, s3->bucket,
                    s3->key, r, &o);
    free(url);
}

static int cp_upload(s3x_client *c, const char *src, const cli_s3url *dst, const knobs *k, int quiet) {
    if (!*dst->key) return cli_usage_error("destination needs a key: s3://bucket/key");
    /* Streams (stdin, and FIFOs or devices given by path) are read here so
     * that a signal ends a wait for input; regular files go to the library. */
    stream_io in = {STDIN_FILENO, 0, 0};
    int stream = strcmp(src, "-") == 0, own_fd = 0;
    struct stat st;
    if (!stream && stat(src, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        /* Opening a FIFO waits for a writer; a signal then exits at once. */
        in.fd = open(src, O_RDONLY | O_CLOEXEC);
        if (in.fd < 0) {
            fprintf(stderr, "%s: upload failed: cannot open ", cli_prog);
            cli_put_escaped(stderr, src);
            fprintf(stderr, ": %s\n", strerror(errno));
            return 1;
        }
        stream = own_fd = 1;
    }
    s3x_upload *u = NULL;
    int rc = 0;
    if (s3x_upload_new(&u, c)) {
        rc = cli_fail("upload failed");
        goto out;
    }
    if ((rc = apply_upload(u, k))) goto out;
    FILE *jf = k->json ? stdout : NULL;
    cli_progress b;
    cli_progress_init(&b, c, jf, adaptive(k));
    int show = show_progress(k, quiet);
    if (show) s3x_upload_set_progress(u, cli_progress_cb, &b);
    s3x_result r;
    memset(&r, 0, sizeof r);
    int sig = cli_transfer_begin(u, NULL);
    if (!sig) {
        rc = stream ? s3x_upload_stream(u, dst->bucket, dst->key, stream_read, &r, &in)
                    : s3x_upload_file(u, dst->bucket, dst->key, src, &r);
        sig = cli_transfer_end();
    }
    if (show) cli_progress_end(&b);
    const char *shown_src = stream && !own_fd ? "-" : src;
    int lib_rc = rc;
    if (sig) {
        rc = interrupted(sig, "upload", rc);
    } else if (rc && in.err) {
        fputs("s3xfer: upload failed: reading ", stderr);
        cli_put_escaped(stderr, own_fd ? src : "standard input");
        fprintf(stderr, ": %s\n", strerror(in.err));
        rc = 1;
    } else if (rc) {
        rc = cli_fail("upload failed");
    } else if (!quiet && !jf) {
        summary("upload", 1, shown_src, dst, &r);
    }
    if (jf) json_cp_result(jf, c, 1, shown_src, dst, &r, rc, lib_rc, sig, in.err, own_fd ? src : "standard input");
out:
    s3x_upload_free(u);
    if (own_fd) close(in.fd);
    return rc;
}

/* poll() says a pipe has room for PIPE_BUF bytes, but a blocking write of a
 * whole part then waits for the reader to take all of it, deaf to signals.
 * A pipe is therefore written through a non-blocking open file description
 * of its own, opened anew through /proc, leaving the flags of the inherited
 * one alone (the reader's shell may share it). -1 when that is not possible
 * or not needed: a regular file never waits for a reader. */
static int nonblocking_pipe(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) return -1;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    return open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
}

static int cp_download(s3x_client *c, const cli_s3url *src, const char *dst, const knobs *k, int quiet) {
    if (!*src->key) return cli_usage_error("source needs a key: s3://bucket/key");
    s3x_download *d = NULL;
    int rc = 0;
    if (s3x_download_new(&d, c)) {
        rc = cli_fail("download failed");
        goto out;
    }
    if ((rc = apply_download(d, k))) goto out;
    int to_stdout = strcmp(dst, "-") == 0;
    stream_io outs = {STDOUT_FILENO, 0, 0};
    int pipe_fd = to_stdout ? nonblocking_pipe(STDOUT_FILENO) : -1;
    if (pipe_fd >= 0) outs.fd = pipe_fd;
    /* Object bytes own stdout when they go there: the records take stderr. */
    FILE *jf = !k->json ? NULL : to_stdout ? stderr : stdout;
    cli_progress b;
    cli_progress_init(&b, c, jf, adaptive(k));
    int show = show_progress(k, quiet);
    if (show) s3x_download_set_progress(d, cli_progress_cb, &b);
    s3x_result r;
    memset(&r, 0, sizeof r);
    int sig = cli_transfer_begin(NULL, d);
    if (!sig) {
        rc = to_stdout ? s3x_download_stream(d, src->bucket, src->key, stream_write, &r, &outs)
                       : s3x_download_file(d, src->bucket, src->key, dst, &r);
        sig = cli_transfer_end();
    }
    if (show) cli_progress_end(&b);
    int lib_rc = rc;
    if (sig) {
        rc = interrupted(sig, "download", rc);
    } else if (rc && outs.err) {
        fprintf(stderr, "%s: download failed: writing standard output: %s\n", cli_prog, strerror(outs.err));
        rc = 1;
    } else if (rc) {
        rc = cli_fail("download failed");
    } else if (!quiet && !to_stdout && !jf) {
        summary("download", 0, dst, src, &r);
    }
    if (jf) json_cp_result(jf, c, 0, dst, src, &r, rc, lib_rc, sig, outs.err, "standard output");
    if (pipe_fd >= 0) close(pipe_fd);
out:
    s3x_download_free(d);
    return rc;
}

static int cp_copy(s3x_client *c, const cli_s3url *src, const cli_s3url *dst, const knobs *k, int quiet) {
    s3x_upload *u = NULL;
    if (s3x_upload_new(&u, c)) return cli_fail("copy failed");
    int rc = apply_upload(u, k);
    if (!rc) rc = cli_cp_copy(c, u, src, dst, k->json, show_progress(k, quiet), adaptive(k), quiet);
    s3x_upload_free(u);
    return rc;
}

/* The last '/'-separated part of s ("" when s ends in '/'). */
static const char *base_name(const char *s) {
    const char *slash = strrchr(s, '/');
    return slash ? slash + 1 : s;
}

static int ends_in_slash(const char *s) {
    size_t n = strlen(s);
    return n > 0 && s[n - 1] == '/';
}

/* A base name that can be added to a destination: not empty, not . or ..
 * (a file named so would be the directory itself or its parent). */
static int usable_base(const char *b) {
    return *b && strcmp(b, ".") != 0 && strcmp(b, "..") != 0;
}

/* cp's destination when it names a place rather than an object or a file:
 * an S3 key that is empty (the bucket alone) or ends in '/', or a local
 * path that ends in '/' or is an existing directory. The source's base name
 * is added to it, as cp and the other S3 tools do: `cp f s3://b/p/` writes
 * p/f, `cp s3://b/p/f dir` writes dir/f. *out gets the new key or path
 * (NULL when DST names one already); returns 0, or the usage error's exit
 * status. */
static int place_in_dst(const char *src, const cli_s3url *s, const char *dst, const cli_s3url *d, char **out) {
    *out = NULL;
    const char *at; /* what the base name is added to */
    if (d) {
        if (*d->key && !ends_in_slash(d->key)) return 0;
        at = d->key;
    } else {
        struct stat st;
        if (!strcmp(dst, "-") || (!ends_in_slash(dst) && (stat(dst, &st) != 0 || !S_ISDIR(st.st_mode)))) return 0;
        at = dst;
    }
    const char *base;
    if (s) {
        if (!*s->key) return 0; /* "source needs a key", said where the source is used */
        base = base_name(s->key);
        if (!usable_base(base))
            return cli_usage_error("the source key's last part cannot name a file or object: give DST in full");
    } else {
        if (!strcmp(src, "-")) return cli_usage_error("standard input has no name: give the destination key in full");
        base = base_name(src);
        if (!usable_base(base)) return cli_usage_error("SRC has no file name to add to DST: give DST in full");
    }
    size_t n = strlen(at), sep = d || ends_in_slash(at) ? 0 : 1;
    char *p = malloc(n + sep + strlen(base) + 1);
    if (!p) return cli_usage_error("out of memory");
    memcpy(p, at, n);
    if (sep) p[n] = '/';
    strcpy(p + n + sep, base);
    *out = p;
    return 0;
}

static int cmd_cp(s3x_client *c, int argc, char **argv, const knobs *k, int quiet) {
    if (argc != 2) return cli_usage_error("cp needs SRC and DST");
    cli_s3url s = {0}, d = {0};
    int ss = cli_parse_s3(argv[0], &s), ds = cli_parse_s3(argv[1], &d);
    char *placed = NULL;
    int rc = 0;
    if (ss < 0 || ds < 0) rc = cli_usage_error("out of memory");
    else if (!ss && !ds) rc = cli_usage_error("one of SRC and DST must be an s3:// URL");
    else rc = place_in_dst(argv[0], ss ? &s : NULL, argv[1], ds ? &d : NULL, &placed);
    if (!rc && placed && ds) {
        free(d.key);
        d.key = placed;
        placed = NULL;
    }
    if (!rc && ss && ds) rc = cp_copy(c, &s, &d, k, quiet);
    else if (!rc && ds) rc = cp_upload(c, argv[0], &d, k, quiet);
    else if (!rc) rc = cp_download(c, &s, placed ? placed : argv[1], k, quiet);
    free(placed);
    cli_s3url_free(&s);
    cli_s3url_free(&d);
    return rc;
}

/* ---- mb, rb, rm ------------------------------------------------------------------ */

/* The final --json record of mb, rb and rm (rc: the exit status, failed:
 * the library's last error describes the failure). */
static void json_simple(s3x_client *c, const char *cmd, const cli_s3url *u, int rc) {
    cli_outcome o;
    memset(&o, 0, sizeof o);
    if (rc) cli_outcome_from_error(&o, rc);
    o.exit_code = rc;
    cli_json_result(stdout, c, cmd, NULL, NULL, NULL, u->bucket, *u->key ? u->key : NULL, NULL, &o);
}

static int cmd_bucket(s3x_client *c, int argc, char **argv, int make, int quiet, int json) {
    if (argc != 1) return cli_usage_error(make ? "mb needs s3://bucket" : "rb needs s3://bucket");
    cli_s3url u = {0};
    int isurl = cli_parse_s3(argv[0], &u);
    if (isurl < 0) return cli_usage_error("out of memory");
    if (!isurl || !*u.bucket || *u.key) {
        cli_s3url_free(&u);
        return cli_usage_error("expected s3://bucket");
    }
    int rc = make ? s3x_create_bucket(c, u.bucket) : s3x_delete_bucket(c, u.bucket);
    if (rc) {
        rc = cli_fail(make ? "make_bucket failed" : "remove_bucket failed");
    } else if (!quiet && !json) {
        printf("%s: ", make ? "make_bucket" : "remove_bucket");
        put_s3url(stdout, u.bucket, NULL);
        putchar('\n');
    }
    if (json) json_simple(c, make ? "mb" : "rb", &u, rc);
    cli_s3url_free(&u);
    return rc;
}

static int cmd_rm(s3x_client *c, int argc, char **argv, int quiet, int json) {
    if (argc != 1) return cli_usage_error("rm needs s3://bucket/key");
    cli_s3url u = {0};
    int isurl = cli_parse_s3(argv[0], &u);
    if (isurl < 0) return cli_usage_error("out of memory");
    if (!isurl || !*u.bucket || !*u.key) {
        cli_s3url_free(&u);
        return cli_usage_error("rm needs s3://bucket/key");
    }
    int rc = s3x_delete_object(c, u.bucket, u.key);
    if (rc) {
        rc = cli_fail("delete failed");
    } else if (!quiet && !json) {
        fputs("delete: ", stdout);
        put_s3url(stdout, u.bucket, u.key);
        putchar('\n');
    }
    if (json) json_simple(c, "rm", &u, rc);
    cli_s3url_free(&u);
    return rc;
}

/* ---- options -------------------------------------------------------------------- */

/* A size (units) or a count: parsed strictly, then held against the bounds the
 * library gives for the knob, so that no value is clamped or wrapped. */
static int set_number(knobs *k, s3x_param p, const char *arg, const char *flag, int units) {
    int64_t v, lo, hi;
    const char *why = NULL;
    if (cli_parse_size(arg, units, &v, &why) != 0) {
        fprintf(stderr, "%s: %s: '", cli_prog, flag);
        cli_put_escaped(stderr, arg);
        fprintf(stderr, "' is not a valid %s: %s\n", units ? "size" : "number", why);
        return 2;
    }
    if (s3x_param_bounds(p, &lo, &hi) == 0 && (v < lo || v > hi)) {
        char l[32], h[32];
        cli_format_size(lo, units, l, sizeof l);
        cli_format_size(hi, units, h, sizeof h);
        fprintf(stderr, "%s: %s %s is out of range [%s, %s] (knob %s)\n", cli_prog, flag, arg, l, h,
                s3x_param_name(p));
        return 2;
    }
    k->v[p] = v;
    k->set[p] = 1;
    k->flag[p] = flag;
    k->arg[p] = arg;
    return 0;
}

static int set_enum(knobs *k, s3x_param p, const char *arg, const char *flag, const char *a, const char *b,
                    const char *c, const char *d, const char *e) {
    const char *names[] = {a, b, c, d, e};
    for (int i = 0; i < 5; i++) {
        if (names[i] && !strcmp(arg, names[i])) {
            k->v[p] = i;
            k->set[p] = 1;
            k->flag[p] = flag;
            k->arg[p] = arg;
            return 0;
        }
    }
    fprintf(stderr, "%s: %s must be one of %s%s%s%s%s%s%s%s%s, got '", cli_prog, flag, a, b ? ", " : "",
            b ? b : "", c ? ", " : "", c ? c : "", d ? ", " : "", d ? d : "", e ? ", " : "", e ? e : "");
    cli_put_escaped(stderr, arg);
    fputs("'\n", stderr);
    return 2;
}

static int set_slow(knobs *k, const char *arg) {
    s3x_param p = S3X_PARAM_SLOW_PART_TIMEOUT;
    if (strcmp(arg, "off") && strcmp(arg, "dynamic")) return set_number(k, p, arg, "--slow-part-timeout", 0);
    k->v[p] = strcmp(arg, "off") ? S3X_SLOW_PART_DYNAMIC : S3X_SLOW_PART_OFF;
    k->set[p] = 1;
    k->flag[p] = "--slow-part-timeout";
    k->arg[p] = arg;
    return 0;
}

/* Output that could not be written (a full disk, a closed pipe) is a failure,
 * not a success with a truncated listing. */
static int finish_stdout(int rc) {
    if (fflush(stdout) != 0 || ferror(stdout)) {
        if (!rc) fprintf(stderr, "%s: writing standard output: %s\n", cli_prog, strerror(errno));
        return rc ? rc : 1;
    }
    return rc;
}

int main(int argc, char **argv) {
    /* First, so that no thread starts with these signals unblocked. */
    if (cli_signals_start()) return 1;
    enum { O_ENDPOINT = 256, O_REGION, O_PROFILE, O_CA, O_NOVERIFY, O_ADDR, O_VERSION, O_PART, O_CONC, O_STRAT,
           O_POOL, O_CSUM, O_ATTEMPTS, O_SLOW, O_MEM, O_HINT, O_THRESH, O_PROGRESS, O_NOPROGRESS, O_UNSIGNED, O_CSUMLOC,
           O_RTIMEOUT, O_RMODE, O_JSON, O_NOFSYNC, O_INCLUDE, O_EXCLUDE, O_FOLLOW, O_FAILFAST, O_DELETE, O_DRYRUN,
           O_EXACT, O_CSUMTYPE, O_RECV };
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
        {"checksum-type", required_argument, 0, O_CSUMTYPE},
        {"max-attempts", required_argument, 0, O_ATTEMPTS},
        {"slow-part-timeout", required_argument, 0, O_SLOW},
        {"retry-timeout", required_argument, 0, O_RTIMEOUT},
        {"retry-mode", required_argument, 0, O_RMODE},
        {"memory-limit", required_argument, 0, O_MEM},
        {"size-hint", required_argument, 0, O_HINT},
        {"multipart-threshold", required_argument, 0, O_THRESH},
        {"progress", no_argument, 0, O_PROGRESS},
        {"no-progress", no_argument, 0, O_NOPROGRESS},
        {"unsigned-payload", no_argument, 0, O_UNSIGNED},
        {"receive-threads", required_argument, 0, O_RECV},
        {"json", no_argument, 0, O_JSON},
        {"no-fsync", no_argument, 0, O_NOFSYNC},
        {"recursive", no_argument, 0, 'r'},
        {"include", required_argument, 0, O_INCLUDE},
        {"exclude", required_argument, 0, O_EXCLUDE},
        {"follow-symlinks", no_argument, 0, O_FOLLOW},
        {"fail-fast", no_argument, 0, O_FAILFAST},
        {"delete", no_argument, 0, O_DELETE},
        {"dryrun", no_argument, 0, O_DRYRUN},
        {"exact", no_argument, 0, O_EXACT},
        {0, 0, 0, 0},
    };
    const char *endpoint = NULL, *region = NULL, *profile = NULL, *ca = NULL, *addr = NULL, *recv = NULL;
    int noverify = 0, quiet = 0, unsigned_payload = 0;
    knobs k;
    memset(&k, 0, sizeof k);
    k.progress = -1;
    /* cp -r, sync, rm -r (cli_bulk.c); filters keep their order. Static: the
     * early returns below (--help) leave the arrays reachable, not leaked. */
    static cli_bulk_opts bo;
    bo.filter_include = calloc((size_t)argc, sizeof *bo.filter_include);
    bo.filter_pattern = calloc((size_t)argc, sizeof *bo.filter_pattern);
    if (!bo.filter_include || !bo.filter_pattern) return cli_usage_error("out of memory");
    int bulk_only = 0; /* an option that only cp -r, sync and rm -r take */
    int ch, bad = 0;
    /* Options may come before or after the command and its arguments. */
    while ((ch = getopt_long(argc, argv, "qhr", opts, NULL)) != -1) {
        switch (ch) {
        case O_ENDPOINT: endpoint = optarg; break;
        case O_REGION: region = optarg; break;
        case O_PROFILE: profile = optarg; break;
        case O_CA: ca = optarg; break;
        case O_NOVERIFY: noverify = 1; break;
        case O_ADDR: addr = optarg; break;
        case O_RECV: recv = optarg; break;
        case 'q': quiet = 1; break;
        case 'h': usage(stdout); return finish_stdout(0);
        case O_VERSION: printf("s3xfer %s\n", s3x_version()); return finish_stdout(0);
        case O_PART: bad = set_number(&k, S3X_PARAM_PART_SIZE, optarg, "--part-size", 1); break;
        case O_MEM: bad = set_number(&k, S3X_PARAM_MEMORY_LIMIT, optarg, "--memory-limit", 1); break;
        case O_HINT: bad = set_number(&k, S3X_PARAM_SIZE_HINT, optarg, "--size-hint", 1); break;
        case O_THRESH: bad = set_number(&k, S3X_PARAM_MULTIPART_THRESHOLD, optarg, "--multipart-threshold", 1); break;
        case O_CONC: bad = set_number(&k, S3X_PARAM_CONCURRENCY, optarg, "--concurrency", 0); break;
        case O_ATTEMPTS: bad = set_number(&k, S3X_PARAM_MAX_ATTEMPTS, optarg, "--max-attempts", 0); break;
        case O_SLOW: bad = set_slow(&k, optarg); break;
        case O_RTIMEOUT: bad = set_number(&k, S3X_PARAM_RETRY_TIMEOUT, optarg, "--retry-timeout", 0); break;
        case O_RMODE: bad = set_enum(&k, S3X_PARAM_RETRY_MODE, optarg, "--retry-mode", "standard", "adaptive", NULL, NULL, NULL); break;
        case O_STRAT: bad = set_enum(&k, S3X_PARAM_BUFFER_STRATEGY, optarg, "--buffer-strategy", "auto", "buffered", "unbuffered", NULL, NULL); break;
        case O_POOL: bad = set_enum(&k, S3X_PARAM_POOL, optarg, "--pool", "bounded", "cache", "malloc", NULL, NULL); break;
        case O_CSUM: bad = set_enum(&k, S3X_PARAM_CHECKSUM, optarg, "--checksum", "none", "crc32c", "crc32", "sha256", "md5"); break;
        case O_CSUMLOC: bad = set_enum(&k, S3X_PARAM_CHECKSUM_LOCATION, optarg, "--checksum-location", "auto", "header", "trailer", NULL, NULL); break;
        case O_CSUMTYPE:
            bad = set_enum(&k, S3X_PARAM_CHECKSUM_TYPE, optarg, "--checksum-type", "composite", "full-object", NULL,
                           NULL, NULL);
            break;
        case O_PROGRESS: k.progress = 1; break;
        case O_NOPROGRESS: k.progress = 0; break;
        case O_UNSIGNED: unsigned_payload = 1; break;
        case O_JSON: k.json = 1; break;
        case 'r': bo.recursive = 1; break;
        case O_INCLUDE:
        case O_EXCLUDE:
            bo.filter_include[bo.nfilters] = ch == O_INCLUDE;
            bo.filter_pattern[bo.nfilters++] = optarg;
            bulk_only = 1;
            break;
        case O_FOLLOW: bo.flags |= S3X_BULK_FOLLOW_SYMLINKS; bulk_only = 1; break;
        case O_FAILFAST: bo.fail_fast = 1; bulk_only = 1; break;
        case O_DELETE: bo.flags |= S3X_BULK_SYNC_DELETE; bulk_only = 1; break;
        case O_DRYRUN: bo.flags |= S3X_BULK_DRYRUN; bulk_only = 1; break;
        case O_EXACT: bo.flags |= S3X_BULK_EXACT; bulk_only = 1; break;
        case O_NOFSYNC:
            k.v[S3X_PARAM_DURABLE] = 0;
            k.set[S3X_PARAM_DURABLE] = 1;
            k.flag[S3X_PARAM_DURABLE] = "--no-fsync";
            k.arg[S3X_PARAM_DURABLE] = "";
            break;
        default: usage(stderr); return 2;
        }
        if (bad) return bad;
    }
    if (optind >= argc) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[optind];
    int cargc = argc - optind - 1;
    char **cargv = argv + optind + 1;

    s3x_client *c = NULL;
    if (s3x_client_new(&c)) return cli_fail("cannot create client");
    int rc = 0;
    if (endpoint && s3x_client_set_string(c, S3X_CLIENT_ENDPOINT_URL, endpoint)) rc = cli_fail("--endpoint-url");
    if (!rc && region && s3x_client_set_string(c, S3X_CLIENT_REGION, region)) rc = cli_fail("--region");
    if (!rc && profile && s3x_client_set_string(c, S3X_CLIENT_PROFILE, profile)) rc = cli_fail("--profile");
    if (!rc && ca && s3x_client_set_string(c, S3X_CLIENT_CA_BUNDLE, ca)) rc = cli_fail("--ca-bundle");
    if (!rc && noverify && s3x_client_set(c, S3X_PARAM_VERIFY_TLS, 0)) rc = cli_fail("--no-verify-ssl");
    if (!rc && unsigned_payload && s3x_client_set(c, S3X_PARAM_PAYLOAD_SIGNING, S3X_PAYLOAD_UNSIGNED))
        rc = cli_fail("--unsigned-payload");
    if (!rc && addr) {
        int64_t v = !strcmp(addr, "auto") ? S3X_ADDRESSING_AUTO
                    : !strcmp(addr, "path") ? S3X_ADDRESSING_PATH
                    : !strcmp(addr, "virtual") ? S3X_ADDRESSING_VIRTUAL : -1;
        if (v < 0) rc = cli_usage_error("--addressing-style must be auto, path or virtual");
        else if (s3x_client_set(c, S3X_PARAM_ADDRESSING_STYLE, v)) rc = cli_fail("--addressing-style");
    }
    if (!rc && recv) {
        int64_t v;
        const char *why = NULL;
        if (!strcmp(recv, "auto")) {
            v = 0;
        } else if (cli_parse_size(recv, 0, &v, &why) != 0) {
            fprintf(stderr, "%s: --receive-threads: '", cli_prog);
            cli_put_escaped(stderr, recv);
            fprintf(stderr, "' is not a valid number: %s\n", why);
            rc = 2;
        }
        if (!rc && s3x_client_set(c, S3X_PARAM_RECEIVE_THREADS, v)) {
            cli_fail("--receive-threads");
            rc = 2; /* out of range: a usage error, as for the other knobs */
        }
    }
    /* The retry knobs govern every request, so the client's own (ls, rm, mb,
     * rb, and the HEADs and listings around a copy) take them too. */
    static const s3x_param client_retry[] = {S3X_PARAM_MAX_ATTEMPTS, S3X_PARAM_RETRY_TIMEOUT, S3X_PARAM_RETRY_MODE};
    for (size_t i = 0; !rc && i < sizeof client_retry / sizeof client_retry[0]; i++)
        if (k.set[client_retry[i]] && s3x_client_set(c, client_retry[i], k.v[client_retry[i]]))
            rc = knob_refused(&k, client_retry[i]);
    int bulk = !strcmp(cmd, "sync") || (bo.recursive && (!strcmp(cmd, "cp") || !strcmp(cmd, "rm")));
    if (!rc && !bulk && (bo.recursive || bulk_only))
        rc = cli_usage_error(bo.recursive ? "-r applies to cp and rm" : "this option applies to cp -r, sync and rm -r");
    if (!rc && bulk) {
        bo.knob_v = k.v;
        bo.knob_set = k.set;
        bo.knob_flag = k.flag;
        bo.knob_arg = k.arg;
        bo.progress = k.progress;
        bo.json = k.json;
        bo.quiet = quiet;
        rc = cli_cmd_bulk(c, cmd, cargc, cargv, &bo);
    } else if (!rc) {
        if (!strcmp(cmd, "cp")) rc = cmd_cp(c, cargc, cargv, &k, quiet);
        else if (!strcmp(cmd, "ls")) rc = cli_cmd_ls(c, cargc, cargv);
        else if (!strcmp(cmd, "mb")) rc = cmd_bucket(c, cargc, cargv, 1, quiet, k.json);
        else if (!strcmp(cmd, "rb")) rc = cmd_bucket(c, cargc, cargv, 0, quiet, k.json);
        else if (!strcmp(cmd, "rm")) rc = cmd_rm(c, cargc, cargv, quiet, k.json);
        else rc = cli_usage_error("unknown command");
    }
    s3x_client_free(c);
    free(bo.filter_include);
    free(bo.filter_pattern);
    return finish_stdout(rc);
}
