"""``MixtureSource``: several sources as one :class:`~petastream.source.Source`, an epoch taking
a fixed count of samples from each (see :mod:`petastream.mix.stream` for the counts).

Why a source and not a planner extension: the planner's order depends only on shard sizes,
seed and epoch, and already gives resumption across world sizes and worker counts, the same
number of batches on every rank and exactly-once per epoch. If the mixture is one sample
space of fixed size per epoch, all of that holds for it unchanged. So:

* **Virtual shards.** Stream ``i`` with ``c_i = q * S_i + r`` samples per epoch (size ``S_i``)
  has ``q`` whole copies, each one virtual shard per real shard (read straight through), then
  one *remainder* virtual shard per real shard, of ``r * s_j / S_i`` samples (largest
  remainder). The virtual shards of all streams, concatenated, are the shards the planner
  orders; their sizes are the same every epoch.
* **Which samples.** A remainder is ``r`` distinct samples of the stream: ``rng.choice(S_i,
  r, replace=False)``, sorted, with ``rng`` seeded by ``(seed, epoch, i)``: a pure function of
  the loader's seed and the epoch, so every rank and worker agrees without talking, and a
  resumed run (the planner restores seed and epoch) reads the same ones. Sorted, the remainder
  shard ``j`` holds the selected samples around real shard ``j``: the planner's block
  permutation and the shard cache's announcements still map to (nearly) one real shard each.
  The loader's workers learn the epoch from their pass's plan (:meth:`for_epoch`, called by
  :class:`~petastream.pipeline.work.PassWork`); the selection costs 8 bytes per selected
  sample of a partial copy, once per epoch and process, and nothing for whole copies.

Columns must agree (name, encoding, logical dtype) over the streams, as one batch holds
samples of several: otherwise the constructor names the differing columns.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from petastream.capabilities import Composite, Fingerprinted, StringReads, fingerprint_of
from petastream.columns.ops import scatter_columns, split_rows
from petastream.errors import InvalidArgumentError, UnknownColumnError
from petastream.mix.stream import Stream, epoch_counts, largest_remainder
from petastream.source import PackedRows, Source, is_source, packed_layout, read_ids
from petastream.sources import resolve_source
from petastream.stream.grouping import ShardGroup, group_by_shard, shard_offsets

__all__ = ["MixtureSource", "mixture", "open_source"]

_SELECTION = 3  # spawn-key tag: distinct from the order's RNG streams (see stream/order.py)
_KEEP = 4  # selections kept per process (a few epochs: workers of consecutive passes overlap)


def _column_facts(source: Source) -> dict[str, tuple[str, str | None]]:
    logical = source.logical_dtypes
    return {c: (t, logical.get(c)) for c, t in source.columns.items()}


def _check_columns(sources: Sequence[Source]) -> None:
    facts = [_column_facts(s) for s in sources]
    names = set().union(*facts)
    differ = sorted(c for c in names if len({repr(f.get(c)) for f in facts}) > 1)
    if differ:
        detail = "; ".join(
            f"{c}: " + ", ".join(f"stream {i} {'missing' if c not in f else f[c][0]}" for i, f in enumerate(facts))
            for c in differ)
        raise InvalidArgumentError(
            f"the streams of a mixture must have the same columns (one batch holds samples of "
            f"several); columns {differ} differ ({detail}): select or cast them to agree before mixing")


class MixtureSource(Composite, Fingerprinted, StringReads):
    """``streams`` (opened sources, with their :class:`Stream` counts) as one source (with the
    :mod:`~petastream.capabilities` named in its bases)."""

    def __init__(self, sources: Sequence[Source], streams: Sequence[Stream],
                 epoch_size: int | None = None) -> None:
        if not sources or len(sources) != len(streams):
            raise InvalidArgumentError("a mixture needs at least one Stream, got none")
        _check_columns(sources)
        self.sources = list(sources)
        self.streams = list(streams)
        self.epoch_size = epoch_size
        sizes = [len(s) for s in self.sources]
        self.counts = epoch_counts(self.streams, sizes, epoch_size)
        for i, (c, n) in enumerate(zip(self.counts, sizes)):
            if c and not n:
                raise InvalidArgumentError(f"stream {i} ({self.sources[i].url}) is empty but asked for {c} samples")
        self.url = "mixture(" + ", ".join(s.url for s in self.sources) + ")"
        # Per virtual shard: stream, real shard, and (remainder shards) the first selected index.
        stream: list[int] = []
        real: list[int] = []
        first: list[int] = []
        sizes_v: list[int] = []
        for i, (src, c, n) in enumerate(zip(self.sources, self.counts, sizes)):
            copies, rem = divmod(c, n) if n else (0, 0)
            real_sizes = [int(x) for x in src.shard_sizes]
            for _ in range(copies):
                stream += [i] * len(real_sizes)
                real += range(len(real_sizes))
                first += [-1] * len(real_sizes)
                sizes_v += real_sizes
            if rem:
                parts = largest_remainder(rem, [Fraction(x) for x in real_sizes])
                starts = np.concatenate([[0], np.cumsum(parts)[:-1]]).tolist()
                stream += [i] * len(parts)
                real += range(len(parts))
                first += starts
                sizes_v += parts
        self._stream = np.asarray(stream, dtype=np.int64)
        self._real = np.asarray(real, dtype=np.int64)
        self._first = np.asarray(first, dtype=np.int64)
        self.shard_sizes = np.asarray(sizes_v, dtype=np.int64)
        self.shard_offsets = shard_offsets(self.shard_sizes)
        self.seed, self.epoch = 0, 0
        self._selections: dict[tuple[int, int, int], np.ndarray] = {}
        self._lock = threading.Lock()
        layouts = [packed_layout(s) for s in self.sources]
        self._layout = layouts[0] if layouts[0] is not None and all(x == layouts[0] for x in layouts) else None

    # -- facts ---------------------------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        """What the mixture reads: its sources' fingerprints (their URLs where a source has
        none) and the streams' counts; the same on every rank that opens the same mixture."""
        ident = [fingerprint_of(s) for s in self.sources]
        ident += [repr(self.counts), repr(self.epoch_size)]
        return hashlib.blake2s("\0".join(ident).encode(), digest_size=16).hexdigest()

    def component_sources(self) -> list[Source]:
        """Its streams' sources (:class:`~petastream.capabilities.Composite`)."""
        return self.sources

    def __len__(self) -> int:
        return int(self.shard_offsets[-1])

    @property
    def num_shards(self) -> int:
        return len(self.shard_sizes)

    @property
    def columns(self) -> Mapping[str, str]:
        return self.sources[0].columns

    @property
    def logical_dtypes(self) -> Mapping[str, str]:
        return self.sources[0].logical_dtypes

    @property
    def stored_bytes(self) -> int:
        return int(sum(s.stored_bytes * c / max(1, len(s)) for s, c in zip(self.sources, self.counts)))

    @property
    def reads_in_place(self) -> bool:
        return all(s.reads_in_place for s in self.sources)

    @property
    def cache_limit(self) -> int | None:
        limits = [s.cache_limit for s in self.sources]
        return None if any(x is None for x in limits) else int(sum(limits))  # type: ignore[arg-type]

    @property
    def strings(self) -> str:
        first = self.sources[0]
        return first.strings if isinstance(first, StringReads) else "objects"

    @strings.setter
    def strings(self, value: str) -> None:  # how process workers ask for str columns
        for s in self.sources:
            if isinstance(s, StringReads):
                s.strings = value

    def with_strings(self, mode: str) -> MixtureSource:
        """This mixture with every stream reading str/bytes columns as ``mode`` (``StringReads``);
        ``self`` and its streams read as before."""
        view = object.__new__(MixtureSource)
        view.__dict__.update(self.__dict__)
        view.sources = [s.with_strings(mode) if isinstance(s, StringReads) else s for s in self.sources]
        return view

    # -- epochs ----------------------------------------------------------------------------------
    def for_epoch(self, seed: int, epoch: int) -> MixtureSource:
        """This mixture reading epoch ``epoch`` of a loader seeded ``seed`` (shares the sources
        and the selection cache)."""
        if (seed, epoch) == (self.seed, self.epoch):
            return self
        view = object.__new__(MixtureSource)
        view.__dict__.update(self.__dict__)
        view.seed, view.epoch = int(seed), int(epoch)
        return view

    def selection(self, i: int) -> np.ndarray:
        """The stream-global ids of stream ``i``'s remainder this epoch, ascending (distinct)."""
        key = (self.seed, self.epoch, i)
        with self._lock:
            sel = self._selections.get(key)
        if sel is None:
            n = len(self.sources[i])
            rem = self.counts[i] % n
            seq = np.random.SeedSequence((self.seed, self.epoch), spawn_key=(_SELECTION, i))
            sel = np.sort(np.random.Generator(np.random.PCG64(seq)).choice(n, rem, replace=False)).astype(np.int64)
            with self._lock:
                self._selections[key] = sel
                while len(self._selections) > _KEEP * len(self.sources):
                    self._selections.pop(next(iter(self._selections)))
        return sel

    def stream_ids(self, shard: int, local: np.ndarray) -> np.ndarray:
        """Stream-global ids of rows ``local`` of virtual shard ``shard``."""
        i, j, first = int(self._stream[shard]), int(self._real[shard]), int(self._first[shard])
        if first < 0:
            return local + self.sources[i].shard_offsets[j]
        return self.selection(i)[first + local]

    # -- reads -----------------------------------------------------------------------------------
    def read(self, ids: np.ndarray, columns: Sequence[str] | None = None) -> dict[str, Any]:
        return read_ids(self, ids, columns)

    def read_shard(self, shard: int, ids: np.ndarray | None = None,
                   columns: Sequence[str] | None = None) -> dict[str, Any]:
        i, j = int(self._stream[shard]), int(self._real[shard])
        local = np.arange(self.shard_sizes[shard], dtype=np.int64) if ids is None else np.asarray(ids, np.int64)
        if self._first[shard] < 0:
            return self.sources[i].read_shard(j, local, columns)
        return self.sources[i].read(self.stream_ids(shard, local), columns)

    def read_parts(self, groups: Iterable[Any], n: int, columns: Sequence[str] | None = None) -> dict[str, Any]:
        """One block of ``n`` rows from the streams' shards. Where every stream's source packs
        its fixed-size rows alike (:class:`~petastream.source.PackedRows`: MDS datasets of one
        layout, Parquet sources of the same types), those columns' rows are gathered straight
        into one table, as one dataset's are; the other columns are read per stream and
        scattered into place."""
        wanted = list(self.columns) if columns is None else list(columns)
        unknown = [c for c in wanted if c not in self.columns]
        if unknown:
            raise UnknownColumnError(f"no column {unknown[0]!r}; columns are {list(self.columns)}")
        groups = list(groups)
        layout = self._layout
        fixed = [c for c in wanted if layout is not None and c in (layout.names or ())]
        other = [c for c in wanted if c not in fixed]
        out: dict[str, Any] = {}
        if fixed and groups:
            assert layout is not None
            rows = np.empty(n, dtype=np.dtype((np.void, layout.itemsize)))
            self.read_rows_into(groups, rows)
            out = split_rows(rows, layout, fixed)
        if other or not groups:
            out.update(self._scattered(groups, n, other if groups else wanted))
        return {c: out[c] for c in wanted}

    def row_layout(self) -> np.dtype | None:
        """Packed rows (:class:`~petastream.source.PackedRows`) where every stream's source has
        them, with one layout."""
        return self._layout

    def read_rows_into(self, groups: Iterable[Any], out: np.ndarray) -> None:
        """Each group's rows as packed rows at ``out[g.positions]``: the groups of each stream
        made its source's own (real shards, stream rows), keeping their positions in ``out``."""
        per: dict[int, list[ShardGroup]] = {}
        for g in groups:
            i, j = int(self._stream[g.shard]), int(self._real[g.shard])
            if self._first[g.shard] < 0:
                per.setdefault(i, []).append(ShardGroup(j, g.local_ids, g.positions))
                continue
            ids = self.stream_ids(g.shard, np.asarray(g.local_ids, np.int64))
            positions = np.asarray(g.positions)
            per.setdefault(i, []).extend(p._replace(positions=positions[p.positions])
                                         for p in group_by_shard(ids, self.sources[i].shard_offsets))
        for i, real in per.items():
            source = self.sources[i]
            assert isinstance(source, PackedRows)  # self._layout is not None
            source.read_rows_into(real, out)

    def _scattered(self, groups: list[Any], n: int, columns: list[str]) -> dict[str, Any]:
        """One ``read_parts`` per stream of its rows in the block, in the order its groups come
        (a whole copy's group is its real shard's group as is: no regrouping on the hot path),
        the streams' parts then scattered into place."""
        real: dict[int, list[ShardGroup]] = {}
        pos: dict[int, list[np.ndarray]] = {}
        done: dict[int, int] = {}  # rows of each stream's part so far
        for g in groups:
            i, j, k = int(self._stream[g.shard]), int(self._real[g.shard]), len(g.local_ids)
            a = done.get(i, 0)
            if self._first[g.shard] < 0:
                parts = [ShardGroup(j, g.local_ids, np.arange(a, a + k))]
            else:
                ids = self.stream_ids(g.shard, np.asarray(g.local_ids, np.int64))
                parts = [p._replace(positions=p.positions + a)
                         for p in group_by_shard(ids, self.sources[i].shard_offsets)]
            real.setdefault(i, []).extend(parts)
            pos.setdefault(i, []).append(np.asarray(g.positions))
            done[i] = a + k
        if not real:
            return self.sources[0].read_parts([], 0, columns)
        blocks = [self.sources[i].read_parts(real[i], done[i], columns) for i in real]
        return scatter_columns(blocks, [np.concatenate(pos[i]) for i in real], n)

    # -- cache hooks -----------------------------------------------------------------------------
    def _real_shards(self, shard: int) -> list[int]:
        """The real shards of its stream that virtual shard ``shard`` reads this epoch."""
        j = int(self._real[shard])
        if self._first[shard] < 0 or not self.shard_sizes[shard]:
            return [j] if self.shard_sizes[shard] else []
        i = int(self._stream[shard])
        ends = self.stream_ids(shard, np.array([0, self.shard_sizes[shard] - 1], dtype=np.int64))
        a, b = np.searchsorted(self.sources[i].shard_offsets, ends, side="right") - 1
        return list(range(int(a), int(b) + 1))

    def prefetch(self, shards: Sequence[int]) -> None:
        want: list[dict[int, None]] = [{} for _ in self.sources]  # ordered sets, plan order
        for v in shards:
            for r in self._real_shards(int(v)):
                want[int(self._stream[v])][r] = None
        for src, real in zip(self.sources, want):
            src.prefetch(list(real))  # every stream told its whole window, also when empty

    def is_loaded(self, shard: int) -> bool:
        src = self.sources[int(self._stream[shard])]
        return all(src.is_loaded(r) for r in self._real_shards(shard))

    def cached_shard_bytes(self) -> np.ndarray:
        per_real = [np.asarray(s.cached_shard_bytes(), dtype=np.int64) for s in self.sources]
        return np.array([per_real[i][j] for i, j in zip(self._stream.tolist(), self._real.tolist())], dtype=np.int64)

    def close(self) -> None:
        for s in self.sources:
            s.close()

    def reopener(self) -> Callable[[], Source]:
        return functools.partial(_reopen, [s.reopener() for s in self.sources], self.streams, self.epoch_size)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_selections"], state["_lock"] = {}, None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


def _reopen(openers: Sequence[Callable[[], Source]], streams: Sequence[Stream],
            epoch_size: int | None) -> MixtureSource:
    return MixtureSource([o() for o in openers], streams, epoch_size)


def mixture(streams: Sequence[Any], epoch_size: int | None = None,
            dataset_options: Mapping[str, Any] | None = None) -> MixtureSource:
    """A :class:`MixtureSource` over ``streams`` (each a :class:`Stream`); ``epoch_size``: the
    samples of an epoch split by weight (default: the streams' sizes added up);
    ``dataset_options``: how stream URLs that give none of their own are opened."""
    bad = [s for s in streams if not isinstance(s, Stream)]
    if bad:
        raise InvalidArgumentError(
            f"a list given as a loader's dataset must hold petastream.Stream values, got {bad[0]!r}: "
            "wrap each dataset as petastream.Stream(url_or_source, weight=..., repeat=..., choose=...)")
    sources = [resolve_source(s.url_or_source, **dict(s.dataset_options if s.dataset_options is not None
                                                      else (None if is_source(s.url_or_source) else dataset_options)
                                                      or {})) for s in streams]
    return MixtureSource(sources, streams, epoch_size)


def open_source(dataset: Any, options: Mapping[str, Any] | None = None) -> Source:
    """The :class:`Source` a loader reads from its ``dataset`` argument: a list of
    :class:`Stream` is a :class:`MixtureSource` (``options``: how its stream URLs that give
    none of their own are opened); anything else is what
    :func:`petastream.sources.resolve_source` resolves (a source as is, else what lies at the
    URL or URLs, opened with ``options``)."""
    if isinstance(dataset, (list, tuple)) and any(isinstance(s, Stream) for s in dataset):
        return mixture(dataset, dataset_options=options)
    return resolve_source(dataset, **dict(options or {}))
