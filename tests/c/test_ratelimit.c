/* The adaptive request rate (core/src/util/ratelimit.c): multiplicative
 * decrease on throttling down to a floor, slots 1/rate apart, growth on
 * success until the limiter switches itself off. */
#include "ratelimit.h"
#include "tap.h"
#include <math.h>

static int near(double a, double b) { return fabs(a - b) < 1e-9; }

static void test_off_until_throttled(void) {
    s3x_ratelimit rl;
    s3x_rl_init(&rl);
    CHECK(near(s3x_rl_reserve(&rl, 5.0), 5.0), "off: a request goes when it wants");
    CHECK(near(s3x_rl_reserve(&rl, 5.0), 5.0), "off: and so does the next");
    s3x_rl_on_success(&rl, 5.0, 4.9);
    CHECK(!rl.active, "success alone does not activate it");
    CHECK(s3x_rl_may_send(&rl, 5.0) && s3x_rl_may_send(&rl, 5.0), "off: the gate is open");
}

static void test_storm_spaces_requests(void) {
    s3x_ratelimit rl;
    s3x_rl_init(&rl);
    /* 100 responses in one second: the measured rate is about 100/s. */
    for (int i = 0; i <= 100; i++) s3x_rl_on_response(&rl, 10.0 + i * 0.01);
    CHECK(rl.measured > 90 && rl.measured < 110, "measured %.1f req/s", rl.measured);
    s3x_rl_on_throttle(&rl, 11.0);
    CHECK(rl.active, "a throttling answer activates it");
    CHECK(near(rl.rate, rl.full_rate * S3X_RL_BETA), "first cut halves the measured rate (%.2f)", rl.rate);
    /* The burst of answers to the requests in flight takes it to the floor. */
    for (int i = 0; i < 20; i++) s3x_rl_on_throttle(&rl, 11.0);
    CHECK(near(rl.rate, S3X_RL_MIN_RATE), "floor reached (%.2f)", rl.rate);
    /* Ten requests wanting to go at once get slots 1/floor apart. */
    double prev = 0;
    int spaced = 1;
    for (int i = 0; i < 10; i++) {
        double t = s3x_rl_reserve(&rl, 11.0);
        if (i && !near(t - prev, 1.0 / S3X_RL_MIN_RATE)) spaced = 0;
        prev = t;
    }
    CHECK(spaced, "slots are 1/rate apart");
    CHECK(near(prev, 11.0 + 9 / S3X_RL_MIN_RATE), "the tenth goes at %.2f", prev);
    /* A request that wants to go later than the next slot goes when it wants. */
    CHECK(near(s3x_rl_reserve(&rl, 100.0), 100.0), "a later request is not pulled earlier");
}

static void test_recovery(void) {
    s3x_ratelimit rl;
    s3x_rl_init(&rl);
    for (int i = 0; i <= 100; i++) s3x_rl_on_response(&rl, i * 0.01);
    for (int i = 0; i < 20; i++) s3x_rl_on_throttle(&rl, 1.0);
    /* A request sent before the last throttling answer says nothing. */
    double r0 = rl.rate;
    s3x_rl_on_success(&rl, 2.0, 0.5);
    CHECK(near(rl.rate, r0), "a success of a request sent before the storm answer is ignored");
    int n = 0;
    while (rl.active && n < 100) {
        s3x_rl_on_success(&rl, 2.0, 1.5);
        n++;
    }
    CHECK(!rl.active, "the limiter switches off after successes");
    /* From the floor to a quarter of ~100/s at once, then doubling: three. */
    CHECK(n == 3, "back to full rate after %d successes", n);
    CHECK(near(s3x_rl_reserve(&rl, 3.0), 3.0), "off again: no waiting");
}

static void test_scattered_throttling_does_not_stick(void) {
    /* 10% of answers throttled, the rest successes: the limiter ends off. */
    s3x_ratelimit rl;
    s3x_rl_init(&rl);
    for (int i = 0; i <= 100; i++) s3x_rl_on_response(&rl, i * 0.01);
    for (int i = 0; i < 1000; i++) {
        if (i % 10 == 0) s3x_rl_on_throttle(&rl, 1.0 + i * 0.01);
        else s3x_rl_on_success(&rl, 1.0 + i * 0.01, 1.0 + i * 0.01);
    }
    CHECK(!rl.active, "scattered throttling is outweighed by the successes around it");
    CHECK(rl.throttles == 100, "throttles counted (%lld)", (long long)rl.throttles);
}

/* The gate: one request per 1/rate while on; a success frees the next slot. */
static void test_gate(void) {
    s3x_ratelimit rl;
    s3x_rl_init(&rl);
    for (int i = 0; i <= 100; i++) s3x_rl_on_response(&rl, i * 0.01);
    for (int i = 0; i < 20; i++) s3x_rl_on_throttle(&rl, 1.0);
    int sent = 0;
    for (double t = 1.0; t < 11.0; t += 0.01) sent += s3x_rl_may_send(&rl, t);
    CHECK(sent == (int)(10 * S3X_RL_MIN_RATE), "10 s at the floor lets %d requests go", sent);
    CHECK(!s3x_rl_may_send(&rl, 11.0), "the gate is shut between slots");
    CHECK(s3x_rl_next(&rl) > 11.0, "next slot %.2f", s3x_rl_next(&rl));
    s3x_rl_on_success(&rl, 11.0, 10.9);
    CHECK(s3x_rl_may_send(&rl, 11.0), "a success opens the gate at once");
    CHECK(near(rl.rate, rl.full_rate / 4), "and climbs to a quarter of the rate before the storm (%.2f)", rl.rate);
}

int main(void) {
    test_gate();
    test_off_until_throttled();
    test_storm_spaces_requests();
    test_recovery();
    test_scattered_throttling_does_not_stick();
    return tap_summary("test_ratelimit");
}
