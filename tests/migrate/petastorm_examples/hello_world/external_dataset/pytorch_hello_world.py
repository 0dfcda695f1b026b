"""Batches of a plain Parquet dataset as torch tensors."""

from petastorm import make_batch_reader
from petastorm.pytorch import DataLoader


def pytorch_hello_world(dataset_url="file:///tmp/external_dataset"):
    with DataLoader(make_batch_reader(dataset_url), batch_size=16) as loader:
        first = next(iter(loader))
        print("first ids:", first["id"])


if __name__ == "__main__":
    pytorch_hello_world()
