"""Byte compatibility with Mosaic Streaming, both ways, on datasets written by Mosaic itself."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import petastream
from petastream.mds.writer import MDSWriter
from tests.conftest import FIXTURES
from tests.mds.fixture_values import (
    FIXTURE_NAMES,
    assert_matches,
    load_expected,
    pixel_sha1,
    to_value,
)

LOSSLESS_IMAGES = {"pil", "png"}


def _open(name: str) -> petastream.MDSDataset:
    return petastream.open(os.path.join(FIXTURES, name), allow_unsafe_types=(name == "pkl-unsafe"))


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_reads_every_mosaic_fixture(name):
    expected = load_expected(name)
    ds = _open(name)
    assert len(ds) == len(expected["samples"])
    assert ds.columns == expected["columns"]
    for i, sample in enumerate(expected["samples"]):
        got = ds[i]
        assert set(got) == set(sample)
        for col, value in sample.items():
            if name == "pkl-unsafe" and col == "obj":
                # expected.json stores JSON; the pickled object holds a tuple.
                assert json.loads(json.dumps(got[col])) == value
                continue
            assert_matches(value, got[col], f"{name}[{i}].{col}")
            if isinstance(value, dict) and "image" in value and col in LOSSLESS_IMAGES:
                assert pixel_sha1(got[col]) == value["image"]["sha1_of_pixels"]


@pytest.mark.parametrize("name", [n for n in FIXTURE_NAMES if n != "images"])
def test_bulk_read_equals_per_sample(name):
    ds = _open(name)
    for s in range(ds.num_shards):
        cols = ds.read_shard(s)
        base = int(ds.shard_offsets[s])
        for i in range(ds.shards[s]["samples"]):
            one = ds[base + i]
            for col, value in one.items():
                bulk = cols[col][i]
                if isinstance(value, np.ndarray):
                    np.testing.assert_array_equal(np.asarray(bulk).reshape(value.shape), value)
                else:
                    assert bulk == value, (name, s, i, col)


def _samples_for_writing(name: str) -> list[dict]:
    """The fixture's rows as writer input. json and pkl values are taken from the decoded
    fixture: expected.json sorts JSON object keys, which would change the encoded bytes."""
    expected = load_expected(name)
    decoded = list(_open(name))
    rows = []
    for i, sample in enumerate(expected["samples"]):
        row = {}
        for col, value in sample.items():
            enc = expected["columns"][col]
            row[col] = decoded[i][col] if enc in ("json", "pkl") else to_value(value)
        rows.append(row)
    return rows


def _as_columns(rows: list[dict], columns: dict[str, str]) -> dict[str, np.ndarray]:
    out = {}
    for col, enc in columns.items():
        values = [r[col] for r in rows]
        if enc.startswith("ndarray:") and enc.count(":") == 2:
            out[col] = np.stack(values)
        elif enc in ("int",) or (enc[0] in "uif" and enc[-1].isdigit()):
            out[col] = np.array(values)
        else:
            arr = np.empty(len(values), dtype=object)
            arr[:] = values
            out[col] = arr
    return out


def _stored_files(path: str) -> dict[str, bytes]:
    files = {}
    for root, _, names in os.walk(path):
        for n in names:
            if n != "expected.json":  # the fixture's, beside Mosaic's files
                full = os.path.join(root, n)
                with open(full, "rb") as f:
                    files[os.path.relpath(full, path)] = f.read()
    return files


WRITABLE = [n for n in FIXTURE_NAMES if n not in ("images", "merged")]


@pytest.mark.parametrize("mode", ["per_sample", "bulk"])
@pytest.mark.parametrize("name", WRITABLE)
def test_writer_is_byte_identical_to_mosaic(name, mode, tmp_path):
    expected = load_expected(name)
    rows = _samples_for_writing(name)
    out = str(tmp_path / name)
    # Mosaic records no hashes unless asked; ours records xxh3_64 unless hashes=[] (#29.5).
    kwargs = {"hashes": [], **expected["writer_kwargs"]}
    with MDSWriter(columns=expected["columns"], out=out, **kwargs) as w:
        if mode == "per_sample":
            for row in rows:
                w.write(row)
        else:
            w.write_columns(_as_columns(rows, expected["columns"]))
    ref, mine = _stored_files(os.path.join(FIXTURES, name)), _stored_files(out)
    assert sorted(ref) == sorted(mine)
    gz = expected["writer_kwargs"].get("compression", "") or ""
    for fname, data in ref.items():
        if gz.startswith("gz") and fname.endswith(".gz"):
            import gzip

            # gzip embeds a timestamp: compare what it holds instead.
            assert gzip.decompress(mine[fname]) == gzip.decompress(data), fname
        elif gz.startswith("gz") and fname == "index.json":
            ours, theirs = json.loads(mine[fname]), json.loads(data)
            for a, b in zip(ours["shards"], theirs["shards"]):
                a["zip_data"]["bytes"] = b["zip_data"]["bytes"]  # gzip header length may vary
            assert ours == theirs
        else:
            assert mine[fname] == data, f"{name}/{fname} differs from Mosaic's bytes"


def test_merged_layout_is_byte_identical(tmp_path):
    """dataframe_to_mds layout: partial datasets in sub-dirs, merged index, basenames with sub-dir."""
    expected = load_expected("merged")
    rows = [{k: to_value(v) for k, v in s.items()} for s in expected["samples"]]
    start = 0
    for sub in ["101", "9", "10"]:  # merged-index order
        with open(os.path.join(FIXTURES, "merged", sub, "index.json")) as f:
            n = sum(s["samples"] for s in json.load(f)["shards"])
        with MDSWriter(columns=expected["columns"], out=str(tmp_path / sub),
                       compression="zstd", size_limit=300, hashes=[]) as w:
            w.write_columns(_as_columns(rows[start : start + n], expected["columns"]))
        start += n
    assert start == len(rows)
    petastream.merge_index([str(tmp_path / s) for s in ["101", "9", "10"]], str(tmp_path))
    assert _stored_files(str(tmp_path)) == _stored_files(os.path.join(FIXTURES, "merged"))


def test_merge_index_from_root_sorts_like_mosaic(tmp_path):
    for sub in ["9", "10"]:
        with MDSWriter(columns={"x": "int64"}, out=str(tmp_path / sub)) as w:
            w.write_columns({"x": np.arange(3) + (100 if sub == "10" else 0)})
    shards = petastream.merge_index(str(tmp_path))
    assert [s["raw_data"]["basename"] for s in shards] == ["10/shard.00000.mds", "9/shard.00000.mds"]
    with open(tmp_path / "index.json") as f:
        assert f.read().startswith('{"version": 2, "shards": [')
    ds = petastream.open(str(tmp_path))
    assert [int(ds[i]["x"]) for i in range(len(ds))] == [100, 101, 102, 0, 1, 2]
