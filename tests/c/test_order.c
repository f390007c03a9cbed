/* The two listing orders a sync merges in (lister.h): byte order, and
 * directory order ("a/b" before "a-b", as servers built on a directory tree
 * list keys). s3x_order_cmp against a segment-by-segment reference, and the
 * walk's S3X_WALK_DIR_ORDER against s3x_order_cmp on random trees whose
 * names hold the bytes around '/'. */
#include "error.h"
#include "lister.h"
#include "walk.h"
#include "tap.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Segment by segment: names compared by bytes, a name before any name it
 * is a prefix of, fewer segments first when all shared ones are equal. */
static int seg_ref(const char *a, const char *b) {
    for (;;) {
        size_t la = strcspn(a, "/"), lb = strcspn(b, "/");
        size_t m = la < lb ? la : lb;
        int c = memcmp(a, b, m);
        if (c) return c < 0 ? -1 : 1;
        if (la != lb) return la < lb ? -1 : 1;
        a += la;
        b += lb;
        if (!*a || !*b) return !*a && !*b ? 0 : !*a ? -1 : 1;
        a++;
        b++;
    }
}

static int sgn(int v) { return v < 0 ? -1 : v > 0; }

static const char alphabet[] = {'a', 'b', '-', '.', ' ', '0', '/', '~', '\x01', (char)0xc3};

static void random_key(char *out, size_t cap, unsigned *seed) {
    size_t n = 1 + (size_t)(rand_r(seed) % 8);
    if (n >= cap) n = cap - 1;
    for (size_t i = 0; i < n; i++) out[i] = alphabet[rand_r(seed) % sizeof alphabet];
    out[n] = 0;
}

static void mkdirs_for(const char *root, const char *rel) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    for (char *s = p + strlen(root) + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            mkdir(p, 0755);
            *s = '/';
        }
}

int main(void) {
    /* The comparator. */
    CHECK(s3x_order_cmp("a/b", "a-b", S3X_ORDER_SEGMENTS) < 0, "directory order: a/b before a-b");
    CHECK(s3x_order_cmp("a/b", "a-b", S3X_ORDER_BYTES) > 0, "byte order: a-b before a/b");
    CHECK(s3x_order_cmp("a", "a/b", S3X_ORDER_SEGMENTS) < 0, "a before a/b");
    CHECK(s3x_order_cmp("a.txt", "a/x", S3X_ORDER_SEGMENTS) > 0, "a/x before a.txt");
    CHECK(s3x_order_cmp("x", "x", S3X_ORDER_SEGMENTS) == 0, "equal keys");
    unsigned seed = 7;
    int bad = 0;
    for (int i = 0; i < 200000; i++) {
        char a[16], b[16];
        random_key(a, sizeof a, &seed);
        random_key(b, sizeof b, &seed);
        if (sgn(s3x_order_cmp(a, b, S3X_ORDER_SEGMENTS)) != seg_ref(a, b)) {
            if (!bad) printf("# differs on '%s' '%s'\n", a, b);
            bad++;
        }
        if (sgn(s3x_order_cmp(a, b, S3X_ORDER_BYTES)) != sgn(strcmp(a, b))) bad++;
    }
    CHECK(bad == 0, "200,000 random pairs agree with the references (%d differ)", bad);

    /* The walk in either order ascends in the comparator's order. */
    char root[] = "/tmp/s3x_test_order_XXXXXX";
    if (!mkdtemp(root)) {
        CHECK(0, "mkdtemp");
        return 1;
    }
    int made = 0;
    for (int i = 0; i < 400; i++) {
        char k[16];
        random_key(k, sizeof k, &seed);
        /* A usable relative path: no empty, '.' or '..' segment, not ending in '/'. */
        if (k[0] == '/' || strstr(k, "//") || k[strlen(k) - 1] == '/') continue;
        char p[512];
        mkdirs_for(root, k);
        snprintf(p, sizeof p, "%s/%s", root, k);
        if (access(p, F_OK) == 0) continue; /* drawn before */
        FILE *f = fopen(p, "wb");
        if (!f) continue; /* a file where a directory is wanted, or the reverse */
        fclose(f);
        made++;
    }
    CHECK(made > 100, "made %d files", made);
    for (int dirs = 0; dirs < 2; dirs++) {
        s3x_walk *w = NULL;
        int rc = s3x_walk_open(&w, root, dirs ? S3X_WALK_DIR_ORDER : 0);
        CHECK(rc == 0, "walk opens (%s order)", dirs ? "directory" : "byte");
        char prev[512] = "";
        int n = 0, disorder = 0;
        s3x_walk_entry e;
        while (w && s3x_walk_next(w, &e) == 1) {
            if (e.err) continue;
            if (n && s3x_order_cmp(prev, e.rel, dirs ? S3X_ORDER_SEGMENTS : S3X_ORDER_BYTES) >= 0) {
                if (!disorder) printf("# '%s' then '%s'\n", prev, e.rel);
                disorder++;
            }
            snprintf(prev, sizeof prev, "%s", e.rel);
            n++;
        }
        s3x_walk_close(w);
        CHECK(n == made && disorder == 0, "%s order: %d files, %d out of order", dirs ? "directory" : "byte", n,
           disorder);
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) printf("# cleanup failed\n");
    return tap_summary("test_order");
}
