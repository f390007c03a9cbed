/* From S3 keys to local files, safely (private, libc/Linux only): which
 * local path a key may become, creating its directories beneath a root
 * without following links, setting a file's mtime, and reading S3's
 * LastModified time.
 *
 * The rule for a directory download: a key can never write outside the
 * destination directory. s3x_key_to_relpath refuses every key whose relative
 * path could climb out or is ambiguous, and s3x_beneath_prepare opens the
 * parent directory one component at a time relative to the root's
 * descriptor, refusing symbolic links and non-directories, so neither a
 * hostile key nor a symlink planted in the destination can redirect a write. */
#ifndef S3X_LOCALPATH_H
#define S3X_LOCALPATH_H

#include <stddef.h>
#include <stdint.h>

/* s3x_key_to_relpath's result for a key ending in '/' (an S3 "directory
 * marker"): out is the directory to create (without the trailing '/', ""
 * for the prefix itself), not a file. */
#define S3X_RELPATH_DIR 1

/* The local path, relative to the destination directory, for key listed
 * under prefix.
 *
 * Prefix: as `aws s3 cp --recursive s3://b/photos dir` does, a non-empty
 * prefix that does not end in '/' is taken as prefix + '/' (the listing is
 * of the "directory" photos/, and photos/a.jpg becomes a.jpg; a key such as
 * "photos2/x" is not under it and is refused). So list with the prefix
 * "photos/" too, not "photos", or keys of the sibling "photos2/" come back
 * and are refused one by one. NULL or "" means the whole bucket.
 *
 * Returns 0 with out holding the relative path (NUL-terminated) of a file;
 * S3X_RELPATH_DIR for a directory marker (see above); or S3X_EINVAL with
 * *reason (if reason is not NULL) set to a static sentence and s3x_seterr
 * naming the key, when the key is refused:
 *   - it is not under the prefix;
 *   - it starts with '/' (after the prefix), or is empty after the prefix;
 *   - it has an empty segment ("a//b"), a "." or a ".." segment;
 *   - a segment is longer than NAME_MAX (255) bytes, or the whole relative
 *     path is 4096 (PATH_MAX) bytes or more, or it does not fit in cap.
 * Allowed on purpose (Linux can hold them in a name): control characters
 * other than NUL (a key cannot hold NUL here: it is a C string), '\\'
 * (an ordinary character on Linux, not a separator), bytes that are not
 * valid UTF-8, and names starting with '.' or '-' (".hidden", "..x").
 * key and out may not overlap. */
int s3x_key_to_relpath(const char *key, const char *prefix, char *out, size_t cap, const char **reason);

/* Opens the parent directory of rel beneath the directory open as rootfd,
 * creating missing directories (mode 0777 less the umask) one component at
 * a time, and never following a symbolic link in any component.
 *
 * rel is a relative path as s3x_key_to_relpath gives (it is checked again:
 * no leading '/', no empty, "." or ".." segment). On success *dirfd_out is a
 * new descriptor of the parent directory (the caller closes it) and
 * *leaf_out points into rel at the last component (the file name to create
 * with openat(*dirfd_out, leaf, ...), e.g. a temp file then renameat).
 *
 * leaf may be up to NAME_MAX bytes: a temp file made next to it must have a
 * name of its own of bounded length (not leaf + a suffix).
 *
 * Uses openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) for the common case of
 * an existing parent when the kernel has it, else (and to create what is
 * missing) mkdirat + openat(O_DIRECTORY | O_NOFOLLOW) per component.
 *
 * Errors (s3x_seterr says which component): S3X_EINVAL for a malformed rel;
 * S3X_EIO when a component is a file ("a is a file, so a/b cannot be created
 * under it": the key "a" and the key "a/b" cannot both be files), a symbolic
 * link (not followed), when the leaf itself is an existing directory ("a/b
 * is a directory (other keys are beneath it), so it cannot be written as a
 * file"), or when mkdirat/openat fail (permission denied, ...). */
int s3x_beneath_prepare(int rootfd, const char *rel, int *dirfd_out, const char **leaf_out);

/* Creates every directory of rel (a directory marker's path; "" does
 * nothing) beneath rootfd, with the same rules and errors as
 * s3x_beneath_prepare. An existing directory is fine. */
int s3x_beneath_mkdirs(int rootfd, const char *rel);

/* Sets the access and modification times of leaf in the directory dirfd
 * (AT_FDCWD for a path relative to the working directory, or an absolute
 * path) to sec + nsec, without following a symbolic link: what aws s3 cp
 * does with an object's LastModified after a download. nsec in
 * [0, 999999999]. Errors: S3X_EINVAL (bad nsec, NULL leaf), S3X_EIO. */
int s3x_set_mtime(int dirfd, const char *leaf, int64_t sec, long nsec);

/* Parses S3's LastModified, an ISO 8601 UTC time as ListObjectsV2 gives it:
 * "2026-12-03T09:59:54.780Z" (fraction optional, 1 to 9 digits; a lower-case
 * 't'/'z' and "+00:00" instead of 'Z' are accepted too), into seconds since
 * the epoch and nanoseconds. Fields are range-checked (month 1-12, day
 * within the month, leap years, hour < 24, minute < 60, second <= 60 with
 * 60 read as the next second). Errors: S3X_EINVAL (with s3x_seterr). */
int s3x_parse_s3_time(const char *s, int64_t *sec, long *nsec);

#endif
