/* The download's state machine (core/src/proto/range.c, as core/src/xfer/download.c
 * drives it) against a scripted server. The input is the script: the plan
 * (part size, concurrency, the destination's capacity), the size and ETag
 * the server believes in, then for each response to an in-flight request
 * (the input also picks which one finishes next, so ranges complete out of
 * order) its status, Content-Range (honest, off by a delta, raw bytes,
 * absent, size-less, or another total), Content-Length (consistent, absent
 * or another), ETag, body length (exact, short or long) and the sizes of the
 * pieces the body arrives in. This driver makes the same calls, in the same
 * order, as download.c: s3x_dlplan_empty_probe, s3x_dlplan_check on the head,
 * s3x_dlplan_body before each piece is placed, s3x_dlplan_complete at the
 * end of a body, s3x_dlplan_learn after the probe, s3x_dlplan_check_whole on
 * the HEAD that a download of several ranges sends for the full-object
 * checksum, s3x_dlplan_finish at the end; curl's own behaviour is modelled (a body shorter than Content-Length
 * is a broken connection, bytes past it are not delivered).
 *
 * Properties:
 * - a download that succeeds received exactly T bytes, T <= 5 TiB and T fits
 *   the destination; the accepted ranges tile [0, T) in part_size pieces,
 *   each exactly the bytes its request asked for, the probe min(part_size, T);
 * - no byte is placed past the range of the request it answers (the body
 *   check is what keeps a memory or stream destination in bounds);
 * - every refusal is a protocol, size or change error: nothing a server
 *   sends is reported as an internal bug;
 * - no signed overflow anywhere (UBSan), with sizes up to 2^63-1.
 * Findings 3 and 5 of issue 11 (a short first range, the wrong range, a
 * total of 2^63-1 accepted) break the first property. */
#include "fuzz.h"
#include "error.h"
#include "range.h"
#include <inttypes.h>
#include <limits.h>

#define MiB (INT64_C(1) << 20)
#define GiB (INT64_C(1) << 30)
#define MAX_SIM_RANGES 64   /* larger plans are checked by arithmetic only */
#define MAX_SLOTS 8
#define MAX_ATTEMPTS 3
#define MAX_STEPS 1024

static int64_t fuzz_u64(fuzz_in *in) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | fuzz_u8(in);
    return (int64_t)(v & (uint64_t)INT64_MAX);
}

/* Sizes around the edges that matter, or any 63-bit value. */
static int64_t pick_size(fuzz_in *in) {
    static const int64_t table[] = {0, 1, 2, 3, 7, 100, 4096, 5 * MiB - 1, 5 * MiB, 5 * MiB + 1, 8 * MiB,
                                    20 * MiB, 5 * GiB, S3X_MAX_OBJECT_SIZE - 1, S3X_MAX_OBJECT_SIZE,
                                    S3X_MAX_OBJECT_SIZE + 1, INT64_MAX / 2, INT64_MAX - 1, INT64_MAX};
    uint8_t k = fuzz_u8(in);
    if (k < sizeof table / sizeof table[0]) return table[k];
    if (k < 200) return (int64_t)fuzz_u16(in);
    return fuzz_u64(in);
}

static int64_t add_sat(int64_t a, int64_t d) {
    int64_t r;
    return __builtin_add_overflow(a, d, &r) ? a : r;
}

typedef struct slot {
    int used;
    int64_t index;        /* range number; 0 is the probe */
    s3x_dlask ask;
    int attempts;
} slot;

typedef struct sim {
    s3x_dlplan plan;
    int64_t srv_total;    /* what the server believes the size is */
    char *srv_etag;
    slot slots[MAX_SLOTS];
    int nslots;
    int64_t next_index;
    int64_t accepted;     /* ranges accepted */
    int64_t done;         /* bytes of accepted ranges */
    unsigned char seen[MAX_SIM_RANGES]; /* accepted range numbers */
    int failed;           /* 0, or the error code that ended the download */
} sim;

/* One response to s's request: returns 1 when accepted, 0 when to be retried,
 * and sets S->failed when the download ends. */
static int respond(sim *S, slot *s, fuzz_in *in) {
    const s3x_dlask *ask = &s->ask;
    char crbuf[128];
    const char *cr = NULL;
    char *raw = NULL, *etag_other = NULL;
    int accepted = 0, retry = 0;

    /* status */
    uint8_t st = fuzz_u8(in);
    long status = st < 150 ? 206 : st < 200 ? 200 : st < 215 ? 416 : st < 230 ? 503 : st < 240 ? 404 : st < 248 ? 204 : 201;
    /* What an honest server would send for this request. */
    int64_t t = S->srv_total;
    int64_t hf = ask->first, hl = ask->last < t - 1 ? ask->last : t - 1;
    if (!ask->ranged) {
        /* An honest answer is 200; a liar may still send 206. */
        hl = t - 1;
        if (status == 206 && !(st & 1)) status = 200;
    }
    if (ask->ranged && t == 0 && status == 206) status = 416;

    /* Content-Range */
    uint8_t form = fuzz_u8(in) % 8;
    int64_t cf = hf, cl_ = hl, ct = t;
    switch (form) {
    case 3: {
        int64_t d = (int8_t)fuzz_u8(in);
        uint8_t which = fuzz_u8(in) % 3;
        if (which == 0) cf = add_sat(cf, d);
        else if (which == 1) cl_ = add_sat(cl_, d);
        else ct = add_sat(ct, d);
        break;
    }
    case 7: ct = pick_size(in); break;
    default: break;
    }
    if (status == 416) {
        snprintf(crbuf, sizeof crbuf, "bytes */%" PRId64, form == 3 || form == 7 ? ct : t);
        cr = crbuf;
    } else if (form == 4) {
        raw = fuzz_piece(in, NULL);
        cr = raw;
    } else if (form == 5) {
        cr = NULL;
    } else if (form == 6) {
        snprintf(crbuf, sizeof crbuf, "bytes %" PRId64 "-%" PRId64 "/*", cf, cl_);
        cr = crbuf;
    } else {
        snprintf(crbuf, sizeof crbuf, "bytes %" PRId64 "-%" PRId64 "/%" PRId64, cf, cl_, ct);
        cr = crbuf;
    }

    /* Content-Length */
    /* The length the Content-Range states (perturbed fields may be
     * negative or far apart: no overflow here either). */
    int64_t honest_len = t;
    if (status != 200 && (cl_ < cf || __builtin_sub_overflow(cl_, cf, &honest_len) || honest_len == INT64_MAX))
        honest_len = 0;
    else if (status != 200)
        honest_len++;
    if (honest_len < 0) honest_len = 0;
    int64_t clen;
    switch (fuzz_u8(in) % 4) {
    case 2: clen = -1; break;
    case 3: clen = fuzz_u8(in) & 1 ? pick_size(in) : add_sat(honest_len, (int8_t)fuzz_u8(in)); break;
    default: clen = honest_len; break;
    }
    if (clen < -1) clen = -1;

    /* ETag */
    const char *etag;
    switch (fuzz_u8(in) % 4) {
    case 2: etag = NULL; break;
    case 3:
        etag_other = fuzz_piece(in, NULL);
        etag = etag_other;
        break;
    default: etag = S->srv_etag; break;
    }

    /* Body: what the server writes; curl stops at Content-Length and calls
     * a body shorter than it a broken connection. */
    int64_t body = clen >= 0 ? clen : honest_len;
    switch (fuzz_u8(in) % 4) {
    case 2: body = add_sat(body, -(int64_t)fuzz_u16(in)); break;
    case 3: body = add_sat(body, (int64_t)fuzz_u16(in)); break;
    default: break;
    }
    if (body < 0) body = 0;
    int curl_ok = 1;
    if (clen >= 0 && body < clen) curl_ok = 0;
    if (clen >= 0 && body > clen) body = clen;

    s3x_dlresp resp = {status, cr, clen, etag};
    if (curl_ok) {
        int e = s3x_dlplan_empty_probe(&S->plan, ask, &resp);
        if (e < 0) {
            S->failed = e;
            goto out;
        }
        if (e == 1) {
            FUZZ_ASSERT(status == 416 && ask->probe && ask->ranged, "empty probe on HTTP %ld", status);
            s->ask = s3x_dlplan_probe_whole(&S->plan);
            FUZZ_ASSERT(s->ask.probe && !s->ask.ranged && s->ask.first == 0, "refetch ask");
            goto out; /* not an attempt */
        }
    }
    if (status >= 200 && status < 300) {
        s3x_dlverdict v = {0, 0, 0};
        int64_t got = 0;
        if (body > 0 || curl_ok) {
            int rc = s3x_dlplan_check(&S->plan, ask, &resp, &v);
            if (rc) {
                S->failed = rc;
                goto out;
            }
            /* The head is accepted: it is the range asked for. */
            FUZZ_ASSERT(v.offset == ask->first && v.length >= 0 && v.total >= 0 && v.total <= S3X_MAX_OBJECT_SIZE,
                        "verdict %" PRId64 "+%" PRId64 "/%" PRId64, v.offset, v.length, v.total);
            FUZZ_ASSERT(v.offset + v.length <= v.total, "verdict past the object");
            if (ask->probe)
                FUZZ_ASSERT(v.length == (v.total < S->plan.part_size ? v.total : S->plan.part_size),
                            "probe verdict %" PRId64 " of %" PRId64, v.length, v.total);
            else
                FUZZ_ASSERT(v.length == ask->last - ask->first + 1 && v.total == S->plan.total, "range verdict");
            if (S->plan.capacity >= 0) FUZZ_ASSERT(v.total <= S->plan.capacity, "over capacity");
            /* The body in pieces, each checked before it is placed. */
            int64_t left = body;
            while (left > 0) {
                uint32_t k = fuzz_u16(in);
                size_t n = k == 0 || (int64_t)k > left ? (size_t)left : (size_t)k;
                if (s3x_dlplan_body(&v, got, n)) {
                    S->failed = s3x_error_last()->code;
                    goto out;
                }
                got += (int64_t)n;
                FUZZ_ASSERT(got <= v.length, "placed %" PRId64 " of a %" PRId64 "-byte range", got, v.length);
                left -= (int64_t)n;
            }
        }
        if (!curl_ok || s3x_dlplan_complete(&v, got)) {
            retry = 1;
        } else {
            FUZZ_ASSERT(got == v.length, "complete with %" PRId64 " of %" PRId64, got, v.length);
            if (ask->probe) {
                int rc = s3x_dlplan_learn(&S->plan, &v, etag);
                if (rc) {
                    FUZZ_ASSERT(rc == S3X_ELIMIT, "learn failed with %d", rc);
                    S->failed = rc;
                    goto out;
                }
                FUZZ_ASSERT(S->plan.total == v.total && S->plan.nranges >= 1, "learned");
                FUZZ_ASSERT(S->plan.nranges == 1 || (S->plan.nranges - 1) * S->plan.part_size < S->plan.total,
                            "too many ranges");
                FUZZ_ASSERT(S->plan.nranges * S->plan.part_size >= S->plan.total || S->plan.nranges == 1,
                            "too few ranges");
                /* Several ranges: download.c asks a HEAD for the full-object
                 * checksum (memory and streams) and checks it agrees. */
                if (S->plan.nranges > 1) {
                    uint8_t hk = fuzz_u8(in);
                    int64_t hcl = hk % 3 == 0 ? S->plan.total : hk % 3 == 1 ? S->srv_total : -1;
                    const char *hetag = hk & 4 ? NULL : hk & 8 ? "\"other\"" : etag;
                    int hrc = s3x_dlplan_check_whole(&S->plan, hcl, hetag);
                    FUZZ_ASSERT(hrc == 0 || hrc == S3X_ECHANGED, "HEAD check gave %d", hrc);
                    if (hcl >= 0 && hcl != S->plan.total) FUZZ_ASSERT(hrc == S3X_ECHANGED, "a HEAD of another size");
                    if ((hcl < 0 || hcl == S->plan.total) && (!hetag || hetag == etag))
                        FUZZ_ASSERT(hrc == 0, "a consistent HEAD refused: %s", s3x_error_last()->message);
                    if (hrc) {
                        S->failed = hrc;
                        goto out;
                    }
                }
            }
            S->done += got;
            accepted = 1;
        }
    } else if (status == 503) {
        retry = 1;
    } else {
        S->failed = S3X_EHTTP;
    }
    if (retry && ++s->attempts >= MAX_ATTEMPTS) S->failed = S3X_ENETWORK;
out:
    free(raw);
    free(etag_other);
    return accepted;
}

/* A plan too large to run range by range: its arithmetic at the edges. */
static void check_big_plan(const s3x_dlplan *p, fuzz_in *in) {
    int64_t n = p->nranges, P = p->part_size, T = p->total;
    int64_t idx[5] = {1, 2, n - 2, n - 1, n > 2 ? 1 + fuzz_u64(in) % (n - 2) : 1};
    for (int i = 0; i < 5; i++) {
        if (idx[i] < 1 || idx[i] >= n) continue;
        s3x_dlask a = s3x_dlplan_range(p, idx[i]);
        FUZZ_ASSERT(a.first == idx[i] * P && a.first <= a.last && a.last < T && a.last - a.first + 1 <= P,
                    "range %" PRId64 ": %" PRId64 "-%" PRId64, idx[i], a.first, a.last);
        if (idx[i] < n - 1) FUZZ_ASSERT(a.last - a.first + 1 == P, "a middle range is whole");
        else FUZZ_ASSERT(a.last == T - 1, "the last range ends the object");
    }
    s3x_dlask past = s3x_dlplan_range(p, n);
    FUZZ_ASSERT(past.last < past.first, "a range past the plan");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_in in = {data, size};
    sim S;
    memset(&S, 0, sizeof S);
    uint8_t pk = fuzz_u8(&in);
    static const int64_t parts[] = {1, 2, 3, 7, 100, 5 * MiB, 8 * MiB, 5 * GiB};
    int64_t part = pk < 8 ? parts[pk] : pk < 240 ? 1 + (int64_t)(fuzz_u16(&in) % 4096) : pick_size(&in);
    S.nslots = 1 + fuzz_u8(&in) % MAX_SLOTS;
    uint8_t ck = fuzz_u8(&in);
    int64_t capacity = ck < 128 ? -1 : ck < 250 ? (int64_t)fuzz_u16(&in) : pick_size(&in);
    S.srv_total = pick_size(&in);
    S.srv_etag = fuzz_piece(&in, NULL);

    int rc = s3x_dlplan_init(&S.plan, part, capacity);
    if (rc) {
        FUZZ_ASSERT(rc == S3X_EINVAL && (part < 1 || part > S3X_MAX_OBJECT_SIZE), "init refused part %" PRId64, part);
        free(S.srv_etag);
        return 0;
    }
    /* The probe alone, as download.c starts. */
    S.slots[0].used = 1;
    S.slots[0].index = 0;
    S.slots[0].ask = s3x_dlplan_probe(&S.plan);
    FUZZ_ASSERT(S.slots[0].ask.first == 0 && S.slots[0].ask.last == part - 1, "probe ask");
    S.next_index = 1;
    int big = 0;
    for (int step = 0; step < MAX_STEPS && !S.failed; step++) {
        /* Fill free slots once the size is known. */
        if (S.plan.total >= 0) {
            if (S.plan.nranges > MAX_SIM_RANGES) {
                big = 1;
                break;
            }
            for (int i = 0; i < S.nslots && S.next_index < S.plan.nranges; i++) {
                if (S.slots[i].used) continue;
                S.slots[i].used = 1;
                S.slots[i].index = S.next_index++;
                S.slots[i].ask = s3x_dlplan_range(&S.plan, S.slots[i].index);
                S.slots[i].attempts = 0;
                /* The plan tiles the object: range i is bytes i*P .. min((i+1)*P, T)-1. */
                const s3x_dlask *a = &S.slots[i].ask;
                FUZZ_ASSERT(!a->probe && a->ranged && a->first == S.slots[i].index * part && a->first <= a->last &&
                                a->last - a->first + 1 <= part,
                            "range %" PRId64 " planned as %" PRId64 "-%" PRId64, S.slots[i].index, a->first, a->last);
                FUZZ_ASSERT((S.slots[i].index == S.plan.nranges - 1) == (a->last == S.plan.total - 1),
                            "only the last range ends the object");
            }
        }
        int busy[MAX_SLOTS], nb = 0;
        for (int i = 0; i < S.nslots; i++)
            if (S.slots[i].used) busy[nb++] = i;
        if (!nb) break;
        slot *s = &S.slots[busy[fuzz_u8(&in) % nb]];
        if (respond(&S, s, &in)) {
            FUZZ_ASSERT(!S.seen[s->index], "range %" PRId64 " accepted twice", s->index);
            S.seen[s->index] = 1;
            S.accepted++;
            s->used = 0;
        }
    }
    if (big) {
        FUZZ_ASSERT(S.plan.total <= S3X_MAX_OBJECT_SIZE && S.plan.nranges <= INT_MAX, "a big plan");
        check_big_plan(&S.plan, &in);
    } else if (S.failed) {
        int c = S.failed;
        FUZZ_ASSERT(c == S3X_ENETWORK || c == S3X_ECHANGED || c == S3X_ELIMIT || c == S3X_EHTTP,
                    "a server's answer was reported as error %d: %s", c, s3x_error_last()->message);
    } else if (S.plan.total >= 0 && S.accepted == S.plan.nranges) {
        /* Success: every range, exactly once, and exactly T bytes. */
        FUZZ_ASSERT(s3x_dlplan_finish(&S.plan, S.done) == 0, "finish refused a whole download: %s",
                    s3x_error_last()->message);
        FUZZ_ASSERT(S.done == S.plan.total, "delivered %" PRId64 " of %" PRId64, S.done, S.plan.total);
        for (int64_t i = 0; i < S.plan.nranges; i++) FUZZ_ASSERT(S.seen[i], "range %" PRId64 " missing", i);
        FUZZ_ASSERT(S.plan.total <= S3X_MAX_OBJECT_SIZE, "accepted a %" PRId64 "-byte object", S.plan.total);
        if (S.plan.capacity >= 0) FUZZ_ASSERT(S.plan.total <= S.plan.capacity, "over capacity");
    } else {
        /* Steps ran out: whatever arrived must not pass for the object. */
        if (S.plan.total >= 0 && S.done != S.plan.total)
            FUZZ_ASSERT(s3x_dlplan_finish(&S.plan, S.done) == S3X_ENETWORK, "an incomplete download passed");
    }
    free(S.srv_etag);
    return 0;
}
