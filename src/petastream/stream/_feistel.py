"""Keyed pseudo-random permutations of ``[0, L)`` that can be evaluated at any single point.

A window's shuffle is a permutation sigma of ``[0, L)``. Drawing it with Fisher-Yates would make
every worker of every rank shuffle every window of the epoch (O(N) work per worker) just to read
its own 1/(ranks*workers) of the positions. A Feistel network gives sigma(j) for any j alone, so
a worker does O(its own samples) work, and there is nothing to hold in memory.

Definition (all arithmetic on uint64, wrapping; this is the exact, version-stable recipe):

* Keys, per epoch: ``state = SeedSequence((seed, epoch), spawn_key=(1,)).generate_state(13,
  uint64)``; ``K[r] = state[r]``, ``M[r] = state[6 + r] | 1`` for r in 0..5, ``S = state[12]``.
* Salt of window k: ``s = fmix64(k ^ S)`` (MurmurHash3's 64-bit finaliser).
* ``b = max(1, bit_length(L - 1))``; x in ``[0, 2**b)`` splits into ``left`` (high ``b - b//2``
  bits) and ``right`` (low ``b//2`` bits). Six rounds, with ``wl`` the current left width:
  ``f = ((right ^ s ^ K[r]) * M[r]) >> (64 - wl)`` (0 if wl == 0);
  ``left, right = right, left ^ f``; the widths swap. Then ``x = left << width(right) | right``.
  Each round is invertible, so this is a permutation of ``[0, 2**b)``.
* Cycle walking: while ``x >= L`` apply the network again. Since ``2**b < 2*L`` this takes
  fewer than two passes on average and yields a permutation of ``[0, L)``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ROUNDS", "FeistelKeys", "permute", "window_salt"]

ROUNDS = 6
_U = np.uint64
_FMIX_1 = _U(0xFF51AFD7ED558CCD)
_FMIX_2 = _U(0xC4CEB9FE1A85EC53)
_S33 = _U(33)


class FeistelKeys:
    """Round keys and multipliers for one epoch, from a SeedSequence."""

    def __init__(self, seq: np.random.SeedSequence) -> None:
        state = seq.generate_state(2 * ROUNDS + 1, np.uint64)
        self.xor = [_U(v) for v in state[:ROUNDS]]
        self.mul = [_U(v) | _U(1) for v in state[ROUNDS : 2 * ROUNDS]]
        self.salt = _U(state[2 * ROUNDS])


def _fmix64(x: np.ndarray) -> np.ndarray:
    """MurmurHash3 fmix64, in place."""
    x ^= x >> _S33
    x *= _FMIX_1
    x ^= x >> _S33
    x *= _FMIX_2
    x ^= x >> _S33
    return x


def window_salt(k: np.ndarray, keys: FeistelKeys) -> np.ndarray:
    """Salt for window indices ``k`` (int64 array of any shape, non-negative)."""
    s = k.astype(np.uint64)
    s ^= keys.salt
    return _fmix64(s)


def _network(
    x: np.ndarray, salt: np.ndarray | np.uint64, keys: FeistelKeys, bits: int
) -> np.ndarray:
    wr = bits // 2
    wl = bits - wr
    left = x >> _U(wr)
    right = x & _U((1 << wr) - 1)
    f = np.empty_like(x)
    for key, mul in zip(keys.xor, keys.mul):
        np.bitwise_xor(right, salt, out=f)
        f ^= key
        f *= mul
        if wl:
            f >>= _U(64 - wl)
        else:
            f[...] = 0
        f ^= left
        left, right, f = right, f, left
        wl, wr = wr, wl
    left <<= _U(wr)
    left |= right
    return left


def permute(
    j: np.ndarray, salt: np.ndarray | np.uint64, keys: FeistelKeys, length: int
) -> np.ndarray:
    """sigma(j) for uint64 ``j`` in ``[0, length)``; ``salt``: one, or one per element of j."""
    bits = max(1, (length - 1).bit_length())
    y = _network(j, salt, keys, bits)
    todo = np.flatnonzero(y >= _U(length))
    while todo.size:
        y[todo] = _network(y[todo], salt[todo] if isinstance(salt, np.ndarray) and salt.ndim else salt,
                           keys, bits)
        todo = todo[y[todo] >= _U(length)]
    return y
