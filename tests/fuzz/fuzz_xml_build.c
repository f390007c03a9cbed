/* The XML request builders: CompleteMultipartUpload (ETags and checksums of
 * parts) and CreateBucketConfiguration (region). Input: a control byte, then
 * NUL-separated strings: the region, then each part's ETag and checksum.
 *
 * Properties: a value XML 1.0 can carry is accepted, and the body is then
 * well-formed and gives every value back exactly when libxml2 parses it; a
 * value it cannot carry is refused with S3X_EINVAL and no body (issue 11,
 * finding 11). "Can carry" is decided here by a second, table-free reading
 * of UTF-8 and the XML 1.0 Char production, independent of s3xml.c. */
#include "fuzz.h"
#include "error.h"
#include "s3xml.h"

#include <libxml/parser.h>
#include <libxml/tree.h>

/* XML 1.0: Char ::= #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF],
 * in well-formed UTF-8 (shortest form, no surrogates). */
static int xml_text_ok(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        uint32_t c;
        int extra;
        if (p[0] < 0x80) {
            c = p[0];
            extra = 0;
        } else if ((p[0] & 0xe0) == 0xc0) {
            c = p[0] & 0x1fu;
            extra = 1;
        } else if ((p[0] & 0xf0) == 0xe0) {
            c = p[0] & 0x0fu;
            extra = 2;
        } else if ((p[0] & 0xf8) == 0xf0) {
            c = p[0] & 0x07u;
            extra = 3;
        } else {
            return 0;
        }
        for (int i = 1; i <= extra; i++) {
            if ((p[i] & 0xc0) != 0x80) return 0; /* also stops at the NUL */
            c = (c << 6) | (p[i] & 0x3fu);
        }
        static const uint32_t shortest[4] = {0, 0x80, 0x800, 0x10000};
        if (c < shortest[extra]) return 0;
        int ok = c == 0x9 || c == 0xa || c == 0xd || (c >= 0x20 && c <= 0xd7ff) || (c >= 0xe000 && c <= 0xfffd) ||
                 (c >= 0x10000 && c <= 0x10ffff);
        if (!ok) return 0;
        p += 1 + extra;
    }
    return 1;
}

static char *text_of(xmlNodePtr n) {
    xmlChar *t = xmlNodeGetContent(n);
    char *s = strdup(t ? (const char *)t : "");
    xmlFree(t);
    if (!s) abort();
    return s;
}

static xmlNodePtr first_el(xmlNodePtr n) {
    while (n && n->type != XML_ELEMENT_NODE) n = n->next;
    return n;
}

static void check_create_bucket(const char *region) {
    char *out = (char *)"sentinel";
    size_t len = 99;
    int rc = s3x_xml_build_create_bucket(region, &out, &len);
    int plain = !*region || strcmp(region, "us-east-1") == 0;
    if (!xml_text_ok(region)) {
        FUZZ_ASSERT(rc == S3X_EINVAL && out == NULL, "region not XML text accepted (rc %d)", rc);
        return;
    }
    FUZZ_ASSERT(rc == 0, "region refused: %s", s3x_error_last()->message);
    if (plain) {
        FUZZ_ASSERT(out == NULL && len == 0, "a body for region \"%s\"", region);
        return;
    }
    FUZZ_ASSERT(out && strlen(out) == len, "length");
    xmlDocPtr d = xmlReadMemory(out, (int)len, NULL, NULL, XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    FUZZ_ASSERT(d, "CreateBucketConfiguration body is not well-formed: %s", out);
    xmlNodePtr root = xmlDocGetRootElement(d);
    FUZZ_ASSERT(root && !strcmp((const char *)root->name, "CreateBucketConfiguration"), "root");
    xmlNodePtr lc = first_el(root->children);
    FUZZ_ASSERT(lc && !strcmp((const char *)lc->name, "LocationConstraint") && !first_el(lc->next), "shape");
    char *back = text_of(lc);
    FUZZ_ASSERT(!strcmp(back, region), "region changed on the way: \"%s\" -> \"%s\"", region, back);
    free(back);
    xmlFreeDoc(d);
    free(out);
}

static const char *const CK_NAMES[] = {NULL, "ChecksumCRC32", "ChecksumCRC32C", "ChecksumSHA1", "ChecksumSHA256",
                                       "ChecksumCRC64NVME"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_in in = {data, size};
    uint8_t ctl = fuzz_u8(&in);
    const char *ck_name = CK_NAMES[ctl % 6];
    char *region = fuzz_piece(&in, NULL);
    check_create_bucket(region);
    free(region);

    enum { MAXP = 64 };
    s3x_complete_part parts[MAXP];
    char *strs[2 * MAXP];
    size_t np = 0;
    int all_ok = 1;
    int gap = ctl & 0x40; /* part numbers with gaps, as after skipped parts */
    while (np < MAXP && (in.n || np == 0)) {
        char *etag = fuzz_piece(&in, NULL);
        char *ck = fuzz_piece(&in, NULL);
        strs[2 * np] = etag;
        strs[2 * np + 1] = ck;
        int pn = (int)np + 1 + (gap ? (int)np * 97 : 0);
        parts[np] = (s3x_complete_part){pn, etag, *ck ? ck : NULL};
        if (!xml_text_ok(etag) || (ck_name && *ck && !xml_text_ok(ck))) all_ok = 0;
        np++;
    }

    char *out = (char *)"sentinel";
    size_t len = 99;
    int rc = s3x_xml_build_complete(parts, np, ck_name, &out, &len);
    if (!all_ok) {
        FUZZ_ASSERT(rc == S3X_EINVAL && out == NULL && len == 0, "a value XML cannot carry was accepted (rc %d)", rc);
        FUZZ_ASSERT(strstr(s3x_error_last()->message, "of part "), "message does not name the part: %s",
                    s3x_error_last()->message);
    } else {
        FUZZ_ASSERT(rc == 0, "XML-compatible values refused: %s", s3x_error_last()->message);
        FUZZ_ASSERT(out && strlen(out) == len, "length");
        xmlDocPtr d =
            xmlReadMemory(out, (int)len, NULL, NULL, XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
        FUZZ_ASSERT(d, "CompleteMultipartUpload body is not well-formed");
        xmlNodePtr root = xmlDocGetRootElement(d);
        FUZZ_ASSERT(root && !strcmp((const char *)root->name, "CompleteMultipartUpload"), "root");
        size_t i = 0;
        for (xmlNodePtr part = first_el(root->children); part; part = first_el(part->next), i++) {
            FUZZ_ASSERT(i < np && !strcmp((const char *)part->name, "Part"), "unexpected element");
            xmlNodePtr num = first_el(part->children);
            xmlNodePtr etag = num ? first_el(num->next) : NULL;
            xmlNodePtr ck = etag ? first_el(etag->next) : NULL;
            FUZZ_ASSERT(num && !strcmp((const char *)num->name, "PartNumber"), "PartNumber");
            FUZZ_ASSERT(etag && !strcmp((const char *)etag->name, "ETag"), "ETag");
            char *t = text_of(num);
            FUZZ_ASSERT(atoi(t) == parts[i].part_number, "part number %s for %d", t, parts[i].part_number);
            free(t);
            t = text_of(etag);
            FUZZ_ASSERT(!strcmp(t, parts[i].etag), "ETag of part %zu changed on the way", i + 1);
            free(t);
            if (ck_name && parts[i].checksum) {
                FUZZ_ASSERT(ck && !strcmp((const char *)ck->name, ck_name) && !first_el(ck->next), "checksum element");
                t = text_of(ck);
                FUZZ_ASSERT(!strcmp(t, parts[i].checksum), "checksum of part %zu changed on the way", i + 1);
                free(t);
            } else {
                FUZZ_ASSERT(!ck, "a checksum element without a checksum");
            }
        }
        FUZZ_ASSERT(i == np, "%zu parts came back of %zu", i, np);
        xmlFreeDoc(d);
        free(out);
    }
    for (size_t i = 0; i < 2 * np; i++) free(strs[i]);
    return 0;
}
