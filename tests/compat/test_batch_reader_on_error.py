"""``make_batch_reader(on_error=...)``: a Parquet dataset with a row its ``transform_spec``
fails on, and one with a damaged row group, read under each policy, by the reader itself and
by compat's torch loader over it."""

from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from petastream.compat import TransformSpec, make_batch_reader
from petastream.errors import InvalidArgumentError

pytestmark = pytest.mark.timeout(300)
N, BAD = 100, 37  # row groups of 25: row 37 is row 12 of row group 1


@pytest.fixture(scope="module")
def url(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("on-error") / "t.parquet"
    ids = np.arange(N)
    pq.write_table(pa.table({"id": ids, "x": ids * 0.5}), path, row_group_size=25)
    return str(path)


@pytest.fixture(scope="module")
def damaged(tmp_path_factory) -> str:
    """Row group 2's page header of column ``x`` overwritten: that row group cannot be read."""
    path = tmp_path_factory.mktemp("damaged") / "t.parquet"
    ids = np.arange(N)
    pq.write_table(pa.table({"id": ids, "x": ids * 0.5}), path, row_group_size=25, compression="none",
                   write_statistics=False)
    offset = pq.ParquetFile(path).metadata.row_group(2).column(1).data_page_offset
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(b"\xff" * 12)
    return str(path)


def _fails_on_bad(df):
    if (df.id == BAD).any():
        raise ValueError(f"bad row {BAD}")
    return df


SPEC = TransformSpec(_fails_on_bad)


def _read(url, **kwargs):
    kwargs.setdefault("schema_fields", ["id", "x"])
    with make_batch_reader(url, reader_pool_type="dummy", shuffle_row_groups=False, **kwargs) as reader:
        ids = [int(i) for batch in reader for i in batch.id]
        return ids, reader.stats()


def test_raise_is_the_default_and_names_the_row_group_and_row(url):
    with pytest.raises(ValueError, match=f"bad row {BAD}") as caught:
        _read(url, transform_spec=SPEC)
    note = "\n".join(caught.value.__notes__)
    assert f"row group) 1, row 12 (sample id {BAD})" in note and "on_error='skip'" in note


@pytest.mark.parametrize("policy", ["skip", "warn"])
def test_skip_and_warn_leave_the_row_out_count_it_and_log_it(url, policy, caplog):
    with caplog.at_level(logging.WARNING, logger="petastream.pipeline"):
        ids, stats = _read(url, transform_spec=SPEC, on_error=policy)
    assert ids == [i for i in range(N) if i != BAD]
    assert stats["skipped"] == 1 and stats["rows"] == N - 1
    assert "skipped 1 sample(s) so far" in caplog.text
    assert (f"bad row {BAD}" in caplog.text and "on_error='warn'" in caplog.text) == (policy == "warn")


def test_a_callable_decides_per_row(url):
    seen = []

    def decide(bad):
        seen.append(bad)
        return True

    ids, stats = _read(url, transform_spec=SPEC, on_error=decide)
    assert ids == [i for i in range(N) if i != BAD] and stats["skipped"] == 1
    (bad,) = seen
    assert (bad.stage, bad.ids, bad.shard, bad.rows, bad.error_type) == ("transform", (BAD,), 1, (12,), "ValueError")
    with pytest.raises(ValueError, match=f"bad row {BAD}"):
        _read(url, transform_spec=SPEC, on_error=lambda bad: False)


def test_a_damaged_row_group_is_named_or_left_out_whole(damaged, caplog):
    with pytest.raises(OSError, match="row group 2 cannot be read") as caught:
        _read(damaged)
    assert "shard (or row group) 2, all 25 rows read from it (ids 50..74)" in "\n".join(caught.value.__notes__)
    with caplog.at_level(logging.WARNING, logger="petastream.pipeline"):
        ids, stats = _read(damaged, on_error="skip")
    assert ids == [*range(50), *range(75, N)] and stats["skipped"] == 25
    assert "skipped 25 sample(s) so far" in caplog.text


def test_the_loaders_over_the_reader_take_its_policy(url, caplog):
    pytest.importorskip("torch")
    from petastream.compat.pytorch import BatchedDataLoader

    with make_batch_reader(url, shuffle_row_groups=False, schema_fields=["id", "x"], transform_spec=SPEC,
                           on_error="skip") as reader:
        assert reader.loader_kwargs(10)["on_error"] == "skip"
        with caplog.at_level(logging.WARNING, logger="petastream.pipeline"):
            ids = [int(i) for batch in BatchedDataLoader(reader, batch_size=10) for i in batch["id"]]
    assert sorted(ids) == [i for i in range(N) if i != BAD]
    assert "skipped 1 sample(s) so far" in caplog.text


def test_an_unknown_policy_is_refused_before_anything_is_opened(tmp_path):
    with pytest.raises(InvalidArgumentError, match="on_error must be 'raise', 'skip', 'warn' or a callable"):
        make_batch_reader(str(tmp_path / "nothing-here"), on_error="ignore")


def test_the_converter_passes_it_to_its_readers(tmp_path, caplog):
    pytest.importorskip("torch")
    from petastream.compat import SparkDatasetConverter
    from petastream.mds.writer import write_mds

    url = str(tmp_path / "mds")
    write_mds({"id": np.arange(N), "x": np.arange(N) * 0.5}, url, size_limit=600)
    shards = sorted(str(p) for p in (tmp_path / "mds").glob("shard.*"))
    conv = SparkDatasetConverter(url, shards, N)  # what make_spark_converter returns for it
    with caplog.at_level(logging.WARNING, logger="petastream.pipeline"):
        with conv.make_torch_dataloader(batch_size=10, num_epochs=1, transform_spec=SPEC, on_error="skip") as loader:
            ids = sorted(int(i) for batch in loader for i in batch["id"])
    assert ids == [i for i in range(N) if i != BAD] and "skipped 1 sample(s) so far" in caplog.text
    with pytest.raises(ValueError, match=f"bad row {BAD}"):
        with conv.make_torch_dataloader(batch_size=10, num_epochs=1, transform_spec=SPEC) as loader:
            list(loader)
