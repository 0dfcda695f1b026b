"""Read the Petastorm dataset row by row, decoded."""

from petastorm import make_reader


def python_hello_world(dataset_url="file:///tmp/hello_world_dataset"):
    with make_reader(dataset_url, num_epochs=1) as reader:
        for row in reader:
            print(row.id, row.photo.shape, row.tensor.shape)


if __name__ == "__main__":
    python_hello_world()
