/* Include/exclude filters with the AWS CLI's semantics (private, libc only).
 *
 * A filter list is an ordered list of (include | exclude, pattern). Every
 * path starts included; each filter that matches, in order, sets the state,
 * so the last matching filter wins:
 *   --exclude "*" --include "*.txt"   only .txt files (at any depth)
 *   --include "*.txt" --exclude "*"   nothing
 *   --exclude "logs*"                 everything but what is under logs/ (and
 *                                     logs2.txt: '*' crosses '/')
 *
 * Patterns are matched against the whole path relative to the source root
 * (for a local source: the walk's rel; for S3: the key with the listing
 * prefix removed), as the AWS CLI does by joining the pattern to the root and
 * calling Python's fnmatch on the full path:
 *   '*'      any run of characters, '/' included ("*.txt" matches "a/b/c.txt";
 *            "a*" matches "a/b")
 *   '?'      exactly one character, '/' included (a character is one UTF-8
 *            sequence, as Python matches str; a byte that is not valid UTF-8
 *            counts as one character)
 *   [...]    one character from the set: ranges "a-z", "[!...]" negates, a
 *            ']' first in the set is literal, a range whose ends are reversed
 *            matches nothing, a '[' without a closing ']' is a literal '['
 *   else     the character itself; there is no escape character ('\\' is a
 *            literal backslash, as in Python's fnmatch), matching is
 *            case-sensitive
 * The match is anchored at both ends: "b.txt" does not match "a/b.txt". */
#ifndef S3X_FILTER_H
#define S3X_FILTER_H

#include <stddef.h>

typedef struct s3x_filter s3x_filter;

enum { S3X_FILTER_EXCLUDE = 0, S3X_FILTER_INCLUDE = 1 };

/* A new, empty filter list (which includes everything). Free with
 * s3x_filter_free. Errors: S3X_EINVAL (out NULL), S3X_ENOMEM. */
int s3x_filter_new(s3x_filter **out);

/* Appends a filter: kind S3X_FILTER_INCLUDE or S3X_FILTER_EXCLUDE, pattern
 * copied (any byte string; NUL-terminated). Errors: S3X_EINVAL (NULL
 * argument, unknown kind), S3X_ENOMEM; the list is unchanged on error. */
int s3x_filter_add(s3x_filter *f, int kind, const char *pattern);

/* 1 when rel is included by the list, 0 when excluded. f NULL includes
 * everything. Never fails; thread-safe on a list no one is adding to. */
int s3x_filter_match(const s3x_filter *f, const char *rel);

/* The number of filters in the list. */
size_t s3x_filter_count(const s3x_filter *f);

void s3x_filter_free(s3x_filter *f); /* NULL is accepted */

/* 1 when the whole of s matches the glob pattern (the rules above), else 0.
 * For one-off matches; a filter list compiles its patterns once. */
int s3x_glob_match(const char *pattern, const char *s);

#endif
