"""The benchmark notebooks (benchmarks/notebooks/*.ipynb): each one runs headless
with nbclient on its small default parameters against the test server and must
not raise; each one is committed without outputs and has a parameters cell.

Needs nbclient, nbformat, ipykernel and matplotlib in this interpreter
(`pip install -r requirements-notebooks.txt`); the kernel runs on this same
interpreter, with the environment of the test run (AWS_* of the server) and the
s3xfer package the rest of the suite imports.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
NB_DIR = ROOT / "benchmarks" / "notebooks"
NOTEBOOKS = sorted(NB_DIR.glob("*.ipynb"))
CELL_TIMEOUT = 300  # seconds per cell
KERNEL_NAME = "s3xfer-nbtest"


sys.path.insert(0, str(NB_DIR))
import nbsupport  # noqa: E402  (stdlib only; shared with benchmarks/notebooks/render.py)


def _require_notebook_deps():
    missing = nbsupport.missing_runner_modules()
    if missing:
        pytest.fail(f"{', '.join(missing)} not installed in {sys.executable}: "
                    f"pip install -r requirements-notebooks.txt", pytrace=False)


def _ids(p):
    return p.name


def test_there_is_a_notebook_per_question():
    names = [p.name for p in NOTEBOOKS]
    assert len(names) >= 4, f"expected the four benchmark notebooks in {NB_DIR}, found {names}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids)
def test_committed_without_outputs(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    dirty = [i for i, c in enumerate(nb["cells"])
             if c["cell_type"] == "code" and (c.get("outputs") or c.get("execution_count") is not None)]
    assert code, f"{path.name} has no code cells"
    assert not dirty, (f"{path.name}: cells {dirty} have outputs or execution counts; "
                       f"clear them before committing (jupyter nbconvert --clear-output --inplace {path.name})")
    tagged = [c for c in code if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1 and nb["cells"].index(tagged[0]) <= 2, \
        f"{path.name}: expected one code cell tagged 'parameters' at the top"


@pytest.fixture(scope="module")
def kernel_name(tmp_path_factory):
    """A kernel spec for this very interpreter, first on JUPYTER_PATH, so the
    notebooks never run on some other python3 kernel installed on the machine."""
    d = tmp_path_factory.mktemp("jupyter")
    nbsupport.write_kernel_spec(d, KERNEL_NAME, "s3xfer notebook test")
    mp = pytest.MonkeyPatch()
    mp.setenv("JUPYTER_PATH", str(d) + (os.pathsep + os.environ["JUPYTER_PATH"]
                                        if os.environ.get("JUPYTER_PATH") else ""))
    try:
        import s3xfer  # the package under test: the kernel imports the same one
        pkg_parent = str(pathlib.Path(s3xfer.__file__).resolve().parents[1])
        mp.setenv("PYTHONPATH", pkg_parent + (os.pathsep + os.environ["PYTHONPATH"]
                                              if os.environ.get("PYTHONPATH") else ""))
    except ImportError:
        pass  # nbsupport then looks in $S3X_BUILD_DIR and <repo>/build
    yield KERNEL_NAME
    mp.undo()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids)
def test_notebook_runs(path, s3env, kernel_name, tmp_path):
    _require_notebook_deps()
    import nbclient
    import nbformat
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(str(path), as_version=4)
    client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name=kernel_name,
                                     resources={"metadata": {"path": str(NB_DIR)}})
    executed = tmp_path / path.name
    try:
        client.execute()
    except CellExecutionError as e:
        nbformat.write(nb, str(executed))
        pytest.fail(f"{path.name} raised (executed copy: {executed}):\n{e}", pytrace=False)
    nbformat.write(nb, str(executed))
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors, f"{path.name}: error outputs {errors}"
    figures = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
               if "image/png" in o.get("data", {})]
    assert figures, f"{path.name} displayed no figure (executed copy: {executed})"
