/* s3xfer CLI: making server-supplied text safe to print. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"

size_t cli_utf8_seq(const unsigned char *p, uint32_t *cp) {
    unsigned c = p[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c < 0xC2) return 0;
    if (c < 0xE0) {
        if ((p[1] & 0xC0) != 0x80) return 0;
        *cp = ((uint32_t)(c & 0x1F) << 6) | (p[1] & 0x3F);
        return 2;
    }
    if (c < 0xF0) {
        if ((p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return 0;
        uint32_t v = ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
        if (v < 0x800 || (v >= 0xD800 && v <= 0xDFFF)) return 0;
        *cp = v;
        return 3;
    }
    if (c < 0xF5) {
        if ((p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) return 0;
        uint32_t v = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(p[1] & 0x3F) << 12) |
                     ((uint32_t)(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
        if (v < 0x10000 || v > 0x10FFFF) return 0;
        *cp = v;
        return 4;
    }
    return 0;
}

/* Characters a terminal acts on rather than shows: C1 controls (8-bit CSI
 * U+009B starts escape sequences on some terminals) and the bidirectional
 * embedding, override and isolate controls, which reorder what follows them
 * on the line so that a listing shows text that is not there. */
static int hidden_code_point(uint32_t cp) {
    return (cp >= 0x80 && cp <= 0x9F) || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

/* Escapes s into out (when not NULL); returns the escaped length. Every
 * escape stands for bytes of the original, so the escaping can be undone:
 * \\ is a backslash, \n \r \t those controls, \xHH any other byte. */
static size_t escape_into(char *out, const char *s) {
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        uint32_t cp = 0;
        size_t len = cli_utf8_seq(p, &cp);
        const char *named = NULL;
        if (len == 1) {
            if (cp == '\\') named = "\\\\";
            else if (cp == '\n') named = "\\n";
            else if (cp == '\r') named = "\\r";
            else if (cp == '\t') named = "\\t";
            else if (cp >= 0x20 && cp != 0x7F) {
                if (out) out[n] = (char)cp;
                n++;
                p++;
                continue;
            }
        } else if (len > 1 && !hidden_code_point(cp)) {
            if (out) memcpy(out + n, p, len);
            n += len;
            p += len;
            continue;
        }
        if (named) {
            if (out) memcpy(out + n, named, 2);
            n += 2;
            p++;
            continue;
        }
        /* A control, a hidden character (each of its bytes) or a byte that
         * is not UTF-8. */
        if (len == 0) len = 1;
        for (size_t i = 0; i < len; i++, p++) {
            if (out) {
                out[n] = '\\';
                out[n + 1] = 'x';
                out[n + 2] = hex[*p >> 4];
                out[n + 3] = hex[*p & 15];
            }
            n += 4;
        }
    }
    return n;
}

char *cli_escape(const char *s) {
    if (!s) s = "";
    size_t n = escape_into(NULL, s);
    char *out = malloc(n + 1);
    if (!out) return NULL;
    escape_into(out, s);
    out[n] = '\0';
    return out;
}

void cli_put_escaped(FILE *f, const char *s) {
    char *e = cli_escape(s);
    fputs(e ? e : "(out of memory)", f);
    free(e);
}

/* The authority of a URL ends at its path, query or fragment, and in running
 * text at whitespace or a quote. */
static size_t authority_len(const char *a) { return strcspn(a, "/?#'\"<> \t\r\n"); }

char *cli_hide_userinfo(const char *s) {
    if (!s) s = "";
    size_t len = strlen(s);
    /* Each "://" (3 bytes) may gain at most 3 ("***" for an empty userinfo). */
    char *out = malloc(2 * len + 1);
    if (!out) return NULL;
    size_t n = 0;
    const char *p = s;
    for (;;) {
        const char *sep = strstr(p, "://");
        if (!sep) break;
        const char *auth = sep + 3;
        size_t alen = authority_len(auth);
        const char *at = NULL;
        /* Endpoints are http(s) URLs; "s3://bucket/key" in a message is left
         * exactly as it is. */
        size_t before = (size_t)(sep - s);
        int web = (before >= 4 && !strncasecmp(sep - 4, "http", 4)) ||
                  (before >= 5 && !strncasecmp(sep - 5, "https", 5));
        for (size_t i = 0; web && i < alen; i++)
            if (auth[i] == '@') at = auth + i;
        size_t keep = (size_t)(auth - p);
        memcpy(out + n, p, keep);
        n += keep;
        if (at) {
            memcpy(out + n, "***", 3);
            n += 3;
            p = at;
        } else {
            p = auth;
        }
    }
    size_t rest = strlen(p);
    memcpy(out + n, p, rest);
    out[n + rest] = '\0';
    return out;
}

int cli_fail(const char *what) {
    const s3x_error *e = s3x_error_last();
    const char *msg = (e->message && *e->message) ? e->message : s3x_strerror(e->code);
    char *hidden = cli_hide_userinfo(msg);
    fprintf(stderr, "%s: %s: ", cli_prog, what);
    cli_put_escaped(stderr, hidden ? hidden : msg);
    fputc('\n', stderr);
    free(hidden);
    return 1;
}

int cli_usage_error(const char *msg) {
    fprintf(stderr, "%s: %s (see %s --help)\n", cli_prog, msg, cli_prog);
    return 2;
}
