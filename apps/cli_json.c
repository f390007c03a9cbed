/* s3xfer CLI: --json output, one JSON object per line. Keys, paths and
 * server messages are untrusted (docs/threat-model.md): the escaping here
 * keeps every record one valid line of JSON that a terminal shows as text. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Code points written as \uXXXX although JSON allows them raw: controls a
 * terminal acts on (DEL, C1), the bidirectional controls that reorder a line,
 * and U+2028/U+2029, which end a line in JavaScript. */
static int json_hidden(uint32_t cp) {
    return cp == 0x7F || (cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029 ||
           (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

void cli_json_string(FILE *f, const char *s) {
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    fputc('"', f);
    while (*p) {
        uint32_t cp = 0;
        size_t len = cli_utf8_seq(p, &cp);
        if (len == 0) {
            /* Not UTF-8: JSON text must be, so the byte is carried as the lone
             * surrogate U+DC80..U+DCFF (Python's surrogateescape). */
            fprintf(f, "\\udc%02x", *p);
            p++;
            continue;
        }
        if (cp == '"') fputs("\\\"", f);
        else if (cp == '\\') fputs("\\\\", f);
        else if (cp == '\n') fputs("\\n", f);
        else if (cp == '\r') fputs("\\r", f);
        else if (cp == '\t') fputs("\\t", f);
        else if (cp == '\b') fputs("\\b", f);
        else if (cp == '\f') fputs("\\f", f);
        else if (cp < 0x20 || json_hidden(cp)) fprintf(f, "\\u%04" PRIx32, cp);
        else fwrite(p, 1, len, f);
        p += len;
    }
    fputc('"', f);
}

void cli_json_double(FILE *f, double v) {
    if (!isfinite(v)) v = 0;
    fprintf(f, "%.9g", v);
}

void cli_json_throttle(FILE *f, s3x_client *client) {
    s3x_throttle_state st;
    if (!client || s3x_client_throttle_state(client, &st, sizeof st) != 0) return;
    fprintf(f, ",\"throttle\":{\"active\":%s,\"rate\":", st.active ? "true" : "false");
    cli_json_double(f, st.rate);
    fprintf(f, ",\"throttles\":%" PRId64 ",\"seconds\":", st.throttles);
    cli_json_double(f, st.seconds);
    fputs(",\"seconds_total\":", f);
    cli_json_double(f, st.seconds_total);
    fputc('}', f);
}

void cli_outcome_from_error(cli_outcome *o, int exit_code) {
    const s3x_error *e = s3x_error_last();
    memset(o, 0, sizeof *o);
    o->exit_code = exit_code;
    o->failed = 1;
    o->code = e->code;
    o->http_status = e->http_status;
    o->message = e->message && *e->message ? e->message : s3x_strerror(e->code);
    o->s3_code = e->s3_code;
    o->request_id = e->request_id;
    o->sys_errno = e->sys_errno;
}

static void field_str(FILE *f, const char *name, const char *v) {
    fprintf(f, ",\"%s\":", name);
    cli_json_string(f, v);
}

static void field_i64(FILE *f, const char *name, int64_t v) { fprintf(f, ",\"%s\":%" PRId64, name, v); }

static void field_dbl(FILE *f, const char *name, double v) {
    fprintf(f, ",\"%s\":", name);
    cli_json_double(f, v);
}

/* Every field of s3x_result, by its C name. */
void cli_json_put_result(FILE *f, const s3x_result *r) {
    fprintf(f, ",\"result\":{\"bytes\":%" PRId64, r->bytes);
    field_i64(f, "parts", r->parts);
    field_dbl(f, "seconds", r->seconds);
    field_dbl(f, "io_seconds", r->io_seconds);
    field_i64(f, "requests", r->requests);
    field_i64(f, "retries", r->retries);
    field_i64(f, "retries_http", r->retries_http);
    field_i64(f, "retries_network", r->retries_network);
    field_i64(f, "retries_timeout", r->retries_timeout);
    field_i64(f, "retries_first_byte", r->retries_first_byte);
    field_i64(f, "retries_throttled", r->retries_throttled);
    field_dbl(f, "throttled_seconds", r->throttled_seconds);
    field_i64(f, "slow_part_timeout_ms", r->slow_part_timeout_ms);
    field_i64(f, "part_size", r->part_size);
    field_i64(f, "concurrency", r->concurrency);
    field_i64(f, "pool_allocations", r->pool_allocations);
    field_i64(f, "pool_bytes_allocated", r->pool_bytes_allocated);
    field_i64(f, "peak_buffer_bytes", r->peak_buffer_bytes);
    field_i64(f, "buffer_waits", r->buffer_waits);
    field_i64(f, "fsyncs", r->fsyncs);
    field_i64(f, "writeback_calls", r->writeback_calls);
    field_dbl(f, "sync_seconds", r->sync_seconds);
    field_i64(f, "requests_received_elsewhere", r->requests_received_elsewhere);
    field_i64(f, "receive_threads", r->receive_threads);
    fprintf(f, ",\"multipart\":%s", r->multipart ? "true" : "false");
    /* Fixed-size arrays the library fills: bounded in case one is not terminated. */
    char etag[sizeof r->etag + 1], upload_id[sizeof r->upload_id + 1];
    memcpy(etag, r->etag, sizeof r->etag);
    etag[sizeof r->etag] = '\0';
    memcpy(upload_id, r->upload_id, sizeof r->upload_id);
    upload_id[sizeof r->upload_id] = '\0';
    field_str(f, "etag", etag);
    field_str(f, "upload_id", upload_id);
    fputc('}', f);
}

void cli_json_result(FILE *f, s3x_client *client, const char *command, const char *direction, const char *src,
                     const char *dst, const char *bucket, const char *key, const s3x_result *r,
                     const cli_outcome *o) {
    fputs("{\"type\":\"result\"", f);
    field_str(f, "command", command);
    if (direction) field_str(f, "direction", direction);
    if (src) field_str(f, "source", src);
    if (dst) field_str(f, "destination", dst);
    if (bucket) field_str(f, "bucket", bucket);
    if (key) field_str(f, "key", key);
    field_str(f, "outcome", o->signal ? "interrupted" : o->failed ? "failed" : "ok");
    fprintf(f, ",\"exit_code\":%d", o->exit_code);
    if (o->signal) field_str(f, "signal", cli_signal_name(o->signal));
    if (r) cli_json_put_result(f, r);
    cli_json_throttle(f, client);
    if (o->failed) {
        s3x_error e = {o->code, o->http_status, o->message, o->s3_code, o->request_id, o->sys_errno};
        cli_json_put_error(f, &e);
    }
    fputs("}\n", f);
    fflush(f);
}

void cli_json_put_error(FILE *f, const s3x_error *e) {
    const char *msg = e->message && *e->message ? e->message : s3x_strerror(e->code);
    char *hidden = cli_hide_userinfo(msg);
    fprintf(f, ",\"error\":{\"code\":%d", e->code);
    field_str(f, "name", s3x_strerror(e->code));
    field_str(f, "message", hidden ? hidden : msg);
    fprintf(f, ",\"http_status\":%d", e->http_status);
    field_str(f, "s3_code", e->s3_code);
    field_str(f, "request_id", e->request_id);
    fprintf(f, ",\"sys_errno\":%d", e->sys_errno);
    fputc('}', f);
    free(hidden);
}
