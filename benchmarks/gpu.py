"""Batches delivered into GPU memory, and how much of the copy hides behind a training step.

    python -m benchmarks.gpu --rows 1000000 --device cuda       # on a GPU machine
    python -m benchmarks.gpu --rows 20000 --device cpu          # dry run: same code paths, no GPU

Workloads 'tabular' and 'binary' (:mod:`benchmarks.workloads`), batches of 1024, one shuffled
epoch. Rows, each best of 3 after a warm-up:

* floor: the epoch's batches prepared in pinned host memory beforehand, copied with
  ``non_blocking=True`` (what a perfect loader could hand the GPU);
* petastream ``torch.loader(device=...)``: pinned + side-stream copies (the default), and with
  ``pin_memory=False``;
* compat: Petastorm's ``DataLoader`` over ``make_batch_reader`` (what migrated code runs), the
  batch moved with ``.to(device)`` in the loop as such code does;
* TensorFlow ``petastream.tf.dataset(device="/gpu:0")`` (prefetch to device).

"step" variants run a fixed matmul per batch (``--step-ms`` of compute, calibrated once) and
report the overlap: the share of the delivery time hidden behind the step,
``(t_delivery + t_step - t_both) / t_delivery`` (1.0 = the copy costs nothing extra).
Each row also says its rate relative to the CPU-side loader (the same loader, no device).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterable

import numpy as np

from benchmarks.harness import Result, report, save
from benchmarks.workloads import WORKLOADS, make_data, prepare

NAME = "gpu"
BATCH = 1024


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _drain(batches: Iterable, device: str, step: Callable | None) -> int:
    rows = 0
    for b in batches:
        x = b["features"] if isinstance(b, dict) else b
        rows += len(x)
        if step is not None:
            step(x)
    _sync(device)
    return rows


def _timed(fn: Callable[[], int], repeat: int = 3) -> tuple[int, float]:
    fn()
    best = None
    for _ in range(repeat):
        t = time.perf_counter()
        rows = fn()
        dt = time.perf_counter() - t
        best = dt if best is None or dt < best else best
    return rows, best


def _step_fn(device: str, target_ms: float) -> Callable:
    """A fixed matmul per batch, sized once to take about ``target_ms`` on ``device``."""
    import torch

    size = 256
    w = torch.randn(16, size, device=device)
    sq = torch.randn(size, size, device=device)

    def step(x, reps=[1]):  # noqa: B006 - calibrated below, then fixed
        h = x.float() @ w
        for _ in range(reps[0]):
            h = torch.tanh(h @ sq)
        return h

    x = torch.randn(BATCH, 16, device=device)
    for reps in (1, 2, 4, 8, 16, 32, 64, 128):
        step.__defaults__[0][0] = reps
        _sync(device)
        t = time.perf_counter()
        for _ in range(5):
            step(x)
        _sync(device)
        if (time.perf_counter() - t) / 5 * 1e3 >= target_ms:
            break
    return step


def floor_batches(data: dict[str, np.ndarray], device: str):
    import torch

    n = len(data["id"])
    perm = np.random.default_rng(1).permutation(n)
    pin = device.startswith("cuda")
    host = []
    for i in range(0, n, BATCH):
        t = torch.from_numpy(data["features"][perm[i:i + BATCH]])
        host.append(t.pin_memory() if pin else t)
    return lambda: ({"features": t.to(device, non_blocking=pin)} for t in host)


def petastream_batches(url: str, device: str, pin: bool):
    from petastream.torch import loader

    dev = None if device == "cpu" else device
    return lambda: loader(url, BATCH, shuffle=True, seed=1, device=dev, pin_memory=pin if dev else None,
                          columns=["features"])


def compat_batches(url: str, device: str):
    from petastream.compat.pytorch import DataLoader
    from petastream.compat.reader import make_batch_reader

    def run():
        with DataLoader(make_batch_reader(url, num_epochs=1, schema_fields=["features"]),
                        batch_size=BATCH) as dl:
            for b in dl:
                yield {"features": b["features"].to(device)}
    return run


def tf_rows(url: str, device: str) -> tuple[int, float]:
    import petastream.tf as ptf

    tf_dev = "/gpu:0" if device.startswith("cuda") else "/cpu:0"

    def run() -> int:
        return sum(int(b["features"].shape[0]) for b in ptf.dataset(url, BATCH, shuffle=True, seed=1,
                                                                     columns=["features"], device=tf_dev))
    return _timed(run)


def run(args: argparse.Namespace) -> list[Result]:
    results = []
    device = args.device
    step = _step_fn(device, args.step_ms)
    for workload in WORKLOADS:
        data = make_data(workload, args.rows)
        paths = prepare(workload, args.rows, data)
        n, bench = args.rows, f"{NAME}/{workload}"
        sources = {
            "floor: pre-pinned host tensors, non_blocking copy": floor_batches(data, device),
            "petastream torch.loader, pinned + side stream": petastream_batches(paths["mds"], device, True),
            "petastream torch.loader, pin_memory=False": petastream_batches(paths["mds"], device, False),
            "compat DataLoader + .to(device)": compat_batches(paths["mds"], device),
        }
        del data
        cpu_loader = petastream_batches(paths["mds"], "cpu", False)
        _, cpu_side = _timed(lambda: _drain(cpu_loader(), "cpu", None))  # noqa: B023 - called here
        # The step alone, on batches already on the device: what a perfect loader would cost.
        resident = list(sources["floor: pre-pinned host tensors, non_blocking copy"]())
        _, t_step = _timed(lambda: _drain(resident, device, step))  # noqa: B023 - called here
        resident.clear()
        results.append(Result(bench, "CPU-side loader (no device)", n, cpu_side))
        results.append(Result(bench, "step alone (batches resident)", n, t_step))
        for variant, make in sources.items():
            rows, t_deliver = _timed(lambda make=make: _drain(make(), device, None))
            rows2, t_both = _timed(lambda make=make: _drain(make(), device, step))
            hidden = (t_deliver + t_step - t_both) / t_deliver if t_deliver else 0.0
            note = "" if rows == rows2 == n else f"INCOMPLETE ({rows}, {rows2} of {n})"
            results.append(Result(bench, variant, n, t_deliver, note=note,
                                  extra={"vs_cpu_side": cpu_side / t_deliver}))
            results.append(Result(bench, f"{variant} + step", n, t_both,
                                  note=f"copy hidden behind the step: {max(0.0, min(1.0, hidden)):.0%}"))
        try:
            rows, t_tf = tf_rows(paths["mds"], device)
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
    args = p.parse_args()
    if args.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            p.error("--device cuda, but torch sees no GPU; use --device cpu for a dry run")
        print(f"device: {torch.cuda.get_device_name()}")
    results = run(args)
    print(report(results, "floor: pre-pinned host tensors, non_blocking copy"))
    print(f"saved {save(NAME, results)}")


if __name__ == "__main__":
    main()
