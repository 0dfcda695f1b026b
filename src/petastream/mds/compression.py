"""Shard compression: the families and levels Mosaic Streaming accepts.

``compression`` in an index is stored exactly as given (``"zstd"`` or ``"zstd:7"``); the file
extension is the family name alone (``shard.00000.mds.zstd``) and decompression ignores the level.

| family | levels | default | wire format |
|--------|--------|---------|-------------|
| zstd   | 1..22  | 3       | one zstd frame with the content size in its header |
| gz     | 0..9   | 9       | RFC 1952 gzip (embeds a timestamp, so not byte-reproducible) |
| bz2    | 1..9   | 9       | bzip2 stream |
| br     | 0..11  | 11      | raw brotli stream (extra ``compression``: ``brotli``) |
| snappy | -      | -       | raw snappy *block* format, not the framing format (``python-snappy``) |
"""

from __future__ import annotations

import bz2
import gzip
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from petastream.errors import FormatError, MissingExtraError

__all__ = ["Codec", "get_codec", "parse_compression", "compress", "decompress", "FAMILIES"]


@dataclass(frozen=True)
class _Family:
    levels: range | None  # None: the family takes no level
    default: int | None
    compress: Callable[[bytes, int | None], bytes]
    decompress: Callable[[bytes], bytes]


def _zstd_compress(data: bytes, level: int | None) -> bytes:
    import zstandard

    # write_content_size=True matches python-zstd's single frame with the size in the header.
    return zstandard.ZstdCompressor(level=level if level is not None else 3,
                                    write_content_size=True).compress(data)


def _zstd_decompress(data: bytes) -> bytes:
    import zstandard

    # decompressobj copes with frames that lack a content size and with several frames,
    # both of which other writers produce.
    out = []
    dctx = zstandard.ZstdDecompressor()
    while data:
        obj = dctx.decompressobj()
        out.append(obj.decompress(data))
        data = obj.unused_data
    return b"".join(out)


def _gz_compress(data: bytes, level: int | None) -> bytes:
    return gzip.compress(data, level if level is not None else 9)


def _bz2_compress(data: bytes, level: int | None) -> bytes:
    return bz2.compress(data, level if level is not None else 9)


def _brotli() -> ModuleType:
    try:
        import brotli
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise MissingExtraError(
            "compression 'br' needs the brotli package; install petastream[compression] "
            "(pip install brotli)"
        ) from e
    return brotli


def _snappy() -> ModuleType:
    try:
        import snappy
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise MissingExtraError(
            "compression 'snappy' needs the python-snappy package; install "
            "petastream[compression] (pip install python-snappy)"
        ) from e
    return snappy


FAMILIES: dict[str, _Family] = {
    "zstd": _Family(range(1, 23), 3, _zstd_compress, _zstd_decompress),
    "gz": _Family(range(0, 10), 9, _gz_compress, gzip.decompress),
    "bz2": _Family(range(1, 10), 9, _bz2_compress, bz2.decompress),
    "br": _Family(
        range(0, 12),
        11,
        lambda d, lvl: _brotli().compress(d, quality=lvl),
        lambda d: _brotli().decompress(d),
    ),
    "snappy": _Family(
        None, None, lambda d, _lvl: _snappy().compress(d), lambda d: _snappy().decompress(d)
    ),
}


@dataclass(frozen=True)
class Codec:
    """A parsed ``compression`` setting: ``family`` is also the shard file extension."""

    name: str  # as given, stored in the index
    family: str
    level: int | None

    @property
    def extension(self) -> str:
        return self.family

    def compress(self, data: bytes) -> bytes:
        return FAMILIES[self.family].compress(data, self.level)

    def decompress(self, data: bytes) -> bytes:
        return FAMILIES[self.family].decompress(data)


def _valid_names() -> str:
    names = []
    for fam, spec in FAMILIES.items():
        names.append(fam if spec.levels is None else f"{fam}[:{spec.levels.start}..{spec.levels.stop - 1}]")
    return ", ".join(names)


def parse_compression(name: str | None) -> Codec | None:
    """Parse ``"zstd"``/``"zstd:7"``/... into a :class:`Codec`; ``None`` means no compression."""
    if name is None:
        return None
    if not isinstance(name, str):
        raise FormatError(f"compression must be a string or None, got {name!r}")
    family, sep, level_text = name.partition(":")
    spec = FAMILIES.get(family)
    if spec is None:
        raise FormatError(f"unknown compression {name!r}; valid: {_valid_names()}")
    if not sep:
        return Codec(name, family, spec.default)
    if spec.levels is None or not level_text.isdigit() or int(level_text) not in spec.levels:
        raise FormatError(f"invalid compression level in {name!r}; valid: {_valid_names()}")
    return Codec(name, family, int(level_text))


get_codec = parse_compression


def compress(name: str, data: bytes) -> bytes:
    codec = parse_compression(name)
    assert codec is not None
    return codec.compress(data)


def decompress(name: str, data: bytes) -> bytes:
    codec = parse_compression(name)
    assert codec is not None
    return codec.decompress(data)
