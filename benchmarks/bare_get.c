/* The cheapest HTTP download client this machine can run: a reference for
 * benchmarks/client_limit.py (runner bare-get-null), not a part of s3xfer.
 *
 *     bare_get HOST PORT PATH SIZE PART_SIZE CONCURRENCY [discard|copy]
 *
 * One thread and poll(2), like s3xfer's loop: CONCURRENCY keep-alive
 * connections, each asking for the next PART_SIZE range of PATH when its
 * last one is done (GET with Range, plain HTTP/1.1), every body received
 * with recv(2) into one 256 KiB buffer and thrown away (discard), or
 * copied from it into a buffer of PART_SIZE per range in flight (copy: the
 * one copy a client that puts the ranges in order makes, and nothing
 * else). No TLS, no signature, no retry: an answer that is not 206 with a
 * Content-Length of the range, a short body or a closed connection ends
 * the run with status 1. Prints the body bytes received; the caller checks
 * them against SIZE. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define RECV_BUF (256 * 1024)
#define MAX_CONN 64
#define HEAD_MAX 8192

typedef struct conn {
    int fd;
    int64_t off, len;   /* the range asked for; len 0: idle */
    int64_t got;        /* body bytes of it received */
    int in_body;
    char head[HEAD_MAX];
    size_t head_n;
    char *part;         /* copy mode: the range's buffer */
} conn;

/* Ends the run: what failed, and errno's reason when a call failed (0 for a
 * bad answer, which the callers clear errno for). */
static int die(const char *what) {
    fprintf(stderr, "bare_get: %s: %s\n", what, errno ? strerror(errno) : "bad answer");
    return 1;
}

static int bad(const char *what) {
    errno = 0;
    return die(what);
}

static int send_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int ask(conn *c, const char *host, const char *path, int64_t off, int64_t len) {
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: %s\r\nRange: bytes=%lld-%lld\r\nUser-Agent: bare_get\r\n\r\n", path,
                     host, (long long)off, (long long)(off + len - 1));
    if (n <= 0 || (size_t)n >= sizeof req) return -1;
    c->off = off;
    c->len = len;
    c->got = 0;
    c->in_body = 0;
    c->head_n = 0;
    return send_all(c->fd, req, (size_t)n);
}

/* The head is complete in c->head (ending at end): 206 and the range's length. */
static int check_head(const conn *c, size_t end) {
    if (end < 12 || strncmp(c->head, "HTTP/1.1 206", 12) != 0) return -1;
    for (const char *p = c->head; p && p < c->head + end; p = memchr(p, '\n', (size_t)(c->head + end - p))) {
        if (*p == '\n') p++;
        if (!strncasecmp(p, "Content-Length:", 15)) return strtoll(p + 15, NULL, 10) == c->len ? 0 : -1;
    }
    return -1;
}

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: bare_get HOST PORT PATH SIZE PART_SIZE CONCURRENCY [discard|copy]\n");
        return 2;
    }
    const char *host = argv[1], *path = argv[3];
    int port = atoi(argv[2]), nc = atoi(argv[6]);
    int64_t size = strtoll(argv[4], NULL, 10), ps = strtoll(argv[5], NULL, 10);
    int copy = argc > 7 && !strcmp(argv[7], "copy");
    if (nc < 1 || nc > MAX_CONN || size <= 0 || ps <= 0) return 2;
    static conn cs[MAX_CONN];
    static char buf[RECV_BUF];
    struct pollfd pf[MAX_CONN];
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) return bad("address (an IPv4 literal)");
    int64_t next = 0, total = 0;
    int active = 0;
    for (int i = 0; i < nc && next < size; i++) {
        conn *c = &cs[i];
        int one = 1;
        if ((c->fd = socket(AF_INET, SOCK_STREAM, 0)) < 0) return die("socket");
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) < 0) return die("connect");
        if (copy && !(c->part = malloc((size_t)ps))) return die("malloc");
        int64_t len = size - next < ps ? size - next : ps;
        if (ask(c, host, path, next, len) < 0) return die("send");
        next += len;
        active++;
    }
    while (active) {
        int n = 0;
        for (int i = 0; i < nc; i++)
            if (cs[i].len) pf[n++] = (struct pollfd){.fd = cs[i].fd, .events = POLLIN};
        int ready = poll(pf, (nfds_t)n, 30000);
        if (ready < 0 && errno == EINTR) continue;
        if (ready < 0) return die("poll");
        if (ready == 0) return bad("no answer for 30 s");
        for (int k = 0; k < n; k++) {
            if (!(pf[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            conn *c = NULL;
            for (int i = 0; i < nc; i++)
                if (cs[i].fd == pf[k].fd) c = &cs[i];
            ssize_t r = recv(c->fd, buf, sizeof buf, 0);
            if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (r < 0) return die("recv");
            if (r == 0) return bad("connection closed before the range was complete");
            const char *body = buf;
            size_t bn = (size_t)r;
            if (!c->in_body) {
                /* The head may come in pieces: gather it, find its end. */
                size_t take = bn < HEAD_MAX - c->head_n ? bn : HEAD_MAX - c->head_n;
                memcpy(c->head + c->head_n, buf, take);
                char *e = memmem(c->head, c->head_n + take, "\r\n\r\n", 4);
                if (!e) {
                    if (c->head_n + take == HEAD_MAX) return bad("head too long");
                    c->head_n += take;
                    continue;
                }
                size_t end = (size_t)(e - c->head) + 4, used = end - c->head_n;
                if (check_head(c, end) < 0) return bad("answer");
                c->in_body = 1;
                body = buf + used;
                bn -= used;
            }
            if ((int64_t)bn > c->len - c->got) return bad("body longer than its range");
            if (copy) memcpy(c->part + c->got, body, bn);
            c->got += (int64_t)bn;
            total += (int64_t)bn;
            if (c->got < c->len) continue;
            if (next < size) {
                int64_t len = size - next < ps ? size - next : ps;
                if (ask(c, host, path, next, len) < 0) return die("send");
                next += len;
            } else {
                c->len = 0;
                active--;
            }
        }
    }
    printf("%lld\n", (long long)total);
    return 0;
}
