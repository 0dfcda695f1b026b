"""compat ``tf_utils.make_petastorm_dataset`` over ``make_batch_reader``, interleaved (issue 36).

``python -m benchmarks.tf_utils_batches [--rows 200000] [--epochs 5] [--rounds 4] [--columns all]``

Rows, each ``--epochs`` passes (one reader, ``num_epochs``) over a Parquet file written here
(int64, float64, a list of 8 float32, a string per row; ``--columns`` picks some), iterated
eagerly as a migrated script does (``for batch in dataset``):

* floor: the same batches as tensors already, through ``from_tensor_slices`` (TensorFlow's own
  cost of handing an element to the loop; full batches only);
* reader: the reader alone, iterated in Python;
* from_generator: the dataset as Petastorm built it (``from_generator`` over the batches);
* make_petastorm_dataset: this checkout's.

CPU seconds of this process per million rows (``time.process_time``, every thread) beside wall,
per round after a warm-up round. The machine may be shared: compare rows within one run.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def _write(path: str, rows: int) -> None:
    ids = np.arange(rows)
    vec = pa.FixedSizeListArray.from_arrays(pa.array(np.random.rand(rows * 8).astype(np.float32)), 8)
    table = pa.table({"id": ids, "x": np.random.rand(rows), "vec": vec.cast(pa.list_(pa.float32())),
                      "name": [f"n{i}" for i in ids]})
    pq.write_table(table, f"{path}/a.parquet", row_group_size=20000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--columns", default="all", help="comma-separated, or all")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    import tensorflow as tf

    from petastream.compat import make_batch_reader
    from petastream.compat.tf_utils import make_petastorm_dataset

    columns = None if args.columns == "all" else args.columns.split(",")
    url = tempfile.mkdtemp(prefix="tf_utils_batches_")
    _write(url, args.rows)

    def reader() -> Any:
        return make_batch_reader("file://" + url, num_epochs=args.epochs, schema_fields=columns, workers_count=1)

    def loop(dataset: Any) -> int:
        return sum(int(tf.shape(batch[0])[0]) for batch in dataset)

    def reader_alone() -> int:
        with reader() as r:
            return sum(len(batch[0]) for batch in r)

    def from_generator() -> int:
        with reader() as r:
            spec = make_petastorm_dataset(r).element_spec  # peeks: the first batch stays in r
            make = type(spec)
            flat = tf.compat.v1.data.Dataset.from_generator(lambda: (tuple(b) for b in r), output_signature=tuple(spec))
            return loop(flat.map(lambda *v: make(*v)))

    def ours() -> int:
        with reader() as r:
            return loop(make_petastorm_dataset(r))

    full: list[Any] = []

    def floor() -> int:
        if not full:
            with reader() as r:
                batches = [tuple(b) for b in r if len(b[0]) == 1024]
            full.append(tuple(tf.constant(np.stack(c)) for c in zip(*batches)))
        return loop(tf.data.Dataset.from_tensor_slices(full[0]))

    rows: dict[str, Callable[[], int]] = {"floor": floor, "reader": reader_alone, "from_generator": from_generator,
                                          "make_petastorm_dataset": ours}
    results: dict[str, list[tuple[float, float]]] = {k: [] for k in rows}
    for round_ in range(args.rounds):
        for name, run in rows.items():
            cpu, wall = time.process_time(), time.perf_counter()
            n = run()
            if round_:  # the first round warms up
                results[name].append(((time.process_time() - cpu) / n * 1e6, (time.perf_counter() - wall) / n * 1e6))
    for name, values in results.items():
        print(f"{name:24s} CPU s/1M rows {[round(c, 2) for c, _ in values]}  wall {[round(w, 2) for _, w in values]}")


if __name__ == "__main__":
    main()
