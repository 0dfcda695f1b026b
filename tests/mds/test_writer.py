"""The writer: the exact size rule, bulk input forms, atomicity, errors."""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pytest

import petastream
from petastream.errors import DatasetExistsError, EncodingError, FormatError
from petastream.mds.writer import MDSWriter, write_mds


def _index(path) -> list[dict]:
    with open(os.path.join(path, "index.json")) as f:
        return json.load(f)["shards"]


def test_shard_count_follows_the_size_rule(tmp_path):
    columns = {"x": "int64", "y": "float32"}
    limit = 1000
    with MDSWriter(columns=columns, out=str(tmp_path), size_limit=limit) as w:
        w.write_columns({"x": np.arange(500), "y": np.zeros(500, np.float32)})
    config = json.dumps(w.config, sort_keys=True)
    per_shard = (limit - (8 + len(config))) // (12 + 4)
    shards = _index(tmp_path)
    assert [s["samples"] for s in shards[:-1]] == [per_shard] * (len(shards) - 1)
    assert sum(s["samples"] for s in shards) == 500
    assert all(s["raw_data"]["bytes"] <= limit for s in shards)
    assert len(shards) == -(-500 // per_shard)


def test_oversized_first_sample_makes_an_empty_shard(tmp_path):
    with MDSWriter(columns={"b": "bytes"}, out=str(tmp_path), size_limit=200) as w:
        w.write({"b": b"x" * 500})
        w.write({"b": b"y" * 10})
    assert [s["samples"] for s in _index(tmp_path)] == [0, 1, 1]
    ds = petastream.open(str(tmp_path))
    assert [ds[i]["b"][:1] for i in range(2)] == [b"x", b"y"]


@pytest.mark.parametrize("value, parsed", [("1kb", 1024), ("1.5mb", 1536 * 1024), ("100", 100), (None, None), (0, None)])
def test_size_limit_forms(tmp_path, value, parsed):
    w = MDSWriter(columns={"x": "int"}, out=str(tmp_path), size_limit=value)
    assert w.size_limit == parsed


def test_size_limit_must_fit_uint32(tmp_path):
    with pytest.raises(FormatError, match=r"`size_limit` must be less than 2\*\*32, instead, found as 4294967296"):
        MDSWriter(columns={"x": "int"}, out=str(tmp_path), size_limit=1 << 32)


@pytest.mark.parametrize("api", ["MDSWriter", "write_mds"])
def test_writers_record_xxh3_64_by_default(tmp_path, api):
    """Issue #29.5: Mosaic's writer API records no hashes unless asked; ours records xxh3_64,
    as materialize does, so a damaged shard is caught on read (raw and compressed files)."""
    out = str(tmp_path / "ds")
    if api == "MDSWriter":
        with MDSWriter(columns={"x": "int"}, out=out, compression="zstd", size_limit=200) as w:
            for i in range(20):
                w.write({"x": i})
    else:
        write_mds({"x": np.arange(20)}, out, size_limit=200)
    shards = _index(out)
    assert len(shards) > 1
    for s in shards:
        assert s["hashes"] == ["xxh3_64"]
        for key in ("raw_data", "zip_data"):
            assert set(s[key]["hashes"]) == {"xxh3_64"}
    ds = petastream.open(out, validate_hash="xxh3_64")
    assert [int(v) for v in ds.read(np.arange(20))["x"]] == list(range(20))


@pytest.mark.parametrize("api, off", [("write_mds", []), ("write_mds", ()), ("MDSWriter", []),
                                     ("MDSWriter", None)])
def test_hashes_opt_out(tmp_path, api, off):
    """``hashes=[]`` records none; so does MDSWriter's explicit ``hashes=None``, Mosaic's
    meaning of it (write_mds's None is materialize's: the default, xxh3_64)."""
    out = str(tmp_path / "ds")
    if api == "write_mds":
        write_mds({"x": np.arange(5)}, out, compression=None, hashes=off)
    else:
        with MDSWriter(columns={"x": "int"}, out=out, hashes=off) as w:
            w.write({"x": 1})
    (shard,) = _index(out)
    assert shard["hashes"] == [] and shard["raw_data"]["hashes"] == {}


def test_hashes_must_be_sorted_and_known(tmp_path):
    with pytest.raises(FormatError, match="sorted"):
        MDSWriter(columns={"x": "int"}, out=str(tmp_path), hashes=["xxh64", "sha1"])
    with pytest.raises(FormatError, match="unknown hash algorithm 'crc'"):
        MDSWriter(columns={"x": "int"}, out=str(tmp_path), hashes=["crc"])


def test_unknown_compression_lists_the_valid_ones(tmp_path):
    with pytest.raises(FormatError, match="unknown compression 'lz4'; valid: zstd"):
        MDSWriter(columns={"x": "int"}, out=str(tmp_path), compression="lz4")
    with pytest.raises(FormatError, match="invalid compression level"):
        MDSWriter(columns={"x": "int"}, out=str(tmp_path), compression="zstd:40")


def test_non_empty_out_needs_exist_ok(tmp_path):
    write_mds({"x": np.arange(3)}, str(tmp_path))
    with pytest.raises(DatasetExistsError, match="exist_ok=True"):
        write_mds({"x": np.arange(3)}, str(tmp_path))
    write_mds({"x": np.arange(5)}, str(tmp_path), exist_ok=True)
    assert len(petastream.open(str(tmp_path))) == 5


def test_failure_inside_the_block_leaves_no_dataset(tmp_path):
    out = tmp_path / "ds"
    with pytest.raises(RuntimeError, match="boom"):
        with MDSWriter(columns={"x": "int64"}, out=str(out), size_limit=100) as w:
            w.write_columns({"x": np.arange(100)})
            raise RuntimeError("boom")
    assert not (out / "index.json").exists()
    assert not [n for n in os.listdir(out) if n.startswith("shard.")]


def test_mixed_per_sample_and_bulk_writes_give_identical_bytes(tmp_path):
    cols = {"s": "str", "v": "ndarray:float32", "i": "int32", "f": "ndarray:uint8:4"}
    rng = np.random.default_rng(1)
    rows = [{"s": f"r{i}" * (i % 3), "v": rng.random(1 + i % 5).astype(np.float32),
             "i": np.int32(i), "f": np.full(4, i, np.uint8)} for i in range(50)]
    with MDSWriter(columns=cols, out=str(tmp_path / "a"), size_limit=400, compression="zstd") as w:
        for r in rows:
            w.write(r)
    table = pa.table({
        "s": [r["s"] for r in rows],
        "v": pa.array([r["v"] for r in rows], type=pa.list_(pa.float32())),
        "i": pa.array([int(r["i"]) for r in rows], type=pa.int32()),
        "f": pa.array([r["f"] for r in rows], type=pa.list_(pa.uint8(), 4)),
    })
    with MDSWriter(columns=cols, out=str(tmp_path / "b"), size_limit=400, compression="zstd") as w:
        for r in rows[:7]:
            w.write(r)
        w.write_columns(table.slice(7, 20))
        w.write_columns(table.slice(27).to_batches()[0])
    for name in os.listdir(tmp_path / "a"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_arrow_binary_values_are_taken_as_already_encoded(tmp_path):
    from decimal import Decimal

    cols = {"d": "str_decimal", "j": "json", "v": "ndarray:int16", "i": "int32"}
    rows = [{"d": Decimal(i).scaleb(-9 + i % 12), "j": {"k": [i, "x" * (i % 4)]},
             "v": np.arange(1 + i % 3, dtype=np.int16), "i": np.int32(i)} for i in range(40)]
    with MDSWriter(columns=cols, out=str(tmp_path / "a"), size_limit=500) as w:
        for r in rows:
            w.write(r)
    encoded = {
        "d": pa.array([str(r["d"]).encode() for r in rows], pa.large_binary()),
        "j": pa.chunked_array([[json.dumps(r["j"]).encode() for r in rows]], pa.binary()),
        # ndarray:int16: a header byte (ndim 1 << 2 | shape code 0 = uint8 dims), the dim, values
        "v": pa.array([bytes([4, len(r["v"])]) + r["v"].tobytes() for r in rows], pa.binary()),
        "i": np.arange(40, dtype=np.int32),
    }
    with MDSWriter(columns=cols, out=str(tmp_path / "b"), size_limit=500) as w:
        w.write_columns(encoded)
    for name in os.listdir(tmp_path / "a"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    got = petastream.open(str(tmp_path / "b"))
    assert [got[i]["d"] for i in range(40)] == [r["d"] for r in rows]


def test_write_mds_infers_encodings_from_arrow_and_numpy(tmp_path):
    table = pa.table({
        "id": pa.array(range(4), pa.int64()),
        "flag": [True, False, True, True],
        "name": ["a", "bb", "", "d"],
        "blob": [b"1", b"", b"22", b"3"],
        "vec": pa.array([[1.0, 2.0]] * 4, type=pa.list_(pa.float32(), 2)),
        "ragged": pa.array([[1], [1, 2], [3], [4, 5, 6]], type=pa.list_(pa.int64())),
    })
    write_mds(table, str(tmp_path / "t"))
    ds = petastream.open(str(tmp_path / "t"))
    assert ds.columns == {"blob": "bytes", "flag": "uint8", "id": "int64", "name": "str",
                          "ragged": "ndarray:int64", "vec": "ndarray:float32:2"}
    cols = ds.read_shard(0)
    assert list(cols["name"]) == ["a", "bb", "", "d"]
    assert list(cols["ragged"][3]) == [4, 5, 6]
    write_mds({"x": np.ones((3, 2, 2), np.float16), "y": np.arange(3)}, str(tmp_path / "n"))
    assert petastream.open(str(tmp_path / "n")).columns == {"x": "ndarray:float16:2,2", "y": "int64"}


@pytest.mark.parametrize(
    "columns, data, match",
    [
        ({"x": "int32"}, {"x": np.array([1.5])}, "column 'x': cannot store float64 values as int32"),
        ({"x": "int8"}, {"x": np.array([1000])}, r"column 'x': values in \[1000, 1000\] do not fit int8"),
        ({"x": "str"}, {"x": pa.array(["a", None])}, "1 null value"),
        ({"x": "int64"}, {"x": pa.array([1, None])}, "column 'x': 1 null value"),
        ({"x": "ndarray:float32:3"}, {"x": np.zeros((2, 2), np.float32)}, r"expected shape \(2, 3\)"),
        ({"x": "int64"}, {"y": np.arange(2)}, r"missing \['x'\], unexpected \['y'\]"),
        ({"x": "ndarray:int64:2"}, {"x": pa.array([[1, 2], [3], [4, 5, 6]])}, "row 1 has 1 values; ndarray:int64:2 needs exactly 2"),
    ],
)
def test_bad_bulk_input_names_the_column(tmp_path, columns, data, match):
    with pytest.raises((EncodingError, FormatError), match=match):
        with MDSWriter(columns=columns, out=str(tmp_path)) as w:
            w.write_columns(data)


def test_per_sample_error_names_the_column(tmp_path):
    with pytest.raises(EncodingError, match="column 's': encoding 'str': data should be of type <class 'str'>"):
        with MDSWriter(columns={"s": "str"}, out=str(tmp_path)) as w:
            w.write({"s": 3})


def test_writes_to_memory_filesystem():
    url = "memory://petastream-test/ds"
    write_mds({"x": np.arange(10), "s": np.array([str(i) for i in range(10)], dtype=object)},
              url, size_limit=200, exist_ok=True)
    ds = petastream.open(url)
    assert ds.num_shards > 1
    assert list(ds.read(np.arange(10)[::-1])["x"]) == list(range(9, -1, -1))


def _payloads(kind: str, n: int, seed: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    if kind == "random":  # what JPEG bytes or hashes look like to a compressor
        return [rng.bytes(200) for _ in range(n)]
    return [(b"label-%d;" % (i % 7)) * 20 for i in range(n)]  # text: compresses well


@pytest.mark.parametrize("codec", ["zstd:1", "gz:1", "snappy"])
def test_min_compression_saving_stores_incompressible_shards_as_mosaic_stores_uncompressed(tmp_path, codec):
    """Shards of random bytes go uncompressed (compression null, header included: the same
    bytes as a write with compression=None), shards of text compressed; the reader reads both,
    and the values come back exactly."""
    from petastream.mds.dataset import MDSDataset

    kinds = ["random", "text", "random", "text"]
    blocks = [_payloads(k, 300, seed) for seed, k in enumerate(kinds)]
    ids = np.arange(1200)
    out = tmp_path / "mixed"
    with MDSWriter(columns={"id": "int64", "b": "bytes"}, out=str(out), compression=codec,
                   size_limit=None, min_compression_saving=0.1) as w:
        for i, block in enumerate(blocks):
            w.write_columns({"id": ids[300 * i:300 * (i + 1)], "b": block})
            w.flush()
    shards = _index(out)
    family = codec.split(":")[0]
    assert [s["compression"] for s in shards] == [None, codec, None, codec]
    assert [s["zip_data"] is None for s in shards] == [True, False, True, False]
    assert sorted(os.listdir(out)) == sorted(["index.json", "shard.00000.mds",
                                              f"shard.00001.mds.{family}", "shard.00002.mds",
                                              f"shard.00003.mds.{family}"])
    plain = tmp_path / "plain"
    with MDSWriter(columns={"id": "int64", "b": "bytes"}, out=str(plain), compression=None, size_limit=None) as w:
        w.write_columns({"id": ids[:300], "b": blocks[0]})
    assert (out / "shard.00000.mds").read_bytes() == (plain / "shard.00000.mds").read_bytes()
    assert _index(plain)[0] == shards[0]
    ds = MDSDataset(str(out))
    got = ds.read(np.arange(1200), ["id", "b"])
    assert got["id"].tolist() == ids.tolist() and list(got["b"]) == [v for b in blocks for v in b]


def test_min_compression_saving_zero_compresses_every_shard_as_mosaic(tmp_path):
    with MDSWriter(columns={"b": "bytes"}, out=str(tmp_path), compression="zstd:1") as w:
        w.write_columns({"b": _payloads("random", 100, 0)})
    assert [s["compression"] for s in _index(tmp_path)] == ["zstd:1"]


@pytest.mark.parametrize("value", [-0.1, 1.0, "10%", True, None])
def test_min_compression_saving_must_be_a_fraction(tmp_path, value):
    from petastream.errors import InvalidArgumentError, InvalidArgumentTypeError

    error = InvalidArgumentError if isinstance(value, float) else InvalidArgumentTypeError
    with pytest.raises(error, match="min_compression_saving must be a fraction"):
        MDSWriter(columns={"b": "bytes"}, out=str(tmp_path), compression="zstd", min_compression_saving=value)


def test_compression_sample_spans_the_shard():
    """The sample is four pieces spread over the whole shard (first, last and between), taken
    across block boundaries without joining the blocks."""
    from petastream.mds.writer import _sample

    data = bytes(range(256)) * 40  # 10240 bytes
    segments = [memoryview(data[i:i + 1000]) for i in range(0, len(data), 1000)]
    sample = _sample(segments, 4, 100)
    starts = [round(k * (len(data) - 100) / 3) for k in range(4)]
    assert sample == b"".join(data[s:s + 100] for s in starts)
    assert _sample(segments[:1], 4, 1000) == data[:1000]  # short: all of it
