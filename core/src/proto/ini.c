/* The shared config and credentials files, parsed like botocore's
 * configparser (see ini.h for the rules and where they come from).
 *
 * The whole file is read into memory (it is small, and bounded) and parsed
 * in one pass; duplicates are found afterwards by sorting, so a file with
 * many sections or settings costs n log n, not n^2. Values can be secrets:
 * they are grown without realloc (which could leave a copy behind in freed
 * memory) and wiped, like the file's text, before they are freed. */
#include "ini.h"
#include "buf.h"
#include "error.h"
#include "sigv4.h" /* s3x_utf8_decode, s3x_utf8_space */

#include <errno.h>
#include <openssl/crypto.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct ini_section {
    char *name;
    size_t line;
    int is_default; /* [DEFAULT]: its settings apply to every section */
} ini_section;

typedef struct ini_entry {
    size_t section; /* index into sections */
    char *name;     /* ASCII-lowercased */
    char *value;    /* NUL-terminated; vlen bytes */
    size_t vlen, vcap;
    size_t line;
} ini_entry;

struct s3x_ini {
    ini_section *sections;
    size_t nsections, capsections;
    ini_entry *entries;
    size_t nentries, capentries;
};

/* ---- small helpers ---- */

static void wipe_free(void *p, size_t n) {
    if (!p) return;
    OPENSSL_cleanse(p, n);
    free(p);
}


/* Grows an array of elements of size sz to hold one more. */
static int grow(void **arr, size_t *cap, size_t n, size_t sz) {
    if (n < *cap) return 0;
    size_t nc = *cap ? *cap * 2 : 16;
    if (nc > SIZE_MAX / sz) return -1;
    void *p = realloc(*arr, nc * sz); /* holds pointers only, no secrets */
    if (!p) return -1;
    *arr = p;
    *cap = nc;
    return 0;
}

/* Appends s[0..n) to an entry's value, moving it (never realloc) when it
 * must grow so that no copy of a secret is left unwiped. */
static int value_append(ini_entry *e, const char *s, size_t n) {
    if (e->vlen + n + 1 > e->vcap) {
        size_t nc = e->vcap ? e->vcap : 64;
        while (nc < e->vlen + n + 1) nc *= 2;
        char *p = malloc(nc);
        if (!p) return -1;
        if (e->vlen) memcpy(p, e->value, e->vlen);
        wipe_free(e->value, e->vcap);
        e->value = p;
        e->vcap = nc;
    }
    memcpy(e->value + e->vlen, s, n);
    e->vlen += n;
    e->value[e->vlen] = '\0';
    return 0;
}

/* Bounds of s[0..n) without leading and trailing whitespace (s is valid
 * UTF-8); *indent is the number of leading whitespace characters. */
static void strip(const char *s, size_t n, size_t *a, size_t *b, size_t *indent) {
    size_t i = 0, sp, ind = 0;
    while ((sp = s3x_utf8_space(s + i, n - i))) {
        i += sp;
        ind++;
    }
    *a = i;
    *b = i;
    *indent = ind;
    while (i < n) {
        if ((sp = s3x_utf8_space(s + i, n - i))) {
            i += sp;
            continue;
        }
        uint32_t cp;
        size_t len = s3x_utf8_decode(s + i, n - i, &cp);
        i += len ? len : 1;
        *b = i;
    }
}

static int ascii_lower(int c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; }

static int name_eq_ci(const char *lowered, const char *key) {
    for (;; lowered++, key++) {
        if ((unsigned char)*lowered != ascii_lower((unsigned char)*key)) return 0;
        if (!*lowered) return 1;
    }
}

/* A name fit to be quoted in a message: short printable ASCII. */
static const char *shown(const char *name) {
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++, n++)
        if (*p < 0x20 || *p >= 0x7f || n >= 64) return "(name not shown)";
    return name;
}

/* ---- the parse ---- */

typedef struct parse {
    s3x_ini *ini;
    size_t err_line; /* the first error's line, 0 when none */
    char err[200];
} parse;

/* Records an error at line unless one was found on an earlier line. */
static void fail(parse *P, size_t line, const char *msg) {
    if (P->err_line && P->err_line <= line) return;
    P->err_line = line;
    snprintf(P->err, sizeof P->err, "%s", msg);
}

static int add_section(parse *P, const char *name, size_t n, size_t line, size_t *idx) {
    s3x_ini *ini = P->ini;
    int is_default = n == 7 && memcmp(name, "DEFAULT", 7) == 0;
    if (is_default) { /* [DEFAULT] may be opened again: it is one section */
        for (size_t i = 0; i < ini->nsections; i++)
            if (ini->sections[i].is_default) {
                *idx = i;
                return 0;
            }
    }
    if (grow((void **)&ini->sections, &ini->capsections, ini->nsections, sizeof *ini->sections)) return -1;
    ini_section *s = &ini->sections[ini->nsections];
    if (!(s->name = s3x_strndup(name, n))) return -1;
    s->line = line;
    s->is_default = is_default;
    *idx = ini->nsections++;
    return 0;
}

static int add_entry(parse *P, size_t section, const char *name, size_t nlen, const char *value, size_t vlen,
                     size_t line, size_t *idx) {
    s3x_ini *ini = P->ini;
    if (grow((void **)&ini->entries, &ini->capentries, ini->nentries, sizeof *ini->entries)) return -1;
    ini_entry *e = &ini->entries[ini->nentries];
    memset(e, 0, sizeof *e);
    if (!(e->name = s3x_strndup(name, nlen))) return -1;
    for (char *c = e->name; *c; c++) *c = (char)ascii_lower((unsigned char)*c);
    e->section = section;
    e->line = line;
    ini->nentries++;
    if (value_append(e, value, vlen)) return -1;
    *idx = ini->nentries - 1;
    return 0;
}

/* 0 if s[0..n) is UTF-8 without NUL bytes (Python could decode it), else
 * the problem. */
static const char *text_problem(const char *s, size_t n) {
    if (memchr(s, '\0', n)) return "has a NUL byte";
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t len = (unsigned char)s[i] < 0x80 ? 1 : s3x_utf8_decode(s + i, n - i, &cp);
        if (!len) return "is not valid UTF-8";
        i += len;
    }
    return NULL;
}

/* The last ']' of s[0..n), or NULL. */
static const char *last_bracket(const char *s, size_t n) {
    while (n--)
        if (s[n] == ']') return s + n;
    return NULL;
}

/* The lines of the file, as configparser's _read walks them. Returns 0 (with
 * the first error, if any, in P), or -1 when out of memory. */
static int parse_lines(parse *P, const char *data, size_t len) {
    size_t pos = 0, lineno = 0;
    int have_sect = 0, have_opt = 0;
    size_t sect = 0, opt = 0, indent_level = 0;
    while (pos < len) {
        lineno++;
        size_t end = pos;
        while (end < len && data[end] != '\n' && data[end] != '\r') end++;
        const char *line = data + pos;
        size_t n = end - pos;
        pos = end;
        if (pos < len) pos += (data[pos] == '\r' && pos + 1 < len && data[pos + 1] == '\n') ? 2 : 1;

        if (n > S3X_INI_MAX_LINE) {
            /* Read whole or not at all: when the tail of a long line was
             * parsed as a line of its own, a key hidden in a comment was used. */
            fail(P, lineno, "is longer than 65536 bytes, the most a line may hold");
            return 0;
        }
        const char *problem = text_problem(line, n);
        if (problem) {
            fail(P, lineno, problem);
            return 0;
        }
        size_t a, b, indent;
        strip(line, n, &a, &b, &indent);
        const char *v = line + a;
        size_t vl = b - a;
        if (vl && (v[0] == '#' || v[0] == ';')) continue; /* a comment, even amid a value */
        if (!vl) {
            /* A blank line inside a multi-line value is part of it. */
            if (have_opt && value_append(&P->ini->entries[opt], "\n", 1)) return -1;
            continue;
        }
        if (have_opt && indent > indent_level) {
            ini_entry *e = &P->ini->entries[opt];
            if (value_append(e, "\n", 1) || value_append(e, v, vl)) return -1;
            continue;
        }
        indent_level = indent;
        const char *close = v[0] == '[' ? last_bracket(v, vl) : NULL;
        if (close && close > v + 1) {
            if (add_section(P, v + 1, (size_t)(close - v - 1), lineno, &sect)) return -1;
            have_sect = 1;
            have_opt = 0;
            continue;
        }
        if (!have_sect) {
            fail(P, lineno, "comes before any [section] header");
            return 0;
        }
        size_t d = 0;
        while (d < vl && v[d] != '=' && v[d] != ':') d++;
        if (d == vl) {
            fail(P, lineno, "is neither a [section], a setting (name = value) nor a comment");
            return 0;
        }
        size_t na, nb, va, vb, unused;
        strip(v, d, &na, &nb, &unused);
        strip(v + d + 1, vl - d - 1, &va, &vb, &unused);
        if (nb == na) {
            fail(P, lineno, "has a setting with no name");
            return 0;
        }
        if (add_entry(P, sect, v + na, nb - na, v + d + 1 + va, vb - va, lineno, &opt)) return -1;
        have_opt = 1;
    }
    return 0;
}

/* A setting or a section, as sorted to find duplicates. */
typedef struct dup_key {
    size_t section; /* for settings; 0 for sections */
    const char *name;
    size_t line;
} dup_key;

static int cmp_dup(const void *pa, const void *pb) {
    const dup_key *a = pa, *b = pb;
    if (a->section != b->section) return a->section < b->section ? -1 : 1;
    int c = strcmp(a->name, b->name);
    if (c) return c;
    return a->line < b->line ? -1 : (a->line > b->line ? 1 : 0);
}

/* configparser (strict) refuses a section given twice, and a setting given
 * twice in a section: the earliest second occurrence is the error. Returns
 * 0, or -1 when out of memory. */
static int find_duplicates(parse *P) {
    s3x_ini *ini = P->ini;
    size_t n = ini->nentries > ini->nsections ? ini->nentries : ini->nsections;
    if (!n) return 0;
    dup_key *k = malloc(n * sizeof *k);
    if (!k) return -1;
    for (int pass = 0; pass < 2; pass++) {
        size_t m = 0;
        if (pass == 0) {
            for (size_t i = 0; i < ini->nsections; i++)
                if (!ini->sections[i].is_default) k[m++] = (dup_key){0, ini->sections[i].name, ini->sections[i].line};
        } else {
            for (size_t i = 0; i < ini->nentries; i++)
                k[m++] = (dup_key){ini->entries[i].section, ini->entries[i].name, ini->entries[i].line};
        }
        qsort(k, m, sizeof *k, cmp_dup);
        for (size_t i = 1; i < m; i++) {
            if (k[i].section != k[i - 1].section || strcmp(k[i].name, k[i - 1].name)) continue;
            if (P->err_line && P->err_line <= k[i].line) continue;
            P->err_line = k[i].line;
            if (pass == 0)
                snprintf(P->err, sizeof P->err, "repeats section [%s] of line %zu (botocore refuses that too)",
                         shown(k[i].name), k[i - 1].line);
            else
                snprintf(P->err, sizeof P->err,
                         "repeats setting '%s' of line %zu in section [%s] (botocore refuses that too)",
                         shown(k[i].name), k[i - 1].line, shown(ini->sections[k[i].section].name));
        }
    }
    free(k);
    return 0;
}

/* Trims the end of every value, as configparser does once a value is
 * complete (a multi-line value's trailing blank lines go). */
static void finish_values(s3x_ini *ini) {
    for (size_t i = 0; i < ini->nentries; i++) {
        ini_entry *e = &ini->entries[i];
        size_t a, b, unused;
        strip(e->value, e->vlen, &a, &b, &unused);
        /* Only the end goes (str.rstrip): a value that starts with a blank
         * line keeps it. a == b when there is nothing but whitespace. */
        e->vlen = a == b ? 0 : b;
        e->value[e->vlen] = '\0';
    }
}

int s3x_ini_parse(const char *data, size_t len, const char *name, int error_code, s3x_ini **out) {
    if (!out) return s3x_seterr(S3X_EINVAL, "s3x_ini_parse: out is NULL");
    *out = NULL;
    if (!name) name = "config file";
    if (len > S3X_INI_MAX_FILE)
        return s3x_seterr(error_code, "%s is larger than %u bytes, refused", name, (unsigned)S3X_INI_MAX_FILE);
    if (!data && len) return s3x_seterr(S3X_EINVAL, "s3x_ini_parse: data is NULL");
    parse P;
    memset(&P, 0, sizeof P);
    if (!(P.ini = calloc(1, sizeof *P.ini))) return s3x_seterr(S3X_ENOMEM, "out of memory reading %s", name);
    int rc = 0;
    if (parse_lines(&P, data ? data : "", len) || find_duplicates(&P)) {
        rc = s3x_seterr(S3X_ENOMEM, "out of memory reading %s", name);
    } else if (P.err_line) {
        rc = s3x_seterr(error_code, "%s, line %zu: the line %s", name, P.err_line, P.err);
    }
    if (rc) {
        s3x_ini_free(P.ini);
        return rc;
    }
    finish_values(P.ini);
    *out = P.ini;
    return 0;
}

int s3x_ini_load(const char *path, const char *what, int error_code, s3x_ini **out) {
    if (!out) return s3x_seterr(S3X_EINVAL, "s3x_ini_load: out is NULL");
    *out = NULL;
    if (!path) return 0;
    if (!what) what = "config file";
    /* botocore skips a path that is not a regular file (os.path.isfile) and
     * one it cannot open. */
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    struct stat st;
    if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode)) {
        fclose(f);
        return 0;
    }
    size_t cap = 0, len = 0;
    char *data = NULL;
    int rc = 0;
    for (;;) {
        if (len == cap) {
            if (cap > S3X_INI_MAX_FILE) {
                rc = s3x_seterr(error_code, "%s %s is larger than %u bytes, refused", what, path,
                                (unsigned)S3X_INI_MAX_FILE);
                break;
            }
            size_t nc = cap ? cap * 2 : 16384;
            if (nc > S3X_INI_MAX_FILE + 1) nc = S3X_INI_MAX_FILE + 1; /* one byte over tells "too large" */
            char *p = malloc(nc);
            if (!p) {
                rc = s3x_seterr(S3X_ENOMEM, "out of memory reading %s %s", what, path);
                break;
            }
            if (len) memcpy(p, data, len);
            wipe_free(data, cap);
            data = p;
            cap = nc;
        }
        size_t got = fread(data + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f)) rc = s3x_seterr(error_code, "%s %s could not be read: %s", what, path, strerror(errno));
            break;
        }
    }
    fclose(f);
    if (!rc) {
        size_t nl = strlen(what) + strlen(path) + 2;
        char *name = malloc(nl);
        if (!name) {
            rc = s3x_seterr(S3X_ENOMEM, "out of memory reading %s %s", what, path);
        } else {
            snprintf(name, nl, "%s %s", what, path);
            rc = s3x_ini_parse(data, len, name, error_code, out);
            free(name);
        }
    }
    wipe_free(data, cap);
    return rc;
}

/* The index of the section of that exact name (never [DEFAULT]), or -1. */
static long find_section(const s3x_ini *ini, const char *section) {
    for (size_t i = 0; i < ini->nsections; i++)
        if (!ini->sections[i].is_default && strcmp(ini->sections[i].name, section) == 0) return (long)i;
    return -1;
}

int s3x_ini_has_section(const s3x_ini *ini, const char *section) {
    return ini && section && find_section(ini, section) >= 0;
}

const char *s3x_ini_get(const s3x_ini *ini, const char *section, const char *key) {
    if (!ini || !section || !key) return NULL;
    long s = find_section(ini, section);
    if (s < 0) return NULL;
    const char *inherited = NULL;
    for (size_t i = 0; i < ini->nentries; i++) {
        const ini_entry *e = &ini->entries[i];
        if (!name_eq_ci(e->name, key)) continue;
        if (e->section == (size_t)s) return e->value;
        if (ini->sections[e->section].is_default) inherited = e->value;
    }
    return inherited;
}

/* Splits s the way Python's shlex.split does (POSIX mode, no comments):
 * words separated by space, tab, CR or LF; '...' quotes literally; "..."
 * quotes with \" and \\ as the only escapes; a backslash outside quotes takes
 * the next character literally. Keeps the first two words in w[0], w[1] (each
 * as long as s at most) and returns the number of words (3 meaning "more than
 * two"), or -1 where shlex raises ValueError (an unclosed quote, a trailing
 * backslash). */
static int shell_split2(const char *s, char *w[2]) {
    int nwords = 0;
    size_t wl = 0;
    char state = ' ', escaped_from = ' ';
    int in_word = 0;
    char *cur = NULL;
    for (const char *p = s;; p++) {
        char c = *p;
        if (state == '\\') {
            if (!c) return -1;
            if (escaped_from == '"' && c != '\\' && c != '"' && cur) cur[wl++] = '\\';
            if (cur) cur[wl++] = c;
            state = escaped_from;
            continue;
        }
        if (state == '\'' || state == '"') {
            if (!c) return -1;
            if (c == state) state = 'a';
            else if (c == '\\' && state == '"') {
                escaped_from = '"';
                state = '\\';
            } else if (cur) cur[wl++] = c;
            continue;
        }
        int blank = c == ' ' || c == '\t' || c == '\r' || c == '\n';
        if (!c || blank) {
            if (in_word) { /* a word ends */
                if (cur) cur[wl] = '\0';
                nwords++;
                in_word = 0;
                state = ' ';
            }
            if (!c) break;
            continue;
        }
        if (!in_word) { /* a word starts */
            in_word = 1;
            cur = nwords < 2 ? w[nwords] : NULL;
            wl = 0;
            state = 'a';
        }
        if (c == '\'' || c == '"') state = c;
        else if (c == '\\') {
            escaped_from = 'a';
            state = '\\';
        } else if (cur) cur[wl++] = c;
    }
    return nwords > 2 ? 3 : nwords;
}

/* 1 if section name is "prefix NAME" split shell-like into exactly two
 * words with NAME == want. */
static int named_is(const char *name, const char *prefix, const char *want) {
    size_t pl = strlen(prefix);
    if (strncmp(name, prefix, pl) != 0) return 0;
    size_t n = strlen(name);
    char *w0 = malloc(n + 1), *w1 = malloc(n + 1);
    char *w[2] = {w0, w1};
    int nw = w0 && w1 ? shell_split2(name, w) : -1;
    /* botocore matches the first word only by the prefix (startswith): a
     * "[profilex NAME]" counts as a profile too. */
    int ok = nw == 2 && strcmp(w1, want) == 0;
    free(w0);
    free(w1);
    return ok;
}

const char *s3x_ini_named_section(const s3x_ini *ini, const char *prefix, const char *name) {
    if (!ini || !prefix || !name) return NULL;
    const char *found = NULL;
    for (size_t i = 0; i < ini->nsections; i++)
        if (!ini->sections[i].is_default && named_is(ini->sections[i].name, prefix, name))
            found = ini->sections[i].name;
    return found;
}

const char *s3x_ini_profile_section(const s3x_ini *ini, const char *profile) {
    if (!ini || !profile) return NULL;
    const char *found = NULL;
    for (size_t i = 0; i < ini->nsections; i++) {
        const char *name = ini->sections[i].name;
        if (ini->sections[i].is_default) continue;
        if (strncmp(name, "profile", 7) == 0) {
            if (named_is(name, "profile", profile)) found = name;
        } else if (strcmp(name, "default") == 0 && strcmp(profile, "default") == 0) {
            found = name;
        }
    }
    return found;
}

int s3x_ini_nested(const char *value, const char *sub, char **out, size_t *bad_line) {
    *out = NULL;
    if (bad_line) *bad_line = 0;
    if (!value || value[0] != '\n' || !sub) return 0;
    size_t lineno = 0;
    const char *p = value;
    while (*p) {
        const char *e = p + strcspn(p, "\n");
        lineno++;
        size_t a, b, unused;
        strip(p, (size_t)(e - p), &a, &b, &unused);
        if (b > a) {
            const char *eq = memchr(p + a, '=', b - a);
            if (!eq) {
                if (bad_line) *bad_line = lineno;
                return -1;
            }
            size_t na, nb, va, vb;
            strip(p + a, (size_t)(eq - p - a), &na, &nb, &unused);
            strip(eq + 1, (size_t)(p + b - eq - 1), &va, &vb, &unused);
            if (nb - na == strlen(sub) && memcmp(p + a + na, sub, nb - na) == 0) {
                /* a later line with the same name wins, as in a dict */
                free(*out);
                *out = s3x_strndup(eq + 1 + va, vb - va);
                if (!*out) return -2;
            }
        }
        p = *e ? e + 1 : e;
    }
    return 0;
}

size_t s3x_ini_count(const s3x_ini *ini) { return ini ? ini->nentries : 0; }

int s3x_ini_entry(const s3x_ini *ini, size_t i, const char **section, const char **name, const char **value) {
    if (!ini || i >= ini->nentries) return -1;
    const ini_entry *e = &ini->entries[i];
    if (section) *section = ini->sections[e->section].name;
    if (name) *name = e->name;
    if (value) *value = e->value;
    return 0;
}

void s3x_ini_free(s3x_ini *ini) {
    if (!ini) return;
    for (size_t i = 0; i < ini->nentries; i++) {
        free(ini->entries[i].name);
        wipe_free(ini->entries[i].value, ini->entries[i].vcap);
    }
    free(ini->entries);
    for (size_t i = 0; i < ini->nsections; i++) free(ini->sections[i].name);
    free(ini->sections);
    free(ini);
}
