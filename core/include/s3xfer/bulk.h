/* s3xfer: many objects at once: a directory up or down, a prefix copied
 * or deleted, a sync in either direction.
 *
 * A bulk job runs on one batch (s3xfer/batch.h): one libcurl loop, one
 * connection limit (CONCURRENCY) and one memory budget (MEMORY_LIMIT) for
 * the whole run, whatever the number of objects. Its work comes from a
 * sorted walk of the local tree and/or a paged listing of the bucket
 * prefix, pulled as the batch has room: a run over a million objects holds
 * a few thousand pending records and a page or two of the listing, never
 * the whole tree or listing, and transfers start while the listing goes on.
 *
 * Order and keys: a local file's key is the prefix followed by its path
 * relative to the directory, with '/' separators. A prefix that does not
 * end in '/' is taken as a folder: "photos" means "photos/". Walks are in
 * the order the server lists keys in (S3's byte order, or directory order:
 * see S3X_BULK_LISTING_*), so a sync is a streaming merge of the two sorted
 * sequences.
 *
 * Safety of downloads: a key becomes a path beneath the directory given,
 * or it is refused for that object with the reason (S3X_BULK_REFUSED):
 * "..", "." or empty segments, a leading '/', a segment longer than the
 * file system's name limit, or a path over PATH_MAX. A key ending in '/'
 * (a "directory marker") makes a directory, not a file. Parent directories
 * are created one component at a time without following symbolic links;
 * a component that exists as a file (key "a" and key "a/b") or a symbolic
 * link fails that object with a clear reason and nothing is overwritten.
 * Each file lands by temporary file and rename, as s3x_download_file does.
 *
 * Errors: the bulk call returns 0 when every object succeeded (or was
 * skipped as up to date), S3X_EPARTIAL when some objects failed or were
 * refused (each reported through the object callback and counted in the
 * summary), or another code when the run itself could not proceed (the
 * directory cannot be read, the listing failed, cancelled), with its error.
 * FAIL_FAST (s3x_bulk_set) stops the run at the first object that fails.
 *
 * Threads: a bulk call blocks its thread and runs its callbacks there; the
 * client belongs to the call meanwhile. s3x_bulk_cancel may be called from
 * any thread or a signal handler: in-flight multipart uploads are aborted
 * and temporary files removed before the call returns S3X_ECANCELLED.
 */
#ifndef S3XFER_BULK_H
#define S3XFER_BULK_H

#include <stddef.h>
#include <stdint.h>
#include "s3xfer/export.h"
#include "s3xfer/errors.h"
#include "s3xfer/params.h"
#include "s3xfer/client.h"
#include "s3xfer/transfer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct s3x_bulk s3x_bulk;

/* What happened (or, with S3X_BULK_DRYRUN, would happen) to one object. */
typedef enum s3x_bulk_action {
    S3X_BULK_UPLOAD = 1,        /* local file -> object */
    S3X_BULK_DOWNLOAD,          /* object -> local file */
    S3X_BULK_COPY,              /* object -> object, server-side */
    S3X_BULK_DELETE_REMOTE,     /* object deleted (rm -r; sync --delete up) */
    S3X_BULK_DELETE_LOCAL,      /* local file deleted (sync --delete down) */
    S3X_BULK_SKIP,              /* up to date (sync), or excluded by a filter when reported */
    S3X_BULK_MKDIR,             /* a directory made for a directory marker key */
    S3X_BULK_REFUSED            /* not done: a key or path that is unsafe or cannot be held
                                   (reason says why); counts as failed */
} s3x_bulk_action;

/* A static name for an action: "upload", "download", "copy", "delete" (both
 * kinds), "skip", "mkdir", "refused" ("unknown" for another value). */
S3X_API const char *s3x_bulk_action_name(s3x_bulk_action action);

/* One object's outcome. Pointers are valid during the callback only. */
typedef struct s3x_bulk_item {
    s3x_bulk_action action;
    const char *key;            /* the object's key (a copy: the source key) or NULL */
    const char *dest_key;       /* a copy's destination key, else NULL */
    const char *path;           /* the local path or NULL */
    int64_t size;               /* bytes of the object or file (-1 unknown) */
    int rc;                     /* 0, or the S3X_E* code it failed with */
    const s3x_error *err;       /* its error when rc != 0, else NULL */
    const char *reason;         /* why it was skipped, refused or done ("size differs",
                                   "missing at destination", "'..' segment"), or NULL */
    const s3x_result *result;   /* the transfer's result (UPLOAD, DOWNLOAD, COPY), else NULL */
} s3x_bulk_item;

/* Counts for the whole run, so far or at the end. */
typedef struct s3x_bulk_summary {
    int64_t objects_found;      /* objects (or files) planned so far: done, skipped, failed or pending */
    int listing_done;           /* 1 once the walk and the listing are complete (objects_found is final) */
    int64_t objects_done;       /* transferred, copied or deleted */
    int64_t objects_skipped;    /* up to date */
    int64_t objects_failed;     /* failed or refused */
    int64_t bytes_found;        /* bytes of the objects planned so far */
    int64_t bytes_done;         /* bytes moved (in-flight parts counted as they go) */
    double seconds;             /* since the call started */
    int64_t requests, retries;  /* HTTP requests of the transfers (listing and deletes included) */
    int64_t peak_buffer_bytes;  /* most bytes of part buffers held at one time */
    int64_t budget;             /* the memory budget in force */
} s3x_bulk_summary;

/* Per object, after it finished (or was skipped or refused). */
typedef void (*s3x_bulk_item_fn)(const s3x_bulk_item *item, void *payload);
/* Progress of the whole run, at least every 250 ms while it runs and once
 * at the end. Return non-zero to cancel the run. */
typedef int (*s3x_bulk_progress_fn)(const s3x_bulk_summary *sofar, void *payload);

/* Flags (s3x_bulk_set_flags). */
#define S3X_BULK_FOLLOW_SYMLINKS 0x1u /* upload: follow symbolic links (loops are detected); default:
                                         links are reported as skipped, never followed */
#define S3X_BULK_SYNC_DELETE 0x2u     /* sync: delete at the destination what the source lacks */
#define S3X_BULK_DRYRUN 0x4u          /* report what would be done, change nothing */
#define S3X_BULK_EXACT 0x8u           /* sync: compare content (ETag/MD5 where the object has one)
                                         rather than size and modification time */
/* A sync merges the local walk with the listing, so both must come in the
 * same order. S3 lists keys in byte order; servers built on a directory
 * tree list each directory's entries by name, so "a/b" comes before "a-b"
 * (directory order). A sync takes directory order when the server says it
 * is SeaweedFS (its Server header), else byte order; these force one. A
 * listing that does not ascend in the order taken fails the sync. */
#define S3X_BULK_LISTING_BYTES 0x10u
#define S3X_BULK_LISTING_DIRS 0x20u

/* Creates a bulk job that sends through client (borrowed). */
S3X_API int s3x_bulk_new(s3x_bulk **out, s3x_client *client);
S3X_API void s3x_bulk_free(s3x_bulk *bulk);
/* Knobs: every batch knob (s3x_batch_set): CONCURRENCY and MEMORY_LIMIT
 * for the whole run, PART_SIZE and the rest for each transfer, FAIL_FAST. */
S3X_API int s3x_bulk_set(s3x_bulk *bulk, s3x_param param, int64_t value);
S3X_API int s3x_bulk_set_flags(s3x_bulk *bulk, unsigned flags);
/* Filters, applied in the order added to the path relative to the
 * directory (or the key relative to the prefix): every object starts
 * included, and each filter whose pattern matches sets include or exclude,
 * so the last match wins (the AWS CLI's --include/--exclude rule). Patterns
 * are globs: '*' matches any run of characters, '/' included; '?' one
 * character; [...] a class. */
S3X_API int s3x_bulk_add_filter(s3x_bulk *bulk, int include, const char *pattern);
S3X_API void s3x_bulk_set_callbacks(s3x_bulk *bulk, s3x_bulk_item_fn on_item, s3x_bulk_progress_fn on_progress,
                                    void *payload);
/* Cancels a running call; safe from any thread and from a signal handler. */
S3X_API void s3x_bulk_cancel(s3x_bulk *bulk);

/* Uploads every regular file under dir to bucket, keys prefix + relative
 * path (prefix may be "" or NULL; a prefix is always a folder: "p" and "p/"
 * both give keys "p/..."). */
S3X_API int s3x_bulk_upload_dir(s3x_bulk *bulk, const char *dir, const char *bucket, const char *prefix,
                                s3x_bulk_summary *summary);
/* Downloads every object under prefix into dir (created if missing): the
 * key with prefix removed is the path relative to dir. */
S3X_API int s3x_bulk_download_dir(s3x_bulk *bulk, const char *bucket, const char *prefix, const char *dir,
                                  s3x_bulk_summary *summary);
/* Makes bucket/prefix hold what dir holds: uploads what is missing or
 * differs (size differs, or the file is newer than the object; content
 * with S3X_BULK_EXACT), deletes objects dir lacks with S3X_BULK_SYNC_DELETE. */
S3X_API int s3x_bulk_sync_up(s3x_bulk *bulk, const char *dir, const char *bucket, const char *prefix,
                             s3x_bulk_summary *summary);
/* Makes dir hold what bucket/prefix holds: downloads what is missing or
 * differs (size differs, or the object is newer than the file), and with
 * S3X_BULK_SYNC_DELETE deletes local files the prefix lacks. Downloaded
 * files get the object's LastModified as their modification time, so an
 * unchanged tree syncs to nothing the next time. */
S3X_API int s3x_bulk_sync_down(s3x_bulk *bulk, const char *bucket, const char *prefix, const char *dir,
                               s3x_bulk_summary *summary);
/* Deletes every object under prefix (DeleteObjects, up to 1,000 keys a
 * request; filters apply). An empty or NULL prefix means every object in
 * the bucket. */
S3X_API int s3x_bulk_delete_prefix(s3x_bulk *bulk, const char *bucket, const char *prefix,
                                   s3x_bulk_summary *summary);
/* Copies every object under src_prefix to dst_bucket/dst_prefix + the key
 * relative to src_prefix, server-side (bytes never pass through the client). */
S3X_API int s3x_bulk_copy_prefix(s3x_bulk *bulk, const char *src_bucket, const char *src_prefix,
                                 const char *dst_bucket, const char *dst_prefix, s3x_bulk_summary *summary);

#ifdef __cplusplus
}
#endif
#endif
