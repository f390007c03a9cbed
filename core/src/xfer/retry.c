#include "retry.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- first-byte timeout ------------------------------------------------------- */

void s3x_fbt_init(s3x_fbt *f, int64_t knob, int64_t concurrency) {
    /* The old estimator stays reachable for side-by-side benchmarks only. */
    const char *e = getenv("S3X_FBT_ESTIMATOR"), *carry = getenv("S3X_FBT_CARRY");
    const char *hist = getenv("S3X_FBT_TAIL_HISTORY"), *margin = getenv("S3X_FBT_TAIL_MARGIN");
    const char *fit = getenv("S3X_FBT_TAIL_FIT"), *near = getenv("S3X_FBT_TAIL_NEAR");
    const char *min_cuts = getenv("S3X_FBT_TAIL_MIN_CUTS"), *waiting = getenv("S3X_FBT_WAITING");
    const char *broad = getenv("S3X_FBT_BROAD");
    s3x_fbt_init_ex(f, knob, concurrency, e && !strcmp(e, "p90") ? S3X_FBT_P90 : S3X_FBT_ROBUST);
    f->no_carry = carry && !strcmp(carry, "off");
    f->no_waiting = waiting && !strcmp(waiting, "off");
    f->no_broad = broad && !strcmp(broad, "off");
    if (hist) {
        long v = strtol(hist, NULL, 10);
        if (v >= S3X_FBT_TAIL_MIN_ANSWERS && v <= S3X_FBT_TAIL_HISTORY) f->hist_cap = (int)v;
    }
    if (margin) {
        double v = strtod(margin, NULL);
        if (v >= 1.0 && v <= 4.0) f->tail_margin = v;
    }
    if (fit && !strcmp(fit, "off")) f->tail_fit = 0;
    if (min_cuts) {
        long v = strtol(min_cuts, NULL, 10);
        if (v >= 1 && v <= 8) f->tail_min_cuts = (int)v;
    }
    if (near) {
        double v = strtod(near, NULL);
        if (v >= 0.0 && v <= 1.0) f->tail_near = v;
    }
}

const char *s3x_fbt_rule_name(const s3x_fbt *f) {
    static const char *const names[] = {"none", "start", "floor", "medians", "spread", "slowest", "tail", "lift", "fit"};
    if (f->mode == 1) return "fixed";
    if (f->mode == 2 && f->estimator == S3X_FBT_P90) return "p90";
    if (f->mode != 2 || f->rule < 0 || f->rule >= (int)(sizeof names / sizeof names[0])) return "none";
    return names[f->rule];
}

void s3x_fbt_init_ex(s3x_fbt *f, int64_t knob, int64_t concurrency, int estimator) {
    memset(f, 0, sizeof *f);
    f->hist_cap = S3X_FBT_TAIL_HISTORY;
    f->tail_margin = S3X_FBT_TAIL_MARGIN;
    f->tail_fit = 1;
    f->tail_near = S3X_FBT_TAIL_NEAR;
    f->tail_min_cuts = S3X_FBT_TAIL_MIN_CUTS;
    f->estimator = estimator == S3X_FBT_P90 ? S3X_FBT_P90 : S3X_FBT_ROBUST;
    if (knob == 0) return;
    if (knob > 0) {
        f->mode = 1;
        f->timeout_ms = knob;
        f->timeout_exact_ms = (double)knob;
        return;
    }
    f->mode = 2;
    f->warmup_n = concurrency > 10 ? (int)concurrency : 10;
    f->topk_cap = f->warmup_n / 10;
    if (f->topk_cap < 1) f->topk_cap = 1;
    if (f->topk_cap > S3X_FBT_MAX_TOPK) f->topk_cap = S3X_FBT_MAX_TOPK;
}

static void heap_push_topk(s3x_fbt *f, double v) {
    /* Keep the topk_cap largest values in a min-heap (root = smallest kept). */
    double *h = f->topk;
    if (f->topk_n < f->topk_cap) {
        int i = f->topk_n++;
        h[i] = v;
        while (i > 0 && h[(i - 1) / 2] > h[i]) {
            double t = h[i];
            h[i] = h[(i - 1) / 2];
            h[(i - 1) / 2] = t;
            i = (i - 1) / 2;
        }
        return;
    }
    if (v <= h[0]) return;
    h[0] = v;
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < f->topk_n && h[l] < h[m]) m = l;
        if (r < f->topk_n && h[r] < h[m]) m = r;
        if (m == i) break;
        double t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static void set_timeout(s3x_fbt *f, double ms) {
    /* Never below the floor: a timeout shorter than a loaded server's normal
     * think time would re-send parts that were not slow at all. */
    if (ms < S3X_FBT_FLOOR_MS) ms = S3X_FBT_FLOOR_MS;
    if (ms > S3X_FBT_CEILING_MS) {
        f->stopped = 1;
        f->timeout_ms = 0;
        f->timeout_exact_ms = 0;
    } else {
        f->timeout_exact_ms = ms;
        f->timeout_ms = (int64_t)llround(ms);
    }
}

static void p90_on_success(s3x_fbt *f, double request_ms, double ttfb_ms) {
    if (f->stopped) return;
    f->n_ok++;
    if (f->n_ok <= f->warmup_n) {
        /* Warm-up: no timeout yet; learn from whole-request durations. */
        f->warmup_sum_ms += request_ms;
        heap_push_topk(f, request_ms);
        if (f->n_ok == f->warmup_n) {
            if (f->warmup_sum_ms / f->warmup_n >= S3X_FBT_CEILING_MS) {
                f->stopped = 1; /* a slow link: re-sending would cost more than waiting */
                f->timeout_ms = 0;
            } else {
                double p90 = f->topk[0]; /* smallest of the largest tenth ~ the 90th percentile */
                set_timeout(f, p90);
            }
        }
        return;
    }
    f->rate_done++;
    f->ttfb_sum_ms += ttfb_ms;
    f->ttfb_n++;
    double expected = f->ttfb_sum_ms / (double)f->ttfb_n + S3X_FBT_OFFSET_MS;
    /* Drift slowly toward the mean time to first byte plus a margin. */
    set_timeout(f, 0.99 * f->timeout_exact_ms + 0.01 * expected);
}

static void p90_on_timeout(s3x_fbt *f, int64_t used_ms) {
    if (f->stopped || f->n_ok < 10) return;
    f->rate_done++;
    f->rate_fail++;
    int64_t pct1 = (f->rate_done + 99) / 100, pmille = (f->rate_done + 999) / 1000;
    if (f->rate_fail > pct1) {
        /* More than 1% of recent parts timed out: a larger step. */
        f->rate_done = f->rate_fail = 0;
        if (used_ms + 1000 > f->timeout_ms) set_timeout(f, f->timeout_exact_ms + 1000);
    } else if (f->rate_fail > pmille) {
        /* More than 0.1%: a smaller one. The guard ignores stale timeouts. */
        if (used_ms + 100 > f->timeout_ms) set_timeout(f, f->timeout_exact_ms + 100);
    }
}

/* ---- ROBUST: median and spread of recent first-byte times ------------------------
 *
 * Why not a high percentile: once a tenth of attempts are slow, the 90th
 * percentile sits inside the slow tail and the timeout learns the delay it
 * should cut. The median and the median absolute deviation (MAD) ignore up
 * to half the samples whatever their values, so a tail of 1-20% moves them
 * little, and the timeout lands a few spreads above the healthy mass.
 *
 * Before the first answers there is nothing to be relative to, yet the first
 * requests (a download's probe above all, which goes out alone) can be held
 * like any other: a starting timeout cuts a held one instead of waiting it
 * out (300 ms for a ranged GET, a second or two for an upload part), and
 * each cut before the first answer doubles it, so a slow link costs a few
 * re-sends, not one per request. It gives way to the relative rule at the
 * 3rd answer; until the 6th, that rule's timeout is also never below twice
 * the slowest answer, as a median and spread of three can be low by chance.
 *
 * A cut attempt enters the window at the timeout that cut it: it says "at
 * least this long". When the whole server slows down, the cuts are not a
 * tail: they come in a row, with no answer between them (a tail of 20% gives
 * three in a row for about one cut in 25). Each cut of a run of three or more
 * doubles the timeout at once (the lift), which also spares the requests
 * still in flight, since the scheduler checks them against the timeout in
 * force. The lift gives way as answers come back; before it has, the answers
 * show the new normal: when most of the last 8 answers are far above the
 * window's median (or far below it, once the server is fast again), the
 * window is replaced by them (a re-base), so the timeout follows the shift
 * instead of cutting it. A budget bounds the cuts to a share of the answers,
 * so a server that answers every attempt late is sent at most 8 plus half
 * again as many requests as with no timeout. */

static void window_add(s3x_fbt *f, double v, int is_cut) {
    double *s = f->sorted;
    if (f->win_n == S3X_FBT_WINDOW) {
        /* Full: the oldest value (at win_pos) leaves the sorted copy. */
        double old = f->ring[f->win_pos];
        int lo = 0, hi = f->win_n - 1;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (s[mid] < old) lo = mid + 1;
            else hi = mid;
        }
        memmove(s + lo, s + lo + 1, (size_t)(f->win_n - lo - 1) * sizeof *s);
        f->win_n--;
    }
    f->ring[f->win_pos] = v;
    f->ring_cut[f->win_pos] = is_cut != 0;
    f->win_pos = (f->win_pos + 1) % S3X_FBT_WINDOW;
    int lo = 0, hi = f->win_n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (s[mid] <= v) lo = mid + 1;
        else hi = mid;
    }
    memmove(s + lo + 1, s + lo, (size_t)(f->win_n - lo) * sizeof *s);
    s[lo] = v;
    f->win_n++;
}

/* The k-th smallest (0-based) of |s[i] - m| over the sorted window, by
 * walking outward from the median: the deviations on each side are already
 * in order. */
static double kth_deviation(const double *s, int n, double m, int k) {
    int r = 0;
    while (r < n && s[r] < m) r++;
    int l = r - 1;
    double d = 0;
    for (int i = 0; i <= k; i++) {
        double dl = l >= 0 ? m - s[l] : INFINITY, dr = r < n ? s[r] - m : INFINITY;
        if (dl <= dr) {
            d = dl;
            l--;
        } else {
            d = dr;
            r++;
        }
    }
    return d;
}

/* The median of a sorted s[0..n) (n > 0) and its median absolute deviation. */
static void median_mad(const double *s, int n, double *m_out, double *mad_out) {
    double m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    *m_out = m;
    *mad_out = n % 2 ? kth_deviation(s, n, m, n / 2)
                     : (kth_deviation(s, n, m, n / 2 - 1) + kth_deviation(s, n, m, n / 2)) / 2;
}

/* The tail rule. The relative timeout aims above the healthy answers, so
 * that it hardly ever cuts one; while a tail of slow attempts is being cut,
 * each of them waits out that margin. Going down to TAIL_MARGIN x the
 * slowest of the last TAIL_HISTORY answers saves (t - low) on every slow
 * attempt and risks cutting a healthy one now and then: of n answers of one
 * distribution the next is the slowest yet once in n + 1, and a healthy
 * attempt cut costs at most a whole attempt more (attempt_ms: the body is
 * sent again). With share h of the attempts cut lately, lower when
 *     h x (t - low) > (1 - h) x attempt / (n + 1).
 * h counts the cuts among the last 32 attempts (carried in with the
 * answers), once two of the last 128 were cut. With an upload's numbers
 * (t 330 ms, low 200, attempts of 300 ms, n 128) one cut in 32 then sets it
 * off. The history is longer than the
 * window because the risk falls with n: over the window's 32, a tail of 5%
 * (two cuts in 32 at a time) stayed below the bar most of the time. With a
 * heavy-tailed healthy server the slowest of more answers lies higher, and
 * the lowered timeout with it. Cut attempts are not answers: they do not
 * count in n nor in the slowest, so a lowered timeout that cuts answers
 * which got slower does not learn from them; it follows them up only
 * through the answers that still come in under it (each one lifts "the
 * slowest" by up to the margin), and the run-of-cuts lift and the re-base
 * above still apply (a re-base starts the history over from its answers). */
static int popcount64(uint64_t v) {
    int n = 0;
    for (; v; v &= v - 1) n++;
    return n;
}

/* The last 128 attempts' outcomes, newest in bit 0 of o[0]. */
static void outcome_push(uint64_t o[2], int cut) {
    o[1] = o[1] << 1 | o[0] >> 63;
    o[0] = o[0] << 1 | (cut ? 1u : 0u);
}

static void hist_add(s3x_fbt *f, double v, double cap) {
    f->hist[f->hist_pos] = v;
    f->hist_cap_ms[f->hist_pos] = cap > 0 && cap < v ? v : cap;
    f->hist_pos = (f->hist_pos + 1) % f->hist_cap;
    if (f->hist_n < f->hist_cap) f->hist_n++;
}

static double phi(double z) { return 0.5 * erfc(-z / M_SQRT2); }

/* The healthy answers as a lognormal fitted to the history: each answer
 * came under a timeout, so it is drawn from the distribution cut off there
 * (truncated). The moments of a truncated normal (in log ms) give a fixed
 * point: with a_i = (log cap_i - mu) / sigma and l_i = phi'(a_i) / phi(a_i),
 *     mean(y) = mu - sigma mean(l),  mean((y - mu)^2) = sigma^2 (1 - mean(a l)).
 * So the answers the timeout cuts (never in the history) do not pull the
 * fit down after it, as they pull the slowest answers down. Answers above
 * the relative timeout t are left out (a held attempt answered under a
 * lift, say: one such answer moves the moments far), so every answer is
 * taken as cut off at the lower of its timeout and t. 0: no fit (too few
 * answers, or cut off too low to say). */
static int tail_fit(const s3x_fbt *f, double t, double *mu_out, double *sigma_out) {
    double y[S3X_FBT_TAIL_HISTORY], u[S3X_FBT_TAIL_HISTORY], mean = 0, var = 0;
    int n = 0;
    for (int i = 0; i < f->hist_n; i++) {
        double v = f->hist[i] > 1.0 ? f->hist[i] : 1.0, cap = f->hist_cap_ms[i];
        if (!(cap > 0) || cap > t) cap = t;
        if (v > cap) continue;
        y[n] = log(v);
        u[n] = log(cap);
        mean += y[n++];
    }
    if (n < S3X_FBT_TAIL_FIT_ANSWERS) return 0;
    mean /= n;
    for (int i = 0; i < n; i++) var += (y[i] - mean) * (y[i] - mean);
    double mu = mean, sigma = sqrt(var / n);
    if (!(sigma > 1e-3)) return 0;
    for (int it = 0; it < 30; it++) {
        double sl = 0, sal = 0;
        for (int i = 0; i < n; i++) {
            double a = (u[i] - mu) / sigma, p = phi(a);
            if (p < 1e-3) return 0; /* cut off far below the middle: too little to fit */
            double l = exp(-0.5 * a * a) / sqrt(2.0 * M_PI) / p;
            sl += l;
            sal += a * l;
        }
        sl /= n;
        sal /= n;
        if (1.0 - sal < 0.2) return 0;
        double m2 = mean + sigma * sl, v = 0;
        for (int i = 0; i < n; i++) v += (y[i] - m2) * (y[i] - m2);
        double s2 = sqrt(v / n / (1.0 - sal));
        int done = fabs(m2 - mu) < 1e-4 && fabs(s2 - sigma) < 1e-4;
        mu = m2;
        sigma = s2;
        if (done) break;
    }
    *mu_out = mu;
    *sigma_out = sigma;
    return 1;
}

/* The fit's quantiles the tail rule tries, and the share of healthy
 * answers above each. */
static const struct {
    double z, above;
} tail_fit_q[] = {{2.054, 0.02}, {2.326, 0.01}, {2.576, 0.005}, {3.090, 0.001}};

/* The tail rule's timeout (t when it does not lower it); *from_fit: it is a
 * quantile of the fit. */
static double tail_timeout(s3x_fbt *f, double t, double m, double was, int *from_fit) {
    int n = f->hist_n;
    double slowest = 0;
    for (int i = 0; i < n; i++)
        if (f->hist[i] > slowest) slowest = f->hist[i];
    f->fit_mu = f->fit_sigma = 0;
    *from_fit = 0;
    if (n < S3X_FBT_TAIL_MIN_ANSWERS || f->samples < S3X_FBT_TAIL_MIN_SAMPLES) return t;
    /* One cut in the last 128 attempts is no tail: a tail of 1% leaves one
     * in most such stretches, and a healthy server's slowest answer now and
     * then leaves one too. Taken for a share of 1/32 it lowered the timeout
     * for the next 32 attempts (carried, for the next transfer too), where
     * it could cut a healthy answer, whose cut then did the same. */
    if (popcount64(f->outcomes[0]) + popcount64(f->outcomes[1]) < f->tail_min_cuts) return t;
    double h = (double)popcount64(f->outcomes[0] & 0xffffffffu) / 32.0;
    double attempt = f->attempt_ms > m ? f->attempt_ms : m;
    /* Lower to c when the time saved on the attempts cut outweighs the
     * healthy ones cut: h x (t - c) > (1 - h) x attempt x above(c). Of the
     * candidates that do, the highest saving tail_near of the best (1: the
     * best; below it, for benchmarks, fewer healthy cuts where the saving
     * is flat near its best). */
    enum { NQ = sizeof tail_fit_q / sizeof tail_fit_q[0] };
    double cand[1 + NQ], gains[1 + NQ];
    int fitc[1 + NQ], nc = 0;
    double low = f->tail_margin * slowest;
    if (low < S3X_FBT_MIN_MS) low = S3X_FBT_MIN_MS;
    if (low < t) {
        cand[nc] = low;
        gains[nc] = h * (t - low) - (1.0 - h) * attempt / (double)(n + 1);
        fitc[nc++] = 0;
    }
    double mu, sigma;
    /* Without a cut lately there is nothing to save: no fit (it costs some
     * 30 x 128 exp and erfc at most). */
    if (f->tail_fit && h > 0 && tail_fit(f, t, &mu, &sigma)) {
        f->fit_mu = mu;
        f->fit_sigma = sigma;
        /* Of the cuts, the share of healthy answers the fit puts above the
         * timeout in force was not a tail. */
        if (was <= 0) was = t;
        double ht = h - (1.0 - phi((log(was) - mu) / sigma));
        for (int k = 0; k < NQ; k++) {
            double c = exp(mu + tail_fit_q[k].z * sigma);
            if (c < S3X_FBT_MIN_MS) c = S3X_FBT_MIN_MS;
            if (c >= t) continue;
            cand[nc] = c;
            gains[nc] = ht * (t - c) - (1.0 - h) * attempt * tail_fit_q[k].above;
            fitc[nc++] = 1;
        }
    }
    double gain = 0, best = 0;
    for (int i = 0; i < nc; i++)
        if (gains[i] > gain) gain = gains[i];
    if (gain <= 0) return t;
    for (int i = 0; i < nc; i++)
        if (gains[i] >= f->tail_near * gain && cand[i] > best) {
            best = cand[i];
            *from_fit = fitc[i];
        }
    return best;
}

static void robust_update(s3x_fbt *f) {
    int n = f->win_n;
    const double *s = f->sorted;
    double was = f->timeout_exact_ms; /* in force until now */
    f->timeout_ms = 0;
    f->tail_ms = 0;
    f->timeout_exact_ms = 0;
    f->rule = S3X_FBT_RULE_NONE;
    double m = 0;
    if (n > 0) {
        double mad;
        median_mad(s, n, &m, &mad);
        f->median_ms = m;
        f->spread_ms = 1.4826 * mad; /* the standard deviation, were the healthy times normal */
    }
    /* Cut no more than the budget: past it, waiting is cheaper than re-sending. */
    if ((double)f->cuts > S3X_FBT_BUDGET_BASE + S3X_FBT_BUDGET_SHARE * (double)f->answered) return;
    double t;
    int rule;
    if (f->samples < S3X_FBT_MIN_SAMPLES) {
        /* Too few answers to tell healthy from slow: the starting timeout,
         * or none when the transfer has none. */
        if (f->start_ms <= 0) return;
        t = f->start_ms;
        rule = S3X_FBT_RULE_START;
        if (S3X_FBT_START_MULT * f->slowest_ms > t) t = S3X_FBT_START_MULT * f->slowest_ms;
    } else {
        t = S3X_FBT_MIN_MS;
        rule = S3X_FBT_RULE_MIN;
        if (S3X_FBT_MEDIAN_MULT * m > t) {
            t = S3X_FBT_MEDIAN_MULT * m;
            rule = S3X_FBT_RULE_MEDIANS;
        }
        if (m + S3X_FBT_SPREAD_MULT * f->spread_ms > t) {
            t = m + S3X_FBT_SPREAD_MULT * f->spread_ms;
            rule = S3X_FBT_RULE_SPREAD;
        }
        /* A median and a spread of 3-5 answers can both be low by chance
         * (three quick answers of a wide distribution): until they settle,
         * the slowest answer yet bounds the timeout from below too. */
        if (f->samples < S3X_FBT_SETTLED && S3X_FBT_START_MULT * f->slowest_ms > t) {
            t = S3X_FBT_START_MULT * f->slowest_ms;
            rule = S3X_FBT_RULE_SLOWEST;
        } else {
            int from_fit;
            double low = tail_timeout(f, t, m, was, &from_fit);
            f->tail_ms = low < t ? low : 0;
            if (low < t) rule = from_fit ? S3X_FBT_RULE_FIT : S3X_FBT_RULE_TAIL;
            t = low;
        }
    }
    f->base_ms = t;
    if (f->lift_ms > t) {
        t = f->lift_ms;
        rule = S3X_FBT_RULE_LIFT;
    }
    /* A server this slow to answer at all: a re-send would wait as long. The
     * timeout is suspended, not ended: answers keep coming and can bring it back. */
    if (t > S3X_FBT_CEILING_MS) return;
    f->rule = rule;
    f->timeout_exact_ms = t;
    f->timeout_ms = (int64_t)llround(t);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The window's answers leave out the attempts still waiting, and at a
 * transfer's start those are the slow ones: eight parts sent together, the
 * first two answered after 230 and 360 ms and the next on their connections
 * after 60-90, set a median near 150 ms and cut the six still waiting at
 * 0.3-0.7 s, on a server that answered them all within 1.6 s. Counted at
 * their ages, the six hold the median up with them: while most attempts
 * are waiting, no relative timeout falls below them. One attempt held among
 * a window of answers moves the median by half a rank, whatever its age. */
int64_t s3x_fbt_with_waiting(const s3x_fbt *f, const double *ages_ms, int n) {
    int64_t cur = s3x_fbt_current(f);
    if (cur <= 0 || !s3x_fbt_relative(f) || f->no_waiting || n <= 0 || f->win_n == 0) return cur;
    if (f->rule != S3X_FBT_RULE_MIN && f->rule != S3X_FBT_RULE_MEDIANS && f->rule != S3X_FBT_RULE_SPREAD &&
        f->rule != S3X_FBT_RULE_SLOWEST)
        return cur;
    double old[S3X_FBT_WAITING_MAX], v[S3X_FBT_WINDOW + S3X_FBT_WAITING_MAX];
    int k = 0;
    for (int i = 0; i < n && k < S3X_FBT_WAITING_MAX; i++)
        if (ages_ms[i] > f->median_ms) old[k++] = ages_ms[i];
    if (k == 0) return cur;
    qsort(old, (size_t)k, sizeof old[0], cmp_double);
    /* Merge with the sorted window. */
    int a = 0, b = 0, m = 0;
    while (a < f->win_n || b < k) v[m++] = b >= k || (a < f->win_n && f->sorted[a] <= old[b]) ? f->sorted[a++] : old[b++];
    double med, mad;
    median_mad(v, m, &med, &mad);
    double t = S3X_FBT_MIN_MS;
    if (S3X_FBT_MEDIAN_MULT * med > t) t = S3X_FBT_MEDIAN_MULT * med;
    if (med + S3X_FBT_SPREAD_MULT * 1.4826 * mad > t) t = med + S3X_FBT_SPREAD_MULT * 1.4826 * mad;
    if (f->samples < S3X_FBT_SETTLED && S3X_FBT_START_MULT * f->slowest_ms > t) t = S3X_FBT_START_MULT * f->slowest_ms;
    if (t > S3X_FBT_CEILING_MS) return 0;
    int64_t ms = (int64_t)llround(t);
    return ms > cur ? ms : cur;
}

/* Re-base when the last answers left the window's distribution as a whole:
 * the k-th lowest of them above max(2 medians, median + 4 spreads), or the
 * k-th highest below half the median. One slow answer, or a few out of 8 (a
 * tail), does neither. The window then holds just those answers. */
static void maybe_rebase(s3x_fbt *f) {
    if (f->recent_n < S3X_FBT_RECENT || f->samples < S3X_FBT_MIN_SAMPLES + S3X_FBT_RECENT) return;
    double r[S3X_FBT_RECENT];
    memcpy(r, f->recent, sizeof r);
    qsort(r, S3X_FBT_RECENT, sizeof r[0], cmp_double);
    double m = f->median_ms, up = S3X_FBT_SHIFT_MULT * m;
    if (m + 4.0 * f->spread_ms > up) up = m + 4.0 * f->spread_ms;
    double lo_k = r[S3X_FBT_RECENT_K - 1], hi_k = r[S3X_FBT_RECENT - S3X_FBT_RECENT_K];
    if (!(lo_k > up) && !(hi_k < m / S3X_FBT_SHIFT_MULT)) return;
    f->win_n = 0;
    f->win_pos = 0;
    f->hist_n = f->hist_pos = 0;
    for (int i = 0; i < S3X_FBT_RECENT; i++) {
        double v = f->recent[(f->recent_pos + i) % S3X_FBT_RECENT]; /* oldest first */
        window_add(f, v, 0);
        hist_add(f, v, 0); /* the new answers: under which timeout is moot, the old one's pace is gone */
    }
    f->rebases++;
}

static void robust_on_success(s3x_fbt *f, double request_ms, double ttfb_ms) {
    f->answered++;
    outcome_push(f->outcomes, 0);
    if (request_ms > 0)
        f->attempt_ms = f->attempt_ms > 0 ? f->attempt_ms + (request_ms - f->attempt_ms) / 8.0 : request_ms;
    f->samples++;
    f->run_of_cuts = 0;
    window_add(f, ttfb_ms, 0);
    f->last_cap_ms = f->timeout_exact_ms;
    hist_add(f, ttfb_ms, f->last_cap_ms);
    f->recent[f->recent_pos] = ttfb_ms;
    f->recent_pos = (f->recent_pos + 1) % S3X_FBT_RECENT;
    if (f->recent_n < S3X_FBT_RECENT) f->recent_n++;
    if (f->samples <= S3X_FBT_SETTLED && ttfb_ms > f->slowest_ms) f->slowest_ms = ttfb_ms;
    /* The lift stays while answers confirm it (slower than the timeout
     * without it); an answer the old timeout would have let through says the
     * run of cuts was a tail after all. */
    if (ttfb_ms > f->base_ms) {
        /* ... and follows them: the answers are the new normal, which the
         * re-base below will learn after a few more. */
        f->lift_ms *= S3X_FBT_LIFT_DECAY;
        if (f->lift_ms > f->base_ms && S3X_FBT_LIFT_FOLLOW * ttfb_ms > f->lift_ms)
            f->lift_ms = S3X_FBT_LIFT_FOLLOW * ttfb_ms;
    } else {
        f->lift_ms *= S3X_FBT_LIFT_DROP;
    }
    robust_update(f);
    if (f->samples >= S3X_FBT_MIN_SAMPLES) {
        int64_t before = f->rebases;
        maybe_rebase(f);
        if (f->rebases != before) robust_update(f);
    }
}

static void robust_on_timeout(s3x_fbt *f, int64_t used_ms) {
    if (used_ms <= 0) return;
    f->cuts++;
    f->run_of_cuts++;
    outcome_push(f->outcomes, 1);
    window_add(f, (double)used_ms, 1);
    /* A run of cuts by the timeout in force (not an older, lower one still
     * being reported): the server slowed down, not a tail. Before the first
     * answer every cut counts as such a run: nothing says the starting
     * timeout suits this link, and a slow one must not be cut at it again
     * and again (a held request re-sent answers at once and undoes it). */
    if ((f->run_of_cuts >= S3X_FBT_RAISE_AFTER || f->samples == 0) && used_ms >= f->timeout_ms) {
        f->lift_ms = 2.0 * (double)used_ms;
        f->raises++;
    }
    robust_update(f);
}

void s3x_fbt_start(s3x_fbt *f, int64_t body_bytes) {
    if (f->mode != 2 || f->estimator != S3X_FBT_ROBUST) return;
    f->start_ms = body_bytes > 0 ? S3X_FBT_START_MS + 1000.0 * (double)body_bytes / S3X_FBT_START_RATE
                                 : S3X_FBT_START_GET_MS;
    robust_update(f);
}

/* ---- carried between transfers -------------------------------------------------
 *
 * Why: a transfer's first requests (a download's probe, the first wave)
 * come before it has answers of its own, so they wait up to the starting
 * timeout where a tuned one cuts them at once; the client's earlier
 * transfers to the same place have answered many. Their last answers seed
 * the window, so the timeout is relative from the first request. What the
 * server did since is learned the way a change within a transfer is: a run
 * of three cuts lifts the timeout and the last 8 answers of this run
 * re-base the window; the budget counts this run's cuts and answers only,
 * so a stale carry cannot cost more re-sends than a transfer's own
 * learning can. Carried answers are kept for S3X_FBT_CARRY_MAX_AGE_S: a
 * client idle for longer starts from the starting timeout again. Cuts do
 * not enter the carried window (their values say how the last timeout
 * did, not how the server answers), but which of the last 128 attempts were
 * cut is carried: a tail of slow attempts is the server's, and the tail
 * rule weighs its share from the first request. The carry keeps the last
 * TAIL_HISTORY answers for the tail rule; the window takes the last 32. */

uint64_t s3x_fbt_carry_key(const char *op, const char *endpoint, const char *bucket, int64_t body_bytes) {
    /* FNV-1a over the fields, each ended by a 0 byte; a collision between
     * two kinds would only give one the other's starting point. */
    uint64_t h = 1469598103934665603ull;
    const char *parts[] = {op ? op : "", endpoint ? endpoint : "", bucket ? bucket : ""};
    for (int i = 0; i < 3; i++) {
        for (const unsigned char *q = (const unsigned char *)parts[i];; q++) {
            h = (h ^ *q) * 1099511628211ull;
            if (!*q) break;
        }
    }
    int size_class = 0; /* floor(log2(body_bytes)) + 1, 0 without a body */
    for (int64_t b = body_bytes; b > 0; b >>= 1) size_class++;
    h = (h ^ (uint64_t)size_class) * 1099511628211ull;
    return h ? h : 1;
}

static s3x_fbt_carry_slot *carry_find(s3x_fbt_carry *c, uint64_t key) {
    for (int i = 0; i < S3X_FBT_CARRY_KEYS; i++)
        if (c->slot[i].key == key) return &c->slot[i];
    return NULL;
}

static s3x_fbt_carry_slot *carry_slot(s3x_fbt_carry *c, uint64_t key) {
    s3x_fbt_carry_slot *s = carry_find(c, key);
    if (!s) {
        s = &c->slot[0];
        for (int i = 0; i < S3X_FBT_CARRY_KEYS && s->key; i++)
            if (!c->slot[i].key || c->slot[i].last_s < s->last_s) s = &c->slot[i];
        memset(s, 0, sizeof *s);
        s->key = key;
    }
    return s;
}

void s3x_fbt_carry_cut(s3x_fbt_carry *c, uint64_t key, double now_s) {
    if (!c || !key) return;
    s3x_fbt_carry_slot *s = carry_slot(c, key);
    outcome_push(s->outcomes, 1);
    s->last_s = now_s;
}

void s3x_fbt_carry_add(s3x_fbt_carry *c, uint64_t key, double ttfb_ms, double cap_ms, double now_s) {
    if (!c || !key) return;
    s3x_fbt_carry_slot *s = carry_slot(c, key);
    outcome_push(s->outcomes, 0);
    s->ring[s->pos] = ttfb_ms < 0 ? 0 : ttfb_ms;
    s->ring_cap[s->pos] = cap_ms > 0 ? cap_ms : 0;
    s->pos = (s->pos + 1) % S3X_FBT_TAIL_HISTORY;
    if (s->n < S3X_FBT_TAIL_HISTORY) s->n++;
    s->last_s = now_s;
}

void s3x_fbt_resume(s3x_fbt *f, s3x_fbt_carry *c, uint64_t key, double now_s) {
    f->carry_tried = 1;
    if (f->mode != 2 || f->estimator != S3X_FBT_ROBUST || f->no_carry || !c || !key) return;
    f->carry_key = key;
    s3x_fbt_carry_slot *s = carry_find(c, key);
    if (!s || s->n == 0) return;
    if (now_s - s->last_s > S3X_FBT_CARRY_MAX_AGE_S) {
        s->n = s->pos = 0; /* stale: this run starts afresh and refills it */
        s->outcomes[0] = s->outcomes[1] = 0;
        return;
    }
    f->outcomes[0] = s->outcomes[0];
    f->outcomes[1] = s->outcomes[1];
    /* All of them to the tail rule's history, the last S3X_FBT_WINDOW to the window. */
    for (int i = 0; i < s->n; i++) {
        int at = (s->pos - s->n + i + S3X_FBT_TAIL_HISTORY) % S3X_FBT_TAIL_HISTORY; /* oldest first */
        double v = s->ring[at];
        hist_add(f, v, s->ring_cap[at]);
        if (i < s->n - S3X_FBT_WINDOW) continue;
        window_add(f, v, 0);
        if (f->samples < S3X_FBT_SETTLED && v > f->slowest_ms) f->slowest_ms = v;
        f->samples++;
        f->carried++;
    }
    robust_update(f);
}

void s3x_fbt_on_success(s3x_fbt *f, double request_ms, double ttfb_ms) {
    if (f->mode != 2) return;
    if (f->estimator == S3X_FBT_P90) p90_on_success(f, request_ms, ttfb_ms);
    else robust_on_success(f, request_ms, ttfb_ms < 0 ? 0 : ttfb_ms);
}

void s3x_fbt_on_timeout(s3x_fbt *f, int64_t used_ms) {
    if (f->mode != 2) return;
    if (f->estimator == S3X_FBT_P90) p90_on_timeout(f, used_ms);
    else robust_on_timeout(f, used_ms);
}
