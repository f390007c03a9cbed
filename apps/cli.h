/* s3xfer CLI: what the command-line tool's files share. The tool is a user of
 * the public C API only; nothing here is part of the library. */
#ifndef S3XFER_CLI_H
#define S3XFER_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "s3xfer/s3xfer.h"

extern const char *const cli_prog;

/* ---- text that reaches the terminal (cli_text.c) ------------------------------
 * Keys, prefixes, dates and error messages come from the server (or from
 * arguments that scripts build from server output). Printed raw, a carriage
 * return or an escape sequence in them could rewrite what the user sees, so
 * every such string goes through cli_escape: valid UTF-8 text passes, and
 * the rest is shown as visible escapes (see usage()). */

/* Length of the valid UTF-8 sequence at p and its code point, or 0 when the
 * byte at p does not start one (RFC 3629: no overlong forms, no surrogates,
 * nothing above U+10FFFF). Stops at a NUL, which is never a continuation. */
size_t cli_utf8_seq(const unsigned char *p, uint32_t *cp);
/* A newly allocated escaped copy of s, or NULL when out of memory. */
char *cli_escape(const char *s);
/* Writes s escaped to f. */
void cli_put_escaped(FILE *f, const char *s);
/* A newly allocated copy of s where the user-information part of every URL
 * ("scheme://user:password@host") is replaced by "***"; NULL when out of
 * memory. */
char *cli_hide_userinfo(const char *s);

/* "s3xfer: WHAT: <the library's last error, userinfo hidden, escaped>";
 * returns 1 (the exit status of a failed command). */
int cli_fail(const char *what);
/* "s3xfer: MSG (see s3xfer --help)"; returns 2. */
int cli_usage_error(const char *msg);

/* ---- sizes and counts on the command line (cli_size.c) -------------------- */

/* Parses a whole number of bytes with an optional unit (B, K/KiB, M/MiB,
 * G/GiB, T/TiB, case-insensitive), or, when units is 0, a plain whole number.
 * Returns 0, or -1 with *why set to a static explanation. */
int cli_parse_size(const char *s, int units, int64_t *out, const char **why);
/* Formats v exactly: with the largest binary unit that divides it ("5MiB")
 * when units is set, else in decimal. */
void cli_format_size(int64_t v, int units, char *buf, size_t n);

/* ---- signals (cli_signal.c) -----------------------------------------------
 * SIGINT, SIGTERM and SIGHUP end every command with status 128+N. While a
 * transfer runs, the first one cancels it and the command returns after the
 * cleanup (an upload's multipart upload is aborted, a download's temporary
 * file removed); at any other time, and on a second signal, the tool exits
 * at once. */

/* Installs the handling. Call first in main, before any thread exists. */
int cli_signals_start(void);
/* Marks u (or d) as the running transfer: a signal now cancels it. Returns
 * 0, or the signal number when one already arrived (do not start then). */
int cli_transfer_begin(s3x_upload *u, s3x_download *d);
/* The same for a bulk run (cp -r, sync, rm -r): a signal cancels it. */
int cli_bulk_begin(s3x_bulk *b);
/* Ends the running transfer; returns the signal that arrived meanwhile, or 0. */
int cli_transfer_end(void);
/* Readable once a signal arrived during a transfer: blocking reads and writes
 * of the tool's own streams poll it so that they stop too. */
int cli_signal_fd(void);
/* "SIGINT", "SIGTERM", "SIGHUP". */
const char *cli_signal_name(int sig);

/* ---- progress (cli_progress.c) -------------------------------------------
 * The progress callback of cp: a bar on stderr that fits the terminal's
 * width, with the client's throttling state while the server throttles it,
 * or (json set) one JSON progress record per update. */
typedef struct cli_progress {
    s3x_client *client;
    FILE *json;     /* JSON records go here; NULL: the bar on stderr */
    int adaptive;   /* the transfer is held to the client's rate: show it */
    double t0, last_draw;
    int64_t last_done;
    int drawn;
    size_t last_len; /* length of the bar line drawn last, to blank what a shorter one leaves */
} cli_progress;

void cli_progress_init(cli_progress *p, s3x_client *client, FILE *json, int adaptive);
/* An s3x_progress_fn; payload is a cli_progress. */
int cli_progress_cb(int64_t done, int64_t total, void *payload);
/* Ends the bar's line (nothing for JSON). */
void cli_progress_end(cli_progress *p);
/* The pieces of the bar, for other progress displays (cli_bulk.c):
 * cli_progress_due is the throttle (1 when a redraw is due now, always when
 * force), cli_progress_draw draws "[###...]" for fraction (no bar when < 0)
 * and text on the bar's line, cli_progress_clear blanks that line (before
 * other output), cli_progress_throttle_text gives the throttling state
 * ("  throttled: ...", or ""), cli_progress_seconds the time since init. */
int cli_progress_due(cli_progress *p, int force);
void cli_progress_draw(cli_progress *p, const char *text, double fraction);
void cli_progress_clear(cli_progress *p);
void cli_progress_throttle_text(cli_progress *p, char *buf, size_t cap);
double cli_progress_seconds(const cli_progress *p);
/* "12.3 MiB" */
void cli_human(char *out, size_t n, double v);

/* ---- JSON lines (cli_json.c) ----------------------------------------------
 * --json: one JSON object per line. Strings come from the server and the
 * command line, so they are escaped: valid UTF-8 passes except controls
 * (C0, DEL, C1), bidirectional controls and U+2028/U+2029, which become
 * \uXXXX; a byte that is not UTF-8 becomes \udcXX, the lone surrogate that
 * Python's "surrogateescape" uses for it, so the exact bytes can be
 * recovered. */

/* Writes s as a quoted JSON string ("" for NULL). */
void cli_json_string(FILE *f, const char *s);
/* Writes a finite number (non-finite values as 0, which JSON cannot carry otherwise). */
void cli_json_double(FILE *f, double v);
/* Writes ",\"throttle\":{...}" for the client's state (nothing when it cannot be read). */
void cli_json_throttle(FILE *f, s3x_client *client);
/* Writes ",\"result\":{...}": every field of r, by its C name. */
void cli_json_put_result(FILE *f, const s3x_result *r);
/* Writes ",\"error\":{code,name,message,http_status,s3_code,request_id,sys_errno}" for e
 * (the message with URL user-information hidden). */
void cli_json_put_error(FILE *f, const s3x_error *e);

/* How a command ended, for the final record. */
typedef struct cli_outcome {
    int exit_code;
    int signal;            /* the signal that ended it, or 0 */
    int failed;            /* 1: an "error" object follows */
    int code;              /* s3x_errcode (S3X_EIO for the tool's own stream errors) */
    int http_status;
    const char *message;
    const char *s3_code;
    const char *request_id;
    int sys_errno;         /* the system's errno behind a local failure, or 0 */
} cli_outcome;

/* The outcome from the library's last error on this thread. */
void cli_outcome_from_error(cli_outcome *o, int exit_code);
/* The final record of a command: {"type":"result","command":...,
 * "outcome":"ok"|"failed"|"interrupted","exit_code":N, the fields given
 * (src/dst/bucket/key may be NULL), every field of r when not NULL, the
 * client's throttling state, and "error" when o->failed}. Flushes f. */
void cli_json_result(FILE *f, s3x_client *client, const char *command, const char *direction, const char *src,
                     const char *dst, const char *bucket, const char *key, const s3x_result *r,
                     const cli_outcome *o);

/* ---- commands -------------------------------------------------------------- */

typedef struct cli_s3url {
    char *bucket;
    char *key; /* may be "" */
} cli_s3url;

/* 1 when s is an s3:// URL (filled, free with cli_s3url_free), 0 when it is
 * not, -1 when out of memory. */
int cli_parse_s3(const char *s, cli_s3url *u);
void cli_s3url_free(cli_s3url *u);

int cli_cmd_ls(s3x_client *c, int argc, char **argv);
/* cp between two S3 locations (cli_copy.c): a server-side copy with u (its
 * knobs set); json, progress, adaptive and quiet as cp's other paths use them. */
int cli_cp_copy(s3x_client *c, s3x_upload *u, const cli_s3url *src, const cli_s3url *dst, int json, int progress,
                int adaptive, int quiet);

/* cp -r, sync, rm -r (cli_bulk.c): the options main parsed for them. */
typedef struct cli_bulk_opts {
    int recursive;              /* -r, --recursive */
    unsigned flags;             /* S3X_BULK_FOLLOW_SYMLINKS, _SYNC_DELETE, _DRYRUN, _EXACT */
    int fail_fast;
    size_t nfilters;            /* --include / --exclude in command-line order */
    int *filter_include;
    const char **filter_pattern;
    const int64_t *knob_v;      /* the transfer knobs given: value and set, per s3x_param, */
    const int *knob_set;        /* and the option and text that set it, for messages */
    const char *const *knob_flag;
    const char *const *knob_arg;
    int progress;               /* -1 auto (a terminal), 0 off, 1 on */
    int json, quiet;
} cli_bulk_opts;

/* cmd is "cp" (with -r), "sync" or "rm" (with -r). Returns the exit status. */
int cli_cmd_bulk(s3x_client *c, const char *cmd, int argc, char **argv, const cli_bulk_opts *o);

#endif
