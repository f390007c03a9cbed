#!/usr/bin/env python3
"""Runs the benchmark notebooks headless (nbclient) and saves their figures as
PNG into one directory, for the docs to embed.

    benchmarks/notebooks/render.py [--out DIR] [--set NAME=VALUE ...] [--scale small|medium]
                                   [--executed DIR] [--timeout SECS] [NOTEBOOK ...]

NOTEBOOK is a path or the start of a name in this directory ("01", "02_pools");
default: all of them. Parameters are overridden the papermill way: a cell tagged
"injected-parameters" is inserted right after the cell tagged "parameters", with
PLOT_DIR set to --out (default docs/img) and the --set values (each VALUE a
Python literal: --set REPEATS=3 --set 'CONCURRENCY=[1, 4, 16]' --set
"DELAY_S='1-2'"). A --set applies to every selected notebook whose parameters
cell defines NAME. --scale small (default) keeps the notebooks' own defaults;
--scale medium applies the per-notebook presets of MEDIUM below (about 5-10
minutes for all four on a 2-core machine); --set values come on top.

The .ipynb files are read, never written: --executed DIR saves the executed
copies (with outputs) elsewhere. Each notebook runs on a kernel for this very
interpreter, with the s3xfer package this interpreter finds (or the build's,
see nbsupport.s3xfer_path) first on PYTHONPATH. The S3 server is the one of
AWS_ENDPOINT_URL etc., else a local SeaweedFS started once for the whole run
(nbsupport.server_env) and stopped at the end.

Prints each PNG written on stdout, progress on stderr. Exit status 1 if a
notebook raised (its failing cell's error is printed) or saved no PNG; 2 if it
cannot start (bad arguments, modules missing, no server).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

NB_DIR = pathlib.Path(__file__).resolve().parent
ROOT = NB_DIR.parents[1]
KERNEL_NAME = "s3xfer-render"

# --scale medium: larger runs, about 5-10 minutes for all four on 2 cores
# (client and server sharing them). Names as in each notebook's parameters cell.
MEDIUM = {
    "01_buffer_strategy": dict(FILE_SIZE_MIB=256, PART_SIZES_MIB=[5, 32], CONCURRENCY=[1, 2, 4, 8, 16],
                               REPEATS=3),
    "02_pools": dict(FILE_SIZE_MIB=256, CONCURRENCY=[1, 2, 4, 8, 16, 32], REPEATS=2),
    "03_parallel_vs_single": dict(OBJECT_SIZE_MIB=512, CONCURRENCY=[1, 2, 4, 8, 16, 32], REPEATS=3),
    "04_slow_part_retry": dict(OBJECT_SIZE_MIB=400, REPEATS=3),
    "05_slow_part_grid": dict(SIZE_MIB=64, FRACTIONS=[0.05, 0.2], DELAYS=["1-2"], DIRECTIONS=["upload", "download"],
                              RUNS=2),
}

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def die(msg: str):
    log(f"render.py: {msg}")
    sys.exit(2)


def is_parameters(cell) -> bool:
    return cell["cell_type"] == "code" and "parameters" in cell.get("metadata", {}).get("tags", [])


def parameter_names(source: str) -> set[str]:
    """The names the parameters cell assigns."""
    names = set()
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def parse_sets(items: list[str]) -> dict:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            die(f"--set {item!r}: expected NAME=VALUE")
        try:
            out[name] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            die(f"--set {item!r}: VALUE must be a Python literal (quote strings: {name}=\"'text'\")")
    return out


def select(args: list[str]) -> list[pathlib.Path]:
    every = sorted(NB_DIR.glob("*.ipynb"))
    if not args:
        return every
    picked = []
    for a in args:
        p = pathlib.Path(a)
        if p.suffix == ".ipynb" and p.is_file():
            picked.append(p.resolve())
            continue
        hits = [q for q in every if q.name.startswith(a)]
        if len(hits) != 1:
            die(f"notebook {a!r}: {'ambiguous' if hits else 'no match'} among "
                f"{', '.join(q.name for q in every)}")
        picked.append(hits[0])
    return picked


def kernel_env(tmp: str) -> None:
    """A kernel spec for this interpreter first on JUPYTER_PATH, and the s3xfer
    package first on PYTHONPATH, in os.environ (the kernels inherit it)."""
    import importlib.util
    import nbsupport

    nbsupport.write_kernel_spec(tmp, KERNEL_NAME, "s3xfer render")
    pkg = nbsupport.s3xfer_path() or str(pathlib.Path(importlib.util.find_spec("s3xfer").origin).parents[1])
    for var, first in (("JUPYTER_PATH", tmp), ("PYTHONPATH", pkg)):
        os.environ[var] = first + (os.pathsep + os.environ[var] if os.environ.get(var) else "")


def render(path: pathlib.Path, overrides: dict, out: pathlib.Path, executed: pathlib.Path | None,
           timeout: int) -> tuple[list[pathlib.Path], str | None]:
    """Executes one notebook; returns (PNGs written or rewritten in `out`, error or None)."""
    import nbclient
    import nbformat
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    nb = nbformat.read(str(path), as_version=4)
    i = [k for k, c in enumerate(nb.cells) if is_parameters(c)][0]
    lines = [f"{k} = {v!r}" for k, v in overrides.items()]
    nb.cells.insert(i + 1, nbformat.v4.new_code_cell("# Parameters injected by render.py\n" + "\n".join(lines),
                                                     metadata={"tags": ["injected-parameters"]}))
    before = {p: p.stat().st_mtime_ns for p in out.glob("*.png")}
    client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name=KERNEL_NAME,
                                     resources={"metadata": {"path": str(path.parent)}})
    error = None
    try:
        client.execute()
    except CellExecutionError as e:
        error = ANSI.sub("", str(e))
    except (CellTimeoutError, DeadKernelError) as e:
        error = f"{type(e).__name__}: {e}"
    finally:
        if executed:
            nbformat.write(nb, str(executed / path.name))
    pngs = sorted(p for p in out.glob("*.png") if before.get(p) != p.stat().st_mtime_ns)
    if error is None and not pngs:
        error = f"no PNG written to {out}"
    return pngs, error


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("notebooks", nargs="*", metavar="NOTEBOOK")
    ap.add_argument("--out", default=str(ROOT / "docs" / "img"), help="where the PNGs go (default: docs/img)")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="NAME=VALUE",
                    help="a parameter override, VALUE a Python literal (repeatable)")
    ap.add_argument("--scale", choices=("small", "medium"), default="small")
    ap.add_argument("--executed", metavar="DIR", help="also save the executed notebooks (with outputs) here")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per cell (default 1800)")
    a = ap.parse_args()

    sets = parse_sets(a.sets)
    if "PLOT_DIR" in sets:
        die("PLOT_DIR is --out")
    paths = select(a.notebooks)
    out = pathlib.Path(a.out).resolve()
    executed = pathlib.Path(a.executed).resolve() if a.executed else None
    if executed and any(executed == p.parent for p in paths):
        die(f"--executed {executed}: that would overwrite the notebooks themselves")

    plan = []
    for p in paths:
        cells = [c for c in json.loads(p.read_text(encoding="utf-8"))["cells"] if is_parameters(c)]
        if len(cells) != 1:
            die(f"{p.name}: expected one code cell tagged 'parameters', found {len(cells)}")
        src = cells[0]["source"]
        names = parameter_names("".join(src) if isinstance(src, list) else src)
        preset = MEDIUM.get(p.stem, {}) if a.scale == "medium" else {}
        if a.scale == "medium" and p.stem not in MEDIUM:
            log(f"{p.name}: no medium preset, using its defaults")
        stale = sorted(set(preset) - names)
        if stale:
            die(f"{p.name}: the medium preset sets {', '.join(stale)}, not in its parameters cell")
        ov = {"PLOT_DIR": str(out), **preset, **{k: v for k, v in sets.items() if k in names}}
        plan.append((p, ov))
    unknown = sorted(k for k in sets if not any(k in ov for _, ov in plan))
    if unknown:
        die(f"--set {', '.join(unknown)}: in none of the selected notebooks' parameters cells")

    import nbsupport  # this directory is sys.path[0]
    missing = nbsupport.missing_runner_modules()
    if missing:
        die(f"{', '.join(missing)} not installed in {sys.executable}: "
            f"pip install -r requirements-notebooks.txt")
    out.mkdir(parents=True, exist_ok=True)
    if executed:
        executed.mkdir(parents=True, exist_ok=True)
    failed = []
    with tempfile.TemporaryDirectory(prefix="s3xfer-render-") as tmp:
        try:
            kernel_env(tmp)
            nbsupport.server_env()  # once for all notebooks: the kernels inherit AWS_*
        except (ImportError, RuntimeError, OSError, subprocess.CalledProcessError) as e:
            die(str(e))
        for p, ov in plan:
            given = ", ".join(f"{k}={v!r}" for k, v in ov.items() if k != "PLOT_DIR")
            log(f"{p.name}: running with {given or 'its defaults'}")
            t0 = time.monotonic()
            pngs, error = render(p, ov, out, executed, a.timeout)
            for png in pngs:
                print(png, flush=True)
            if error:
                failed.append(p.name)
                log(f"{p.name}: FAILED after {time.monotonic() - t0:.0f} s\n{error}")
            else:
                log(f"{p.name}: done in {time.monotonic() - t0:.0f} s")
    nbsupport.cleanup()  # a server started above
    if failed:
        log(f"failed: {', '.join(failed)}" + (f" (executed copies in {executed})" if executed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
