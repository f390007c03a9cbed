/* The per-thread last error: a system call's failure says its errno once,
 * a prefix added by a higher layer keeps every field beneath it, and a saved
 * error carries them all to another thread. */
#include "error.h"
#include "tap.h"
#include <errno.h>
#include <pthread.h>
#include <string.h>

static void test_errno_text(void) {
    int rc = s3x_seterr_errno(S3X_EIO, ENOENT, "cannot open %s", "/nowhere/x");
    CHECK_INTEQ(rc, S3X_EIO, "returns the code");
    const s3x_error *e = s3x_error_last();
    CHECK_STREQ(e->message, "cannot open /nowhere/x: No such file or directory", "message, the errno's text once");
    CHECK_INTEQ(e->sys_errno, ENOENT, "sys_errno");
    CHECK_INTEQ(e->http_status, 0, "no HTTP status");
    s3x_seterr_errno(S3X_EIO, ENOSPC, "writing %s failed", "f");
    CHECK_STREQ(s3x_error_last()->message, "writing f failed: No space left on device", "another errno");
    s3x_seterr_sys(S3X_EIO, EISDIR, "%s is a directory", "d");
    CHECK_STREQ(s3x_error_last()->message, "d is a directory", "seterr_sys keeps its own words");
    CHECK_INTEQ(s3x_error_last()->sys_errno, EISDIR, "seterr_sys: sys_errno");
    s3x_seterr(S3X_EINVAL, "bad");
    CHECK_INTEQ(s3x_error_last()->sys_errno, 0, "a plain error has no errno");
}

static void test_prefix_keeps_fields(void) {
    s3x_seterr_http(S3X_EHTTP, 503, "SlowDown", "RID1", "the server said %d", 503);
    int rc = s3x_error_prefix("GetObject s3://%s/%s: ", "b", "k");
    CHECK_INTEQ(rc, S3X_EHTTP, "returns the code");
    const s3x_error *e = s3x_error_last();
    CHECK_STREQ(e->message, "GetObject s3://b/k: the server said 503", "prefixed message");
    CHECK_INTEQ(e->code, S3X_EHTTP, "code kept");
    CHECK_INTEQ(e->http_status, 503, "status kept");
    CHECK_STREQ(e->s3_code, "SlowDown", "S3 code kept");
    CHECK_STREQ(e->request_id, "RID1", "request id kept");
    s3x_seterr_errno(S3X_EIO, EFBIG, "writing %s failed", "f");
    s3x_error_prefix("GetObject s3://b/k: ");
    CHECK_STREQ(s3x_error_last()->message, "GetObject s3://b/k: writing f failed: File too large", "prefix, errno");
    CHECK_INTEQ(s3x_error_last()->sys_errno, EFBIG, "sys_errno kept");
}

static void *restore_there(void *arg) {
    s3x_error_restore(arg);
    const s3x_error *e = s3x_error_last();
    int ok = e->code == S3X_EIO && e->sys_errno == ENOTDIR && strcmp(e->message, "x: Not a directory") == 0;
    s3x_error_clear(); /* a thread's record is freed by the thread */
    return ok ? arg : NULL;
}

static void test_saved_crosses_threads(void) {
    s3x_seterr_errno(S3X_EIO, ENOTDIR, "x");
    s3x_saved_error saved;
    s3x_error_save(&saved);
    s3x_seterr(S3X_EINVAL, "something else");
    pthread_t th;
    void *out = NULL;
    CHECK(pthread_create(&th, NULL, restore_there, &saved) == 0 && pthread_join(th, &out) == 0, "thread ran");
    CHECK(out == &saved, "the other thread restored code, sys_errno and message");
    CHECK_INTEQ(s3x_error_last()->code, S3X_EINVAL, "this thread's own error is untouched");
    s3x_saved_error_free(&saved);
}

int main(void) {
    test_errno_text();
    test_prefix_keeps_fields();
    test_saved_crosses_threads();
    return tap_summary("test_errors");
}
