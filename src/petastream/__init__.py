"""petastream: Spark DataFrames to PyTorch and TensorFlow through MDS (Mosaic Data Shard).

``import petastream`` stays light: numpy, pyarrow and fsspec at most. Torch, TensorFlow and
PySpark are extras, imported only by the modules that need them.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from petastream import _extras

__version__ = "0.1.0.dev0"

# name -> module that defines it; resolved on first attribute access (PEP 562).
_LAZY = {
    "open": "petastream.mds.dataset",
    "MDSDataset": "petastream.mds.dataset",
    "MDSWriter": "petastream.mds.writer",
    "write_mds": "petastream.mds.writer",
    "merge_index": "petastream.mds.index",
    "PetastreamError": "petastream.errors",
    "Stream": "petastream.mix.stream",
    "mixture": "petastream.mix.source",
}

__all__ = sorted(_LAZY) + ["__version__"]

# A framework missing under any petastream module is reported naming the extra to install.
_extras.install_hook()


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'petastream' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
