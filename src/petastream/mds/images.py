"""Image encodings (need Pillow: the ``images`` extra).

Layouts (Mosaic's):

* ``pil``: ``uint32 width, uint32 height, uint32 len(mode)``, the mode in ASCII, then
  ``img.tobytes()`` (raw pixels in PIL's layout for that mode).
* ``jpeg``: a ``JpegImageFile`` whose source file still exists is stored as that file's bytes;
  any other image is saved as JPEG with PIL defaults (quality 75).
* ``png``: ``img.save(buf, 'PNG')``.
* ``list[pil|jpeg|png]``: ``uint32 0`` (reserved), ``uint32 n``, ``uint32 size[n]``, then the
  n element encodings back to back.
* ``jpeg_array`` (alias ``jpegarray``): ``uint32 n``, ``uint32 size[n]``, then n JPEG files
  that are already encoded (any bytes-like: ``bytes``, ``bytearray``, ``memoryview``, as Mosaic
  takes); decodes to a list of images. n == 0 is refused when written: Mosaic writes it but
  neither reader can decode it.
"""

from __future__ import annotations

import os
from io import BytesIO
from types import ModuleType
from typing import Any

import numpy as np

from petastream.errors import EncodingError, MissingExtraError
from petastream.mds.encodings import Encoding, wrong_type

__all__ = ["IMAGE_ENCODINGS"]


def _pil() -> ModuleType:  # PIL.Image
    try:
        from PIL import Image
    except ImportError as e:
        raise MissingExtraError(
            "image encodings need Pillow; install petastream[images] (pip install Pillow)"
        ) from e
    return Image


def _check_image(value: Any, name: str) -> Any:
    Image = _pil()
    if not isinstance(value, Image.Image):
        raise wrong_type(name, Image.Image, value, "pass a PIL image (Image.open, Image.fromarray)")
    return value


class PIL(Encoding):
    name = "pil"

    def encode(self, value: Any) -> bytes:
        img = _check_image(value, self.name)
        mode = img.mode.encode("ascii")
        return np.array([img.width, img.height, len(mode)], "<u4").tobytes() + mode + img.tobytes()

    def decode(self, data: bytes | memoryview) -> Any:
        width, height, mode_len = np.frombuffer(data[:12], "<u4")
        mode = bytes(data[12 : 12 + mode_len]).decode("ascii")
        return _pil().frombytes(mode, (int(width), int(height)), bytes(data[12 + mode_len :]))


class JPEG(Encoding):
    name = "jpeg"

    def encode(self, value: Any) -> bytes:
        img = _check_image(value, self.name)
        from PIL.JpegImagePlugin import JpegImageFile

        filename = getattr(img, "filename", None)
        if isinstance(img, JpegImageFile) and filename and os.path.exists(filename):
            with open(filename, "rb") as f:
                return f.read()
        buf = BytesIO()
        img.save(buf, format="JPEG")
        return buf.getvalue()

    def decode(self, data: bytes | memoryview) -> Any:
        return _pil().open(BytesIO(bytes(data)))


class PNG(Encoding):
    name = "png"

    def encode(self, value: Any) -> bytes:
        buf = BytesIO()
        _check_image(value, self.name).save(buf, format="PNG")
        return buf.getvalue()

    def decode(self, data: bytes | memoryview) -> Any:
        return _pil().open(BytesIO(bytes(data)))


def _pack_list(parts: list[bytes], reserved: bool) -> bytes:
    head = [0] if reserved else []
    return np.array([*head, len(parts), *map(len, parts)], "<u4").tobytes() + b"".join(parts)


def _unpack_list(data: bytes | memoryview, reserved: bool) -> list[memoryview]:
    view = memoryview(bytes(data))
    pos = 4 if reserved else 0
    if len(view) < pos + 4:
        raise EncodingError(f"image list: {len(view)} bytes is too short for its header")
    (n,) = np.frombuffer(view[pos : pos + 4], "<u4")
    if len(view) < pos + 4 + 4 * int(n):
        raise EncodingError(f"image list: {len(view)} bytes is too short for {int(n)} image sizes")
    sizes = np.frombuffer(view[pos + 4 : pos + 4 + 4 * int(n)], "<u4")
    pos += 4 + 4 * int(n)
    out = []
    for size in sizes:
        out.append(view[pos : pos + int(size)])
        pos += int(size)
    if pos != len(view):
        raise EncodingError(f"image list: element sizes add up to {pos} bytes, value has {len(view)}")
    return out


class ImageList(Encoding):
    def __init__(self, element: Encoding):
        self.element = element
        self.name = f"list[{element.name}]"

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, (list, tuple)):
            raise wrong_type(self.name, list, value, "pass a list of PIL images")
        return _pack_list([self.element.encode(v) for v in value], reserved=True)

    def decode(self, data: bytes | memoryview) -> list[Any]:
        return [self.element.decode(p) for p in _unpack_list(data, reserved=True)]


class JPEGArray(Encoding):
    def __init__(self, name: str):
        self.name = name

    def encode(self, value: Any) -> bytes:
        fix = "pass a list of JPEG files as bytes (or use 'list[jpeg]' for PIL images)"
        if not isinstance(value, (list, tuple)):
            raise wrong_type(self.name, list, value, fix)
        for i, v in enumerate(value):
            if not isinstance(v, (bytes, bytearray, memoryview)):
                raise wrong_type(self.name, f"{bytes} (item {i})", v, fix)
        if not value:
            raise EncodingError(f"encoding {self.name!r}: a value needs at least one image (an empty "
                                "list is written by Mosaic but cannot be decoded by it or us)")
        return _pack_list([bytes(v) for v in value], reserved=False)

    def decode(self, data: bytes | memoryview) -> list[Any]:
        parts = _unpack_list(data, reserved=False)
        if not parts:
            raise EncodingError(f"encoding {self.name!r}: a value holds no images")
        try:
            return [JPEG().decode(p) for p in parts]
        except Exception as e:  # PIL raises its own UnidentifiedImageError, OSError...
            raise EncodingError(f"encoding {self.name!r}: corrupt JPEG data: {e}") from e


IMAGE_ENCODINGS: dict[str, Encoding] = {"pil": PIL(), "jpeg": JPEG(), "png": PNG()}
for _name in ("pil", "jpeg", "png"):
    IMAGE_ENCODINGS[f"list[{_name}]"] = ImageList(IMAGE_ENCODINGS[_name])
IMAGE_ENCODINGS["jpeg_array"] = JPEGArray("jpeg_array")
IMAGE_ENCODINGS["jpegarray"] = JPEGArray("jpegarray")
