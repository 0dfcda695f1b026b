"""petastream.columns: the column values every source's reads return, whatever the format.

A read is ``{column: numpy array | Ragged}`` (see :mod:`petastream.source`). Here: :mod:`.ragged`
(variable-length arrays), :mod:`.ops` (blocks of columns: concatenate, take, scatter, packed
rows), :mod:`.gather` (byte ranges gathered in bulk), :mod:`.text` (``str``/``bytes`` values
through Arrow). Formats (``mds/``, ``parquet/``) build on it; it imports no format.
"""
