/* s3xfer CLI: cp's progress, as a bar on stderr or as JSON progress records.
 * The library calls it on the transfer's thread after each part and at least
 * every 250 ms, so it also shows a transfer that moves no bytes because the
 * server is throttling it: the client's throttling state is read on each
 * call (s3x_client_throttle_state is cheap and made for this). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* Redrawn at most this often: faster is flicker, and as many JSON records. */
#define CLI_PROGRESS_EVERY_S 0.2

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void cli_human(char *out, size_t n, double v) {
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (v >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    snprintf(out, n, i ? "%.1f %s" : "%.0f %s", v, u[i]);
}

/* Columns of the terminal on stderr; COLUMNS, then 80, when it is not one
 * (--progress into a file or a pipe). */
static int columns(void) {
    struct winsize ws;
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    const char *env = getenv("COLUMNS");
    int c = env ? atoi(env) : 0;
    return c > 0 ? c : 80;
}

void cli_progress_init(cli_progress *p, s3x_client *client, FILE *json, int adaptive) {
    memset(p, 0, sizeof *p);
    p->client = client;
    p->json = json;
    p->adaptive = adaptive;
    p->t0 = now_s();
    p->last_done = -2; /* no update yet (-1 is an unknown total) */
}

static void json_record(cli_progress *p, int64_t done, int64_t total, double t) {
    FILE *f = p->json;
    double secs = t - p->t0;
    fprintf(f, "{\"type\":\"progress\",\"bytes\":%" PRId64 ",\"total\":", done);
    if (total >= 0) fprintf(f, "%" PRId64, total);
    else fputs("null", f);
    fputs(",\"seconds\":", f);
    cli_json_double(f, secs);
    fputs(",\"bytes_per_second\":", f);
    cli_json_double(f, secs > 0 ? (double)done / secs : 0);
    cli_json_throttle(f, p->client);
    fputs("}\n", f);
    fflush(f);
}

/* The client's throttling state as "  throttled: 12 retries, 3.4 s, 0.5 req/s"
 * (the rate only when the transfer is held to it), or "" when not throttled. */
void cli_progress_throttle_text(cli_progress *p, char *thr, size_t cap) {
    thr[0] = '\0';
    s3x_throttle_state st;
    if (p->client && s3x_client_throttle_state(p->client, &st, sizeof st) == 0 && st.active) {
        int n = snprintf(thr, cap, "  throttled: %" PRId64 " retr%s, %.1f s", st.throttles,
                         st.throttles == 1 ? "y" : "ies", st.seconds);
        if (p->adaptive && n > 0 && (size_t)n < cap) snprintf(thr + n, cap - (size_t)n, ", %.1f req/s", st.rate);
    }
}

/* The line: "[####....]" for fraction (none when fraction < 0), then text.
 * It never wraps (a wrapped line is not redrawn by \r): the bar gives up its
 * width first, then the line is cut at the terminal's edge. */
void cli_progress_draw(cli_progress *p, const char *text, double fraction) {
    /* One column is left free: a character in the last one makes some
     * terminals wrap at once. */
    int room = columns() - 1;
    if (room < 1) room = 1;
    char line[512];
    size_t n = 0;
    int bar = fraction >= 0 ? room - (int)strlen(text) - 2 : 0;
    if (bar > 30) bar = 30;
    if (bar >= 10) {
        if (fraction > 1) fraction = 1;
        int fill = (int)((double)bar * fraction);
        line[n++] = '[';
        for (int i = 0; i < bar; i++) line[n++] = i < fill ? '#' : '.';
        line[n++] = ']';
    }
    size_t tl = strlen(text);
    if (n + tl > sizeof line - 1) tl = sizeof line - 1 - n;
    memcpy(line + n, text, tl);
    n += tl;
    if (n > (size_t)room) n = (size_t)room;
    line[n] = '\0';
    /* Blank what a longer previous line left behind, within the room. */
    size_t pad = p->last_len > n ? p->last_len - n : 0;
    if (n + pad > (size_t)room) pad = (size_t)room > n ? (size_t)room - n : 0;
    fprintf(stderr, "\r%s%*s", line, (int)pad, "");
    fflush(stderr);
    p->last_len = n;
    p->drawn = 1;
}

void cli_progress_clear(cli_progress *p) {
    if (p->json || !p->drawn || !p->last_len) return;
    fprintf(stderr, "\r%*s\r", (int)p->last_len, "");
    fflush(stderr);
    p->last_len = 0;
}

int cli_progress_due(cli_progress *p, int force) {
    double t = now_s();
    if (p->drawn && !force && t - p->last_draw < CLI_PROGRESS_EVERY_S) return 0;
    p->last_draw = t;
    return 1;
}

double cli_progress_seconds(const cli_progress *p) { return now_s() - p->t0; }

/* The bar: "[####....]  45.0% 115.2 MiB / 256.0 MiB  120.0 MiB/s" and, while
 * the server throttles the client, the throttling state. */
static void draw(cli_progress *p, int64_t done, int64_t total, double t) {
    char d[32], tot[32], rate[32], text[256], thr[128];
    cli_human(d, sizeof d, (double)done);
    cli_human(tot, sizeof tot, (double)(total < 0 ? 0 : total));
    cli_human(rate, sizeof rate, t > p->t0 ? (double)done / (t - p->t0) : 0);
    cli_progress_throttle_text(p, thr, sizeof thr);
    if (total > 0)
        snprintf(text, sizeof text, " %5.1f%% %s / %s  %s/s%s", 100.0 * (double)done / (double)total, d, tot, rate,
                 thr);
    else
        snprintf(text, sizeof text, "%s  %s/s%s", d, rate, thr);
    cli_progress_draw(p, text, total > 0 ? (double)done / (double)total : -1);
}

int cli_progress_cb(int64_t done, int64_t total, void *payload) {
    cli_progress *p = payload;
    double t = now_s();
    /* The update that completes the bytes is never skipped; later heartbeats
     * (while the upload completes) keep the cadence. */
    int completes = done == total && p->last_done != total;
    if (!cli_progress_due(p, completes)) return 0;
    p->last_done = done;
    if (p->json) {
        json_record(p, done, total, t);
        p->drawn = 1;
    } else {
        draw(p, done, total, t);
    }
    return 0;
}

void cli_progress_end(cli_progress *p) {
    if (p->drawn && !p->json) fputc('\n', stderr);
}
