#include "params_internal.h"
#include "error.h"
#include "s3xfer/s3xfer.h"
#include <inttypes.h>
#include <stddef.h>

#define MiB (1024LL * 1024LL)
#define GiB (1024LL * MiB)

/* One row per knob: the single source of names, ranges and defaults (the
 * Python layer and the CLI read them from here). */
static const s3x_param_info g_params[S3X_PARAM__COUNT] = {
    [S3X_PARAM_ADDRESSING_STYLE] = {"addressing_style", 0, 2, S3X_ADDRESSING_AUTO, S3X_SCOPE_CLIENT},
    [S3X_PARAM_VERIFY_TLS] = {"verify_tls", 0, 1, 1, S3X_SCOPE_CLIENT},
    [S3X_PARAM_CONNECT_TIMEOUT_MS] = {"connect_timeout_ms", 1, 600000, 10000, S3X_SCOPE_CLIENT},
    [S3X_PARAM_REQUEST_TIMEOUT_MS] = {"request_timeout_ms", 0, 86400000, 0, S3X_SCOPE_CLIENT},
    [S3X_PARAM_PAYLOAD_SIGNING] = {"payload_signing", 0, 2, S3X_PAYLOAD_AUTO, S3X_SCOPE_CLIENT},
    [S3X_PARAM_MAX_CONNECTIONS] = {"max_connections", 1, 4096, 256, S3X_SCOPE_CLIENT},
    [S3X_PARAM_PART_SIZE] = {"part_size", 5 * MiB, 5 * GiB, 8 * MiB, S3X_SCOPE_UPLOAD | S3X_SCOPE_DOWNLOAD},
    [S3X_PARAM_MULTIPART_THRESHOLD] = {"multipart_threshold", 0, 5 * GiB, 8 * MiB, S3X_SCOPE_UPLOAD},
    [S3X_PARAM_CONCURRENCY] = {"concurrency", 1, 1024, 16, S3X_SCOPE_UPLOAD | S3X_SCOPE_DOWNLOAD},
    [S3X_PARAM_BUFFER_STRATEGY] = {"buffer_strategy", 0, 2, S3X_BUFFER_AUTO, S3X_SCOPE_UPLOAD},
    [S3X_PARAM_POOL] = {"pool", 0, 2, S3X_POOL_BOUNDED, S3X_SCOPE_UPLOAD | S3X_SCOPE_DOWNLOAD},
    [S3X_PARAM_MEMORY_LIMIT] = {"memory_limit", 0, INT64_MAX, 0, S3X_SCOPE_UPLOAD | S3X_SCOPE_DOWNLOAD},
    [S3X_PARAM_CHECKSUM] = {"checksum", 0, 4, S3X_CHECKSUM_CRC32C, S3X_SCOPE_UPLOAD},
    [S3X_PARAM_LEAVE_PARTS_ON_ERROR] = {"leave_parts_on_error", 0, 1, 0, S3X_SCOPE_UPLOAD},
    [S3X_PARAM_MAX_ATTEMPTS] = {"max_attempts", 1, 100, 5, S3X_SCOPE_CLIENT | S3X_SCOPE_UPLOAD | S3X_SCOPE_DOWNLOAD},
    [S3X_PARAM_SLOW_PART_TIMEOUT] = {"slow_part_timeout", -1, 3600000, S3X_SLOW_PART_OFF, S3X_SCOPE_UPLOAD | S3X_SCOPE_DOWNLOAD},
    [S3X_PARAM_VALIDATE_CHECKSUM] = {"validate_checksum", 0, 1, 1, S3X_SCOPE_DOWNLOAD},
    [S3X_PARAM_SIZE_HINT] = {"size_hint", 0, 5 * 1024 * GiB, 0, S3X_SCOPE_UPLOAD},
    [S3X_PARAM_STALL_TIMEOUT_MS] = {"stall_timeout_ms", 0, 3600000, 30000, S3X_SCOPE_UPLOAD | S3X_SCOPE_DOWNLOAD},
    [S3X_PARAM_STALL_MIN_RATE] = {"stall_min_rate", 1, 1024 * MiB, 1, S3X_SCOPE_UPLOAD | S3X_SCOPE_DOWNLOAD},
    [S3X_PARAM_CHECKSUM_LOCATION] = {"checksum_location", 0, 2, S3X_CHECKSUM_LOCATION_AUTO, S3X_SCOPE_UPLOAD},
    [S3X_PARAM_RETRY_TIMEOUT] = {"retry_timeout", 0, 86400000, 120000, S3X_SCOPE_CLIENT | S3X_SCOPE_UPLOAD | S3X_SCOPE_DOWNLOAD},
    [S3X_PARAM_RETRY_MODE] = {"retry_mode", 0, 1, S3X_RETRY_MODE_ADAPTIVE, S3X_SCOPE_CLIENT | S3X_SCOPE_UPLOAD | S3X_SCOPE_DOWNLOAD},
    [S3X_PARAM_FAIL_FAST] = {"fail_fast", 0, 1, 0, S3X_SCOPE_BATCH},
    [S3X_PARAM_DURABLE] = {"durable", 0, 1, 1, S3X_SCOPE_DOWNLOAD},
    [S3X_PARAM_CHECKSUM_TYPE] = {"checksum_type", 0, 1, S3X_CHECKSUM_TYPE_COMPOSITE, S3X_SCOPE_UPLOAD},
    [S3X_PARAM_RECEIVE_THREADS] = {"receive_threads", 0, 8, 0, S3X_SCOPE_CLIENT},
};

const s3x_param_info *s3x_param_info_get(s3x_param p) {
    if ((int)p < 0 || p >= S3X_PARAM__COUNT || !g_params[p].name) return NULL;
    return &g_params[p];
}

int s3x_param_bounds(s3x_param p, int64_t *lo, int64_t *hi) {
    const s3x_param_info *pi = s3x_param_info_get(p);
    if (!pi) return s3x_seterr(S3X_EINVAL, "unknown knob %d", (int)p);
    if (lo) *lo = pi->lo;
    if (hi) *hi = pi->hi;
    return 0;
}

const char *s3x_param_name(s3x_param p) {
    const s3x_param_info *pi = s3x_param_info_get(p);
    return pi ? pi->name : NULL;
}

int64_t s3x_param_default(s3x_param p) {
    const s3x_param_info *pi = s3x_param_info_get(p);
    return pi ? pi->def : 0;
}

static const char *scope_name(unsigned scope) {
    switch (scope) {
    case S3X_SCOPE_CLIENT: return "client";
    case S3X_SCOPE_UPLOAD: return "upload manager";
    case S3X_SCOPE_DOWNLOAD: return "download manager";
    case S3X_SCOPE_BATCH: return "batch";
    default: return "handle";
    }
}

int s3x_param_check(s3x_param p, int64_t value, unsigned scope) {
    const s3x_param_info *pi = s3x_param_info_get(p);
    if (!pi) return s3x_seterr(S3X_EINVAL, "unknown knob %d", (int)p);
    if (!(pi->scope & scope))
        return s3x_seterr(S3X_EINVAL, "knob %s does not apply to the %s", pi->name, scope_name(scope));
    if (value < pi->lo || value > pi->hi)
        return s3x_seterr(S3X_EINVAL, "knob %s = %" PRId64 " is out of range [%" PRId64 ", %" PRId64 "]",
                          pi->name, value, pi->lo, pi->hi);
    return 0;
}

void s3x_params_defaults(int64_t values[S3X_PARAM__COUNT]) {
    for (int i = 0; i < S3X_PARAM__COUNT; i++) values[i] = g_params[i].def;
}
