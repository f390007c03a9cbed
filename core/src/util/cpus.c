/* CPUs this process may use, and the receiving threads picked from them
 * (cpus.h). */
#include "cpus.h"
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ceil(quota / period) for a positive quota and period, else 0. */
static int quota_cpus(long long quota, long long period) {
    if (quota <= 0 || period <= 0) return 0;
    long long n = quota / period + (quota % period != 0);
    return n > 1 << 20 ? 1 << 20 : (int)n;
}

int s3x_cpu_max_cpus(const char *cpu_max) {
    if (!cpu_max) return 0;
    long long quota, period;
    char extra;
    if (sscanf(cpu_max, "%lld %lld %c", &quota, &period, &extra) != 2) return 0; /* "max ..." too */
    return quota_cpus(quota, period);
}

/* The first line of the file at path, NUL-terminated, into buf; 0 if read. */
static int read_line(const char *path, char *buf, size_t len) {
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    int ok = fgets(buf, (int)len, f) != NULL;
    fclose(f);
    return ok ? 0 : -1;
}

static int min_limit(int a, int b) { return !a ? b : !b ? a : a < b ? a : b; }

/* The limit at dir (one cgroup's directory): v2's cpu.max, or v1's quota
 * over its period. 0 when it has none or its files are not there. */
static int limit_at(const char *dir, int v2) {
    char path[4096], a[128], b[128];
    if (v2) {
        if (snprintf(path, sizeof path, "%s/cpu.max", dir) >= (int)sizeof path) return 0;
        return read_line(path, a, sizeof a) ? 0 : s3x_cpu_max_cpus(a);
    }
    if (snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir) >= (int)sizeof path || read_line(path, a, sizeof a))
        return 0;
    if (snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir) >= (int)sizeof path || read_line(path, b, sizeof b))
        return 0;
    return quota_cpus(strtoll(a, NULL, 10), strtoll(b, NULL, 10));
}

/* The tightest limit from mount/cg up to mount, or mount's own when the
 * path is not under it (a container's own cgroup mounted as the root). */
static int walk_up(const char *mount, const char *cg, int v2) {
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s%s", mount, cg) >= (int)sizeof dir) return 0;
    size_t root = strlen(mount);
    if (access(dir, F_OK)) dir[root] = '\0';
    int best = 0;
    for (;;) {
        best = min_limit(best, limit_at(dir, v2));
        char *slash = strrchr(dir + root, '/');
        if (!slash) break;
        *slash = '\0';
    }
    return best;
}

int s3x_cgroup_cpus(const char *proc_cgroup, const char *fs_root) {
    if (!proc_cgroup || !fs_root) return 0;
    int best = 0;
    const char *line = proc_cgroup;
    while (*line) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        char buf[4096];
        if (n < sizeof buf) {
            memcpy(buf, line, n);
            buf[n] = '\0';
            /* "ID:CONTROLLERS:PATH"; the path may itself hold ':'. */
            char *c1 = strchr(buf, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
            if (c2 && c2[1] == '/') {
                *c1 = '\0';
                *c2 = '\0';
                const char *ctl = c1 + 1, *cg = c2 + 1;
                if (!strcmp(cg, "/")) cg = "";
                char mount[4096];
                if (!*ctl && !strcmp(buf, "0")) {
                    /* cgroup v2: the unified hierarchy, at the root or (hybrid) under unified/. */
                    best = min_limit(best, walk_up(fs_root, cg, 1));
                    if (snprintf(mount, sizeof mount, "%s/unified", fs_root) < (int)sizeof mount)
                        best = min_limit(best, walk_up(mount, cg, 1));
                } else {
                    /* cgroup v1: the cpu controller, alone or with cpuacct. */
                    int has_cpu = 0;
                    for (const char *p = ctl; *p;) {
                        size_t k = strcspn(p, ",");
                        if (k == 3 && !strncmp(p, "cpu", 3)) has_cpu = 1;
                        p += k + (p[k] == ',');
                    }
                    static const char *const dirs[] = {"cpu", "cpu,cpuacct", "cpuacct,cpu"};
                    for (size_t i = 0; has_cpu && i < sizeof dirs / sizeof *dirs; i++)
                        if (snprintf(mount, sizeof mount, "%s/%s", fs_root, dirs[i]) < (int)sizeof mount &&
                            !access(mount, F_OK))
                            best = min_limit(best, walk_up(mount, cg, 0));
                }
            }
        }
        if (!end) break;
        line = end + 1;
    }
    return best;
}

int s3x_cpus_available(void) {
    int n = 0;
    cpu_set_t set;
    if (!sched_getaffinity(0, sizeof set, &set)) n = CPU_COUNT(&set);
    if (n < 1) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        n = online > 0 ? (online > 1 << 20 ? 1 << 20 : (int)online) : 1;
    }
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (f) {
        char text[16384];
        size_t got = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        text[got] = '\0';
        int limit = s3x_cgroup_cpus(text, "/sys/fs/cgroup");
        if (limit > 0 && limit < n) n = limit;
    }
    return n;
}

int s3x_auto_receive_threads(int cpus) {
    int n = cpus / 2;
    return n < 1 ? 1 : n > 8 ? 8 : n;
}
