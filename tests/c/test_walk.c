/* The sorted directory walk (core/src/util/walk.c): its order is the order of
 * a full sort of all relative paths by their bytes (S3's listing order), on
 * random trees with names full of bytes around '/' (and, with
 * S3X_WALK_DIR_ORDER, the order of a component-by-component sort); per-entry problems
 * (symlinks, FIFOs, vanished files, unreadable directories, link loops) come
 * as entries with a reason and the walk goes on; no descriptor is leaked. */
#include "error.h"
#include "walk.h"
#include "s3xfer/s3xfer.h"
#include "tap.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_tmp[256];

static void run(const char *cmd) {
    if (system(cmd) != 0) printf("# command failed: %s\n", cmd);
}

static void rm_rf(const char *path) {
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "chmod -R u+rwx '%s' 2>/dev/null; rm -rf '%s'", path, path);
    run(cmd);
}

static void mkpath(const char *root, const char *rel, char *out, size_t cap) {
    snprintf(out, cap, "%s/%s", root, rel);
}

static void put_file(const char *root, const char *rel, size_t size) {
    char p[4200];
    mkpath(root, rel, p, sizeof p);
    FILE *f = fopen(p, "wb");
    if (!f) {
        printf("# cannot create %s: %s\n", p, strerror(errno));
        return;
    }
    for (size_t i = 0; i < size; i++) fputc('x', f);
    fclose(f);
}

static void put_dir(const char *root, const char *rel) {
    char p[4200];
    mkpath(root, rel, p, sizeof p);
    if (mkdir(p, 0755) != 0) printf("# cannot mkdir %s: %s\n", p, strerror(errno));
}

static int count_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int n = 0;
    while (readdir(d)) n++;
    closedir(d);
    return n;
}

/* All entries of a walk, as "rel" or "rel\tERR:message". */
typedef struct list {
    char **v;
    size_t n, cap;
} list;

static void list_add(list *l, const char *s) {
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
    }
    l->v[l->n++] = strdup(s);
}

static void list_free(list *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Directory order: '/' below every byte of a name, so a directory's entries
 * come at its name's place ("a/x" before "a-b"), component by component. */
static int cmp_dir_order(const void *pa, const void *pb) {
    const unsigned char *a = *(const unsigned char *const *)pa, *b = *(const unsigned char *const *)pb;
    for (;; a++, b++) {
        int ca = *a == '/' ? 0 : *a == 0 ? -1 : *a, cb = *b == '/' ? 0 : *b == 0 ? -1 : *b;
        if (ca != cb) return ca < cb ? -1 : 1;
        if (ca < 0) return 0;
    }
}

static int walk_all(const char *root, int flags, list *out) {
    s3x_walk *w = NULL;
    int rc = s3x_walk_open(&w, root, flags);
    if (rc != 0) return rc;
    s3x_walk_entry e;
    while ((rc = s3x_walk_next(w, &e)) == 1) {
        char buf[8192];
        if (e.is_symlink != (e.err && !strcmp(e.message, "symlink (not followed)")))
            CHECK(0, "is_symlink %d for %s", e.is_symlink, e.rel);
        if (e.err) snprintf(buf, sizeof buf, "%s\tERR:%s", e.rel, e.message);
        else snprintf(buf, sizeof buf, "%s", e.rel);
        list_add(out, buf);
    }
    s3x_walk_close(w);
    return rc;
}

static const char *find(const list *l, const char *prefix) {
    size_t n = strlen(prefix);
    for (size_t i = 0; i < l->n; i++)
        if (strncmp(l->v[i], prefix, n) == 0) return l->v[i];
    return NULL;
}

static void test_fixed_order(void) {
    int rc;
    char root[300];
    snprintf(root, sizeof root, "%s/fixed", g_tmp);
    mkdir(root, 0755);
    /* "a" is a directory: "a-b" and "a.b" (0x2d, 0x2e) sort before "a/x"
     * (0x2f), "a0" (0x30) after; sorting names per directory would put
     * "a" first. */
    put_dir(root, "a");
    put_file(root, "a/x", 1);
    put_file(root, "a/y z", 2);
    put_file(root, "a-b", 3);
    put_file(root, "a.b", 4);
    put_file(root, "a0", 5);
    put_file(root, "a b", 6);
    put_dir(root, "b");
    put_dir(root, "b/empty");
    put_file(root, "B", 7);
    put_file(root, "caf\xc3\xa9", 8);
    put_file(root, "cafe", 9);
    list got = {0};
    rc = walk_all(root, 0, &got);
    CHECK_INTEQ(rc, 0, "walk of a fixed tree");
    const char *want[] = {"B", "a b", "a-b", "a.b", "a/x", "a/y z", "a0", "cafe", "caf\xc3\xa9"};
    size_t nw = sizeof want / sizeof want[0];
    CHECK_INTEQ(got.n, nw, "entries of the fixed tree (no empty directories without the flag)");
    for (size_t i = 0; i < nw && i < got.n; i++) CHECK_STREQ(got.v[i], want[i], "fixed tree order");
    list_free(&got);

    rc = walk_all(root, S3X_WALK_EMPTY_DIRS, &got);
    CHECK_INTEQ(rc, 0, "walk with empty directories");
    const char *want2[] = {"B", "a b", "a-b", "a.b", "a/x", "a/y z", "a0", "b/empty/", "cafe", "caf\xc3\xa9"};
    nw = sizeof want2 / sizeof want2[0];
    CHECK_INTEQ(got.n, nw, "entries with the empty directory");
    for (size_t i = 0; i < nw && i < got.n; i++) CHECK_STREQ(got.v[i], want2[i], "fixed tree order, empty dirs");
    list_free(&got);

    /* Directory order (S3X_WALK_DIR_ORDER): names alone, so "a"'s files
     * come at "a"'s place, before "a b" and "a-b". */
    rc = walk_all(root, S3X_WALK_DIR_ORDER, &got);
    CHECK_INTEQ(rc, 0, "walk in directory order");
    const char *want3[] = {"B", "a/x", "a/y z", "a b", "a-b", "a.b", "a0", "cafe", "caf\xc3\xa9"};
    nw = sizeof want3 / sizeof want3[0];
    CHECK_INTEQ(got.n, nw, "entries in directory order");
    for (size_t i = 0; i < nw && i < got.n; i++) CHECK_STREQ(got.v[i], want3[i], "directory order");
    list_free(&got);

    /* The fields of one entry. */
    char p[600];
    mkpath(root, "a/y z", p, sizeof p);
    struct timespec ts[2] = {{1700000000, 123456789}, {1700000000, 123456789}};
    CHECK(utimensat(AT_FDCWD, p, ts, 0) == 0, "set an mtime");
    s3x_walk *w = NULL;
    char root_slash[320];
    snprintf(root_slash, sizeof root_slash, "%s/", root);
    rc = s3x_walk_open(&w, root_slash, 0);
    CHECK_INTEQ(rc, 0, "open with a trailing '/'");
    s3x_walk_entry e;
    int found = 0;
    while (w && s3x_walk_next(w, &e) == 1) {
        if (strcmp(e.rel, "a/y z") != 0) continue;
        found = 1;
        CHECK_STREQ(e.path, p, "full path (no doubled '/')");
        CHECK_INTEQ(e.rel_len, 5, "rel_len");
        CHECK_INTEQ(e.size, 2, "size");
        CHECK_INTEQ(e.mtime_sec, 1700000000, "mtime seconds");
        CHECK_INTEQ(e.mtime_nsec, 123456789, "mtime nanoseconds");
        CHECK_STREQ(e.name, "y z", "name in its directory");
        int fd = openat(e.dirfd, e.name, O_RDONLY | O_NOFOLLOW);
        struct stat st;
        CHECK(fd >= 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_ino == e.ino && (uint64_t)st.st_dev == e.dev,
              "dirfd + name open the entry, and dev/ino identify it");
        if (fd >= 0) close(fd);
        CHECK(e.err == 0 && e.message == NULL && !e.is_dir, "a good file entry");
    }
    CHECK(found, "the entry was walked");
    CHECK_INTEQ(s3x_walk_next(w, &e), 0, "0 again after the end");
    s3x_walk_close(w);
    rm_rf(root);
}

/* A small deterministic generator. */
static uint64_t g_rng;
static uint32_t rnd(uint32_t n) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng % n);
}

/* Name pieces: bytes below, at and above '/' in value, UTF-8, controls and
 * an invalid UTF-8 byte. */
static const char *g_pieces[] = {"-", ".", " ", "0", "a", "b", "A", "\xc3\xa9", "\xe2\x82\xac", "\x01", "\x1f", "~",
                                 "_", "+", "!", "#", "'", ",", "\xff", "z", "9", ":"};

static void gen(const char *root, const char *rel, int depth, list *files, list *empties, int *count) {
    int k = depth == 0 ? 10 + (int)rnd(10) : (int)rnd(7);
    int made = 0;
    for (int i = 0; i < k && *count < 400; i++) {
        char name[64] = "";
        int len = 1 + (int)rnd(3);
        for (int j = 0; j < len; j++) strcat(name, g_pieces[rnd(sizeof g_pieces / sizeof g_pieces[0])]);
        if (!strcmp(name, ".") || !strcmp(name, "..")) continue;
        char r[2048];
        snprintf(r, sizeof r, "%s%s%s", rel, *rel ? "/" : "", name);
        char p[4200];
        mkpath(root, r, p, sizeof p);
        struct stat st;
        if (lstat(p, &st) == 0) continue;
        (*count)++;
        made++;
        if (depth < 4 && rnd(10) < 5) {
            put_dir(root, r);
            gen(root, r, depth + 1, files, empties, count);
        } else {
            put_file(root, r, rnd(3));
            list_add(files, r);
        }
    }
    if (!made && *rel) {
        char r[2100];
        snprintf(r, sizeof r, "%s/", rel);
        list_add(empties, r);
    }
}

static void test_random_trees(void) {
    int fds0 = count_fds();
    int mismatches = 0, total = 0;
    for (int t = 0; t < 40; t++) {
        g_rng = 0x9E3779B97F4A7C15ull + (uint64_t)t * 7919;
        char root[300];
        snprintf(root, sizeof root, "%s/rand%d", g_tmp, t);
        mkdir(root, 0755);
        list files = {0}, empties = {0}, got = {0};
        int count = 0;
        gen(root, "", 0, &files, &empties, &count);
        for (int mode = 0; mode < 4; mode++) {
            int withdirs = mode & 1, dirorder = mode >> 1;
            list want = {0};
            for (size_t i = 0; i < files.n; i++) list_add(&want, files.v[i]);
            if (withdirs)
                for (size_t i = 0; i < empties.n; i++) list_add(&want, empties.v[i]);
            /* The reference: one sort of every relative path by its bytes
             * (strcmp compares as unsigned char, as S3 orders keys). */
            qsort(want.v, want.n, sizeof *want.v, dirorder ? cmp_dir_order : cmp_str);
            int rc = walk_all(root, (withdirs ? S3X_WALK_EMPTY_DIRS : 0) | (dirorder ? S3X_WALK_DIR_ORDER : 0), &got);
            CHECK_INTEQ(rc, 0, "walk of a random tree");
            int same = got.n == want.n;
            for (size_t i = 0; same && i < got.n; i++) same = strcmp(got.v[i], want.v[i]) == 0;
            if (!same) {
                mismatches++;
                CHECK(0, "tree %d (empty dirs %d, directory order %d): %zu entries walked, %zu expected, or a "
                      "different order", t, withdirs, dirorder, got.n, want.n);
                for (size_t i = 0; i < got.n && i < want.n; i++)
                    if (strcmp(got.v[i], want.v[i])) {
                        printf("#  first difference at %zu: got ", i);
                        tap_print_escaped(got.v[i], strlen(got.v[i]));
                        printf(" want ");
                        tap_print_escaped(want.v[i], strlen(want.v[i]));
                        printf("\n");
                        break;
                    }
            }
            total += (int)got.n;
            list_free(&want);
            list_free(&got);
        }
        list_free(&files);
        list_free(&empties);
        rm_rf(root);
    }
    CHECK_INTEQ(mismatches, 0, "random trees in full-sort order");
    CHECK(total > 8000, "the random trees had entries (%d)", total);
    CHECK_INTEQ(count_fds(), fds0, "no descriptor left open");
}

static void test_special_entries(void) {
    int rc;
    char root[300], p[600], q[600];
    snprintf(root, sizeof root, "%s/special", g_tmp);
    mkdir(root, 0755);
    put_file(root, "f", 10);
    put_dir(root, "d");
    put_file(root, "d/g", 3);
    mkpath(root, "fifo", p, sizeof p);
    CHECK(mkfifo(p, 0644) == 0, "make a FIFO");
    mkpath(root, "link-to-f", p, sizeof p);
    CHECK(symlink("f", p) == 0, "symlink to a file");
    mkpath(root, "link-to-d", p, sizeof p);
    CHECK(symlink("d", p) == 0, "symlink to a directory");
    mkpath(root, "d/up", p, sizeof p);
    CHECK(symlink("..", p) == 0, "symlink to an ancestor");
    mkpath(root, "self", p, sizeof p);
    CHECK(symlink("self", p) == 0, "symlink to itself");
    mkpath(root, "dangling", p, sizeof p);
    CHECK(symlink("nowhere", p) == 0, "dangling symlink");
    mkpath(root, "outside", p, sizeof p);
    CHECK(symlink("/", p) == 0, "symlink out of the root");

    /* Not following: links are reported, the FIFO too (the walk would hang
     * if it opened it), and everything else is walked. */
    list got = {0};
    rc = walk_all(root, 0, &got);
    CHECK_INTEQ(rc, 0, "walk with links not followed");
    const char *want[] = {"d/g",
                          "d/up\tERR:symlink (not followed)",
                          "dangling\tERR:symlink (not followed)",
                          "f",
                          "fifo\tERR:not a regular file (FIFO)",
                          "link-to-d\tERR:symlink (not followed)",
                          "link-to-f\tERR:symlink (not followed)",
                          "outside\tERR:symlink (not followed)",
                          "self\tERR:symlink (not followed)"};
    size_t nw = sizeof want / sizeof want[0];
    CHECK_INTEQ(got.n, nw, "entries, links not followed");
    for (size_t i = 0; i < nw && i < got.n; i++) CHECK_STREQ(got.v[i], want[i], "links not followed");
    list_free(&got);
    s3x_walk *w = NULL;
    int links = 0;
    s3x_walk_entry en;
    if (s3x_walk_open(&w, root, 0) == 0)
        while (s3x_walk_next(w, &en) == 1) links += en.is_symlink;
    s3x_walk_close(w);
    CHECK_INTEQ(links, 6, "is_symlink marks the links left alone");

    /* Following: files through links, the link to the ancestor is a loop,
     * the self link and the dangling one are errors, the walk goes on. The
     * link out of the root is followed (asked for), so it is removed first. */
    CHECK(unlink(p) == 0, "remove the link to /");
    rc = walk_all(root, S3X_WALK_FOLLOW_SYMLINKS, &got);
    CHECK_INTEQ(rc, 0, "walk following links");
    CHECK_INTEQ(got.n, 9, "entries, links followed");
    const char *e;
    CHECK((e = find(&got, "d/g")) && !strcmp(e, "d/g"), "d/g walked");
    e = find(&got, "d/up/\t");
    CHECK(e && strstr(e, "ERR:symlink loop: the same directory as the root"), "link to the root is a loop: %s", e ? e : "(none)");
    e = find(&got, "self\t");
    CHECK(e && strstr(e, "ERR:symlink loop"), "self link: %s", e ? e : "(none)");
    e = find(&got, "dangling\t");
    CHECK(e && strstr(e, "ERR:dangling symlink"), "dangling: %s", e ? e : "(none)");
    CHECK((e = find(&got, "link-to-d/g")) && !strcmp(e, "link-to-d/g"), "file through a directory link");
    CHECK((e = find(&got, "link-to-f")) && !strcmp(e, "link-to-f"), "file through a link");
    CHECK((e = find(&got, "fifo\t")) != NULL, "FIFO still reported");
    for (size_t i = 1; i < got.n; i++) {
        size_t a = strcspn(got.v[i - 1], "\t"), b = strcspn(got.v[i], "\t");
        char x[4200], y[4200];
        snprintf(x, sizeof x, "%.*s", (int)a, got.v[i - 1]);
        snprintf(y, sizeof y, "%.*s", (int)b, got.v[i]);
        CHECK(strcmp(x, y) < 0, "followed walk in order: %s < %s", x, y);
    }
    list_free(&got);

    /* A deeper loop: d/e/back -> ../.. (d's parent, the root). */
    put_dir(root, "d/e");
    mkpath(root, "d/e/back", q, sizeof q);
    CHECK(symlink("..", q) == 0, "symlink to the grandparent");
    rc = walk_all(root, S3X_WALK_FOLLOW_SYMLINKS, &got);
    CHECK_INTEQ(rc, 0, "walk with a deeper loop");
    e = find(&got, "d/e/back/\t");
    CHECK(e && strstr(e, "ERR:symlink loop: the same directory as d/"), "link to the parent is a loop: %s", e ? e : "(none)");
    list_free(&got);
    rm_rf(root);
}

static void test_vanished(void) {
    char root[300], p[600];
    snprintf(root, sizeof root, "%s/vanish", g_tmp);
    mkdir(root, 0755);
    put_file(root, "a", 1);
    put_file(root, "b", 1);
    put_dir(root, "c");
    put_file(root, "c/x", 1);
    put_file(root, "d", 1);
    s3x_walk *w = NULL;
    int rc = s3x_walk_open(&w, root, 0);
    CHECK_INTEQ(rc, 0, "open");
    s3x_walk_entry e;
    CHECK(w && s3x_walk_next(w, &e) == 1 && !strcmp(e.rel, "a"), "first entry a");
    /* b and c were listed when the root was read: remove them now. */
    mkpath(root, "b", p, sizeof p);
    unlink(p);
    rm_rf(strcat(strcpy(p, root), "/c"));
    CHECK(s3x_walk_next(w, &e) == 1 && !strcmp(e.rel, "b") && e.err == S3X_EIO && e.sys_errno == ENOENT &&
              e.message && strstr(e.message, "vanished"),
          "a vanished file is reported");
    CHECK(s3x_walk_next(w, &e) == 1 && !strcmp(e.rel, "c") && e.err == S3X_EIO && strstr(e.message, "vanished"),
          "a vanished directory is reported");
    CHECK(s3x_walk_next(w, &e) == 1 && !strcmp(e.rel, "d") && e.err == 0, "the walk goes on");
    CHECK(s3x_walk_next(w, &e) == 0, "end");
    s3x_walk_close(w);
    rm_rf(root);
}

/* Permission denied needs a user that permissions apply to: as root, a
 * child process drops to nobody for the walk. */
static void test_permission_denied(void) {
    char root[300], p[600];
    snprintf(root, sizeof root, "%s/perm", g_tmp);
    mkdir(root, 0755);
    chmod(g_tmp, 0755);
    put_file(root, "a", 1);
    put_dir(root, "locked");
    put_file(root, "locked/secret", 1);
    put_dir(root, "m");
    put_file(root, "m/z", 1);
    mkpath(root, "locked", p, sizeof p);
    chmod(p, 0);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(90);
        list got = {0};
        int rc = walk_all(root, 0, &got);
        int ok = rc == 0 && got.n == 3 && !strcmp(got.v[0], "a") &&
                 !strcmp(got.v[1], "locked/\tERR:cannot open directory: Permission denied") &&
                 !strcmp(got.v[2], "m/z");
        if (!ok)
            for (size_t i = 0; i < got.n; i++) printf("#  walked: %s\n", got.v[i]);
        fflush(stdout);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "an unreadable directory is reported as 'locked/' and the walk goes on (status %d)", status);
    rm_rf(root);
}

static void test_open_errors(void) {
    int rc;
    s3x_walk *w = (s3x_walk *)1;
    char p[300];
    snprintf(p, sizeof p, "%s/nope", g_tmp);
    CHECK_INTEQ(s3x_walk_open(&w, p, 0), S3X_EIO, "missing root");
    CHECK(w == NULL, "out cleared");
    CHECK(strstr(s3x_error_last()->message, "nope") != NULL, "message names the root: %s", s3x_error_last()->message);
    put_file(g_tmp, "plain", 1);
    snprintf(p, sizeof p, "%s/plain", g_tmp);
    CHECK_INTEQ(s3x_walk_open(&w, p, 0), S3X_EINVAL, "a file as root");
    CHECK(strstr(s3x_error_last()->message, "not a directory") != NULL, "message: %s", s3x_error_last()->message);
    CHECK_INTEQ(s3x_walk_open(&w, g_tmp, 0x100), S3X_EINVAL, "unknown flag");
    CHECK_INTEQ(s3x_walk_open(&w, "", 0), S3X_EINVAL, "empty root");
    CHECK_INTEQ(s3x_walk_open(NULL, g_tmp, 0), S3X_EINVAL, "NULL out");
    s3x_walk_close(NULL);
    /* An empty root walks to nothing. */
    snprintf(p, sizeof p, "%s/emptyroot", g_tmp);
    mkdir(p, 0755);
    list got = {0};
    rc = walk_all(p, S3X_WALK_EMPTY_DIRS, &got);
    CHECK_INTEQ(rc, 0, "empty root");
    CHECK_INTEQ(got.n, 0, "the root itself is not an entry");
    list_free(&got);
}

/* A deep chain: one descriptor per level, all closed at the end. */
static void test_deep(void) {
    int rc;
    char root[300];
    snprintf(root, sizeof root, "%s/deep", g_tmp);
    mkdir(root, 0755);
    char rel[4096] = "";
    for (int i = 0; i < 60; i++) {
        strcat(rel, i ? "/d" : "d");
        put_dir(root, rel);
    }
    strcat(rel, "/leaf");
    put_file(root, rel, 5);
    int fds0 = count_fds();
    list got = {0};
    rc = walk_all(root, 0, &got);
    CHECK_INTEQ(rc, 0, "deep walk");
    CHECK(got.n == 1 && !strcmp(got.v[0], rel), "the deep leaf");
    CHECK_INTEQ(count_fds(), fds0, "descriptors closed");
    list_free(&got);
    rm_rf(root);
}

int main(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/s3x_walk_XXXXXX");
    if (!mkdtemp(g_tmp)) {
        perror("mkdtemp");
        return 1;
    }
    test_fixed_order();
    test_random_trees();
    test_special_entries();
    test_vanished();
    test_permission_denied();
    test_open_errors();
    test_deep();
    rm_rf(g_tmp);
    return tap_summary("test_walk");
}
