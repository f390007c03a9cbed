/* s3xfer CLI: SIGINT, SIGTERM and SIGHUP.
 *
 * The handler only writes the signal number to a pipe; a thread of ours reads
 * it and decides. That thread may take a lock and call the library, which a
 * handler may not: the lock is what makes "is a transfer running? then cancel
 * it" safe against the main thread ending and freeing that transfer, and a
 * handler would run on whichever thread the kernel picked, the library's
 * writer thread included. Every other thread blocks these signals (they
 * inherit the main thread's mask), so they land on our thread, and the
 * library's own system calls never see EINTR. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const int g_sigs[] = {SIGINT, SIGTERM, SIGHUP};

static int g_sigpipe[2] = {-1, -1}; /* handler -> signal thread */
static int g_wake[2] = {-1, -1};    /* signal thread -> the tool's blocking stream I/O */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static s3x_upload *g_upload;     /* the transfer running now, under g_lock */
static s3x_download *g_download;
static s3x_bulk *g_bulk;
static int g_signalled;          /* the first signal, under g_lock */

const char *cli_signal_name(int sig) {
    switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "a signal";
    }
}

static void on_signal(int sig) {
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    ssize_t w = write(g_sigpipe[1], &b, 1);
    (void)w; /* a full pipe already holds a signal for the thread */
    errno = saved;
}

static void say(const char *a, const char *b, const char *c) {
    const char *parts[] = {cli_prog, ": ", a, b, c, "\n"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        const char *s = parts[i];
        size_t n = strlen(s);
        while (n) {
            ssize_t w = write(STDERR_FILENO, s, n);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) return;
            s += w;
            n -= (size_t)w;
        }
    }
}

static void *signal_thread(void *arg) {
    (void)arg;
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < sizeof g_sigs / sizeof g_sigs[0]; i++) sigaddset(&set, g_sigs[i]);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    for (;;) {
        unsigned char b;
        ssize_t r = read(g_sigpipe[0], &b, 1);
        if (r < 0 && errno == EINTR) continue;
        if (r != 1) return NULL;
        int sig = b;
        pthread_mutex_lock(&g_lock);
        int busy = g_upload || g_download || g_bulk;
        if (busy && !g_signalled) {
            g_signalled = sig;
            if (g_upload) s3x_upload_cancel(g_upload);
            if (g_download) s3x_download_cancel(g_download);
            if (g_bulk) s3x_bulk_cancel(g_bulk);
            ssize_t w = write(g_wake[1], "x", 1);
            (void)w; /* the pipe is new and never read: it has room */
            pthread_mutex_unlock(&g_lock);
            continue;
        }
        /* Exiting with the lock held: no transfer can start meanwhile (a
         * multipart upload created now would be left behind). */
        if (busy)
            say(cli_signal_name(sig), ": a second signal: exiting without waiting for the cancelled transfer",
                " to clean up");
        else
            say("interrupted by ", cli_signal_name(sig), "");
        _exit(128 + sig);
    }
}

int cli_signals_start(void) {
    if (pipe2(g_sigpipe, O_CLOEXEC) || pipe2(g_wake, O_CLOEXEC | O_NONBLOCK)) {
        fprintf(stderr, "%s: cannot create a pipe: %s\n", cli_prog, strerror(errno));
        return -1;
    }
    /* The handler must never block: a full pipe means a signal is pending. */
    fcntl(g_sigpipe[1], F_SETFL, fcntl(g_sigpipe[1], F_GETFL) | O_NONBLOCK);
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < sizeof g_sigs / sizeof g_sigs[0]; i++) sigaddset(&set, g_sigs[i]);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigfillset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof g_sigs / sizeof g_sigs[0]; i++) sigaction(g_sigs[i], &sa, NULL);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int e = pthread_create(&t, &attr, signal_thread, NULL);
    pthread_attr_destroy(&attr);
    if (e) {
        fprintf(stderr, "%s: cannot start the signal thread: %s\n", cli_prog, strerror(e));
        return -1;
    }
    return 0;
}

int cli_transfer_begin(s3x_upload *u, s3x_download *d) {
    pthread_mutex_lock(&g_lock);
    int sig = g_signalled;
    if (!sig) {
        g_upload = u;
        g_download = d;
    }
    pthread_mutex_unlock(&g_lock);
    return sig;
}

int cli_bulk_begin(s3x_bulk *b) {
    pthread_mutex_lock(&g_lock);
    int sig = g_signalled;
    if (!sig) g_bulk = b;
    pthread_mutex_unlock(&g_lock);
    return sig;
}

int cli_transfer_end(void) {
    pthread_mutex_lock(&g_lock);
    g_bulk = NULL;
    g_upload = NULL;
    g_download = NULL;
    int sig = g_signalled;
    pthread_mutex_unlock(&g_lock);
    return sig;
}

int cli_signal_fd(void) { return g_wake[0]; }
