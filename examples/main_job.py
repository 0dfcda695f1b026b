"""The main job, end to end (``make demo``): no configuration, local Spark.

A Spark DataFrame goes through the Petastorm-compatible converter (materialized once as MDS),
then into a few PyTorch training steps and a few Keras/TensorFlow steps, then the native
petastream loaders (PyTorch and tf.data) read the same dataset shuffled, and
``petastream verify`` checks it.
The only line that differs from a legacy Petastorm script is the import.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

ROWS, BATCH, STEPS = 20_000, 256, 5


def spark_session(cache_dir: str):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("petastream-demo")
             .config("spark.ui.enabled", "false")
             .config("petastorm.spark.converter.parentCacheDirUrl", "file://" + cache_dir)
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main() -> None:
    from pyspark.sql import functions as F

    from petastream.compat import make_spark_converter  # was: from petastorm.spark import ...

    cache = tempfile.mkdtemp(prefix="petastream-demo-")
    spark = spark_session(cache)
    features = F.array(*[F.rand(seed=i).cast("float") for i in range(16)]).alias("features")
    df = spark.range(ROWS).select("id", features, (F.col("id") % 2).cast("float").alias("label"))

    t = time.perf_counter()
    converter = make_spark_converter(df)
    print(f"materialized {len(converter):,} rows as MDS at {converter.cache_dir_url} "
          f"in {time.perf_counter() - t:.1f}s ({len(converter.file_urls)} shard files)")

    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    with converter.make_torch_dataloader(batch_size=BATCH) as loader:  # num_epochs=None: endless
        for step, batch in zip(range(STEPS), loader):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(batch["features"]).squeeze(1), batch["label"])
            loss.backward()
            optimizer.step()
            print(f"torch step {step}: batch {tuple(batch['features'].shape)} loss {loss.item():.4f}")

    import tensorflow as tf

    keras_model = tf.keras.Sequential([tf.keras.Input((16,)), tf.keras.layers.Dense(8, activation="relu"),
                                       tf.keras.layers.Dense(1)])
    keras_model.compile(optimizer="sgd", loss="mse")
    with converter.make_tf_dataset(batch_size=BATCH) as dataset:
        history = keras_model.fit(dataset.map(lambda x: (x.features, x.label)), steps_per_epoch=STEPS,
                                  epochs=1, verbose=0)
    print(f"keras: {STEPS} steps, loss {history.history['loss'][0]:.4f}")

    from petastream.torch import loader as native_loader

    t = time.perf_counter()
    seen = sum(len(b["id"]) for b in native_loader(converter.cache_dir_url, 1024, shuffle=True, seed=1))
    print(f"native torch loader: one shuffled epoch of {seen:,} rows in {time.perf_counter() - t:.2f}s")
    assert seen == ROWS

    import petastream.tf as ptf

    t = time.perf_counter()
    seen = sum(int(b["id"].shape[0]) for b in ptf.dataset(converter.cache_dir_url, 1024, shuffle=True, seed=1))
    print(f"native tf.data dataset: one shuffled epoch of {seen:,} rows in {time.perf_counter() - t:.2f}s")
    assert seen == ROWS

    subprocess.run([sys.executable, "-m", "petastream.cli", "verify", converter.cache_dir_url], check=True)
    converter.delete()
    spark.stop()
    print("main job OK")


if __name__ == "__main__":
    main()
