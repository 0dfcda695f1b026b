"""The CPU clock of the peer runners: :mod:`petastream._cpu_clock`, loaded from its file.

The runners run under a peer env's python, where petastream does not import (Petastorm's env
pins pyarrow 14 and numpy < 2), so they cannot ``import petastream``; the clock module is
standard library only and is loaded here by its path in this checkout, one copy for
``petastream bench``, the harness and the peers.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "src" / "petastream" / "_cpu_clock.py"
_spec = importlib.util.spec_from_file_location("_petastream_cpu_clock", _PATH)
if _spec is None or _spec.loader is None:  # pragma: no cover - the checkout lacks src/
    raise ImportError(f"the CPU clock module is not at {_PATH}")
_module = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _module  # dataclasses look their module up while the class is made
_spec.loader.exec_module(_module)

CpuSnapshot = _module.CpuSnapshot
snapshot = _module.snapshot
cpu_between = _module.cpu_between

__all__ = ["CpuSnapshot", "snapshot", "cpu_between"]
