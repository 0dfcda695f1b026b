"""Read a plain Parquet dataset (not written by Petastorm) a batch of rows at a time."""

from petastorm import make_batch_reader


def python_hello_world(dataset_url="file:///tmp/external_dataset"):
    with make_batch_reader(dataset_url, schema_fields=["id", "value"]) as reader:
        for batch in reader:
            print("ids in this batch:", batch.id)


if __name__ == "__main__":
    python_hello_world()
