"""The Python guide's examples run, in order, against the real server."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_python_guide_examples_run(s3env, boto, tmp_path, monkeypatch):
    text = (ROOT / "docs" / "python.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 6
    # a clean slate for the guide's bucket
    from conftest import _empty_bucket
    _empty_bucket(boto, "s3xfer-guide")
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    for i, code in enumerate(blocks):
        try:
            exec(compile(code, f"docs/python.md block {i + 1}", "exec"), ns)
        except Exception as e:
            raise AssertionError(f"docs/python.md example {i + 1} failed: {e!r}\n{code}") from e
