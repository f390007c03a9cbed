/* Keys to local paths (core/src/util/localpath.c): hostile keys are refused
 * with a reason, prefixes are stripped as `aws s3 cp --recursive` does,
 * directory markers are told apart; parent directories are created beneath
 * a root without following links and a file/directory conflict is reported,
 * never clobbered; mtimes are set; S3's LastModified is parsed. */
#include "localpath.h"
#include "s3xfer/s3xfer.h"
#include "tap.h"
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char g_tmp[256];

typedef struct kcase {
    const char *key, *prefix;
    int rc;            /* 0, S3X_RELPATH_DIR or S3X_EINVAL */
    const char *out;   /* when accepted */
    const char *why;   /* a word of the reason when refused */
} kcase;

static void test_key_table(void) {
    static const kcase cases[] = {
        {"a", NULL, 0, "a", NULL},
        {"a/b/c.txt", "", 0, "a/b/c.txt", NULL},
        {"caf\xc3\xa9/\xe2\x82\xac.txt", NULL, 0, "caf\xc3\xa9/\xe2\x82\xac.txt", NULL},
        {".hidden", NULL, 0, ".hidden", NULL},
        {"..x", NULL, 0, "..x", NULL},
        {"x..", NULL, 0, "x..", NULL},
        {"...", NULL, 0, "...", NULL},
        {"-rf", NULL, 0, "-rf", NULL},
        {"a\\b", NULL, 0, "a\\b", NULL},         /* backslash: an ordinary byte on Linux */
        {"..\\x", NULL, 0, "..\\x", NULL},       /* not a '..' segment on Linux */
        {"tab\there\x01", NULL, 0, "tab\there\x01", NULL}, /* control bytes: allowed */
        {"a b/ c ", NULL, 0, "a b/ c ", NULL},
        {"\xff\xfe", NULL, 0, "\xff\xfe", NULL}, /* not UTF-8: Linux holds it */
        /* hostile */
        {"../x", NULL, S3X_EINVAL, NULL, "'..'"},
        {"..", NULL, S3X_EINVAL, NULL, "'..'"},
        {".", NULL, S3X_EINVAL, NULL, "'.'"},
        {"a/../../b", NULL, S3X_EINVAL, NULL, "'..'"},
        {"a/..", NULL, S3X_EINVAL, NULL, "'..'"},
        {"a/./b", NULL, S3X_EINVAL, NULL, "'.'"},
        {"./a", NULL, S3X_EINVAL, NULL, "'.'"},
        {"/abs", NULL, S3X_EINVAL, NULL, "absolute"},
        {"/", NULL, S3X_EINVAL, NULL, "absolute"},
        {"//x", NULL, S3X_EINVAL, NULL, "absolute"},
        {"a//b", NULL, S3X_EINVAL, NULL, "empty segment"},
        {"a//", NULL, S3X_EINVAL, NULL, "empty segment"},
        {"", NULL, S3X_EINVAL, NULL, "empty"},
        {"../", NULL, S3X_EINVAL, NULL, "'..'"},
        /* directory markers */
        {"a/", NULL, S3X_RELPATH_DIR, "a", NULL},
        {"a/b/", NULL, S3X_RELPATH_DIR, "a/b", NULL},
        /* prefixes */
        {"photos/a.jpg", "photos/", 0, "a.jpg", NULL},
        {"photos/a.jpg", "photos", 0, "a.jpg", NULL},   /* taken as photos/ */
        {"photos/sub/", "photos", S3X_RELPATH_DIR, "sub", NULL},
        {"photos/", "photos/", S3X_RELPATH_DIR, "", NULL},
        {"photos/", "photos", S3X_RELPATH_DIR, "", NULL},
        {"photos2/x", "photos", S3X_EINVAL, NULL, "not under the prefix"},
        {"photosx", "photos", S3X_EINVAL, NULL, "not under the prefix"},
        {"photos", "photos", S3X_EINVAL, NULL, "prefix itself"},
        {"other/x", "photos/", S3X_EINVAL, NULL, "not under the prefix"},
        {"photos//x", "photos/", S3X_EINVAL, NULL, "absolute"},
        {"photos//x", "photos", S3X_EINVAL, NULL, "absolute"},
        {"photos/../x", "photos/", S3X_EINVAL, NULL, "'..'"},
        {"pho/tos/x", "pho/tos", 0, "x", NULL},
        {"ab/c", "a", S3X_EINVAL, NULL, "not under the prefix"},
        {"a/b/c", "a/b", 0, "c", NULL},
    };
    char out[4096];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const kcase *c = &cases[i];
        const char *why = "unset";
        strcpy(out, "garbage");
        int rc = s3x_key_to_relpath(c->key, c->prefix, out, sizeof out, &why);
        if (!CHECK(rc == c->rc, "key '%s' prefix '%s': rc %d, expected %d (%s)", c->key, c->prefix ? c->prefix : "(null)",
                   rc, c->rc, why ? why : "no reason"))
            continue;
        if (rc >= 0) {
            CHECK_STREQ(out, c->out, c->key);
            CHECK(why == NULL, "no reason for an accepted key '%s'", c->key);
        } else {
            CHECK(why && strstr(why, c->why), "key '%s': reason '%s' says '%s'", c->key, why ? why : "(null)", c->why);
            CHECK(strstr(s3x_error_last()->message, why) != NULL, "error message carries the reason: %s",
                  s3x_error_last()->message);
            CHECK_STREQ(out, "", "out is empty on refusal");
        }
    }
}

static void test_key_limits(void) {
    char key[10000], out[8192];
    const char *why;
    /* A 255-byte segment is fine, 256 is not (NAME_MAX). */
    memset(key, 'n', 255);
    strcpy(key + 255, "/x");
    CHECK_INTEQ(s3x_key_to_relpath(key, NULL, out, sizeof out, &why), 0, "255-byte segment");
    memset(key, 'n', 300);
    strcpy(key + 300, "/x");
    int rc = s3x_key_to_relpath(key, NULL, out, sizeof out, &why);
    CHECK(rc == S3X_EINVAL && why && strstr(why, "NAME_MAX"), "300-byte segment refused: %s", why ? why : "");
    CHECK(strlen(s3x_error_last()->message) < 1000, "the message does not repeat a huge key");
    /* The whole path: 4095 bytes fit, 4096 do not (PATH_MAX). */
    size_t n = 0;
    for (; n < 4095; n++) key[n] = (n % 100 == 99) ? '/' : 'p';
    key[n] = '\0';
    if (key[n - 1] == '/') key[n - 1] = 'p';
    rc = s3x_key_to_relpath(key, NULL, out, sizeof out, &why);
    CHECK_INTEQ(rc, 0, "4095-byte path");
    key[n++] = 'q';
    key[n] = '\0';
    rc = s3x_key_to_relpath(key, NULL, out, sizeof out, &why);
    CHECK(rc == S3X_EINVAL && why && strstr(why, "PATH_MAX"), "4096-byte path refused: %s", why ? why : "");
    /* Very long keys (S3 allows 1024 bytes; a server may send more). */
    memset(key, 'k', 9999);
    key[9999] = '\0';
    CHECK_INTEQ(s3x_key_to_relpath(key, NULL, out, sizeof out, &why), S3X_EINVAL, "10 kB key");
    /* The caller's buffer. */
    char small[4];
    rc = s3x_key_to_relpath("abcd", NULL, small, sizeof small, &why);
    CHECK(rc == S3X_EINVAL && why && strstr(why, "buffer"), "too small a buffer is refused");
    CHECK_INTEQ(s3x_key_to_relpath("abc", NULL, small, sizeof small, NULL), 0, "just fits, NULL reason");
    CHECK_STREQ(small, "abc", "fits");
    CHECK_INTEQ(s3x_key_to_relpath(NULL, NULL, out, sizeof out, &why), S3X_EINVAL, "NULL key");
    CHECK_INTEQ(s3x_key_to_relpath("a", NULL, NULL, 0, &why), S3X_EINVAL, "NULL out");
}

static int open_root(const char *name) {
    char p[400];
    snprintf(p, sizeof p, "%s/%s", g_tmp, name);
    mkdir(p, 0755);
    return open(p, O_RDONLY | O_DIRECTORY);
}

static int write_at(int dirfd, const char *leaf, const char *text) {
    int fd = openat(dirfd, leaf, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0644);
    if (fd < 0) return -1;
    ssize_t w = write(fd, text, strlen(text));
    close(fd);
    return w == (ssize_t)strlen(text) ? 0 : -1;
}

static int exists(const char *rel) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s", g_tmp, rel);
    struct stat st;
    return lstat(p, &st) == 0;
}

static void test_beneath(void) {
    int root = open_root("dst");
    CHECK(root >= 0, "root open");
    int dfd = -1;
    const char *leaf = NULL;
    int rc = s3x_beneath_prepare(root, "a/b/c/file.txt", &dfd, &leaf);
    CHECK_INTEQ(rc, 0, "prepare creates parents");
    CHECK(leaf && !strcmp(leaf, "file.txt"), "leaf");
    CHECK(dfd >= 0 && write_at(dfd, leaf, "hello") == 0, "write beneath");
    if (dfd >= 0) close(dfd);
    CHECK(exists("dst/a/b/c/file.txt"), "file where expected");
    char p[600];
    snprintf(p, sizeof p, "%s/dst/a/b", g_tmp);
    struct stat st;
    mode_t um = umask(0);
    umask(um);
    CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == (0777 & ~um), "directories get 0777 less the umask (%o)",
          (unsigned)(st.st_mode & 0777));

    /* Existing parents (the openat2 path when the kernel has it). */
    rc = s3x_beneath_prepare(root, "a/b/c/second", &dfd, &leaf);
    CHECK(rc == 0 && dfd >= 0 && !strcmp(leaf, "second"), "existing parents");
    if (dfd >= 0) close(dfd);
    /* No parent at all: a duplicate of the root. */
    rc = s3x_beneath_prepare(root, "top", &dfd, &leaf);
    CHECK(rc == 0 && dfd >= 0 && dfd != root && !strcmp(leaf, "top"), "a top-level file");
    if (dfd >= 0) close(dfd);

    /* "a/b/c/file.txt" is a file: "a/b/c/file.txt/x" cannot be created. */
    rc = s3x_beneath_prepare(root, "a/b/c/file.txt/x", &dfd, &leaf);
    CHECK_INTEQ(rc, S3X_EIO, "file as a parent");
    CHECK(dfd == -1 && leaf == NULL, "outputs cleared on error");
    CHECK(strstr(s3x_error_last()->message, "'a/b/c/file.txt' is a file, so 'a/b/c/file.txt/x' cannot be created") !=
              NULL,
          "clear conflict message: %s", s3x_error_last()->message);
    CHECK_INTEQ(s3x_error_last()->sys_errno, ENOTDIR, "file as a parent: sys_errno");
    CHECK(exists("dst/a/b/c/file.txt") , "the file was not clobbered");
    /* "a/b" is a directory: the key "a/b" cannot be written as a file. */
    rc = s3x_beneath_prepare(root, "a/b", &dfd, &leaf);
    CHECK_INTEQ(rc, S3X_EIO, "directory as the leaf");
    CHECK_INTEQ(s3x_error_last()->sys_errno, EISDIR, "directory as the leaf: sys_errno");
    CHECK(strstr(s3x_error_last()->message, "'a/b' is a directory") != NULL, "message: %s",
          s3x_error_last()->message);

    /* A symlink planted in the destination is never followed, whether it
     * points outside the root or inside it. */
    char outside[400];
    snprintf(outside, sizeof outside, "%s/outside", g_tmp);
    mkdir(outside, 0755);
    snprintf(p, sizeof p, "%s/dst/evil", g_tmp);
    CHECK(symlink(outside, p) == 0, "plant a link out of the root");
    rc = s3x_beneath_prepare(root, "evil/x", &dfd, &leaf);
    CHECK_INTEQ(rc, S3X_EIO, "a link component is refused");
    CHECK_INTEQ(s3x_error_last()->sys_errno, ELOOP, "a link component: sys_errno");
    CHECK(strstr(s3x_error_last()->message, "'evil' is a symbolic link") != NULL, "message: %s",
          s3x_error_last()->message);
    rc = s3x_beneath_prepare(root, "evil/deeper/x", &dfd, &leaf);
    CHECK_INTEQ(rc, S3X_EIO, "a link component is refused, with more below");
    CHECK(!exists("outside/deeper"), "nothing created outside the root");
    snprintf(p, sizeof p, "%s/dst/a/inner", g_tmp);
    CHECK(symlink("b", p) == 0, "plant a link inside the root");
    rc = s3x_beneath_prepare(root, "a/inner/c/y", &dfd, &leaf);
    CHECK_INTEQ(rc, S3X_EIO, "an inner link is refused too");
    CHECK_INTEQ(s3x_beneath_mkdirs(root, "evil/m"), S3X_EIO, "mkdirs refuses the link too");
    CHECK(!exists("outside/m"), "nothing created outside the root by mkdirs");

    /* Malformed paths are refused again here. */
    const char *bad[] = {"../x", "/abs", "a//b", "a/./b", "a/..", "", "x/"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rc = s3x_beneath_prepare(root, bad[i], &dfd, &leaf);
        CHECK_INTEQ(rc, S3X_EINVAL, bad[i]);
    }
    CHECK(!exists("x"), "nothing escaped");
    CHECK_INTEQ(s3x_beneath_prepare(-1, "a", &dfd, &leaf), S3X_EINVAL, "bad root descriptor");

    /* mkdirs: directory markers. */
    CHECK_INTEQ(s3x_beneath_mkdirs(root, "m/n/o"), 0, "mkdirs");
    CHECK(exists("dst/m/n/o"), "made");
    CHECK_INTEQ(s3x_beneath_mkdirs(root, "m/n/o/"), 0, "again, with a trailing '/': fine");
    CHECK_INTEQ(s3x_beneath_mkdirs(root, ""), 0, "empty: nothing to do");
    CHECK_INTEQ(s3x_beneath_mkdirs(root, "a/b/c/file.txt"), S3X_EIO, "a file is in the way");
    CHECK_INTEQ(s3x_beneath_mkdirs(root, "m/../.."), S3X_EINVAL, "dot-dot refused");

    /* Permission denied is a clear error. Root ignores modes, so a child
     * process drops to nobody for this part. */
    CHECK_INTEQ(s3x_beneath_mkdirs(root, "ro"), 0, "mkdirs ro");
    snprintf(p, sizeof p, "%s/dst/ro", g_tmp);
    chmod(p, 0555);
    chmod(g_tmp, 0755);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(90);
        int r = s3x_beneath_prepare(root, "ro/x/y", &dfd, &leaf);
        const char *m = s3x_error_last()->message;
        int ok = r == S3X_EIO && strstr(m, "cannot create directory 'ro/x': Permission denied") != NULL &&
                 s3x_error_last()->sys_errno == EACCES;
        if (!ok) printf("#  child: rc %d, %s\n", r, m);
        fflush(stdout);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "permission denied is reported (status %d)", status);
    CHECK(!exists("dst/ro/x"), "nothing made");
    close(root);
}

static void test_mtime(void) {
    int root = open_root("mt");
    int dfd = -1;
    const char *leaf = NULL;
    CHECK_INTEQ(s3x_beneath_prepare(root, "d/f", &dfd, &leaf), 0, "prepare");
    CHECK(write_at(dfd, leaf, "x") == 0, "write");
    CHECK_INTEQ(s3x_set_mtime(dfd, leaf, 1796291994, 780000000), 0, "set mtime");
    struct stat st;
    CHECK(fstatat(dfd, leaf, &st, 0) == 0 && st.st_mtim.tv_sec == 1796291994 && st.st_mtim.tv_nsec == 780000000 &&
              st.st_atim.tv_sec == 1796291994,
          "mtime and atime set");
    CHECK_INTEQ(s3x_set_mtime(dfd, leaf, 0, 1000000000L), S3X_EINVAL, "nsec out of range");
    CHECK_INTEQ(s3x_set_mtime(dfd, leaf, 0, -1), S3X_EINVAL, "negative nsec");
    CHECK_INTEQ(s3x_set_mtime(dfd, "missing", 0, 0), S3X_EIO, "missing file");
    CHECK(strcmp(s3x_error_last()->message, "cannot set the modification time of 'missing': No such file or directory") ==
              0,
          "message names it and says why, once: %s", s3x_error_last()->message);
    CHECK_INTEQ(s3x_error_last()->sys_errno, ENOENT, "missing file: sys_errno");
    /* A link is not followed: its own times change, not its target's. */
    CHECK(symlinkat("f", dfd, "l") == 0, "link");
    CHECK_INTEQ(s3x_set_mtime(dfd, "l", 1000, 0), 0, "set the link's time");
    CHECK(fstatat(dfd, leaf, &st, 0) == 0 && st.st_mtim.tv_sec == 1796291994, "target untouched");
    char p[600];
    snprintf(p, sizeof p, "%s/mt/d/f", g_tmp);
    CHECK_INTEQ(s3x_set_mtime(AT_FDCWD, p, 5, 6), 0, "absolute path with AT_FDCWD");
    CHECK(stat(p, &st) == 0 && st.st_mtim.tv_sec == 5 && st.st_mtim.tv_nsec == 6, "set by path");
    close(dfd);
    close(root);
}

typedef struct tcase {
    const char *s;
    int ok;
    int64_t sec;
    long nsec;
} tcase;

static void test_time(void) {
    static const tcase cases[] = {
        {"1970-01-01T00:00:00.000Z", 1, 0, 0},
        {"1970-01-01T00:00:00Z", 1, 0, 0},
        {"2026-12-03T09:59:54.780Z", 1, 1796291994, 780000000},
        {"2026-12-03T09:59:54.78Z", 1, 1796291994, 780000000},
        {"2026-12-03T09:59:54.123456789Z", 1, 1796291994, 123456789},
        {"2026-12-03T09:59:54.000000001Z", 1, 1796291994, 1},
        {"2026-12-03t09:59:54z", 1, 1796291994, 0},
        {"2026-12-03T09:59:54+00:00", 1, 1796291994, 0},
        {"2000-02-29T12:00:00Z", 1, 951825600, 0},
        {"2024-02-29T00:00:00Z", 1, 1709164800, 0},
        {"1969-12-31T23:59:59Z", 1, -1, 0},
        {"9999-12-31T23:59:59Z", 1, 253402300799LL, 0},
        {"2016-12-31T23:59:60Z", 1, 1483228800, 0}, /* a leap second reads as the next second */
        {"2100-02-29T00:00:00Z", 0, 0, 0},         /* not a leap year */
        {"2023-02-29T00:00:00Z", 0, 0, 0},
        {"2026-04-31T00:00:00Z", 0, 0, 0},
        {"2026-13-01T00:00:00Z", 0, 0, 0},
        {"2026-00-01T00:00:00Z", 0, 0, 0},
        {"2026-01-00T00:00:00Z", 0, 0, 0},
        {"2026-01-01T24:00:00Z", 0, 0, 0},
        {"2026-01-01T00:60:00Z", 0, 0, 0},
        {"2026-01-01T00:00:61Z", 0, 0, 0},
        {"2026-01-01T00:00:00", 0, 0, 0},            /* no zone */
        {"2026-01-01T00:00:00+01:00", 0, 0, 0},      /* not UTC */
        {"2026-01-01T00:00:00.Z", 0, 0, 0},
        {"2026-01-01T00:00:00.1234567890Z", 0, 0, 0},
        {"2026-01-01T00:00:00ZZ", 0, 0, 0},
        {"2026-01-01 00:00:00Z", 0, 0, 0},
        {"26-01-01T00:00:00Z", 0, 0, 0},
        {"2026-1-01T00:00:00Z", 0, 0, 0},
        {"Thu, 03 Dec 2026 09:59:54 GMT", 0, 0, 0},
        {"", 0, 0, 0},
        {"2026-01-01T00:00:0", 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t sec = -7;
        long ns = -7;
        int rc = s3x_parse_s3_time(cases[i].s, &sec, &ns);
        if (cases[i].ok)
            CHECK(rc == 0 && sec == cases[i].sec && ns == cases[i].nsec, "'%s': rc %d, %lld.%09ld, expected %lld.%09ld",
                  cases[i].s, rc, (long long)sec, ns, (long long)cases[i].sec, cases[i].nsec);
        else
            CHECK(rc == S3X_EINVAL, "'%s' refused (rc %d)", cases[i].s, rc);
    }
    CHECK(strstr(s3x_error_last()->message, "LastModified") != NULL, "message: %s", s3x_error_last()->message);
    /* Against timegm over many random times, 1970 to 2400. */
    uint64_t x = 88172645463325252ull;
    int bad = 0;
    for (int i = 0; i < 20000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        time_t t = (time_t)(x % 13569465600ull);
        struct tm tm;
        gmtime_r(&t, &tm);
        char s[64];
        snprintf(s, sizeof s, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                 tm.tm_hour, tm.tm_min, tm.tm_sec, i % 1000);
        int64_t sec;
        long ns;
        if (s3x_parse_s3_time(s, &sec, &ns) != 0 || sec != (int64_t)t || ns != (long)(i % 1000) * 1000000L) {
            if (bad++ < 5) printf("# %s -> %lld, expected %lld\n", s, (long long)sec, (long long)t);
        }
    }
    CHECK_INTEQ(bad, 0, "random times agree with gmtime");
    int64_t sec;
    long ns;
    CHECK_INTEQ(s3x_parse_s3_time(NULL, &sec, &ns), S3X_EINVAL, "NULL");
}

int main(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/s3x_localpath_XXXXXX");
    if (!mkdtemp(g_tmp)) {
        perror("mkdtemp");
        return 1;
    }
    test_key_table();
    test_key_limits();
    test_beneath();
    test_mtime();
    test_time();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd) != 0) printf("# cleanup failed\n");
    return tap_summary("test_localpath");
}
