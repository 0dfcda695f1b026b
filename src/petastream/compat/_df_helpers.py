"""Petastorm's DataFrame helpers of ``petastorm.spark.spark_dataset_converter``, kept importable
from :mod:`petastream.compat.spark_dataset_converter` (the materializer does the same work)."""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["vector_to_array", "get_df_plan", "convert_vector", "convert_precision", "gen_cache_dir_name",
           "check_dtype"]

logger = logging.getLogger("petastream.compat.spark_dataset_converter")


def check_dtype(dtype: Any) -> None:
    if dtype is not None and dtype not in ("float32", "float64"):
        raise ValueError(f"dtype {dtype} is not supported. \
            Use 'float32' or float64")




def vector_to_array(col: Any, dtype: str = "float64") -> Any:
    """``pyspark.ml.functions.vector_to_array`` (imported when called: no pyspark at import)."""
    from pyspark.ml.functions import vector_to_array as _vector_to_array

    return _vector_to_array(col, dtype)


def get_df_plan(df: Any) -> str:
    """The analyzed plan, as text (works on Connect too, unlike Petastorm's JVM object)."""
    from petastream.spark.cache import plan_text

    return plan_text(df)


def convert_vector(df: Any, dtype: Any) -> Any:
    """Top-level ML/MLlib vector columns -> dense arrays of ``dtype`` (Petastorm's step)."""
    from pyspark.ml.linalg import VectorUDT
    from pyspark.mllib.linalg import VectorUDT as OldVectorUDT

    for field in df.schema.fields:
        if isinstance(field.dataType, (VectorUDT, OldVectorUDT)):
            df = df.withColumn(field.name, vector_to_array(df[field.name], dtype))
    return df


def convert_precision(df: Any, dtype: Any) -> Any:
    """Cast double<->float (and arrays of them) to ``dtype``, with Petastorm's checks and log."""
    from pyspark.sql.types import ArrayType, DoubleType, FloatType

    if dtype is None:
        return df
    check_dtype(dtype)
    logger.warning("Converting floating-point columns to %s", dtype)
    src, dst = (DoubleType, FloatType()) if dtype == "float32" else (FloatType, DoubleType())
    for field in df.schema.fields:
        if isinstance(field.dataType, src):
            df = df.withColumn(field.name, df[field.name].cast(dst))
        elif isinstance(field.dataType, ArrayType) and isinstance(field.dataType.elementType, src):
            df = df.withColumn(field.name, df[field.name].cast(ArrayType(dst)))
    return df


def gen_cache_dir_name() -> str:
    """Petastorm's ``{time}-appid-{appid}-{uuid}`` name (petastream's own directories are
    content-keyed instead; see petastream.spark.cache)."""
    import uuid
    from datetime import datetime

    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
    try:
        appid = spark.sparkContext.applicationId
    except Exception:  # Spark Connect has no SparkContext
        appid = "connect"
    return f"{datetime.now().strftime('%Y%m%d%H%M%S')}-appid-{appid}-{uuid.uuid4()}"
