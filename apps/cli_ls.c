/* s3xfer CLI: ls. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Continuation tokens seen in one listing, as 64-bit FNV-1a hashes in an
 * open-addressing table: a server that hands back a token it gave before
 * would have the listing go round forever (each page a request), so a
 * repeat, however long the cycle, ends it. Hashes keep the memory at 16
 * bytes a page whatever the tokens' length; a false repeat needs a 64-bit
 * collision. */
typedef struct token_set {
    uint64_t *slots; /* 0 = empty */
    size_t cap, count;
} token_set;

static uint64_t token_hash(const char *s) {
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        h ^= *p;
        h *= UINT64_C(0x100000001b3);
    }
    return h ? h : 1;
}

/* 1 when added, 0 when already there, -1 when out of memory. */
static int token_set_add(token_set *t, const char *token) {
    if (2 * (t->count + 1) > t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        uint64_t *slots = calloc(cap, sizeof *slots);
        if (!slots) return -1;
        for (size_t i = 0; i < t->cap; i++) {
            if (!t->slots[i]) continue;
            size_t j = (size_t)(t->slots[i] & (cap - 1));
            while (slots[j]) j = (j + 1) & (cap - 1);
            slots[j] = t->slots[i];
        }
        free(t->slots);
        t->slots = slots;
        t->cap = cap;
    }
    uint64_t h = token_hash(token);
    size_t j = (size_t)(h & (t->cap - 1));
    while (t->slots[j]) {
        if (t->slots[j] == h) return 0;
        j = (j + 1) & (t->cap - 1);
    }
    t->slots[j] = h;
    t->count++;
    return 1;
}

/* The server's token in a message: escaped, and cut short (a hostile one may
 * be megabytes long). */
static void print_token(FILE *f, const char *token) {
    char shown[67];
    size_t n = strlen(token);
    if (n > 64) {
        memcpy(shown, token, 60);
        memcpy(shown + 60, "...", 4);
    } else {
        memcpy(shown, token, n + 1);
    }
    fputc('\'', f);
    cli_put_escaped(f, shown);
    fputc('\'', f);
}

static void print_page(const s3x_list *l) {
    for (size_t i = 0; i < l->nprefixes; i++) {
        printf("%30s PRE ", "");
        cli_put_escaped(stdout, l->prefixes[i]);
        putchar('\n');
    }
    for (size_t i = 0; i < l->count; i++) {
        char *date = cli_escape(l->entries[i].last_modified ? l->entries[i].last_modified : "");
        printf("%-24s %12" PRId64 " ", date ? date : "?", l->entries[i].size);
        cli_put_escaped(stdout, l->entries[i].key);
        putchar('\n');
        free(date);
    }
    /* Whole pages reach the output even when a signal ends the listing. */
    fflush(stdout);
}

int cli_cmd_ls(s3x_client *c, int argc, char **argv) {
    if (argc != 1) return cli_usage_error("ls needs s3://bucket[/prefix]");
    cli_s3url u = {0};
    int isurl = cli_parse_s3(argv[0], &u);
    if (isurl < 0) return cli_usage_error("out of memory");
    if (!isurl || !*u.bucket) {
        cli_s3url_free(&u);
        return cli_usage_error("ls needs s3://bucket[/prefix]");
    }
    token_set seen = {0};
    char *token = NULL;
    int rc = 0;
    for (size_t page = 1;; page++) {
        s3x_list *l = NULL;
        if (s3x_list_objects(c, u.bucket, u.key, "/", token, 0, &l)) {
            rc = cli_fail("ls failed");
            break;
        }
        print_page(l);
        free(token);
        token = NULL;
        if (!l->is_truncated) {
            s3x_list_free(l);
            break;
        }
        /* A truncated page without a token would end the listing early and
         * silently: a partial listing must not look like a whole one. */
        if (!l->next_token || !*l->next_token) {
            fprintf(stderr, "%s: ls failed: the server said page %zu is truncated but sent no continuation token\n",
                    cli_prog, page);
            s3x_list_free(l);
            rc = 1;
            break;
        }
        int added = token_set_add(&seen, l->next_token);
        if (added <= 0) {
            if (added < 0) {
                fprintf(stderr, "%s: ls failed: out of memory\n", cli_prog);
            } else {
                fprintf(stderr, "%s: ls failed: the server sent continuation token ", cli_prog);
                print_token(stderr, l->next_token);
                fprintf(stderr, " again (page %zu); stopping instead of listing the same pages forever\n", page);
            }
            s3x_list_free(l);
            rc = 1;
            break;
        }
        token = strdup(l->next_token);
        s3x_list_free(l);
        if (!token) {
            fprintf(stderr, "%s: ls failed: out of memory\n", cli_prog);
            rc = 1;
            break;
        }
    }
    free(token);
    free(seen.slots);
    cli_s3url_free(&u);
    return rc;
}
