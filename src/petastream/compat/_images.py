"""PNG/JPEG bytes of ``CompressedImageCodec``: written with Pillow (the ``images`` extra), read
with OpenCV where it is installed (the ``opencv`` extra), else with Pillow.

Petastorm uses OpenCV: it writes an (H, W, 3) RGB array by handing OpenCV the channels reversed
(OpenCV expects BGR), so the file is an ordinary RGB image, and reads with
``cv2.IMREAD_UNCHANGED`` then reverses the channels back. What that yields, and so what this
module yields: (H, W) for a grey file (uint8, or uint16 for a 16-bit PNG), (H, W, 3) uint8 RGB for a
colour or palette file; a file with an alpha channel is refused, as Petastorm refuses it.

Pillow cannot write a 16-bit colour PNG, which OpenCV (and so Petastorm) writes for an
(H, W, 3) uint16 array: :func:`_png_rgb16` writes that file itself (one IDAT of unfiltered
big-endian scanlines, zlib), which decodes to the same pixels as Petastorm's.

Reading with OpenCV, as Petastorm does, gives its pixels exactly (a JPEG decoder's rounding
included; 16-bit colour PNG as uint16, which Pillow cannot read) and is faster: one C call that
releases the interpreter lock, where Pillow's decode runs Python around its C (a 64x64 PNG
decodes 1.22x as fast, and decode threads run side by side). ``PETASTREAM_IMAGE_DECODER``
(``opencv`` or ``pillow``) picks one; by default OpenCV when it imports.
"""

from __future__ import annotations

import functools
import os
import struct
import zlib
from collections.abc import Sequence
from io import BytesIO
from typing import Any

import numpy as np

from petastream._extras import require
from petastream.errors import EncodingError

__all__ = ["encode", "decode", "decode_many"]

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_SHAPES = "Unexpected image dimensions. Supported dimensions are (H, W) or (H, W, 3). Got {}"


def _image_module() -> Any:
    return require("PIL.Image", "CompressedImageCodec")


DECODERS = ("opencv", "pillow")


@functools.cache
def _opencv() -> Any | None:
    """OpenCV's module where it imports (and is not turned off), else None."""
    choice = os.environ.get("PETASTREAM_IMAGE_DECODER", "").lower()
    if choice and choice not in DECODERS:
        raise EncodingError(f"PETASTREAM_IMAGE_DECODER={choice!r}: use one of {DECODERS}")
    if choice == "pillow":
        return None
    try:
        import cv2
    except ImportError:
        if choice == "opencv":
            return require("cv2", "PETASTREAM_IMAGE_DECODER=opencv")
        return None
    return cv2


def decoder() -> str:
    """The decoder :func:`decode` uses: ``"opencv"`` or ``"pillow"``."""
    return "opencv" if _opencv() is not None else "pillow"


def encode(value: np.ndarray, image_codec: str, quality: int, field: str) -> bytes:
    """The ``image_codec`` ('png' or 'jpeg') file of an (H, W) or (H, W, 3) array."""
    if value.ndim not in (2, 3) or (value.ndim == 3 and value.shape[2] != 3):
        raise ValueError(_SHAPES.format(value.shape))
    if value.dtype != np.uint8 and not (value.dtype == np.uint16 and image_codec == "png"):
        raise EncodingError(
            f"field {field!r}: CompressedImageCodec({image_codec!r}) of a {value.dtype} "
            f"{'grey' if value.ndim == 2 else 'colour'} image is not supported here (uint8 images, and "
            "16-bit PNG); store it with NdarrayCodec or CompressedNdarrayCodec")
    if value.dtype == np.uint16 and value.ndim == 3:
        return _png_rgb16(value)
    Image = _image_module()
    image = Image.fromarray(np.ascontiguousarray(value))
    out = BytesIO()
    if image_codec == "png":
        image.save(out, format="PNG")
    elif image_codec in ("jpeg", "jpg"):
        image.save(out, format="JPEG", quality=int(quality))
    else:
        raise EncodingError(f"field {field!r}: image_codec {image_codec!r} is not supported; "
                            "use 'png' or 'jpeg'")
    return out.getvalue()


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _png_rgb16(value: np.ndarray) -> bytes:
    """A 16-bit RGB PNG of an (H, W, 3) uint16 array (colour type 2, no interlace)."""
    height, width = value.shape[:2]
    rows = np.ascontiguousarray(value, dtype=">u2").view(np.uint8).reshape(height, width * 6)
    # each scanline starts with its filter type: 0 (none)
    scanlines = np.concatenate([np.zeros((height, 1), np.uint8), rows], axis=1)
    header = struct.pack(">IIBBBBB", width, height, 16, 2, 0, 0, 0)
    return (_PNG_MAGIC + _png_chunk(b"IHDR", header) + _png_chunk(b"IDAT", zlib.compress(scanlines.tobytes(), 6))
            + _png_chunk(b"IEND", b""))


def _png_depth_and_colour(data: bytes | memoryview) -> tuple[int, int] | None:
    """(bit depth, colour type) from a PNG's IHDR chunk, or None if ``data`` is not a PNG."""
    if bytes(data[:8]) != _PNG_MAGIC or len(data) < 26:
        return None
    return data[24], data[25]


def decode(data: bytes | memoryview, field: str) -> np.ndarray:
    """The array OpenCV's decode (as Petastorm calls it) gives for a PNG/JPEG file."""
    cv2 = _opencv()
    if cv2 is not None:
        return _decode_opencv(cv2, data, field)
    return _decode_pillow(data, field)


def _decode_opencv(cv2: Any, data: bytes | memoryview, field: str) -> np.ndarray:
    image = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), cv2.IMREAD_UNCHANGED)
    if image is None:
        raise EncodingError(f"field {field!r}: the bytes are not an image OpenCV can decode")
    if image.ndim == 2:
        return image
    if image.ndim == 3 and image.shape[2] == 3:
        # BGR -> RGB, owned, as Petastorm's (cvtColor: a tenth of numpy's strided copy of [..., ::-1])
        return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
    raise ValueError(_SHAPES.format(image.shape))


def decode_many(values: Sequence[bytes | memoryview | None], field: str) -> np.ndarray:
    """Each value's :func:`decode` (None stays None), as one ``(n, *shape)`` array when all of
    them are images of one shape and dtype, else an object array of per-value arrays.

    The images are decoded straight into the stacked array (OpenCV's channel swap writes
    there), one decoder call and no Python object per value beyond OpenCV's: this is the
    work of a decode thread, and what it runs between the calls that release the interpreter
    lock is what keeps threads from decoding side by side."""
    n = len(values)
    first = values[0] if n else None
    if first is None:
        return _objects([None if v is None else decode(v, field) for v in values])
    head = decode(first, field)
    out = np.empty((n, *head.shape), head.dtype)
    out[0] = head
    cv2 = _opencv()
    for i in range(1, n):
        value = values[i]
        if value is None or not (_decode_opencv_into(cv2, value, out[i]) if cv2 is not None
                                 else _decode_pillow_into(value, field, out[i])):
            # another shape, a null, or a file decode refuses: each of the rest on its own
            return _objects([*(a.copy() for a in out[:i]),
                             *(None if v is None else decode(v, field) for v in values[i:])])
    return out


def _decode_opencv_into(cv2: Any, data: bytes | memoryview, out: np.ndarray) -> bool:
    """Decode ``data`` into ``out`` (False, ``out`` untouched: not an image of its shape and dtype)."""
    image = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), cv2.IMREAD_UNCHANGED)
    if image is None or image.shape != out.shape or image.dtype != out.dtype:
        return False
    if image.ndim == 3:  # (H, W, 3): BGR, swapped into out
        cv2.cvtColor(image, cv2.COLOR_BGR2RGB, dst=out)
    else:
        out[...] = image
    return True


def _decode_pillow_into(data: bytes | memoryview, field: str, out: np.ndarray) -> bool:
    image = _decode_pillow(data, field)
    if image.shape != out.shape or image.dtype != out.dtype:
        return False
    out[...] = image
    return True


def _objects(values: list[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):  # one by one: numpy would broadcast equal-shape arrays
        out[i] = v
    return out


def _decode_pillow(data: bytes | memoryview, field: str) -> np.ndarray:
    png = _png_depth_and_colour(data)
    if png is not None and png[0] == 16 and png[1] != 0:
        # Pillow reads 16-bit colour PNG as 8-bit: refuse rather than return other pixels.
        raise EncodingError(f"field {field!r}: a 16-bit colour PNG cannot be decoded without "
                            "losing precision here (Pillow reads it as 8-bit); re-encode the images "
                            "as 8-bit or store them with NdarrayCodec")
    Image = _image_module()
    try:
        opened = Image.open(BytesIO(data))
    except Image.UnidentifiedImageError as e:
        raise EncodingError(f"field {field!r}: the bytes are not an image Pillow can decode ({e})") from e
    with opened as image:
        mode = image.mode
        if mode in ("RGBA", "LA", "PA", "RGBa", "La") or (mode == "P" and "transparency" in image.info):
            raise ValueError(_SHAPES.format((image.height, image.width, 4)))
        if mode in ("L", "RGB"):
            # Already what is returned: converting would copy the pixels (about a tenth of the
            # decode of a small PNG), for nothing.
            return np.array(image)  # writable and owned, as OpenCV's result is
        if mode == "1":
            arr = np.asarray(image.convert("L"))
        elif mode.startswith("I;16") or (mode == "I" and png is not None and png[0] == 16):
            arr = np.asarray(image).astype(np.uint16)
        elif mode in ("P", "CMYK", "YCbCr"):
            arr = np.asarray(image.convert("RGB"))
        else:
            raise EncodingError(f"field {field!r}: image mode {mode!r} is not supported; "
                                "CompressedImageCodec stores grey or RGB images")
    return np.array(arr)  # writable and owned, as OpenCV's result is
