"""A reader process for the shared-cache tests (tests/test_conditions_shared_cache.py): run
as ``python -m tests.conditions_reader '<json>'`` with the repository root and ``src`` on
``PYTHONPATH``, the shared cache dir in ``PETASTREAM_CACHE_DIR``.

It reads ``epochs`` shuffled epochs of the dataset ``url`` (``id``: int64, ``x``: float64[16]
with ``x[i] = 16 * id + arange(16)``, ``s``: ``"r<id>"``) through one loader (``mode``:
``threads``: torch's loader with threads; ``dataloader``: torch's loader with DataLoader worker
processes; ``tf-process``: the TensorFlow loader with decode processes). It checks each batch
as it arrives, keeps those of the epochs ``keep_epochs`` (default all) and drops the others (so
their buffers go back to the pool, to be handed out again), and checks the kept ones again at
the end: a batch kept
while later ones are made must never change under it (pooled buffers, shared-memory slots,
mapped cache entries). It prints one JSON line of what it saw.

Synchronised on files, never on time: before reading it writes ``<barrier>/ready-<me>`` and
waits (bounded) until ``peers`` such files exist. With ``hold_after`` it prints ``holding``
after that many batches, iterator open (pins, announcements, workers alive), and blocks on its
stdin until the parent kills it. With ``stall_fill_at`` its ``n``-th shard fill (counted per
process: DataLoader workers count their own) writes half the shard's bytes into the cache's
temporary file, prints ``filling`` and never returns, holding the key's fill lock: a process
killed there leaves a partial fill behind.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import sys
import threading
import time
from typing import Any

import numpy as np

BARRIER_TIMEOUT = 120.0


def expected_x(ids: np.ndarray) -> np.ndarray:
    return (ids.astype(np.float64)[:, None] * 16) + np.arange(16, dtype=np.float64)


def _barrier(directory: str, me: int, peers: int) -> None:
    open(os.path.join(directory, f"ready-{me}"), "w").close()
    deadline = time.monotonic() + BARRIER_TIMEOUT
    while sum(name.startswith("ready-") for name in os.listdir(directory)) < peers:
        if time.monotonic() > deadline:
            raise SystemExit(f"barrier: the other readers did not start within {BARRIER_TIMEOUT} s")
        time.sleep(0.01)  # polling a file: the wait's length does not matter, only its end


def _columns(batch: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    ids, x, s = batch["id"], batch["x"], batch["s"]
    ids = ids.numpy() if hasattr(ids, "numpy") else np.asarray(ids)
    x = x.numpy() if hasattr(x, "numpy") else np.asarray(x)
    if hasattr(s, "numpy"):
        s = [v.decode() for v in s.numpy()]
    return ids, x, list(s)


def _stall_fill(at: int) -> None:
    from petastream.mds.sources import ShardSources

    real = ShardSources.fill
    count, lock = itertools.count(1), threading.Lock()

    def fill(self: Any, i: int, out: Any) -> None:
        with lock:
            n = next(count)
        if n != at:
            return real(self, i, out)
        whole = io.BytesIO()
        real(self, i, whole)
        out.write(whole.getvalue()[: len(whole.getvalue()) // 2])
        out.flush()
        print("filling", flush=True)
        threading.Event().wait()  # killed here, mid-fill

    ShardSources.fill = fill  # type: ignore[method-assign]


def _check(batch: dict[str, Any]) -> np.ndarray:
    ids, x, s = _columns(batch)
    if not np.array_equal(x, expected_x(ids)):
        bad = np.flatnonzero((x != expected_x(ids)).any(axis=1))
        raise AssertionError(f"x wrong for ids {ids[bad[:5]].tolist()}")
    if s != [f"r{i}" for i in ids.tolist()]:
        raise AssertionError("s wrong")
    return ids


def _loader(mode: str, url: str, batch: int, epochs: int, options: dict[str, Any]) -> Any:
    if mode == "tf-process":
        from petastream.tf import TFLoader

        return TFLoader(url, batch, shuffle=True, seed=7, num_epochs=epochs, worker_type="process",
                        num_workers=2, batches_per_call=1, dataset_options=options)
    from petastream.torch import loader

    kind = {"threads": "thread", "dataloader": "process"}[mode]
    return loader(url, batch, shuffle=True, seed=7, num_epochs=epochs, worker_type=kind, num_workers=2,
                  dataset_options=options)


def main(spec: dict[str, Any]) -> dict[str, Any]:
    from petastream.columns.pool import buffer_pool

    if spec.get("stall_fill_at"):
        _stall_fill(spec["stall_fill_at"])
    if spec.get("barrier"):
        _barrier(spec["barrier"], spec["me"], spec["peers"])
    loader = _loader(spec["mode"], spec["url"], spec["batch"], spec["epochs"], spec.get("options", {}))
    kept: list[tuple[dict[str, Any], np.ndarray]] = []
    seen: list[np.ndarray] = []
    per_epoch = -(-spec["n"] // spec["batch"])
    for item in loader:
        ids = _check(item)
        seen.append(ids.copy())
        if (len(seen) - 1) // per_epoch in spec.get("keep_epochs", range(spec["epochs"])):
            kept.append((item, ids.copy()))
        del item, ids
        if spec.get("hold_after") == len(seen):
            print("holding", flush=True)
            sys.stdin.read()  # killed here
    for item, ids in kept:  # nothing handed out earlier was overwritten since
        if not np.array_equal(_check(item), ids):
            raise AssertionError("a kept batch's ids changed")
    everything = np.sort(np.concatenate(seen))
    stats = buffer_pool().stats()
    return {"rows": int(len(everything)), "ids": np.unique(everything).tolist() == list(range(spec["n"])),
            "per_id": int(len(everything) // max(1, spec["n"])), "kept": len(kept),
            "reused": stats.reused, "allocated": stats.allocated}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))), flush=True)
