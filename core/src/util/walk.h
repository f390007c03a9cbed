/* A sorted walk of a local directory tree, for directory uploads and sync
 * (private, libc only).
 *
 * Order: entries come in ascending order of the bytes of their relative path
 * (memcmp order), which is the order in which S3 lists keys (ListObjectsV2
 * sorts keys by their UTF-8 bytes). So a walk and a listing can be merged in
 * one streaming pass. Sorting each directory's names is not enough for that
 * ("a-b" sorts before "a/x" but after "a"): each directory's entries are
 * sorted by name with a '/' appended to the names of directories, which
 * gives exactly the order of a sort of all relative paths.
 *
 * Memory: one directory's names per level of depth (the levels from the root
 * to the current directory), never the whole tree; one file descriptor per
 * level.
 *
 * Safety: every directory is opened relative to its parent's descriptor with
 * openat(O_NOFOLLOW) and every entry is examined with fstatat relative to it,
 * so a directory renamed or replaced by a symlink during the walk cannot send
 * the walk outside the root (unless S3X_WALK_FOLLOW_SYMLINKS asks for that).
 *
 * Like `aws s3 cp --recursive`, the walk crosses into other file systems
 * mounted beneath the root.
 *
 * Entries that cannot be read are returned as entries with err set (and the
 * walk goes on); nothing is skipped silently:
 *   - a symbolic link when links are not followed: err S3X_EINVAL, message
 *     "symlink (not followed)";
 *   - a FIFO, socket or device: err S3X_EINVAL, "not a regular file (FIFO)";
 *     it is never opened;
 *   - a file or directory that vanished between readdir and fstatat: S3X_EIO;
 *   - a directory that cannot be opened or read (permission denied): S3X_EIO,
 *     with rel ending in '/';
 *   - with S3X_WALK_FOLLOW_SYMLINKS, a link to a directory that is already on
 *     the current path (a loop, detected by device and inode), a link loop
 *     (ELOOP) or a dangling link: S3X_EIO or S3X_EINVAL.
 * A directory whose kind changes between readdir and fstatat (a file replaced
 * by a directory) is still walked, possibly slightly out of order. */
#ifndef S3X_WALK_H
#define S3X_WALK_H

#include <stddef.h>
#include <stdint.h>

enum {
    /* Follow symbolic links (to files and directories), with loop detection
     * by the device and inode of the directories on the current path. */
    S3X_WALK_FOLLOW_SYMLINKS = 1 << 0,
    /* Also return empty directories (no entries at all), as entries with
     * is_dir 1 and rel ending in '/' ("a/empty/"), at their sorted place:
     * the key an S3 "directory marker" would have. */
    S3X_WALK_EMPTY_DIRS = 1 << 1,
    /* Directory order instead of S3's byte order: each directory's entries
     * by name alone, a subdirectory's files at its name's place ("a/x"
     * before "a-b"), which is how servers built on a directory tree
     * (SeaweedFS) list keys. */
    S3X_WALK_DIR_ORDER = 1 << 2,
};

typedef struct s3x_walk s3x_walk;

typedef struct s3x_walk_entry {
    /* The path relative to the root, '/'-separated, NUL-terminated; rel_len
     * is strlen(rel). Owned by the walker, valid until the next call to
     * s3x_walk_next or s3x_walk_close. Ends in '/' for directories (empty
     * directories, or directories that could not be read). */
    const char *rel;
    size_t rel_len;
    /* root + "/" + rel (root as given, without a doubled '/'); same lifetime.
     * For messages; to open the file, prefer dirfd + name, which cannot be
     * redirected by a rename of a parent directory. */
    const char *path;
    /* The directory that holds the entry, open (owned by the walker, valid
     * until the next call), and the entry's name in it (no '/'). Open the
     * file with openat(dirfd, name, O_RDONLY | O_NOFOLLOW) (without
     * O_NOFOLLOW when links are followed), and check its fstat against
     * size/mtime to notice a file that changed since the walk saw it. */
    int dirfd;
    const char *name;
    int is_dir;            /* 1: an empty directory (or an unreadable one, with err) */
    int is_symlink;        /* 1: a symbolic link left alone (links not followed; err
                              S3X_EINVAL, "symlink (not followed)"): a skip to
                              report, not a failure; test this, not the message */
    int64_t size;          /* bytes (0 for directories and most errors) */
    int64_t mtime_sec;     /* st_mtim of the file (after following a link if asked) */
    long mtime_nsec;
    uint64_t dev, ino;     /* identity of the file, to compare with an fstat after open */
    /* 0 for a good entry; else a negative S3X_E* code, message says why
     * (static or owned by the walker, same lifetime as rel) and sys_errno
     * is the errno behind it (0 when there was none, e.g. a symlink). */
    int err;
    int sys_errno;
    const char *message;
} s3x_walk_entry;

/* Starts a walk of the directory root (a symlink given as the root itself is
 * followed: the caller named it). flags: S3X_WALK_* or 0. On success *out is
 * a walker to free with s3x_walk_close. Errors: S3X_EINVAL (NULL arguments,
 * unknown flags, root is not a directory), S3X_EIO (root cannot be opened or
 * read), S3X_ENOMEM; each with s3x_seterr. */
int s3x_walk_open(s3x_walk **out, const char *root, int flags);

/* The next entry in order: returns 1 with *e filled, 0 at the end (and after
 * it), or a negative S3X_E* code (S3X_ENOMEM; with s3x_seterr) after which
 * the walk is over. Per-entry problems are not errors of the walk: they come
 * as entries with e->err set. */
int s3x_walk_next(s3x_walk *w, s3x_walk_entry *e);

/* Closes every descriptor and frees the walker. NULL is accepted. */
void s3x_walk_close(s3x_walk *w);

#endif
