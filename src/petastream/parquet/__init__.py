"""petastream.parquet: Parquet files (one, a directory with Hive partitions, a list; local or
any fsspec URL) as a :class:`petastream.source.Source`, read by every petastream loader.

``open_parquet(url, columns=..., filters=...)`` opens one; see :class:`ParquetSource` for the
options, :mod:`petastream.parquet.types` for the column types (those of an MDS read of the
same data), :mod:`petastream.parquet.filters` for what filtering costs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from petastream.parquet.source import ParquetSource

__all__ = ["ParquetSource", "open_parquet"]


def open_parquet(url_or_urls: str | os.PathLike | Sequence[str | os.PathLike], **options: Any) -> ParquetSource:
    """Open Parquet files as a source; ``options`` are :class:`ParquetSource`'s."""
    return ParquetSource(url_or_urls, **options)
