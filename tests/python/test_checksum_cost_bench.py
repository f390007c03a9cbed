"""benchmarks/checksum_cost.py and the nginx it starts: a HEAD of a key with
a checksum gets its header and nothing else does (a GET, another key), the
CRCs are written in S3's form. The configuration is also checked by
`nginx -t` where nginx is installed (the benchmarks install it; CI does
not); no server is started."""

from __future__ import annotations

import base64
import os
import pathlib
import re
import shutil
import subprocess
import sys
import zlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import checksum_cost  # noqa: E402
import limit_servers  # noqa: E402


def test_head_headers_only_for_a_head_of_their_key(tmp_path):
    heads = [("/bkt/crc32", "x-amz-checksum-crc32", "AAAAAA=="),
             ("/bkt/crc32c", "x-amz-checksum-crc32c", "BBBBBB==")]
    conf = pathlib.Path(limit_servers.nginx_conf(str(tmp_path), str(tmp_path / "www"), 18080, None, None, None,
                                                 heads)).read_text()
    maps = re.findall(r'map "\$request_method \$uri" \$(head_hdr_\d+) \{(.*?)\}', conf, re.S)
    assert len(maps) == 2, conf
    entries = {var: re.findall(r'"([^"]*)" "([^"]*)";', body) for var, body in maps}
    defaults = {var: re.search(r'default "";', body) is not None for var, body in maps}
    assert sorted(entries.values()) == [[("HEAD /bkt/crc32", "AAAAAA==")], [("HEAD /bkt/crc32c", "BBBBBB==")]]
    assert all(defaults.values())
    # each header is added (empty, so not sent, unless the map matched) in the object location
    obj = conf[conf.index("location ~ ^/(?<bucket>[^/]+)/(?<key>.+)$"):]
    for var, body in maps:
        name = "x-amz-checksum-crc32c" if "crc32c" in body else "x-amz-checksum-crc32"
        assert f"add_header {name} ${var};" in obj
    # without head headers the configuration is as before: no map, no add_header of a checksum
    plain = pathlib.Path(limit_servers.nginx_conf(str(tmp_path), str(tmp_path / "www"), 18080, None, None,
                                                  None)).read_text()
    assert "map " not in plain and "x-amz-checksum" not in plain
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    if nginx:
        (tmp_path / "www").mkdir()
        r = subprocess.run([nginx, "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"), "-e",
                            str(tmp_path / "error.log")], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


def test_crcs_in_s3_form():
    # base64 of the 4 bytes, high byte first: CRC32C("123456789") and CRC32("123456789")
    assert checksum_cost.crc_b64(0xE3069283) == "4waSgw=="
    assert checksum_cost.crc_b64(zlib.crc32(b"123456789")) == base64.b64encode(bytes.fromhex("CBF43926")).decode()
