"""The native PyTorch loader: exactly once, order, epochs, resumption, types, distributed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from petastream.mds.writer import write_mds
from petastream.torch import TorchLoader, loader
from tests.threads import petastream_threads, settles_to

pytestmark = pytest.mark.torch
N = 2500


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("torch") / "ds")
    write_mds({
        "id": np.arange(N), "x": np.arange(N * 3, dtype=np.float32).reshape(N, 3),
        "u16": (np.arange(N) % 60000).astype(np.uint16),
        "s": np.array([f"s{i}" for i in range(N)], dtype=object),
        "b": np.array([bytes([i % 256]) for i in range(N)], dtype=object),
    }, path, size_limit=4096, compression="zstd")
    return path


def _ids(batches) -> list[int]:
    return [int(i) for b in batches for i in b["id"]]


@pytest.mark.parametrize("workers", [1, 3])
def test_every_sample_once_per_epoch(url, workers):
    batches = list(loader(url, 64, shuffle=True, seed=1, num_workers=workers, num_epochs=2))
    ids = _ids(batches)
    assert sorted(ids[:N]) == list(range(N)) and sorted(ids[N:]) == list(range(N))
    assert ids[:N] != ids[N:]  # each epoch a different order
    assert [len(b["id"]) for b in batches] == ([64] * (N // 64) + [N % 64]) * 2


def test_same_seed_same_order_and_sequential_without_shuffle(url):
    a = _ids(loader(url, 100, shuffle=True, seed=5))
    b = _ids(loader(url, 100, shuffle=True, seed=5, num_workers=4))
    assert a == b and a != list(range(N))
    assert _ids(loader(url, 100)) == list(range(N))


def test_types(url):
    batch = next(iter(loader(url, 10)))
    assert batch["id"].dtype == torch.int64 and batch["x"].shape == (10, 3)
    assert batch["u16"].dtype == torch.int32  # widened, as Petastorm
    assert batch["s"] == [f"s{i}" for i in range(10)]  # Petastorm raises TypeError here
    assert batch["b"][1] == b"\x01"
    torch.testing.assert_close(batch["x"][:, 0], batch["id"].float() * 3)


def test_last_batch_short_or_dropped(url):
    sizes = [len(b["id"]) for b in loader(url, 1000)]
    assert sizes == [1000, 1000, 500]
    assert [len(b["id"]) for b in loader(url, 1000, drop_last=True)] == [1000, 1000]
    assert len(loader(url, 1000)) == 3


def test_infinite_epochs(url):
    it = iter(loader(url, 1000, num_epochs=None))
    assert len([next(it) for _ in range(10)]) == 10


@pytest.mark.parametrize("workers_after", [1, 2, 5])
def test_resume_mid_epoch_loses_and_repeats_nothing(url, workers_after):
    first = loader(url, 50, shuffle=True, seed=3, num_workers=2)
    seen = []
    for i, b in enumerate(first):
        seen += b["id"].tolist()
        if i == 17:
            state = first.state_dict()
            break
    second = loader(url, 50, shuffle=True, seed=3, num_workers=workers_after)
    second.load_state_dict(state)
    rest = _ids(second)
    assert sorted(seen + rest) == list(range(N))
    assert seen + rest == _ids(loader(url, 50, shuffle=True, seed=3))


def test_cpu_device_is_the_same_path(url):
    a = list(loader(url, 256, device="cpu"))
    assert _ids(a) == list(range(N)) and a[0]["x"].device.type == "cpu"


def test_early_break_releases_threads(url):

    before = petastream_threads()
    for _ in range(5):
        for i, _ in enumerate(loader(url, 10, num_workers=3)):
            if i == 2:
                break
    assert settles_to(before) <= before


def test_decode_errors_reach_the_consumer(url):
    def boom(batch):
        raise ValueError("bad transform")

    with pytest.raises(ValueError, match="bad transform"):
        list(TorchLoader(url, 10, transform=boom))


def test_bad_arguments(url):
    with pytest.raises(ValueError, match="num_epochs must be a positive int"):
        loader(url, 10, num_epochs=0)
    with pytest.raises(ValueError, match=r"columns \['nope'\] are not in the dataset"):
        loader(url, 10, columns=["nope"])


def test_two_ranks_with_gloo_split_every_epoch_evenly(url, tmp_path):
    """Two processes, torch.distributed (gloo): same batch count, disjoint, together everything."""
    script = textwrap.dedent(f"""
        import json, os, sys, torch, torch.distributed as dist
        from petastream.torch import loader
        dist.init_process_group("gloo")
        L = loader({url!r}, 64, shuffle=True, seed=9)
        ids = [int(i) for b in L for i in b["id"]]
        counts = [len(b["id"]) for b in loader({url!r}, 64, shuffle=True, seed=9)]
        json.dump({{"ids": ids, "batches": len(counts), "len": len(L)}},
                  open(os.path.join({str(tmp_path)!r}, f"rank{{dist.get_rank()}}.json"), "w"))
        dist.destroy_process_group()
    """)
    path = tmp_path / "job.py"
    path.write_text(script)
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "WORLD_SIZE": "2"}
    from tests.servers import free_port

    env["MASTER_PORT"] = str(free_port())
    procs = [subprocess.Popen([sys.executable, str(path)], env={**env, "RANK": str(r)}) for r in range(2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    import json

    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2))
    assert r0["batches"] == r1["batches"] == r0["len"] == -(-N // 128)
    # 2500 = 19 full global batches of 128 + 68: the last global batch wraps around (padding)
    assert set(r0["ids"]) | set(r1["ids"]) == set(range(N))
    assert len(r0["ids"]) + len(r1["ids"]) == r0["batches"] * 128
