"""``index.json`` as columns: what a dataset of a million shards costs to open.

A dict per shard (``json.loads``) costs ~3 KB and ~14 µs a shard: 3.4 GB and 14 s for 1M
shards, on every rank. :class:`ShardTable` holds the index as columns instead: numpy arrays of
sample counts and file sizes, Arrow string arrays of basenames and hashes, and each shard's
*template* (every field but those: columns, compression, hash algorithms, ...) as a code into
a short list of distinct templates, since shards of one write share them. A shard's dict is
built when something asks for it (``table[i]``), equal to the one in ``index.json``.

Built from ``index.json`` (:meth:`ShardTable.from_shards`) or from the binary index written
beside it (:mod:`petastream.mds.index_sidecar`), which loads without parsing any JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from petastream.errors import FormatError, OutOfRangeError

__all__ = ["ShardTable"]

# Per-shard values; everything else of a shard is its template.
_FILE_KEYS = ("basename", "bytes", "hashes")
# Shard dicts kept once built (oldest dropped first): an epoch that touches every shard of a
# million-shard dataset must not end up holding a million dicts again.
_KEEP = 4096


class ShardTable(Sequence[dict[str, Any]]):
    """The shards of an index, in order; ``table[i]`` is shard ``i``'s dict (built on demand)."""

    def __init__(self, samples: np.ndarray, raw_bytes: np.ndarray, zip_bytes: np.ndarray,
                 raw_names: pa.Array, zip_names: pa.Array, templates: list[dict[str, Any]],
                 template_ids: np.ndarray, raw_hashes: dict[str, pa.Array],
                 zip_hashes: dict[str, pa.Array]):
        self.samples = samples  #: int64 sample counts
        self.raw_bytes = raw_bytes  #: int64 raw file sizes
        self.zip_bytes = zip_bytes  #: int64 compressed file sizes, -1 for shards without zip_data
        self.raw_names = raw_names  #: Arrow strings: raw file basenames
        self.zip_names = zip_names  #: Arrow strings, null for shards without zip_data
        #: Distinct templates: the shard dict less ``samples`` and the per-file values; its
        #: ``raw_data``/``zip_data`` hold the hash algorithms recorded (``{"hashes": [...]}``).
        self.templates = templates
        self.template_ids = template_ids  #: int32 index into ``templates`` per shard
        self.raw_hashes = raw_hashes  #: {algo: Arrow strings, null where a shard lacks it}
        self.zip_hashes = zip_hashes
        self._cache: dict[int, dict[str, Any]] = {}

    # -- building ----------------------------------------------------------------------------
    @classmethod
    def from_shards(cls, shards: Sequence[dict[str, Any]]) -> ShardTable:
        """Columns of validated shard dicts (``parse_index``'s output)."""
        n = len(shards)
        # One tight pass per column (a loop filling everything at once is ~3x slower).
        samples = np.fromiter((s["samples"] for s in shards), np.int64, n)
        raws = [s["raw_data"] for s in shards]
        raw_bytes = np.fromiter((r["bytes"] for r in raws), np.int64, n)
        zips = [s["zip_data"] or None for s in shards]
        zip_bytes = np.fromiter((-1 if z is None else z["bytes"] for z in zips), np.int64, n)
        templates: list[dict[str, Any]] = []
        codes: dict[Any, int] = {}
        template_ids = np.empty(n, dtype=np.int32)
        for i, shard in enumerate(shards):
            key: Any = _fast_key(shard)  # a tuple, or the template's JSON below
            try:
                code = codes.get(key) if key is not None else None
            except TypeError:  # unhashable: not a plain shard
                key = None
            if key is None:
                key = json.dumps(_template(shard), sort_keys=True)
                code = codes.get(key)
            if code is None:
                code = codes[key] = len(templates)
                templates.append(_template(shard))
            template_ids[i] = code
        raw_algos = sorted({a for t in templates for a in t["raw_data"]["hashes"]})
        zip_algos = sorted({a for t in templates if t["zip_data"] for a in t["zip_data"]["hashes"]})
        return cls(samples, raw_bytes, zip_bytes,
                   strings([r["basename"] for r in raws]),
                   strings([None if z is None else z["basename"] for z in zips]),
                   templates, template_ids,
                   {a: strings([r["hashes"].get(a) for r in raws]) for a in raw_algos},
                   {a: strings([None if z is None else z["hashes"].get(a) for z in zips])
                    for a in zip_algos})

    # -- the Sequence ------------------------------------------------------------------------
    def __len__(self) -> int:
        return int(self.samples.size)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        i = int(i)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise OutOfRangeError(f"shard {i} out of range ({n} shards)")
        shard = self._cache.get(i)
        if shard is None:
            if len(self._cache) >= _KEEP:
                del self._cache[next(iter(self._cache))]
            shard = self._cache[i] = self._build(i)
        return shard

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for i in range(len(self)):
            yield self._build(i)  # not cached: a full pass would hold every dict

    def _build(self, i: int) -> dict[str, Any]:
        template = self.templates[int(self.template_ids[i])]
        shard = {k: _copy(v) for k, v in template.items()}
        shard["samples"] = int(self.samples[i])
        shard["raw_data"] = self._file(template["raw_data"], self.raw_names[i].as_py(),
                                       int(self.raw_bytes[i]), self.raw_hashes, i)
        if template["zip_data"]:
            shard["zip_data"] = self._file(template["zip_data"], self.zip_names[i].as_py(),
                                           int(self.zip_bytes[i]), self.zip_hashes, i)
        return shard

    @staticmethod
    def _file(template: dict[str, Any], name: str, size: int, hashes: dict[str, pa.Array],
              i: int) -> dict[str, Any]:
        entry = {k: _copy(v) for k, v in template.items() if k != "hashes"}
        entry.update(basename=name, bytes=size,
                     hashes={a: hashes[a][i].as_py() for a in template["hashes"]})
        return entry

    # -- vectorised facts --------------------------------------------------------------------
    def template_of(self, i: int) -> dict[str, Any]:
        return self.templates[int(self.template_ids[i])]

    def compressed(self) -> np.ndarray:
        """Bool per shard: has a compression and zip_data (read through the compressed file)."""
        flags = np.array([bool(t["compression"]) and bool(t["zip_data"]) for t in self.templates])
        return flags[self.template_ids] if len(self) else np.zeros(0, dtype=bool)

    def records(self, algo: str, *, zipped: bool = False) -> np.ndarray:
        """Bool per shard: whether its raw (or compressed) file records a hash ``algo``."""
        key = "zip_data" if zipped else "raw_data"
        flags = np.array([bool(t[key]) and algo in t[key]["hashes"] for t in self.templates])
        return flags[self.template_ids] if len(self) else np.zeros(0, dtype=bool)

    def check_common_columns(self, where: str) -> None:
        """Raise unless every shard has the same column names and encodings (compared per
        distinct template, not per shard)."""
        if not self.templates:
            return
        first_code = int(self.template_ids[0]) if len(self) else 0
        first = self.templates[first_code]
        want = (first["column_names"], first["column_encodings"])
        for code, t in enumerate(self.templates):
            if (t["column_names"], t["column_encodings"]) != want:
                i = int(np.flatnonzero(self.template_ids == code)[0])
                raise FormatError(
                    f"{where}: shard {i} has columns {dict(zip(t['column_names'], t['column_encodings']))}, "
                    f"shard 0 has {dict(zip(*want))}; all shards of a dataset must share their columns"
                )


_PLAIN_KEYS = frozenset({"column_encodings", "column_names", "column_sizes", "compression", "format",
                         "hashes", "raw_data", "samples", "size_limit", "version", "zip_data"})
_PLAIN_FILE = frozenset(_FILE_KEYS)


def _fast_key(shard: dict[str, Any]) -> tuple[Any, ...] | None:
    """A key naming a plain shard's template (exactly Mosaic's keys) without serialising it;
    None for anything else. Types sit beside values (``1 == 1.0 == True`` as keys) so a
    template rebuilds the same JSON. Unhashable where a list or dict sits in place of a scalar
    (the caller then takes the slow, exact key)."""
    raw, zipped = shard["raw_data"], shard["zip_data"]
    if shard.keys() != _PLAIN_KEYS or raw.keys() != _PLAIN_FILE or (
            zipped is not None and (not isinstance(zipped, dict) or zipped.keys() != _PLAIN_FILE)):
        return None
    sizes, limit, version = shard["column_sizes"], shard["size_limit"], shard["version"]
    return (tuple(shard["column_names"]), tuple(shard["column_encodings"]), tuple(sizes),
            tuple(map(type, sizes)), shard["compression"], shard["format"], tuple(shard["hashes"]),
            limit, type(limit), version, type(version), tuple(raw["hashes"]),
            None if zipped is None else tuple(zipped["hashes"]))


def _template(shard: dict[str, Any]) -> dict[str, Any]:
    t = {k: v for k, v in shard.items() if k != "samples"}
    for key in ("raw_data", "zip_data"):
        entry = shard[key]
        if entry:
            t[key] = {k: v for k, v in entry.items() if k not in _FILE_KEYS}
            t[key]["hashes"] = sorted(entry["hashes"])
        else:
            t[key] = entry  # None (or another falsy value, kept as it is)
    return t


def strings(values: list[str | None]) -> pa.Array:
    """An Arrow string array of ``values`` (None: null), built from its buffers: ``pa.array``
    of a list imports pandas to inspect it (0.4 s and more on a first open)."""
    n = len(values)
    encoded = [b"" if v is None else v.encode() for v in values]
    lengths = np.fromiter(map(len, encoded), np.int64, n)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    large = bool(offsets[-1] >= 1 << 31)
    nulls = np.fromiter((v is None for v in values), bool, n)
    null_count = int(nulls.sum())
    validity = pa.py_buffer(np.packbits(~nulls, bitorder="little").tobytes()) if null_count else None
    arr = pa.Array.from_buffers(pa.large_string() if large else pa.string(), n,
                                [validity, pa.py_buffer(offsets if large else offsets.astype(np.int32)),
                                 pa.py_buffer(b"".join(encoded))], null_count)
    return arr


def _copy(value: Any) -> Any:
    """A fresh copy of a JSON value (callers may mutate the dicts they get)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
