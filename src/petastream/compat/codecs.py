"""``petastorm.codecs``: how a Unischema field's values are stored in a Parquet column.

The bytes are Petastorm 0.13.1's, so datasets go both ways:

- ``ScalarCodec(spark_type)``: a plain Parquet column of ``spark_type``; decoding casts the value
  to the field's ``numpy_dtype`` (``np.int32(v)``, ``np.str_(v)``, ``Decimal(v)``).
- ``NdarrayCodec()``: a binary column; each value is the ``np.save`` file of the array (the
  ``.npy`` format: magic, header dict with dtype/order/shape, raw data).
- ``CompressedNdarrayCodec()``: a binary column; each value is an ``np.savez_compressed`` zip
  holding one member, ``arr.npy``.
- ``CompressedImageCodec(image_codec='png'|'jpeg', quality=80)``: a binary column; each value is a
  PNG or JPEG file of an (H, W) or (H, W, 3) RGB image (Petastorm hands OpenCV the channels in
  BGR order, so the file holds a normal RGB image). Encoded and decoded here with Pillow (the
  ``images`` extra) instead of OpenCV: PNG round-trips exactly; JPEG decodes to the same pixels
  as OpenCV's libjpeg-turbo for the fixtures in tests/fixtures/petastorm.

The classes keep Petastorm's names and instance attributes (``_spark_type``, ``_image_codec``,
``_quality``): a schema pickled by either side unpickles on the other. Column-at-a-time decoding
for readers is in :mod:`petastream.compat._decode`.
"""

from __future__ import annotations

from abc import abstractmethod
from io import BytesIO
from typing import Any

import numpy as np

from petastream.compat._spark_types import spark_type_name, to_pyspark_type

__all__ = ["DataframeColumnCodec", "CompressedImageCodec", "NdarrayCodec", "CompressedNdarrayCodec",
           "ScalarCodec"]


class DataframeColumnCodec:
    """The base of codecs: ``encode``/``decode`` one value, ``spark_dtype`` of the column."""

    @abstractmethod
    def encode(self, unischema_field: Any, value: Any) -> Any:
        raise RuntimeError("Abstract method was called")

    @abstractmethod
    def decode(self, unischema_field: Any, value: Any) -> Any:
        raise RuntimeError("Abstract method was called")

    @abstractmethod
    def spark_dtype(self) -> Any:
        """The pyspark type of the stored column."""
        raise RuntimeError("Abstract method was called")

    @abstractmethod
    def __str__(self) -> str:
        raise RuntimeError("Abstract method was called")


def _binary_type() -> Any:
    import pyspark.sql.types as sql_types  # only the writing side needs pyspark

    return sql_types.BinaryType()


def _check_array(unischema_field: Any, value: Any) -> None:
    """Petastorm's checks (and messages) before an ndarray is stored."""
    expected_dtype = unischema_field.numpy_dtype
    if not isinstance(value, np.ndarray):
        raise ValueError(f"Unexpected type of {unischema_field.name} feature. "
                         f"Expected ndarray of {expected_dtype}. Got {type(value)}")
    if expected_dtype != value.dtype.type:
        raise ValueError(f"Unexpected type of {unischema_field.name} feature. "
                         f"Expected {expected_dtype}. Got {value.dtype}")
    if not _is_compliant_shape(value.shape, unischema_field.shape):
        raise ValueError(f"Unexpected dimensions of {unischema_field.name} feature. "
                         f"Expected {unischema_field.shape}. Got {value.shape}")


class NdarrayCodec(DataframeColumnCodec):
    """An ndarray stored as its ``np.save`` bytes."""

    def encode(self, unischema_field: Any, value: Any) -> bytearray:
        _check_array(unischema_field, value)
        out = BytesIO()
        np.save(out, value)
        return bytearray(out.getvalue())

    def decode(self, unischema_field: Any, value: Any) -> np.ndarray:
        # allow_pickle stays False: an object array in a dataset must not run code on read.
        return np.load(BytesIO(value))

    def spark_dtype(self) -> Any:
        return _binary_type()

    def __str__(self) -> str:
        return f"{type(self).__name__}()"


class CompressedNdarrayCodec(DataframeColumnCodec):
    """An ndarray stored as an ``np.savez_compressed`` zip with the member ``arr``."""

    def encode(self, unischema_field: Any, value: Any) -> bytearray:
        _check_array(unischema_field, value)
        out = BytesIO()
        np.savez_compressed(out, arr=value)
        return bytearray(out.getvalue())

    def decode(self, unischema_field: Any, value: Any) -> np.ndarray:
        with np.load(BytesIO(value)) as archive:
            return archive["arr"]

    def spark_dtype(self) -> Any:
        return _binary_type()

    def __str__(self) -> str:
        return f"{type(self).__name__}()"


class CompressedImageCodec(DataframeColumnCodec):
    """An (H, W) or (H, W, 3) RGB image stored as a PNG or JPEG file."""

    def __init__(self, image_codec: str = "png", quality: int = 80) -> None:
        """:param image_codec: ``'png'`` or ``'jpeg'``.
        :param quality: JPEG quality (1-100); PNG ignores it."""
        self._image_codec = "." + image_codec
        self._quality = quality

    @property
    def image_codec(self) -> str:
        """``'png'`` or ``'jpeg'``."""
        return self._image_codec[1:]

    def encode(self, unischema_field: Any, value: Any) -> bytearray:
        from petastream.compat import _images

        if unischema_field.numpy_dtype != value.dtype:
            raise ValueError(f"Unexpected type of {unischema_field.name} feature, "
                             f"expected {unischema_field.numpy_dtype}, got {value.dtype}")
        if not _is_compliant_shape(value.shape, unischema_field.shape):
            raise ValueError(f"Unexpected dimensions of {unischema_field.name} feature, "
                             f"expected {unischema_field.shape}, got {value.shape}")
        return bytearray(_images.encode(value, self.image_codec, self._quality, unischema_field.name))

    def decode(self, unischema_field: Any, value: Any) -> np.ndarray:
        from petastream.compat import _images

        return _images.decode(value, getattr(unischema_field, "name", "?"))

    def spark_dtype(self) -> Any:
        return _binary_type()

    def __str__(self) -> str:
        return f"{type(self).__name__}('{self.image_codec}', {self._quality})"


_INTEGRAL = ("ByteType", "ShortType", "IntegerType", "LongType")
_FRACTIONAL = ("FloatType", "DoubleType")


class ScalarCodec(DataframeColumnCodec):
    """A scalar stored in a native Parquet column of the given pyspark type."""

    def __init__(self, spark_type: Any) -> None:
        """:param spark_type: an instance of a :mod:`pyspark.sql.types` type, e.g. ``LongType()``."""
        self._spark_type = spark_type

    def encode(self, unischema_field: Any, value: Any) -> Any:
        # A 0-d ndarray counts as a scalar; anything else with a length (but a str) does not.
        zero_dim = isinstance(value, np.ndarray) and value.shape == ()
        if not zero_dim and hasattr(value, "__len__") and not isinstance(value, str):
            raise TypeError(f"Expected a scalar as a value for field '{unischema_field.name}'. "
                            f"Got a non-numpy type'{type(value)}'")
        if unischema_field.shape:
            raise ValueError(f"The shape field of unischema_field '{unischema_field.name}' must be an "
                             f"empty tuple (i.e. '()' to indicate a scalar. However, the actual shape is "
                             f"{unischema_field.shape}")
        name = spark_type_name(self._spark_type)
        if name in _INTEGRAL:
            return int(value)
        if name in _FRACTIONAL:
            return float(value)
        if name == "BooleanType":
            return bool(value)
        if name == "StringType":
            if not isinstance(value, str):
                raise ValueError(f"Expected a string value for field {unischema_field.name}. "
                                 f"Got type {type(value)}")
            return str(value)
        return value

    def decode(self, unischema_field: Any, value: Any) -> Any:
        return unischema_field.numpy_dtype(value)

    def spark_dtype(self) -> Any:
        return to_pyspark_type(self._spark_type)

    def __str__(self) -> str:
        return f"{type(self).__name__}({spark_type_name(self._spark_type)}())"


def _is_compliant_shape(a: tuple, b: tuple) -> bool:
    """Whether shape ``a`` fits ``b``, where a None (or 0) dimension of either matches any size."""
    if len(a) != len(b):
        return False
    return all(not (x and y) or x == y for x, y in zip(a, b))
