"""Fixtures of the Parquet source tests: a directory of Parquet files of every supported type."""

from __future__ import annotations

import pytest

from tests.parquet.helpers import table, write_files

N = 200  # rows over 3 files, row groups of 40 rows


@pytest.fixture(scope="module")
def data():
    return table(N)


@pytest.fixture(scope="module")
def pq_dir(tmp_path_factory, data):
    root = str(tmp_path_factory.mktemp("parquet") / "data")
    write_files(data, root, files=3, row_group_size=40)
    return root
