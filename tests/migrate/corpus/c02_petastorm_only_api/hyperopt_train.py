"""HyperOpt + Horovod trial reading Parquet written by an ETL job."""

import horovod.tensorflow.keras as hvd
import tensorflow as tf
from hyperopt import STATUS_OK
from petastorm import TransformSpec, make_batch_reader
from petastorm.tf_utils import make_petastorm_dataset

BATCH_SIZE = 64


def train_and_evaluate(params, train_url="file:///dbfs/ml/train.parquet"):
    hvd.init()
    spec = TransformSpec(lambda pdf: pdf.assign(label=pdf.label.astype("float32")))
    with make_batch_reader(
        train_url, num_epochs=None, cur_shard=hvd.rank(), shard_count=hvd.size(), transform_spec=spec
    ) as reader:
        dataset = make_petastorm_dataset(reader).map(
            lambda x: (tf.reshape(x.features, [-1, 8]), tf.reshape(x.label, [-1, 1]))
        )
        model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
        model.compile(optimizer=tf.keras.optimizers.Adam(params["lr"] * hvd.size()), loss="mse")
        history = model.fit(dataset, steps_per_epoch=100, epochs=1, verbose=0)
    return {"loss": history.history["loss"][-1], "status": STATUS_OK}
