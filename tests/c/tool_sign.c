/* tool_sign: signs requests read from stdin with s3x_sigv4_sign, one per line,
 * for tests/python/test_sigv4_oracle.py (which compares with botocore).
 *
 * Input line: ten TAB-separated fields, each hex-encoded so any byte survives:
 *   method  raw_path  query  headers  payload_hash  amz_date  region  service  access_key  secret_key
 * raw_path is the unencoded path ("/bucket/my key"); the tool encodes it with
 * s3x_uri_encode(encode_slash=0), as the client does. query and headers are
 * lists: comma-separated "HEXNAME=HEXVALUE" items (empty field = empty list,
 * "HEXNAME=" = empty value).
 *
 * Output line, one per input line:
 *   OK <TAB> authorization <TAB> hex(canonical request) <TAB> hex(string to sign)
 *   ERR <TAB> code <TAB> message
 */
#include "buf.h"
#include "error.h"
#include "sigv4.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NFIELDS = 10 };

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decodes hex s[0..n) into a new NUL-terminated string (NULL if not hex). */
static char *unhex(const char *s, size_t n) {
    if (n % 2) return NULL;
    char *out = malloc(n / 2 + 1);
    if (!out) return NULL;
    for (size_t i = 0; i < n; i += 2) {
        int hi = hexval(s[i]), lo = hexval(s[i + 1]);
        if (hi < 0 || lo < 0) {
            free(out);
            return NULL;
        }
        out[i / 2] = (char)(hi * 16 + lo);
    }
    out[n / 2] = '\0';
    return out;
}

static void put_hex(const char *s, size_t n) {
    static const char h[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        putchar(h[c >> 4]);
        putchar(h[c & 15]);
    }
}

typedef struct kvlist {
    s3x_kv *items;
    size_t n;
} kvlist;

static void kvlist_free(kvlist *l) {
    for (size_t i = 0; i < l->n; i++) {
        free((char *)l->items[i].key);
        free((char *)l->items[i].value);
    }
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

/* Parses "K=V,K=V" (hex) into l. Returns 0 or -1. */
static int parse_list(const char *s, kvlist *l) {
    l->items = NULL;
    l->n = 0;
    if (!*s) return 0;
    size_t count = 1;
    for (const char *p = s; *p; p++)
        if (*p == ',') count++;
    l->items = calloc(count, sizeof *l->items);
    if (!l->items) return -1;
    const char *p = s;
    while (l->n < count) {
        const char *end = strchr(p, ',');
        if (!end) end = p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(end - p));
        if (!eq) return -1;
        char *k = unhex(p, (size_t)(eq - p)), *v = unhex(eq + 1, (size_t)(end - eq - 1));
        l->items[l->n].key = k;
        l->items[l->n].value = v;
        l->n++;
        if (!k || !v) return -1;
        p = *end ? end + 1 : end;
    }
    return 0;
}

static void sign_line(char *line) {
    char *field[NFIELDS];
    size_t nf = 0;
    for (char *p = line, *tab;; p = tab + 1) {
        if (nf == NFIELDS) {
            printf("ERR\tparse\ttoo many fields\n");
            return;
        }
        field[nf++] = p;
        tab = strchr(p, '\t');
        if (!tab) break;
        *tab = '\0';
    }
    if (nf != NFIELDS) {
        printf("ERR\tparse\texpected %d fields, got %zu\n", NFIELDS, nf);
        return;
    }
    char *s[NFIELDS] = {0};
    kvlist q = {NULL, 0}, h = {NULL, 0};
    s3x_buf path = S3X_BUF_INIT;
    s3x_sigv4_output out;
    memset(&out, 0, sizeof out);
    int bad = 0;
    for (size_t i = 0; i < NFIELDS; i++) {
        if (i == 2 || i == 3) continue;
        if (!(s[i] = unhex(field[i], strlen(field[i])))) bad = 1;
    }
    if (bad || parse_list(field[2], &q) || parse_list(field[3], &h)) {
        printf("ERR\tparse\tbad hex or list field\n");
        goto done;
    }
    if (s3x_uri_encode(&path, s[1], strlen(s[1]), 0)) {
        printf("ERR\tnomem\tpath\n");
        goto done;
    }
    s3x_sigv4_input in;
    memset(&in, 0, sizeof in);
    in.method = s[0];
    in.encoded_path = path.data;
    in.query = q.items;
    in.nquery = q.n;
    in.headers = h.items;
    in.nheaders = h.n;
    in.payload_hash = s[4];
    in.amz_date = s[5];
    in.region = s[6];
    in.service = s[7];
    in.access_key = s[8];
    in.secret_key = s[9];
    int rc = s3x_sigv4_sign(&in, &out);
    if (rc) {
        printf("ERR\t%d\t%s\n", rc, s3x_error_last()->message);
        goto done;
    }
    printf("OK\t%s\t", out.authorization.data);
    put_hex(out.canonical_request.data, out.canonical_request.len);
    putchar('\t');
    put_hex(out.string_to_sign.data, out.string_to_sign.len);
    putchar('\n');
done:
    for (size_t i = 0; i < NFIELDS; i++) free(s[i]);
    kvlist_free(&q);
    kvlist_free(&h);
    s3x_buf_free(&path);
    s3x_sigv4_output_free(&out);
}

int main(void) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, stdin)) >= 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
        if (n == 0) continue;
        sign_line(line);
    }
    free(line);
    s3x_error_clear();
    return ferror(stdout) ? 1 : 0;
}
