"""The Petastorm dataset in TensorFlow: one sample as graph tensors, then as a tf.data.Dataset."""

import tensorflow.compat.v1 as tf
from petastorm import make_reader
from petastorm.tf_utils import make_petastorm_dataset, tf_tensors


def tensorflow_hello_world(dataset_url="file:///tmp/hello_world_dataset"):
    with make_reader(dataset_url) as reader:
        sample = tf_tensors(reader)
        with tf.Session() as session:
            print(session.run(sample).id)

    with make_reader(dataset_url) as reader:
        iterator = tf.data.make_one_shot_iterator(make_petastorm_dataset(reader))
        with tf.Session() as session:
            print(session.run(iterator.get_next()).id)


if __name__ == "__main__":
    tensorflow_hello_world()
