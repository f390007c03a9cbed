/* Retry policy of transfers (private): the slow-part (first-byte) timeout
 * learned from the run. Backoff, the retry budget and the judge every request
 * goes through are net/retrypolicy.h, shared with the single operations.
 * See docs/reliability.md. */
#ifndef S3X_RETRY_H
#define S3X_RETRY_H
#include <stdint.h>
#include "retrypolicy.h"

/* First-byte timeout policy.
 *
 * Two estimators for DYNAMIC (docs/reliability.md, "The slow-part timeout"):
 * S3X_FBT_ROBUST (the default) separates the healthy first-byte times from
 * their slow tail with the median and the median absolute deviation of a
 * window of recent times; S3X_FBT_P90 is the AWS C runtime's (a 90th
 * percentile of the warm-up, then a slow drift), kept so the benchmark can
 * compare the two in one build (benchmarks/slow_part_grid.py sets
 * S3X_FBT_ESTIMATOR=p90 in the environment; nothing else should). */
enum { S3X_FBT_ROBUST = 0, S3X_FBT_P90 = 1 };

#define S3X_FBT_CEILING_MS 5000   /* above this the optimisation turns itself off */
#define S3X_FBT_OFFSET_MS 700     /* P90: margin over the mean time to first byte */
#define S3X_FBT_FLOOR_MS 1000     /* P90: the learned timeout is never below this */
#define S3X_FBT_MAX_TOPK 128

/* ROBUST: the window of recent first-byte times and the rule over it. */
#define S3X_FBT_WINDOW 32         /* recent first-byte times kept (a cut counts as its timeout) */
#define S3X_FBT_MIN_SAMPLES 3     /* answers needed before the timeout is relative to them */
#define S3X_FBT_SETTLED 6         /* ... and until this many, never below START_MULT x the slowest of them */
#define S3X_FBT_MIN_MS 150.0      /* the timeout is never below this */
#define S3X_FBT_MEDIAN_MULT 3.0   /* ... nor below this many medians */
#define S3X_FBT_SPREAD_MULT 5.0   /* ... nor below median + this many robust standard deviations */
#define S3X_FBT_RAISE_AFTER 3     /* this many cuts in a row (no answer between): the server slowed down */
#define S3X_FBT_LIFT_DECAY 0.95   /* the raised timeout gives way by this factor per answer above the unraised one */
#define S3X_FBT_LIFT_DROP 0.5     /* ... and by this one per answer below it */
#define S3X_FBT_LIFT_FOLLOW 2.0   /* a lifted timeout stays at least this many times an answer above the unraised one */
#define S3X_FBT_BUDGET_BASE 8     /* cuts allowed at any time ... */
#define S3X_FBT_BUDGET_SHARE 0.5  /* ... plus this share of the answered attempts */
/* Before the first answers: a starting timeout. An upload part's answer
 * comes after the server has stored its body, so its start is generous (a
 * new connection's TCP and TLS handshakes over a long path, the server's
 * think time) plus the time to store the body at a low rate. A ranged GET
 * has no body: its first byte is the server's think time (tens of ms to a
 * few hundred on S3) plus, on a new connection, the handshakes. A cut GET
 * costs only a re-send, and until the first answer each cut by the timeout
 * in force doubles it, so a slow link climbs past its answers in a few cuts:
 * the GET start can be short. */
#define S3X_FBT_START_MS 1000.0
#define S3X_FBT_START_GET_MS 300.0
#define S3X_FBT_START_RATE (8.0 * 1024 * 1024) /* bytes per second */
#define S3X_FBT_START_MULT 2.0    /* ... and never below this many times the slowest answer yet */
/* Re-basing: the last few answers against the window. */
#define S3X_FBT_RECENT 8          /* answers compared */
#define S3X_FBT_RECENT_K 3        /* the k-th lowest (k-th highest) of them decides */
#define S3X_FBT_SHIFT_MULT 2.0    /* above this many medians (and 4 spreads) ... : the server slowed down */
/* A tail being cut: the timeout may go down to this many times the slowest
 * of the last answers (never below S3X_FBT_MIN_MS) when the expected time
 * saved on the attempts cut (a share of the last 32) outweighs the expected
 * re-sends of healthy ones (retry.c, tail_timeout). */
#define S3X_FBT_TAIL_MARGIN 1.5
#define S3X_FBT_TAIL_HISTORY 128    /* the slowest of this many last answers (cuts not counted) ... */
#define S3X_FBT_TAIL_MIN_ANSWERS 16 /* ... of at least this many (the slowest of fewer says little) ... */
#define S3X_FBT_TAIL_MIN_SAMPLES 24 /* ... and answers learned from in all (a transfer's first ones are too few) */
#define S3X_FBT_TAIL_FIT_ANSWERS 32 /* the fit of the healthy answers (retry.c, tail_fit) needs this many */
/* ... and it lowers nothing unless this many of the last 128 attempts were
 * cut: one cut alone is no tail (retry.c, tail_timeout). */
#define S3X_FBT_TAIL_MIN_CUTS 2
/* Of the tail rule's candidates, the highest whose expected saving is at
 * least this share of the best one's. 1: the best itself. Below 1 (from
 * the environment, benchmarks only) it prefers fewer healthy cuts when the
 * saving is flat near its best: 0.8 cut a quarter fewer healthy answers in
 * the C tests, but re-sent more, not fewer, on this project's SeaweedFS
 * (docs/reliability.md, point 11). */
#define S3X_FBT_TAIL_NEAR 1.0

/* How the scheduler applies a ROBUST timeout to the attempts in flight
 * (scheduler.c, check_first_byte): an attempt keeps the learned timeout that
 * was in force when it started if the timeout falls later, and rises with
 * it. While other attempts of its transfer are in flight, more are to be
 * sent and no attempt sent after it has been answered, nothing says the
 * server answers anyone faster than this one: it is cut only after this
 * many timeouts (a server that slowed down for everyone is not cut at its
 * first late answers; a part held while later ones answer is cut at one). */
#define S3X_FBT_UNSEEN_MULT 4.0
/* ... and when at least this many attempts sent before a transfer's first
 * answer, and more than half its lanes, have waited half the timeout or
 * longer at once, the server is working through its first wave in an order
 * of its own rather than stuck on a few (a re-send would queue behind the
 * same work): each of them gets UNSEEN_MULT timeouts, kept while it waits. */
#define S3X_FBT_BROAD_MIN 3

/* Carried between transfers: a client keeps, per kind of part request, the
 * last answers of its DYNAMIC transfers, and its next transfer of that kind
 * starts from them instead of the starting timeout (docs/reliability.md).
 * The key is the request's operation (UploadPart, GetObject, ...), the
 * client's endpoint, the bucket and the part's body size within a factor of
 * two (an upload part's answer follows the storing of its body), so another
 * endpoint, bucket or kind of request starts afresh. */
#define S3X_FBT_CARRY_KEYS 8           /* kinds remembered; the least recently used gives way */
#define S3X_FBT_CARRY_MAX_AGE_S 300.0  /* answers older than this are not carried */

typedef struct s3x_fbt_carry_slot {
    uint64_t key;                 /* 0: free */
    double ring[S3X_FBT_TAIL_HISTORY]; /* the last answers (first-byte ms), arrival order */
    double ring_cap[S3X_FBT_TAIL_HISTORY]; /* the timeout each came under (ms; 0: none) */
    int n, pos;
    double last_s;                /* when the last of them came (the caller's clock, seconds) */
    uint64_t outcomes[2];         /* the last 128 attempts, newest in bit 0 of [0]: 1 = cut */
} s3x_fbt_carry_slot;

/* One per client (plain memory: the client frees it). Only the thread that
 * drives the client's transfers touches it (client.h: one thread uses a
 * client at a time; a batch's transfers all run on its loop's thread). */
typedef struct s3x_fbt_carry {
    s3x_fbt_carry_slot slot[S3X_FBT_CARRY_KEYS];
} s3x_fbt_carry;

/* Which of the ROBUST estimator's rules set the timeout in force (for the
 * per-attempt trace, S3X_FBT_TRACE): none (no timeout), the starting one,
 * the floor (S3X_FBT_MIN_MS), MEDIAN_MULT medians, the median plus
 * SPREAD_MULT spreads, START_MULT x the slowest of the first answers, the
 * tail rule at a multiple of the slowest answer, the lift after a run of
 * cuts, the tail rule at a quantile of the fit. s3x_fbt_rule_name names the one
 * in force, or "fixed", "p90" or "none" (OFF) in the other modes. */
enum {
    S3X_FBT_RULE_NONE,
    S3X_FBT_RULE_START,
    S3X_FBT_RULE_MIN,
    S3X_FBT_RULE_MEDIANS,
    S3X_FBT_RULE_SPREAD,
    S3X_FBT_RULE_SLOWEST,
    S3X_FBT_RULE_TAIL,
    S3X_FBT_RULE_LIFT,
    S3X_FBT_RULE_FIT,
};

typedef struct s3x_fbt {
    int mode;                 /* 0 off, 1 fixed, 2 dynamic */
    int estimator;            /* S3X_FBT_ROBUST or S3X_FBT_P90 */
    int stopped;
    int64_t timeout_ms;       /* in force now, whole milliseconds; 0 = none */
    double timeout_exact_ms;  /* the same unrounded, so small steps of the average add up */
    /* P90 */
    int warmup_n;             /* N = max(concurrency, 10) */
    int n_ok;
    double warmup_sum_ms;
    double topk[S3X_FBT_MAX_TOPK]; /* min-heap of the largest warm-up durations */
    int topk_n, topk_cap;
    int64_t rate_done, rate_fail;
    double ttfb_sum_ms;
    int64_t ttfb_n;
    /* ROBUST */
    double ring[S3X_FBT_WINDOW];   /* the window in arrival order */
    unsigned char ring_cut[S3X_FBT_WINDOW]; /* 1 where that value is a cut's timeout, not an answer */
    double sorted[S3X_FBT_WINDOW]; /* the same values, ascending */
    int win_n, win_pos;
    double median_ms, spread_ms;   /* of the window; spread = 1.4826 x MAD */
    double lift_ms;                /* raised after a burst of cuts, decays with answers */
    double base_ms;                /* the timeout the rule gives without the lift */
    int run_of_cuts;               /* cuts since the last answer */
    double start_ms;               /* the starting timeout, in force until MIN_SAMPLES answers; 0 = none */
    double slowest_ms;             /* the slowest of the first SETTLED answers */
    double recent[S3X_FBT_RECENT]; /* the last answers (cuts not included), in arrival order */
    int recent_n, recent_pos;
    int64_t answered, cuts;        /* attempts answered in time / cut, this run */
    uint64_t outcomes[2];          /* the last 128 attempts, newest in bit 0 of [0]: 1 = cut (carried in too) */
    int tail_min_cuts;             /* S3X_FBT_TAIL_MIN_CUTS, or another from the environment (benchmarks) */
    double attempt_ms;             /* moving average of a whole answered attempt (what a re-send costs) */
    double tail_ms;                /* the lowered timeout when the tail rule set it, else 0 */
    int rule;                      /* which rule set timeout_ms (S3X_FBT_RULE_*, traces only) */
    double hist[S3X_FBT_TAIL_HISTORY]; /* the last answers for the tail rule (cuts not included), arrival order */
    double hist_cap_ms[S3X_FBT_TAIL_HISTORY]; /* the timeout each came under (ms; 0: none): it could not be slower */
    double last_cap_ms;            /* ... that of the last answer */
    int hist_n, hist_pos, hist_cap;   /* hist_cap: S3X_FBT_TAIL_HISTORY, or less from the environment (benchmarks) */
    double tail_margin;               /* S3X_FBT_TAIL_MARGIN, or another from the environment (benchmarks) */
    int tail_fit;                     /* the tail rule also tries high quantiles of a fit of the history (1; 0
                                         with S3X_FBT_TAIL_FIT=off in the environment: benchmarks) */
    double fit_mu, fit_sigma;         /* the tail rule's last fit (log ms; 0 sigma: none), for tests */
    double tail_near;                 /* S3X_FBT_TAIL_NEAR, or another from the environment (benchmarks) */
    int64_t samples;               /* answers learned from: this run's plus those carried in */
    int64_t carried;               /* answers carried in from earlier transfers */
    int no_carry;                  /* S3X_FBT_CARRY=off in the environment (benchmarks only) */
    int carry_tried;               /* s3x_fbt_resume was called */
    uint64_t carry_key;            /* where this run's answers go; 0: nowhere */
    int64_t raises;                /* times the timeout was doubled for a burst of cuts */
    int64_t rebases;               /* times the window was replaced by the recent answers */
    int no_waiting;                /* S3X_FBT_WAITING=off in the environment (benchmarks only) */
    int no_broad;                  /* S3X_FBT_BROAD=off in the environment (benchmarks only) */
} s3x_fbt;

/* knob: S3X_SLOW_PART_OFF, S3X_SLOW_PART_DYNAMIC or a fixed timeout in ms.
 * The estimator is ROBUST unless S3X_FBT_ESTIMATOR=p90 is in the environment;
 * S3X_FBT_CARRY=off there turns off carrying between transfers;
 * S3X_FBT_TAIL_HISTORY=N (16..128) makes the tail rule take the slowest of
 * the last N answers, S3X_FBT_TAIL_MARGIN=X (1..4) go down to X times it,
 * S3X_FBT_TAIL_FIT=off leave out the quantiles of its fit,
 * S3X_FBT_TAIL_NEAR=X (0..1) take the highest candidate saving X of the best
 * (1, the default: the best itself), S3X_FBT_TAIL_MIN_CUTS=N (1..8) lower
 * once N of the last 128 attempts were cut (2 without it), S3X_FBT_WAITING=off
 * leave the waiting attempts out of the relative rules (s3x_fbt_with_waiting),
 * S3X_FBT_BROAD=off cut the first wave while most of it waits (S3X_FBT_BROAD_MIN;
 * all nine exist for side-by-side benchmark runs only). */
void s3x_fbt_init(s3x_fbt *f, int64_t knob, int64_t concurrency);
void s3x_fbt_init_ex(s3x_fbt *f, int64_t knob, int64_t concurrency, int estimator);
/* DYNAMIC (ROBUST): sets the starting timeout for a transfer whose part
 * requests carry body_bytes each (0 for ranged GETs: S3X_FBT_START_GET_MS). */
void s3x_fbt_start(s3x_fbt *f, int64_t body_bytes);
static inline int64_t s3x_fbt_current(const s3x_fbt *f) { return f->stopped ? 0 : f->timeout_ms; }
/* The timeout the last answer came under (ms; 0: none), for s3x_fbt_carry_add. */
static inline double s3x_fbt_last_cap(const s3x_fbt *f) { return f->last_cap_ms; }
/* DYNAMIC with the ROBUST estimator: the timeout is relative to the answers
 * (the scheduler's rules for attempts in flight apply); ..._learned: and
 * enough answers were seen for it to be more than the starting timeout. */
/* The rule in force, by name (S3X_FBT_RULE_* above; the per-attempt trace). */
const char *s3x_fbt_rule_name(const s3x_fbt *f);
static inline int s3x_fbt_relative(const s3x_fbt *f) { return f->mode == 2 && f->estimator == S3X_FBT_ROBUST; }
static inline int s3x_fbt_learned(const s3x_fbt *f) {
    return s3x_fbt_relative(f) && f->samples >= S3X_FBT_MIN_SAMPLES;
}
/* The carry's key for part requests of operation op with body_bytes each
 * (0 for GETs) to bucket at endpoint (NULLs count as empty). Never 0. */
uint64_t s3x_fbt_carry_key(const char *op, const char *endpoint, const char *bucket, int64_t body_bytes);
/* DYNAMIC (ROBUST), before the run's first part request: the window starts
 * with the carry's answers for key if the last came within
 * S3X_FBT_CARRY_MAX_AGE_S of now_s (else they are dropped), and the run's
 * answers will be added under key (s3x_fbt_carry_add). Does nothing for
 * other modes, or when S3X_FBT_CARRY=off was in the environment at init. */
void s3x_fbt_resume(s3x_fbt *f, s3x_fbt_carry *c, uint64_t key, double now_s);
/* Adds an answer (first-byte ms; cap_ms: the timeout it came under, 0:
 * none, s3x_fbt_last_cap) under key, claiming a free or the least
 * recently used slot for a new key. */
void s3x_fbt_carry_add(s3x_fbt_carry *c, uint64_t key, double ttfb_ms, double cap_ms, double now_s);
/* ... and an attempt cut (counted among the last 32 attempts, not an answer). */
void s3x_fbt_carry_cut(s3x_fbt_carry *c, uint64_t key, double now_s);
/* DYNAMIC (ROBUST): the timeout in force for the attempts now waiting for
 * their first byte, which waited ages_ms[0..n) so far. The relative rules
 * (floor, medians, spread, slowest) are read over the window together with
 * the waiting attempts older than its median, each counted at its age ("at
 * least this long"): the answers alone leave out the slow ones still
 * waiting, which are judged by them. Never below s3x_fbt_current; 0 (none)
 * when that is 0 or the estimate passes S3X_FBT_CEILING_MS. The tail rule,
 * the lift and the starting timeout are left as they are. */
int64_t s3x_fbt_with_waiting(const s3x_fbt *f, const double *ages_ms, int n);
#define S3X_FBT_WAITING_MAX 64 /* waiting attempts looked at, at most */
/* A request finished well: its whole duration and its time to first byte
 * (for a request with a body, counted from when the body was sent). */
void s3x_fbt_on_success(s3x_fbt *f, double request_ms, double ttfb_ms);
/* A request was cut after waiting timeout_used_ms for its first byte: the
 * timeout in force for it (DYNAMIC: as the scheduler applied it to that
 * attempt, up to S3X_FBT_UNSEEN_MULT times the timeout). */
void s3x_fbt_on_timeout(s3x_fbt *f, int64_t timeout_used_ms);

#endif
