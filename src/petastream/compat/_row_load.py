"""Load one row group of a Unischema dataset as ``make_reader`` rows (what a worker does).

As Petastorm's worker: the predicate's fields are read and decoded first, and the other fields
only for the rows it keeps (none read when it keeps none); with ``cache_type="local-disk"``, a
row group's decoded columns come from the reader's disk cache after its first read (then
permuted for ``shuffle_rows``, as a fresh read would be); ``shuffle_row_drop_partitions``
keeps one of that many contiguous slices of the row group (the whole group is still read);
``shuffle_rows`` permutes the rows first; a ``TransformSpec`` runs on each row dict
(``func(row) -> row``) and then drops its ``removed_fields``. Decoding is columnar
(:func:`petastream.compat._decode.decode_table`); rows are built last.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from petastream.compat._decode import decode_table
from petastream.compat.etl import _store
from petastream.compat.predicates import predicate_mask

__all__ = ["LoadSpec", "load_piece"]


@dataclass(frozen=True)
class LoadSpec:
    location: Any
    pieces: list[_store.RowGroupPiece]
    #: The schema view read (decoded) and the one rows are made of (after a transform).
    read_schema: Any
    out_schema: Any
    predicate: Any
    transform_spec: Any
    shuffle_rows: bool
    seed: int | None
    #: An :class:`~petastream.compat.ngram.NGram` (resolved against the schema), or None.
    ngram: Any = None
    #: ``cache_type="local-disk"``: a :class:`~petastream.compat._row_cache.RowGroupDiskCache`
    #: of each row group's decoded columns (used where no per-row predicate or n-gram applies).
    cache: Any = None


def _read(spec: LoadSpec, piece: _store.RowGroupPiece, names: list[str]) -> pa.Table:
    partitions = dict(piece.partition_keys)
    stored = [n for n in names if n not in partitions]
    with _store.open_file(spec.location, piece.path) as f:
        table = pq.ParquetFile(f).read_row_group(piece.row_group, columns=stored)
    for name in names:
        if name in partitions:
            table = table.append_column(name, pa.array([partitions[name]] * table.num_rows, pa.string()))
    return table


def _rows_kept(num_rows: int, spec: LoadSpec, drop: tuple[int, int], epoch_seed: int | None,
               index: int) -> np.ndarray:
    """Row positions read, in order: permuted (``shuffle_rows``), then the drop partition's slice
    (for n-grams, with the next ``length - 1`` rows, so windows may end past the slice)."""
    order = np.arange(num_rows)
    if spec.shuffle_rows:
        # Each row group its own permutation (one seed would permute equal-sized groups alike).
        order = np.random.default_rng(None if epoch_seed is None else (epoch_seed, index)).permutation(num_rows)
    part, parts = drop
    if parts > 1 and num_rows:
        which = np.floor(np.arange(num_rows) / (num_rows / min(num_rows, parts)))
        if spec.ngram is not None:
            after = np.flatnonzero(which >= part + 1)[: spec.ngram.length - 1]
            which[after] = part
        order = order[which == part]
    return order


def _take(table: pa.Table, rows: np.ndarray) -> pa.Table:
    """Rows ``rows`` of ``table``: the table itself when they are all of its rows in order
    (no shuffle, no drop partition), which is most reads; a take copies every column."""
    if len(rows) == table.num_rows and (not len(rows) or (rows[0] == 0 and (np.diff(rows) == 1).all())):
        return table
    return table.take(pa.array(rows))


def load_piece(spec: LoadSpec, index: int, drop: tuple[int, int] = (0, 1), epoch_seed: int | None = None) -> list[Any]:
    """The rows (namedtuples of ``spec.out_schema``) of row group ``spec.pieces[index]``."""
    piece = spec.pieces[index]
    names = list(spec.read_schema.fields)
    predicate = spec.predicate
    if spec.cache is not None and predicate is None and spec.ngram is None and drop[1] == 1:
        # The row group's columns as decoded once, in file order; this epoch's row order after.
        columns = spec.cache.get(index, lambda: decode_table(spec.read_schema, _read(spec, piece, names)))
        n = len(next(iter(columns.values()))) if columns else 0
        order = _rows_kept(n, spec, drop, epoch_seed, index)
        if spec.shuffle_rows:
            columns = {k: c[order] for k, c in columns.items()}
    elif predicate is None:
        table = _read(spec, piece, names)
        table = _take(table, _rows_kept(table.num_rows, spec, drop, epoch_seed, index))
        columns = decode_table(spec.read_schema, table)
    else:
        fields = sorted(predicate.get_fields())
        if not fields:
            raise ValueError("At least one field name must be returned by predicate's get_field() method")
        invalid = set(fields) - set(names)
        if invalid:
            raise ValueError(f"At least some column names requested by the predicate ({', '.join(sorted(invalid))}) "
                             f"are not valid schema names: ({', '.join(names)})")
        first = _read(spec, piece, fields)
        first = _take(first, _rows_kept(first.num_rows, spec, drop, epoch_seed, index))
        decoded = decode_table(spec.read_schema, first, fields)
        mask = predicate_mask(predicate, decoded, first.num_rows)
        if not mask.any():
            return []
        columns = {n: c[mask] for n, c in decoded.items()}
        others = [n for n in names if n not in decoded]
        if others:
            rest = _read(spec, piece, others)
            rest = _take(rest, _rows_kept(rest.num_rows, spec, drop, epoch_seed, index)[mask])
            columns.update(decode_table(spec.read_schema, rest, others))
    return _make_rows(spec, columns)


def _make_rows(spec: LoadSpec, columns: dict[str, np.ndarray]) -> list[Any]:
    names = list(spec.read_schema.fields)
    n = len(next(iter(columns.values()))) if columns else 0
    if spec.ngram is not None:
        return _make_ngrams(spec, columns, names)
    row_type = spec.out_schema._get_namedtuple()
    if spec.transform_spec is None:
        return [row_type(*values) for values in zip(*(columns[k] for k in names))] if n else []
    out = []
    transform = spec.transform_spec
    for values in zip(*(columns[k] for k in names)):
        row = dict(zip(names, values))
        if transform.func is not None:
            row = transform.func(row)
        for name in transform.removed_fields:
            row.pop(name, None)
        out.append(row_type(**{k: row[k] for k in spec.out_schema.fields}))
    return out


def _make_ngrams(spec: LoadSpec, columns: dict[str, np.ndarray], names: list[str]) -> list[Any]:
    rows = [dict(zip(names, values)) for values in zip(*(columns[k] for k in names))]
    transform = spec.transform_spec
    if transform is not None:
        rows = [transform.func(row) if transform.func is not None else row for row in rows]
        for row in rows:
            for name in transform.removed_fields:
                row.pop(name, None)
    return [spec.ngram.make_namedtuple(spec.out_schema, window) for window in spec.ngram.form_ngram(rows, spec.out_schema)]
