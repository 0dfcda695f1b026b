"""Compression families and hash algorithms."""

from __future__ import annotations

import hashlib

import pytest

from petastream.errors import FormatError
from petastream.mds.compression import FAMILIES, parse_compression
from petastream.mds.hashing import HASH_ALGORITHMS, check_hashes, hexdigest

DATA = b"petastream " * 1000


@pytest.mark.parametrize("name", ["zstd", "zstd:1", "zstd:22", "gz", "gz:0", "bz2:1", "br", "br:0", "snappy"])
def test_round_trip_and_extension(name):
    codec = parse_compression(name)
    assert codec.extension == name.split(":")[0]
    packed = codec.compress(DATA)
    assert codec.decompress(packed) == DATA
    if not name.endswith(":0"):  # level 0 stores without compressing
        assert len(packed) < len(DATA)


def test_default_levels():
    assert {f: FAMILIES[f].default for f in FAMILIES} == {"zstd": 3, "gz": 9, "bz2": 9, "br": 11, "snappy": None}


def test_zstd_frame_carries_the_content_size():
    import zstandard

    frame = parse_compression("zstd:7").compress(DATA)
    assert zstandard.frame_content_size(frame) == len(DATA)


def test_zstd_reads_frames_without_size_and_multiple_frames():
    import zstandard

    cobj = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    no_size = cobj.compress(DATA) + cobj.flush()
    codec = parse_compression("zstd")
    assert codec.decompress(no_size) == DATA
    assert codec.decompress(codec.compress(b"ab") + codec.compress(b"cd")) == b"abcd"


@pytest.mark.parametrize("bad", ["lz4", "zstd:0", "snappy:1", "gz:x"])
def test_bad_names(bad):
    with pytest.raises(FormatError, match="compression"):
        parse_compression(bad)


def test_hash_set_and_known_digests():
    assert {"md5", "sha1", "sha256", "blake2b", "sha3_256", "xxh32", "xxh64", "xxh3_64", "xxh3_128", "xxh128"} <= set(HASH_ALGORITHMS)
    assert not [h for h in HASH_ALGORITHMS if h.startswith("shake")]
    assert hexdigest("xxh64", b"abc") == "44bc2cf5ad770999"
    assert hexdigest("sha1", b"abc") == hashlib.sha1(b"abc").hexdigest()
    for algo in HASH_ALGORITHMS:
        assert hexdigest(algo, b"abc") == hexdigest(algo, b"abc").lower()


def test_hash_list_must_be_sorted():
    assert check_hashes(["sha1", "xxh64"]) == ["sha1", "xxh64"]
    with pytest.raises(FormatError, match=r"pass \['sha1', 'xxh64'\]"):
        check_hashes(["xxh64", "sha1"])
