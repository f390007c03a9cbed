/* s3xfer CLI: many objects at once (cp -r, sync, rm -r) through the bulk API
 * (s3xfer/bulk.h). The library walks, lists, compares and transfers; this
 * file turns its per-object reports into the lines the AWS CLI prints (or
 * JSON records), draws the progress of the whole run, and maps the outcome
 * to an exit status. Keys and paths come from the server or from the file
 * system, so every one is printed escaped (cli_text.c) or JSON-escaped. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

typedef struct bulk_run {
    s3x_client *client;
    const cli_bulk_opts *o;
    const char *cmd;
    const char *bucket;      /* the bucket keys are in (a copy's source) */
    const char *dest_bucket; /* a copy's destination bucket, else NULL */
    int listing;             /* cp -r (not sync): skips are worth a warning */
    int dryrun;
    FILE *json;              /* --json records go here, else NULL */
    int show;                /* progress shown (bar, or records with --json) */
    cli_progress bar;
    int64_t copied, deleted, dirs; /* succeeded, by kind (the summary counts them together) */
} bulk_run;

static void put_url(FILE *f, const char *bucket, const char *key) {
    fputs("s3://", f);
    cli_put_escaped(f, bucket ? bucket : "");
    fputc('/', f);
    cli_put_escaped(f, key ? key : "");
}

/* What the object is called in a message: its local path or its URL. */
static void put_subject(FILE *f, const bulk_run *r, const s3x_bulk_item *it) {
    if (it->key) put_url(f, r->bucket, it->key);
    else cli_put_escaped(f, it->path ? it->path : "");
}

/* "upload: a/b.txt to s3://bucket/p/b.txt", as the AWS CLI prints it. */
static void put_line(FILE *f, const bulk_run *r, const s3x_bulk_item *it) {
    switch (it->action) {
    case S3X_BULK_UPLOAD:
        cli_put_escaped(f, it->path ? it->path : "");
        fputs(" to ", f);
        put_url(f, r->bucket, it->key);
        break;
    case S3X_BULK_DOWNLOAD:
        put_url(f, r->bucket, it->key);
        fputs(" to ", f);
        cli_put_escaped(f, it->path ? it->path : "");
        break;
    case S3X_BULK_COPY:
        put_url(f, r->bucket, it->key);
        fputs(" to ", f);
        put_url(f, r->dest_bucket ? r->dest_bucket : r->bucket, it->dest_key);
        break;
    case S3X_BULK_DELETE_LOCAL:
    case S3X_BULK_MKDIR: cli_put_escaped(f, it->path ? it->path : ""); break;
    default: put_subject(f, r, it); break;
    }
}

static void json_item(const bulk_run *r, const s3x_bulk_item *it) {
    FILE *f = r->json;
    const char *outcome = it->action == S3X_BULK_REFUSED ? "refused"
                          : it->rc                       ? "failed"
                          : it->action == S3X_BULK_SKIP  ? "skipped"
                                                         : "ok";
    fputs("{\"type\":\"object\",\"action\":", f);
    cli_json_string(f, it->action == S3X_BULK_DELETE_LOCAL    ? "delete_local"
                       : it->action == S3X_BULK_DELETE_REMOTE ? "delete_remote"
                                                              : s3x_bulk_action_name(it->action));
    fputs(",\"outcome\":", f);
    cli_json_string(f, outcome);
    if (r->dryrun) fputs(",\"dryrun\":true", f);
    if (it->key) {
        fputs(",\"bucket\":", f);
        cli_json_string(f, r->bucket);
        fputs(",\"key\":", f);
        cli_json_string(f, it->key);
    }
    if (it->dest_key) {
        fputs(",\"dest_bucket\":", f);
        cli_json_string(f, r->dest_bucket ? r->dest_bucket : r->bucket);
        fputs(",\"dest_key\":", f);
        cli_json_string(f, it->dest_key);
    }
    if (it->path) {
        fputs(",\"path\":", f);
        cli_json_string(f, it->path);
    }
    fprintf(f, ",\"size\":%" PRId64, it->size);
    if (it->reason) {
        fputs(",\"reason\":", f);
        cli_json_string(f, it->reason);
    }
    if (it->result) cli_json_put_result(f, it->result);
    if (it->rc) {
        s3x_error e;
        memset(&e, 0, sizeof e);
        if (it->err) e = *it->err;
        else e.code = it->rc;
        if (!e.code) e.code = it->rc;
        cli_json_put_error(f, &e);
    }
    fputs("}\n", f);
}

/* One object's outcome: a line on stdout when it was done (unless --quiet),
 * on stderr when it failed or was refused, or a JSON record. */
static void on_item(const s3x_bulk_item *item, void *payload) {
    bulk_run *r = payload;
    const s3x_bulk_item *it = item;
    int failed = it->rc != 0 || it->action == S3X_BULK_REFUSED;
    if (!failed) {
        if (it->action == S3X_BULK_UPLOAD || it->action == S3X_BULK_DOWNLOAD || it->action == S3X_BULK_COPY)
            r->copied++;
        else if (it->action == S3X_BULK_DELETE_LOCAL || it->action == S3X_BULK_DELETE_REMOTE)
            r->deleted++;
        else if (it->action == S3X_BULK_MKDIR)
            r->dirs++;
    }
    if (r->json) {
        json_item(r, it);
        return;
    }
    /* Lines and the bar share the terminal: the bar is blanked first and
     * redrawn by the next progress call. */
    if (r->show) cli_progress_clear(&r->bar);
    if (failed) {
        if (it->action == S3X_BULK_REFUSED) {
            fputs("refused: ", stderr);
            put_subject(stderr, r, it);
            if (it->path && it->key) {
                fputs(" (", stderr);
                cli_put_escaped(stderr, it->path);
                fputc(')', stderr);
            }
        } else {
            fprintf(stderr, "%s failed: ", s3x_bulk_action_name(it->action));
            put_line(stderr, r, it);
        }
        fputs(": ", stderr);
        const char *why = it->reason;
        char *hidden = NULL;
        if (it->rc && it->err && it->err->message && *it->err->message) {
            hidden = cli_hide_userinfo(it->err->message);
            why = hidden ? hidden : it->err->message;
        } else if (!why) {
            why = s3x_strerror(it->rc ? it->rc : S3X_EINVAL);
        }
        cli_put_escaped(stderr, why);
        if (it->rc && it->reason && why != it->reason && !strstr(why, it->reason)) {
            fputs(" (", stderr);
            cli_put_escaped(stderr, it->reason);
            fputc(')', stderr);
        }
        fputc('\n', stderr);
        free(hidden);
        return;
    }
    if (it->action == S3X_BULK_SKIP) {
        /* A sync skips what is up to date: that is its job, said by the
         * summary. cp -r skips only what it cannot or was told not to take
         * (a symbolic link): worth a warning, as the AWS CLI gives. */
        if (r->listing && it->reason && !r->o->quiet) {
            fputs("warning: skipped ", stderr);
            put_subject(stderr, r, it);
            fputs(": ", stderr);
            cli_put_escaped(stderr, it->reason);
            fputc('\n', stderr);
        }
        return;
    }
    if (r->o->quiet) return;
    if (r->dryrun) fputs("(dryrun) ", stdout);
    fprintf(stdout, "%s: ", s3x_bulk_action_name(it->action));
    put_line(stdout, r, it);
    fputc('\n', stdout);
    if (r->show) fflush(stdout);
}

static void fmt_eta(char *out, size_t n, double s) {
    if (s >= 3600) snprintf(out, n, "%d:%02d:%02d", (int)(s / 3600), (int)(s / 60) % 60, (int)s % 60);
    else snprintf(out, n, "%d:%02d", (int)(s / 60), (int)s % 60);
}

/* The whole run: "[####....]  45.0% 123/5000 objects  115.2 MiB / 256.0 MiB
 * 120.0 MiB/s  ETA 0:12"; "5000+" while the walk or the listing goes on
 * (the total is not known yet, and neither is an ETA). */
static int on_progress(const s3x_bulk_summary *s, void *payload) {
    bulk_run *r = payload;
    int last = s->listing_done && s->objects_done + s->objects_skipped + s->objects_failed >= s->objects_found;
    if (!cli_progress_due(&r->bar, last)) return 0;
    double secs = cli_progress_seconds(&r->bar);
    double rate = secs > 0 ? (double)s->bytes_done / secs : 0;
    int64_t finished = s->objects_done + s->objects_skipped + s->objects_failed;
    if (r->json) {
        FILE *f = r->json;
        fprintf(f,
                "{\"type\":\"progress\",\"objects_done\":%" PRId64 ",\"objects_skipped\":%" PRId64
                ",\"objects_failed\":%" PRId64 ",\"objects_found\":%" PRId64 ",\"listing_done\":%s"
                ",\"bytes_done\":%" PRId64 ",\"bytes_found\":%" PRId64 ",\"seconds\":",
                s->objects_done, s->objects_skipped, s->objects_failed, s->objects_found,
                s->listing_done ? "true" : "false", s->bytes_done, s->bytes_found);
        cli_json_double(f, secs);
        fputs(",\"bytes_per_second\":", f);
        cli_json_double(f, rate);
        cli_json_throttle(f, r->client);
        fputs("}\n", f);
        fflush(f);
        return 0;
    }
    char done[32], found[32], speed[32], eta[32] = "", thr[128], text[320];
    cli_human(done, sizeof done, (double)s->bytes_done);
    cli_human(found, sizeof found, (double)s->bytes_found);
    cli_human(speed, sizeof speed, rate);
    cli_progress_throttle_text(&r->bar, thr, sizeof thr);
    double fraction = -1;
    if (s->bytes_found > 0) fraction = (double)s->bytes_done / (double)s->bytes_found;
    else if (s->objects_found > 0) fraction = (double)finished / (double)s->objects_found;
    if (s->listing_done && rate > 0 && s->bytes_found > s->bytes_done) {
        char t[24];
        fmt_eta(t, sizeof t, (double)(s->bytes_found - s->bytes_done) / rate);
        snprintf(eta, sizeof eta, "  ETA %s", t);
    }
    char pct[16] = "";
    if (s->listing_done && fraction >= 0) snprintf(pct, sizeof pct, " %5.1f%%", 100.0 * fraction);
    snprintf(text, sizeof text, "%s %" PRId64 "/%" PRId64 "%s objects  %s / %s  %s/s%s%s", pct, finished,
             s->objects_found, s->listing_done ? "" : "+", done, found, speed, eta, thr);
    cli_progress_draw(&r->bar, text, s->listing_done ? fraction : -1);
    return 0;
}

static void json_summary(const bulk_run *r, const s3x_bulk_summary *s, int lib_rc, int exit_code, int sig,
                         const s3x_error *err) {
    FILE *f = r->json;
    fputs("{\"type\":\"summary\",\"command\":", f);
    cli_json_string(f, r->cmd);
    fputs(",\"outcome\":", f);
    cli_json_string(f, sig ? "interrupted" : exit_code ? "failed" : "ok");
    fprintf(f, ",\"exit_code\":%d", exit_code);
    if (sig) {
        fputs(",\"signal\":", f);
        cli_json_string(f, cli_signal_name(sig));
    }
    if (r->dryrun) fputs(",\"dryrun\":true", f);
    fprintf(f,
            ",\"objects_found\":%" PRId64 ",\"objects_done\":%" PRId64 ",\"objects_copied\":%" PRId64
            ",\"objects_deleted\":%" PRId64 ",\"directories_made\":%" PRId64 ",\"objects_skipped\":%" PRId64
            ",\"objects_failed\":%" PRId64 ",\"bytes_found\":%" PRId64 ",\"bytes_done\":%" PRId64 ",\"seconds\":",
            s->objects_found, s->objects_done, r->copied, r->deleted, r->dirs, s->objects_skipped,
            s->objects_failed, s->bytes_found, s->bytes_done);
    cli_json_double(f, s->seconds);
    fprintf(f, ",\"requests\":%" PRId64 ",\"retries\":%" PRId64 ",\"peak_buffer_bytes\":%" PRId64
               ",\"budget\":%" PRId64,
            s->requests, s->retries, s->peak_buffer_bytes, s->budget);
    cli_json_throttle(f, r->client);
    if (lib_rc && err) cli_json_put_error(f, err);
    fputs("}\n", f);
    fflush(f);
}

/* "s3://bucket/prefix" -> bucket and a prefix that ends in '/' (or is empty):
 * as in the AWS CLI, the last segment names a "folder", so s3://b/logs means
 * the keys under "logs/" and never "logs2/x". NULL bucket when out of memory
 * or not an s3:// URL with a bucket (*why says which). */
static int split_prefix(const char *arg, char **bucket, char **prefix, const char **why) {
    cli_s3url u = {0};
    int isurl = cli_parse_s3(arg, &u);
    *bucket = *prefix = NULL;
    if (isurl < 0) {
        *why = "out of memory";
        return -1;
    }
    if (!isurl || !*u.bucket) {
        cli_s3url_free(&u);
        *why = "expected s3://bucket/prefix/";
        return -1;
    }
    size_t n = strlen(u.key);
    char *p = malloc(n + 2);
    if (!p) {
        cli_s3url_free(&u);
        *why = "out of memory";
        return -1;
    }
    memcpy(p, u.key, n + 1);
    if (n && p[n - 1] != '/') {
        p[n] = '/';
        p[n + 1] = '\0';
    }
    *bucket = u.bucket;
    *prefix = p;
    free(u.key);
    return 0;
}

/* Knobs and filters onto the job; 0, or the exit status (2: refused). */
static int configure(s3x_bulk *b, const cli_bulk_opts *o) {
    for (int i = 0; i < S3X_PARAM__COUNT; i++) {
        if (!o->knob_set[i] || s3x_bulk_set(b, (s3x_param)i, o->knob_v[i]) == 0) continue;
        const s3x_error *e = s3x_error_last();
        fprintf(stderr, "%s: %s ", cli_prog, o->knob_flag[i] ? o->knob_flag[i] : s3x_param_name((s3x_param)i));
        cli_put_escaped(stderr, o->knob_arg[i] ? o->knob_arg[i] : "");
        fputs(": ", stderr);
        cli_put_escaped(stderr, e->message && *e->message ? e->message : s3x_strerror(e->code));
        fputc('\n', stderr);
        return 2;
    }
    if (o->fail_fast && s3x_bulk_set(b, S3X_PARAM_FAIL_FAST, 1)) return cli_fail("--fail-fast");
    for (size_t i = 0; i < o->nfilters; i++) {
        if (s3x_bulk_add_filter(b, o->filter_include[i], o->filter_pattern[i]) == 0) continue;
        const s3x_error *e = s3x_error_last();
        fprintf(stderr, "%s: %s '", cli_prog, o->filter_include[i] ? "--include" : "--exclude");
        cli_put_escaped(stderr, o->filter_pattern[i]);
        fputs("': ", stderr);
        cli_put_escaped(stderr, e->message && *e->message ? e->message : s3x_strerror(e->code));
        fputc('\n', stderr);
        return 2;
    }
    if (s3x_bulk_set_flags(b, o->flags)) return cli_fail("options");
    return 0;
}

enum { OP_UP, OP_DOWN, OP_COPY, OP_SYNC_UP, OP_SYNC_DOWN, OP_DELETE };

int cli_cmd_bulk(s3x_client *c, const char *cmd, int argc, char **argv, const cli_bulk_opts *o) {
    int is_sync = !strcmp(cmd, "sync"), is_rm = !strcmp(cmd, "rm");
    const char *label = is_sync ? "sync" : is_rm ? "rm -r" : "cp -r";
    if (is_rm ? argc != 1 : argc != 2)
        return cli_usage_error(is_rm ? "rm -r needs s3://bucket/prefix/" : is_sync ? "sync needs SRC and DST"
                                                                                   : "cp -r needs SRC and DST");
    if ((o->flags & (S3X_BULK_SYNC_DELETE | S3X_BULK_EXACT)) && !is_sync)
        return cli_usage_error("--delete and --exact apply to sync");
    if ((o->flags & S3X_BULK_FOLLOW_SYMLINKS) && is_rm) return cli_usage_error("--follow-symlinks applies to uploads");
    char *b1 = NULL, *p1 = NULL, *b2 = NULL, *p2 = NULL;
    const char *why = NULL, *local = NULL;
    int op = -1;
    int s0 = strncmp(argv[0], "s3://", 5) == 0, s1 = argc > 1 && strncmp(argv[1], "s3://", 5) == 0;
    if (is_rm) {
        if (split_prefix(argv[0], &b1, &p1, &why) == 0) op = OP_DELETE;
    } else if (s0 && s1) {
        if (is_sync) why = "sync needs a local directory on one side";
        else if (split_prefix(argv[0], &b1, &p1, &why) == 0 && split_prefix(argv[1], &b2, &p2, &why) == 0)
            op = OP_COPY;
    } else if (s0) {
        local = argv[1];
        if (split_prefix(argv[0], &b1, &p1, &why) == 0) op = is_sync ? OP_SYNC_DOWN : OP_DOWN;
    } else if (s1) {
        local = argv[0];
        if (split_prefix(argv[1], &b1, &p1, &why) == 0) op = is_sync ? OP_SYNC_UP : OP_UP;
    } else {
        why = "one of SRC and DST must be an s3:// URL";
    }
    if (op >= 0 && local && !*local) {
        why = "the local directory is empty";
        op = -1;
    }
    if (op < 0) {
        free(b1);
        free(p1);
        free(b2);
        free(p2);
        return cli_usage_error(why ? why : "bad arguments");
    }

    bulk_run r;
    memset(&r, 0, sizeof r);
    r.client = c;
    r.o = o;
    r.cmd = cmd;
    r.bucket = b1;
    r.dest_bucket = b2;
    r.listing = !is_sync;
    r.dryrun = (o->flags & S3X_BULK_DRYRUN) != 0;
    r.json = o->json ? stdout : NULL;
    /* As for cp: a bar on a terminal by default, JSON progress records only
     * when asked for, so that the records a script reads do not depend on
     * where stderr goes. */
    r.show = o->json ? o->progress > 0 : o->progress > 0 || (o->progress < 0 && !o->quiet && isatty(STDERR_FILENO));
    int adaptive = !o->knob_set[S3X_PARAM_RETRY_MODE] || o->knob_v[S3X_PARAM_RETRY_MODE] == S3X_RETRY_MODE_ADAPTIVE;
    cli_progress_init(&r.bar, c, r.json, adaptive);

    s3x_bulk *b = NULL;
    s3x_bulk_summary s;
    memset(&s, 0, sizeof s);
    int rc = 0, lib_rc = 0, sig = 0;
    if (s3x_bulk_new(&b, c)) {
        rc = cli_fail("cannot start the run");
        goto out;
    }
    if ((rc = configure(b, o))) goto out;
    s3x_bulk_set_callbacks(b, on_item, r.show ? on_progress : NULL, &r);
    sig = cli_bulk_begin(b);
    if (!sig) {
        switch (op) {
        case OP_UP: lib_rc = s3x_bulk_upload_dir(b, local, b1, p1, &s); break;
        case OP_DOWN: lib_rc = s3x_bulk_download_dir(b, b1, p1, local, &s); break;
        case OP_COPY: lib_rc = s3x_bulk_copy_prefix(b, b1, p1, b2, p2, &s); break;
        case OP_SYNC_UP: lib_rc = s3x_bulk_sync_up(b, local, b1, p1, &s); break;
        case OP_SYNC_DOWN: lib_rc = s3x_bulk_sync_down(b, b1, p1, local, &s); break;
        default: lib_rc = s3x_bulk_delete_prefix(b, b1, p1, &s); break;
        }
        sig = cli_transfer_end();
    }
    if (r.show && !r.json) cli_progress_end(&r.bar);
    /* The error is copied before anything else can call the library. */
    s3x_error err;
    memset(&err, 0, sizeof err);
    char msg[1024] = "";
    if (lib_rc) {
        const s3x_error *e = s3x_error_last();
        err = *e;
        snprintf(msg, sizeof msg, "%s", e->message && *e->message ? e->message : s3x_strerror(e->code));
        err.message = msg;
        err.s3_code = err.request_id = NULL;
    }
    if (sig) {
        fprintf(stderr, "%s: %s: %s", cli_prog, cli_signal_name(sig), label);
        if (lib_rc) {
            char *hidden = cli_hide_userinfo(msg);
            fputs(" cancelled: ", stderr);
            cli_put_escaped(stderr, hidden ? hidden : msg);
            free(hidden);
        } else {
            fputs(" had completed when the signal arrived", stderr);
        }
        fputc('\n', stderr);
        rc = 128 + sig;
    } else if (lib_rc == S3X_EPARTIAL) {
        fprintf(stderr, "%s: %s: %" PRId64 " object%s failed\n", cli_prog, label, s.objects_failed,
                s.objects_failed == 1 ? "" : "s");
        rc = 1;
    } else if (lib_rc) {
        char what[32];
        snprintf(what, sizeof what, "%s failed", label);
        rc = cli_fail(what);
    }
    if (!r.json && !o->quiet && (!lib_rc || lib_rc == S3X_EPARTIAL) && !sig) {
        char bytes[32], rate[32];
        cli_human(bytes, sizeof bytes, (double)s.bytes_done);
        cli_human(rate, sizeof rate, s.seconds > 0 ? (double)s.bytes_done / s.seconds : 0);
        printf("%s%s: %" PRId64 " copied, %" PRId64 " deleted, %" PRId64 " skipped, %" PRId64
               " failed, %s in %.2f s (%s/s)\n",
               r.dryrun ? "(dryrun) " : "", label, r.copied, r.deleted,
               s.objects_skipped, s.objects_failed, bytes, s.seconds, rate);
    }
    if (r.json) json_summary(&r, &s, lib_rc, rc, sig, lib_rc ? &err : NULL);
out:
    s3x_bulk_free(b);
    free(b1);
    free(p1);
    free(b2);
    free(p2);
    return rc;
}
