#!/usr/bin/env python3
"""Where a transfer's CPU goes: kernel page allocation, network, crypto, copies, ours.

Runs each command under `perf record -e cpu-clock -g` (software clock: it works
in VMs without hardware counters), then sorts every sample into one category by
its leaf frame and the system call on its stack, and prints CPU seconds per GiB
moved for each category. Commands are given as LABEL=SHELL-COMMAND and run in
interleaved rounds (round i starts with command i mod n); the figures are medians.

    benchmarks/cpu_profile.py --gib 1 --rounds 3 \\
        'curl=curl -s -o /dev/null http://127.0.0.1:8080/bkt/obj' \\
        's3xfer=build-bench/s3xfer cp s3://bkt/obj - >/dev/null'

With --serve SIZE it starts nginx itself (limit_servers.py, as client_limit.py
does: plain and TLS 1.3 with a CA of its own, 127.0.0.1, stopped at exit),
serving SIZE random bytes as /bkt/obj and answering multipart uploads, and
fills in {http}, {https} (the endpoints), {ca} (the CA file), {src} (the
object's bytes, a file in /dev/shm to upload) and {dst} (a path in /dev/shm
for a download, removed before each run) in every command; --gib is then SIZE.
The keys and region for an S3 client are in the environment
(AWS_ACCESS_KEY_ID=limit ..., AWS_CA_BUNDLE={ca}).

    benchmarks/cpu_profile.py --serve 1GiB \\
        's3xfer-tls=build-bench/s3xfer --endpoint-url {https} cp s3://bkt/obj - >/dev/null' \\
        'curl-tls=curl -s --cacert {ca} -o /dev/null {https}/bkt/obj'

Categories (the first rule that matches wins):
  page-fault      a page fault anywhere on the stack (first touch of memory)
  page-alloc      inside a file write, allocating page-cache pages
                  (shmem/filemap folio allocation, clearing pages, memcg charge)
  file-write      the rest of pwrite/write to a file (the copy into the page cache)
  writeback       fsync, sync_file_range, fdatasync
  file-read       pread/read of a file (uploads)
  net-recv        recv/read on a socket (the copy out of the socket, TCP receive)
  net-send        send/write on a socket
  poll            poll/epoll/select
  threads         futex, clone, exit, mmap/munmap/madvise, scheduling syscalls
  syscall-other   any other system call
  kernel-other    kernel work with no system call on the stack (softirq, timers)
  crypto          libcrypto / libssl (TLS records, AES-GCM, SHA-256)
  user-copy       memcpy/memmove in libc
  libcurl         libcurl's own code
  s3xfer          libs3xfer / the s3xfer executable
  python          the Python interpreter
  user-other      everything else in user space
The user-space stacks of Debian's libraries have no frame pointers, so a copy in
libc cannot be told from whose copy it was: compare against a peer (curl) that
does no copy of its own.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

CATS = ["page-fault", "page-alloc", "file-write", "writeback", "file-read", "net-recv", "net-send",
        "poll", "threads", "syscall-other", "kernel-other", "crypto", "user-copy", "libcurl", "s3xfer",
        "python", "user-other"]

ALLOC_MARKS = ("shmem_alloc", "alloc_pages", "clear_page", "folio_alloc", "__filemap_add_folio",
               "shmem_add_to_page_cache", "charge_memcg", "__mem_cgroup_charge", "get_page_from_freelist",
               "shmem_inode_acct", "__dquot_alloc", "memcg1_commit_charge", "__folio_batch_add_and_move")
# A write or read on a socket (not softirq work that happened to run inside a file write).
SOCK_MARKS = ("sock_write_iter", "sock_read_iter", "tcp_sendmsg", "tcp_recvmsg", "unix_stream_sendmsg",
              "unix_stream_recvmsg")
# Kernel functions that say which system call a stack is in. The x64 wrappers
# (__x64_sys_write) are often inlined away, so the layer below them is named.
SYSCALL_MARKS = [
    ("writeback", ("vfs_fsync_range", "do_fsync", "ksys_sync_file_range", "sync_file_range",
                   "__x64_sys_fsync", "__x64_sys_fdatasync")),
    ("recv", ("__sys_recvfrom", "__sys_recvmsg", "__x64_sys_recvfrom", "__x64_sys_recvmsg")),
    ("send", ("__sys_sendto", "__sys_sendmsg", "__x64_sys_sendto", "__x64_sys_sendmsg")),
    ("write", ("ksys_write", "ksys_pwrite64", "vfs_write", "do_writev", "vfs_writev", "__x64_sys_pwrite64")),
    ("read", ("ksys_read", "ksys_pread64", "vfs_read", "do_readv", "vfs_readv", "__x64_sys_pread64",
              "do_splice", "__do_splice")),
    ("poll", ("do_sys_poll", "do_epoll_wait", "core_sys_select", "do_select")),
    ("threads", ("do_futex", "kernel_clone", "copy_process", "do_exit", "do_group_exit", "vm_mmap_pgoff",
                 "do_mmap", "__vm_munmap", "do_vmi_munmap", "do_madvise", "do_mprotect_pkey",
                 "__x64_sys_futex", "__x64_sys_clone3", "__x64_sys_munmap", "__x64_sys_madvise",
                 "__x64_sys_rt_sigprocmask", "__x64_sys_sched_yield", "__x64_sys_brk")),
]


def ensure_perf():
    if shutil.which("perf"):
        return "perf"
    subprocess.run(["apt-get", "install", "-y", "-q", "linux-perf"], check=True,
                   env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"), stdout=subprocess.DEVNULL)
    return "perf"


def syscall_of(syms):
    for kind, marks in SYSCALL_MARKS:
        if any(s in marks for s in syms):
            return kind
    if any(s in ("do_syscall_64", "entry_SYSCALL_64_after_hwframe") for s in syms):
        return "other"
    return None


def classify(frames):
    """frames: [(sym, dso)] leaf first."""
    syms = [f[0] for f in frames]
    if any(s in ("exc_page_fault", "asm_exc_page_fault") for s in syms):
        return "page-fault"
    leaf_sym, leaf_dso = frames[0]
    if "kernel" in leaf_dso or leaf_dso.startswith("["):
        kind = syscall_of(syms)
        sock = any(s in SOCK_MARKS for s in syms)
        if kind is None:
            return "kernel-other"
        if kind == "write":
            if sock:
                return "net-send"
            return "page-alloc" if any(s.startswith(ALLOC_MARKS) for s in syms) else "file-write"
        if kind == "read":
            return "net-recv" if sock else "file-read"
        return {"writeback": "writeback", "recv": "net-recv", "send": "net-send", "poll": "poll",
                "threads": "threads", "other": "syscall-other"}[kind]
    if "libcrypto" in leaf_dso or "libssl" in leaf_dso:
        return "crypto"
    if "libc.so" in leaf_dso and ("memmove" in leaf_sym or "memcpy" in leaf_sym):
        return "user-copy"
    if "libcurl" in leaf_dso:
        return "libcurl"
    if "libs3xfer" in leaf_dso or leaf_dso.endswith("/s3xfer") or "_s3xfer" in leaf_dso:
        return "s3xfer"
    if "python" in leaf_dso:
        return "python"
    return "user-other"


def parse_script(text):
    counts = dict.fromkeys(CATS, 0)
    frames = []
    frame_re = re.compile(r"^\s+[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$")

    def flush():
        if frames:
            counts[classify(frames)] += 1

    for line in text.splitlines():
        if not line.strip():
            flush()
            frames = []
            continue
        m = frame_re.match(line)
        if m:
            sym = m.group(1)
            sym = sym.split("+0x")[0]
            frames.append((sym, m.group(2)))
        else:
            flush()
            frames = []
    flush()
    return counts


def profile(perf, label, cmd, freq, workdir):
    data = os.path.join(workdir, f"{label}.data")
    r = subprocess.run([perf, "record", "-q", "-e", "cpu-clock", "-F", str(freq), "-g", "-o", data,
                        "--", "sh", "-c", cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise SystemExit(f"cpu_profile: {label}: exit {r.returncode}: {r.stderr.strip()[-400:]}")
    out = subprocess.run([perf, "script", "-i", data, "-F", "ip,sym,dso"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True).stdout
    os.unlink(data)
    counts = parse_script(out)
    # sh itself and perf's own start-up are a few samples; they stay in user-other/threads.
    return {k: v / freq for k, v in counts.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", metavar="LABEL=CMD")
    ap.add_argument("--gib", type=float, default=1.0, help="GiB each command moves (figures are per GiB)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--freq", type=int, default=2000, help="samples per second of CPU (default 2000)")
    ap.add_argument("--before", default="", help="shell command run (untimed) before each run, e.g. rm -f OUT")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    ap.add_argument("--serve", metavar="SIZE", help="start nginx serving SIZE bytes as /bkt/obj (see above)")
    a = ap.parse_args()
    perf = ensure_perf()
    runs = []
    for r in a.runs:
        if "=" not in r:
            ap.error(f"{r!r}: expected LABEL=CMD")
        runs.append(tuple(r.split("=", 1)))
    if a.serve:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import benchlib as B
        import limit_servers as LS
        size = B.parse_size(a.serve)
        a.gib = size / 2**30
        d, srv, certs, src = LS.serve_object(size, "s3x-cpuprof-srv-")
        dst = os.path.join(d, "download.out")
        subst = {"http": f"http://127.0.0.1:{srv['http']}", "https": f"https://127.0.0.1:{srv['https']}",
                 "ca": certs["ca"], "src": src, "dst": dst}
        runs = [(label, cmd.format(**subst)) for label, cmd in runs]
        os.environ.update(AWS_ACCESS_KEY_ID="limit", AWS_SECRET_ACCESS_KEY="limit-secret", AWS_REGION="us-east-1",
                          AWS_EC2_METADATA_DISABLED="true", AWS_CA_BUNDLE=certs["ca"])
        a.before = (a.before + "; " if a.before else "") + f"rm -f {dst}"
    res = {label: [] for label, _ in runs}
    with tempfile.TemporaryDirectory(prefix="s3x-cpuprof-") as wd:
        for i in range(a.rounds):
            for j in range(len(runs)):
                label, cmd = runs[(i + j) % len(runs)]
                if a.before:
                    subprocess.run(a.before, shell=True, check=False)
                res[label].append(profile(perf, label, cmd, a.freq, wd))
                print(f"round {i + 1} {label}: {sum(res[label][-1].values()) / a.gib:.2f} CPU s/GiB", file=sys.stderr)
    med = {label: {c: statistics.median(r[c] for r in rs) / a.gib for c in CATS} for label, rs in res.items()}
    used = [c for c in CATS if any(med[l][c] >= 0.005 for l in med)]
    labels = [l for l, _ in runs]
    w = max(12, max(len(l) for l in labels))
    if a.markdown:
        print("| category | " + " | ".join(labels) + " |")
        print("| --- |" + " ---: |" * len(labels))
        for c in used:
            print(f"| {c} | " + " | ".join(f"{med[l][c]:.2f}" for l in labels) + " |")
        tot = {l: statistics.median(sum(r.values()) for r in res[l]) / a.gib for l in labels}
        print("| **total** | " + " | ".join(f"**{tot[l]:.2f}**" for l in labels) + " |")
    else:
        print("CPU s/GiB".ljust(14) + "".join(l.rjust(w + 2) for l in labels))
        for c in used:
            print(c.ljust(14) + "".join(f"{med[l][c]:.2f}".rjust(w + 2) for l in labels))
        print("total".ljust(14) + "".join(
            f"{statistics.median(sum(r.values()) for r in res[l]) / a.gib:.2f}".rjust(w + 2) for l in labels))
    print(f"(medians of {a.rounds} interleaved rounds, perf cpu-clock at {a.freq} Hz; load average "
          f"{os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
