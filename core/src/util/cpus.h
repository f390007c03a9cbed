/* How many CPUs this process may use (private, libc only): the CPUs of its
 * affinity mask, lowered by a cgroup CPU quota (a container's CPU limit),
 * and the receiving threads a client picks from that count when the caller
 * leaves S3X_PARAM_RECEIVE_THREADS at 0 (auto).
 *
 * The parsing takes text and a directory so the tests can give it files of
 * their own; s3x_cpus_available reads the real ones. */
#ifndef S3X_CPUS_H
#define S3X_CPUS_H

/* CPUs a cgroup v2 `cpu.max` ("QUOTA PERIOD" or "max PERIOD") allows, rounded
 * up; 0 when it sets no limit or cannot be read as either form. */
int s3x_cpu_max_cpus(const char *cpu_max);

/* The tightest CPU limit of the cgroups named in `proc_cgroup` (the text of
 * /proc/self/cgroup), with the cgroup file systems mounted under `fs_root`
 * (normally "/sys/fs/cgroup"): cgroup v2's cpu.max (FS_ROOT/PATH and, in a
 * hybrid layout, FS_ROOT/unified/PATH) and cgroup v1's cpu.cfs_quota_us over
 * cpu.cfs_period_us (FS_ROOT/cpu/PATH or FS_ROOT/cpu,cpuacct/PATH), from the
 * process's own cgroup up to the hierarchy's root (a parent's limit binds its
 * children; inside a container the path may not exist under the mount, whose
 * root is then the container's cgroup). 0: no limit found. */
int s3x_cgroup_cpus(const char *proc_cgroup, const char *fs_root);

/* The CPUs this process may run on: its affinity mask (sched_getaffinity;
 * the online CPUs when that fails), lowered to the cgroup limit when one is
 * set. At least 1. Reads /proc and /sys each time; callers keep the value. */
int s3x_cpus_available(void);

/* Receiving threads for a client with `cpus` CPUs: one for every two, 1 to 8.
 * A thread that receives TLS spends a core decrypting; the other half is left
 * to the writer threads, the caller's thread and the other work of the
 * process. On 2 or 3 CPUs this is 1: on the two-CPU machines measured, a
 * second receiving thread made a download to a file slower on one and moved
 * it by no more than the noise on the other (docs/performance.md, "Two
 * receiving threads"). */
int s3x_auto_receive_threads(int cpus);

#endif
