/* s3x_client_throttle_state: the public view of the client's adaptive rate
 * (core/src/net/throttle_state.c) and the limiter's time accounting
 * (core/src/util/ratelimit.c) behind it. The limiter is driven directly, as
 * the transfers' judge does, through the client's private state. */
#include "client_internal.h"
#include "tap.h"
#include <math.h>
#include <string.h>

static void test_time_accounting(void) {
    s3x_ratelimit rl;
    s3x_rl_init(&rl);
    CHECK(s3x_rl_active_seconds(&rl, 5.0) == 0 && s3x_rl_total_seconds(&rl, 5.0) == 0, "off: no time");
    for (int i = 0; i <= 100; i++) s3x_rl_on_response(&rl, 10.0 + i * 0.01);
    s3x_rl_on_throttle(&rl, 11.0);
    s3x_rl_on_throttle(&rl, 11.5);
    CHECK(fabs(s3x_rl_active_seconds(&rl, 13.0) - 2.0) < 1e-9, "on since the first answer: %.3f",
          s3x_rl_active_seconds(&rl, 13.0));
    /* Successes after the storm switch it off (quarter, half, full). */
    for (int i = 0; i < 10 && rl.active; i++) s3x_rl_on_success(&rl, 14.0, 13.9);
    CHECK(!rl.active, "successes switch it off");
    CHECK(s3x_rl_active_seconds(&rl, 20.0) == 0, "off again: no current storm");
    CHECK(fabs(s3x_rl_total_seconds(&rl, 20.0) - 3.0) < 1e-9, "the storm's 3 s are kept: %.3f",
          s3x_rl_total_seconds(&rl, 20.0));
    s3x_rl_on_throttle(&rl, 30.0);
    CHECK(fabs(s3x_rl_total_seconds(&rl, 31.0) - 4.0) < 1e-9, "a second storm adds to the total: %.3f",
          s3x_rl_total_seconds(&rl, 31.0));
}

static void test_query(void) {
    s3x_client *c = NULL;
    CHECK(s3x_client_new(&c) == 0 && c, "client");
    s3x_throttle_state st;
    memset(&st, 0xff, sizeof st);
    CHECK(s3x_client_throttle_state(c, &st, sizeof st) == 0, "query on a fresh client");
    CHECK(st.active == 0 && st.rate == 0 && st.throttles == 0 && st.seconds == 0 && st.seconds_total == 0,
          "a fresh client is not throttled");

    double now = s3x_now();
    s3x_rl_on_throttle(&c->rate, now - 2.0);
    s3x_rl_on_throttle(&c->rate, now - 1.0);
    CHECK(s3x_client_throttle_state(c, &st, sizeof st) == 0, "query while throttled");
    CHECK(st.active == 1, "active");
    CHECK(st.rate >= S3X_RL_MIN_RATE && st.rate <= 1.0, "rate %.3f is the cut rate", st.rate);
    CHECK(st.throttles == 2, "throttles %lld", (long long)st.throttles);
    CHECK(st.seconds >= 2.0 && st.seconds < 3.0, "seconds since it began %.3f", st.seconds);
    CHECK(st.seconds_total >= st.seconds, "total includes the current storm");

    /* An older caller: only the fields that fit are written. */
    struct { int active; } old;
    CHECK(s3x_client_throttle_state(c, (s3x_throttle_state *)(void *)&old, sizeof old) == 0, "short struct");
    CHECK(old.active == 1, "short struct gets active");
    /* A newer caller: the tail this library does not know is zeroed. */
    union {
        s3x_throttle_state st;
        unsigned char bytes[sizeof(s3x_throttle_state) + 16];
    } big;
    memset(&big, 0xcd, sizeof big);
    CHECK(s3x_client_throttle_state(c, &big.st, sizeof big) == 0, "long struct");
    int zero = 1;
    for (size_t i = sizeof(s3x_throttle_state); i < sizeof big; i++) zero &= big.bytes[i] == 0;
    CHECK(zero && big.st.active == 1, "long struct: known fields set, the rest zeroed");

    CHECK(s3x_client_throttle_state(c, &st, 0) == S3X_EINVAL, "size 0 is refused");
    CHECK(s3x_client_throttle_state(NULL, &st, sizeof st) == S3X_EINVAL, "NULL client is refused");
    CHECK(strstr(s3x_error_last()->message, "s3x_client_throttle_state") != NULL, "the message names the call");
    CHECK(s3x_client_throttle_state(c, NULL, sizeof st) == S3X_EINVAL, "NULL out is refused");
    s3x_client_free(c);
}

int main(void) {
    test_time_accounting();
    test_query();
    return tap_summary("test_throttle_state");
}
