"""The buffer pool (``petastream.columns.pool``, issue 36): a buffer is handed out again only
once nothing outside the pool refers to it, the pool's bytes stay under its bound, and it can
be turned off."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import tracemalloc

import numpy as np
import pytest

from petastream.columns import pool as pool_mod
from petastream.columns.pool import BufferPool, pooled_take, size_class
from petastream.errors import ConfigurationError, InvalidArgumentError, OutOfRangeError


def test_a_buffer_is_reused_only_once_nothing_refers_to_it():
    pool = BufferPool(max_bytes=1 << 20, min_bytes=1024)
    a = pool.empty((1000,), np.float64)
    view = a[10:20].reshape(2, 5)[:, 1:]  # a view of a view: it still holds the buffer
    del a
    b = pool.empty((1000,), np.float64)
    assert pool.stats().allocated == 2 and not np.shares_memory(view, b)
    del view
    c = pool.empty((900,), np.int64)  # same size class: the first buffer, free again
    assert pool.stats().reused == 1 and pool.stats().allocated == 2 and not np.shares_memory(b, c)
    assert pool.empty((10,), np.int8).base is None  # small: plain np.empty
    assert pool.empty((5000,), object).base is None  # object arrays are never pooled
    assert c.flags.c_contiguous and c.ctypes.data % 64 == 0  # aligned (TensorFlow aliases it)


def test_wrappers_that_keep_the_array_keep_the_buffer_busy():
    torch = pytest.importorskip("torch")
    pool = BufferPool(max_bytes=1 << 20, min_bytes=1024)
    a = pool.empty((1000,), np.float32)
    a[:] = 7
    kept = [torch.from_numpy(a[100:]), memoryview(a[:10]), np.frombuffer(a[200:300], np.uint8)]
    del a
    for _ in range(3):
        pool.empty((1000,), np.float32)[:] = -1
    assert float(kept[0].sum()) == 7 * 900 and all(x == 7 for x in kept[1].tolist())
    assert (kept[2].view(np.float32) == 7).all()
    assert pool.stats().reused == 2  # the three later ones: a new buffer, then that one reused


def test_the_pool_stays_under_its_bound_and_drops_idle_sizes():
    pool = BufferPool(max_bytes=100_000, min_bytes=1024)
    held = [pool.empty((10_000,), np.uint8) for _ in range(12)]  # 9 fit, then plain np.empty
    st = pool.stats()
    assert st.held_bytes <= 100_000 and st.unpooled == 3 and st.buffers == 9
    del held
    big = pool.empty((60_000,), np.uint8)  # another size: free buffers of the old one make room
    st = pool.stats()
    assert st.held_bytes <= 100_000 and st.dropped > 0 and big.base is not None
    assert BufferPool(max_bytes=0).empty((1 << 20,), np.uint8).base is None  # 0: off


def test_threads_never_share_a_buffer():
    pool = BufferPool(max_bytes=8 << 20, min_bytes=1024)
    bad = []

    def work(k: int) -> None:
        for i in range(300):
            a = pool.empty((2048 + (i % 3) * 100,), np.int64)
            a[:] = k
            b = a[::2]  # a view survives the array; the buffer must stay with this thread
            del a
            if not (b == k).all():
                bad.append(k)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad and pool.stats().reused > 0 and pool.stats().held_bytes <= 8 << 20


def test_size_classes_round_up_by_at_most_a_quarter():
    for n in [1, 5, 100, 65_535, 65_536, 65_537, 1_000_003, 123_456_789]:
        c = size_class(n)
        assert n <= c <= max(4, n * 1.25) and size_class(c) == c


def test_pooled_take_checks_the_range_and_keeps_negative_ids():
    a = np.arange(50_000, dtype=np.int64)
    assert pooled_take(a, np.array([3, -1, 0])).tolist() == [3, 49_999, 0]
    with pytest.raises(OutOfRangeError, match=r"row ids 0\.\.50000 out of range for 50000 rows"):
        pooled_take(a, np.array([0, 50_000]))


def test_pooled_take_never_copies_a_strided_source_whole():
    # An overlapping window (one 4 KiB item at every byte of 1 MiB): np.take would first make
    # it contiguous, 4 GiB. The take falls back to fancy indexing, which copies the rows only.
    data = np.arange(1 << 20, dtype=np.uint32).view(np.uint8)
    items = np.ndarray((len(data) - 4096 + 1,), dtype=np.dtype((np.void, 4096)), buffer=data, strides=(1,))
    tracemalloc.start()
    try:
        got = pooled_take(items, np.array([0, 4, 400_000]))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20 and got.view(np.uint8).reshape(3, -1)[2, :4].tolist() == [160, 134, 1, 0]


def test_configuration_and_its_errors(monkeypatch):
    with pytest.raises(InvalidArgumentError, match=r"the bounds must be >= 0 \(max_bytes=0 turns the pool off\)"):
        BufferPool(max_bytes=-1)
    with pytest.raises(InvalidArgumentError, match="expected an int of bytes"):
        pool_mod.configure("1GB")  # type: ignore[arg-type]
    monkeypatch.setenv(pool_mod.ENV_VAR, "lots")
    with pytest.raises(ConfigurationError, match="PETASTREAM_BUFFER_POOL='lots': expected the pool's bound in bytes"):
        pool_mod.configure()
    monkeypatch.setenv(pool_mod.ENV_VAR, "0")
    try:
        assert pool_mod.configure().max_bytes == 0
        assert pool_mod.pooled_empty((1 << 20,), np.uint8).base is None
    finally:
        monkeypatch.delenv(pool_mod.ENV_VAR)
        pool_mod.configure()
    assert pool_mod.buffer_pool().max_bytes == pool_mod.DEFAULT_MAX_BYTES


def test_a_forked_child_starts_with_a_pool_of_its_own():
    # The child gets a fresh, empty pool (the parent's buffers may be in use by copies of the
    # parent's arrays there); the environment bounds it. Run in a clean interpreter: fork
    # beside pytest's threads is not ours to do.
    code = (
        "import os, numpy as np\n"
        "from petastream.columns.pool import buffer_pool\n"
        "a = buffer_pool().empty((1 << 18,), np.uint8)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    st = buffer_pool().stats()\n"
        "    os._exit(0 if st.buffers == 0 and st.max_bytes == 123456789 else 1)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "assert buffer_pool().stats().buffers == 1\n"
        "raise SystemExit(os.waitstatus_to_exitcode(status))\n"
    )
    env = dict(os.environ, PETASTREAM_BUFFER_POOL="123456789")
    assert subprocess.run([sys.executable, "-c", code], env=env).returncode == 0
