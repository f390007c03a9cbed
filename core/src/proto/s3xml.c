/* S3 XML bodies with libxml2: responses are parsed into plain structs and
 * request bodies are built by hand (they are small and fixed in shape).
 *
 * Hardening: the network is never used (XML_PARSE_NONET), entities are never
 * substituted (no XML_PARSE_NOENT), no DTD is loaded, and the parse stops at
 * the first <!DOCTYPE ...>, before any entity declaration is read: S3 never
 * sends a DTD, so one is either a hostile or a broken server. libxml2 must
 * print nothing: errors go to handlers that record them, both on the parser
 * context and, for the calls that bypass it, in the calling thread's global
 * handlers (thread-local in libxml2 2.9 builds with thread support), which are
 * restored afterwards. */
#include "s3xml.h"
#include "buf.h"
#include "error.h"
#include "sigv4.h" /* s3x_utf8_decode */

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>

#if LIBXML_VERSION >= 21200
typedef const xmlError *s3x_xml_errp;
#else
typedef xmlErrorPtr s3x_xml_errp;
#endif

/* ---- parsing core ---- */

typedef struct parse_state {
    int have_error;
    int code, line;
    int dtd;         /* a DOCTYPE was seen */
    char msg[240];
} parse_state;

static _Thread_local parse_state *tl_state;

static pthread_once_t g_init_once = PTHREAD_ONCE_INIT;

static void init_once(void) { xmlInitParser(); }

void s3x_xml_init(void) { pthread_once(&g_init_once, init_once); }

static void record_error(s3x_xml_errp err) {
    parse_state *st = tl_state;
    if (!st || !err || st->have_error || err->level < XML_ERR_ERROR) return;
    st->have_error = 1;
    st->code = err->code;
    st->line = err->line;
    const char *m = err->message ? err->message : "unknown error";
    size_t n = strlen(m);
    while (n && (m[n - 1] == '\n' || m[n - 1] == '\r' || m[n - 1] == ' ')) n--;
    if (n >= sizeof st->msg) n = sizeof st->msg - 1;
    memcpy(st->msg, m, n);
    st->msg[n] = '\0';
}

static void ctxt_error_handler(void *user, s3x_xml_errp err) {
    (void)user;
    record_error(err);
}

static void global_error_handler(void *user, s3x_xml_errp err) {
    (void)user;
    record_error(err);
}

static void quiet_generic_handler(void *ctx, const char *msg, ...) {
    (void)ctx;
    (void)msg;
}

/* SAX hook: called when <!DOCTYPE name ...> has been read, before its
 * internal subset. Stopping here means no entity is ever declared. */
static void on_internal_subset(void *user, const xmlChar *name, const xmlChar *ext_id, const xmlChar *sys_id) {
    (void)name;
    (void)ext_id;
    (void)sys_id;
    if (tl_state) tl_state->dtd = 1;
    xmlStopParser((xmlParserCtxtPtr)user);
}

#define PARSE_OPTIONS \
    (XML_PARSE_NONET | XML_PARSE_NOBLANKS | XML_PARSE_NOCDATA | XML_PARSE_NOERROR | XML_PARSE_NOWARNING)

/* While libxml2 runs: errors recorded into a parse_state, and the calling
 * thread's global handlers silenced (restored by quiet_end). */
typedef struct quiet_scope {
    parse_state *prev_state;
    xmlStructuredErrorFunc serror;
    void *sctx;
    xmlGenericErrorFunc generic;
    void *gctx;
} quiet_scope;

static void quiet_begin(quiet_scope *q, parse_state *st) {
    q->prev_state = tl_state;
    tl_state = st;
    q->serror = xmlStructuredError;
    q->sctx = xmlStructuredErrorContext;
    q->generic = xmlGenericError;
    q->gctx = xmlGenericErrorContext;
    xmlSetStructuredErrorFunc(NULL, global_error_handler);
    xmlSetGenericErrorFunc(NULL, quiet_generic_handler);
}

static void quiet_end(quiet_scope *q) {
    xmlSetStructuredErrorFunc(q->sctx, q->serror);
    xmlSetGenericErrorFunc(q->gctx, q->generic);
    tl_state = q->prev_state;
}

/* Called after a failed parse, to tell "cut short" from "broken": the push
 * parser is fed every byte without being told the input has ended. If it
 * finds no error, the bytes are a prefix of a document that might have been
 * well-formed, so the body was truncated. */
static int looks_truncated(const char *xml, size_t len) {
    if (!memchr(xml, '<', len)) return 0; /* not even the start of markup */
    xmlParserCtxtPtr c = xmlCreatePushParserCtxt(NULL, NULL, NULL, 0, NULL);
    if (!c) return 0;
    c->sax->serror = ctxt_error_handler;
    c->sax->internalSubset = on_internal_subset;
    c->sax->externalSubset = NULL;
    xmlCtxtUseOptions(c, PARSE_OPTIONS);
    parse_state st;
    memset(&st, 0, sizeof st);
    quiet_scope q;
    quiet_begin(&q, &st);
    int rc = xmlParseChunk(c, xml, (int)len, 0);
    quiet_end(&q);
    int truncated = rc == 0 && !st.have_error && !st.dtd;
    if (c->myDoc) xmlFreeDoc(c->myDoc);
    c->myDoc = NULL;
    xmlFreeParserCtxt(c);
    return truncated;
}

/* 1 if the document's first significant byte could not start XML at all. */
static int only_blanks(const char *s, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (!(s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) return 0;
    return 1;
}

/* Parses xml into *doc. what names the expected response ("ListPartsResult").
 * When quiet, no thread error is set (for s3x_xml_is_error). */
static int parse_doc(const char *xml, size_t len, const char *what, int quiet, xmlDocPtr *doc) {
    *doc = NULL;
    s3x_xml_init();
    if (len > S3X_XML_MAX_BYTES)
        return quiet ? S3X_EXML
                     : s3x_seterr(S3X_EXML, "XML in %s response is too large (%zu bytes, the limit is %u), refused",
                                  what, len, (unsigned)S3X_XML_MAX_BYTES);
    if (!xml || len == 0 || only_blanks(xml, len))
        return quiet ? S3X_EXML : s3x_seterr(S3X_EXML, "empty XML body in %s response", what);

    xmlParserCtxtPtr ctxt = xmlNewParserCtxt();
    if (!ctxt) return quiet ? S3X_ENOMEM : s3x_seterr(S3X_ENOMEM, "out of memory creating the XML parser");
    ctxt->sax->serror = ctxt_error_handler;
    ctxt->sax->internalSubset = on_internal_subset;
    ctxt->sax->externalSubset = NULL;

    parse_state st;
    memset(&st, 0, sizeof st);
    quiet_scope q;
    quiet_begin(&q, &st);
    xmlDocPtr d = xmlCtxtReadMemory(ctxt, xml, (int)len, NULL, NULL, PARSE_OPTIONS);
    int well_formed = ctxt->wellFormed;
    quiet_end(&q);
    xmlFreeParserCtxt(ctxt);

    int rc = 0;
    if (st.dtd || (d && (d->intSubset || d->extSubset))) {
        rc = quiet ? S3X_EXML : s3x_seterr(S3X_EXML, "XML response contains a DTD, refused (in %s response)", what);
    } else if (!d || !well_formed || st.have_error) {
        if (quiet) {
            rc = S3X_EXML;
        } else if (st.have_error && st.code == XML_ERR_NO_MEMORY) {
            rc = s3x_seterr(S3X_ENOMEM, "out of memory parsing XML in %s response", what);
        } else if (st.have_error) {
            int truncated = looks_truncated(xml, len);
            rc = s3x_seterr(S3X_EXML, "%s XML in %s response: %s, line %d",
                            truncated ? "truncated" : "malformed", what, st.msg, st.line);
        } else {
            rc = s3x_seterr(S3X_EXML, "malformed XML in %s response", what);
        }
    } else if (!xmlDocGetRootElement(d)) {
        rc = quiet ? S3X_EXML : s3x_seterr(S3X_EXML, "truncated XML in %s response: no root element", what);
    }
    if (rc) {
        if (d) xmlFreeDoc(d);
        return rc;
    }
    *doc = d;
    return 0;
}

static int name_is(const xmlNode *n, const char *name) {
    return n && n->type == XML_ELEMENT_NODE && n->name && strcmp((const char *)n->name, name) == 0;
}

static const xmlNode *child_el(const xmlNode *parent, const char *name) {
    for (const xmlNode *c = parent ? parent->children : NULL; c; c = c->next)
        if (name_is(c, name)) return c;
    return NULL;
}

static size_t count_children(const xmlNode *parent, const char *name) {
    size_t n = 0;
    for (const xmlNode *c = parent->children; c; c = c->next)
        if (name_is(c, name)) n++;
    return n;
}

/* The text of an element (its text and CDATA children, concatenated), as a
 * malloc'd string; "" for an empty element. NULL only when out of memory. */
static char *el_text(const xmlNode *el) {
    const xmlNode *only = NULL;
    size_t n = 0, parts = 0;
    for (const xmlNode *c = el->children; c; c = c->next) {
        if ((c->type == XML_TEXT_NODE || c->type == XML_CDATA_SECTION_NODE) && c->content) {
            n += strlen((const char *)c->content);
            only = c;
            parts++;
        }
    }
    char *s = malloc(n + 1);
    if (!s) return NULL;
    if (parts == 1) {
        memcpy(s, only->content, n);
    } else {
        size_t off = 0;
        for (const xmlNode *c = el->children; c; c = c->next) {
            if ((c->type == XML_TEXT_NODE || c->type == XML_CDATA_SECTION_NODE) && c->content) {
                size_t l = strlen((const char *)c->content);
                memcpy(s + off, c->content, l);
                off += l;
            }
        }
    }
    s[n] = '\0';
    return s;
}

/* Result of looking up a child element's text. */
enum { GOT = 0, ABSENT = 1 };

/* *out = malloc'd text of the first child named name, or NULL if there is
 * none (returns ABSENT). Returns S3X_ENOMEM on allocation failure. */
static int get_text(const xmlNode *parent, const char *name, char **out) {
    *out = NULL;
    const xmlNode *el = child_el(parent, name);
    if (!el) return ABSENT;
    *out = el_text(el);
    return *out ? GOT : s3x_seterr(S3X_ENOMEM, "out of memory reading <%s>", name);
}

/* Like get_text, but an absent element gives "" (never NULL on success). */
static int get_text_or_empty(const xmlNode *parent, const char *name, char **out) {
    int rc = get_text(parent, name, out);
    if (rc != ABSENT) return rc;
    *out = malloc(1);
    if (!*out) return s3x_seterr(S3X_ENOMEM, "out of memory");
    (*out)[0] = '\0';
    return 0;
}

/* Like get_text, but an absent or empty element gives NULL. */
static int get_text_or_null(const xmlNode *parent, const char *name, char **out) {
    int rc = get_text(parent, name, out);
    if (rc == ABSENT) return 0;
    if (rc) return rc;
    if (!**out) {
        free(*out);
        *out = NULL;
    }
    return 0;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* Strict decimal integer in [lo, hi], surrounding blanks allowed. */
static int parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    while (is_space(*s)) s++;
    const char *p = s;
    if (*p == '-') p++;
    if (!(*p >= '0' && *p <= '9')) return -1;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE || end == s) return -1;
    while (is_space(*end)) end++;
    if (*end) return -1;
    if (v < lo || v > hi) return -1;
    *out = (int64_t)v;
    return 0;
}

static int parse_bool(const char *s, int *out) {
    while (is_space(*s)) s++;
    size_t n = strlen(s);
    while (n && is_space(s[n - 1])) n--;
    if (n == 4 && strncasecmp(s, "true", 4) == 0) *out = 1;
    else if (n == 5 && strncasecmp(s, "false", 5) == 0) *out = 0;
    else return -1;
    return 0;
}

/* Reads an integer child; ABSENT when there is none (or, if empty_is_absent,
 * when it is empty). ctx names the element for the message ("<Part> 3"). */
static int get_int(const xmlNode *parent, const char *name, int64_t lo, int64_t hi, int empty_is_absent,
                   const char *what, const char *ctx, int64_t *out) {
    char *t = NULL;
    int rc = get_text(parent, name, &t);
    if (rc) return rc;
    if (empty_is_absent && !*t) {
        free(t);
        return ABSENT;
    }
    if (parse_int(t, lo, hi, out)) {
        rc = s3x_seterr(S3X_EXML, "invalid <%s> \"%.64s\"%s%s in %s response: expected an integer in [%lld, %lld]",
                        name, t, ctx ? " in " : "", ctx ? ctx : "", what, (long long)lo, (long long)hi);
    }
    free(t);
    return rc;
}

static int get_bool(const xmlNode *parent, const char *name, const char *what, int *out) {
    char *t = NULL;
    int rc = get_text(parent, name, &t);
    if (rc) return rc;
    if (parse_bool(t, out))
        rc = s3x_seterr(S3X_EXML, "invalid <%s> \"%.64s\" in %s response: expected true or false", name, t, what);
    free(t);
    return rc;
}

static int missing(const char *name, const char *ctx, const char *what) {
    return s3x_seterr(S3X_EXML, "missing <%s>%s%s in %s response", name, ctx ? " in " : "", ctx ? ctx : "", what);
}

/* Parses and checks the root element. When the server answered with an S3
 * <Error> document instead, the message carries its code and text. */
/* A root element some servers use instead of the documented one: `rclone
 * serve s3` (v1.75) answers CreateMultipartUpload with
 * <InitiateMultipartUpload>; SDKs that read the children only accept it. */
static const char *root_alias(const char *what) {
    return strcmp(what, "InitiateMultipartUploadResult") == 0 ? "InitiateMultipartUpload" : NULL;
}

static int parse_root(const char *xml, size_t len, const char *what, xmlDocPtr *doc, const xmlNode **root) {
    int rc = parse_doc(xml, len, what, 0, doc);
    if (rc) return rc;
    const xmlNode *r = xmlDocGetRootElement(*doc);
    const char *alias = root_alias(what);
    if (name_is(r, what) || (alias && name_is(r, alias))) {
        *root = r;
        return 0;
    }
    if (name_is(r, "Error")) {
        /* Best effort: a missing or unreadable Code/Message just stays NULL. */
        char *code = NULL, *msg = NULL;
        if (get_text(r, "Code", &code) != GOT) code = NULL;
        if (get_text(r, "Message", &msg) != GOT) msg = NULL;
        rc = s3x_seterr(S3X_EXML, "expected <%s> but the response is an S3 error: %s%s%s", what,
                        code ? code : "(no code)", msg ? ": " : "", msg ? msg : "");
        free(code);
        free(msg);
    } else {
        rc = s3x_seterr(S3X_EXML, "unexpected root element <%.64s> in %s response", (const char *)r->name, what);
    }
    xmlFreeDoc(*doc);
    *doc = NULL;
    return rc;
}

/* ---- Error ---- */

void s3x_xml_error_free(s3x_xml_error *e) {
    if (!e) return;
    free(e->code);
    free(e->message);
    free(e->request_id);
    free(e->resource);
    memset(e, 0, sizeof *e);
}

int s3x_xml_parse_error(const char *xml, size_t len, s3x_xml_error *out) {
    xmlDocPtr doc;
    const xmlNode *root;
    int rc = parse_root(xml, len, "Error", &doc, &root);
    if (rc) return rc;
    if ((rc = get_text_or_empty(root, "Code", &out->code)) || (rc = get_text_or_empty(root, "Message", &out->message)) ||
        (rc = get_text_or_empty(root, "RequestId", &out->request_id)) ||
        (rc = get_text_or_empty(root, "Resource", &out->resource)))
        s3x_xml_error_free(out);
    xmlFreeDoc(doc);
    return rc;
}

int s3x_xml_is_error(const char *xml, size_t len) {
    xmlDocPtr doc;
    if (parse_doc(xml, len, "Error", 1, &doc)) return 0;
    int is = name_is(xmlDocGetRootElement(doc), "Error");
    xmlFreeDoc(doc);
    return is;
}

/* ---- InitiateMultipartUploadResult ---- */

int s3x_xml_parse_initiate(const char *xml, size_t len, char **upload_id) {
    static const char what[] = "InitiateMultipartUploadResult";
    *upload_id = NULL;
    xmlDocPtr doc;
    const xmlNode *root;
    int rc = parse_root(xml, len, what, &doc, &root);
    if (rc) return rc;
    rc = get_text(root, "UploadId", upload_id);
    if (rc == ABSENT) rc = missing("UploadId", NULL, what);
    else if (rc == 0 && !**upload_id) rc = s3x_seterr(S3X_EXML, "empty <UploadId> in %s response", what);
    if (rc) {
        free(*upload_id);
        *upload_id = NULL;
    }
    xmlFreeDoc(doc);
    return rc;
}

/* ---- CompleteMultipartUploadResult ---- */

void s3x_xml_complete_free(s3x_xml_complete *c) {
    if (!c) return;
    free(c->location);
    free(c->bucket);
    free(c->key);
    free(c->etag);
    memset(c, 0, sizeof *c);
}

int s3x_xml_parse_complete(const char *xml, size_t len, s3x_xml_complete *out) {
    static const char what[] = "CompleteMultipartUploadResult";
    xmlDocPtr doc;
    const xmlNode *root;
    int rc = parse_root(xml, len, what, &doc, &root);
    if (rc) return rc;
    rc = get_text(root, "ETag", &out->etag);
    if (rc == ABSENT) rc = missing("ETag", NULL, what);
    else if (rc == 0 && !*out->etag) rc = s3x_seterr(S3X_EXML, "empty <ETag> in %s response", what);
    if (!rc && !(rc = get_text_or_empty(root, "Location", &out->location)) &&
        !(rc = get_text_or_empty(root, "Bucket", &out->bucket)))
        rc = get_text_or_empty(root, "Key", &out->key);
    if (rc) s3x_xml_complete_free(out);
    xmlFreeDoc(doc);
    return rc;
}

/* ---- ListBucketResult (ListObjectsV2) ---- */

void s3x_xml_list_objects_free(s3x_xml_list_objects *l) {
    if (!l) return;
    for (size_t i = 0; i < l->nobjects; i++) {
        free(l->objects[i].key);
        free(l->objects[i].etag);
        free(l->objects[i].last_modified);
        free(l->objects[i].storage_class);
    }
    free(l->objects);
    for (size_t i = 0; i < l->nprefixes; i++) free(l->common_prefixes[i]);
    free(l->common_prefixes);
    free(l->next_continuation_token);
    memset(l, 0, sizeof *l);
}

int s3x_xml_parse_list_objects(const char *xml, size_t len, s3x_xml_list_objects *out) {
    static const char what[] = "ListBucketResult";
    xmlDocPtr doc;
    const xmlNode *root;
    int rc = parse_root(xml, len, what, &doc, &root);
    if (rc) return rc;
    char ctx[48];
    size_t no = count_children(root, "Contents"), np = count_children(root, "CommonPrefixes");
    if ((no && !(out->objects = calloc(no, sizeof *out->objects))) ||
        (np && !(out->common_prefixes = calloc(np, sizeof *out->common_prefixes)))) {
        rc = s3x_seterr(S3X_ENOMEM, "out of memory for %zu objects in %s response", no + np, what);
        goto done;
    }
    out->nobjects = no;
    out->nprefixes = np;
    size_t io = 0, ip = 0;
    for (const xmlNode *c = root->children; c; c = c->next) {
        if (name_is(c, "Contents")) {
            s3x_xml_object *o = &out->objects[io++];
            snprintf(ctx, sizeof ctx, "<Contents> %zu", io);
            rc = get_text(c, "Key", &o->key);
            if (rc == ABSENT) rc = missing("Key", ctx, what);
            if (rc) goto done;
            rc = get_int(c, "Size", 0, INT64_MAX, 0, what, ctx, &o->size);
            if (rc == ABSENT) rc = missing("Size", ctx, what);
            if (rc) goto done;
            if ((rc = get_text_or_empty(c, "ETag", &o->etag)) ||
                (rc = get_text_or_empty(c, "LastModified", &o->last_modified)) ||
                (rc = get_text_or_empty(c, "StorageClass", &o->storage_class)))
                goto done;
        } else if (name_is(c, "CommonPrefixes")) {
            snprintf(ctx, sizeof ctx, "<CommonPrefixes> %zu", ip + 1);
            rc = get_text(c, "Prefix", &out->common_prefixes[ip++]);
            if (rc == ABSENT) rc = missing("Prefix", ctx, what);
            if (rc) goto done;
        }
    }
    rc = get_bool(root, "IsTruncated", what, &out->is_truncated);
    if (rc == ABSENT) {
        out->is_truncated = 0;
        rc = 0;
    }
    if (rc || (rc = get_text_or_null(root, "NextContinuationToken", &out->next_continuation_token))) goto done;
    if (out->is_truncated && !out->next_continuation_token) {
        rc = s3x_seterr(S3X_EXML, "<IsTruncated> is true but <NextContinuationToken> is missing in %s response", what);
        goto done;
    }
    rc = get_int(root, "KeyCount", 0, INT64_MAX, 0, what, NULL, &out->key_count);
    if (rc == ABSENT) {
        out->key_count = (int64_t)(no + np);
        rc = 0;
    }
done:
    if (rc) s3x_xml_list_objects_free(out);
    xmlFreeDoc(doc);
    return rc;
}

/* ---- ListPartsResult ---- */

void s3x_xml_list_parts_free(s3x_xml_list_parts *l) {
    if (!l) return;
    for (size_t i = 0; i < l->nparts; i++) {
        free(l->parts[i].etag);
        free(l->parts[i].last_modified);
    }
    free(l->parts);
    memset(l, 0, sizeof *l);
}

int s3x_xml_parse_list_parts(const char *xml, size_t len, s3x_xml_list_parts *out) {
    static const char what[] = "ListPartsResult";
    xmlDocPtr doc;
    const xmlNode *root;
    int rc = parse_root(xml, len, what, &doc, &root);
    if (rc) return rc;
    char ctx[48];
    int64_t v;
    size_t n = count_children(root, "Part");
    if (n && !(out->parts = calloc(n, sizeof *out->parts))) {
        rc = s3x_seterr(S3X_ENOMEM, "out of memory for %zu parts in %s response", n, what);
        goto done;
    }
    out->nparts = n;
    size_t i = 0;
    for (const xmlNode *c = root->children; c; c = c->next) {
        if (!name_is(c, "Part")) continue;
        s3x_xml_part *p = &out->parts[i++];
        snprintf(ctx, sizeof ctx, "<Part> %zu", i);
        rc = get_int(c, "PartNumber", 1, 10000, 0, what, ctx, &v);
        if (rc == ABSENT) rc = missing("PartNumber", ctx, what);
        if (rc) goto done;
        p->part_number = (int)v;
        rc = get_text(c, "ETag", &p->etag);
        if (rc == ABSENT) rc = missing("ETag", ctx, what);
        if (rc) goto done;
        rc = get_int(c, "Size", 0, INT64_MAX, 0, what, ctx, &p->size);
        if (rc == ABSENT) rc = missing("Size", ctx, what);
        if (rc) goto done;
        if ((rc = get_text_or_empty(c, "LastModified", &p->last_modified))) goto done;
    }
    rc = get_bool(root, "IsTruncated", what, &out->is_truncated);
    if (rc == ABSENT) {
        out->is_truncated = 0;
        rc = 0;
    }
    if (rc) goto done;
    rc = get_int(root, "NextPartNumberMarker", 0, 10000, 1, what, NULL, &v);
    if (rc == ABSENT) {
        v = 0;
        rc = 0;
    }
    if (rc) goto done;
    out->next_part_number_marker = (int)v;
    if (out->is_truncated && v == 0)
        rc = s3x_seterr(S3X_EXML, "<IsTruncated> is true but <NextPartNumberMarker> is missing in %s response", what);
done:
    if (rc) s3x_xml_list_parts_free(out);
    xmlFreeDoc(doc);
    return rc;
}

/* ---- ListMultipartUploadsResult ---- */

void s3x_xml_list_uploads_free(s3x_xml_list_uploads *l) {
    if (!l) return;
    for (size_t i = 0; i < l->nuploads; i++) {
        free(l->uploads[i].key);
        free(l->uploads[i].upload_id);
        free(l->uploads[i].initiated);
    }
    free(l->uploads);
    free(l->next_key_marker);
    free(l->next_upload_id_marker);
    memset(l, 0, sizeof *l);
}

int s3x_xml_parse_list_uploads(const char *xml, size_t len, s3x_xml_list_uploads *out) {
    static const char what[] = "ListMultipartUploadsResult";
    xmlDocPtr doc;
    const xmlNode *root;
    int rc = parse_root(xml, len, what, &doc, &root);
    if (rc) return rc;
    char ctx[48];
    size_t n = count_children(root, "Upload");
    if (n && !(out->uploads = calloc(n, sizeof *out->uploads))) {
        rc = s3x_seterr(S3X_ENOMEM, "out of memory for %zu uploads in %s response", n, what);
        goto done;
    }
    out->nuploads = n;
    size_t i = 0;
    for (const xmlNode *c = root->children; c; c = c->next) {
        if (!name_is(c, "Upload")) continue;
        s3x_xml_upload *u = &out->uploads[i++];
        snprintf(ctx, sizeof ctx, "<Upload> %zu", i);
        rc = get_text(c, "Key", &u->key);
        if (rc == ABSENT) rc = missing("Key", ctx, what);
        if (rc) goto done;
        rc = get_text(c, "UploadId", &u->upload_id);
        if (rc == ABSENT) rc = missing("UploadId", ctx, what);
        if (rc) goto done;
        if ((rc = get_text_or_empty(c, "Initiated", &u->initiated))) goto done;
    }
    rc = get_bool(root, "IsTruncated", what, &out->is_truncated);
    if (rc == ABSENT) {
        out->is_truncated = 0;
        rc = 0;
    }
    if (rc || (rc = get_text_or_null(root, "NextKeyMarker", &out->next_key_marker)) ||
        (rc = get_text_or_null(root, "NextUploadIdMarker", &out->next_upload_id_marker)))
        goto done;
    if (out->is_truncated && !out->next_key_marker)
        rc = s3x_seterr(S3X_EXML, "<IsTruncated> is true but <NextKeyMarker> is missing in %s response", what);
done:
    if (rc) s3x_xml_list_uploads_free(out);
    xmlFreeDoc(doc);
    return rc;
}

/* ---- request bodies ---- */

#define S3_XMLNS "http://s3.amazonaws.com/doc/2006-03-01/"

/* Appends s XML-escaped, or refuses it when XML 1.0 cannot carry it at all,
 * not even as a character reference: bytes that are not UTF-8, C0 controls
 * other than tab, LF and CR, and U+FFFE/U+FFFF (surrogates are not UTF-8).
 * Refusing is the only choice: dropping or replacing a character would send
 * a different ETag, which S3 would refuse later with a vaguer message. An
 * S3 ETag is ASCII, so such a value means a broken server or caller. field
 * names the value in the message ("ETag of part 3"). */
static int append_escaped(s3x_buf *b, const char *s, const char *field) {
    const char *run = s;
    for (const char *p = s;; p++) {
        unsigned char c = (unsigned char)*p;
        const char *rep = NULL;
        switch (c) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&apos;"; break;
        case '\r': rep = "&#13;"; break; /* a literal CR would be read back as LF */
        default:
            if (c && c < 0x20 && c != '\t' && c != '\n')
                return s3x_seterr(S3X_EINVAL, "%s contains control character 0x%02x at byte %zu, which XML cannot carry",
                                  field, c, (size_t)(p - s));
            if (c >= 0x80) {
                uint32_t cp;
                size_t len = s3x_utf8_decode(p, strnlen(p, 4), &cp);
                if (!len)
                    return s3x_seterr(S3X_EINVAL, "%s is not UTF-8 text (byte 0x%02x at byte %zu), which XML cannot carry",
                                      field, c, (size_t)(p - s));
                if (cp == 0xfffe || cp == 0xffff)
                    return s3x_seterr(S3X_EINVAL, "%s contains U+%04X at byte %zu, which XML 1.0 does not allow", field,
                                      (unsigned)cp, (size_t)(p - s));
                p += len - 1; /* the whole character is copied with its run */
            }
        }
        if (!rep && c) continue;
        if (p > run && s3x_buf_append(b, run, (size_t)(p - run))) return S3X_ENOMEM;
        if (!c) return 0;
        if (s3x_buf_puts(b, rep)) return S3X_ENOMEM;
        run = p + 1;
    }
}

static int valid_checksum_name(const char *n) {
    static const char *const names[] = {"ChecksumCRC32", "ChecksumCRC32C", "ChecksumSHA1", "ChecksumSHA256",
                                        "ChecksumCRC64NVME"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(n, names[i]) == 0) return 1;
    return 0;
}

int s3x_xml_build_complete(const s3x_complete_part *parts, size_t nparts, const char *checksum_name, char **out,
                           size_t *out_len) {
    if (!out || !out_len) return s3x_seterr(S3X_EINVAL, "CompleteMultipartUpload body: no output pointer");
    *out = NULL;
    *out_len = 0;
    if (nparts == 0 || !parts) return s3x_seterr(S3X_EINVAL, "CompleteMultipartUpload body: no parts");
    if (nparts > 10000)
        return s3x_seterr(S3X_EINVAL, "CompleteMultipartUpload body: %zu parts, S3 allows at most 10000", nparts);
    if (checksum_name && !valid_checksum_name(checksum_name))
        return s3x_seterr(S3X_EINVAL, "CompleteMultipartUpload body: unknown checksum element \"%.64s\"", checksum_name);
    s3x_buf b = S3X_BUF_INIT;
    int rc = 0;
    if (s3x_buf_reserve(&b, 96 + nparts * (64 + (checksum_name ? 2 * strlen(checksum_name) + 64 : 0)))) goto nomem;
    if (s3x_buf_puts(&b, "<CompleteMultipartUpload xmlns=\"" S3_XMLNS "\">")) goto nomem;
    for (size_t i = 0; i < nparts; i++) {
        const s3x_complete_part *p = &parts[i];
        if (p->part_number < 1 || p->part_number > 10000) {
            rc = s3x_seterr(S3X_EINVAL, "CompleteMultipartUpload body: part number %d out of range [1, 10000]",
                            p->part_number);
            goto fail;
        }
        if (i && p->part_number <= parts[i - 1].part_number) {
            rc = s3x_seterr(S3X_EINVAL, "CompleteMultipartUpload body: part numbers must ascend (%d after %d)",
                            p->part_number, parts[i - 1].part_number);
            goto fail;
        }
        if (!p->etag) {
            rc = s3x_seterr(S3X_EINVAL, "CompleteMultipartUpload body: part %d has no ETag", p->part_number);
            goto fail;
        }
        char field[96];
        snprintf(field, sizeof field, "CompleteMultipartUpload body: the ETag of part %d", p->part_number);
        if (s3x_buf_printf(&b, "<Part><PartNumber>%d</PartNumber><ETag>", p->part_number)) goto nomem;
        if ((rc = append_escaped(&b, p->etag, field))) goto fail;
        if (s3x_buf_puts(&b, "</ETag>")) goto nomem;
        if (checksum_name && p->checksum) {
            snprintf(field, sizeof field, "CompleteMultipartUpload body: the %s of part %d", checksum_name,
                     p->part_number);
            if (s3x_buf_printf(&b, "<%s>", checksum_name)) goto nomem;
            if ((rc = append_escaped(&b, p->checksum, field))) goto fail;
            if (s3x_buf_printf(&b, "</%s>", checksum_name)) goto nomem;
        }
        if (s3x_buf_puts(&b, "</Part>")) goto nomem;
    }
    if (s3x_buf_puts(&b, "</CompleteMultipartUpload>")) goto nomem;
    *out_len = b.len;
    *out = s3x_buf_detach(&b);
    return 0;
nomem:
    rc = s3x_seterr(S3X_ENOMEM, "out of memory building the CompleteMultipartUpload body");
fail:
    s3x_buf_free(&b);
    return rc;
}

int s3x_xml_build_create_bucket(const char *region, char **out, size_t *out_len) {
    if (!out || !out_len) return s3x_seterr(S3X_EINVAL, "CreateBucketConfiguration body: no output pointer");
    *out = NULL;
    *out_len = 0;
    if (!region || !*region || strcmp(region, "us-east-1") == 0) return 0;
    s3x_buf b = S3X_BUF_INIT;
    int rc;
    if (s3x_buf_puts(&b, "<CreateBucketConfiguration xmlns=\"" S3_XMLNS "\"><LocationConstraint>")) goto nomem;
    if ((rc = append_escaped(&b, region, "CreateBucketConfiguration body: the region"))) goto fail;
    if (s3x_buf_puts(&b, "</LocationConstraint></CreateBucketConfiguration>")) goto nomem;
    *out_len = b.len;
    *out = s3x_buf_detach(&b);
    return 0;
nomem:
    rc = s3x_seterr(S3X_ENOMEM, "out of memory building the CreateBucketConfiguration body");
fail:
    s3x_buf_free(&b);
    return rc;
}

/* ---- STS AssumeRole* ---- */

void s3x_xml_sts_free(s3x_xml_sts *s) {
    if (!s) return;
    s3x_free_secret(s->access_key);
    s3x_free_secret(s->secret_key);
    s3x_free_secret(s->session_token);
    free(s->expiration);
    free(s->error_code);
    free(s->error_message);
    memset(s, 0, sizeof *s);
}

int s3x_xml_parse_sts(const char *xml, size_t len, const char *action, s3x_xml_sts *out) {
    char what[96], result[96];
    snprintf(what, sizeof what, "%sResponse", action);
    snprintf(result, sizeof result, "%sResult", action);
    xmlDocPtr doc;
    int rc = parse_doc(xml, len, what, 0, &doc);
    if (rc) return rc;
    const xmlNode *root = xmlDocGetRootElement(doc);
    if (name_is(root, "ErrorResponse")) {
        const xmlNode *err = child_el(root, "Error");
        if (!err) rc = missing("Error", NULL, "STS ErrorResponse");
        if (!rc) rc = get_text_or_empty(err, "Code", &out->error_code);
        if (!rc) rc = get_text_or_empty(err, "Message", &out->error_message);
    } else if (!name_is(root, what)) {
        rc = s3x_seterr(S3X_EXML, "unexpected root element <%.64s> in %s response", (const char *)root->name, what);
    } else {
        const xmlNode *res = child_el(root, result);
        const xmlNode *cr = res ? child_el(res, "Credentials") : NULL;
        static const char *const names[] = {"AccessKeyId", "SecretAccessKey", "SessionToken", "Expiration"};
        char **fields[] = {&out->access_key, &out->secret_key, &out->session_token, &out->expiration};
        if (!res) rc = missing(result, NULL, what);
        else if (!cr) rc = missing("Credentials", result, what);
        for (size_t i = 0; !rc && i < 4; i++) {
            rc = get_text(cr, names[i], fields[i]);
            if (rc == ABSENT) rc = missing(names[i], "Credentials", what);
            else if (!rc && !*fields[i]) rc = s3x_seterr(S3X_EXML, "empty <%s> in %s response", names[i], what);
        }
        /* Every field present and non-empty, whatever path the loop took
         * (a field read from a recovered, malformed document included). */
        for (size_t i = 0; !rc && i < 4; i++)
            if (!*fields[i] || !**fields[i]) rc = s3x_seterr(S3X_EXML, "empty <%s> in %s response", names[i], what);
    }
    if (rc) s3x_xml_sts_free(out);
    xmlFreeDoc(doc);
    return rc;
}

/* ---- CopyObjectResult / CopyPartResult ---- */

void s3x_xml_copy_free(s3x_xml_copy *c) {
    if (!c) return;
    free(c->etag);
    free(c->last_modified);
    free(c->checksum);
    memset(c, 0, sizeof *c);
}

int s3x_xml_parse_copy(const char *xml, size_t len, const char *root_name, s3x_xml_copy *out) {
    static const char *const sums[] = {"ChecksumCRC32C", "ChecksumCRC32", "ChecksumSHA256", "ChecksumCRC64NVME", NULL};
    if (!root_name || (strcmp(root_name, "CopyObjectResult") && strcmp(root_name, "CopyPartResult")))
        return s3x_seterr(S3X_EINVAL, "copy result: unknown root element");
    xmlDocPtr doc;
    const xmlNode *root;
    int rc = parse_root(xml, len, root_name, &doc, &root);
    if (rc) return rc;
    rc = get_text(root, "ETag", &out->etag);
    if (rc == ABSENT) rc = missing("ETag", NULL, root_name);
    else if (rc == 0 && !*out->etag) rc = s3x_seterr(S3X_EXML, "empty <ETag> in %s response", root_name);
    if (!rc) rc = get_text_or_null(root, "LastModified", &out->last_modified);
    for (int i = 0; !rc && sums[i] && !out->checksum; i++) {
        rc = get_text_or_null(root, sums[i], &out->checksum);
        if (!rc && out->checksum) out->checksum_name = sums[i];
    }
    if (rc) s3x_xml_copy_free(out);
    xmlFreeDoc(doc);
    return rc;
}

/* ---- DeleteResult ---- */

void s3x_xml_delete_result_free(s3x_xml_delete_result *d) {
    if (!d) return;
    for (size_t i = 0; i < d->n; i++) {
        free(d->entries[i].key);
        free(d->entries[i].code);
        free(d->entries[i].message);
    }
    free(d->entries);
    memset(d, 0, sizeof *d);
}

int s3x_xml_parse_delete_result(const char *xml, size_t len, s3x_xml_delete_result *out) {
    static const char what[] = "DeleteResult";
    xmlDocPtr doc;
    const xmlNode *root;
    int rc = parse_root(xml, len, what, &doc, &root);
    if (rc) return rc;
    size_t n = count_children(root, "Deleted") + count_children(root, "Error");
    if (n > S3X_XML_DELETE_MAX) {
        rc = s3x_seterr(S3X_EXML, "%zu entries in %s response, more than the %d keys a request may name", n, what,
                        S3X_XML_DELETE_MAX);
        goto done;
    }
    if (n && !(out->entries = calloc(n, sizeof *out->entries))) {
        rc = s3x_seterr(S3X_ENOMEM, "out of memory for %zu entries in %s response", n, what);
        goto done;
    }
    char ctx[48];
    for (const xmlNode *c = root->children; c; c = c->next) {
        int ok = name_is(c, "Deleted");
        if (!ok && !name_is(c, "Error")) continue;
        s3x_xml_deleted *e = &out->entries[out->n++];
        e->ok = ok;
        snprintf(ctx, sizeof ctx, "<%s> %zu", ok ? "Deleted" : "Error", out->n);
        rc = get_text(c, "Key", &e->key);
        if (rc == ABSENT) rc = missing("Key", ctx, what);
        if (rc) goto done;
        if (!ok) {
            if ((rc = get_text_or_empty(c, "Code", &e->code)) || (rc = get_text_or_empty(c, "Message", &e->message)))
                goto done;
            if (!*e->code) {
                /* A failure with no code still has to say it failed. */
                free(e->code);
                if (!(e->code = strdup("UnknownError"))) {
                    rc = s3x_seterr(S3X_ENOMEM, "out of memory");
                    goto done;
                }
            }
        }
    }
done:
    if (rc) s3x_xml_delete_result_free(out);
    xmlFreeDoc(doc);
    return rc;
}

int s3x_xml_build_delete(const char *const *keys, size_t n, int quiet, char **out, size_t *out_len) {
    if (!out || !out_len) return s3x_seterr(S3X_EINVAL, "DeleteObjects body: no output pointer");
    *out = NULL;
    *out_len = 0;
    if (!keys || n == 0 || n > S3X_XML_DELETE_MAX)
        return s3x_seterr(S3X_EINVAL, "DeleteObjects takes 1..%d keys, got %zu", S3X_XML_DELETE_MAX, n);
    s3x_buf b = S3X_BUF_INIT;
    int rc = 0;
    if (s3x_buf_puts(&b, "<Delete xmlns=\"" S3_XMLNS "\">")) goto nomem;
    if (quiet && s3x_buf_puts(&b, "<Quiet>true</Quiet>")) goto nomem;
    for (size_t i = 0; i < n; i++) {
        if (!keys[i] || !*keys[i]) {
            rc = s3x_seterr(S3X_EINVAL, "DeleteObjects body: key %zu is empty", i);
            goto fail;
        }
        char field[64];
        snprintf(field, sizeof field, "DeleteObjects body: key %zu", i);
        if (s3x_buf_puts(&b, "<Object><Key>")) goto nomem;
        if ((rc = append_escaped(&b, keys[i], field))) goto fail;
        if (s3x_buf_puts(&b, "</Key></Object>")) goto nomem;
    }
    if (s3x_buf_puts(&b, "</Delete>")) goto nomem;
    *out_len = b.len;
    *out = s3x_buf_detach(&b);
    return 0;
nomem:
    rc = s3x_seterr(S3X_ENOMEM, "out of memory building the DeleteObjects body");
fail:
    s3x_buf_free(&b);
    return rc;
}
