"""A digits dataset: a 28x28 grayscale image, its label and a row id."""

import numpy as np
from petastorm.codecs import NdarrayCodec, ScalarCodec
from petastorm.unischema import Unischema, UnischemaField
from pyspark.sql.types import IntegerType

DigitsSchema = Unischema("DigitsSchema", [
    UnischemaField("row_id", np.int32, (), ScalarCodec(IntegerType()), False),
    UnischemaField("label", np.int32, (), ScalarCodec(IntegerType()), False),
    UnischemaField("pixels", np.uint8, (28, 28), NdarrayCodec(), False),
])
