"""Writing MDS datasets, per sample (Mosaic's ``MDSWriter`` API) or a column block at a time.

Shard-size rule (Mosaic's, exact): a shard's raw size starts at ``4 + 4 + len(config_json)``
and each sample adds its encoded length + 4. Before appending a sample of length ``L``, if
``size_limit < cur + L + 4`` the pending shard is flushed; the sample is then appended
regardless, so one oversized sample gets a shard of its own. A first sample that alone exceeds
the limit flushes an *empty* shard first (Mosaic's quirk, reproduced for byte compatibility).

Both paths feed the same pending buffer, so they can be mixed and give identical bytes.
``index.json`` is written by :meth:`MDSWriter.finish`, last: it is the commit point. Leaving
the ``with`` block through an exception writes no index and removes the shards written so far,
so a failed write never reads as a complete dataset.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

import numpy as np

from petastream.checks import fraction
from petastream.errors import (
    DatasetExistsError,
    EncodingError,
    FormatError,
    InvalidArgumentTypeError,
    MissingColumnError,
    UnexpectedArgumentError,
)
from petastream.mds import hashing
from petastream.mds.blocks import encode_block, in_column
from petastream.mds.compression import parse_compression
from petastream.mds.encodings import encode_value
from petastream.mds.index import commit_index, dump_index, shard_basename
from petastream.mds.layout import ColumnLayout, parse_size_limit
from petastream.mds.shard import shard_parts
from petastream.storage.location import Location, resolve

__all__ = ["MDSWriter", "write_mds"]

log = logging.getLogger(__name__)

_MOSAIC_KWARGS = {"progress_bar", "max_workers", "retry", "keep_local"}


class MDSWriter:
    """Write an MDS dataset to ``out`` (a path or fsspec URL).

    ``columns`` maps column name to MDS encoding. ``compression`` (``"zstd"``, ``"zstd:7"``,
    ``gz``, ``bz2``, ``br``, ``snappy`` or None), ``hashes`` (sorted algorithm names) and
    ``size_limit`` (bytes or ``"64mb"``; None = one shard) are Mosaic's, except that
    ``hashes`` left out records ``xxh3_64`` (:data:`~petastream.mds.hashing.DEFAULT_HASHES`),
    as ``materialize`` does, where Mosaic records none: readers (Mosaic's ``validate_hash=
    'xxh3_64'`` too) then catch a damaged shard instead of delivering its wrong values, at
    memory speed. ``hashes=None`` or ``[]`` records none, as in Mosaic. ``exist_ok=True``
    clears a non-empty ``out`` first; otherwise a non-empty ``out`` is an error.
    ``write_index=False`` leaves index.json to the caller (partial datasets merged later).

    ``min_compression_saving`` (petastream's; 0, Mosaic's behaviour, by default): a shard whose
    sample (four 64 KB pieces spread over it) the codec does not shrink by at least this
    fraction is stored uncompressed, exactly as Mosaic writes an uncompressed shard
    (``compression`` null in its index entry and its header); the others are compressed.
    Compressing bytes that are already compressed or random (JPEG, PNG, embeddings as bytes)
    spends most of a write's CPU for a few percent (RocksDB skips blocks saving under 12.5%).
    Readers take each shard's own ``compression``, Mosaic's included.
    """

    def __init__(
        self,
        *,
        columns: Mapping[str, str],
        out: str | tuple[str, str],
        compression: str | None = None,
        hashes: Sequence[str] | None = hashing.DEFAULT_HASHES,
        size_limit: int | str | None = 1 << 26,
        exist_ok: bool = False,
        write_index: bool = True,
        storage_options: dict | None = None,
        min_compression_saving: float = 0.0,
        **kwargs: Any,
    ):
        unknown = set(kwargs) - _MOSAIC_KWARGS
        if unknown:  # Mosaic's ValueError and sentence; also a TypeError, as Python's own
            raise UnexpectedArgumentError(
                f"Invalid Writer argument(s): {sorted(unknown)}; MDSWriter takes columns, out, "
                f"compression, hashes, size_limit, exist_ok, write_index, storage_options, "
                f"min_compression_saving and Mosaic's {sorted(_MOSAIC_KWARGS)}")
        if isinstance(out, tuple):  # Mosaic's (local, remote): the remote is the destination
            out = out[1] or out[0]
        self.layout = ColumnLayout.from_columns(columns)
        self.codec = parse_compression(compression)
        self.hashes = hashing.check_hashes(hashes)
        self.size_limit = parse_size_limit(size_limit)
        self.config = self.layout.config(compression, self.hashes, self.size_limit)
        self._config_json = self.layout.config_json(compression, self.hashes, self.size_limit)
        self.min_compression_saving = check_compression_saving(min_compression_saving)
        self.location: Location = resolve(out, storage_options)
        self.write_index = write_index
        self.shards: list[dict[str, Any]] = []
        self._finished = False
        self._prepare_out(exist_ok)
        self._reset()

    def _prepare_out(self, exist_ok: bool) -> None:
        if self.location.listdir():
            if not exist_ok:
                raise DatasetExistsError(
                    f"Directory is not empty: {self.location.url}; pass exist_ok=True to overwrite it"
                )
            self.location.delete_tree()
        self.location.makedirs()

    def _reset(self) -> None:
        self._segments: list[memoryview] = []
        self._sizes: list[np.ndarray] = []
        self._cur = 8 + len(self._config_json)
        self._pending = 0

    def get_config(self) -> dict[str, Any]:
        """What every shard's header and index entry record about the writing (Mosaic's
        ``get_config``): version, format, compression, hashes, size_limit and the columns'
        names, encodings and fixed sizes."""
        return {k: list(v) if isinstance(v, list) else v for k, v in self.config.items()}

    # -- per sample --------------------------------------------------------------------------
    def write(self, sample: Mapping[str, Any]) -> None:
        """Encode and append one sample: a dict with the writer's columns (other keys are
        ignored, as Mosaic ignores them)."""
        if not isinstance(sample, Mapping):
            raise InvalidArgumentTypeError(
                f"MDSWriter.write takes a dict of column -> value, got {type(sample).__name__}")
        self._check_keys(sample.keys(), extra_ok=True)
        layout = self.layout
        parts, lengths = [], []
        for name, enc in zip(layout.names, layout.encodings):
            try:
                data = encode_value(enc, sample[name])
            except EncodingError as e:
                raise in_column(e, name) from e
            parts.append(data)
            if enc.size is None:
                lengths.append(len(data))
        blob = np.asarray(lengths, dtype="<u4").tobytes() + b"".join(parts)
        self._append(memoryview(blob), np.array([len(blob)], dtype=np.int64))

    # -- bulk --------------------------------------------------------------------------------
    def write_columns(self, data: Any) -> None:
        """Append a block of rows given as columns: a dict of arrays, an Arrow table or
        record batch, or a pandas DataFrame. Fixed-size columns are encoded with no per-row
        Python work; ``str``/``bytes`` and 1-D numeric arrays go through Arrow buffers."""
        cols = _as_columns(data)
        self._check_keys(cols.keys())
        lengths = {len(c) for c in cols.values()}
        if len(lengths) != 1:
            raise FormatError(f"columns have different lengths: { {k: len(v) for k, v in cols.items()} }")
        (n,) = lengths
        if n == 0:
            return
        # In row blocks of an eighth of a shard, so the encoded copies and their temporaries stay
        # bounded by the shard size whatever the input's (a shard's blocks are held until it
        # is written, then joined): the first block's rows tell the row size.
        target = max(1 << 20, (self.size_limit or _BLOCK_BYTES) // 8)
        start, step = 0, n if self.layout.all_fixed else min(n, _FIRST_BLOCK_ROWS)
        if self.layout.all_fixed:
            step = max(1, min(n, target // self.layout.fixed_dtype().itemsize))
        while start < n:
            stop = min(n, start + step)
            part = cols if (start, stop) == (0, n) else {k: v[start:stop] for k, v in cols.items()}
            payload, sizes = encode_block(self.layout, part, stop - start)
            self._append(payload.data, sizes)
            del payload, part
            _release_arrow_memory()  # str/bytes went through Arrow, whose pool keeps freed blocks
            step = max(1, int(target // max(1.0, float(sizes.mean()))))
            start = stop

    def _check_keys(self, keys: Any, extra_ok: bool = False) -> None:
        keys = set(keys)
        names = set(self.layout.names)
        missing, extra = sorted(names - keys), sorted(keys - names)
        if missing:  # a KeyError, as Mosaic's sample[name]
            raise MissingColumnError(
                f"sample columns do not match the writer's: missing {missing}, unexpected {extra}")
        if extra and not extra_ok:
            raise FormatError(
                f"sample columns do not match the writer's: missing {missing}, unexpected {extra}; "
                "drop the extra columns or add them to columns=")

    def _append(self, payload: memoryview, sizes: np.ndarray) -> None:
        """Split a run of encoded samples into shards by the exact size rule."""
        if self._finished:
            raise FormatError("this MDSWriter is finished; create a new one to write more")
        limit = self.size_limit
        if not limit:
            self._take(payload, sizes)
            return
        cost = np.cumsum(sizes + 4)  # cost[j] = cost of samples [0, j]
        i, n, base, start_byte = 0, len(sizes), 0, 0
        while i < n:
            # Samples i..j-1 fit while cur + (cost[j-1] - base) <= limit.
            j = int(np.searchsorted(cost, limit - self._cur + base, side="right"))
            if j <= i:
                self.flush()  # empty on a first oversized sample, as Mosaic
                j = i + 1
            nbytes = int(sizes[i:j].sum())
            self._take(payload[start_byte : start_byte + nbytes], sizes[i:j])
            start_byte += nbytes
            base = int(cost[j - 1])
            i = j

    def _take(self, payload: memoryview, sizes: np.ndarray) -> None:
        self._segments.append(payload)
        self._sizes.append(sizes)
        self._cur += int(sizes.sum()) + 4 * len(sizes)
        self._pending += len(sizes)

    def flush(self) -> None:
        """Write the pending samples as one shard (even if there are none). Uncompressed,
        the shard's parts are hashed and written one after the other (never joined)."""
        sizes = np.concatenate(self._sizes) if self._sizes else np.zeros(0, np.int64)
        codec, config, config_json = self.codec, self.config, self._config_json
        if codec is not None and not self._compression_pays():
            config = {**config, "compression": None}
            config_json = self.layout.config_json(None, self.hashes, self.size_limit)
            codec = None
        parts = shard_parts(config_json, sizes, self._segments)
        self._segments = []
        index = len(self.shards)
        raw_name = shard_basename(index, None)
        zip_data: dict[str, Any] | None = None
        if codec is not None:
            raw = b"".join(parts)
            del parts  # the blocks are in raw now: let them go before compressing
            _release_arrow_memory()  # they were Arrow buffers, held by its pool until released
            raw_data = {"basename": raw_name, "bytes": len(raw),
                        "hashes": {h: hashing.hexdigest(h, raw) for h in self.hashes}}
            packed = codec.compress(raw)
            del raw
            zip_name = shard_basename(index, codec.extension)
            zip_data = {"basename": zip_name, "bytes": len(packed),
                        "hashes": {h: hashing.hexdigest(h, packed) for h in self.hashes}}
            self.location.write_bytes_atomic(zip_name, packed)
        else:
            raw_data = {"basename": raw_name, "bytes": sum(len(p) for p in parts),
                        "hashes": {h: _digest(h, parts) for h in self.hashes}}
            self.location.write_bytes_atomic(raw_name, parts)
            del parts
            _release_arrow_memory()
        self.shards.append({**config, "raw_data": raw_data, "samples": len(sizes),
                            "zip_data": zip_data})
        self._reset()

    def _compression_pays(self) -> bool:
        """Whether the codec shrinks a sample of the pending samples' bytes by at least
        ``min_compression_saving`` (always, at 0)."""
        if not self.min_compression_saving:
            return True
        sample = _sample(self._segments, _SAMPLE_PIECES, _SAMPLE_PIECE_BYTES)
        if not sample:
            return True
        packed = len(self.codec.compress(sample))  # type: ignore[union-attr]
        return packed <= (1.0 - self.min_compression_saving) * len(sample)

    def finish(self) -> list[dict[str, Any]]:
        """Flush the rest and write index.json (last: it is the commit point)."""
        if self._finished:
            return self.shards
        if self._pending:
            self.flush()
        if self.write_index:
            commit_index(self.location, dump_index(self.shards))
        self._finished = True
        log.debug("wrote %d shards (%d samples) to %s", len(self.shards),
                  sum(s["samples"] for s in self.shards), self.location.url)
        return self.shards

    def abort(self) -> None:
        """Remove the shards written so far; no index is written."""
        self._finished = True
        for shard in self.shards:
            for key in ("raw_data", "zip_data"):
                if shard[key]:
                    self.location.remove(shard[key]["basename"])
        self.shards = []

    def __enter__(self) -> MDSWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.finish()
        else:
            self.abort()


_BLOCK_BYTES = 1 << 26  # encoded bytes per block when shards are unbounded
_FIRST_BLOCK_ROWS = 1024  # rows encoded before the row size is known
_SAMPLE_PIECES, _SAMPLE_PIECE_BYTES = 4, 1 << 16  # what min_compression_saving compresses first


def check_compression_saving(value: Any) -> float:
    """``min_compression_saving`` as a float, or an error naming the argument."""
    return fraction("min_compression_saving", value,
                    "e.g. 0.1: store a shard uncompressed unless compression saves 10%")


def _sample(segments: list[memoryview], pieces: int, piece: int) -> bytes:
    """``pieces`` runs of ``piece`` bytes spread evenly over the concatenated ``segments`` (all
    of them when shorter), without joining them."""
    total = sum(len(s) for s in segments)
    if total <= pieces * piece:
        return b"".join(segments)
    wanted = [round(k * (total - piece) / (pieces - 1)) for k in range(pieces)]
    out, base = [], 0
    for seg in segments:
        end = base + len(seg)
        for start in wanted:
            lo, hi = max(start, base), min(start + piece, end)
            if lo < hi:
                out.append(seg[lo - base:hi - base])
        base = end
    return b"".join(out)


def _digest(name: str, parts: list[Any]) -> str:
    h = hashing.hasher(name)
    for part in parts:
        h.update(part)
    return h.hexdigest()


def _release_arrow_memory() -> None:
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


def _as_columns(data: Any) -> dict[str, Any]:
    if isinstance(data, Mapping):
        return dict(data)
    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover - pyarrow is a core dependency
        pa = None
    if pa is not None and isinstance(data, (pa.Table, pa.RecordBatch)):
        return {name: data.column(i) for i, name in enumerate(data.schema.names)}
    if hasattr(data, "columns") and hasattr(data, "__getitem__"):  # pandas DataFrame
        return {str(c): data[c].to_numpy() for c in data.columns}
    raise FormatError(
        f"write_columns takes a dict of columns, a pyarrow Table/RecordBatch or a pandas "
        f"DataFrame, got {type(data).__name__}"
    )


def write_mds(
    data: Any,
    out: str,
    *,
    columns: Mapping[str, str] | None = None,
    compression: str | None = "zstd",
    hashes: Sequence[str] | None = None,
    size_limit: int | str | None = 1 << 26,
    exist_ok: bool = False,
    storage_options: dict | None = None,
    min_compression_saving: float = 0.0,
) -> list[dict[str, Any]]:
    """Write a table (dict of arrays, Arrow table, pandas DataFrame) as an MDS dataset.

    Encodings are inferred when ``columns`` is None (see :mod:`petastream.mds.infer`).
    Returns the shard list written to index.json. ``hashes``: None (the default) records
    ``xxh3_64``, ``[]`` none (as ``materialize``). ``min_compression_saving``: see
    :class:`MDSWriter`.
    """
    cols = _as_columns(data)
    if columns is None:
        columns = infer_columns(cols)
    hashes = hashing.DEFAULT_HASHES if hashes is None else hashes  # materialize's convention
    with MDSWriter(columns=columns, out=out, compression=compression, hashes=hashes,
                   size_limit=size_limit, exist_ok=exist_ok, storage_options=storage_options,
                   min_compression_saving=min_compression_saving) as w:
        w.write_columns(cols)
    return w.shards


def infer_columns(cols: Mapping[str, Any]) -> dict[str, str]:
    import pyarrow as pa

    from petastream.mds.infer import encoding_for_arrow_type, encoding_for_numpy

    out = {}
    for name, col in cols.items():
        if isinstance(col, (pa.Array, pa.ChunkedArray)):
            out[name] = encoding_for_arrow_type(name, col.type)
        else:
            out[name] = encoding_for_numpy(name, np.asarray(col))
    return out
