"""Decode in DataLoader worker processes: TorchLoader(worker_type="process") and MDSIterableDataset."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest
import torch

from petastream.errors import InvalidArgumentError
from petastream.mds.writer import write_mds
from petastream.torch import MDSIterableDataset, loader

pytestmark = [
    pytest.mark.torch,
    # Three workers on a two-core CI machine is deliberate (uneven worker shares).
    pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning"),
]
N = 1500


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("torch-workers") / "ds")
    write_mds({
        "id": np.arange(N), "x": np.arange(N * 2, dtype=np.float32).reshape(N, 2),
        "s": np.array([f"s{i}" for i in range(N)], dtype=object),
    }, path, size_limit=4096, compression="zstd")
    return path


def _ids(batches) -> list[int]:
    return [int(i) for b in batches for i in b["id"]]


def _add_one(batch):  # module level: picklable for "spawn"
    return {**batch, "id": batch["id"] + 1}


def _fail(batch):
    raise ValueError("bad batch in a worker")


def test_processes_give_the_same_batches_as_threads(url):
    kwargs = dict(shuffle=True, seed=3, num_epochs=2)
    threads = list(loader(url, 64, num_workers=2, **kwargs))
    procs = list(loader(url, 64, num_workers=3, worker_type="process", **kwargs))
    assert _ids(procs) == _ids(threads)
    ids = _ids(procs)
    assert sorted(ids[:N]) == list(range(N)) and sorted(ids[N:]) == list(range(N)) and ids[:N] != ids[N:]
    assert procs[0]["s"] == [f"s{i}" for i in procs[0]["id"].tolist()]
    assert procs[0]["x"].dtype == torch.float32 and procs[0]["x"].shape == (64, 2)
    assert not multiprocessing.active_children()


@pytest.mark.parametrize("resume_type", ["thread", "process"])
def test_resume_from_a_process_loader_state(url, resume_type):
    first = loader(url, 50, shuffle=True, seed=9, num_workers=2, worker_type="process")
    seen = []
    for batch in first:
        seen += batch["id"].tolist()
        if len(seen) == 400:
            break
    state = first.state_dict()
    rest = loader(url, 50, shuffle=True, seed=9, num_workers=3, worker_type=resume_type)
    rest.load_state_dict(state)
    seen += _ids(rest)
    assert sorted(seen) == list(range(N)) and seen == _ids(loader(url, 50, shuffle=True, seed=9))
    assert not multiprocessing.active_children()


def test_transform_and_errors_in_processes(url):
    out = list(loader(url, 100, transform=_add_one, num_workers=2, worker_type="process"))
    assert _ids(out) == list(range(1, N + 1))
    with pytest.raises(ValueError, match="bad batch in a worker"):
        list(loader(url, 100, transform=_fail, num_workers=2, worker_type="process"))


def test_spawned_workers_reopen_the_dataset(url):
    got = loader(url, 500, shuffle=True, seed=1, num_workers=1, worker_type="process",
                 multiprocessing_context="spawn", transform=_add_one)
    assert sorted(_ids(got)) == list(range(1, N + 1))


def test_bad_worker_type(url):
    with pytest.raises(InvalidArgumentError, match="worker_type must be 'thread' or 'process', got 'fork'"):
        loader(url, 10, worker_type="fork")


@pytest.mark.parametrize("persistent", [False, True])
@pytest.mark.parametrize("workers", [0, 2, 3])
def test_iterable_dataset_in_a_plain_dataloader(url, workers, persistent):
    ds = MDSIterableDataset(url, 64, shuffle=True, seed=4)
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers,
                                     persistent_workers=persistent and workers > 0)
    assert len(dl) == len(ds) == -(-N // 64)
    reference = loader(url, 64, shuffle=True, seed=4)
    epochs = [_ids(dl) for _ in range(3)]  # each DataLoader iteration is the next epoch
    assert epochs == [_ids(reference) for _ in range(3)]  # same orders whatever the workers
    assert all(sorted(e) == list(range(N)) for e in epochs) and epochs[0] != epochs[1] != epochs[2]
    ds.set_epoch(1)  # as with DistributedSampler: the next iteration is epoch 1
    assert _ids(dl) == epochs[1] and _ids(dl) == epochs[2]
    it = iter(dl)  # epoch 3, broken off after one batch: the next iteration is all of epoch 4
    next(it)
    del it
    reference.set_epoch(4)
    assert _ids(dl) == _ids(reference)


def test_iterable_dataset_splits_ranks(url):
    parts = [_ids(torch.utils.data.DataLoader(MDSIterableDataset(url, 32, shuffle=True, rank=r, world_size=2),
                                              batch_size=None, num_workers=2)) for r in (0, 1)]
    assert len(parts[0]) == len(parts[1]) and set(parts[0]) | set(parts[1]) == set(range(N))
    # Only the wrap-around padding that evens the ranks out repeats samples.
    padding = len(parts[0]) + len(parts[1]) - N
    assert 0 <= padding < 2 * 32 and len(set(parts[0]) & set(parts[1])) <= padding


def test_iterable_dataset_refuses_loader_only_arguments(url):
    with pytest.raises(InvalidArgumentError, match="does not take num_workers=: the DataLoader"):
        MDSIterableDataset(url, 10, num_workers=2)


@pytest.mark.filterwarnings("ignore:.*pin_memory.*:UserWarning")
def test_iterable_dataset_with_pin_memory_stays_correct(url):
    ds = MDSIterableDataset(url, 64, shuffle=True, seed=4)
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, pin_memory=True)
    batches = list(dl)
    assert _ids(batches) == _ids(loader(url, 64, shuffle=True, seed=4))
    assert batches[0]["s"] == [f"s{i}" for i in batches[0]["id"].tolist()]  # lists pass pinning intact
    assert batches[0]["x"].shape == (64, 2) and batches[0]["x"].dtype == torch.float32


def test_device_staging_moves_batches_to_a_non_cpu_device(url):
    # 'meta' is a real torch device without a GPU: the staging stage's plain .to(device) path.
    batches = list(loader(url, 100, device="meta", columns=["id", "x"]))
    assert len(batches) == 15 and all(b["x"].device.type == "meta" for b in batches)


@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_iterable_dataset_in_spawned_dataloader_workers(url, context):
    """A user's DataLoader with spawn or forkserver workers pickles the dataset into them: the
    loader's locks and threads stay behind, and each worker rebuilds it (every row once)."""
    import torch.utils.data

    ds = MDSIterableDataset(url, 50, shuffle=True, seed=4)
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context=context)
    ids = sorted(int(i) for b in dl for i in b["id"])
    assert ids == list(range(len(ds._loader.dataset)))
