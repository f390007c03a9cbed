/* The part scheduler (private): one drive loop for every transfer kind.
 *
 * A transfer (an upload or a download of one object) is cut into parts,
 * each one HTTP request. The scheduler owns the parts and moves each through
 * a small state machine:
 *
 *     FREE --feed--> QUEUED --start--> INFLIGHT --done--> judged:
 *       OK    -> take: FREE, or HELD (kept for in-order delivery, then FREE)
 *       RETRY -> RETRY_WAIT (until its backoff deadline) --start--> INFLIGHT
 *       FAIL  -> FREE, the transfer failed (unless the kind says the part
 *                did not matter)
 *
 * Reading a part's bytes or waiting for a buffer happens inside the kind's
 * feed: a part that cannot get a buffer stays FREE and the transfer counts
 * one buffer wait. The scheduler alone starts requests, cuts the ones with
 * no first byte in time, asks the retry policy (s3x_xfer_judge), computes
 * the poll deadline and reports progress heartbeats; a kind (upload.c,
 * download.c) says only what a part is and where its bytes go, through a
 * table of operations (s3x_kind).
 *
 * The scheduler holds a list of transfers sharing one client (one libcurl
 * multi loop) and one connection limit. Today every blocking call runs a
 * list of one; the structures are those of many:
 *   - fairness: new parts are fed round-robin from a cursor that moves past
 *     the transfer fed last, one part per transfer per round, so a big
 *     object cannot take every free connection while small ones wait, and a
 *     transfer with nothing to feed leaves its turn to the next;
 *   - a shared memory budget: the kinds take part buffers from their
 *     transfer's pool today (bounded by memory_limit per transfer); a batch
 *     would point every transfer's buffer source at one pool owned by the
 *     scheduler, bounded by the batch's budget, and a feed that finds it
 *     empty already waits (returns 0) rather than failing, which is the
 *     behaviour a budget needs.
 */
#ifndef S3X_SCHED_H
#define S3X_SCHED_H

#include "xfer.h"

enum s3x_part_state {
    S3X_PART_FREE = 0,    /* no part assigned: the slot can be fed */
    S3X_PART_QUEUED,      /* assigned, its request starts on the next turn */
    S3X_PART_INFLIGHT,    /* its request is on the multi loop */
    S3X_PART_RETRY_WAIT,  /* failed retryably: starts again at retry_at */
    S3X_PART_HELD         /* done, its bytes wait to be delivered in order */
};

struct s3x_transfer;

typedef struct s3x_part {
    int state;                 /* enum s3x_part_state */
    int side;                  /* a side request (not fed, no connection slot,
                                  no first-byte cut): the download's HEAD, the
                                  upload's Create/CompleteMultipartUpload */
    int drain;                 /* when its transfer fails, an attempt in flight is let finish rather
                                  than cut: its answer may create what the cleanup must undo (an
                                  upload's CreateMultipartUpload), so the transfer ends after it */
    int attempts;              /* requests made for this part, this one included */
    double retry_at;           /* RETRY_WAIT: when to start again */
    int fb_timeout;            /* the last attempt was cut by the first-byte timeout */
    int64_t fb_timeout_used;   /* ... how long it was given, ms (scheduler.c: fb_due) */
    double fb_floor_ms;        /* DYNAMIC: the learned timeout in force when this attempt started
                                  (0 while none is learned); it keeps it if the timeout falls;
                                  raised while most of the first wave waits (scheduler.c, hold_broad) */
    s3x_http_req req;
    struct s3x_transfer *t;
} s3x_part;

/* What a kind's check says about a finished request. */
enum { S3X_CHECK_JUDGE = 0, S3X_CHECK_HANDLED = 1 };

/* The operations a transfer kind supplies. Each is given the transfer and,
 * where it concerns one, the part (the first member of the kind's own part
 * type, so the kind casts it back). Optional ones may be NULL. */
typedef struct s3x_kind {
    const char *name;
    size_t part_size;          /* sizeof the kind's part type */
    /* Assigns the next part to the FREE part p (reading its bytes into a
     * buffer if it needs one) and sets it QUEUED. 1: queued; 0: nothing to
     * feed now (no more parts, or no buffer yet); <0: error (thread error set). */
    int (*feed)(struct s3x_transfer *t, s3x_part *p);
    /* Fills p->req (already reset) for its next attempt: method, target,
     * headers, body source or sink. 0 or <0. */
    int (*prepare)(struct s3x_transfer *t, s3x_part *p);
    /* Optional: looks at a finished request before the retry policy does
     * (protocol checks, write errors). S3X_CHECK_JUDGE lets the policy
     * decide; S3X_CHECK_HANDLED means the kind set p->state itself (and
     * failed the transfer if it had to). */
    int (*check)(struct s3x_transfer *t, s3x_part *p);
    /* Optional: the policy failed p (thread error set). Returns 1 if that
     * fails the transfer (the kind may reword the error first), 0 if the
     * part did not matter. NULL: every failure fails the transfer. */
    int (*failed)(struct s3x_transfer *t, s3x_part *p);
    /* The part succeeded: records it. Returns the next state (FREE, HELD or
     * QUEUED), or <0 when the transfer failed (thread error saved). */
    int (*take)(struct s3x_transfer *t, s3x_part *p);
    /* Optional, every turn before anything starts: in-order delivery of
     * HELD parts, writer errors. 0, or <0 when the transfer failed. */
    int (*tick)(struct s3x_transfer *t);
    /* 1 while parts remain to be fed. */
    int (*more)(struct s3x_transfer *t);
    /* Optional: 1 while the transfer waits for something outside its parts. */
    int (*pending)(struct s3x_transfer *t);
    /* Bytes done so far counting in-flight parts, and the total (-1 unknown),
     * for progress heartbeats. */
    void (*moving)(struct s3x_transfer *t, int64_t *done, int64_t *total);
    /* Gives back what the part holds (buffers) when the transfer stops. */
    void (*release)(struct s3x_transfer *t, s3x_part *p);
    /* Optional: 1 while the transfer's parts must not start (fed or
     * queued): a side request prepares the way (CreateMultipartUpload). */
    int (*hold)(struct s3x_transfer *t);
    /* Optional: every part is done and the transfer did not fail: its last
     * steps (CompleteMultipartUpload; a file's sync and rename). 0: done;
     * 1: a side part was queued, call again once nothing is busy; 2: waiting
     * for something off the loop (a file's fsync on its writer thread), which
     * wakes the loop when done; <0: the transfer failed (thread error set). */
    int (*finish)(struct s3x_transfer *t);
    /* Called by the transfer's owner once it stopped (rc: 0 or its error):
     * aborts what a failure left (a multipart upload, a temporary file),
     * takes the transfer off its scheduler and frees the kind's run. The
     * thread's error is kept. See kinds.h. */
    void (*close)(struct s3x_transfer *t, int rc);
} s3x_kind;

typedef struct s3x_transfer {
    const s3x_kind *kind;
    void *ctx;                 /* the kind's run state */
    s3x_xfer *x;               /* knobs, policy, result, cancel flag, error */
    const char *what;          /* "upload to", "download of": for the cancel message */
    const char *bucket, *key;  /* the object, for the same */
    unsigned char *parts;      /* nparts + nside parts of kind->part_size bytes */
    int nparts, nside;
    int inflight;              /* parts INFLIGHT (side ones included) */
    int finished;              /* done, or failed and stopped */
    int ok;                    /* finished, and succeeded */
    double answered_sent;      /* the latest t_sent of an attempt whose first byte came: whether a
                                  request sent after a waiting one was answered (s3x_now() clock) */
    double last_done;          /* when a part's attempt last ended (answered, failed or cut) */
    double first_answer;       /* when a part's attempt first had its first byte; 0: none yet */
    void *owner;               /* the batch's record of this transfer, or NULL */
    struct s3x_transfer *next;
    struct s3x_sched *sched;
} s3x_transfer;

typedef struct s3x_sched {
    s3x_client *client;        /* every transfer's; one multi loop */
    int max_conns;             /* connection limit over all transfers (fed parts) */
    int conns;                 /* fed parts in flight now */
    s3x_transfer *head, *tail;
    s3x_transfer *cursor;      /* where the next feeding round starts */
    int any_failed;
    /* Optional: told when a transfer finishes (t->ok says how), after the
     * turn's pass over the list; it may remove t (close it). */
    void (*on_end)(struct s3x_sched *s, s3x_transfer *t, void *payload);
    void *end_payload;
    /* Writer threads shared by the file downloads run here (filewriter.h),
     * made by the first; freed by s3x_sched_fini. */
    struct s3x_wpool *wpool;
} s3x_sched;

/* At most this many writer threads per scheduler (fewer at lower concurrency). */
#define S3X_WPOOL_MAX_THREADS 16

void s3x_sched_init(s3x_sched *s, s3x_client *c, int max_conns);
/* Frees what the scheduler itself holds (its writer threads), once every
 * transfer on it has been closed. */
void s3x_sched_fini(s3x_sched *s);

/* Sets up t (parts zeroed, each knowing its transfer) and appends it to the
 * list. nparts: parts the kind may feed at once; nside: side parts after
 * them. Returns 0 or S3X_ENOMEM. */
int s3x_sched_add(s3x_sched *s, s3x_transfer *t, const s3x_kind *kind, void *ctx, s3x_xfer *x, int nparts,
                  int nside);
/* Frees a transfer's parts (their requests reset, the kind's release
 * called) and takes it off the list. */
void s3x_sched_remove(s3x_sched *s, s3x_transfer *t);

static inline s3x_part *s3x_transfer_part(const s3x_transfer *t, int i) {
    return (s3x_part *)(void *)(t->parts + (size_t)i * t->kind->part_size);
}

/* One turn of the loop: starts what is due, feeds free connections, finishes
 * or stops transfers (on_end told), then waits on the sockets for at most
 * max_wait_ms (-1: until the next deadline, at most 100 ms) and cuts slow
 * parts. Returns the number of transfers still running (0: nothing to wait
 * for, no wait done), or -1 when the loop itself broke (every transfer then
 * failed with its error). */
int s3x_sched_turn(s3x_sched *s, int max_wait_ms);

/* Runs every transfer on the list until each has finished or failed. A
 * failed transfer's in-flight parts are stopped, the others go on. Returns 0
 * if all succeeded, -1 if any failed (its error is in its x->err). */
int s3x_sched_run(s3x_sched *s);

#endif
