"""Reading MDS datasets: per-sample random access and bulk columnar reads.

``petastream.open(url)`` reads any MDS dataset, ours or Mosaic-written: local or fsspec URL,
merged indexes with sub-directory basenames, empty shards, every compression family.

Shards are opened as memory maps of their raw (uncompressed) file, so reading never loads
more than it touches. A local uncompressed shard is mapped where it lies (never copied); a
compressed, remote or FUSE-mounted one (``/Volumes``, ``/dbfs``) is first brought into the
node's shard cache (:mod:`petastream.storage.cache`: one fill per shard per node, verified,
atomic, bounded by ``cache_limit``) under a key naming its bytes (:mod:`petastream.mds.sources`),
so neither a repaired nor a rewritten source is shadowed by an old copy, and a second epoch
reads the cached files. :meth:`MDSDataset.prefetch` loads the shards a loader needs next on a
bounded pool (:mod:`petastream.storage.readahead`), so decode does not wait on the network or on
decompression.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from petastream.capabilities import CachePeers, Fingerprinted, StringReads
from petastream.checks import nonnegative_int, positive_int
from petastream.errors import FormatError, OutOfRangeError, UnknownColumnError
from petastream.mds.index_open import open_index
from petastream.mds.layout import ColumnLayout
from petastream.mds.shard import ShardData
from petastream.mds.shard_files import ShardFiles
from petastream.mds.shard_table import ShardTable
from petastream.mds.sidecar import SIDECAR, logical_dtypes, parse_sidecar
from petastream.mds.sources import ShardSources
from petastream.storage.announce import Announcements
from petastream.storage.cache import ShardCache, default_cache_root
from petastream.storage.location import Location, resolve
from petastream.storage.shards import ShardStore, open_cache

__all__ = ["MDSDataset", "open", "default_cache_root"]

_OPEN_SHARDS = 64  # memory maps kept open per dataset (LRU)


def _reopen(url: str, kwargs: dict[str, Any], fingerprint: str) -> MDSDataset:
    ds = MDSDataset(url, **kwargs)
    if ds.fingerprint != fingerprint:
        raise FormatError(
            f"{ds.url} changed since this dataset was pickled (index.json differs); reopen it "
            "with petastream.open() instead of unpickling a stale handle"
        )
    return ds


class MDSDataset(CachePeers, Fingerprinted, StringReads):  # capabilities: petastream.capabilities
    """An MDS dataset. ``len(ds)`` samples; ``ds[i]`` one sample as a dict (Mosaic's types);
    :meth:`read_shard` / :meth:`read` decode many samples into columns at once.

    ``cache_dir``: the node's shard cache (default ``$PETASTREAM_CACHE_DIR`` or
    ``~/.cache/petastream/shards``); every process on the machine that shares it fetches a
    shard once. ``cache_limit``: its size bound, bytes or ``"50gb"`` (default
    ``$PETASTREAM_CACHE_LIMIT``; without one the cache keeps 5% of the disk free).
    ``validate_hash``: ``"auto"`` checks the fastest hash each shard file records as it enters
    the cache (or is first mapped in place); an algorithm name checks that one; None sizes only.
    ``read_in_place``: None maps local uncompressed shards where they lie and caches FUSE mounts
    of remote storage (``/Volumes``, ``/dbfs``); True maps those in place too; False caches all.
    ``prefetch_depth``: shards loaded ahead of the reader (0 disables read-ahead);
    ``prefetch_workers``: loads at once (downloads, decompression, hash checks).
    ``allow_unsafe_types``: permit ``pkl`` columns, which run code when decoded.
    """

    fingerprint: str = ""  # set at open (a class default, where Fingerprinted has a property)

    def __init__(
        self,
        url: str,
        *,
        split: str | None = None,
        cache_dir: str | None = None,
        cache_limit: int | str | None = None,
        validate_hash: str | None = "auto",
        read_in_place: bool | None = None,
        prefetch_depth: int = 8,
        prefetch_workers: int = 8,
        allow_unsafe_types: bool = False,
        storage_options: dict | None = None,
    ):
        # What reopens this dataset in another process (see __reduce__).
        self._init_args = (url, {
            "split": split, "cache_dir": cache_dir, "cache_limit": cache_limit,
            "validate_hash": validate_hash, "read_in_place": read_in_place,
            "prefetch_depth": prefetch_depth, "prefetch_workers": prefetch_workers,
            "allow_unsafe_types": allow_unsafe_types, "storage_options": storage_options})
        prefetch_depth = nonnegative_int("prefetch_depth", prefetch_depth, "shards loaded ahead; 0: none")
        prefetch_workers = positive_int("prefetch_workers", prefetch_workers, "shard loads at once")
        self.url = url.rstrip("/") + (f"/{split}" if split else "")
        self.location: Location = resolve(self.url, storage_options)
        cache, self.cache_limit = open_cache(cache_dir, cache_limit)
        try:
            # Indexes (remote ones, and every index's parsed sidecar) go through a cache of
            # their own beside the shards' (same node-wide fill-once rules), so shard
            # accounting and eviction see shards only.
            opened = open_index(self.location, ShardCache.at(os.path.join(cache.root, "indexes")))
        except FileNotFoundError:
            raise _missing_index(self.location) from None
        #: The shards, in order: a lazy sequence of index.json's shard dicts (built when asked for).
        self.shards: ShardTable = opened.table
        #: Content fingerprint (of index.json): the same on every machine that reads this dataset.
        self.fingerprint = opened.fingerprint
        #: Where the shards came from: "cache" (the node's parsed copy of this index.json),
        #: "built" (parsed by this open and kept for the node's next ones), "dataset" (a
        #: sidecar an earlier petastream wrote beside index.json) or "parsed" (not kept: the
        #: cache could not take it). See :mod:`petastream.mds.index_open`.
        self.index_origin = opened.origin
        #: Whether the shards were mapped from a sidecar another open made (no JSON parsed).
        self.index_from_sidecar = opened.origin in ("cache", "dataset")
        #: This index's entries in ``<cache_dir>/indexes`` (removed with the dataset's shards).
        self.index_keys = opened.keys
        self.validate_hash = validate_hash
        self.sources = ShardSources(self.location, self.shards, validate_hash=validate_hash,
                                    read_in_place=read_in_place)
        self.layout = self._common_layout(allow_unsafe_types)
        self.shard_sizes = self.shards.samples
        self.shard_offsets = np.zeros(len(self.shards) + 1, dtype=np.int64)
        np.cumsum(self.shard_sizes, out=self.shard_offsets[1:])
        #: petastream.json's column facts ({} for datasets without one, e.g. Mosaic's).
        self.column_info = self._read_sidecar()
        #: Columns stored as another dtype than they mean, e.g. {"flag": "bool"} for Spark booleans.
        self.logical_dtypes = logical_dtypes(self.column_info)
        self.files = ShardFiles(self.sources, self.layout, cache, self.cache_limit)
        #: The shards in the node's cache: read-ahead, what is loaded, cache peers.
        self.store = ShardStore(self.files, cache=cache, cache_limit=self.cache_limit, num_shards=len(self.shards),
                                through_cache=not self.files.all_in_place, depth=prefetch_depth,
                                workers=prefetch_workers, max_open=_OPEN_SHARDS)
        #: The node's shard cache (see :mod:`petastream.storage.cache`) and its directory.
        self.cache, self.cache_dir = cache, cache.root
        #: How reads return ``str``/``bytes`` columns: ``"objects"`` (object arrays), or
        #: ``"ragged"`` (their bytes as ``Ragged`` uint8; see ``ShardData.read_columns``).
        self.strings = "objects"

    def _read_sidecar(self) -> dict[str, dict[str, str]]:
        try:
            data = self.location.read_bytes(SIDECAR)
        except FileNotFoundError:
            return {}
        return parse_sidecar(data, source=self.location.child_url(SIDECAR))

    def reopener(self) -> Callable[[], MDSDataset]:
        """What reopens this dataset in another process of this node: as a pickle does, but
        with this process's cache directory and limit. (A pickle resolves them where it is
        opened, from that process's environment: right for a Spark task on another machine;
        worker processes of a loader must share its cache.)"""
        url, kwargs = self._init_args
        return functools.partial(_reopen, url, {**kwargs, **self.store.settings()}, self.fingerprint)

    def __reduce__(self) -> tuple[Any, ...]:
        # Open shard maps and the lock stay behind: DataLoader workers started with "spawn" and
        # Spark tasks reopen the dataset, and check that it is still the same content.
        url, kwargs = self._init_args
        return _reopen, (url, kwargs, self.fingerprint)

    def _common_layout(self, allow_unsafe: bool) -> ColumnLayout | None:
        if not len(self.shards):
            return None
        layout = ColumnLayout.from_shard(self.shards.template_of(0), allow_unsafe=allow_unsafe)
        self.shards.check_common_columns(self.url)
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

    @property
    def stored_bytes(self) -> int:
        """Bytes of every shard's raw (uncompressed) file: what the rows take as read."""
        return int(self.shards.raw_bytes.sum())

    def __repr__(self) -> str:
        return f"MDSDataset({self.url!r}, samples={len(self)}, shards={self.num_shards}, columns={self.columns})"

    def locate(self, index: int) -> tuple[int, int]:
        """Global sample id -> (shard, id within the shard)."""
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise OutOfRangeError(f"sample {index} out of range for a dataset of {n} samples")
        shard = int(np.searchsorted(self.shard_offsets, index, side="right")) - 1
        return shard, index - int(self.shard_offsets[shard])

    # -- reading -----------------------------------------------------------------------------
    def __getitem__(self, index: int) -> dict[str, Any]:
        shard, local = self.locate(int(index))
        return self.shard(shard).get_item(local)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for s in range(self.num_shards):
            data = self.shard(s)
            for i in range(data.num_samples):
                yield data.get_item(i)

    def read_shard(self, shard: int, ids: np.ndarray | None = None,
                   columns: Sequence[str] | None = None) -> dict[str, Any]:
        """Decode samples ``ids`` of one shard (all when None) into columns, in bulk."""
        return self.shard(shard).read_columns(ids, columns, self.strings)

    def read(self, ids: np.ndarray, columns: Sequence[str] | None = None) -> dict[str, Any]:
        """Decode global sample ``ids`` (any order) into columns, one bulk read per shard."""
        from petastream.source import read_ids

        return read_ids(self, ids, columns)

    def read_parts(self, groups: Iterable[Any], n: int, columns: Sequence[str] | None = None) -> dict[str, Any]:
        """One block of ``n`` rows from several shards: each group (``shard``, ``local_ids``,
        ``positions``; the groups' positions cover ``0..n-1`` once) read in the order given,
        its row ``j`` landing at row ``positions[j]``.

        All-fixed-size layouts gather packed rows straight into one table and cut it into
        contiguous columns (py-spy, 1M 'tabular' rows over 2 shards: copying each shard's
        strided columns and scattering them was 23% of the decode thread); others, mapped in
        place, write every shard's values into place (:mod:`petastream.mds.mixed_rows`); others
        decode each shard's columns and scatter them.
        """
        from petastream.columns.ops import scatter_columns, split_rows
        from petastream.columns.pool import pooled_empty

        dtype = self.row_layout()
        if dtype is not None:
            assert self.layout is not None
            wanted = list(self.layout.names) if columns is None else list(columns)
            for c in wanted:
                if c not in self.layout.names:
                    raise UnknownColumnError(f"no column {c!r}; columns are {list(self.layout.names)}")
            rows = pooled_empty(n, np.dtype((np.void, dtype.itemsize)))  # a temporary: reused
            self.read_rows_into(groups, rows)
            return split_rows(rows, dtype, wanted)
        # Mixed, str/bytes read as bytes: every shard's rows straight into place (.mixed_rows),
        # which holds the block's shards open together: only where they are mapped in place
        # (through the cache, a shard held open is pinned there, and a limited cache must be
        # free to evict each one once read), and few enough (each holds a descriptor). Else,
        # and for objects (made per shard either way: reading column by column across the
        # shards measured no faster, 0-15% slower), shard by shard, each read as it arrives.
        layout = self.layout
        if layout is not None and self.reads_in_place and self.strings == "ragged":
            groups = list(groups)
            if 0 < len(groups) <= _OPEN_SHARDS:
                return self._read_mixed_parts(groups, n, list(layout.names) if columns is None else list(columns))
        blocks, positions = [], []
        for g in groups:
            blocks.append(self.read_shard(g.shard, g.local_ids, columns))
            positions.append(g.positions)
        return scatter_columns(blocks, positions, n)

    def _read_mixed_parts(self, groups: list[Any], n: int, wanted: list[str]) -> dict[str, Any]:
        from petastream.mds.mixed_rows import Part, read_mixed

        assert self.layout is not None
        for c in wanted:
            if c not in self.layout.names:
                raise UnknownColumnError(f"no column {c!r}; columns are {list(self.layout.names)}")
        parts = [Part(self.shard(g.shard), np.asarray(g.local_ids, dtype=np.int64), g.positions) for g in groups]
        for part in parts:
            ids = part.ids
            assert ids is not None
            if len(ids) and (ids.min() < 0 or ids.max() >= part.shard.num_samples):
                raise OutOfRangeError(f"sample ids out of range for shard {part.shard.name} "
                                      f"with {part.shard.num_samples} samples")
        return read_mixed(parts, n, wanted, self.strings == "ragged")

    def row_layout(self) -> np.dtype | None:
        """Packed rows (:class:`petastream.source.PackedRows`): every column's, where all are
        fixed-size (a shard's samples are then these rows back to back)."""
        return self.layout.fixed_dtype() if self.layout is not None and self.layout.all_fixed else None

    def read_rows_into(self, groups: Iterable[Any], out: np.ndarray) -> None:
        """Each group's samples as packed rows at ``out[g.positions]`` (see :meth:`row_layout`)."""
        for g in groups:
            got = self.shard(g.shard).fixed_rows(g.local_ids)
            out[g.positions] = got
            del got  # back to the pool before the next shard's rows

    # -- shard files (the store) --------------------------------------------------------------
    def prefetch(self, shards: Sequence[int]) -> None:
        """Load ``shards`` (the ones the coming reads need, in plan order) ahead of the reader,
        on a bounded pool. Non-blocking; shards open, loading or already asked for are skipped."""
        self.store.prefetch(shards)

    def cache_peers(self) -> Announcements | None:
        """The processes sharing this dataset's bounded cache (see :meth:`ShardStore.cache_peers`)."""
        return self.store.cache_peers()

    def for_epoch(self, seed: int, epoch: int) -> MDSDataset:
        return self  # an epoch reads the same samples (the Source protocol)

    def with_strings(self, mode: str) -> MDSDataset:
        """This dataset reading str/bytes columns as ``mode`` (``StringReads``): a shallow copy
        sharing shards, store and cache; ``self`` reads as before."""
        view = object.__new__(type(self))  # (not copy.copy: it would go through __reduce__, which reopens)
        view.__dict__.update(self.__dict__)
        view.strings = mode
        return view

    def close(self) -> None:
        """Unmap the shards this dataset keeps open and drop its queued read-ahead, releasing
        their file descriptors (loaders call it when an iteration ends). Reading again reopens
        what it needs; arrays a caller still holds keep their own shard mapped."""
        self.store.close()

    def shard(self, i: int) -> ShardData:
        """The open :class:`ShardData` of shard ``i`` (waits for its read-ahead load, or loads
        it now: fetched into the cache, checked, decompressed, if needed)."""
        if not 0 <= i < len(self.shards):
            raise OutOfRangeError(f"shard {i} out of range ({len(self.shards)} shards)")
        data: ShardData = self.store.get(i)
        return data

    def is_loaded(self, i: int) -> bool:
        """Whether shard ``i`` is mapped now: reading it will not wait for a download."""
        return self.store.is_loaded(i)

    def local_raw_path(self, i: int) -> str:
        """Path of shard ``i``'s raw file on local disk (in place, or its cache entry, filled now
        if needed). The path is not pinned: a limited cache may evict it once unmapped."""
        self.shard(i)
        return self.files.local_path(i)

    def cached_shard_bytes(self) -> np.ndarray:
        """Bytes each shard takes in the shard cache (raw, decompressed); 0 for shards mapped in place."""
        return self.files.cached_bytes()

    @property
    def cache_readers(self) -> int:
        """Processes of this node expected to read through the cache at once (torchrun's
        LOCAL_WORLD_SIZE, else 1): a limited cache is shared out between them."""
        return self.store.readers

    @property
    def reads_in_place(self) -> bool:
        """Whether every shard is mapped where it lies (local, uncompressed): read-ahead has
        nothing to fetch or decompress, at most a hash to check once per process."""
        return self.files.all_in_place


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
