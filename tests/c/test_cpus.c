/* CPUs this process may use (core/src/util/cpus.c): cgroup CPU limits, read
 * from a file tree of the test's own, and the receiving threads picked from
 * the count (S3X_PARAM_RECEIVE_THREADS = 0). */
#include "cpus.h"
#include "client_internal.h"
#include "s3xfer/s3xfer.h"
#include "tap.h"
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_root[] = "/tmp/s3x-test-cpus-XXXXXX";

/* Writes text to ROOT/rel, making the directories on the way. */
static void put(const char *rel, const char *text) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", g_root, rel);
    for (char *p = path + strlen(g_root) + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0755);
            *p = '/';
        }
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}

static void test_cpu_max(void) {
    CHECK_INTEQ(s3x_cpu_max_cpus("max 100000\n"), 0, "no quota");
    CHECK_INTEQ(s3x_cpu_max_cpus("200000 100000\n"), 2, "two CPUs");
    CHECK_INTEQ(s3x_cpu_max_cpus("150000 100000"), 2, "1.5 CPUs round up");
    CHECK_INTEQ(s3x_cpu_max_cpus("50000 100000\n"), 1, "half a CPU is one");
    CHECK_INTEQ(s3x_cpu_max_cpus("400000 100000 7\n"), 0, "three fields: not cpu.max");
    CHECK_INTEQ(s3x_cpu_max_cpus("-1 100000\n"), 0, "a negative quota is none");
    CHECK_INTEQ(s3x_cpu_max_cpus("100000 0\n"), 0, "a zero period is none");
    CHECK_INTEQ(s3x_cpu_max_cpus("9223372036854775807 1\n"), 1 << 20, "a huge quota is capped, not overflowed");
    CHECK_INTEQ(s3x_cpu_max_cpus(""), 0, "empty");
    CHECK_INTEQ(s3x_cpu_max_cpus(NULL), 0, "NULL");
}

static void test_v2(void) {
    /* The process's cgroup allows 6, its parent 3: the parent binds. */
    put("v2/cpu.max", "max 100000\n");
    put("v2/kube/cpu.max", "300000 100000\n");
    put("v2/kube/pod/cpu.max", "600000 100000\n");
    char root[1024];
    snprintf(root, sizeof root, "%s/v2", g_root);
    CHECK_INTEQ(s3x_cgroup_cpus("0::/kube/pod\n", root), 3, "v2: the tightest of own and parents");
    CHECK_INTEQ(s3x_cgroup_cpus("0::/\n", root), 0, "v2: the root has no limit");
    /* Inside a container the path is the host's and not under the mount:
     * the mount's root is the container's own cgroup. */
    put("v2c/cpu.max", "250000 100000\n");
    snprintf(root, sizeof root, "%s/v2c", g_root);
    CHECK_INTEQ(s3x_cgroup_cpus("0::/system.slice/docker-1.scope\n", root), 3, "v2: the container's root");
    /* Hybrid: v2 under unified/, no limit there. */
    put("hy/unified/cgroup.procs", "");
    snprintf(root, sizeof root, "%s/hy", g_root);
    CHECK_INTEQ(s3x_cgroup_cpus("0::/\n1:cpu:/\n", root), 0, "hybrid without limits");
}

static void test_v1(void) {
    put("v1/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
    put("v1/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    put("v1/cpu,cpuacct/job/cpu.cfs_quota_us", "350000\n");
    put("v1/cpu,cpuacct/job/cpu.cfs_period_us", "100000\n");
    char root[1024];
    snprintf(root, sizeof root, "%s/v1", g_root);
    const char *cg = "12:memory:/job\n4:cpu,cpuacct:/job\n0::/\n";
    CHECK_INTEQ(s3x_cgroup_cpus(cg, root), 4, "v1: 3.5 CPUs of quota is 4");
    CHECK_INTEQ(s3x_cgroup_cpus("4:cpuacct:/job\n", root), 0, "v1: cpuacct alone is not the cpu controller");
    CHECK_INTEQ(s3x_cgroup_cpus("4:cpu,cpuacct:/\n", root), 0, "v1: no quota at the root");
    CHECK_INTEQ(s3x_cgroup_cpus("garbage\n::\n:::\n", root), 0, "lines without a path");
    /* Both hierarchies: the tighter wins. */
    put("both/cpu/cpu.cfs_quota_us", "800000\n");
    put("both/cpu/cpu.cfs_period_us", "100000\n");
    put("both/unified/a/cpu.max", "200000 100000\n");
    snprintf(root, sizeof root, "%s/both", g_root);
    CHECK_INTEQ(s3x_cgroup_cpus("0::/a\n3:cpu:/\n", root), 2, "v1 8 and v2 2: 2");
}

static void test_auto_rule(void) {
    static const int want[][2] = {{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 2}, {5, 2}, {8, 4}, {16, 8}, {96, 8}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        CHECK_INTEQ(s3x_auto_receive_threads(want[i][0]), want[i][1], "receiving threads for the CPUs");
}

static void test_available(void) {
    cpu_set_t set;
    CHECK(!sched_getaffinity(0, sizeof set, &set), "affinity readable");
    int mask = CPU_COUNT(&set), n = s3x_cpus_available();
    CHECK(n >= 1 && n <= mask, "available %d within 1 .. the mask's %d", n, mask);
    /* One CPU in the mask: one available, and auto is one thread. */
    cpu_set_t one;
    CPU_ZERO(&one);
    for (int i = 0; i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, &set)) {
            CPU_SET(i, &one);
            break;
        }
    CHECK(!sched_setaffinity(0, sizeof one, &one), "pinned to one CPU");
    CHECK_INTEQ(s3x_cpus_available(), 1, "one CPU in the mask");
    s3x_client *c = NULL;
    CHECK(!s3x_client_new(&c), "client");
    int64_t v = -1;
    CHECK(!s3x_client_get(c, S3X_PARAM_RECEIVE_THREADS, &v) && v == 0, "the knob's default is 0 (auto): %lld",
          (long long)v);
    CHECK_INTEQ(s3x_client_receive_threads(c), 1, "auto on one CPU");
    CHECK(!s3x_client_set(c, S3X_PARAM_RECEIVE_THREADS, 3), "set 3");
    CHECK_INTEQ(s3x_client_receive_threads(c), 3, "a value set is used as it is");
    CHECK(!s3x_client_set(c, S3X_PARAM_RECEIVE_THREADS, 0), "back to auto");
    CHECK_INTEQ(s3x_client_receive_threads(c), 1, "auto again");
    CHECK(s3x_client_set(c, S3X_PARAM_RECEIVE_THREADS, -1) != 0, "-1 is refused");
    CHECK(s3x_client_set(c, S3X_PARAM_RECEIVE_THREADS, 9) != 0, "9 is refused");
    s3x_client_free(c);
    CHECK(!sched_setaffinity(0, sizeof set, &set), "affinity restored");
    CHECK_INTEQ(s3x_cpus_available(), n, "the same count as before");
    s3x_error_clear();
}

int main(void) {
    if (!mkdtemp(g_root)) {
        perror("mkdtemp");
        return 1;
    }
    test_cpu_max();
    test_v2();
    test_v1();
    test_auto_rule();
    test_available();
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    if (system(cmd) != 0) printf("# could not remove %s\n", g_root);
    return tap_summary("test_cpus");
}
