"""The main job, end to end (``make demo``): no configuration, local Spark.

A Spark DataFrame goes through the Petastorm-compatible converter (materialized once as MDS),
then into a few PyTorch training steps and a few Keras/TensorFlow steps, then the native
petastream loaders (PyTorch and tf.data) read the same dataset shuffled, and
``petastream verify`` checks it. One line per phase: Spark, TensorFlow and Keras are kept
quiet (their start-up lines, WARN logs and stage bars), petastream's own progress shows at
INFO (a tqdm bar on a terminal while the write job runs, then its summary line).
The only line that differs from a legacy Petastorm script is the import.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
import time

ROWS, BATCH, STEPS = 20_000, 256, 5

# Spark's own log4j config, before the JVM starts: the console appender lets ERROR through only
# (no start-up WARN lines). The root level stays WARN, the level Spark assumes for a shell:
# were they different, Spark would print 'Setting default log level to "WARN"'. (The JVM's own
# "WARNING: Using incubator modules" line cannot be turned off: Spark 4 always adds the module.)
LOG4J = """rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.filter.threshold.type = ThresholdFilter
appender.console.filter.threshold.level = error
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
"""


def spark_session(work_dir: str):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no "resolves to a loopback address"
    log4j = os.path.join(work_dir, "log4j2.properties")
    with open(log4j, "w") as f:
        f.write(LOG4J)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("petastream-demo")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")  # petastream reports progress
             .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main() -> None:
    logging.basicConfig(format="%(message)s", level=logging.WARNING)
    logging.getLogger("petastream.spark").setLevel(logging.INFO)  # our phases and progress

    from pyspark.sql import functions as F

    from petastream.compat import SparkDatasetConverter, make_spark_converter  # petastorm.spark

    work = tempfile.mkdtemp(prefix="petastream-demo-")
    spark = spark_session(work)
    print(f"spark {spark.version} local[2]; {ROWS:,} rows: id, 16 float features, label")
    spark.conf.set(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, "file://" + work)
    features = F.array(*[F.rand(seed=i).cast("float") for i in range(16)]).alias("features")
    df = spark.range(ROWS).select("id", features, (F.col("id") % 2).cast("float").alias("label"))

    t = time.perf_counter()
    converter = make_spark_converter(df)
    print(f"converter: {len(converter):,} rows, {len(converter.file_urls)} MDS shard files "
          f"({time.perf_counter() - t:.1f} s)")

    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    with converter.make_torch_dataloader(batch_size=BATCH) as loader:  # num_epochs=None: endless
        for _, batch in zip(range(STEPS), loader):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(batch["features"]).squeeze(1), batch["label"])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    print(f"torch: {STEPS} steps of {tuple(batch['features'].shape)}, "
          f"loss {losses[0]:.4f} -> {losses[-1]:.4f}")

    from petastream._quiet import import_tensorflow

    tf = import_tensorflow()  # without TensorFlow's start-up lines
    keras_model = tf.keras.Sequential([tf.keras.Input((16,)), tf.keras.layers.Dense(8, activation="relu"),
                                       tf.keras.layers.Dense(1)])
    keras_model.compile(optimizer="sgd", loss="mse")
    with converter.make_tf_dataset(batch_size=BATCH) as dataset:  # already shuffled: shuffle=False
        history = keras_model.fit(dataset.map(lambda x: (x.features, x.label)), steps_per_epoch=STEPS,
                                  epochs=1, verbose=0, shuffle=False)
    print(f"keras: {STEPS} steps, loss {history.history['loss'][0]:.4f}")

    from petastream.torch import loader as native_loader

    t = time.perf_counter()
    seen = sum(len(b["id"]) for b in native_loader(converter.cache_dir_url, 1024, shuffle=True, seed=1))
    print(f"native torch loader: one shuffled epoch of {seen:,} rows in {time.perf_counter() - t:.2f} s")
    assert seen == ROWS

    import petastream.tf as ptf

    t = time.perf_counter()
    seen = sum(int(b["id"].shape[0]) for b in ptf.dataset(converter.cache_dir_url, 1024, shuffle=True, seed=1))
    print(f"native tf.data dataset: one shuffled epoch of {seen:,} rows in {time.perf_counter() - t:.2f} s")
    assert seen == ROWS

    out = subprocess.run([sys.executable, "-m", "petastream", "verify", converter.cache_dir_url],
                         check=True, capture_output=True, text=True).stdout.strip()
    print(f"petastream verify: {out}")
    converter.delete()
    spark.stop()
    print("main job OK")


if __name__ == "__main__":
    main()
