/* The shared config/credentials parser (core/src/proto/ini.c). The input is the
 * file's text; an input starting with 0xFF 'L' is expanded first (two bytes
 * of count, a byte to repeat, a split point) so that lines around the 64 KiB
 * limit are reachable from small inputs.
 *
 * Properties: 0 or the chosen error code with a message that names the file
 * and a line within the file; on success every setting's name is a non-empty,
 * trimmed, lowercase name without '=' or ':', every value is valid UTF-8
 * without trailing whitespace, names are unique within a section, and
 * s3x_ini_get finds each setting's own value. */
#include "fuzz.h"
#include "error.h"
#include "ini.h"
#include "sigv4.h"

static int has_trailing_space(const char *s) {
    size_t n = strlen(s), i = 0, last_end = 0;
    while (i < n) {
        size_t sp = s3x_utf8_space(s + i, n - i);
        if (sp) {
            i += sp;
            continue;
        }
        uint32_t cp;
        size_t len = s3x_utf8_decode(s + i, n - i, &cp);
        FUZZ_ASSERT(len, "value is not UTF-8 at byte %zu", i);
        i += len;
        last_end = i;
    }
    return last_end != n;
}

static void check(const char *text, size_t len) {
    s3x_ini *ini = (s3x_ini *)&ini;
    int rc = s3x_ini_parse(text, len, "fuzz file", S3X_ECREDENTIALS, &ini);
    if (rc) {
        FUZZ_ASSERT(rc == S3X_ECREDENTIALS || rc == S3X_ENOMEM, "rc %d", rc);
        FUZZ_ASSERT(ini == NULL, "out set after a failure");
        const char *m = s3x_error_last()->message;
        FUZZ_ASSERT(!strncmp(m, "fuzz file", 9), "message does not name the file: %s", m);
        const char *l = strstr(m, ", line ");
        if (rc == S3X_ECREDENTIALS && len <= S3X_INI_MAX_FILE) {
            FUZZ_ASSERT(l, "message does not name a line: %s", m);
            unsigned long line = strtoul(l + 7, NULL, 10);
            size_t lines = 1;
            for (size_t i = 0; i < len; i++) lines += text[i] == '\n' || text[i] == '\r';
            FUZZ_ASSERT(line >= 1 && line <= lines, "line %lu of %zu", line, lines);
        }
        return;
    }
    size_t n = s3x_ini_count(ini);
    for (size_t i = 0; i < n; i++) {
        const char *sec, *name, *val;
        FUZZ_ASSERT(s3x_ini_entry(ini, i, &sec, &name, &val) == 0, "entry %zu", i);
        FUZZ_ASSERT(*sec && *name, "empty section or name");
        FUZZ_ASSERT(!strpbrk(name, "=:\n\r"), "name \"%s\" holds a delimiter or newline", name);
        for (const char *p = name; *p; p++) FUZZ_ASSERT(!(*p >= 'A' && *p <= 'Z'), "name not lowercased");
        FUZZ_ASSERT(!s3x_utf8_space(name, strlen(name)) && !has_trailing_space(name), "name not trimmed");
        FUZZ_ASSERT(!has_trailing_space(val), "value of %s not trimmed at the end: ...%s", name,
                    val + (strlen(val) > 16 ? strlen(val) - 16 : 0));
        /* A value's first line is trimmed; only a continuation starts with '\n'. */
        FUZZ_ASSERT(!*val || val[0] == '\n' || !s3x_utf8_space(val, strlen(val)), "value not trimmed at the start");
        FUZZ_ASSERT(!strchr(val, '\r'), "CR in a value");
        for (size_t j = 0; j < i; j++) {
            const char *sec2, *name2;
            s3x_ini_entry(ini, j, &sec2, &name2, NULL);
            FUZZ_ASSERT(strcmp(sec, sec2) || strcmp(name, name2), "setting %s.%s twice", sec, name);
        }
        /* A nested value's sub-settings: every one found is trimmed and has
         * no newline; a refusal says which line. */
        char *sub = NULL;
        size_t bad = 0;
        int nrc = s3x_ini_nested(val, "endpoint_url", &sub, &bad);
        FUZZ_ASSERT(nrc == 0 || nrc == -1, "nested rc %d", nrc);
        FUZZ_ASSERT(nrc == 0 || (bad >= 1 && val[0] == '\n'), "nested refusal at line %zu", bad);
        FUZZ_ASSERT(!sub || (!strpbrk(sub, "\n\r") && !has_trailing_space(sub) &&
                             !s3x_utf8_space(sub, strlen(sub))), "nested value not trimmed");
        free(sub);
        if (strcmp(sec, "DEFAULT")) {
            const char *got = s3x_ini_get(ini, sec, name);
            FUZZ_ASSERT(got == val, "get(%s, %s) is not the setting's value", sec, name);
            FUZZ_ASSERT(s3x_ini_has_section(ini, sec), "section %s missing", sec);
        }
    }
    /* The profile lookups run over every section name (shell-like splitting). */
    (void)s3x_ini_profile_section(ini, "default");
    (void)s3x_ini_profile_section(ini, "a b");
    (void)s3x_ini_named_section(ini, "services", "a b");
    (void)s3x_ini_named_section(ini, "sso-session", "x");
    (void)s3x_ini_get(ini, "default", "aws_access_key_id");
    s3x_ini_free(ini);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size >= 6 && data[0] == 0xff && data[1] == 'L') {
        size_t count = ((size_t)data[2] << 8 | data[3]) * 2; /* up to 131070 */
        uint8_t c = data[4];
        size_t rest = size - 6, split = rest ? data[5] % (rest + 1) : 0;
        size_t len = rest + count;
        char *t = malloc(len ? len : 1);
        if (!t) abort();
        memcpy(t, data + 6, split);
        memset(t + split, c, count);
        memcpy(t + split + count, data + 6 + split, rest - split);
        check(t, len);
        free(t);
        return 0;
    }
    char *t = fuzz_copy(data, size);
    check(t, size);
    free(t);
    return 0;
}
