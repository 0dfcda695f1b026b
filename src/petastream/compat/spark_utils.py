"""``petastorm.spark_utils``: a Unischema dataset as a Spark RDD of decoded rows.

pyspark is not imported here: the caller's session does the reading.
"""

from __future__ import annotations

import functools
from typing import Any

from petastream.compat.etl.dataset_metadata import get_schema_from_dataset_url
from petastream.compat.unischema import Unischema
from petastream.compat.utils import decode_row

__all__ = ["dataset_as_rdd"]


def _decoded_namedtuple(schema: Unischema, row: Any) -> Any:
    return schema.make_namedtuple(**decode_row(row.asDict(), schema))


def dataset_as_rdd(dataset_url: str, spark_session: Any, schema_fields: list[Any] | None = None,
                   hdfs_driver: str = "libhdfs3") -> Any:
    """An RDD of the dataset's rows, each the schema's namedtuple with every codec decoded
    (images, ndarrays, scalars typed as the schema says), as ``make_reader`` gives them.

    ``schema_fields``: ``UnischemaField``s to keep (their namedtuple holds only those).
    Spark reads the URL itself (Petastorm handed it the URL's path), so ``s3a://``, ``dbfs:/``
    and the other schemes of the cluster work too. A classic session is needed (RDDs do not
    exist on Spark Connect).
    """
    schema = get_schema_from_dataset_url(dataset_url, hdfs_driver=hdfs_driver)
    dataset_df = spark_session.read.parquet(dataset_url)
    if schema_fields is not None:
        schema = schema.create_schema_view(schema_fields)
        dataset_df = dataset_df.select(*[field.name for field in schema_fields])
    # a partial of a module-level function: the closure Spark pickles to the executors holds
    # only the schema
    return dataset_df.rdd.map(functools.partial(_decoded_namedtuple, schema))
