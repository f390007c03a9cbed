/* The part scheduler with several transfers on one list, against a small
 * HTTP server in this process (127.0.0.1, an ephemeral port): parts are fed
 * round-robin across transfers, the connection limit holds over the whole
 * list, a failing transfer stops alone while the others complete, and a
 * retryable answer goes through the one retry path (counted by cause). */
#include "scheduler.h"
#include "params_internal.h"
#include "s3xfer/client.h"
#include "tap.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- the server: 404 for keys with "bad", 503 once per path for "flaky",
 * else 200 "ok"; keys "held-N" wait 2 s before the first answer for N = 10,
 * keys "late-N" 400 ms before every answer for N >= 8; keys "lasthold-N" wait
 * 2 s before the first answer for N = 15; keys "wave*-N" 700 ms before the
 * first answer for N = 1-3, 200 ms before every other; keys "starve*-N" 900 ms
 * before the first answer for N = 1-6, 100 ms before every other; keys
 * "midwait-N" the same for N = 10-14 -------------------------------------- */

static pthread_mutex_t seen_mu = PTHREAD_MUTEX_INITIALIZER;
static char seen[256][128];
static int nseen;

static int first_time(const char *path) {
    pthread_mutex_lock(&seen_mu);
    int found = 0;
    for (int i = 0; i < nseen && !found; i++) found = !strcmp(seen[i], path);
    if (!found && nseen < 256) snprintf(seen[nseen++], sizeof seen[0], "%s", path);
    pthread_mutex_unlock(&seen_mu);
    return !found;
}

static void *serve_conn(void *arg) {
    int fd = (int)(intptr_t)arg;
    char buf[8192];
    size_t have = 0;
    for (;;) {
        char *end = NULL;
        while (!(end = memmem(buf, have, "\r\n\r\n", 4))) {
            if (have == sizeof buf) goto out;
            ssize_t n = read(fd, buf + have, sizeof buf - have);
            if (n <= 0) goto out;
            have += (size_t)n;
        }
        char method[16] = "", path[128] = "";
        if (sscanf(buf, "%15s %127s", method, path) != 2) goto out;
        size_t used = (size_t)(end + 4 - buf);
        memmove(buf, buf + used, have - used);
        have -= used;
        const char *dash = strrchr(path, '-');
        int index = dash ? atoi(dash + 1) : -1;
        if (strstr(path, "held") && index == 10 && first_time(path)) usleep(2000 * 1000);
        if (strstr(path, "late") && index >= 8) usleep(400 * 1000);
        if (strstr(path, "lasthold") && index == 15 && first_time(path)) usleep(2000 * 1000);
        if (strstr(path, "wave")) usleep(index >= 1 && index <= 3 && first_time(path) ? 700 * 1000 : 200 * 1000);
        if (strstr(path, "starve")) usleep(index >= 1 && index <= 6 && first_time(path) ? 900 * 1000 : 100 * 1000);
        if (strstr(path, "midwait")) usleep(index >= 10 && index <= 14 && first_time(path) ? 900 * 1000 : 100 * 1000);
        const char *resp;
        if (strstr(path, "bad"))
            resp = "HTTP/1.1 404 Not Found\r\nContent-Type: application/xml\r\nContent-Length: 62\r\n\r\n"
                   "<Error><Code>NoSuchKey</Code><Message>no</Message></Error>\n\n\n\n";
        else if (strstr(path, "flaky") && first_time(path))
            resp = "HTTP/1.1 503 Slow Down\r\nContent-Length: 0\r\n\r\n";
        else
            resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        size_t len = strlen(resp);
        if (write(fd, resp, len) != (ssize_t)len) goto out;
    }
out:
    close(fd);
    return NULL;
}

static void *serve(void *arg) {
    int lfd = *(int *)arg;
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) return NULL;
        pthread_t th;
        if (pthread_create(&th, NULL, serve_conn, (void *)(intptr_t)fd) == 0) pthread_detach(th);
        else close(fd);
    }
}

/* ---- a kind of N GETs ------------------------------------------------------------- */

typedef struct tpart {
    s3x_part base;
    int index;
    char key[64];
} tpart;

typedef struct tctx {
    int id;
    const char *prefix;
    int nparts, next, taken;
} tctx;

static int feed_order[256], nfeeds;
static int max_conns_seen;

static int t_feed(s3x_transfer *t, s3x_part *p) {
    tctx *c = t->ctx;
    if (c->next >= c->nparts) return 0;
    tpart *tp = (tpart *)p;
    tp->index = c->next++;
    snprintf(tp->key, sizeof tp->key, "%s-%d", c->prefix, tp->index);
    if (nfeeds < 256) feed_order[nfeeds++] = c->id;
    p->attempts = 0;
    p->state = S3X_PART_QUEUED;
    return 1;
}

static int on_loops; /* parts may run on the client's receiving loops */

static int t_prepare(s3x_transfer *t, s3x_part *p) {
    s3x_http_req *r = &p->req;
    r->loop_ok = on_loops;
    r->op = "GetObject";
    r->method = "GET";
    r->bucket = "bkt";
    r->key = ((tpart *)p)->key;
    r->nquery = r->nheaders = 0;
    /* this part is about to go in flight */
    if (t->sched->conns + 1 > max_conns_seen) max_conns_seen = t->sched->conns + 1;
    return 0;
}

static int t_take(s3x_transfer *t, s3x_part *p) {
    tctx *c = t->ctx;
    c->taken++;
    return p->req.resp_body.len == 2 ? S3X_PART_FREE : -1;
}

static int t_more(s3x_transfer *t) {
    tctx *c = t->ctx;
    return c->next < c->nparts;
}

static void t_moving(s3x_transfer *t, int64_t *done, int64_t *total) {
    tctx *c = t->ctx;
    *done = c->taken;
    *total = c->nparts;
}

static const s3x_kind test_kind = {
    .name = "test",
    .part_size = sizeof(tpart),
    .feed = t_feed,
    .prepare = t_prepare,
    .take = t_take,
    .more = t_more,
    .moving = t_moving,
};

typedef struct one {
    tctx c;
    s3x_xfer x;
    s3x_result res;
    s3x_transfer t;
} one;

static void one_init_slow(one *o, s3x_client *cl, int id, const char *prefix, int nparts, int64_t slow_part) {
    memset(o, 0, sizeof *o);
    o->c.id = id;
    o->c.prefix = prefix;
    o->c.nparts = nparts;
    s3x_xfer_init(&o->x, cl, S3X_SCOPE_DOWNLOAD);
    s3x_xfer_set(&o->x, S3X_PARAM_SLOW_PART_TIMEOUT, slow_part);
    s3x_xfer_begin(&o->x, &o->res);
    o->t.what = "test of";
    o->t.bucket = "bkt";
    o->t.key = prefix;
}

static void one_init(one *o, s3x_client *cl, int id, const char *prefix, int nparts) {
    one_init_slow(o, cl, id, prefix, nparts, S3X_SLOW_PART_OFF);
}

/* One transfer of nparts GETs with this slow-part setting, alone on a
 * scheduler of 4 connections, run to its end: the run's result. */
static int run_alone(s3x_client *cl, s3x_sched *s, one *o, const char *prefix, int nparts, int64_t slow_part) {
    s3x_sched_init(s, cl, 4);
    one_init_slow(o, cl, 1, prefix, nparts, slow_part);
    s3x_sched_add(s, &o->t, &test_kind, &o->c, &o->x, 4, 0);
    return s3x_sched_run(s);
}

static void one_done(s3x_sched *s, one *o) {
    s3x_sched_remove(s, &o->t);
    s3x_xfer_end(&o->x);
    s3x_xfer_destroy(&o->x);
}

/* A DYNAMIC upload-kind transfer of nparts (5 MiB parts) on lanes
 * connections, from nothing (no carry, as a fresh client's first transfer),
 * with the two benchmark-only switches as given, run to its end: its
 * first-byte re-sends. */
static long long run_first_wave(s3x_client *cl, const char *prefix, int lanes, int nparts, int no_waiting,
                                int no_broad) {
    s3x_sched s;
    one w;
    s3x_sched_init(&s, cl, lanes);
    memset(&w, 0, sizeof w);
    w.c.id = 1;
    w.c.prefix = prefix;
    w.c.nparts = nparts;
    s3x_xfer_init(&w.x, cl, S3X_SCOPE_UPLOAD);
    s3x_xfer_set(&w.x, S3X_PARAM_SLOW_PART_TIMEOUT, S3X_SLOW_PART_DYNAMIC);
    s3x_xfer_set(&w.x, S3X_PARAM_PART_SIZE, 5 << 20);
    s3x_xfer_begin(&w.x, &w.res);
    w.t.what = "test of";
    w.t.bucket = "bkt";
    w.t.key = prefix;
    w.x.fbt.no_waiting = no_waiting;
    w.x.fbt.no_broad = no_broad;
    w.x.fbt.no_carry = 1;
    s3x_sched_add(&s, &w.t, &test_kind, &w.c, &w.x, lanes, 0);
    CHECK(s3x_sched_run(&s) == 0, "%s: the transfer succeeds: %s", prefix, s3x_error_last()->message);
    CHECK(w.c.taken == nparts, "%s: every part taken (%d/%d)", prefix, w.c.taken, nparts);
    long long resends = (long long)w.res.retries_first_byte;
    one_done(&s, &w);
    return resends;
}

/* A good and a bad (404) transfer of 10 parts on one list of 4
 * connections: the bad one stops alone with its own error, the good one
 * completes. */
static void good_and_bad(s3x_client *cl, const char *gp, const char *bp) {
    s3x_sched s;
    s3x_sched_init(&s, cl, 4);
    one good, bad;
    one_init(&good, cl, 1, gp, 10);
    one_init(&bad, cl, 2, bp, 10);
    s3x_sched_add(&s, &good.t, &test_kind, &good.c, &good.x, 4, 0);
    s3x_sched_add(&s, &bad.t, &test_kind, &bad.c, &bad.x, 4, 0);
    CHECK(s3x_sched_run(&s) == -1, "%s: the run reports a failure", gp);
    CHECK(good.c.taken == 10 && !good.x.failed, "%s: the good transfer completes (%d/10)", gp, good.c.taken);
    CHECK(bad.x.failed && bad.c.taken == 0, "%s: the bad transfer failed, nothing taken", bp);
    int code = s3x_error_restore(&bad.x.err);
    CHECK(code == S3X_EHTTP && s3x_error_last()->http_status == 404, "%s: its own error: %d %s", bp, code,
          s3x_error_last()->message);
    one_done(&s, &good);
    one_done(&s, &bad);
}

/* A DYNAMIC transfer of nparts whose one held part (the server holds it 2 s)
 * is cut once and re-sent, not waited out. */
static void held_once(s3x_client *cl, const char *prefix, int nparts) {
    s3x_sched s;
    one h;
    double t0 = s3x_now();
    CHECK(run_alone(cl, &s, &h, prefix, nparts, S3X_SLOW_PART_DYNAMIC) == 0, "%s: the transfer succeeds: %s", prefix,
          s3x_error_last()->message);
    double took = s3x_now() - t0;
    CHECK(h.c.taken == nparts, "%s: every part taken (%d/%d)", prefix, h.c.taken, nparts);
    CHECK(h.res.retries_first_byte == 1, "%s: the held part re-sent once (%lld re-sends)", prefix,
          (long long)h.res.retries_first_byte);
    CHECK(took < 1.5, "%s: cut, not waited out: %.2f s", prefix, took);
    one_done(&s, &h);
}

typedef struct cancel_arg {
    s3x_xfer *x;
    s3x_client *cl;
} cancel_arg;

/* Cancels a transfer 600 ms after it starts (from another thread, as a
 * caller's cancel does), waking the loop. */
static void *cancel_later(void *arg) {
    cancel_arg *a = arg;
    usleep(600 * 1000);
    atomic_store(&a->x->cancel, 1);
    s3x_http_wakeup(a->cl);
    return NULL;
}

int main(void) {
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 64) ||
        getsockname(lfd, (struct sockaddr *)&a, &alen)) {
        printf("FAIL cannot listen on 127.0.0.1\n");
        return 1;
    }
    pthread_t server;
    pthread_create(&server, NULL, serve, &lfd);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", ntohs(a.sin_port));
    s3x_client *cl = NULL;
    s3x_client_new(&cl);
    s3x_client_set_string(cl, S3X_CLIENT_ENDPOINT_URL, url);
    s3x_client_set_string(cl, S3X_CLIENT_REGION, "us-east-1");
    s3x_client_set_string(cl, S3X_CLIENT_ACCESS_KEY, "AKIDTEST");
    s3x_client_set_string(cl, S3X_CLIENT_SECRET_KEY, "secret");
    CHECK(s3x_client_resolve(cl) == 0, "client resolves: %s", s3x_error_last()->message);

    /* A big and a small transfer on one list, two connections: fed in turn,
     * so the small one is not starved; the limit holds over both. */
    {
        s3x_sched s;
        s3x_sched_init(&s, cl, 2);
        one big, small;
        one_init(&big, cl, 1, "big", 20);
        one_init(&small, cl, 2, "small", 3);
        nfeeds = 0;
        max_conns_seen = 0;
        CHECK(s3x_sched_add(&s, &big.t, &test_kind, &big.c, &big.x, 4, 0) == 0, "add big");
        CHECK(s3x_sched_add(&s, &small.t, &test_kind, &small.c, &small.x, 4, 0) == 0, "add small");
        CHECK(s3x_sched_run(&s) == 0, "both succeed: %s", s3x_error_last()->message);
        CHECK(big.c.taken == 20 && small.c.taken == 3, "every part taken once: big %d/20, small %d/3", big.c.taken,
              small.c.taken);
        CHECK(max_conns_seen <= 2, "connection limit 2 over the list, saw %d", max_conns_seen);
        int small_in_first6 = 0;
        for (int i = 0; i < 6 && i < nfeeds; i++) small_in_first6 += feed_order[i] == 2;
        CHECK(small_in_first6 == 3, "the small transfer's 3 parts are among the first 6 fed (got %d)",
              small_in_first6);
        CHECK(big.res.requests == 20 && small.res.requests == 3, "requests counted per transfer: %lld, %lld",
              (long long)big.res.requests, (long long)small.res.requests);
        one_done(&s, &big);
        one_done(&s, &small);
        CHECK(s.head == NULL && s.tail == NULL, "the list is empty after removing both");
    }

    /* One transfer fails (404): it stops alone with its own error, the
     * other completes. */
    good_and_bad(cl, "good", "bad");

    /* A 503 per part: retried through the one retry path and counted. */
    {
        s3x_sched s;
        s3x_sched_init(&s, cl, 3);
        one f;
        one_init(&f, cl, 1, "flaky", 5);
        s3x_sched_add(&s, &f.t, &test_kind, &f.c, &f.x, 3, 0);
        CHECK(s3x_sched_run(&s) == 0, "the flaky transfer succeeds: %s", s3x_error_last()->message);
        CHECK(f.c.taken == 5, "every part taken (%d/5)", f.c.taken);
        CHECK(f.res.requests == 10 && f.res.retries == 5 && f.res.retries_http == 5,
              "requests %lld (want 10), retries %lld (want 5), http retries %lld (want 5)",
              (long long)f.res.requests, (long long)f.res.retries, (long long)f.res.retries_http);
        one_done(&s, &f);
    }

    /* A cancel before the run: the transfer fails with ECANCELLED naming
     * the object, without a request. */
    {
        s3x_sched s;
        s3x_sched_init(&s, cl, 2);
        one c;
        one_init(&c, cl, 1, "cancelled", 5);
        s3x_sched_add(&s, &c.t, &test_kind, &c.c, &c.x, 2, 0);
        atomic_store(&c.x.cancel, 1);
        CHECK(s3x_sched_run(&s) == -1, "a cancelled run fails");
        int code = s3x_error_restore(&c.x.err);
        CHECK(code == S3X_ECANCELLED && strstr(s3x_error_last()->message, "test of s3://bkt/cancelled cancelled"),
              "cancel error: %d %s", code, s3x_error_last()->message);
        CHECK(c.res.requests == 0, "no request made (%lld)", (long long)c.res.requests);
        one_done(&s, &c);
    }

    /* The learned slow-part timeout (DYNAMIC) applied to requests in flight
     * (scheduler.c, fb_due). First a part held 2 s while the parts sent
     * after it answer at once: it was overtaken, so it is cut at the
     * learned timeout (150 ms, the floor, over sub-millisecond answers),
     * not waited out. */
    held_once(cl, "held", 24);

    /* The last of 16 parts held 2 s, the three sent just before it
     * answered at once: nothing more is to be sent, so nothing can be sent
     * after it, but its siblings sent within a timeout before it were
     * answered and it was not: cut at one timeout, not waited out. */
    held_once(cl, "lasthold", 16);

    /* 16 parts, every one from the 9th on 400 ms late: the last four are
     * sent when the 9th-12th answer late, with nothing more to send and too
     * few late answers for the window to re-base. Every answer within the
     * timeout came to a request sent long before them: the server is slow
     * for all, so they are not cut at one timeout (the rule before cut
     * them, as the last parts of a short transfer, at 150 ms). */
    {
        s3x_sched s;
        one l;
        CHECK(run_alone(cl, &s, &l, "latesmall", 16, S3X_SLOW_PART_DYNAMIC) == 0,
              "the short late transfer succeeds: %s", s3x_error_last()->message);
        CHECK(l.c.taken == 16, "every part taken (%d/16)", l.c.taken);
        CHECK(l.res.retries_first_byte == 0, "its last parts, slow like the others: %lld re-sends, want none",
              (long long)l.res.retries_first_byte);
        one_done(&s, &l);
    }

    /* Then every part from the 9th on answers 400 ms late, the learned
     * timeout still 150 ms: the requests in flight wait alike and none sent
     * after another is answered first, so none is cut (the scheduler before
     * these rules re-sent 5-8 of them), and the timeout follows the late
     * answers (the re-base) before the last parts, which nothing could
     * overtake, are timed at one timeout. The four sent together answer
     * together: one still waiting when the other three have ended is not
     * alone (their lanes go on), so it is not cut either. */
    {
        s3x_sched s;
        one l;
        CHECK(run_alone(cl, &s, &l, "late", 24, S3X_SLOW_PART_DYNAMIC) == 0, "the late transfer succeeds: %s",
              s3x_error_last()->message);
        CHECK(l.c.taken == 24, "every part taken (%d/24)", l.c.taken);
        CHECK(l.res.retries_first_byte == 0, "a server slow for everyone: %lld re-sends, want none",
              (long long)l.res.retries_first_byte);
        CHECK(s3x_fbt_current(&l.x.fbt) > 400, "the timeout rose above the late answers: %lld ms",
              (long long)s3x_fbt_current(&l.x.fbt));
        one_done(&s, &l);
    }

    /* A first wave of four requests, three of them answered after 700 ms,
     * the other lane's answers after 200 ms (an upload's starting timeout,
     * 1.6 s, holds until the third answer, at 600 ms): the window's timeout
     * is then 3 medians, 600 ms, and the answers of requests sent after the
     * three would have them cut at once. Counted at their ages
     * (s3x_fbt_with_waiting), the three hold the timeout above them until
     * they answer (the fourth answer, at 800 ms, would outnumber them);
     * with S3X_FBT_WAITING=off's rule they are cut. */
    /* (three of four lanes waiting: the broad hold would keep them too, so it is off) */
    long long n = run_first_wave(cl, "wave", 4, 12, 0, 1);
    CHECK(n == 0, "the waiting counted: %lld re-sends of the slow first wave, want none", n);
    n = run_first_wave(cl, "wavenot", 4, 12, 1, 1);
    CHECK(n == 3, "answers alone: the three slow first-wave parts cut (%lld re-sends)", n);

    /* Eight lanes, six of the first wave answered after 900 ms, the other
     * two lanes' answers after 100 ms, as SeaweedFS now and then serves two
     * connections while six wait at an upload's start. The two lanes'
     * answers outnumber the six and bring the timeout to 3 medians, 300 ms,
     * with the waiting counted too: the broad hold (scheduler.c) keeps the
     * six for 4 timeouts, and they answer; without it they are cut. Five of
     * eight held the same way but sent after the first answers ("midwait")
     * are a tail, and the hold leaves them to be cut. */
    n = run_first_wave(cl, "starve", 8, 24, 0, 0);
    CHECK(n == 0, "most of the first wave waiting: %lld re-sends of the six, want none", n);
    n = run_first_wave(cl, "starvenot", 8, 24, 0, 1);
    CHECK(n >= 3, "without the broad hold the six are cut (%lld re-sends)", n);
    n = run_first_wave(cl, "midwait", 8, 24, 0, 0);
    CHECK(n >= 3, "five held after the first answers are cut (%lld re-sends)", n);

    /* The same engine with two receiving loops beside the caller's thread
     * (S3X_PARAM_RECEIVE_THREADS 3, every part marked loop_ok): parts run
     * on all three, a failing transfer still stops alone, a held part on a
     * loop is cut and re-sent, and a cancel takes parts out of the loops
     * while they wait for their answers. */
    CHECK(s3x_client_set(cl, S3X_PARAM_RECEIVE_THREADS, 3) == 0, "receive_threads 3");
    on_loops = 1;
    {
        s3x_sched s;
        s3x_sched_init(&s, cl, 6);
        one big, small;
        one_init(&big, cl, 1, "loopbig", 40);
        one_init(&small, cl, 2, "loopsmall", 5);
        int64_t before = cl->loop_started;
        CHECK(s3x_sched_add(&s, &big.t, &test_kind, &big.c, &big.x, 6, 0) == 0, "loops: add big");
        CHECK(s3x_sched_add(&s, &small.t, &test_kind, &small.c, &small.x, 6, 0) == 0, "loops: add small");
        CHECK(s3x_sched_run(&s) == 0, "loops: both succeed: %s", s3x_error_last()->message);
        CHECK(big.c.taken == 40 && small.c.taken == 5, "loops: every part taken once: %d/40, %d/5", big.c.taken,
              small.c.taken);
        int64_t on = cl->loop_started - before;
        CHECK(on > 0 && on < 45, "loops: parts on the loops and on the caller's thread (%lld of 45 on loops)",
              (long long)on);
        one_done(&s, &big);
        one_done(&s, &small);
    }
    good_and_bad(cl, "loopgood", "loopbad");
    held_once(cl, "loopheld", 24);
    {
        s3x_sched s;
        one c;
        s3x_sched_init(&s, cl, 4);
        one_init(&c, cl, 1, "loopheldc", 24); /* part 10 held 2 s, no slow-part timeout */
        s3x_sched_add(&s, &c.t, &test_kind, &c.c, &c.x, 4, 0);
        cancel_arg ca = {&c.x, cl};
        pthread_t th;
        pthread_create(&th, NULL, cancel_later, &ca);
        double t0 = s3x_now();
        CHECK(s3x_sched_run(&s) == -1, "loops: a run cancelled mid-way fails");
        double took = s3x_now() - t0;
        pthread_join(th, NULL);
        int code = s3x_error_restore(&c.x.err);
        CHECK(code == S3X_ECANCELLED, "loops: cancelled: %d %s", code, s3x_error_last()->message);
        CHECK(took < 1.5, "loops: the held part was taken out, not waited for: %.2f s", took);
        one_done(&s, &c);
    }
    on_loops = 0;

    s3x_client_free(cl);
    shutdown(lfd, SHUT_RDWR);
    close(lfd);
    pthread_join(server, NULL);
    return tap_summary("test_scheduler");
}
