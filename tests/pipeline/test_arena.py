"""Shared-memory slots: what a worker packs is what the consumer views, aligned for TensorFlow."""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest

from petastream.pipeline.procpool import arena as arena_mod
from petastream.pipeline.procpool.arena import ALIGN, Arena, ArenaError


def test_packed_parts_come_back_as_aligned_views_of_one_base():
    parts = (np.arange(5, dtype=np.int64), np.arange(12, dtype=np.float32).reshape(3, 4),
             np.array(["a", b"b"], dtype=object), np.zeros(0, np.uint8), np.arange(7, dtype=np.int16))
    owner = Arena.create(3, Arena.size_of(parts))
    worker = Arena.attach(owner.path, owner.slots, owner.slot_bytes)
    assert not os.path.exists(owner.path)  # both hold it: nothing is left to leak
    layout = worker.pack(1, parts)
    base, views = owner.views(1, layout)
    for got, want in zip(views, parts):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert (got == want).all() if want.dtype != object else got is want
        if want.dtype != object:
            assert got.base is base  # one base per slot: its collection ends the lease
            assert got.ctypes.data % ALIGN == 0  # TensorFlow takes it without a copy
    assert owner.slot_bytes % os.sysconf("SC_PAGE_SIZE") == 0
    assert Arena.size_of(parts) <= owner.slot_bytes


def test_slots_do_not_overlap():
    a = Arena.create(2, 1000)
    w = Arena.attach(a.path, a.slots, a.slot_bytes)
    one, two = np.full(125, 1, np.int64), np.full(125, 2, np.int64)
    _, (v1,) = a.views(0, w.pack(0, (one,)))
    _, (v2,) = a.views(1, w.pack(1, (two,)))
    assert (v1 == 1).all() and (v2 == 2).all()


def test_no_room_anywhere_is_a_clear_error(monkeypatch, tmp_path):
    def full(fd, offset, size):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(arena_mod, "_directories", lambda: [str(tmp_path)])
    monkeypatch.setattr(arena_mod.os, "posix_fallocate", full)
    with pytest.raises(ArenaError, match=r"no room for .* bytes of shared memory .*No space left"):
        Arena.create(4, 1 << 20)
    assert os.listdir(tmp_path) == []  # the reserved file is gone again
