"""Read the digits dataset into a TF1-style graph with tf_tensors."""

import tensorflow.compat.v1 as tf
from petastorm import make_reader
from petastorm.tf_utils import tf_tensors


def label_histogram(dataset_url, steps=20):
    counts = [0] * 10
    with make_reader(dataset_url, num_epochs=None, schema_fields=["label"]) as reader:
        label = tf_tensors(reader).label
        with tf.Session() as session:
            for _ in range(steps):
                counts[session.run(label)] += 1
    return counts


if __name__ == "__main__":
    print(label_histogram("file:///tmp/digits"))
