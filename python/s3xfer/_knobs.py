"""Knob metadata read from the C library (names, bounds, defaults)."""

from __future__ import annotations

from typing import Dict, NamedTuple

from . import _core


class Knob(NamedTuple):
    id: int
    name: str
    lo: int
    hi: int
    default: int


def _load() -> Dict[str, Knob]:
    knobs = {}
    for pid in range(_core.S3X_PARAM__COUNT):
        name, lo, hi, default = _core.py_param_info(pid)
        knobs[name] = Knob(pid, name, lo, hi, default)
    return knobs


KNOBS: Dict[str, Knob] = _load()
