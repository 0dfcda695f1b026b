"""Spark Connect DataFrames: same materializer, DataFrame API only (no _jdf, no RDDs)."""

from __future__ import annotations

import pytest

from petastream.spark import NullValuesError, materialize
from tests.spark.helpers import as_list, collect_sorted, read_rows

pytestmark = pytest.mark.spark


def test_connect_dataframe_materializes(spark_connect, cache_dir):
    from pyspark.ml.connect.functions import array_to_vector
    from pyspark.sql.connect import functions as F

    df = (spark_connect.range(0, 200, 1, 3)
          .withColumn("label", (F.col("id") % 7).cast("int"))
          .withColumn("feat", F.array(*[F.col("id").cast("double") * k for k in range(16)]))
          .withColumn("name", F.concat(F.lit("row-"), F.col("id").cast("string")))
          .withColumn("vec", array_to_vector(F.array(F.col("id").cast("double"), F.lit(1.0)))))
    assert not hasattr(df, "_jdf")
    m = materialize(df, cache_dir)
    assert m.created and len(m) == 200
    assert m.columns == {"id": "int64", "label": "int32", "feat": "ndarray:float32:16",
                         "name": "str", "vec": "ndarray:float32:2"}
    for g, e in zip(read_rows(m.url), collect_sorted(df.drop("vec"))):
        assert int(g["id"]) == e["id"] and int(g["label"]) == e["label"] and g["name"] == e["name"]
        assert as_list(g["feat"]) == e["feat"]
        assert as_list(g["vec"]) == [float(e["id"]), 1.0]
    again = materialize(spark_connect.range(0, 200, 1, 3)
                        .withColumn("label", (F.col("id") % 7).cast("int"))
                        .withColumn("feat", F.array(*[F.col("id").cast("double") * k for k in range(16)]))
                        .withColumn("name", F.concat(F.lit("row-"), F.col("id").cast("string")))
                        .withColumn("vec", array_to_vector(F.array(F.col("id").cast("double"), F.lit(1.0)))),
                        cache_dir)
    assert again.reused and again.url == m.url
    assert materialize(spark_connect.range(201), cache_dir).url != m.url


def test_connect_null_error(spark_connect, cache_dir):
    df = spark_connect.createDataFrame([(1, "a"), (2, None)], "id long, s string")
    with pytest.raises(NullValuesError, match=r"'s': 1 row\(s\)"):
        materialize(df, cache_dir)
