"""petastream.compat.test_util.reader_mock, as Petastorm 0.13.1's behaves."""

from decimal import Decimal

import numpy as np
import pytest

from petastream.compat.codecs import NdarrayCodec
from petastream.compat.test_util.reader_mock import ReaderMock, schema_data_generator_example
from petastream.compat.unischema import Unischema, UnischemaField

SCHEMA = Unischema("MockSchema", [
    UnischemaField("id", np.int64, (), None, False),
    UnischemaField("matrix", np.float32, (4, None, 3), NdarrayCodec(), False),
    UnischemaField("price", Decimal, (), None, True),
    UnischemaField("name", np.str_, (), None, False),
])


def test_rows_are_zeros_of_the_schema():
    with ReaderMock(SCHEMA, schema_data_generator_example) as reader:
        rows = [next(reader) for _ in range(3)]
    assert type(rows[0]).__name__ == "MockSchema_view"
    row = rows[0]
    assert row.id.dtype == np.int64 and row.id.shape == ()
    assert row.matrix.shape == (4, 10, 3) and row.matrix.dtype == np.float32 and not row.matrix.any()
    assert row.price == Decimal("0.0")
    assert row.name.dtype.type is np.str_
    reader.stop()
    reader.join()


def test_custom_generator_and_ngram_refused():
    reader = ReaderMock(SCHEMA, lambda schema: {name: name for name in schema.fields})
    assert reader.next() == ("id", "matrix", "price", "name")
    assert reader.is_batched_reader is False
    with pytest.raises(ValueError, match="Sequence argument not supported for ReaderMock"):
        ReaderMock(SCHEMA, schema_data_generator_example, ngram=object())


@pytest.mark.tf
def test_tf_tensors_of_a_mock_reader():
    pytest.importorskip("tensorflow")
    from petastream.compat.tf_utils import tf_tensors

    schema = Unischema("TfMock", [UnischemaField("id", np.int64, (), None, False),
                                  UnischemaField("image", np.uint8, (2, 3), NdarrayCodec(), False)])
    row = tf_tensors(ReaderMock(schema, schema_data_generator_example))
    assert row.id.dtype.name == "int64" and tuple(row.image.shape) == (2, 3)
