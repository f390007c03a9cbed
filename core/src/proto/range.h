/* The decisions of a ranged download, without curl or I/O (private): parsing
 * Content-Range and Content-Length, checking each response against the range
 * it answers and against what the first response taught (size, ETag), and
 * the final byte count. download.c asks these functions for every decision
 * about a response, so they can be unit-tested (tests/c/test_range.c) and
 * fuzzed (tests/fuzz/fuzz_content_range.c, fuzz_download.c) on their own.
 *
 * A server, proxy or cache may send anything: every length it states is
 * checked against what was asked before a byte of the body is placed. */
#ifndef S3X_RANGE_H
#define S3X_RANGE_H
#include <stddef.h>
#include <stdint.h>

/* The largest object S3 stores: 5 TiB. A larger size is refused, which also
 * keeps every offset and count below far from int64_t overflow. */
#define S3X_MAX_OBJECT_SIZE INT64_C(5497558138880)

/* A parsed Content-Range value. */
typedef struct s3x_crange {
    int64_t first, last;  /* the bytes sent, inclusive; both -1 for an unsatisfied range */
    int64_t total;        /* the object's size; -1 when the server wrote '*' for it */
} s3x_crange;

/* Parses a Content-Range value (n bytes at v, no NUL needed) strictly:
 * "bytes A-B/T", "bytes A-B/" followed by '*' (size unknown) or "bytes " '*'
 * "/T" (an unsatisfied range, in a 416), the unit in any case, exactly one
 * space after it, decimal
 * digits only (no sign, no spaces, no trailing text), every number at most
 * INT64_MAX, and A <= B, and B < T when T is known. Returns 0, or -1 when
 * the value is anything else (out untouched). Sets no thread error: the
 * caller knows which response it was. */
int s3x_crange_parse(const char *v, size_t n, s3x_crange *out);

/* Parses a Content-Length value: decimal digits only, at most INT64_MAX.
 * Returns 0, or -1 (out untouched). */
int s3x_content_length_parse(const char *v, size_t n, int64_t *out);

/* What a download has learned and planned. */
typedef struct s3x_dlplan {
    int64_t part_size;    /* bytes per range */
    int64_t capacity;     /* the destination holds at most this much (memory); -1: no limit */
    int64_t total;        /* the object's size; -1 until the probe is accepted */
    int64_t nranges;      /* ranges of part_size that cover total (1 for an empty object) */
    char etag[256];       /* the probe's ETag, its first 255 bytes ("" when it sent none) */
    size_t etag_len;      /* its whole length */
    uint64_t etag_hash;   /* FNV-1a of the whole ETag (W/ removed), for longer ones */
} s3x_dlplan;

/* What one request asked for. */
typedef struct s3x_dlask {
    int probe;            /* the first request, which learns the size and ETag */
    int ranged;           /* sent a Range header (not so for the empty object's refetch) */
    int64_t first, last;  /* the bytes asked for (probe: 0 .. part_size-1) */
} s3x_dlask;

/* The parts of a finished response's head that the checks read. */
typedef struct s3x_dlresp {
    long status;
    const char *content_range;   /* NULL when absent */
    int64_t content_length;      /* -1 when absent */
    const char *etag;            /* NULL when absent */
} s3x_dlresp;

/* What a response must deliver once its head is accepted. */
typedef struct s3x_dlverdict {
    int64_t offset;       /* where its body starts in the object */
    int64_t length;       /* exactly this many body bytes, no more, no fewer */
    int64_t total;        /* the object's size it states */
} s3x_dlverdict;

/* Starts a plan. part_size must be at least 1; capacity is -1 or the most
 * bytes the destination holds. Returns 0 or S3X_EINVAL (thread error set). */
int s3x_dlplan_init(s3x_dlplan *p, int64_t part_size, int64_t capacity);

/* The probe: bytes 0 .. part_size-1 with a Range header. */
s3x_dlask s3x_dlplan_probe(const s3x_dlplan *p);

/* The probe again without a Range header, after the server answered the
 * ranged probe with 416 (an empty object). */
s3x_dlask s3x_dlplan_probe_whole(const s3x_dlplan *p);

/* Whether a 416 to the ranged probe means an empty object, so the probe is
 * to be sent again without Range: 1 yes; 0 it does not apply (not the ranged
 * probe, or not 416: an ordinary HTTP error); a negative S3X_E* code (thread
 * error set) when the 416 itself says the object has bytes (then 0-... was
 * satisfiable and the answer contradicts itself). */
int s3x_dlplan_empty_probe(const s3x_dlplan *p, const s3x_dlask *ask, const s3x_dlresp *resp);

/* Range number index (1 .. nranges-1) of a planned download. Requires
 * total >= 0 and index in range (anything else is a caller bug: the ask
 * comes back with first > last). */
s3x_dlask s3x_dlplan_range(const s3x_dlplan *p, int64_t index);

/* Checks the head of a 2xx response to ask before any of its body is used:
 *  - 206: Content-Range parses, starts at the asked first byte and ends at
 *    the asked last byte (the probe: at min(part_size, T) - 1), states the
 *    same total as the probe did (later ranges) and at most
 *    S3X_MAX_OBJECT_SIZE bytes; Content-Length, when sent, is B-A+1.
 *  - 200: accepted only to the probe, and only as the whole object in one
 *    piece that fits what the probe asked for (Content-Length <= part_size,
 *    or any length to the refetch without Range): see range.c for why.
 *  - a later range's ETag, when both are known, is the probe's.
 *  - the object fits the destination's capacity.
 * Returns 0 with *v filled, or a negative S3X_E* code with the thread error
 * saying what was wrong (S3X_ENETWORK for a response that contradicts the
 * request, S3X_ECHANGED for another size or ETag than the probe's,
 * S3X_ELIMIT for an object above 5 TiB or above the capacity). The message
 * does not name the object: the caller prefixes it. */
int s3x_dlplan_check(const s3x_dlplan *p, const s3x_dlask *ask, const s3x_dlresp *resp, s3x_dlverdict *v);

/* Whether n more body bytes fit after got bytes of a response whose verdict
 * is v: 0, or S3X_ENETWORK (thread error set) when the body runs past the
 * range (never written anywhere). */
int s3x_dlplan_body(const s3x_dlverdict *v, int64_t got, size_t n);

/* Whether a finished body of got bytes is whole: 0, or S3X_ENETWORK (thread
 * error set: "ended after X of Y bytes"). A short body is a broken
 * connection, which the caller may retry. */
int s3x_dlplan_complete(const s3x_dlverdict *v, int64_t got);

/* Checks a HEAD of the object, sent with If-Match the probe's ETag to learn
 * its full-object checksum, against the plan: the same size (when it says
 * one) and ETag (when both are known). Returns 0, or S3X_ECHANGED (thread
 * error set). */
int s3x_dlplan_check_whole(const s3x_dlplan *p, int64_t content_length, const char *etag);

/* Records what the accepted probe taught: the size, the number of ranges
 * and the ETag (etag may be NULL). Returns 0, or S3X_ELIMIT when the ranges
 * would not fit an int (part_size tiny against total) (thread error set). */
int s3x_dlplan_learn(s3x_dlplan *p, const s3x_dlverdict *v, const char *etag);

/* The end of a download: every byte of the object arrived. Returns 0, or
 * S3X_ENETWORK (thread error set) when done != total or no size was learned. */
int s3x_dlplan_finish(const s3x_dlplan *p, int64_t done);

#endif
