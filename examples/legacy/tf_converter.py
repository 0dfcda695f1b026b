"""Legacy Petastorm: Spark DataFrame -> Keras through the Spark converter.

Two converters built on one line, the parent cache dir set through the constant, a
TransformSpec over pandas batches, and two ``make_tf_dataset`` context managers in one
``with`` mapped to (features, label) tuples for Keras -- the shapes seen in Databricks
notebooks. A migration input for ``petastream migrate``.

    python examples/legacy/tf_converter.py [CACHE_DIR]
"""

import sys
import tempfile

import numpy as np
import tensorflow as tf
from petastorm import TransformSpec
from petastorm.spark import SparkDatasetConverter, make_spark_converter
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ROWS = 256
BATCH_SIZE = 32


def scale(pd_batch):
    pd_batch["features"] = pd_batch["features"].map(lambda v: (np.asarray(v) * 2.0).astype(np.float32))
    return pd_batch


def main(cache_dir: str) -> None:
    spark = SparkSession.builder.master("local[2]").appName("legacy-tf-converter").getOrCreate()
    spark.conf.set(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, "file://" + cache_dir)
    features = F.array(*[F.rand(seed=i) for i in range(4)]).alias("features")
    label = (F.col("id") % 2).cast("float").alias("label")
    df = spark.range(ROWS).select("id", features, label)
    df_train, df_val = df.randomSplit([0.8, 0.2], seed=42)

    converter_train, converter_val = make_spark_converter(df_train), make_spark_converter(df_val)
    spec = TransformSpec(scale, edit_fields=[("features", np.float32, (4,), False)],
                         selected_fields=["features", "label"])

    model = tf.keras.Sequential([tf.keras.Input(shape=(4,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    with converter_train.make_tf_dataset(transform_spec=spec, batch_size=BATCH_SIZE) as train_ds, \
         converter_val.make_tf_dataset(transform_spec=spec, batch_size=BATCH_SIZE) as val_ds:
        train_ds = train_ds.map(lambda x: (x.features, x.label))
        val_ds = val_ds.map(lambda x: (x.features, x.label))
        history = model.fit(train_ds, steps_per_epoch=max(1, len(converter_train) // BATCH_SIZE),
                            validation_data=val_ds, validation_steps=1, epochs=1, verbose=0)
    print(f"trained 1 epoch, loss {history.history['loss'][-1]:.4f}")

    converter_train.delete()
    converter_val.delete()
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="petastorm-cache-"))
