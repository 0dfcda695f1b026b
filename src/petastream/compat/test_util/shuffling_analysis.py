"""``petastorm.test_util.shuffling_analysis``: how well a reader's shuffling decorrelates the
row order, over a small dataset of consecutive ids."""

from __future__ import annotations

from typing import Any

import numpy as np

from petastream.compat.codecs import ScalarCodec
from petastream.compat.etl.dataset_metadata import materialize_dataset
from petastream.compat.row_reader import make_reader
from petastream.compat.unischema import Unischema, UnischemaField

__all__ = ["generate_shuffle_analysis_dataset", "compute_correlation_distribution"]


def _analysis_schema() -> Unischema:
    from pyspark.sql.types import LongType  # pyspark only where a dataset is written

    return Unischema("_ShuffleAnalysisSchema", [UnischemaField("id", np.int64, (), ScalarCodec(LongType()), False)])


def generate_shuffle_analysis_dataset(spark: Any, output_dataset_url: str, num_rows: int = 1000,
                                      row_group_size: int = 100) -> None:
    """Write a Unischema dataset of one int64 column ``id`` = 0..num_rows-1, in order, in
    ``num_rows // row_group_size`` files (at least one), uncompressed."""
    with materialize_dataset(spark, output_dataset_url, _analysis_schema()):
        # range() cuts the ids into ordered runs, one partition (one file) each
        (spark.range(0, num_rows, 1, max(1, num_rows // row_group_size))
         .write.option("compression", "none").parquet(output_dataset_url))


def _ids(reader: Any, id_column: int | str) -> list[Any]:
    if isinstance(id_column, str):
        return [getattr(row, id_column) for row in reader]
    return [row[id_column] for row in reader]


def compute_correlation_distribution(dataset_url: str, id_column: int | str, shuffle_row_drop_partitions: int,
                                     num_corr_samples: int = 100) -> tuple[float, float]:
    """``(mean, std)`` of ``|corrcoef(unshuffled ids, shuffled ids)|`` over ``num_corr_samples``
    shuffled reads (``shuffle_row_groups=True`` and the given ``shuffle_row_drop_partitions``).

    ``id_column``: the field's name or its position in the row (Petastorm indexed the row with
    it, so only a position worked there)."""
    with make_reader(dataset_url, shuffle_row_groups=False, reader_pool_type="dummy") as reader:
        unshuffled = _ids(reader, id_column)
    correlations = []
    for _ in range(num_corr_samples):
        with make_reader(dataset_url, shuffle_row_groups=True,
                         shuffle_row_drop_partitions=shuffle_row_drop_partitions) as reader:
            correlations.append(abs(np.corrcoef(unshuffled, _ids(reader, id_column))[0, 1]))
    return np.float64(np.mean(correlations)), np.float64(np.std(correlations))
