"""Images with their WordNet id and a human-readable label."""

import numpy as np
from petastorm.codecs import CompressedImageCodec, ScalarCodec
from petastorm.unischema import Unischema, UnischemaField
from pyspark.sql.types import StringType

LabelledImagesSchema = Unischema("LabelledImagesSchema", [
    UnischemaField("wordnet_id", np.str_, (), ScalarCodec(StringType()), False),
    UnischemaField("label", np.str_, (), ScalarCodec(StringType()), False),
    UnischemaField("image", np.uint8, (None, None, 3), CompressedImageCodec("jpeg", quality=90), False),
])
