"""Reading MDS datasets: per-sample random access and bulk columnar reads.

``petastream.open(url)`` reads any MDS dataset, ours or Mosaic-written: local or fsspec URL,
merged indexes with sub-directory basenames, empty shards, every compression family.

Shards are opened as memory maps of their raw (uncompressed) file, so reading never loads
more than it touches. A compressed or remote shard is first brought into a local cache
directory (downloaded, optionally hash-checked, decompressed to a temporary name, renamed);
the cache is keyed by the dataset URL *and* the content of its index.json, so a rewritten
dataset never serves stale shards, and a second epoch reads the cached files.
"""

from __future__ import annotations

import builtins
import hashlib
import mmap
import os
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from petastream.errors import CorruptShardError, FormatError
from petastream.mds import hashing
from petastream.mds.compression import parse_compression
from petastream.mds.index import parse_index
from petastream.mds.layout import ColumnLayout
from petastream.mds.shard import ShardData
from petastream.mds.sidecar import SIDECAR, logical_dtypes, parse_sidecar
from petastream.mds.storage import Location, resolve

__all__ = ["MDSDataset", "open", "default_cache_root"]

_OPEN_SHARDS = 64  # memory maps kept open per dataset (LRU)


def default_cache_root() -> str:
    return os.environ.get("PETASTREAM_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "petastream", "shards"
    )


def _reopen(url: str, kwargs: dict[str, Any], fingerprint: str) -> MDSDataset:
    ds = MDSDataset(url, **kwargs)
    if ds.fingerprint != fingerprint:
        raise FormatError(
            f"{ds.url} changed since this dataset was pickled (index.json differs); reopen it "
            "with petastream.open() instead of unpickling a stale handle"
        )
    return ds


class MDSDataset:
    """An MDS dataset. ``len(ds)`` samples; ``ds[i]`` one sample as a dict (Mosaic's types);
    :meth:`read_shard` / :meth:`read` decode many samples into columns at once.

    ``validate_hash``: an algorithm name (e.g. ``"xxh64"``) checked on every shard file as it
    enters the cache, or for local uncompressed shards when first opened.
    ``allow_unsafe_types``: permit ``pkl`` columns, which run code when decoded.
    """

    def __init__(
        self,
        url: str,
        *,
        split: str | None = None,
        cache_dir: str | None = None,
        validate_hash: str | None = None,
        allow_unsafe_types: bool = False,
        storage_options: dict | None = None,
    ):
        # What reopens this dataset in another process (see __reduce__).
        self._init_args = (url, {"split": split, "cache_dir": cache_dir, "validate_hash": validate_hash,
                                 "allow_unsafe_types": allow_unsafe_types, "storage_options": storage_options})
        self.url = url.rstrip("/") + (f"/{split}" if split else "")
        self.location: Location = resolve(self.url, storage_options)
        try:
            index_bytes = self.location.read_bytes("index.json")
        except FileNotFoundError:
            raise _missing_index(self.location) from None
        self.shards = parse_index(index_bytes, source=self.location.child_url("index.json"))
        self.validate_hash = validate_hash
        if validate_hash is not None:
            self._check_hash_recorded(validate_hash)
        self.layout = self._common_layout(allow_unsafe_types)
        self.shard_sizes = np.array([s["samples"] for s in self.shards], dtype=np.int64)
        self.shard_offsets = np.zeros(len(self.shards) + 1, dtype=np.int64)
        np.cumsum(self.shard_sizes, out=self.shard_offsets[1:])
        #: Content fingerprint (of index.json): the same on every machine that reads this dataset.
        self.fingerprint = hashlib.blake2s(index_bytes, digest_size=16).hexdigest()
        key = hashlib.blake2s(self.url.encode() + b"\0" + index_bytes, digest_size=16).hexdigest()
        self.cache_dir = os.path.join(cache_dir or default_cache_root(), key)
        #: petastream.json's column facts ({} for datasets without one, e.g. Mosaic's).
        self.column_info = self._read_sidecar()
        #: Columns stored as another dtype than they mean, e.g. {"flag": "bool"} for Spark booleans.
        self.logical_dtypes = logical_dtypes(self.column_info)
        self._open: OrderedDict[int, ShardData] = OrderedDict()
        self._hash_checked: set[int] = set()
        self._lock = threading.Lock()

    def _read_sidecar(self) -> dict[str, dict[str, str]]:
        try:
            data = self.location.read_bytes(SIDECAR)
        except FileNotFoundError:
            return {}
        return parse_sidecar(data, source=self.location.child_url(SIDECAR))

    def __reduce__(self) -> tuple[Any, ...]:
        # Open shard maps and the lock stay behind: DataLoader workers started with "spawn" and
        # Spark tasks reopen the dataset, and check that it is still the same content.
        url, kwargs = self._init_args
        return _reopen, (url, kwargs, self.fingerprint)

    def _check_hash_recorded(self, algo: str) -> None:
        """Fail at open, not mid-epoch, when shards do not record ``algo``."""
        hashing.hexdigest(algo, b"")  # unknown names raise here
        for i, shard in enumerate(self.shards):
            if algo not in shard["hashes"]:
                raise FormatError(
                    f"validate_hash={algo!r}, but shard {i} of {self.url} records only "
                    f"{shard['hashes']}; pick one of those or leave validate_hash unset"
                )

    def _common_layout(self, allow_unsafe: bool) -> ColumnLayout | None:
        if not self.shards:
            return None
        layout = ColumnLayout.from_shard(self.shards[0], allow_unsafe=allow_unsafe)
        for i, shard in enumerate(self.shards[1:], 1):
            if (tuple(shard["column_names"]), tuple(shard["column_encodings"])) != (
                layout.names, layout.encoding_names
            ):
                raise FormatError(
                    f"{self.url}: shard {i} has columns {dict(zip(shard['column_names'], shard['column_encodings']))}, "
                    f"shard 0 has {layout.columns}; all shards of a dataset must share their columns"
                )
        return layout

    # -- metadata ----------------------------------------------------------------------------
    def __len__(self) -> int:
        return int(self.shard_offsets[-1])

    @property
    def num_samples(self) -> int:
        return len(self)

    @property
    def num_shards(self) -> int:
        return len(self.shards)

    @property
    def columns(self) -> dict[str, str]:
        return self.layout.columns if self.layout else {}

    def __repr__(self) -> str:
        return f"MDSDataset({self.url!r}, samples={len(self)}, shards={self.num_shards}, columns={self.columns})"

    def locate(self, index: int) -> tuple[int, int]:
        """Global sample id -> (shard, id within the shard)."""
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(f"sample {index} out of range for a dataset of {n} samples")
        shard = int(np.searchsorted(self.shard_offsets, index, side="right")) - 1
        return shard, index - int(self.shard_offsets[shard])

    # -- reading -----------------------------------------------------------------------------
    def __getitem__(self, index: int) -> dict[str, Any]:
        shard, local = self.locate(int(index))
        return self.shard(shard).get_item(local)

    def __iter__(self):
        for s in range(self.num_shards):
            data = self.shard(s)
            for i in range(data.num_samples):
                yield data.get_item(i)

    def read_shard(self, shard: int, ids: np.ndarray | None = None,
                   columns: list[str] | None = None) -> dict[str, Any]:
        """Decode samples ``ids`` of one shard (all when None) into columns, in bulk."""
        return self.shard(shard).read_columns(ids, columns)

    def read(self, ids: np.ndarray, columns: list[str] | None = None) -> dict[str, Any]:
        """Decode global sample ``ids`` (any order) into columns, one bulk read per shard."""
        from petastream.mds.columns import scatter_columns

        ids = np.asarray(ids, dtype=np.int64)
        if len(ids) and (ids.min() < 0 or ids.max() >= len(self)):
            raise IndexError(f"sample ids out of range for a dataset of {len(self)} samples")
        if not len(ids):
            return self.read_shard(0, ids, columns) if self.shards else {}
        shard_of = np.searchsorted(self.shard_offsets, ids, side="right") - 1
        if shard_of[0] == shard_of[-1] and (shard_of == shard_of[0]).all():
            s = int(shard_of[0])  # one shard: read in the order asked, straight into place
            return self.read_shard(s, ids - self.shard_offsets[s], columns)
        order = np.argsort(shard_of, kind="stable")
        cuts = np.flatnonzero(np.diff(shard_of[order])) + 1
        parts, positions = [], []
        for sel in np.split(order, cuts):
            s = int(shard_of[sel[0]])
            parts.append(self.read_shard(s, ids[sel] - self.shard_offsets[s], columns))
            positions.append(sel)
        return scatter_columns(parts, positions, len(ids))

    # -- shard files -------------------------------------------------------------------------
    def shard(self, i: int) -> ShardData:
        """The open :class:`ShardData` of shard ``i`` (fetched into the cache if needed)."""
        with self._lock:
            data = self._open.get(i)
            if data is not None:
                self._open.move_to_end(i)
                return data
        data = self._open_shard(i)
        with self._lock:
            self._open[i] = data
            while len(self._open) > _OPEN_SHARDS:
                self._open.popitem(last=False)
        return data

    def _open_shard(self, i: int) -> ShardData:
        if not 0 <= i < len(self.shards):
            raise IndexError(f"shard {i} out of range ({len(self.shards)} shards)")
        meta = self.shards[i]
        path = self.local_raw_path(i)
        raw = meta["raw_data"]
        size = os.path.getsize(path)
        if size != raw["bytes"]:
            raise CorruptShardError(
                f"shard {path}: {size} bytes on disk, index.json says {raw['bytes']}; "
                "the file is truncated or was replaced"
            )
        if size == 0:
            buf: Any = b""
        else:
            with builtins.open(path, "rb") as f:
                buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        return ShardData(buf, self.layout, name=path, expected_samples=meta["samples"])

    def local_raw_path(self, i: int) -> str:
        """Path of shard ``i``'s raw file on local disk, fetching/decompressing it if needed."""
        meta = self.shards[i]
        raw_name = meta["raw_data"]["basename"]
        direct = self.location.local_file(raw_name)
        if direct is not None and os.path.exists(direct):
            if self.validate_hash and i not in self._hash_checked:
                with builtins.open(direct, "rb") as f:
                    self._check_hash(i, "raw_data", f.read(), direct)
                self._hash_checked.add(i)
            return direct
        cached = os.path.join(self.cache_dir, *raw_name.split("/"))
        if os.path.exists(cached):
            return cached
        self._fetch(i, cached)
        return cached

    def _fetch(self, i: int, dest: str) -> None:
        meta = self.shards[i]
        zip_data = meta.get("zip_data")
        if meta.get("compression") and zip_data:
            name, key = zip_data["basename"], "zip_data"
        else:
            name, key = meta["raw_data"]["basename"], "raw_data"
        try:
            data = self.location.read_bytes(name)
        except FileNotFoundError:
            raise CorruptShardError(
                f"shard file {self.location.child_url(name)} listed in index.json is missing"
            ) from None
        expected = meta[key]["bytes"]
        if len(data) != expected:
            raise CorruptShardError(
                f"shard {self.location.child_url(name)}: {len(data)} bytes, index.json says "
                f"{expected}; the file is truncated or corrupted"
            )
        self._check_hash(i, key, data, self.location.child_url(name))
        if key == "zip_data":
            codec = parse_compression(meta["compression"])
            assert codec is not None
            try:
                data = codec.decompress(data)
            except Exception as e:  # each codec library raises its own error type
                raise CorruptShardError(
                    f"shard {self.location.child_url(name)}: cannot decompress ({codec.family}): {e}"
                ) from e
        resolve(os.path.dirname(dest)).write_bytes_atomic(os.path.basename(dest), data)

    def _check_hash(self, i: int, key: str, data: bytes, where: str) -> None:
        algo = self.validate_hash
        if algo is None:
            return
        expected = self.shards[i][key]["hashes"][algo]
        actual = hashing.hexdigest(algo, data)
        if actual != expected:
            raise CorruptShardError(f"shard {where}: {algo} is {actual}, index.json says {expected}")



def _missing_index(loc: Location) -> Exception:
    from petastream.errors import IncompleteDatasetError

    names = loc.listdir()
    # Shards at the top, or partial datasets one level down (a merged write that never merged).
    partial = any(n.startswith("shard.") for n in names) or any(
        loc.child(n).exists("index.json") or any(m.startswith("shard.") for m in loc.child(n).listdir())
        for n in names if not n.startswith(".") and loc.child(n).isdir()
    )
    if partial:
        return IncompleteDatasetError(
            f"{loc.url} has shard files but no index.json: its write did not finish. "
            "Write it again (or merge its partial indexes with petastream.merge_index)"
        )
    return FileNotFoundError(f"no MDS dataset at {loc.url}: index.json not found")


def open(url: str, **kwargs: Any) -> MDSDataset:  # noqa: A001 - the library's entry point
    """Open the MDS dataset at ``url``; see :class:`MDSDataset` for the options."""
    return MDSDataset(url, **kwargs)
