"""Batches delivered into GPU memory, and how much of the copy hides behind a training step.

    python -m benchmarks.gpu --rows 1000000 --device cuda       # on a GPU machine
    python -m benchmarks.gpu --rows 20000 --device cpu          # dry run: same code paths, no GPU

Workloads 'tabular' and 'binary' (:mod:`benchmarks.workloads`), batches of 1024
(``--batch``), one shuffled epoch, every column read (as a training script does); the tensors
(id, features, label) go to the device, the 'binary' bytes and strings stay on the host as
lists. Rows, each best of
``--repeat`` after a warm-up:

* floor: the epoch's numeric columns prepared in pinned host memory beforehand, copied with
  ``non_blocking=True`` (what a perfect loader could hand the GPU);
* CPU-side loader: ``torch.loader`` with no device, the rate the GPU rows are compared with
  (``vs CPU side``: the issue's goal is 90% or more);
* petastream ``torch.loader(device=...)``, at each ``--workers`` count: pinned, each batch
  packed in one block and copied once on a side stream (the default); pinned tensor by tensor
  (the code before packing, for the side-by-side); and ``pin_memory=False``;
* compat: Petastorm's ``DataLoader`` over ``make_batch_reader`` (what migrated code runs), each
  tensor moved with ``.to(device)`` in the loop as such code does;
* TensorFlow ``petastream.tf.dataset(device="/gpu:0")`` (prefetch to device), where TensorFlow
  is installed.

"+ step" rows run a fixed matmul chain per batch (``--step-ms`` of GPU compute, calibrated
once) and report the overlap: the share of the delivery time hidden behind the step,
``(t_delivery + t_step - t_both) / t_delivery`` (100% = the delivery costs the step nothing).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Iterable

import numpy as np

from benchmarks.harness import Result, report, save
from benchmarks.workloads import WORKLOADS, make_data, prepare

NAME = "gpu"
BATCH = 1024
TENSORS = ("id", "features", "label")
FLOOR = "floor: pre-pinned host tensors, non_blocking copy"


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _drain(batches: Iterable, device: str, step: Callable | None) -> int:
    rows = 0
    for b in batches:
        x = b["features"]
        rows += len(x)
        if step is not None:
            step(x)
    _sync(device)
    return rows


def _timed(fn: Callable[[], int], repeat: int) -> tuple[int, float]:
    fn()
    best = None
    for _ in range(repeat):
        t = time.perf_counter()
        rows = fn()
        dt = time.perf_counter() - t
        best = dt if best is None or dt < best else best
    return rows, best


def _step_fn(device: str, target_ms: float, batch: int) -> tuple[Callable, float]:
    """A fixed matmul chain per batch, sized once to take about ``target_ms`` on ``device``."""
    import torch

    # Few large kernels, as a real step: a chain of small ones would be bound by their launches,
    # on the host thread the loader also needs.
    size = 4096 if device.startswith("cuda") else 256
    w = torch.randn(16, size, device=device)
    sq = torch.randn(size, size, device=device) / size ** 0.5
    reps = [1]

    def step(x):
        h = x.float() @ w
        for _ in range(reps[0]):
            h = torch.tanh(h @ sq)
        return h

    x = torch.randn(batch, 16, device=device)
    per = 0.0
    for n in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512):
        reps[0] = n
        step(x)
        _sync(device)
        t = time.perf_counter()
        for _ in range(20):
            step(x)
        _sync(device)
        per = (time.perf_counter() - t) / 20 * 1e3
        if per >= target_ms:
            break
    return step, per


def floor_batches(data: dict[str, np.ndarray], device: str, batch: int) -> Callable:
    import torch

    n = len(data["id"])
    perm = np.random.default_rng(1).permutation(n)
    pin = device.startswith("cuda")
    host = []
    for i in range(0, n, batch):
        idx = perm[i:i + batch]
        tensors = {k: torch.from_numpy(np.ascontiguousarray(data[k][idx])) for k in TENSORS}
        host.append({k: t.pin_memory() if pin else t for k, t in tensors.items()})
    return lambda: ({k: t.to(device, non_blocking=pin) for k, t in b.items()} for b in host)


def _pinned_per_tensor(batch: dict) -> dict:
    """The decode threads' pinning before a batch was packed into one block: a pinned
    allocation and a device copy per tensor (what ``pin_memory=True`` without a device still
    does; kept here to measure the two side by side)."""
    import torch

    from petastream.torch._convert import to_pinned_tensors, to_tensors

    # a --device cpu dry run has nothing to pin with
    return to_pinned_tensors(batch) if torch.cuda.is_available() else to_tensors(batch)


def _packed_unpinned(batch: dict) -> object:
    """A trial: the batch packed in one pageable (not pinned) block, for a ``pin_memory=False``
    loader to copy once."""
    import torch

    from petastream.torch._packing import pack

    return pack(batch, lambda n: torch.from_numpy(np.empty(n, np.uint8)))


def petastream_batches(url: str, device: str, pin: bool | str, workers: int, batch: int) -> Callable:
    from petastream.torch import loader

    dev = None if device == "cpu" else device
    converts = {"per tensor": _pinned_per_tensor, "packed unpinned": _packed_unpinned}
    extra = {"convert": converts[pin]} if isinstance(pin, str) and dev else {}
    ld = loader(url, batch, shuffle=True, seed=1, num_workers=workers, device=dev,
                pin_memory=pin in (True, "per tensor") if dev else None, **extra)
    return lambda: ld  # built once, iterated per epoch, as training loops do


def compat_batches(url: str, device: str, batch: int) -> Callable:
    import torch

    from petastream.compat.pytorch import DataLoader
    from petastream.compat.reader import make_batch_reader

    def run():
        with DataLoader(make_batch_reader(url, num_epochs=1), batch_size=batch) as dl:
            for b in dl:
                yield {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in b.items()}
    return run


def tf_rows(url: str, device: str, repeat: int, batch: int) -> tuple[int, float]:
    import petastream.tf as ptf

    tf_dev = "/gpu:0" if device.startswith("cuda") else "/cpu:0"
    ds = ptf.dataset(url, batch, shuffle=True, seed=1, device=tf_dev)
    return _timed(lambda: sum(int(b["features"].shape[0]) for b in ds), repeat)


def run(args: argparse.Namespace) -> list[Result]:
    results = []
    device = args.device
    step, step_ms = _step_fn(device, args.step_ms, args.batch)
    print(f"step: {step_ms:.2f} ms of compute per batch", flush=True)
    for workload in args.workloads:
        data = make_data(workload, args.rows)
        paths = prepare(workload, args.rows, data)
        url, n = paths["mds"], args.rows
        bench = f"{NAME}/{workload}" + ("" if args.batch == BATCH else f"/batch-{args.batch}")
        floor = floor_batches(data, device, args.batch)
        del data
        # The step alone, on batches already on the device: what a perfect loader would cost.
        resident = list(floor())
        _, t_step = _timed(lambda: _drain(resident, device, step), args.repeat)  # noqa: B023 - called here
        resident.clear()
        results.append(Result(bench, f"step alone ({step_ms:.1f} ms/batch, batches resident)", n, t_step))
        sources: dict[str, tuple[Callable, float | None]] = {FLOOR: (floor, None)}
        for w in args.workers:
            cpu = petastream_batches(url, "cpu", False, w, args.batch)
            _, cpu_side = _timed(lambda cpu=cpu: _drain(cpu(), "cpu", None), args.repeat)
            results.append(Result(bench, f"CPU-side loader, {w} threads (no device)", n, cpu_side))
            for pin, what in ((True, "pinned, packed + side stream"),
                              ("per tensor", "pinned per tensor + side stream (before packing)"),
                              (False, "pin_memory=False"),
                              ("packed unpinned", "pin_memory=False, packed (trial)")):
                sources[f"petastream torch.loader, {w} threads, {what}"] = (
                    petastream_batches(url, device, pin, w, args.batch), cpu_side)
        sources["compat DataLoader + .to(device)"] = (compat_batches(url, device, args.batch), None)
        for variant, (make, cpu_side) in sources.items():
            rows, t_deliver = _timed(lambda make=make: _drain(make(), device, None), args.repeat)
            rows2, t_both = _timed(lambda make=make: _drain(make(), device, step), args.repeat)
            hidden = (t_deliver + t_step - t_both) / t_deliver if t_deliver else 0.0
            note = "" if rows == rows2 == n else f"INCOMPLETE ({rows}, {rows2} of {n})"
            extra = {"vs_cpu_side": cpu_side / t_deliver} if cpu_side else {}
            if cpu_side:
                note = f"{cpu_side / t_deliver:.0%} of the CPU-side rate {note}".rstrip()
            results.append(Result(bench, variant, n, t_deliver, note=note, extra=extra))
            results.append(Result(bench, f"{variant} + step", n, t_both, extra={"hidden": hidden},
                                  note=f"delivery hidden behind the step: {max(0.0, min(1.0, hidden)):.0%}"))
            for r in results[-2:]:
                print(f"  {r.variant}: {r.rows_per_s:,.0f} rows/s {r.note}", flush=True)
        try:
            rows, t_tf = tf_rows(url, device, args.repeat, args.batch)
            results.append(Result(bench, "petastream tf.dataset(device=...)", n, t_tf,
                                  note="" if rows == n else f"INCOMPLETE ({rows} of {n})"))
        except ImportError as e:
            results.append(Result(bench, "petastream tf.dataset(device=...)", n, None, note=f"unavailable: {e}"))
    return results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--device", default="cuda", help="'cuda', 'cuda:1', or 'cpu' for a dry run")
    p.add_argument("--step-ms", type=float, default=2.0, help="compute per batch in the step variants")
    p.add_argument("--workers", type=lambda s: [int(w) for w in s.split(",")], default=[2],
                   help="decode threads of the petastream rows, comma-separated (default 2, the loader's)")
    p.add_argument("--batch", type=int, default=BATCH, help="rows per batch")
    p.add_argument("--workloads", type=lambda s: s.split(","), default=list(WORKLOADS),
                   help="comma-separated, of: " + ", ".join(WORKLOADS))
    p.add_argument("--repeat", type=int, default=3, help="timed runs per row (best kept), after a warm-up")
    args = p.parse_args()
    meta = {"device": "cpu (dry run)", "cpus": os.cpu_count()}
    if args.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            p.error("--device cuda, but torch sees no GPU; use --device cpu for a dry run")
        meta.update(device=torch.cuda.get_device_name(), torch=torch.__version__)
    print(f"device: {meta['device']}, {meta['cpus']} CPUs", flush=True)
    results = run(args)
    print(report(results, FLOOR))
    print(f"saved {save(NAME, results, meta)}")


if __name__ == "__main__":
    main()
