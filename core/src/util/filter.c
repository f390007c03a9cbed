/* Include/exclude filters (see filter.h). The glob rules are those of
 * Python's fnmatch (which the AWS CLI uses), implemented on characters
 * decoded from UTF-8 so that '?' and sets see one character where Python
 * sees one. */
#include "filter.h"
#include "error.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { T_LIT, T_ANY, T_STAR, T_SET };

typedef struct g_tok {
    uint8_t type, neg;
    uint32_t cp;              /* T_LIT */
    size_t set_off, set_n;    /* T_SET: ranges[set_off .. set_off + set_n) */
} g_tok;

typedef struct g_range {
    uint32_t lo, hi;
} g_range;

typedef struct g_pat {
    int kind;
    g_tok *toks;
    size_t ntoks;
    g_range *ranges;
} g_pat;

struct s3x_filter {
    g_pat *pats;
    size_t n, cap;
};

/* One character of s at *i (advanced past it): a well-formed UTF-8 sequence
 * gives its code point; any other byte gives 0xDC00 + byte on its own, as
 * Python's surrogateescape reads a file name it cannot decode. */
static uint32_t next_cp(const unsigned char *s, size_t n, size_t *i) {
    unsigned char c = s[*i];
    if (c < 0x80) {
        (*i)++;
        return c;
    }
    size_t len;
    uint32_t cp, min;
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07, min = 0x10000;
    else goto bad;
    if (*i + len > n) goto bad;
    for (size_t k = 1; k < len; k++) {
        unsigned char cc = s[*i + k];
        if ((cc & 0xC0) != 0x80) goto bad;
        cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) goto bad;
    *i += len;
    return cp;
bad:
    (*i)++;
    return 0xDC00u + c;
}

static void pat_free(g_pat *p) {
    free(p->toks);
    free(p->ranges);
    p->toks = NULL;
    p->ranges = NULL;
}

/* Compiles pattern into tokens; 0 or S3X_ENOMEM. */
static int compile(const char *pattern, g_pat *p) {
    const unsigned char *s = (const unsigned char *)pattern;
    size_t n = strlen(pattern);
    /* At most one token and one range per character. */
    p->toks = malloc((n ? n : 1) * sizeof *p->toks);
    p->ranges = malloc((n ? n : 1) * sizeof *p->ranges);
    p->ntoks = 0;
    if (!p->toks || !p->ranges) {
        pat_free(p);
        return S3X_ENOMEM;
    }
    size_t nr = 0, i = 0;
    while (i < n) {
        g_tok *t = &p->toks[p->ntoks];
        memset(t, 0, sizeof *t);
        if (s[i] == '*') {
            i++;
            if (p->ntoks && p->toks[p->ntoks - 1].type == T_STAR) continue;
            t->type = T_STAR;
        } else if (s[i] == '?') {
            i++;
            t->type = T_ANY;
        } else if (s[i] == '[') {
            /* Find the closing ']' as fnmatch does: after an optional '!',
             * a ']' right away is a member, not the end. */
            size_t j = i + 1;
            if (j < n && s[j] == '!') j++;
            if (j < n && s[j] == ']') j++;
            while (j < n && s[j] != ']') j++;
            if (j >= n) {
                i++;
                t->type = T_LIT;
                t->cp = '[';
            } else {
                size_t k = i + 1;
                t->type = T_SET;
                if (s[k] == '!') {
                    t->neg = 1;
                    k++;
                }
                t->set_off = nr;
                while (k < j) {
                    uint32_t lo = next_cp(s, j, &k), hi = lo;
                    if (k + 1 < j && s[k] == '-') {
                        k++;
                        hi = next_cp(s, j, &k);
                    }
                    p->ranges[nr].lo = lo;
                    p->ranges[nr].hi = hi;
                    nr++;
                }
                t->set_n = nr - t->set_off;
                i = j + 1;
            }
        } else {
            t->type = T_LIT;
            t->cp = next_cp(s, n, &i);
        }
        p->ntoks++;
    }
    return 0;
}

static int set_has(const g_pat *p, const g_tok *t, uint32_t c) {
    int in = 0;
    for (size_t r = t->set_off; r < t->set_off + t->set_n; r++)
        if (p->ranges[r].lo <= c && c <= p->ranges[r].hi) {
            in = 1;
            break;
        }
    return in != t->neg;
}

/* Whole-string match. '*' matches any run of characters, so the classic
 * two-pointer walk that retries only the most recent '*' is exact: a later
 * star can take over whatever an earlier one would have had to take. */
static int pat_match(const g_pat *p, const char *str) {
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strlen(str);
    size_t ti = 0, si = 0;
    size_t star_t = SIZE_MAX, star_s = 0;
    while (si < n) {
        if (ti < p->ntoks) {
            const g_tok *t = &p->toks[ti];
            if (t->type == T_STAR) {
                star_t = ti++;
                star_s = si;
                continue;
            }
            size_t sj = si;
            uint32_t c = next_cp(s, n, &sj);
            int ok = t->type == T_ANY || (t->type == T_LIT && t->cp == c) || (t->type == T_SET && set_has(p, t, c));
            if (ok) {
                ti++;
                si = sj;
                continue;
            }
        }
        if (star_t == SIZE_MAX) return 0;
        /* Let the last star take one more character and retry after it. */
        ti = star_t + 1;
        next_cp(s, n, &star_s);
        si = star_s;
    }
    while (ti < p->ntoks && p->toks[ti].type == T_STAR) ti++;
    return ti == p->ntoks;
}

int s3x_filter_new(s3x_filter **out) {
    if (!out) return s3x_seterr(S3X_EINVAL, "s3x_filter_new: out is NULL");
    *out = calloc(1, sizeof **out);
    if (!*out) return s3x_seterr(S3X_ENOMEM, "out of memory making a filter list");
    return 0;
}

int s3x_filter_add(s3x_filter *f, int kind, const char *pattern) {
    if (!f || !pattern) return s3x_seterr(S3X_EINVAL, "s3x_filter_add: NULL argument");
    if (kind != S3X_FILTER_INCLUDE && kind != S3X_FILTER_EXCLUDE)
        return s3x_seterr(S3X_EINVAL, "s3x_filter_add: kind must be S3X_FILTER_INCLUDE or S3X_FILTER_EXCLUDE, not %d",
                          kind);
    if (f->n == f->cap) {
        size_t nc = f->cap ? f->cap * 2 : 8;
        g_pat *np = realloc(f->pats, nc * sizeof *np);
        if (!np) return s3x_seterr(S3X_ENOMEM, "out of memory adding a filter");
        f->pats = np;
        f->cap = nc;
    }
    g_pat *p = &f->pats[f->n];
    if (compile(pattern, p) != 0) return s3x_seterr(S3X_ENOMEM, "out of memory adding a filter");
    p->kind = kind;
    f->n++;
    return 0;
}

int s3x_filter_match(const s3x_filter *f, const char *rel) {
    if (!f || !rel) return 1;
    int included = 1;
    for (size_t k = 0; k < f->n; k++)
        if (pat_match(&f->pats[k], rel)) included = f->pats[k].kind == S3X_FILTER_INCLUDE;
    return included;
}

size_t s3x_filter_count(const s3x_filter *f) { return f ? f->n : 0; }

void s3x_filter_free(s3x_filter *f) {
    if (!f) return;
    for (size_t k = 0; k < f->n; k++) pat_free(&f->pats[k]);
    free(f->pats);
    free(f);
}

int s3x_glob_match(const char *pattern, const char *s) {
    if (!pattern || !s) return 0;
    g_pat p;
    if (compile(pattern, &p) != 0) return 0;
    int m = pat_match(&p, s);
    pat_free(&p);
    return m;
}
