/* The public view of the client's adaptive rate (s3x_client_throttle_state).
 * A file of its own so that it reads the limiter without touching client.c. */
#include "client_internal.h"
#include "error.h"
#include <string.h>

int s3x_client_throttle_state(const s3x_client *c, s3x_throttle_state *out, size_t size) {
    if (!c || !out) return s3x_seterr(S3X_EINVAL, "s3x_client_throttle_state: client and out must not be NULL");
    if (size < sizeof out->active)
        return s3x_seterr(S3X_EINVAL, "s3x_client_throttle_state: size %zu is too small (pass sizeof(s3x_throttle_state))",
                          size);
    const s3x_ratelimit *rl = &c->rate;
    double now = s3x_now();
    s3x_throttle_state st;
    memset(&st, 0, sizeof st);
    st.active = rl->active ? 1 : 0;
    st.rate = rl->active ? rl->rate : 0;
    st.throttles = rl->throttles;
    st.seconds = s3x_rl_active_seconds(rl, now);
    st.seconds_total = s3x_rl_total_seconds(rl, now);
    /* An older caller's struct is shorter: fill what it has room for; a newer
     * caller's is longer: the fields this library does not know read 0. */
    if (size > sizeof st) {
        memset((char *)out + sizeof st, 0, size - sizeof st);
        size = sizeof st;
    }
    memcpy(out, &st, size);
    return 0;
}
