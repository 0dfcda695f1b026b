"""A plain Parquet dataset read with TensorFlow: graph tensors, then tf.data."""

import tensorflow.compat.v1 as tf
from petastorm import make_batch_reader
from petastorm.tf_utils import make_petastorm_dataset, tf_tensors


def tensorflow_hello_world(dataset_url="file:///tmp/external_dataset"):
    with make_batch_reader(dataset_url) as reader:
        ids = tf_tensors(reader).id
        with tf.Session() as session:
            print("ids:", session.run(ids))

    with make_batch_reader(dataset_url) as reader:
        dataset = make_petastorm_dataset(reader).map(lambda row: row.id)
        for ids in dataset.take(1):
            print("ids:", ids)


if __name__ == "__main__":
    tensorflow_hello_world()
