/* s3xfer CLI: sizes and counts, parsed strictly. A benchmark must run what it
 * says it runs, so a value is either exactly representable or refused: no
 * fractions, signs, exponents, infinities or silent overflow (strtod let
 * "0.5" become 0, "no limit", and "1e300" overflow the conversion). */
#include <inttypes.h>
#include <string.h>
#include <strings.h>

#include "cli.h"

#define KiB_ (INT64_C(1) << 10)
#define MiB_ (INT64_C(1) << 20)
#define GiB_ (INT64_C(1) << 30)
#define TiB_ (INT64_C(1) << 40)

typedef struct unit {
    const char *name;
    int64_t mul;
} unit;

/* Binary units only. K, M, G and T mean KiB... as they do in dd, sort -S and
 * the AWS CLI; KB, MB, GB, TB are refused rather than guessed: the AWS CLI
 * reads them as powers of 2, most people as powers of 10. */
static const unit g_units[] = {
    {"B", 1},       {"K", KiB_},    {"KiB", KiB_}, {"M", MiB_}, {"MiB", MiB_},
    {"G", GiB_},    {"GiB", GiB_},  {"T", TiB_},   {"TiB", TiB_},
};

static int is_digit(char c) { return c >= '0' && c <= '9'; }

int cli_parse_size(const char *s, int units, int64_t *out, const char **why) {
    const char *p = s;
    if (!*p) {
        *why = "the value is empty";
        return -1;
    }
    if (*p == '-' || *p == '+') {
        *why = "no sign is allowed";
        return -1;
    }
    if (!is_digit(*p)) {
        *why = units ? "it is not a whole number of bytes" : "it is not a whole number";
        return -1;
    }
    int64_t v = 0;
    for (; is_digit(*p); p++) {
        int d = *p - '0';
        if (v > (INT64_MAX - d) / 10) {
            *why = "it is too large";
            return -1;
        }
        v = v * 10 + d;
    }
    if (*p == '.' || *p == ',') {
        *why = units ? "fractions are not allowed (write 1536KiB, not 1.5MiB)" : "fractions are not allowed";
        return -1;
    }
    if ((*p == 'e' || *p == 'E') && (is_digit(p[1]) || p[1] == '+' || p[1] == '-')) {
        *why = "exponents are not allowed";
        return -1;
    }
    if (!*p) {
        *out = v;
        return 0;
    }
    if (!units) {
        *why = "it is not a whole number (no unit is allowed here)";
        return -1;
    }
    if (!strcasecmp(p, "KB") || !strcasecmp(p, "MB") || !strcasecmp(p, "GB") || !strcasecmp(p, "TB")) {
        *why = "KB, MB, GB and TB are ambiguous: write KiB, MiB, GiB, TiB (powers of 1024) or a number of bytes";
        return -1;
    }
    for (size_t i = 0; i < sizeof g_units / sizeof g_units[0]; i++) {
        if (strcasecmp(p, g_units[i].name)) continue;
        if (v > INT64_MAX / g_units[i].mul) {
            *why = "it is too large";
            return -1;
        }
        *out = v * g_units[i].mul;
        return 0;
    }
    *why = "unknown unit (use B, KiB, MiB, GiB or TiB; K, M, G, T mean the same)";
    return -1;
}

void cli_format_size(int64_t v, int units, char *buf, size_t n) {
    static const unit shown[] = {{"TiB", TiB_}, {"GiB", GiB_}, {"MiB", MiB_}, {"KiB", KiB_}};
    if (units && v > 0) {
        for (size_t i = 0; i < sizeof shown / sizeof shown[0]; i++) {
            if (v % shown[i].mul == 0) {
                snprintf(buf, n, "%" PRId64 "%s", v / shown[i].mul, shown[i].name);
                return;
            }
        }
    }
    snprintf(buf, n, "%" PRId64, v);
}
