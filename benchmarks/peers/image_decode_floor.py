"""The decode-bound floor of an image column, with an implementation's own image codec.

Run by ``benchmarks.image_epoch`` with the Petastorm env's python (``--impl petastorm``: OpenCV,
on ``--sys-path``) as a reference beside the floor of petastream's codec (Pillow), or with
petastream's (``--impl petastream-compat``): the same code for both, only the import differs.
The column's stored files are read into memory with pyarrow, then each "epoch" decodes every
one once, in a seeded random order, in this thread, with ``CompressedImageCodec.decode`` of the
field as the dataset's schema declares it (``--field``).
"""

from __future__ import annotations

import argparse
import glob
import os
import sys

from _common import describe, emit, timed_epochs


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--impl", choices=["petastorm", "petastream-compat"], default="petastorm")
    p.add_argument("--dataset", required=True, help="the dataset directory")
    p.add_argument("--field", default="image")
    p.add_argument("--rows", type=int, required=True, help="rows in the dataset")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--sys-path", default=None, help="a directory put first on sys.path (OpenCV)")
    args = p.parse_args()
    if args.sys_path:
        sys.path.insert(0, args.sys_path)
    try:
        import numpy as np
        import pyarrow.parquet as pq

        if args.impl == "petastorm":
            from petastorm.etl.dataset_metadata import get_schema_from_dataset_url
        else:
            from petastream.compat.etl.dataset_metadata import get_schema_from_dataset_url
        field = get_schema_from_dataset_url("file://" + args.dataset).fields[args.field]
        values = [v for f in sorted(glob.glob(os.path.join(args.dataset, "*.parquet")))
                  for v in pq.read_table(f, columns=[args.field]).column(args.field).to_pylist()]
        order = np.random.default_rng(1).permutation(len(values))

        def epoch() -> int:
            for i in order:
                field.codec.decode(field, values[i])
            return len(order)

        out = timed_epochs(epoch, args.rows, args.repeat)
    except Exception as e:  # noqa: BLE001 - reported, not raised
        out = {"error": f"failed: {describe(e)}"}
    emit(**out, extra={"impl": args.impl, "field": args.field})


if __name__ == "__main__":
    main()
