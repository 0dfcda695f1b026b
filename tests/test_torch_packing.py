"""A batch packed into one host block, moved as one copy and taken apart as views.

These run on the CPU: the block comes from a plain allocation and the "device" is the CPU, which
exercises the same offsets, dtypes, widening and shapes as pinned memory and a GPU
(tests/test_gpu.py runs the real thing on CUDA).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from petastream.columns.ragged import Ragged
from petastream.torch import _packing, to_torch

pytestmark = pytest.mark.torch
CPU = torch.device("cpu")


def _plain(nbytes: int) -> torch.Tensor:
    return torch.empty(nbytes, dtype=torch.uint8)


def _columns() -> dict:
    packed_records = np.zeros(5, dtype=[("a", "<i4"), ("x", "<f4", (3,))])  # unaligned, strided views
    packed_records["x"] = np.arange(15, dtype=np.float32).reshape(5, 3)
    return {
        "id": np.arange(5, dtype=np.int64),
        "x": packed_records["x"],
        "flag": np.array([True, False, True, True, False]),
        "u8": np.arange(5, dtype=np.uint8),
        "u16": np.array([0, 1, 2, 65534, 65535], dtype=np.uint16),
        "half": np.ones((5, 2), dtype=np.float16),
        "empty": np.zeros((5, 0), dtype=np.float64),
        "s": np.array(["a", "b", "c", "d", "e"], dtype=object),
        "ragged": Ragged(np.arange(6, dtype=np.int32), np.array([0, 1, 1, 3, 6, 6])),
    }


def _want(columns: dict) -> dict:
    return {k: to_torch(v) for k, v in columns.items()}


def _assert_same(got: dict, want: dict) -> None:
    assert list(got) == list(want)  # the batch's column order
    for k, w in want.items():
        g = got[k]
        if isinstance(w, torch.Tensor):
            assert g.dtype == w.dtype and g.shape == w.shape and torch.equal(g, w), k
        elif k == "ragged":
            assert len(g) == len(w) and all(torch.equal(a, b) for a, b in zip(g, w)), k
        else:
            assert g == w, k


def test_numeric_columns_share_one_aligned_block():
    columns = _columns()
    packed = _packing.pack(columns, _plain)
    assert [s.name for s in packed.slots] == ["id", "x", "flag", "u8", "u16", "half", "empty"]
    for s in packed.slots:
        assert s.start % _packing.ALIGN == 0 and s.stop <= packed.block.numel()
    assert packed.values["id"] is None and packed.values["s"] == ["a", "b", "c", "d", "e"]


def test_a_packed_batch_moves_in_one_copy_and_equals_the_tensors_it_replaces():
    columns = _columns()
    moved, owners = _packing.to_device(_packing.pack(columns, _plain), CPU, False)
    assert len(owners) == 1  # one block, so one copy and one record_stream
    _assert_same(moved, _want(columns))
    assert moved["u16"].dtype == torch.int32  # widened, as to_torch widens
    assert moved["id"].untyped_storage().data_ptr() == moved["x"].untyped_storage().data_ptr()


def test_a_batch_without_numeric_columns_packs_an_empty_block():
    columns = {"s": np.array(["a"], dtype=object)}
    moved, owners = _packing.to_device(_packing.pack(columns, _plain), CPU, False)
    assert moved == {"s": ["a"]} and owners[0].numel() == 0


def test_a_dict_batch_moves_tensor_by_tensor():
    batch = {"a": torch.arange(4), "b": torch.ones(3), "s": ["x"]}
    moved, owners = _packing.to_device(batch, CPU, False)
    assert len(owners) == 2 and moved["s"] is batch["s"]
    assert torch.equal(moved["a"], batch["a"]) and torch.equal(moved["b"], batch["b"])


def test_a_dtype_torch_cannot_hold_raises_as_before():
    columns = {"t": np.array(["2020-01-01"], dtype="datetime64[D]"), "id": np.arange(1)}
    with pytest.raises(TypeError):
        to_torch(columns["t"])
    with pytest.raises(TypeError):
        _packing.pack(columns, _plain)


def test_packing_by_size_packs_large_batches_and_leaves_small_ones_as_tensors():
    # pin_memory=None's conversion: a batch of at least min_bytes of numeric columns is packed
    # (one block, one copy), a smaller one becomes plain tensors; the same values either way.
    columns = _columns()
    nbytes = _packing.numeric_nbytes(columns)
    assert nbytes == sum(c.nbytes for k, c in columns.items() if k not in ("s", "ragged"))
    large = _packing.pack_from(nbytes, _plain)(columns)
    small = _packing.pack_from(nbytes + 1, _plain)(columns)
    assert isinstance(large, _packing.Packed) and not isinstance(small, _packing.Packed)
    for batch in (large, small):
        moved, _ = _packing.to_device(batch, CPU, False)
        _assert_same(moved, _want(columns))
    assert isinstance(_packing.pack_from(0, _plain)({"x": np.zeros(1)}), _packing.Packed)  # 0: always
