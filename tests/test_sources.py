"""resolve_source: a URL (MDS or Parquet), a list of Parquet URLs, or a source as is."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from petastream.errors import (
    FormatError,
    IncompleteDatasetError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
)
from petastream.mds.dataset import MDSDataset
from petastream.mds.writer import write_mds
from petastream.parquet import ParquetSource
from petastream.sources import detect_format, resolve_source


@pytest.fixture
def layouts(tmp_path):
    write_mds({"id": np.arange(10)}, str(tmp_path / "mds"), compression=None)
    (tmp_path / "pq").mkdir()
    pq.write_table(pa.table({"id": np.arange(10)}), str(tmp_path / "pq" / "part-0.snappy.parquet"))
    (tmp_path / "pq" / "_SUCCESS").touch()
    os.makedirs(tmp_path / "hive" / "year=2020")
    pq.write_table(pa.table({"id": np.arange(3)}), str(tmp_path / "hive" / "year=2020" / "0"))
    (tmp_path / "bare").mkdir()
    pq.write_table(pa.table({"id": np.arange(4)}), str(tmp_path / "bare" / "000000_0"))
    return tmp_path


def test_the_format_follows_what_is_there(layouts):
    assert isinstance(resolve_source(str(layouts / "mds")), MDSDataset)
    for name, rows in (("pq", 10), ("hive", 3), ("bare", 4)):
        src = resolve_source(str(layouts / name))
        assert isinstance(src, ParquetSource) and len(src) == rows, name
    one = resolve_source(str(layouts / "pq" / "part-0.snappy.parquet"), columns=["id"])
    assert isinstance(one, ParquetSource) and len(one) == 10
    both = resolve_source([str(layouts / "pq"), str(layouts / "bare")])
    assert isinstance(both, ParquetSource) and len(both) == 14
    assert detect_format(layouts / "hive") == "parquet" and detect_format(layouts / "mds") == "mds"


def test_a_source_is_used_as_is(layouts):
    src = ParquetSource(str(layouts / "pq"))
    assert resolve_source(src) is src
    with pytest.raises(InvalidArgumentError, match=r"options \['columns'\] \(dataset_options\) apply when a URL is opened"):
        resolve_source(src, columns=["id"])


def test_what_is_neither(layouts, tmp_path):
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("nothing to read here")
    with pytest.raises(FormatError, match="neither an MDS dataset .* nor a Parquet directory"):
        resolve_source(str(tmp_path / "other"))
    with pytest.raises(FileNotFoundError, match="nothing at"):
        resolve_source(str(tmp_path / "missing"))
    (tmp_path / "partial").mkdir()
    (tmp_path / "partial" / "shard.00000.mds").write_bytes(b"x")
    with pytest.raises(IncompleteDatasetError, match="no index.json"):
        resolve_source(str(tmp_path / "partial"))
    with pytest.raises(InvalidArgumentTypeError, match="is read as PARQUET: .*unexpected keyword argument 'split'"):
        resolve_source(str(layouts / "pq"), split="train")
    with pytest.raises(InvalidArgumentTypeError, match="expected a path or URL .* got int"):
        resolve_source(42)
