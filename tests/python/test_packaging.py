"""`pip install .` in a fresh virtual environment, and `pip wheel .` giving a
wheel that installs in another fresh one; both then talk to the server."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
IGNORE = shutil.ignore_patterns("build", "build-*", ".venv*", ".local-s3", ".git", "dist", "*.egg-info",
                                "__pycache__", ".bench", "results")

SMOKE = """
import os, s3xfer, uuid
c = s3xfer.Client()
b = "pkg-" + uuid.uuid4().hex[:12]
c.create_bucket(b)
data = os.urandom(6 << 20)
r = c.upload_bytes(data, b, "k", config=s3xfer.TransferConfig(part_size=5 << 20, multipart_threshold=5 << 20))
assert r.multipart and r.parts == 2
assert c.get_object(b, "k")[0] == data
c.delete_object(b, "k")
c.delete_bucket(b)
print("ok", s3xfer.__version__)
"""


def venv(path: pathlib.Path) -> pathlib.Path:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    return path / "bin" / "python"


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)
    assert p.returncode == 0, f"{cmd} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> pathlib.Path:
    dst = tmp_path_factory.mktemp("src") / "s3xfer"
    shutil.copytree(ROOT, dst, ignore=IGNORE)
    return dst


def test_pip_install_and_wheel(s3env, source, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # 1. pip install . into a fresh venv
    py1 = venv(tmp_path / "v1")
    run([str(py1), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(source)], env=env)
    out = run([str(py1), "-c", SMOKE], env=env, cwd=tmp_path).stdout
    assert out.startswith("ok ")
    # the import must come from the venv, not from the source tree
    where = run([str(py1), "-c", "import s3xfer; print(s3xfer.__file__)"], env=env, cwd=tmp_path).stdout
    assert str(tmp_path / "v1") in where
    # 2. pip wheel . and install the wheel into another fresh venv
    dist = tmp_path / "dist"
    run([str(py1), "-m", "pip", "wheel", "-q", "--no-deps", "--disable-pip-version-check", "-w", str(dist),
         str(source)], env=env)
    wheels = list(dist.glob("s3xfer-*.whl"))
    assert len(wheels) == 1, wheels
    py2 = venv(tmp_path / "v2")
    run([str(py2), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheels[0])], env=env)
    assert run([str(py2), "-c", SMOKE], env=env, cwd=tmp_path).stdout.startswith("ok ")
    files = run([str(py2), "-c", "import s3xfer, os; print(sorted(os.listdir(os.path.dirname(s3xfer.__file__))))"],
                env=env, cwd=tmp_path).stdout
    assert "py.typed" in files and "_core.py" in files
