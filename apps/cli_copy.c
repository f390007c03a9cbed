/* cp s3://a/k s3://b/k2: a server-side copy (s3x_upload_copy), with the same
 * progress, signal handling, summary and --json record as the other cp
 * paths. Kept apart from s3xfer.c so that cp's other branches can change
 * without touching this one. */
#include "cli.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void put_url(FILE *f, const cli_s3url *u) {
    fputs("s3://", f);
    cli_put_escaped(f, u->bucket);
    fputc('/', f);
    cli_put_escaped(f, u->key);
}

static char *url_of(const cli_s3url *u) {
    size_t n = 5 + strlen(u->bucket) + 1 + strlen(u->key) + 1;
    char *s = malloc(n);
    if (s) snprintf(s, n, "s3://%s/%s", u->bucket, u->key);
    return s;
}

int cli_cp_copy(s3x_client *c, s3x_upload *u, const cli_s3url *src, const cli_s3url *dst, int json, int progress,
                int adaptive, int quiet) {
    if (!*src->key) return cli_usage_error("source needs a key: s3://bucket/key");
    if (!*dst->key) return cli_usage_error("destination needs a key: s3://bucket/key");
    FILE *jf = json ? stdout : NULL;
    cli_progress b;
    cli_progress_init(&b, c, jf, adaptive);
    if (progress) s3x_upload_set_progress(u, cli_progress_cb, &b);
    s3x_result r;
    memset(&r, 0, sizeof r);
    int rc = 0, sig = cli_transfer_begin(u, NULL);
    if (!sig) {
        rc = s3x_upload_copy(u, src->bucket, src->key, dst->bucket, dst->key, NULL, &r);
        sig = cli_transfer_end();
    }
    if (progress) cli_progress_end(&b);
    int lib_rc = rc;
    if (sig) {
        const s3x_error *e = s3x_error_last();
        fprintf(stderr, "%s: %s: copy", cli_prog, cli_signal_name(sig));
        if (rc) {
            char *hidden = cli_hide_userinfo(e->message);
            fputs(" cancelled: ", stderr);
            cli_put_escaped(stderr, hidden ? hidden : e->message);
            free(hidden);
        } else {
            fputs(" had completed when the signal arrived", stderr);
        }
        fputc('\n', stderr);
        rc = 128 + sig;
    } else if (rc) {
        rc = cli_fail("copy failed");
    } else if (!quiet && !jf) {
        fputs("copy: ", stdout);
        put_url(stdout, src);
        fputs(" to ", stdout);
        put_url(stdout, dst);
        printf(" (%" PRId64 " bytes in %.2f s, server-side, %" PRId64 " part%s, %" PRId64 " request%s, %" PRId64
               " retr%s)\n",
               r.bytes, r.seconds, r.parts, r.parts == 1 ? "" : "s", r.requests, r.requests == 1 ? "" : "s",
               r.retries, r.retries == 1 ? "y" : "ies");
    }
    if (jf) {
        cli_outcome o;
        memset(&o, 0, sizeof o);
        if (lib_rc) cli_outcome_from_error(&o, rc);
        o.exit_code = rc;
        o.signal = sig;
        char *s = url_of(src), *d = url_of(dst);
        cli_json_result(jf, c, "cp", "copy", s ? s : "", d ? d : "", dst->bucket, dst->key, &r, &o);
        free(s);
        free(d);
    }
    return rc;
}
