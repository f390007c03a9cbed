/* Include/exclude filters (core/src/util/filter.c) with the AWS CLI's
 * semantics: every path starts included, the last matching filter wins, and
 * patterns are Python fnmatch globs over the whole relative path ('*' and
 * '?' cross '/', sets as in fnmatch, no escape character). The glob table
 * was checked against Python 3.11's fnmatch.fnmatchcase (which the AWS CLI
 * calls), and so was a differential run of 200,000 random patterns. */
#include "filter.h"
#include "s3xfer/s3xfer.h"
#include "tap.h"
#include <stdlib.h>
#include <string.h>

typedef struct gcase {
    const char *pattern, *s;
    int match;
} gcase;

static void test_glob_table(void) {
    static const gcase cases[] = {
        /* '*' crosses '/' */
        {"*", "", 1},
        {"*", "a/b/c", 1},
        {"*.txt", "foo.txt", 1},
        {"*.txt", "dir/sub/foo.txt", 1},
        {"*.txt", "foo.txt.bak", 0},
        {"a*", "a/b", 1},
        {".git/*", ".git/config", 1},
        {".git/*", ".git/objects/ab/cdef", 1},
        {".git/*", "foo/.git/config", 0},
        {"*/.git/*", "foo/.git/config", 1},
        {"*a*b*", "xxaYYbZZ", 1},
        {"*a*b*", "xxbYYaZZ", 0},
        {"a*b*c", "abbbbc", 1},
        {"a*b*c", "abbbbcx", 0},
        {"**", "x/y", 1},
        /* anchored at both ends */
        {"b.txt", "a/b.txt", 0},
        {"a/b", "a/b/c", 0},
        {"", "", 1},
        {"", "a", 0},
        /* '?' is one character, '/' included, a UTF-8 sequence is one */
        {"a?b", "a/b", 1},
        {"a?b", "axb", 1},
        {"a?b", "ab", 0},
        {"caf?", "caf\xc3\xa9", 1},
        {"caf??", "caf\xc3\xa9", 0},
        {"?", "\xe2\x82\xac", 1},
        {"??", "\xff\xfe", 1}, /* invalid UTF-8: one character per byte */
        /* sets */
        {"[abc]", "b", 1},
        {"[abc]", "d", 0},
        {"[a-c]x", "bx", 1},
        {"[!a-c]x", "bx", 0},
        {"[!a-c]x", "dx", 1},
        {"[!a-c]", "/", 1},
        {"[]]", "]", 1},
        {"[!]]", "]", 0},
        {"[!]]", "a", 1},
        {"[]-]", "-", 1},
        {"[a-]", "-", 1},
        {"[-a]", "-", 1},
        {"[z-a]", "m", 0},   /* reversed range: matches nothing */
        {"[!z-a]", "m", 1},
        {"[\xc3\xa0-\xc3\xbf]", "\xc3\xa9", 1}, /* a range of code points */
        {"[\\]", "\\", 1},                      /* backslash is literal */
        {"[^a]", "^", 1},                       /* '^' is not negation */
        {"[^a]", "b", 0},
        /* unclosed '[' is literal */
        {"[", "[", 1},
        {"[abc", "[abc", 1},
        {"a[", "a[", 1},
        {"[!", "[!", 1},
        /* no escape character */
        {"a\\*", "a\\xyz", 1},
        {"a\\*", "a*", 0},
        {"\\?", "\\x", 1},
        /* case-sensitive */
        {"*.TXT", "a.txt", 0},
        {"*.txt", "a.txt", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int m = s3x_glob_match(cases[i].pattern, cases[i].s);
        CHECK(m == cases[i].match, "glob '%s' on '%s': expected %d, got %d", cases[i].pattern, cases[i].s,
              cases[i].match, m);
    }
    CHECK(!s3x_glob_match(NULL, "a") && !s3x_glob_match("a", NULL), "NULL never matches");
}

/* Pathological backtracking stays linear-ish (the two-pointer match). */
static void test_glob_long(void) {
    char s[20001], pat[64];
    memset(s, 'a', 20000);
    s[20000] = '\0';
    strcpy(pat, "*a*a*a*a*a*a*a*a*a*a*a*b");
    CHECK(!s3x_glob_match(pat, s), "no 'b': no match");
    s[19999] = 'b';
    CHECK(s3x_glob_match(pat, s), "a final 'b' matches");
}

typedef struct fcase {
    const char *filters; /* "+pat" include, "-pat" exclude, separated by '\n' */
    const char *path;
    int included;
} fcase;

static s3x_filter *make(const char *spec) {
    s3x_filter *f = NULL;
    if (s3x_filter_new(&f) != 0) return NULL;
    char *copy = strdup(spec);
    for (char *line = strtok(copy, "\n"); line; line = strtok(NULL, "\n")) {
        int kind = line[0] == '+' ? S3X_FILTER_INCLUDE : S3X_FILTER_EXCLUDE;
        if (s3x_filter_add(f, kind, line + 1) != 0) printf("# add failed\n");
    }
    free(copy);
    return f;
}

static void test_filter_lists(void) {
    /* The AWS CLI documentation's tree: /tmp/foo/{.git/config,
     * .git/description, foo.txt, bar.txt, baz.jpg}. */
    static const fcase cases[] = {
        /* no filters: everything */
        {"", "foo.txt", 1},
        {"", ".git/config", 1},
        /* --exclude ".git/" followed by "*": the repository's files go, the rest stays */
        {"-.git/*", ".git/config", 0},
        {"-.git/*", ".git/description", 0},
        {"-.git/*", "foo.txt", 1},
        {"-.git/*", "baz.jpg", 1},
        /* --exclude "*" --include "*.txt": only the .txt files */
        {"-*\n+*.txt", "foo.txt", 1},
        {"-*\n+*.txt", "bar.txt", 1},
        {"-*\n+*.txt", "baz.jpg", 0},
        {"-*\n+*.txt", ".git/config", 0},
        {"-*\n+*.txt", "deep/er/x.txt", 1},
        /* --include "*.txt" --exclude "*": the later exclude wins: nothing */
        {"+*.txt\n-*", "foo.txt", 0},
        {"+*.txt\n-*", "baz.jpg", 0},
        /* --exclude "*" --include "*.txt" --exclude "bar.txt" */
        {"-*\n+*.txt\n-bar.txt", "foo.txt", 1},
        {"-*\n+*.txt\n-bar.txt", "bar.txt", 0},
        {"-*\n+*.txt\n-bar.txt", "sub/bar.txt", 1}, /* anchored: not the same path */
        /* --exclude "*.jpg" alone */
        {"-*.jpg", "baz.jpg", 0},
        {"-*.jpg", "foo.txt", 1},
        /* an include that matches nothing excluded changes nothing */
        {"+*.txt", "baz.jpg", 1},
        /* a directory's files by prefix, at any depth */
        {"-*\n+logs/*", "logs/2026/12/03.log", 1},
        {"-*\n+logs/*", "logs", 0},
        {"-*\n+logs/*", "app/logs/x", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        s3x_filter *f = make(cases[i].filters);
        int inc = s3x_filter_match(f, cases[i].path);
        CHECK(inc == cases[i].included, "filters [%s] on '%s': expected %s", cases[i].filters, cases[i].path,
              cases[i].included ? "included" : "excluded");
        s3x_filter_free(f);
    }
    CHECK(s3x_filter_match(NULL, "x") == 1, "no list includes everything");
}

static void test_filter_api(void) {
    s3x_filter *f = NULL;
    CHECK_INTEQ(s3x_filter_new(NULL), S3X_EINVAL, "NULL out");
    int rc = s3x_filter_new(&f);
    CHECK_INTEQ(rc, 0, "new");
    CHECK_INTEQ(s3x_filter_count(f), 0, "empty");
    CHECK_INTEQ(s3x_filter_add(f, 7, "*"), S3X_EINVAL, "bad kind");
    CHECK(strstr(s3x_error_last()->message, "kind") != NULL, "message names the kind: %s", s3x_error_last()->message);
    CHECK_INTEQ(s3x_filter_add(f, S3X_FILTER_EXCLUDE, NULL), S3X_EINVAL, "NULL pattern");
    CHECK_INTEQ(s3x_filter_count(f), 0, "still empty after refusals");
    /* Many filters: the list grows. */
    for (int i = 0; i < 100; i++) {
        char pat[32];
        snprintf(pat, sizeof pat, "f%d", i);
        rc = s3x_filter_add(f, i % 2 ? S3X_FILTER_INCLUDE : S3X_FILTER_EXCLUDE, pat);
        if (rc) break;
    }
    CHECK_INTEQ(rc, 0, "100 adds");
    CHECK_INTEQ(s3x_filter_count(f), 100, "count");
    CHECK(!s3x_filter_match(f, "f42") && s3x_filter_match(f, "f43") && s3x_filter_match(f, "g"),
          "each pattern with its kind");
    s3x_filter_free(f);
    s3x_filter_free(NULL);
}

int main(void) {
    test_glob_table();
    test_glob_long();
    test_filter_lists();
    test_filter_api();
    return tap_summary("test_filter");
}
