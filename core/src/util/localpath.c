/* Keys to local paths, directories beneath a root, mtimes (see localpath.h). */
#include "localpath.h"
#include "error.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__has_include)
#if __has_include(<linux/openat2.h>) && __has_include(<sys/syscall.h>)
#include <linux/openat2.h>
#include <sys/syscall.h>
#endif
#endif

#ifndef NAME_MAX
#define NAME_MAX 255
#endif
#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

/* Checks a '/'-separated relative path: not empty (unless empty_ok), no
 * leading '/', no empty, "." or ".." segment, segments within NAME_MAX and
 * the whole below PATH_MAX. Returns NULL or a static reason. */
static const char *rel_problem(const char *rel, size_t n, int empty_ok) {
    if (n == 0) return empty_ok ? NULL : "the path is empty";
    if (rel[0] == '/') return "it starts with '/' (an absolute path)";
    if (n >= PATH_MAX) return "it is longer than PATH_MAX (4096 bytes)";
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && rel[i] != '/') continue;
        size_t len = i - start;
        if (len == 0) return "it has an empty segment ('//')";
        if (len == 1 && rel[start] == '.') return "it has a '.' segment";
        if (len == 2 && rel[start] == '.' && rel[start + 1] == '.') return "it has a '..' segment";
        if (len > NAME_MAX) return "a segment is longer than NAME_MAX (255 bytes)";
        start = i + 1;
    }
    return NULL;
}

int s3x_key_to_relpath(const char *key, const char *prefix, char *out, size_t cap, const char **reason) {
    const char *why = NULL;
    if (reason) *reason = NULL;
    if (!key || !out || cap == 0) {
        if (reason) *reason = "NULL argument or no room";
        return s3x_seterr(S3X_EINVAL, "s3x_key_to_relpath: NULL argument or no room");
    }
    out[0] = '\0';
    size_t pn = prefix ? strlen(prefix) : 0;
    const char *rest = key;
    if (pn) {
        /* "photos" lists as "photos/": compare the prefix, then its '/'. */
        if (strncmp(key, prefix, pn) != 0) {
            why = "it is not under the prefix";
            goto refuse;
        }
        rest = key + pn;
        if (prefix[pn - 1] != '/') {
            if (*rest == '\0') {
                /* The key is the prefix itself, without '/': an object named
                 * like the directory being copied; there is no file name
                 * left for it beneath the destination. */
                why = "it is the prefix itself (no name is left beneath it)";
                goto refuse;
            }
            if (*rest != '/') {
                why = "it is not under the prefix (the prefix is a directory: a '/' must follow it)";
                goto refuse;
            }
            rest++;
        }
    }
    size_t n = strlen(rest);
    int dir = 0;
    if (n == 0) {
        if (pn) return S3X_RELPATH_DIR; /* the marker of the prefix itself */
        why = "the key is empty";
        goto refuse;
    }
    if (rest[n - 1] == '/') {
        dir = 1;
        n--;
        if (n == 0) {
            why = "it starts with '/' (an absolute path)";
            goto refuse;
        }
    }
    why = rel_problem(rest, n, 0);
    if (why) goto refuse;
    if (n + 1 > cap) {
        why = "the path does not fit in the caller's buffer";
        goto refuse;
    }
    memcpy(out, rest, n);
    out[n] = '\0';
    return dir ? S3X_RELPATH_DIR : 0;
refuse:
    if (reason) *reason = why;
    return s3x_seterr(S3X_EINVAL, "key '%.300s%s' refused: %s", key, strlen(key) > 300 ? "..." : "", why);
}

static int dup_cloexec(int fd) { return fcntl(fd, F_DUPFD_CLOEXEC, 0); }

/* Opens (creating it if asked and missing) the directory name in cur,
 * without following a link. rel/upto name the component for messages. */
static int open_component(int cur, const char *name, int create, const char *rel, size_t upto) {
    int fd = openat(cur, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && create) {
        if (mkdirat(cur, name, 0777) != 0 && errno != EEXIST) {
            int er = errno;
            return s3x_seterr_errno(S3X_EIO, er, "cannot create directory '%.*s'", (int)upto, rel);
        }
        fd = openat(cur, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd >= 0) return fd;
    int er = errno;
    struct stat st;
    if (fstatat(cur, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISLNK(st.st_mode))
            return s3x_seterr_sys(S3X_EIO, ELOOP,
                                  "'%.*s' is a symbolic link, which is not followed beneath the destination, "
                                  "so '%s' cannot be created under it", (int)upto, rel, rel);
        if (!S_ISDIR(st.st_mode))
            return s3x_seterr_sys(S3X_EIO, ENOTDIR, "'%.*s' is a file, so '%s' cannot be created under it", (int)upto,
                                  rel, rel);
    }
    return s3x_seterr_errno(S3X_EIO, er, "cannot open directory '%.*s'", (int)upto, rel);
}

/* Opens the directory made of the first upto bytes of rel beneath rootfd,
 * one component at a time. Returns a new descriptor or an S3X_E* code. */
static int walk_components(int rootfd, const char *rel, size_t upto) {
    int cur = dup_cloexec(rootfd);
    if (cur < 0) {
        int er = errno;
        return s3x_seterr_errno(S3X_EIO, er, "cannot duplicate the destination's descriptor");
    }
    size_t start = 0;
    char name[NAME_MAX + 1];
    while (start < upto) {
        const char *slash = memchr(rel + start, '/', upto - start);
        size_t end = slash ? (size_t)(slash - rel) : upto;
        memcpy(name, rel + start, end - start);
        name[end - start] = '\0';
        int fd = open_component(cur, name, 1, rel, end);
        close(cur);
        if (fd < 0) return fd;
        cur = fd;
        start = end + 1;
    }
    return cur;
}

#if defined(SYS_openat2) && defined(RESOLVE_BENEATH) && defined(RESOLVE_NO_SYMLINKS)
/* 1 until the kernel says it has no openat2. */
static atomic_int g_have_openat2 = 1;

/* The existing directory dir beneath rootfd, or -1 (any failure: the
 * component walk then creates what is missing or says what is wrong). */
static int try_openat2(int rootfd, const char *dir) {
    if (!atomic_load_explicit(&g_have_openat2, memory_order_relaxed)) return -1;
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS;
    long fd = syscall(SYS_openat2, rootfd, dir, &how, sizeof how);
    if (fd < 0 && errno == ENOSYS) atomic_store_explicit(&g_have_openat2, 0, memory_order_relaxed);
    return fd < 0 ? -1 : (int)fd;
}
#else
static int try_openat2(int rootfd, const char *dir) {
    (void)rootfd;
    (void)dir;
    return -1;
}
#endif

static int open_parent(int rootfd, const char *rel, size_t upto) {
    if (upto == 0) {
        int fd = dup_cloexec(rootfd);
        if (fd < 0) {
            int er = errno;
            return s3x_seterr_errno(S3X_EIO, er, "cannot duplicate the destination's descriptor");
        }
        return fd;
    }
    char dir[PATH_MAX];
    if (upto < sizeof dir) {
        memcpy(dir, rel, upto);
        dir[upto] = '\0';
        int fd = try_openat2(rootfd, dir);
        if (fd >= 0) return fd;
    }
    return walk_components(rootfd, rel, upto);
}

int s3x_beneath_prepare(int rootfd, const char *rel, int *dirfd_out, const char **leaf_out) {
    if (dirfd_out) *dirfd_out = -1;
    if (leaf_out) *leaf_out = NULL;
    if (!rel || !dirfd_out || !leaf_out || rootfd < 0)
        return s3x_seterr(S3X_EINVAL, "s3x_beneath_prepare: bad argument");
    size_t n = strlen(rel);
    const char *why = rel_problem(rel, n, 0);
    if (why) return s3x_seterr(S3X_EINVAL, "path '%.300s' refused: %s", rel, why);
    const char *slash = strrchr(rel, '/');
    size_t upto = slash ? (size_t)(slash - rel) : 0;
    const char *leaf = slash ? slash + 1 : rel;
    int fd = open_parent(rootfd, rel, upto);
    if (fd < 0) return fd;
    struct stat st;
    if (fstatat(fd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
        close(fd);
        return s3x_seterr_sys(S3X_EIO, EISDIR,
                              "'%s' is a directory (other keys are beneath it), so it cannot be written as a file", rel);
    }
    *dirfd_out = fd;
    *leaf_out = leaf;
    return 0;
}

int s3x_beneath_mkdirs(int rootfd, const char *rel) {
    if (!rel || rootfd < 0) return s3x_seterr(S3X_EINVAL, "s3x_beneath_mkdirs: bad argument");
    size_t n = strlen(rel);
    if (n && rel[n - 1] == '/') n--;
    const char *why = rel_problem(rel, n, 1);
    if (why) return s3x_seterr(S3X_EINVAL, "path '%.300s' refused: %s", rel, why);
    if (n == 0) return 0;
    int fd = walk_components(rootfd, rel, n);
    if (fd < 0) return fd;
    close(fd);
    return 0;
}

int s3x_set_mtime(int dirfd, const char *leaf, int64_t sec, long nsec) {
    if (!leaf) return s3x_seterr(S3X_EINVAL, "s3x_set_mtime: leaf is NULL");
    if (nsec < 0 || nsec > 999999999L)
        return s3x_seterr(S3X_EINVAL, "s3x_set_mtime: nanoseconds %ld out of range [0, 999999999]", nsec);
    struct timespec ts[2];
    ts[0].tv_sec = (time_t)sec;
    ts[0].tv_nsec = nsec;
    ts[1] = ts[0];
    if (utimensat(dirfd, leaf, ts, AT_SYMLINK_NOFOLLOW) != 0) {
        int er = errno;
        return s3x_seterr_errno(S3X_EIO, er, "cannot set the modification time of '%s'", leaf);
    }
    return 0;
}

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar (the
 * civil-from-days inverse, by eras of 400 years). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? (unsigned)-3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static int digits(const char **p, int n, int *out) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        char c = (*p)[i];
        if (c < '0' || c > '9') return -1;
        v = v * 10 + (c - '0');
    }
    *p += n;
    *out = v;
    return 0;
}

int s3x_parse_s3_time(const char *s, int64_t *sec, long *nsec) {
    if (!s || !sec || !nsec) return s3x_seterr(S3X_EINVAL, "s3x_parse_s3_time: NULL argument");
    const char *p = s;
    int y, mo, d, h, mi, se;
    long ns = 0;
    if (digits(&p, 4, &y) || *p++ != '-' || digits(&p, 2, &mo) || *p++ != '-' || digits(&p, 2, &d) ||
        (*p != 'T' && *p != 't'))
        goto bad;
    p++;
    if (digits(&p, 2, &h) || *p++ != ':' || digits(&p, 2, &mi) || *p++ != ':' || digits(&p, 2, &se)) goto bad;
    if (*p == '.') {
        p++;
        int nd = 0;
        long scale = 100000000L;
        while (*p >= '0' && *p <= '9') {
            if (++nd > 9) goto bad;
            ns += (*p - '0') * scale;
            scale /= 10;
            p++;
        }
        if (nd == 0) goto bad;
    }
    if (*p == 'Z' || *p == 'z') p++;
    else if (strncmp(p, "+00:00", 6) == 0) p += 6;
    else goto bad;
    if (*p != '\0') goto bad;
    static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || se > 60) goto bad;
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (d > mdays[mo - 1] + (mo == 2 && leap)) goto bad;
    *sec = days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 + mi * 60 + se;
    *nsec = ns;
    return 0;
bad:
    return s3x_seterr(S3X_EINVAL, "'%.64s' is not an S3 LastModified time (like 2026-12-03T09:59:54.780Z)", s);
}
