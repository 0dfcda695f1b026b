"""Column-block helpers: scatter into place, Ragged slices."""

from __future__ import annotations

import numpy as np

from petastream.columns.ops import scatter_columns
from petastream.columns.ragged import Ragged


def _ragged(arrays):
    offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
    np.cumsum([len(a) for a in arrays], out=offsets[1:])
    return Ragged(np.concatenate(arrays) if arrays else np.zeros(0, np.int16), offsets)


def test_scatter_columns_puts_every_row_in_place():
    rng = np.random.default_rng(0)
    n = 50
    perm = rng.permutation(n)
    cut = [0, 20, 21, 50]
    full = {
        "x": rng.random((n, 2, 3)).astype(np.float32),
        "i": np.arange(n, dtype=np.int64),
        "o": np.array([f"s{i}" * (i % 3) for i in range(n)], dtype=object),
        "st": np.zeros(n, dtype=[("a", "<i4"), ("b", "<f8")]),
    }
    full["st"]["a"] = np.arange(n)
    arrays = [np.arange(1 + i % 4, dtype=np.int16) * i for i in range(n)]
    parts, positions = [], []
    for a, b in zip(cut[:-1], cut[1:]):
        pos = perm[a:b]
        part = {k: v[pos] for k, v in full.items()}
        part["x"] = np.asfortranarray(part["x"]) if a == 0 else part["x"]  # not C-contiguous
        part["r"] = _ragged([arrays[p] for p in pos])
        parts.append(part)
        positions.append(pos)
    out = scatter_columns(parts, positions, n)
    for k, v in full.items():
        assert out[k].dtype == v.dtype
        np.testing.assert_array_equal(out[k], v)
    assert isinstance(out["r"], Ragged) and len(out["r"]) == n
    for i in range(n):
        np.testing.assert_array_equal(out["r"][i], arrays[i])


def test_scatter_of_one_part_in_order_is_that_part():
    part = {"i": np.arange(4)}
    assert scatter_columns([part], [np.arange(4)], 4) is part
    out = scatter_columns([part], [np.array([3, 2, 1, 0])], 4)
    np.testing.assert_array_equal(out["i"], [3, 2, 1, 0])


def test_ragged_slice_is_a_view():
    r = _ragged([np.arange(k + 1, dtype=np.int16) for k in range(5)])
    s = r.slice(1, 4)
    assert len(s) == 3 and np.shares_memory(s.values, r.values)
    for k in range(3):
        np.testing.assert_array_equal(s[k], r[k + 1])
    assert len(r.slice(2, 2)) == 0 and len(r.slice(0, 5)) == 5


def test_pack_rows_is_the_inverse_of_split_rows():
    from petastream.columns.ops import pack_rows, split_rows

    rng = np.random.default_rng(1)
    for n in (0, 1, 37):
        cols = {"id": np.arange(n, dtype=np.int64), "v": rng.random((n, 3, 2)).astype(np.float32),
                "flag": (np.arange(n) % 2).astype(np.uint8), "h": rng.random(n).astype(np.float16)}
        dtype = np.dtype([(k, c.dtype, c.shape[1:]) for k, c in cols.items()])
        rows = pack_rows(cols, dtype)
        assert rows.dtype == np.dtype((np.void, dtype.itemsize)) and len(rows) == n
        table = rows.view(dtype)
        for k, c in cols.items():
            np.testing.assert_array_equal(table[k], c)
        back = split_rows(rows, dtype, ["v", "id"])  # a subset, in another order
        assert list(back) == ["v", "id"]
        np.testing.assert_array_equal(back["v"], cols["v"])
        assert back["v"].flags.c_contiguous
    strided = np.arange(20, dtype=np.int32)[::2]  # views with other strides are packed too
    dtype = np.dtype([("s", np.int32)])
    np.testing.assert_array_equal(pack_rows({"s": strided}, dtype).view(dtype)["s"], strided)


def test_pooled_ragged_blocks_kept_are_not_overwritten():
    """Same-length Ragged scatters and runs taken from a Ragged land in pooled buffers: one a
    caller keeps is never handed out again, while ones dropped are."""
    from petastream.columns import pool as pool_mod

    pool = pool_mod.configure(8 << 20, min_bytes=1 << 10)
    try:
        rng = np.random.default_rng(2)
        kept = []
        for r in range(6):
            parts = [Ragged(np.arange(k * 16 * 100, (k + 1) * 16 * 100, dtype=np.float32) + r,
                            np.arange(101, dtype=np.int64) * 16) for k in range(2)]
            order = rng.permutation(200)
            block = scatter_columns([{"v": p} for p in parts], [order[:100], order[100:]], 200)["v"]
            run = parts[0].take(np.arange(10, 90))
            want = np.concatenate([p.values.reshape(100, 16) for p in parts])[np.argsort(order)]
            if r % 2 == 0:
                kept.append((block, run, want.copy(), parts[0].values[160:1440].copy()))
        for block, run, want, run_want in kept:
            np.testing.assert_array_equal(block.values.reshape(200, 16), want)
            np.testing.assert_array_equal(run.values, run_want)
        assert pool.stats().reused > 0
    finally:
        pool_mod.configure()
