"""Servers that cost almost nothing, for benchmarks/client_limit.py: one nginx
(plain and TLS ports) that serves files with Range support and answers the
multipart-upload calls with fixed responses, `rclone serve s3` with a memory
backend, and an iperf3 server. Each runs from a temp dir of its own on
127.0.0.1 ports picked here, never as the system's service, and is stopped by
stop_all() (registered with atexit and on SIGTERM/SIGINT by the caller).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time

import benchlib as B

_STARTED = []  # Popen objects of every server started here


def free_port():
    """A port free on 127.0.0.1 now (the kernel's pick); the server binds it just after."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before listening on 127.0.0.1:{port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {timeout:.0f} s")


def _start(cmd, what, port, log_path, env=None):
    log = open(log_path, "ab")
    # A session of its own: a Ctrl-C in the terminal reaches the harness,
    # which then stops the servers in order, instead of killing them under
    # a run that is still being measured.
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                         start_new_session=True)
    log.close()
    _STARTED.append(p)
    wait_port(port, p, what)
    return p


def stop_all():
    while _STARTED:
        p = _STARTED.pop()
        if p.poll() is None:
            p.terminate()  # nginx: fast shutdown; iperf3, rclone: exit
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


# ---- packages ------------------------------------------------------------------
def ensure_apt(tools):
    """{tool: None or why missing} for nginx and iperf3, installed with apt-get
    (Debian's nginx-light, else nginx; iperf3) when missing and we are root."""
    want = {"nginx": ["nginx-light", "nginx"], "iperf3": ["iperf3"]}
    status = {}
    updated = False
    for tool in tools:
        if shutil.which(tool) or os.path.exists(f"/usr/sbin/{tool}"):
            status[tool] = None
            continue
        if os.geteuid() != 0:
            status[tool] = f"{tool} not installed (apt-get needs root)"
            continue
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        if not updated:
            subprocess.run(["apt-get", "update", "-q"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            updated = True
        why = f"apt-get install {want[tool][0]} failed"
        for pkg in want[tool]:
            B.log(f"bench: apt-get install {pkg}")
            r = subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", pkg], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if r.returncode == 0:
                why = None
                break
            why = f"apt-get install {pkg}: " + (r.stdout.strip().splitlines() or ["?"])[-1]
        if why is None and tool == "nginx":
            # The Debian package starts the system's service; ours runs from a temp
            # dir, on ports of its own, so that one is not needed.
            subprocess.run(["systemctl", "disable", "--now", "nginx"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        status[tool] = why
    return status


def nginx_bin():
    return shutil.which("nginx") or "/usr/sbin/nginx"


# ---- TLS ---------------------------------------------------------------------------
def make_certs(d):
    """A CA of our own and a server certificate it signs (SAN IP:127.0.0.1,
    DNS:localhost). A separate CA, not one self-signed leaf: rustls/webpki
    (obstore) rejects a CA certificate presented as the server's own."""
    ca_key, ca, key, csr, crt = (os.path.join(d, n) for n in ("ca.key", "ca.pem", "server.key", "server.csr",
                                                                "server.pem"))
    ext = os.path.join(d, "server.ext")
    with open(ext, "w") as f:
        f.write("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n")

    def run(*cmd):
        subprocess.run(["openssl", *cmd], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", ca_key,
        "-out", ca, "-days", "2", "-subj", "/CN=s3xfer client_limit test CA")
    run("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key,
        "-out", csr, "-subj", "/CN=localhost")
    run("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", crt, "-days", "2",
        "-extfile", ext)
    return {"ca": ca, "cert": crt, "key": key}


# ---- nginx -------------------------------------------------------------------------
# The upload answers. UploadId and ETags are fixed: no client compares a part's
# ETag with anything but what CompleteMultipartUpload sends back.
INITIATE = ('<?xml version="1.0" encoding="UTF-8"?>\n<InitiateMultipartUploadResult '
            'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>$bucket</Bucket><Key>$key</Key>'
            '<UploadId>limit-upload-1</UploadId></InitiateMultipartUploadResult>')
COMPLETE = ('<?xml version="1.0" encoding="UTF-8"?>\n<CompleteMultipartUploadResult '
            'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Location>http://127.0.0.1/$bucket/$key</Location>'
            '<Bucket>$bucket</Bucket><Key>$key</Key><ETag>"3858f62230ac3c915f300c664312c11f-1"</ETag>'
            '</CompleteMultipartUploadResult>')
PART_ETAG = '"3858f62230ac3c915f300c664312c11f"'


def nginx_conf(d, www, port, tls_port, certs, echo_module, head_headers=()):
    """nginx.conf: GET/HEAD of /BUCKET/KEY from `www` (Range, ETag,
    Last-Modified, Content-Length as nginx gives them for a static file),
    POST ?uploads / POST ?uploadId / PUT answered with fixed responses, bodies
    read and thrown away. The same server on `port` (http) and `tls_port`
    (TLS 1.3 only). head_headers: (uri, header, value) triples, the header
    sent in the answers to a HEAD of that uri only (as S3 sends a
    full-object checksum to a HEAD and not with a range)."""
    # A body must be read before the answer goes out: nginx's own discard
    # answers at once and reads the rest afterwards, and a client that sees a
    # 200 before it has sent its part may stop sending. The echo module's
    # echo_read_request_body reads it all first (into a buffer of its size);
    # without the module, fall back to nginx's discard.
    if echo_module:
        read_body = "echo_read_request_body;"
        empty = "echo_status 200;"
        initiate, complete = (f"echo_status 200; echo '{x}';" for x in (INITIATE, COMPLETE))
    else:
        read_body, empty = "", "return 200;"
        initiate, complete = (f"return 200 '{x}';" for x in (INITIATE, COMPLETE))
    load = f"load_module {echo_module};" if echo_module else ""
    names = sorted({h for _, h, _ in head_headers})
    maps = "".join(
        f"    map \"$request_method $uri\" $head_hdr_{i} {{\n"
        + "".join(f"        \"HEAD {u}\" \"{v}\";\n" for u, h, v in head_headers if h == name)
        + "        default \"\";\n    }\n" for i, name in enumerate(names))
    adds = "".join(f"\n            add_header {name} $head_hdr_{i};" for i, name in enumerate(names))
    tls = ""
    if tls_port:
        tls = f"""
        listen 127.0.0.1:{tls_port} ssl;
        ssl_certificate {certs['cert']};
        ssl_certificate_key {certs['key']};
        ssl_protocols TLSv1.3;
        ssl_session_cache shared:tls:1m;"""
    conf = f"""{load}
worker_processes 2;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 256; }}
http {{
    types {{ }}
    default_type application/octet-stream;
    log_format limit '$request_method $uri $status $request_length $bytes_sent $ssl_protocol $ssl_cipher';
    access_log {d}/access.log limit;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 100000;
    keepalive_timeout 120s;
    client_max_body_size 0;
    client_body_buffer_size 16m;
    server_tokens off;
{maps}    server {{
        listen 127.0.0.1:{port};{tls}
        root {www};
        # The bucket itself: HeadBucket (s3xfer checks the bucket before an
        # upload) and an empty listing; nginx would redirect /limit to /limit/.
        location ~ ^/(?<bucket>[^/]+)/?$ {{
            if ($request_method = HEAD) {{
                return 200;
            }}
            return 200 '<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>$bucket</Name><Prefix></Prefix><KeyCount>0</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated></ListBucketResult>';
        }}
        location ~ ^/(?<bucket>[^/]+)/(?<key>.+)$ {{{adds}
            set $mpu "";
            if ($arg_uploadId) {{
                set $mpu "$request_method";
            }}
            # PutObject (no partNumber: curl -T of the whole file): nginx's
            # own discard, which answers at once and reads the rest after;
            # reading a 1 GiB body first would put it in a temp file.
            set $put "$request_method:$arg_partNumber";
            if ($put = "PUT:") {{
                add_header ETag '{PART_ETAG}' always;
                return 200;
            }}
            if ($request_method = PUT) {{
                {read_body}
                add_header ETag '{PART_ETAG}' always;
                {empty}
            }}
            if ($args ~ "(^|&)uploads(=|&|$)") {{
                {read_body}
                {initiate}
            }}
            if ($mpu = POST) {{
                {read_body}
                {complete}
            }}
            if ($request_method = DELETE) {{
                return 204;
            }}
        }}
    }}
}}
"""
    path = os.path.join(d, "nginx.conf")
    with open(path, "w") as f:
        f.write(conf)
    for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
        # nginx's workers run as nobody: they write bodies there.
        os.chmod(os.path.join(d, sub), 0o777)
    return path


def echo_module_path():
    for p in ("/usr/lib/nginx/modules/ngx_http_echo_module.so",):
        if os.path.exists(p):
            return p
    return None


def start_nginx(d, www, tls, certs=None, echo=True, head_headers=()):
    """Starts nginx -p d -c d/nginx.conf in the foreground (daemon off, so its
    master is our child); returns {"http": port, "https": port or None, ...}.
    head_headers: see nginx_conf."""
    port = free_port()
    tls_port = free_port() if tls else None
    while tls_port == port:
        tls_port = free_port()
    mod = echo_module_path() if echo else None
    conf = nginx_conf(d, www, port, tls_port, certs, mod, head_headers)
    r = subprocess.run([nginx_bin(), "-t", "-p", d, "-c", conf, "-e", os.path.join(d, "error.log")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode:
        raise RuntimeError(f"nginx -t: {r.stdout.strip()[-500:]}")
    p = _start([nginx_bin(), "-p", d, "-c", conf, "-e", os.path.join(d, "error.log"), "-g", "daemon off;"],
               "nginx", port, os.path.join(d, "nginx.out"))
    if tls_port:
        wait_port(tls_port, p, "nginx (TLS)")
    return {"http": port, "https": tls_port, "proc": p, "access_log": os.path.join(d, "access.log"),
            "echo": bool(mod), "version": subprocess.run([nginx_bin(), "-v"], stderr=subprocess.PIPE,
                                                         text=True).stderr.strip()}


def tree_cpu(pid):
    """CPU seconds (user+sys) that process pid and its live children (nginx's
    workers) have used so far, from /proc; None when pid is gone."""
    tick = os.sysconf("SC_CLK_TCK")

    def stat(q):
        try:
            with open(f"/proc/{q}/stat") as f:
                f_ = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return int(f_[1]), (int(f_[11]) + int(f_[12])) / tick  # ppid, utime + stime

    own = stat(pid)
    if own is None:
        return None
    total = own[1]
    for q in os.listdir("/proc"):
        if q.isdigit() and int(q) != pid:
            st = stat(q)
            if st and st[0] == pid:
                total += st[1]
    return total


def version_of(cmd):
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=20)
        return (r.stdout.strip().splitlines() or [""])[0]
    except (OSError, subprocess.TimeoutExpired):
        return ""


# ---- rclone serve s3 -----------------------------------------------------------
def start_rclone_s3(d, rclone, ak, sk):
    """`rclone serve s3` over a memory backend (objects live in its RAM) on a
    free port, with our keys (it checks signatures)."""
    port = free_port()
    cfg = os.path.join(d, "rclone.conf")
    open(cfg, "a").close()
    env = dict(os.environ, RCLONE_CONFIG=cfg)
    p = _start([rclone, "serve", "s3", ":memory:", "--addr", f"127.0.0.1:{port}", "--auth-key", f"{ak},{sk}",
                "--force-path-style=true", "-q"], "rclone serve s3", port, os.path.join(d, "rclone.out"), env=env)
    return {"http": port, "proc": p}


# ---- iperf3 --------------------------------------------------------------------------
def start_iperf3(d):
    port = free_port()
    p = _start(["iperf3", "-s", "-B", "127.0.0.1", "-p", str(port)], "iperf3 -s", port,
               os.path.join(d, "iperf3.out"))
    return {"port": port, "proc": p}


def install_signal_handlers():
    """SIGTERM (and SIGINT, already KeyboardInterrupt) unwind through the
    caller's finally/atexit, which stops every server."""
    def on_term(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_term)


def serve_object(size, prefix):
    """nginx (plain and TLS, a CA of the run's own) serving `size` random
    bytes as /bkt/obj from a fresh tmpfs dir, both removed and stopped at
    exit: (dir, the start_nginx dict, the make_certs dict, the object's path)."""
    import atexit
    import tempfile
    ensure_apt(["nginx"])
    d = tempfile.mkdtemp(prefix=prefix, dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    os.chmod(d, 0o755)  # nginx's workers run as another user and must read the object
    atexit.register(shutil.rmtree, d, True)
    atexit.register(stop_all)
    install_signal_handlers()
    www = os.path.join(d, "www")
    os.makedirs(os.path.join(www, "bkt"))
    src = os.path.join(www, "bkt", "obj")
    os.replace(B.make_file(d, size)[0], src)
    os.chmod(src, 0o644)
    certs = make_certs(d)
    return d, start_nginx(d, www, True, certs), certs, src
