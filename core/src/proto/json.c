/* The strict JSON reader of json.h. Recursive descent over the bytes; the
 * depth bound keeps the recursion (and a hostile document) small. */
#include "json.h"
#include "buf.h"
#include "error.h"
#include "sigv4.h" /* s3x_utf8_decode: one notion of valid UTF-8 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct member {
    char *key, *value;
    size_t value_len;
    s3x_json_kind kind;
} member;

struct s3x_json {
    member *m;
    size_t n, cap;
};

typedef struct parser {
    const char *s;
    size_t len, pos;
    const char *what;
    int error_code;
    int rc;
    const char *want;          /* a top-level member whose object value's span is recorded */
    size_t want_start, want_end;
} parser;

static int fail(parser *p, const char *why) {
    if (!p->rc) p->rc = s3x_seterr(p->error_code, "%s: malformed JSON at byte %zu: %s", p->what, p->pos, why);
    return p->rc;
}

static int oom(parser *p) {
    if (!p->rc) p->rc = s3x_seterr(S3X_ENOMEM, "out of memory reading %s", p->what);
    return p->rc;
}

static void skip_ws(parser *p) {
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static int hex4(parser *p, uint32_t *out) {
    if (p->len - p->pos < 4) return fail(p, "short \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p->s[p->pos++];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
        else return fail(p, "bad hex digit in \\u escape");
    }
    *out = v;
    return 0;
}

static int put_utf8(s3x_buf *b, uint32_t cp) {
    char t[4];
    size_t n;
    if (cp < 0x80) {
        t[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        t[0] = (char)(0xC0 | (cp >> 6));
        t[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        t[0] = (char)(0xE0 | (cp >> 12));
        t[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        t[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        t[0] = (char)(0xF0 | (cp >> 18));
        t[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        t[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        t[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    return s3x_buf_append(b, t, n);
}

/* A string at p->pos (which is '"'); its decoded text into out when out is
 * not NULL. */
static int parse_string(parser *p, s3x_buf *out) {
    p->pos++;
    for (;;) {
        if (p->pos >= p->len) return fail(p, "unterminated string");
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c == '"') {
            p->pos++;
            return 0;
        }
        if (c < 0x20) return fail(p, "control character in a string");
        if (c == '\\') {
            p->pos++;
            if (p->pos >= p->len) return fail(p, "unterminated escape");
            char e = p->s[p->pos++];
            uint32_t cp;
            switch (e) {
            case '"': cp = '"'; break;
            case '\\': cp = '\\'; break;
            case '/': cp = '/'; break;
            case 'b': cp = '\b'; break;
            case 'f': cp = '\f'; break;
            case 'n': cp = '\n'; break;
            case 'r': cp = '\r'; break;
            case 't': cp = '\t'; break;
            case 'u':
                if (hex4(p, &cp)) return p->rc;
                if (cp >= 0xDC00 && cp <= 0xDFFF) return fail(p, "lone low surrogate in a \\u escape");
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    uint32_t lo;
                    if (p->len - p->pos < 2 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u')
                        return fail(p, "high surrogate without a low one");
                    p->pos += 2;
                    if (hex4(p, &lo)) return p->rc;
                    if (lo < 0xDC00 || lo > 0xDFFF) return fail(p, "high surrogate without a low one");
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                if (cp == 0) return fail(p, "U+0000 in a string");
                break;
            default: return fail(p, "unknown escape");
            }
            if (out && put_utf8(out, cp)) return oom(p);
            continue;
        }
        uint32_t cp;
        size_t n = s3x_utf8_decode(p->s + p->pos, p->len - p->pos, &cp);
        if (!n) return fail(p, "invalid UTF-8");
        if (out && s3x_buf_append(out, p->s + p->pos, n)) return oom(p);
        p->pos += n;
    }
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int parse_number(parser *p) {
    size_t start = p->pos;
    if (p->s[p->pos] == '-') p->pos++;
    if (p->pos >= p->len || !is_digit(p->s[p->pos])) return fail(p, "bad number");
    if (p->s[p->pos] == '0') p->pos++;
    else
        while (p->pos < p->len && is_digit(p->s[p->pos])) p->pos++;
    if (p->pos < p->len && p->s[p->pos] == '.') {
        p->pos++;
        if (p->pos >= p->len || !is_digit(p->s[p->pos])) return fail(p, "bad number");
        while (p->pos < p->len && is_digit(p->s[p->pos])) p->pos++;
    }
    if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
        p->pos++;
        if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-')) p->pos++;
        if (p->pos >= p->len || !is_digit(p->s[p->pos])) return fail(p, "bad number");
        while (p->pos < p->len && is_digit(p->s[p->pos])) p->pos++;
    }
    (void)start;
    return 0;
}

static int literal(parser *p, const char *word) {
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n)) return fail(p, "unexpected character");
    p->pos += n;
    return 0;
}

static int parse_value(parser *p, int depth, s3x_json *top, s3x_json_kind *kind, s3x_buf *text);

/* An object or array at p->pos. Members are recorded into top when it is not
 * NULL (the top level only). */
static int parse_container(parser *p, int depth, s3x_json *top) {
    if (depth > S3X_JSON_MAX_DEPTH) return fail(p, "nested too deeply");
    char open = p->s[p->pos++];
    char close = open == '{' ? '}' : ']';
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        return 0;
    }
    for (;;) {
        skip_ws(p);
        s3x_buf key = S3X_BUF_INIT, val = S3X_BUF_INIT;
        if (open == '{') {
            if (p->pos >= p->len || p->s[p->pos] != '"') return fail(p, "expected a member name");
            if (parse_string(p, top ? &key : NULL)) {
                s3x_buf_free(&key);
                return p->rc;
            }
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') {
                s3x_buf_free(&key);
                return fail(p, "expected ':'");
            }
            p->pos++;
            skip_ws(p);
        }
        s3x_json_kind k = 0;
        skip_ws(p);
        size_t vstart = p->pos;
        if (parse_value(p, depth, NULL, &k, top ? &val : NULL)) {
            s3x_buf_free(&key);
            if (val.data) s3x_wipe(val.data, val.len);
            s3x_buf_free(&val);
            return p->rc;
        }
        if (top) {
            char *kd = s3x_buf_detach(&key), *vd = NULL;
            size_t vlen = val.len;
            if (kd && (k == S3X_JSON_OBJECT || k == S3X_JSON_ARRAY)) {
                if (val.data) s3x_wipe(val.data, val.len);
                s3x_buf_free(&val);
            } else if (kd) {
                vd = s3x_buf_detach(&val);
            }
            int dup = 0;
            for (size_t i = 0; kd && i < top->n; i++)
                if (!strcmp(top->m[i].key, kd)) dup = 1;
            int grow_failed = 0;
            if (kd && !dup && top->n == top->cap) {
                size_t nc = top->cap ? top->cap * 2 : 8;
                member *nm = realloc(top->m, nc * sizeof *nm);
                if (nm) {
                    top->m = nm;
                    top->cap = nc;
                } else {
                    grow_failed = 1;
                }
            }
            if (!kd || (!vd && k != S3X_JSON_OBJECT && k != S3X_JSON_ARRAY) || dup || grow_failed) {
                free(kd);
                s3x_free_secret(vd);
                if (dup) return fail(p, "a member name given twice");
                return oom(p);
            }
            if (p->want && k == S3X_JSON_OBJECT && !strcmp(kd, p->want)) {
                p->want_start = vstart;
                p->want_end = p->pos;
            }
            top->m[top->n++] = (member){kd, vd, vlen, k};
        }
        skip_ws(p);
        if (p->pos >= p->len) return fail(p, "unterminated object or array");
        char c = p->s[p->pos++];
        if (c == close) return 0;
        if (c != ',') return fail(p, "expected ',' or the end of the object or array");
    }
}

static int parse_value(parser *p, int depth, s3x_json *top, s3x_json_kind *kind, s3x_buf *text) {
    (void)top;
    skip_ws(p);
    if (p->pos >= p->len) return fail(p, "expected a value");
    char c = p->s[p->pos];
    size_t start = p->pos;
    int rc;
    if (c == '"') {
        *kind = S3X_JSON_STRING;
        rc = parse_string(p, text);
        if (!rc && text && !text->data && s3x_buf_puts(text, "")) return oom(p);
        return rc;
    }
    if (c == '{' || c == '[') {
        *kind = c == '{' ? S3X_JSON_OBJECT : S3X_JSON_ARRAY;
        return parse_container(p, depth + 1, NULL);
    }
    if (c == 't') *kind = S3X_JSON_TRUE, rc = literal(p, "true");
    else if (c == 'f') *kind = S3X_JSON_FALSE, rc = literal(p, "false");
    else if (c == 'n') *kind = S3X_JSON_NULL, rc = literal(p, "null");
    else if (c == '-' || is_digit(c)) *kind = S3X_JSON_NUMBER, rc = parse_number(p);
    else return fail(p, "unexpected character");
    if (!rc && text && s3x_buf_append(text, p->s + start, p->pos - start)) return oom(p);
    return rc;
}

static int parse_doc(parser *pp, s3x_json **out);

int s3x_json_parse(const char *data, size_t len, const char *what, int error_code, s3x_json **out) {
    parser p = {data ? data : "", data ? len : 0, 0, what, error_code, 0, NULL, 0, 0};
    return parse_doc(&p, out);
}

int s3x_json_parse_nested(const char *data, size_t len, const char *what, int error_code, const char *member_name,
                          s3x_json **out) {
    *out = NULL;
    parser p = {data ? data : "", data ? len : 0, 0, what, error_code, 0, member_name, 0, 0};
    s3x_json *top = NULL;
    int rc = parse_doc(&p, &top);
    s3x_json_free(top);
    if (rc) return rc;
    if (p.want_end <= p.want_start)
        return s3x_seterr(error_code, "%s has no object member \"%s\"", what, member_name);
    return s3x_json_parse(p.s + p.want_start, p.want_end - p.want_start, what, error_code, out);
}

static int parse_doc(parser *pp, s3x_json **out) {
    *out = NULL;
    const char *what = pp->what;
    size_t len = pp->len;
    int error_code = pp->error_code;
    if (len > S3X_JSON_MAX_BYTES)
        return s3x_seterr(error_code, "%s is too large (%zu bytes, the limit is %u)", what, len,
                          (unsigned)S3X_JSON_MAX_BYTES);
    parser p = *pp;
    skip_ws(&p);
    if (p.pos >= p.len) return s3x_seterr(error_code, "%s is empty (expected a JSON object)", what);
    if (p.s[p.pos] != '{') return fail(&p, "expected a JSON object");
    s3x_json *j = calloc(1, sizeof *j);
    if (!j) return s3x_seterr(S3X_ENOMEM, "out of memory reading %s", what);
    if (parse_container(&p, 1, j) == 0) {
        skip_ws(&p);
        if (p.pos != p.len) fail(&p, "text after the object");
    }
    *pp = p;
    if (p.rc) {
        s3x_json_free(j);
        return p.rc;
    }
    *out = j;
    return 0;
}

const char *s3x_json_get(const s3x_json *j, const char *key, s3x_json_kind *kind) {
    if (kind) *kind = 0;
    for (size_t i = 0; j && i < j->n; i++)
        if (!strcmp(j->m[i].key, key)) {
            if (kind) *kind = j->m[i].kind;
            return j->m[i].value;
        }
    return NULL;
}

const char *s3x_json_string(const s3x_json *j, const char *key) {
    s3x_json_kind k;
    const char *v = s3x_json_get(j, key, &k);
    return k == S3X_JSON_STRING ? v : NULL;
}

size_t s3x_json_count(const s3x_json *j) { return j ? j->n : 0; }

int s3x_json_entry(const s3x_json *j, size_t i, const char **key, const char **value, s3x_json_kind *kind) {
    if (!j || i >= j->n) return -1;
    if (key) *key = j->m[i].key;
    if (value) *value = j->m[i].value;
    if (kind) *kind = j->m[i].kind;
    return 0;
}

void s3x_json_free(s3x_json *j) {
    if (!j) return;
    for (size_t i = 0; i < j->n; i++) {
        free(j->m[i].key);
        if (j->m[i].value) s3x_wipe(j->m[i].value, j->m[i].value_len);
        free(j->m[i].value);
    }
    free(j->m);
    free(j);
}

static int digits(const char *s, int n, int *out) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!is_digit(s[i])) return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

int s3x_parse_iso8601(const char *s, double *out) {
    int Y, M, D, h, m, sec;
    if (!s || strlen(s) < 20) return -1;
    if (digits(s, 4, &Y) || s[4] != '-' || digits(s + 5, 2, &M) || s[7] != '-' || digits(s + 8, 2, &D) ||
        (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || digits(s + 11, 2, &h) || s[13] != ':' ||
        digits(s + 14, 2, &m) || s[16] != ':' || digits(s + 17, 2, &sec))
        return -1;
    if (M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60) return -1;
    const char *p = s + 19;
    double frac = 0, scale = 0.1;
    if (*p == '.') {
        p++;
        if (!is_digit(*p)) return -1;
        while (is_digit(*p)) {
            frac += (*p - '0') * scale;
            scale /= 10;
            p++;
        }
    }
    int offset = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh, om;
        if (digits(p + 1, 2, &oh) || p[3] != ':' || digits(p + 4, 2, &om) || oh > 23 || om > 59) return -1;
        offset = (oh * 3600 + om * 60) * (*p == '-' ? -1 : 1);
        p += 6;
    } else {
        return -1;
    }
    if (*p) return -1;
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    tm.tm_year = Y - 1900;
    tm.tm_mon = M - 1;
    tm.tm_mday = D;
    tm.tm_hour = h;
    tm.tm_min = m;
    tm.tm_sec = sec;
    time_t t = timegm(&tm);
    if (t == (time_t)-1) return -1;
    *out = (double)t - offset + frac;
    return 0;
}
