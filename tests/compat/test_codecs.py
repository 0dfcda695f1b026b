"""petastream.compat.codecs: Petastorm 0.13.1's bytes and errors."""

from __future__ import annotations

import io
import os
import zipfile

import numpy as np
import pyarrow.parquet as pq
import pyspark.sql.types as T
import pytest

from petastream.compat.codecs import (
    CompressedImageCodec,
    CompressedNdarrayCodec,
    NdarrayCodec,
    ScalarCodec,
)
from petastream.compat.etl import dataset_metadata
from petastream.compat.unischema import UnischemaField
from petastream.errors import EncodingError

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "petastorm", "all_codecs")


def _field(dtype, shape, codec, name="f"):
    return UnischemaField(name, dtype, shape, codec, False)


def test_ndarray_codec_bytes_are_petastorm_s():
    """Re-encoding the arrays Petastorm stored gives Petastorm's bytes exactly (np.save)."""
    schema = dataset_metadata.get_schema(FIXTURE)
    table = pq.read_table(FIXTURE)
    checked = 0
    for field in schema.fields.values():
        if not isinstance(field.codec, NdarrayCodec):
            continue
        for stored in table.column(field.name).to_pylist():
            if stored is None:
                continue
            ours = NdarrayCodec().encode(field, field.codec.decode(field, stored))
            assert bytes(ours) == stored, field.name
            checked += 1
    assert checked >= 60


def test_compressed_ndarray_is_one_zip_member_arr():
    field = _field(np.float64, (None, 2), CompressedNdarrayCodec())
    value = np.arange(10.0).reshape(5, 2)
    encoded = CompressedNdarrayCodec().encode(field, value)
    with zipfile.ZipFile(io.BytesIO(bytes(encoded))) as z:
        assert z.namelist() == ["arr.npy"]
        assert z.getinfo("arr.npy").compress_type == zipfile.ZIP_DEFLATED
    assert np.array_equal(np.load(io.BytesIO(bytes(encoded)))["arr"], value)
    assert np.array_equal(CompressedNdarrayCodec().decode(field, encoded), value)


@pytest.mark.parametrize("codec", [NdarrayCodec(), CompressedNdarrayCodec()])
def test_ndarray_errors_are_petastorm_s(codec):
    field = _field(np.int32, (None, 3), codec, "pts")
    with pytest.raises(ValueError, match=r"Unexpected type of pts feature\. Expected ndarray of"):
        codec.encode(field, [1, 2, 3])
    with pytest.raises(ValueError, match=r"Unexpected type of pts feature\. Expected <class 'numpy.int32'>\. Got float64"):
        codec.encode(field, np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"Unexpected dimensions of pts feature\. Expected \(None, 3\)\. Got \(2, 4\)"):
        codec.encode(field, np.zeros((2, 4), np.int32))


def test_object_arrays_are_not_unpickled():
    field = _field(np.object_, (2,), NdarrayCodec())
    out = io.BytesIO()
    np.save(out, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="allow_pickle=False"):
        NdarrayCodec().decode(field, out.getvalue())


@pytest.mark.parametrize("shape,dtype,colour_type,depth", [
    ((6, 5, 3), np.uint8, 2, 8), ((6, 5), np.uint8, 0, 8), ((6, 5), np.uint16, 0, 16)])
@pytest.mark.usefixtures("image_decoder")
def test_png_round_trip_and_layout(shape, dtype, colour_type, depth):
    rng = np.random.default_rng(1)
    value = rng.integers(0, np.iinfo(dtype).max, size=shape, endpoint=True).astype(dtype)
    field = _field(dtype, shape, CompressedImageCodec("png"))
    encoded = bytes(field.codec.encode(field, value))
    assert encoded[:8] == b"\x89PNG\r\n\x1a\n"
    assert (encoded[24], encoded[25]) == (depth, colour_type)  # RGB order in the file, as Petastorm's
    decoded = field.codec.decode(field, encoded)
    assert decoded.dtype == dtype and np.array_equal(decoded, value) and decoded.flags.writeable


@pytest.mark.parametrize("mode,fmt,target", [
    ("RGB", "PNG", "RGB"), ("L", "PNG", "L"), ("1", "PNG", "L"), ("P", "PNG", "RGB"),
    ("RGB", "JPEG", "RGB"), ("L", "JPEG", "L")])
@pytest.mark.usefixtures("image_decoder")
def test_image_decode_each_mode_owned_and_as_converted(mode, fmt, target):
    """Grey and RGB files are decoded without Pillow's convert() (they are already in the mode
    returned); every mode still gives convert()'s pixels, from bytes or from a memoryview into a
    larger buffer (as the column decoder passes values), as a writable array of its own."""
    from PIL import Image

    rng = np.random.default_rng(3)
    rgb = Image.fromarray(rng.integers(0, 256, (9, 7, 3), dtype=np.uint8))
    image = rgb.convert(mode) if mode != "P" else rgb.quantize(16)
    out = io.BytesIO()
    image.save(out, format=fmt)
    data = out.getvalue()
    with Image.open(io.BytesIO(data)) as opened:
        assert opened.mode == mode
        expected = np.asarray(opened.convert(target))
    codec = CompressedImageCodec(fmt.lower())
    field = _field(np.uint8, expected.shape, codec)
    buffer = memoryview(b"xx" + data + b"yy")[2: 2 + len(data)]
    for value in (data, buffer):
        decoded = codec.decode(field, value)
        assert decoded.dtype == np.uint8 and np.array_equal(decoded, expected)
        assert decoded.flags.writeable and decoded.flags.owndata
        decoded[...] = 0  # its own pixels: the next decode is unaffected
    assert np.array_equal(codec.decode(field, data), expected)


@pytest.mark.usefixtures("image_decoder")
def test_a_column_of_images_decodes_as_each_value_does():
    """decode_values (the reader's decode threads) decodes a column of one shape straight into
    one stacked array, and a column of several shapes, nulls, or a bad file as each value
    decodes on its own (an object array; the error of the value that fails)."""
    from petastream.compat._decode import decode_values

    rng = np.random.default_rng(5)
    codec = CompressedImageCodec("png")
    field = _field(np.uint8, (None, None, 3), codec, "img")
    colour = [rng.integers(0, 256, (6, 5, 3), dtype=np.uint8) for _ in range(4)]
    stored = [bytes(codec.encode(field, v)) for v in colour]
    column = np.empty(4, dtype=object)
    column[:] = stored
    decoded = decode_values(field, column)
    assert decoded.shape == (4, 6, 5, 3) and decoded.dtype == np.uint8 and np.array_equal(decoded, np.stack(colour))
    grey = rng.integers(0, 256, (3, 4), dtype=np.uint8)
    mixed = [stored[0], None, stored[1], bytes(codec.encode(_field(np.uint8, (3, 4), codec), grey)), stored[2]]
    out = decode_values(field, mixed)
    assert out.dtype == object and out[1] is None
    for got, want in zip(out[[0, 2, 3, 4]], [colour[0], colour[1], grey, colour[2]]):
        assert np.array_equal(got, want) and got.flags.owndata and got.flags.writeable
    assert decode_values(field, [None, stored[0]])[0] is None
    assert decode_values(field, []).shape == (0,)
    with pytest.raises(Exception, match='"img"'):
        decode_values(field, [stored[0], b"not an image"])


def test_png_stores_rgb_not_bgr():
    from PIL import Image

    value = np.zeros((2, 2, 3), np.uint8)
    value[..., 0] = 255  # pure red
    field = _field(np.uint8, (2, 2, 3), CompressedImageCodec("png"))
    with Image.open(io.BytesIO(bytes(field.codec.encode(field, value)))) as image:
        assert image.getpixel((0, 0)) == (255, 0, 0)


@pytest.mark.usefixtures("image_decoder")
def test_jpeg_quality_and_lossy_round_trip():
    value = np.add.outer(np.arange(16), np.arange(16)).astype(np.uint8) * 7
    field = _field(np.uint8, (16, 16), CompressedImageCodec("jpeg", 95))
    encoded = field.codec.encode(field, value)
    assert bytes(encoded[:2]) == b"\xff\xd8"
    decoded = field.codec.decode(field, encoded)
    assert decoded.shape == (16, 16) and np.abs(decoded.astype(int) - value).max() <= 4
    assert str(field.codec) == "CompressedImageCodec('jpeg', 95)" and field.codec.image_codec == "jpeg"


def test_image_errors():
    codec = CompressedImageCodec("png")
    with pytest.raises(ValueError, match="Unexpected type of img feature, expected"):
        codec.encode(_field(np.uint8, (2, 2), codec, "img"), np.zeros((2, 2), np.int16))
    with pytest.raises(ValueError, match=r"Unexpected dimensions of img feature, expected \(2, 2\), got \(2, 3\)"):
        codec.encode(_field(np.uint8, (2, 2), codec, "img"), np.zeros((2, 3), np.uint8))
    with pytest.raises(ValueError, match="Supported dimensions are"):
        codec.encode(_field(np.uint8, (2, 2, 4), codec), np.zeros((2, 2, 4), np.uint8))
    jpeg = CompressedImageCodec("jpeg")
    with pytest.raises(EncodingError, match="'img'.*uint16 colour image is not supported"):
        jpeg.encode(_field(np.uint16, (2, 2, 3), jpeg, "img"), np.zeros((2, 2, 3), np.uint16))


def test_image_decode_refusals(image_decoder):
    from PIL import Image

    rgba = io.BytesIO()
    Image.fromarray(np.zeros((2, 2, 4), np.uint8)).save(rgba, format="PNG")
    codec = CompressedImageCodec("png")
    with pytest.raises(ValueError, match=r"Got \(2, 2, 4\)"):
        codec.decode(_field(np.uint8, (2, 2, 3), codec), rgba.getvalue())
    with pytest.raises(Exception, match="'img'"):
        codec.decode(_field(np.uint8, (2, 2, 3), codec, "img"), b"not an image")


def test_a_16_bit_colour_png_decodes_as_petastorm_with_opencv_and_is_refused_by_pillow(monkeypatch):
    cv2 = pytest.importorskip("cv2")
    from petastream.compat import _images

    rgb = np.arange(12, dtype=np.uint16).reshape(2, 2, 3) * 5000
    ok, png16 = cv2.imencode(".png", rgb[:, :, ::-1])  # as Petastorm writes: the channels reversed
    assert ok and (png16[24], png16[25]) == (16, 2)
    codec = CompressedImageCodec("png")
    field = _field(np.uint16, (2, 2, 3), codec, "img")
    for decoder in ("opencv", "pillow"):
        monkeypatch.setenv("PETASTREAM_IMAGE_DECODER", decoder)
        _images._opencv.cache_clear()
        if decoder == "opencv":
            decoded = codec.decode(field, png16.tobytes())
            assert decoded.dtype == np.uint16 and np.array_equal(decoded, rgb)
        else:  # Pillow would read 8 bits of it: refused rather than other pixels
            with pytest.raises(EncodingError, match="'img': a 16-bit colour PNG"):
                codec.decode(field, png16.tobytes())
    _images._opencv.cache_clear()


def test_a_16_bit_colour_png_is_written_as_opencv_writes_its_pixels(monkeypatch):
    """Petastorm writes (H, W, 3) uint16 PNGs with OpenCV; ours (Pillow cannot write them) is a
    16-bit RGB file of the same pixels, which OpenCV and Petastorm's reader decode to the array."""
    cv2 = pytest.importorskip("cv2")
    from petastream.compat import _images

    monkeypatch.setenv("PETASTREAM_IMAGE_DECODER", "opencv")
    _images._opencv.cache_clear()
    rgb = np.random.default_rng(3).integers(0, 65535, size=(7, 5, 3), endpoint=True).astype(np.uint16)
    codec = CompressedImageCodec("png")
    field = _field(np.uint16, (7, 5, 3), codec, "img")
    ours = bytes(codec.encode(field, rgb))
    assert (ours[24], ours[25]) == (16, 2)
    assert np.array_equal(cv2.imdecode(np.frombuffer(ours, np.uint8), cv2.IMREAD_UNCHANGED)[:, :, ::-1], rgb)
    assert np.array_equal(codec.decode(field, ours), rgb)
    _images._opencv.cache_clear()


def test_scalar_codec_encode_like_petastorm():
    def enc(spark_type, value, dtype=np.int32, shape=()):
        return ScalarCodec(spark_type).encode(_field(dtype, shape, None, "s"), value)

    assert enc(T.IntegerType(), np.int32(3)) == 3 and type(enc(T.IntegerType(), np.int32(3))) is int
    assert type(enc(T.DoubleType(), np.float32(0.5))) is float
    assert enc(T.BooleanType(), np.bool_(True)) is True
    assert enc(T.StringType(), "x") == "x"
    assert enc(T.LongType(), np.array(5)) == 5  # a 0-d array is a scalar
    with pytest.raises(TypeError, match="Expected a scalar as a value for field 's'"):
        enc(T.IntegerType(), [1])
    with pytest.raises(ValueError, match="The shape field of unischema_field 's' must be an empty tuple"):
        enc(T.IntegerType(), 1, shape=(1,))
    with pytest.raises(ValueError, match="Expected a string value for field s"):
        enc(T.StringType(), 3)


def test_scalar_codec_from_metadata_gives_real_spark_types():
    schema = dataset_metadata.get_schema(FIXTURE)
    assert schema.price.codec.spark_dtype() == T.DecimalType(10, 3)
    assert schema.name.codec.spark_dtype() == T.StringType()
    assert schema.id.codec.decode(schema.id, 5) == np.int64(5)
    assert type(schema.id.codec.decode(schema.id, 5)) is np.int64
