"""Batches delivered to a CUDA device: the same data as on the host, safe against the caching
allocator and the consumer's streams, pinned where asked.

The CUDA tests need a GPU and skip without one (CI has none): they run on the lent GPU machine
(``benchmarks/gpu_device.sh``).
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
import torch

from petastream.mds.writer import write_mds
from petastream.torch import MDSIterableDataset, _convert, loader

N = 3000
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
pytestmark = [pytest.mark.torch, pytest.mark.gpu]


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("gpu") / "ds")
    rng = np.random.default_rng(0)
    write_mds({
        "id": np.arange(N), "x": rng.random((N, 64), dtype=np.float32),
        "u8": (np.arange(N) % 256).astype(np.uint8), "flag": np.arange(N) % 3 == 0,
        "s": np.array([f"s{i}" for i in range(N)], dtype=object),
    }, path, size_limit=1 << 16, compression="zstd")
    return path


def _host(batches) -> list[dict]:
    return [{k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in b.items()} for b in batches]


def _assert_same(got: list[dict], want: list[dict]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.keys() == w.keys()
        for k in w:
            if isinstance(w[k], torch.Tensor):
                assert g[k].dtype == w[k].dtype and torch.equal(g[k], w[k]), k
            else:
                assert g[k] == w[k], k


def test_decode_threads_pin_for_the_loaders_device(url, monkeypatch):
    # Runs without a GPU: CUDA's calls are replaced by recorders. Checked: each decode thread
    # makes the loader's device current before it pins (a new thread's current device is 0, so
    # otherwise every rank of a node would create a CUDA context on GPU 0), and that device is
    # the one current in the iterating thread (as after torch.cuda.set_device(local_rank)).
    import threading

    calls = []
    main = threading.main_thread

    def pin(self, *args, **kwargs):
        calls.append(("pin", threading.current_thread().ident))
        return self

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    monkeypatch.setattr(torch.cuda, "set_device", lambda i: calls.append((i, threading.current_thread().ident)))
    monkeypatch.setattr(torch.Tensor, "pin_memory", pin)
    got = list(loader(url, 100, pin_memory=True, num_workers=2))  # pinned host batches, no device
    assert sorted(int(i) for b in got for i in b["id"]) == list(range(N))
    current: dict[int, int] = {}
    for what, thread in calls:
        assert thread != main().ident  # all in the decode threads
        if what == "pin":
            assert current.get(thread) == 3  # the device was set in this thread first
        else:
            current[thread] = what
    assert sum(what == "pin" for what, _ in calls) == len(got) * 4  # every tensor: id, x, u8, flag


@cuda
def test_pinned_conversion_is_page_locked():
    got = _convert.to_pinned_tensors({"x": np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]})
    assert got["x"].is_pinned() and torch.equal(got["x"], torch.tensor([[0., 2.], [4., 6.], [8., 10.]]))


@cuda
def test_a_batch_arrives_in_one_device_allocation(url):
    # Packed in one pinned block, moved in one copy: the tensors are views of one device storage.
    for b in loader(url, 128, device="cuda", pin_memory=True):
        assert len({b[k].untyped_storage().data_ptr() for k in ("id", "x", "u8", "flag")}) == 1
        assert all(b[k].is_cuda for k in ("id", "x", "u8", "flag")) and isinstance(b["s"], list)


@cuda
@pytest.mark.parametrize("min_bytes, packed", [(1 << 30, False), (1, True)])
def test_the_default_pins_by_batch_size(url, monkeypatch, min_bytes, packed):
    # pin_memory=None: a batch is packed in one pinned block from PIN_MIN_BYTES of numeric
    # columns up; a smaller one goes over tensor by tensor from pageable memory. Same values.
    import petastream.torch._loader as torch_loader

    monkeypatch.setattr(torch_loader, "PIN_MIN_BYTES", min_bytes)
    want = list(loader(url, 128, shuffle=True, seed=3))
    got = list(loader(url, 128, shuffle=True, seed=3, device="cuda"))
    for b in got:
        owners = {b[k].untyped_storage().data_ptr() for k in ("id", "x", "u8", "flag")}
        assert (len(owners) == 1) is packed
    _assert_same(_host(got), want)


@cuda
@pytest.mark.parametrize("pin", [True, False, None])
@pytest.mark.parametrize("worker_type", ["thread", "process"])
def test_device_batches_equal_host_batches(url, pin, worker_type):
    host = loader(url, 128, shuffle=True, seed=3)
    want, want2 = list(host), list(host)  # two epochs, each in its own order
    ld = loader(url, 128, shuffle=True, seed=3, device="cuda", pin_memory=pin, worker_type=worker_type,
                num_workers=2)
    got = list(ld)
    for b in got:
        assert all(v.is_cuda for v in b.values() if isinstance(v, torch.Tensor))
        assert isinstance(b["s"], list)  # strings stay on the host
    _assert_same(_host(got), want)
    _assert_same(_host(ld), want2)  # a second pass over the same loader: the next epoch


@cuda
def test_consumer_stream_waits_and_allocator_does_not_reuse_early(url):
    # A long step on the consumer's stream before each read: were the copy not ordered before
    # the read, or the batch's memory given to a later copy while reads are still queued, the
    # sums (queued, read at the very end) would differ from the host's.
    want = [float(b["x"].double().sum()) for b in loader(url, 64, shuffle=True, seed=2)]
    big = torch.randn(2048, 2048, device="cuda")
    sums = []
    for b in loader(url, 64, shuffle=True, seed=2, device="cuda"):
        for _ in range(4):
            big = torch.tanh(big @ big)
        sums.append(b["x"].double().sum())
        del b
    got = [float(s) for s in sums]
    np.testing.assert_allclose(got, want, rtol=1e-12)


@cuda
def test_a_users_own_current_stream(url):
    want = _host(loader(url, 100, seed=1))
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        got = [{k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in b.items()}
               for b in loader(url, 100, seed=1, device="cuda")]
    side.synchronize()
    _assert_same(_host(got), want)


@cuda
def test_abandoned_pass_then_a_whole_one(url):
    ld = loader(url, 100, shuffle=True, seed=4, device="cuda")
    it = iter(ld)
    for _ in range(3):
        next(it)
    del it
    ids = [int(i) for b in ld for i in b["id"].cpu()]
    assert sorted(ids) == list(range(N))


@cuda
@pytest.mark.parametrize("workers", [0, 2])
def test_iterable_dataset_in_a_pinning_dataloader(url, workers):
    want = _host(loader(url, 100, shuffle=True, seed=5))
    ds = MDSIterableDataset(url, batch_size=100, shuffle=True, seed=5)
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers, pin_memory=True)
    got = list(dl)
    assert all(b["x"].is_pinned() for b in got)
    _assert_same(got, want)  # the loader's own order, whatever num_workers
    moved = [b["x"].to("cuda", non_blocking=True) for b in got]
    torch.cuda.synchronize()
    assert all(torch.equal(m.cpu(), b["x"]) for m, b in zip(moved, got))


@cuda
@pytest.mark.parametrize("device", [None, "cuda"])  # Lightning moves the batches / they arrive there
def test_lightning_trains_on_the_gpu_two_whole_epochs(tmp_path, device):
    pl = pytest.importorskip("pytorch_lightning")
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "lightning"))
    from native_datamodule import Regression

    path = str(tmp_path / "ds")
    write_mds({"id": np.arange(200), "x": np.linspace(-1, 1, 200).astype(np.float32)}, path, size_limit=600)
    model = Regression()
    trainer = pl.Trainer(accelerator="gpu", devices=1, max_epochs=2, logger=False, enable_progress_bar=False,
                         enable_model_summary=False, enable_checkpointing=False)
    trainer.fit(model, train_dataloaders=loader(path, 16, shuffle=True, seed=0, device=device))
    assert len(model.seen) == 26  # 13 batches an epoch
    first, second = [i for b in model.seen[:13] for i in b], [i for b in model.seen[13:] for i in b]
    assert sorted(first) == sorted(second) == list(range(200)) and first != second

