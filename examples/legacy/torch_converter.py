"""Legacy Petastorm: Spark DataFrame -> PyTorch through the Spark converter.

The canonical form from Petastorm's README and the Databricks docs, kept as a migration
input for ``petastream migrate`` (tests/migrate/test_examples.py migrates it and runs the
result). Small on purpose: a few hundred rows, two training steps, local Spark.

    python examples/legacy/torch_converter.py [CACHE_DIR]
"""

import sys
import tempfile

import torch
from petastorm.spark import SparkDatasetConverter, make_spark_converter
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

ROWS = 256
BATCH_SIZE = 32
STEPS = 2


def main(cache_dir: str) -> None:
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("legacy-torch-converter")
        .config("petastorm.spark.converter.parentCacheDirUrl", f"file://{cache_dir}")
        .getOrCreate()
    )
    features = F.array(*[F.rand(seed=i) for i in range(4)]).alias("features")
    label = (F.col("id") % 2).cast("float").alias("label")
    df = spark.range(ROWS).select("id", features, label).repartition(2)

    converter = make_spark_converter(df)
    assert isinstance(converter, SparkDatasetConverter)
    print(f"materialized {len(converter)} rows")

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    steps = 0
    with converter.make_torch_dataloader(batch_size=BATCH_SIZE, num_epochs=1) as loader:
        for batch in loader:
            optimizer.zero_grad()
            prediction = model(batch["features"]).squeeze(1)
            loss = torch.nn.functional.mse_loss(prediction, batch["label"])
            loss.backward()
            optimizer.step()
            steps += 1
            if steps == STEPS:
                break
    print(f"trained {steps} steps, last loss {loss.item():.4f}")

    converter.delete()
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="petastorm-cache-"))
