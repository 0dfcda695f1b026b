"""petastream.delta: a Delta table (one snapshot of it) as a :class:`petastream.source.Source`.

``open_delta(url, version=..., columns=..., filters=...)`` opens one; every loader that takes a
URL opens a directory holding ``_delta_log`` this way. The log is read with ``deltalake``
(``pip install 'petastream[delta]'``), the data files by petastream's Parquet source. See
:class:`DeltaSource` and docs/delta.md for what is supported and what is refused.
"""

from __future__ import annotations

import os
from typing import Any

from petastream.delta.log import is_delta_table
from petastream.delta.source import DeltaSource
from petastream.errors import UnsupportedFeatureError

__all__ = ["DeltaSource", "UnsupportedFeatureError", "is_delta_table", "open_delta"]


def open_delta(url: str | os.PathLike, **options: Any) -> DeltaSource:
    """Open one snapshot of the Delta table at ``url``; ``options`` are :class:`DeltaSource`'s."""
    return DeltaSource(url, **options)
