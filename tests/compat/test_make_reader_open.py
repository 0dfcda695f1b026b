"""make_reader's open: every footer read once (by the ParquetSource's plan), row groups
numbered as Petastorm numbers them (empty ones included)."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from petastream.compat import make_reader

INDEXED = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "petastorm", "indexed")


def _plain(root) -> list[str]:
    """Two files; the first in row groups of 3, 0 and 3 rows (ids 0-5), the second one of 2 (6-7)."""
    first, second = str(root / "part-0.parquet"), str(root / "part-1.parquet")
    table = pa.table({"id": np.arange(6, dtype=np.int64)})
    with pq.ParquetWriter(first, table.schema) as w:
        w.write_table(table.slice(0, 3))
        w.write_table(table.slice(0, 0))
        w.write_table(table.slice(3, 3))
    pq.write_table(pa.table({"id": np.array([6, 7], dtype=np.int64)}), second)
    return [first, second]


def _ids(url, **kwargs) -> list[int]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # not a Petastorm dataset
        with make_reader(url, reader_pool_type="dummy", shuffle_row_groups=False, **kwargs) as reader:
            return sorted(int(row.id) for row in reader)


@pytest.fixture
def footer_reads(monkeypatch):
    reads: list[str] = []
    real = pq.read_metadata

    def counted(where, *args, **kwargs):
        reads.append(getattr(where, "name", None) or str(where))
        return real(where, *args, **kwargs)

    monkeypatch.setattr(pq, "read_metadata", counted)
    return reads


@pytest.mark.parametrize("as_list", [False, True])
def test_each_footer_is_read_once_at_open(tmp_path, footer_reads, as_list):
    files = _plain(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        reader = make_reader(files if as_list else str(tmp_path), reader_pool_type="dummy")
    reader.stop()
    reader.join()
    assert len(footer_reads) == 2  # the two files' footers, by the source's plan


def test_a_petastorm_dataset_reads_its_metadata_once_and_each_footer_once(footer_reads):
    reader = make_reader(INDEXED, reader_pool_type="dummy")
    reader.stop()
    reader.join()
    data_files = [n for n in os.listdir(INDEXED) if n.endswith(".parquet")]
    assert len(footer_reads) == len(data_files) + 1  # + _common_metadata


@pytest.mark.parametrize("as_list", [False, True])
def test_an_empty_row_group_keeps_its_position(tmp_path, as_list):
    # Petastorm numbers every row group of the footers: positions 0 1 2 (part-0), 3 (part-1)
    files = _plain(tmp_path)
    url = files if as_list else str(tmp_path)
    assert _ids(url, cur_shard=0, shard_count=4) == [0, 1, 2]
    assert _ids(url, cur_shard=1, shard_count=4) == []
    assert _ids(url, cur_shard=2, shard_count=4) == [3, 4, 5]
    assert _ids(url, cur_shard=3, shard_count=4) == [6, 7]


def test_a_directory_in_a_list_of_files_is_named(tmp_path):
    from petastream.errors import InvalidArgumentError

    (tmp_path / "a").mkdir()
    files = _plain(tmp_path / "a")
    (tmp_path / "b").mkdir()
    pq.write_table(pa.table({"id": np.array([9], dtype=np.int64)}), str(tmp_path / "b" / "c.parquet"))
    with pytest.raises(InvalidArgumentError, match=r"b is a directory; a list of URLs names Parquet files"):
        _ids([files[0], str(tmp_path / "b")])
