"""Copy many variable-length byte segments into place without a per-byte index for all of them.

The vectorised way to move ``n`` segments is one fancy-indexed assignment through an index of
every byte (``np.repeat`` + ``arange``): 16 bytes of temporaries per byte moved, so a 100 MB
``bytes`` column needed 1.6 GB. Here the segments go in runs of at most ``_RUN_BYTES``: small
segments still move with one vectorised assignment per run (bounded temporaries), and a segment
larger than a run is one slice copy.
"""

from __future__ import annotations

import numpy as np

__all__ = ["copy_segments"]

_RUN_BYTES = 1 << 18  # bytes moved per vectorised assignment: 6 MiB of index temporaries at most


def copy_segments(out: np.ndarray, dest: np.ndarray, src: np.ndarray, src_starts: np.ndarray,
                  lengths: np.ndarray) -> None:
    """``out[dest[i] : dest[i] + lengths[i]] = src[src_starts[i] : ... + lengths[i]]`` for all i
    (``out`` and ``src`` are uint8 arrays; segments are in order in ``src``)."""
    n = len(lengths)
    if n == 0:
        return
    ends = np.cumsum(lengths)
    i = 0
    while i < n:
        base = int(ends[i - 1]) if i else 0
        j = int(np.searchsorted(ends, base + _RUN_BYTES, side="right"))
        if j <= i:  # one segment larger than a run: a plain slice copy
            d, s, k = int(dest[i]), int(src_starts[i]), int(lengths[i])
            out[d:d + k] = src[s:s + k]
            i += 1
            continue
        lens = lengths[i:j]
        total = int(lens.sum())
        if total:
            run_src = np.zeros(j - i, dtype=np.int64)
            np.cumsum(lens[:-1], out=run_src[1:])
            idx = np.repeat(dest[i:j] - run_src, lens) + np.arange(total, dtype=np.int64)
            first = int(src_starts[i])
            out[idx] = src[first:first + total]
        i = j
