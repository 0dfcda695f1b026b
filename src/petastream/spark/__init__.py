"""petastream.spark: Spark DataFrames (classic or Connect) -> MDS datasets.

The only subpackage that imports pyspark (lazily: importing ``petastream.spark`` alone does
not). See :func:`materialize`; the type mapping is in :mod:`petastream.spark.schema`, the cache
layout and publishing protocol in :mod:`petastream.spark.cache`.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {
    "materialize": "petastream.spark.materializer",
    "MaterializedDataset": "petastream.spark.materializer",
    "parent_cache_dir": "petastream.spark.materializer",
    "UnsupportedColumnError": "petastream.spark._errors",
    "NullValuesError": "petastream.spark._errors",
    "MaterializationError": "petastream.spark._errors",
    "PARENT_CONF": "petastream.spark.cache",
    "PETASTORM_PARENT_CONF": "petastream.spark.cache",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'petastream.spark' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
