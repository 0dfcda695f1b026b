"""The global sample order G of one epoch: block permutation plus windowed shuffle.

Sample ids are global: shards concatenated in index order. With ``shuffle=False`` G is
``0..N-1``. With ``shuffle=True``:

1. **Blocks.** Each shard is cut into contiguous blocks of ``block_size`` samples (the last
   block of a shard is shorter; a block never spans two shards; empty shards have none).
2. **Block permutation.** The blocks are permuted by ``Generator(PCG64(SeedSequence(
   (seed, epoch), spawn_key=(0,))))``. Concatenating the permuted blocks gives a sequence P.
3. **Windowed shuffle.** P is cut at fixed positions into windows of ``window`` samples
   (``[k*window, (k+1)*window)``; a block may straddle two windows; the last window is short).
   Window k is shuffled by its own keyed pseudo-random permutation sigma_k (a Feistel network,
   keys from ``SeedSequence((seed, epoch), spawn_key=(1,))``, defined exactly in
   :mod:`petastream.stream._feistel`): ``G[k*window + j] = P[k*window + sigma_k(j)]``.
   sigma_k(j) is computed for any j alone, so reading some positions of G costs time in
   proportion to those positions only: a worker never shuffles samples that are not its own.

G depends only on ``(shard_sizes, shuffle, seed, epoch, block_size, window)``: never on the
world size, rank or worker count. Cost: two int64 tables and an int32 one per block (20 bytes a block, about
50 during the one-off build: pick ``block_size`` so that there are at most ~10M blocks);
``take`` works in pieces of at most 32k positions; nothing is O(N). This is not Mosaic's order
(``py1e``) but the same idea: a shard's samples are spread within about one window, so about
``window / block_size`` blocks are live at once, and the window should be several blocks long.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from petastream.checks import nonnegative_int, positive_int
from petastream.errors import OutOfRangeError
from petastream.stream._checks import shard_sizes_array
from petastream.stream._feistel import FeistelKeys, permute, window_salt

__all__ = ["DEFAULT_BLOCK_SIZE", "DEFAULT_WINDOW", "EpochOrder"]

DEFAULT_BLOCK_SIZE = 1 << 14
"""Samples per contiguous shuffle block (cut at shard ends, so never larger than a shard)."""

DEFAULT_WINDOW = 1 << 18
"""Samples per shuffle window; also the default bound on a chunk's size."""

_BLOCKS, _WINDOWS = 0, 1  # spawn_key tags: one RNG stream per purpose
_PIECE = 1 << 15  # positions per step of take(): the temporaries stay in the CPU cache


class EpochOrder:
    """G for one epoch, evaluated at any positions.

    ``take(positions)`` is ``G[positions]``; ``window_ids(k)`` is ``G[k*window : (k+1)*window]``;
    iterating yields the windows in order (their concatenation is G; for tests and tools).
    Thread-safe; the block tables are built on first use and are not pickled.
    """

    def __init__(
        self,
        shard_sizes: Sequence[int] | np.ndarray,
        *,
        shuffle: bool = False,
        seed: int = 0,
        epoch: int = 0,
        block_size: int = DEFAULT_BLOCK_SIZE,
        window: int = DEFAULT_WINDOW,
    ) -> None:
        self.shard_sizes = shard_sizes_array(shard_sizes)
        self.shuffle = bool(shuffle)
        self.seed = nonnegative_int("seed", seed, "the shuffle seed")
        self.epoch = nonnegative_int("epoch", epoch, "the epoch number")
        self.block_size = positive_int("block_size", block_size, "samples per shuffle block")
        self.window = positive_int("window", window, "samples per shuffle window")
        self.num_samples = int(self.shard_sizes.sum())
        self._tables: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._keys: FeistelKeys | None = None
        self._last_finder: _BlockFinder | None = None

    def __repr__(self) -> str:
        return (
            f"EpochOrder(num_samples={self.num_samples}, shards={self.shard_sizes.size}, "
            f"shuffle={self.shuffle}, seed={self.seed}, epoch={self.epoch}, "
            f"block_size={self.block_size}, window={self.window})"
        )

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_tables"] = state["_keys"] = state["_last_finder"] = None
        return state

    @property
    def num_windows(self) -> int:
        return -(-self.num_samples // self.window)

    @property
    def num_blocks(self) -> int:
        return int((-(-self.shard_sizes // self.block_size)).sum())

    def seed_sequence(self, *key: int) -> np.random.SeedSequence:
        """The SeedSequence for one purpose of this epoch (``key`` is the spawn key)."""
        return np.random.SeedSequence((self.seed, self.epoch), spawn_key=key)

    def window_ids(self, k: int) -> np.ndarray:
        """``G[k*window : min((k+1)*window, N)]`` as a new int64 array."""
        lo = k * self.window
        hi = min(lo + self.window, self.num_samples)
        if not 0 <= lo < hi:
            raise OutOfRangeError(f"window {k} is out of range; this epoch has {self.num_windows}")
        return self.take(np.arange(lo, hi, dtype=np.int64))

    def take(self, positions: np.ndarray) -> np.ndarray:
        """``G[positions]`` (a new int64 array) for integer positions in ``[0, N)``."""
        return self.take_with_shards(positions)[0]

    def take_with_shards(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """``G[positions]`` and, when shuffled, each id's shard (int32; known from its block
        for free, where a search would cost as much as the rest). Unshuffled: ``None``, the
        ids being ascending runs already."""
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size and not (0 <= positions.min() and positions.max() < self.num_samples):
            raise OutOfRangeError(
                f"positions must lie in [0, {self.num_samples}), got "
                f"[{int(positions.min())}, {int(positions.max())}]"
            )
        if not self.shuffle:
            return positions.copy(), None
        out = np.empty(positions.size, dtype=np.int64)
        shards = np.empty(positions.size, dtype=np.int32)
        for a in range(0, positions.size, _PIECE):
            out[a : a + _PIECE], shards[a : a + _PIECE] = self._take_piece(positions[a : a + _PIECE])
        return out, shards

    def window_shards(self, k: int) -> list[int]:
        """The shards whose samples window ``k`` of G holds (the blocks of P's window k), in P
        order: what a reader of that window needs, without computing its ids."""
        lo = k * self.window
        hi = min(lo + self.window, self.num_samples)
        if not 0 <= lo < hi:
            raise OutOfRangeError(f"window {k} is out of range; this epoch has {self.num_windows}")
        if not self.shuffle:
            offsets = np.concatenate([[0], np.cumsum(self.shard_sizes)])
            first = np.array([lo, hi - 1], dtype=np.int64)
            a, b = np.searchsorted(offsets, first, side="right") - 1
            return [int(s) for s in range(a, b + 1) if self.shard_sizes[s]]
        cum, _, block_shard = self._block_tables()
        b0 = int(np.searchsorted(cum, lo, side="right")) - 1
        b1 = int(np.searchsorted(cum, hi, side="left"))
        shards = block_shard[b0:b1]  # the shard of each block in the window
        _, first = np.unique(shards, return_index=True)
        return [int(s) for s in shards[np.sort(first)]]

    def __iter__(self) -> Iterator[np.ndarray]:
        for k in range(self.num_windows):
            yield self.window_ids(k)

    def _take_piece(self, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        cum, delta, shard = self._block_tables()
        if self._keys is None:
            self._keys = FeistelKeys(self.seed_sequence(_WINDOWS))
        keys, w, n = self._keys, self.window, self.num_samples
        k = pos // w
        k_lo, k_hi = int(k.min()), int(k.max())
        if w == 1:  # windows of one sample: sigma is the identity, G is P (blocks permuted, rows in order)
            q = pos.copy()
        elif k_lo == k_hi:  # the usual case: one window, one salt
            salt = window_salt(np.array(k_lo), keys)[()]
            q = permute((pos - k_lo * w).view(np.uint64), salt, keys, min(w, n - k_lo * w))
            q = q.view(np.int64)
            q += k_lo * w
        else:
            q = _permute_windows(k, (pos - k * w).view(np.uint64), keys, w, n).view(np.int64)
            q += k * w
        # Look only at the blocks spanning this piece's windows (a few, when positions are local).
        b0 = int(np.searchsorted(cum, k_lo * w, side="right")) - 1
        b1 = int(np.searchsorted(cum, min((k_hi + 1) * w, n), side="left"))
        block = self._finder(b0, b1).blocks(q)
        q += delta[block]
        return q, shard[block]

    def _finder(self, b0: int, b1: int) -> _BlockFinder:
        finder = self._last_finder  # one read: another thread may replace it meanwhile
        if finder is None or finder.span != (b0, b1):
            finder = _BlockFinder(self._block_tables()[0], b0, b1)
            self._last_finder = finder  # every chunk of a window reuses it
        return finder

    def _block_tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(cum, delta, shard)`` over the permuted blocks: block b covers P positions
        ``[cum[b], cum[b+1])`` and holds sample ids ``q + delta[b]`` of shard ``shard[b]``."""
        if self._tables is None:
            rng = np.random.Generator(np.random.PCG64(self.seed_sequence(_BLOCKS)))
            self._tables = _permuted_blocks(self.shard_sizes, self.block_size, rng)
        return self._tables


def _permute_windows(
    k: np.ndarray, j: np.ndarray, keys: FeistelKeys, window: int, num_samples: int
) -> np.ndarray:
    """sigma_k(j) elementwise, for positions spread over several windows."""
    salt = window_salt(k, keys)
    last = (num_samples - 1) // window
    short = num_samples - last * window  # length of the last window
    if short == window:
        return permute(j, salt, keys, window)
    q = np.empty_like(j)
    full = k != last
    q[full] = permute(j[full], salt[full], keys, window)
    q[~full] = permute(j[~full], salt[~full], keys, short)
    return q


class _BlockFinder:
    """The block holding each of many P positions within blocks ``b0..b1-1`` (blocks start at
    ``cum``): a bucket table instead of a binary search per position (cProfile: the search was
    45% of :meth:`EpochOrder.take`; this is a gather, a compare and an add: take of a 262k
    window went from 28 to 14 ns an id).

    Buckets are ``2**shift`` positions, no longer than the shortest block, so a bucket holds at
    most one block start: the block at a bucket's first position, or the next one. The table
    has one int32 per bucket (at most one per position of the span: ~1 MB for a window of
    262,144 around a one-sample block, usually ``block_size`` times less). A span that would
    need more than :data:`MAX_BUCKETS` (a huge window around a tiny block) keeps the search.
    """

    MAX_BUCKETS = 1 << 20

    def __init__(self, cum: np.ndarray, b0: int, b1: int) -> None:
        self.span = (b0, b1)
        self.b0 = b0
        self.edges = cum[b0 : b1 + 1]
        self.base = int(self.edges[0])
        starts = self.edges[:-1] - self.base
        self.shift = max(0, int(np.diff(self.edges).min()).bit_length() - 1) if starts.size else 0
        buckets = ((int(self.edges[-1]) - self.base - 1) >> self.shift) + 1
        self.table: np.ndarray | None = None
        if buckets <= self.MAX_BUCKETS:
            # first bucket whose first position lies in each block: ceil(start / 2**shift)
            first = -(-starts >> self.shift)
            counts = np.diff(np.append(first, buckets))
            self.table = np.repeat(np.arange(starts.size, dtype=np.int32), counts)

    def blocks(self, q: np.ndarray) -> np.ndarray:
        """Absolute block index of each P position in ``q`` (int64)."""
        if self.table is None:
            rel = np.searchsorted(self.edges, q, side="right")
            rel += self.b0 - 1
            return rel
        rel = self.table[(q - self.base) >> self.shift].astype(np.int64)
        rel += q >= self.edges[rel + 1]  # a block starting inside the bucket
        rel += self.b0
        return rel


def _permuted_blocks(
    sizes: np.ndarray, block_size: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    counts = -(-sizes // block_size)  # blocks per shard; 0 for an empty shard
    shard = np.repeat(np.arange(sizes.size), counts)
    first = np.cumsum(counts) - counts
    within = np.arange(shard.size, dtype=np.int64) - np.repeat(first, counts)
    starts = (np.cumsum(sizes) - sizes)[shard] + within * block_size
    lengths = np.minimum(block_size, sizes[shard] - within * block_size)
    perm = rng.permutation(shard.size)
    cum = np.zeros(shard.size + 1, dtype=np.int64)
    np.cumsum(lengths[perm], out=cum[1:])
    delta = starts[perm] - cum[:-1]
    return cum, delta, shard[perm].astype(np.int32)
