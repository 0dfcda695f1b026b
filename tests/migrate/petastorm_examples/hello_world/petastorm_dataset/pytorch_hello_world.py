"""The Petastorm dataset as torch batches."""

from petastorm import make_reader
from petastorm.pytorch import DataLoader


def pytorch_hello_world(dataset_url="file:///tmp/hello_world_dataset"):
    with DataLoader(make_reader(dataset_url, schema_fields=["id", "photo"]), batch_size=4) as loader:
        batch = next(iter(loader))
        print(batch["id"], batch["photo"].shape)


if __name__ == "__main__":
    pytorch_hello_world()
