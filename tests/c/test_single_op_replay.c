/* Which single operations are replayed (core/src/net/ops.c), against a fake
 * HTTP server this test runs on 127.0.0.1 (an ephemeral port): a memory body
 * or a memory GET is retried up to the client's max_attempts, while a body
 * already pulled from a read_fn, or a GET whose bytes already reached the
 * caller's write_fn, is not sent again and says so. */
#include "s3xfer/s3xfer.h"
#include "tap.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int check_eq(long long actual, long long expected, const char *file, int line, const char *what) {
    return tap_check(actual == expected, file, line, "%s: expected %lld, got %lld", what, expected, actual);
}
#define CHECK_EQ(actual, expected, what) check_eq((long long)(actual), (long long)(expected), __FILE__, __LINE__, (what))

enum { ANSWER_503, ANSWER_SHORT_BODY };

typedef struct server {
    int fd;
    int port;
    atomic_int mode;
    atomic_int requests;
    atomic_int stop;
    pthread_t thread;
} server;

/* Reads one request (head and Content-Length body); 0 when one arrived. */
static int read_request(int c) {
    char buf[8192];
    size_t n = 0;
    char *end = NULL;
    while (!end) {
        if (n == sizeof buf - 1) return -1;
        ssize_t k = recv(c, buf + n, sizeof buf - 1 - n, 0);
        if (k <= 0) return -1;
        n += (size_t)k;
        buf[n] = 0;
        end = strstr(buf, "\r\n\r\n");
    }
    long len = 0;
    for (char *p = buf; p < end; p++)
        if (!strncasecmp(p, "\ncontent-length:", 16)) len = strtol(p + 16, NULL, 10);
    long have = (long)(n - (size_t)(end + 4 - buf));
    while (have < len) {
        ssize_t k = recv(c, buf, sizeof buf, 0);
        if (k <= 0) return -1;
        have += k;
    }
    return 0;
}

static void send_all(int c, const char *s, size_t n) {
    while (n) {
        ssize_t k = send(c, s, n, MSG_NOSIGNAL);
        if (k <= 0) return;
        s += k;
        n -= (size_t)k;
    }
}

static void *serve(void *p) {
    server *s = p;
    while (!atomic_load(&s->stop)) {
        int c = accept(s->fd, NULL, NULL);
        if (c < 0) continue;
        if (atomic_load(&s->stop)) {
            close(c);
            break;
        }
        if (read_request(c) == 0) {
            atomic_fetch_add(&s->requests, 1);
            if (atomic_load(&s->mode) == ANSWER_503) {
                static const char body[] = "<Error><Code>SlowDown</Code><Message>slow down</Message></Error>";
                char head[256];
                int h = snprintf(head, sizeof head,
                                 "HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
                                 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                                 sizeof body - 1);
                send_all(c, head, (size_t)h);
                send_all(c, body, sizeof body - 1);
            } else {
                /* 1000 bytes announced, 100 sent: a broken body. */
                static const char head[] = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n";
                char part[100];
                memset(part, 'x', sizeof part);
                send_all(c, head, sizeof head - 1);
                send_all(c, part, sizeof part);
            }
        }
        close(c);
    }
    return NULL;
}

static int server_start(server *s) {
    memset(s, 0, sizeof *s);
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (s->fd < 0) return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t al = sizeof a;
    if (bind(s->fd, (struct sockaddr *)&a, sizeof a) || listen(s->fd, 16) ||
        getsockname(s->fd, (struct sockaddr *)&a, &al))
        return -1;
    s->port = ntohs(a.sin_port);
    return pthread_create(&s->thread, NULL, serve, s);
}

static void server_stop(server *s) {
    atomic_store(&s->stop, 1);
    /* Wake the accept with one last connection. */
    int c = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)s->port);
    connect(c, (struct sockaddr *)&a, sizeof a);
    close(c);
    pthread_join(s->thread, NULL);
    close(s->fd);
}

typedef struct src {
    size_t left;
} src;

static int64_t read_some(void *buf, size_t cap, void *payload) {
    src *s = payload;
    size_t n = cap < s->left ? cap : s->left;
    memset(buf, 'a', n);
    s->left -= n;
    return (int64_t)n;
}

static int sink(const void *data, size_t len, void *payload) {
    (void)data;
    *(size_t *)payload += len;
    return 0;
}

int main(void) {
    server srv;
    if (!CHECK(server_start(&srv) == 0, "fake server started")) return tap_summary("test_single_op_replay");
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", srv.port);
    s3x_client *c = NULL;
    CHECK_EQ(s3x_client_new(&c), 0, "client");
    s3x_client_set_string(c, S3X_CLIENT_ENDPOINT_URL, url);
    s3x_client_set_string(c, S3X_CLIENT_REGION, "us-east-1");
    s3x_client_set_string(c, S3X_CLIENT_ACCESS_KEY, "AK");
    s3x_client_set_string(c, S3X_CLIENT_SECRET_KEY, "SK");
    CHECK_EQ(s3x_client_set(c, S3X_PARAM_MAX_ATTEMPTS, 3), 0, "max_attempts is a client knob");
    CHECK_EQ(s3x_client_set(c, S3X_PARAM_RETRY_TIMEOUT, 0), 0, "retry_timeout is a client knob");
    CHECK_EQ(s3x_client_set(c, S3X_PARAM_RETRY_MODE, S3X_RETRY_MODE_STANDARD), 0, "retry_mode is a client knob");
    CHECK_EQ(s3x_client_set(c, S3X_PARAM_MAX_ATTEMPTS, 0), S3X_EINVAL, "max_attempts 0 is refused");

    /* A memory body is sent again: 3 attempts, the last one's error. */
    atomic_store(&srv.mode, ANSWER_503);
    atomic_store(&srv.requests, 0);
    int rc = s3x_put_object(c, "bucket", "key", "hello", 5, NULL, NULL);
    CHECK_EQ(rc, S3X_EHTTP, "PutObject fails with the server's error");
    CHECK_EQ(s3x_error_last()->http_status, 503, "status 503");
    CHECK(strstr(s3x_error_last()->message, "gave up after 3 attempts") != NULL, "says why: %s",
          s3x_error_last()->message);
    CHECK_EQ(atomic_load(&srv.requests), 3, "memory PutObject: max_attempts requests");

    /* A body pulled from a read_fn is not: one request. */
    atomic_store(&srv.requests, 0);
    src s = {100};
    rc = s3x_put_object_stream(c, "bucket", "key", 100, read_some, NULL, &s);
    CHECK_EQ(rc, S3X_EHTTP, "streamed PutObject fails with the server's error");
    CHECK(strstr(s3x_error_last()->message, "not retried: part of the body was already read") != NULL,
          "says it was not retried and why: %s", s3x_error_last()->message);
    CHECK_EQ(atomic_load(&srv.requests), 1, "streamed PutObject: one request");

    /* A broken body into memory is fetched again. */
    atomic_store(&srv.mode, ANSWER_SHORT_BODY);
    atomic_store(&srv.requests, 0);
    void *data = NULL;
    size_t len = 0;
    rc = s3x_get_object(c, "bucket", "key", -1, -1, &data, &len, NULL);
    CHECK(rc != 0 && data == NULL, "GetObject of a broken body fails (rc %d)", rc);
    CHECK_EQ(atomic_load(&srv.requests), 3, "memory GetObject: max_attempts requests");

    /* Bytes that reached the caller's write_fn cannot be taken back. */
    atomic_store(&srv.requests, 0);
    size_t got = 0;
    rc = s3x_get_object_stream(c, "bucket", "key", -1, -1, sink, NULL, &got);
    CHECK(rc != 0, "streamed GetObject of a broken body fails");
    CHECK(strstr(s3x_error_last()->message, "not retried: part of the object was already written") != NULL,
          "says it was not retried and why: %s", s3x_error_last()->message);
    CHECK_EQ(atomic_load(&srv.requests), 1, "streamed GetObject: one request");
    CHECK_EQ(got, 100, "the sink got the bytes that came");

    /* An answer before any byte reached the sink is retried even when streamed. */
    atomic_store(&srv.mode, ANSWER_503);
    atomic_store(&srv.requests, 0);
    got = 0;
    rc = s3x_get_object_stream(c, "bucket", "key", -1, -1, sink, NULL, &got);
    CHECK_EQ(rc, S3X_EHTTP, "streamed GetObject answered 503");
    CHECK_EQ(atomic_load(&srv.requests), 3, "streamed GetObject with nothing written: max_attempts requests");
    CHECK_EQ(got, 0, "the error body never reached the sink");

    s3x_client_free(c);
    server_stop(&srv);
    return tap_summary("test_single_op_replay");
}
