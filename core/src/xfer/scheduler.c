/* The part scheduler: see scheduler.h for the state machine and what a kind
 * supplies. */
#include "scheduler.h"
#include "error.h"
#include "filewriter.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

void s3x_sched_init(s3x_sched *s, s3x_client *c, int max_conns) {
    memset(s, 0, sizeof *s);
    s->client = c;
    s->max_conns = max_conns > 0 ? max_conns : 1;
}

void s3x_sched_fini(s3x_sched *s) {
    s3x_wpool_free(s->wpool);
    s->wpool = NULL;
}

int s3x_sched_add(s3x_sched *s, s3x_transfer *t, const s3x_kind *kind, void *ctx, s3x_xfer *x, int nparts,
                  int nside) {
    t->kind = kind;
    t->ctx = ctx;
    t->x = x;
    t->nparts = nparts;
    t->nside = nside;
    t->inflight = 0;
    t->finished = 0;
    t->ok = 0;
    t->answered_sent = 0;
    t->last_done = 0;
    t->first_answer = 0;
    t->next = NULL;
    t->sched = s;
    t->parts = calloc((size_t)(nparts + nside), kind->part_size);
    if (!t->parts) return s3x_seterr(S3X_ENOMEM, "out of memory");
    for (int i = 0; i < nparts + nside; i++) {
        s3x_part *p = s3x_transfer_part(t, i);
        p->t = t;
        p->side = i >= nparts;
    }
    if (s->tail) s->tail->next = t;
    else s->head = t;
    s->tail = t;
    if (!s->cursor) s->cursor = t;
    return 0;
}

void s3x_sched_remove(s3x_sched *s, s3x_transfer *t) {
    if (t->parts) {
        for (int i = 0; i < t->nparts + t->nside; i++) {
            s3x_part *p = s3x_transfer_part(t, i);
            if (t->kind->release) t->kind->release(t, p);
            s3x_http_req_reset(s->client, &p->req);
        }
        free(t->parts);
        t->parts = NULL;
    }
    s3x_transfer **pp = &s->head;
    s3x_transfer *prev = NULL;
    while (*pp && *pp != t) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (*pp) *pp = t->next;
    if (s->tail == t) s->tail = prev;
    if (s->cursor == t) s->cursor = t->next ? t->next : s->head;
}

/* ---- one part ------------------------------------------------------------------ */

static void on_part_done(s3x_http_req *r, void *payload);
static void note_answer(s3x_transfer *t, const s3x_http_req *r, int64_t fbt);

/* Starts the next attempt of a QUEUED or RETRY_WAIT part. */
static int start(s3x_transfer *t, s3x_part *p) {
    s3x_sched *s = t->sched;
    s3x_http_req *r = &p->req;
    s3x_http_req_reset(s->client, r);
    p->fb_timeout = 0;
    p->fb_floor_ms = s3x_fbt_learned(&t->x->fbt) ? (double)s3x_fbt_current(&t->x->fbt) : 0;
    p->attempts++;
    t->x->res->requests++;
    int rc = t->kind->prepare(t, p);
    if (rc) return rc;
    if (!p->side) s3x_xfer_carry_in(t->x, r);
    r->on_done = on_part_done;
    r->done_payload = p;
    if (!(rc = s3x_http_prepare(s->client, r))) {
        s3x_xfer_tune(t->x, r);
        rc = s3x_http_start(s->client, r);
    }
    if (rc) return rc;
    p->state = S3X_PART_INFLIGHT;
    t->inflight++;
    if (!p->side) s->conns++;
    return 0;
}

/* A part's request finished (or was cut): the kind's check, the retry
 * policy, then the kind takes it or the transfer fails. */
static void on_part_done(s3x_http_req *r, void *payload) {
    s3x_part *p = payload;
    s3x_transfer *t = p->t;
    s3x_xfer *x = t->x;
    t->inflight--;
    if (!p->side) t->sched->conns--;
    p->state = S3X_PART_FREE;
    if (!p->side) {
        note_answer(t, r, s3x_fbt_current(&x->fbt));
        t->last_done = s3x_now();
        s3x_xfer_trace_attempt(x, r, (int)(((unsigned char *)p - t->parts) / t->kind->part_size), p->attempts,
                               p->fb_timeout, p->fb_timeout ? p->fb_timeout_used : 0, p->fb_floor_ms, t->inflight);
    }
    if (t->kind->check && t->kind->check(t, p) == S3X_CHECK_HANDLED) return;
    double delay = 0;
    int v = s3x_xfer_judge(x, r, p->attempts, p->fb_timeout, &delay);
    if (p->fb_timeout) s3x_xfer_learn_cut(x, p->fb_timeout_used);
    if (v == S3X_REQ_RETRY) {
        p->state = S3X_PART_RETRY_WAIT;
        p->retry_at = s3x_now() + delay;
        return;
    }
    if (v == S3X_REQ_FAIL) {
        if (!t->kind->failed || t->kind->failed(t, p)) s3x_xfer_fail(x);
        if (t->kind->release) t->kind->release(t, p);
        return;
    }
    /* A side request (the download's HEAD) is not a part: the first-byte
     * timeout learns from parts only. */
    if (!p->side) s3x_xfer_learn(x, r);
    int next = t->kind->take(t, p);
    if (next < 0) {
        s3x_xfer_fail(x);
        if (t->kind->release) t->kind->release(t, p);
        return;
    }
    p->state = next;
}

/* ---- the loop -------------------------------------------------------------------- */

/* Stops a transfer: in-flight parts are taken off the loop, buffers given
 * back; unless force, a draining part in flight is left to finish. Returns
 * the number of parts left in flight. */
static int stop(s3x_transfer *t, int force) {
    int left = 0;
    for (int i = 0; i < t->nparts + t->nside; i++) {
        s3x_part *p = s3x_transfer_part(t, i);
        if (p->state == S3X_PART_INFLIGHT && p->drain && !force) {
            left++;
            continue;
        }
        if (p->state == S3X_PART_INFLIGHT) {
            s3x_http_abort(t->sched->client, &p->req);
            t->inflight--;
            if (!p->side) t->sched->conns--;
        }
        if (t->kind->release) t->kind->release(t, p);
        p->state = S3X_PART_FREE;
    }
    return left;
}

/* Starts the parts that are due: QUEUED ones and retries whose backoff ended. */
static int held(s3x_transfer *t) { return t->kind->hold && t->kind->hold(t); }

/* The client's adaptive rate, asked before every request of an adaptive
 * transfer: while the server throttles, requests go at its pace, new parts
 * as well as retries. */
static int may_send(s3x_transfer *t) {
    if (t->x->params[S3X_PARAM_RETRY_MODE] != S3X_RETRY_MODE_ADAPTIVE) return 1;
    return s3x_rl_may_send(&t->sched->client->rate, s3x_now());
}

/* Whether a new part may be fed now (the same gate, without taking a slot). */
static int rate_open(s3x_transfer *t) {
    if (t->x->params[S3X_PARAM_RETRY_MODE] != S3X_RETRY_MODE_ADAPTIVE) return 1;
    double next = s3x_rl_next(&t->sched->client->rate);
    return next <= 0 || next <= s3x_now();
}

static void start_due(s3x_transfer *t, double now) {
    int hold = held(t);
    for (int i = 0; i < t->nparts + t->nside && !t->x->failed; i++) {
        s3x_part *p = s3x_transfer_part(t, i);
        if (hold && !p->side) continue;
        if (p->state == S3X_PART_QUEUED || (p->state == S3X_PART_RETRY_WAIT && p->retry_at <= now)) {
            if (!may_send(t)) return;
            if (start(t, p)) s3x_xfer_fail(t->x);
        }
    }
}

/* Feeds FREE parts while connections are free, round-robin over the
 * transfers one part at a time, so every transfer gets its turn. */
static void feed_all(s3x_sched *s) {
    int progress = 1;
    while (progress && s->conns < s->max_conns) {
        progress = 0;
        s3x_transfer *t = s->cursor ? s->cursor : s->head;
        for (s3x_transfer *first = t; t && s->conns < s->max_conns;) {
            if (!t->finished && !t->x->failed && t->kind->more(t) && !held(t) && rate_open(t)) {
                for (int i = 0; i < t->nparts; i++) {
                    s3x_part *p = s3x_transfer_part(t, i);
                    if (p->state != S3X_PART_FREE) continue;
                    int k = t->kind->feed(t, p);
                    if (k < 0) {
                        s3x_xfer_fail(t->x);
                    } else if (k > 0 && may_send(t)) { /* else QUEUED: start_due starts it */
                        if (start(t, p)) s3x_xfer_fail(t->x);
                        else progress = 1;
                    }
                    break; /* one part per transfer per round */
                }
            }
            t = t->next ? t->next : s->head;
            s->cursor = t;
            if (t == first) break;
        }
    }
}

static int busy(const s3x_transfer *t) {
    for (int i = 0; i < t->nparts + t->nside; i++)
        if (s3x_transfer_part(t, i)->state != S3X_PART_FREE) return 1;
    return t->kind->pending && t->kind->pending((s3x_transfer *)t);
}

/* ---- the first-byte timeout of the attempts in flight ---------------------------
 *
 * A part's attempt waits for its first byte from t_sent, when the last byte
 * of the request went out: before that the time is the upload's own (a
 * 64 MiB part takes a while to send), not the server's; for a request
 * without a body t_sent is t_start, so a GET is timed from its start. It is
 * cut after the timeout in force (fixed, or learned: retry.h). A learned
 * (DYNAMIC) timeout is applied with two more rules (S3X_FBT_UNSEEN_MULT):
 * - an attempt keeps the learned timeout it started under when the timeout
 *   falls (the server got faster again: what was sent before answers at the
 *   old pace), and rises with it;
 * - it is cut at one timeout only when an attempt sent after it has been
 *   answered within the timeout, or none could be (it is the only one in
 *   flight and none ended since it was sent: the transfer's only lane, a
 *   download's probe). Otherwise the later requests wait too, which says
 *   the server is slow for all, not that this one is stuck: it waits 4
 *   timeouts. When nothing more is to be sent (a transfer's last parts),
 *   nothing can be sent after it: an attempt sent at most one timeout
 *   before it and answered within the timeout stands in (its siblings were
 *   answered, it was not). */

/* An attempt's first byte came within the timeout fbt (ms): the latest such
 * t_sent is kept (an answer slower than the timeout says nothing about
 * attempts that wait). */
static void note_answer(s3x_transfer *t, const s3x_http_req *r, int64_t fbt) {
    double fb = s3x_req_first_byte(r); /* r may be receiving on another thread */
    if (fb > 0 && (t->first_answer <= 0 || fb < t->first_answer)) t->first_answer = fb;
    if (fb > 0 && r->t_sent > t->answered_sent && fbt > 0 && (fb - r->t_sent) * 1000.0 <= (double)fbt)
        t->answered_sent = r->t_sent;
}

/* What a transfer's due times depend on besides each attempt's own clock
 * (with t->answered_sent, which fb_look brings up to date, and t->last_done). */
typedef struct fb_view {
    int64_t fbt;      /* the timeout in force, ms; 0: none (nothing else is looked at) */
    int relative;     /* DYNAMIC (ROBUST) */
    int waiting;      /* attempts in flight */
    int more;         /* parts left to send (to feed, queued or waiting to retry) */
} fb_view;

static void fb_look(s3x_transfer *t, fb_view *v) {
    v->fbt = s3x_fbt_current(&t->x->fbt);
    v->relative = v->waiting = v->more = 0;
    if (v->fbt <= 0) return;
    v->relative = s3x_fbt_relative(&t->x->fbt);
    v->more = t->kind->more(t);
    double ages[S3X_FBT_WAITING_MAX], now = s3x_now();
    int nages = 0;
    for (int i = 0; i < t->nparts; i++) {
        s3x_part *p = s3x_transfer_part(t, i);
        if (p->state == S3X_PART_QUEUED || p->state == S3X_PART_RETRY_WAIT) v->more = 1;
        if (p->state != S3X_PART_INFLIGHT) continue;
        v->waiting++;
        note_answer(t, &p->req, v->fbt);
        const s3x_http_req *r = &p->req;
        if (r->t_sent > 0 && s3x_req_first_byte(r) <= 0 && nages < S3X_FBT_WAITING_MAX)
            ages[nages++] = (now - r->t_sent) * 1000.0;
    }
    /* The attempts waiting count in the relative timeout at their ages (retry.h). */
    if (v->relative) v->fbt = s3x_fbt_with_waiting(&t->x->fbt, ages, nages);
}

/* When p's attempt in flight is to be cut (s3x_now() clock), 0: not timed. */
static double fb_due(const s3x_transfer *t, const fb_view *v, const s3x_part *p) {
    const s3x_http_req *r = &p->req;
    if (v->fbt <= 0 || r->t_sent <= 0 || s3x_req_first_byte(r) > 0) return 0;
    double ms = (double)v->fbt;
    if (v->relative) {
        if (p->fb_floor_ms > ms) ms = p->fb_floor_ms;
        /* Could another request show it stuck rather than the server slow:
         * another in flight, or one ended since it was sent. */
        int could = v->waiting > 1 || t->last_done > r->t_sent;
        /* Did one: answered within the timeout and sent after it, or, with
         * nothing more to send, sent at most one timeout before it. */
        double since = v->more ? r->t_sent : r->t_sent - (double)v->fbt / 1000.0;
        if (could && !(t->answered_sent > since) && S3X_FBT_UNSEEN_MULT * (double)v->fbt > ms)
            ms = S3X_FBT_UNSEEN_MULT * (double)v->fbt;
    }
    return r->t_sent + ms / 1000.0;
}

/* The poll wait: until the earliest backoff deadline or first-byte deadline
 * of any transfer, at most 100 ms (cancel and heartbeats are looked at
 * between polls). */
static int poll_timeout_ms(s3x_sched *s) {
    double now = s3x_now(), next = now + 0.1;
    /* Requests held at the rate's gate go when it opens. */
    double gate = s3x_rl_next(&s->client->rate);
    if (gate > now && gate < next) next = gate;
    for (s3x_transfer *t = s->head; t; t = t->next) {
        if (t->finished) continue;
        fb_view v;
        fb_look(t, &v);
        for (int i = 0; i < t->nparts + t->nside; i++) {
            s3x_part *p = s3x_transfer_part(t, i);
            if (p->state == S3X_PART_RETRY_WAIT && p->retry_at < next) next = p->retry_at;
            if (p->state == S3X_PART_INFLIGHT && !p->side) {
                double due = fb_due(t, &v, p);
                if (due > 0 && due < next) next = due;
            }
        }
    }
    double ms = (next - now) * 1000.0;
    return ms < 1 ? 1 : (int)ms;
}

/* Most of the first wave waiting (retry.h, S3X_FBT_BROAD_MIN): a server
 * that answers two connections while the six other parts sent with them
 * wait, as SeaweedFS does now and then at an upload's start, would have the
 * six cut by the answers of the two and re-sent behind the same work. The
 * attempts sent before the transfer's first answer that have waited half
 * the timeout or longer, when they are at least S3X_FBT_BROAD_MIN and more
 * than half its lanes, then keep UNSEEN_MULT timeouts while they wait (their
 * floor), so the answers that follow cannot cut them at one. Later attempts
 * are left alone: a tail of held ones can fill most lanes at once too. */
static int first_wave_waiting(const s3x_transfer *t, const s3x_part *p, double now, double half_s) {
    const s3x_http_req *r = &p->req;
    return p->state == S3X_PART_INFLIGHT && r->t_sent > 0 && s3x_req_first_byte(r) <= 0 &&
           (t->first_answer <= 0 || r->t_sent < t->first_answer) && now - r->t_sent >= half_s;
}

static void hold_broad(s3x_transfer *t, const fb_view *v) {
    if (!v->relative || v->fbt <= 0 || t->x->fbt.no_broad) return;
    int lanes = t->nparts < t->sched->max_conns ? t->nparts : t->sched->max_conns;
    double now = s3x_now(), half_s = (double)v->fbt / 2000.0;
    int n = 0;
    for (int i = 0; i < t->nparts; i++) n += first_wave_waiting(t, s3x_transfer_part(t, i), now, half_s);
    if (n < S3X_FBT_BROAD_MIN || 2 * n <= lanes) return;
    double floor_ms = S3X_FBT_UNSEEN_MULT * (double)v->fbt;
    for (int i = 0; i < t->nparts; i++) {
        s3x_part *p = s3x_transfer_part(t, i);
        if (first_wave_waiting(t, p, now, half_s) && p->fb_floor_ms < floor_ms) p->fb_floor_ms = floor_ms;
    }
}

/* Cuts the attempts in flight that are past their due time (fb_due), the
 * most overdue first, each learned from before the next is looked at: the
 * parts sent together reach a timeout together, and when the first cuts
 * raise it (a run of cuts: the server slowed down), the others are judged
 * by the raised one. */
static void check_first_byte(s3x_transfer *t) {
    for (;;) {
        fb_view v;
        fb_look(t, &v);
        if (v.fbt <= 0) return;
        hold_broad(t, &v);
        double now = s3x_now(), worst = 0;
        s3x_part *cut = NULL;
        int64_t used = 0;
        for (int i = 0; i < t->nparts; i++) {
            s3x_part *p = s3x_transfer_part(t, i);
            if (p->state != S3X_PART_INFLIGHT) continue;
            double due = fb_due(t, &v, p);
            if (due > 0 && now >= due && (!cut || now - due > worst)) {
                cut = p;
                worst = now - due;
                used = (int64_t)llround((due - p->req.t_sent) * 1000.0);
            }
        }
        if (!cut) return;
        cut->fb_timeout = 1;
        cut->fb_timeout_used = used; /* how long it was given */
        s3x_http_abort(t->sched->client, &cut->req);
        on_part_done(&cut->req, cut);
    }
}

/* Parts wait (to retry, or at the gate) and none is on the wire. */
static int waiting_only(const s3x_transfer *t) {
    int waiting = 0;
    for (int i = 0; i < t->nparts + t->nside; i++) {
        int st = s3x_transfer_part(t, i)->state;
        if (st == S3X_PART_INFLIGHT) return 0;
        if (st == S3X_PART_RETRY_WAIT || st == S3X_PART_QUEUED) waiting = 1;
    }
    return waiting;
}

/* A transfer stops: its owner is told after the pass over the list. */
static void end(s3x_transfer *t, int ok) {
    t->finished = 1;
    t->ok = ok;
    if (!ok) t->sched->any_failed = 1;
}

static void tell_ended(s3x_sched *s, s3x_transfer **ended, int n) {
    if (!s->on_end) return;
    for (int i = 0; i < n; i++) s->on_end(s, ended[i], s->end_payload);
}

int s3x_sched_turn(s3x_sched *s, int max_wait_ms) {
    double now = s3x_now();
    for (s3x_transfer *t = s->head; t; t = t->next) {
        if (t->finished) continue;
        s3x_xfer *x = t->x;
        if (s3x_xfer_cancelled(x) && !x->failed)
            s3x_xfer_failf(x, S3X_ECANCELLED, "%s s3://%s/%s cancelled", t->what, t->bucket, t->key);
        if (!x->failed && t->kind->tick && t->kind->tick(t) < 0) s3x_xfer_fail(x);
        /* The retry window is a time: a retry held at the rate's gate past
         * it fails the transfer as a throttled answer past it would. */
        if (!x->failed && waiting_only(t) && s3x_xfer_storm_expired(x, now)) s3x_xfer_fail(x);
        if (!x->failed) start_due(t, now);
    }
    feed_all(s);
    /* Transfers that end in this pass are told about afterwards, in a
     * batch of at most 64 per pass (the rest are told on the next turn). */
    s3x_transfer *ended[64];
    int nended = 0, running = 0, queued = 0;
    for (s3x_transfer *t = s->head; t; t = t->next) {
        if (t->finished) {
            if (t->ok < 0 && nended < 64) { /* ended on an earlier pass, not told yet */
                t->ok = 0;
                ended[nended++] = t;
            }
            continue;
        }
        if (nended == 64) {
            running++;
            continue;
        }
        if (t->x->failed) {
            if (stop(t, 0)) { /* a draining part is still on the wire */
                running++;
                continue;
            }
            end(t, 0);
            ended[nended++] = t;
            continue;
        }
        if (!busy(t) && !t->kind->more(t)) {
            int f = t->kind->finish ? t->kind->finish(t) : 0;
            if (f > 0) { /* still finishing */
                running++;
                if (f == 1) queued = 1; /* its last request was queued: started without waiting */
                continue;
            }
            if (f < 0) {
                s3x_xfer_fail(t->x);
                stop(t, 1);
                end(t, 0);
            } else {
                end(t, 1);
            }
            ended[nended++] = t;
            continue;
        }
        running++;
    }
    tell_ended(s, ended, nended);
    if (!running) return 0;
    int wait = queued ? 0 : poll_timeout_ms(s);
    if (max_wait_ms >= 0 && wait > max_wait_ms) wait = max_wait_ms;
    if (s3x_http_poll(s->client, wait) < 0) {
        /* The loop itself broke: every transfer fails with its error. */
        nended = 0;
        for (s3x_transfer *t = s->head; t; t = t->next)
            if (!t->finished) {
                s3x_xfer_fail(t->x);
                stop(t, 1);
                end(t, 0);
                if (nended < 64) ended[nended++] = t;
                else t->ok = -1; /* told on a later turn */
            }
        tell_ended(s, ended, nended);
        return -1;
    }
    for (s3x_transfer *t = s->head; t; t = t->next) {
        if (t->finished) continue;
        check_first_byte(t);
        if (t->x->progress) {
            int64_t done = 0, total = -1;
            t->kind->moving(t, &done, &total);
            s3x_xfer_heartbeat(t->x, done, total);
        }
    }
    return running;
}

int s3x_sched_run(s3x_sched *s) {
    int n;
    while ((n = s3x_sched_turn(s, -1)) > 0) {
    }
    return n < 0 || s->any_failed ? -1 : 0;
}
