"""Dates and timestamps of a Parquet store through ``make_batch_reader``, and what TF and torch
make of them. The expected values and dtypes were recorded by running Petastorm 0.13.1
(pyarrow 14, pandas 2.2) over the same file; where compat differs on purpose the test says so
(docs/migrating.md, Reader API)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from petastream.compat import make_batch_reader

NAT = np.iinfo(np.int64).min


@pytest.fixture(scope="module")
def dates(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("dates")
    pq.write_table(pa.table({
        "id": pa.array([1, 2, 3], pa.int64()),
        "d": pa.array([dt.date(2020, 1, 1), None, dt.date(1969, 12, 31)], pa.date32()),
        "d64": pa.array([0, 86_400_000, None], pa.date64()),
        "d_full": pa.array([dt.date(2020, 1, 1), dt.date(2020, 1, 2), dt.date(1970, 1, 1)], pa.date32()),
        "ts_us": pa.array([dt.datetime(2020, 1, 1, 1, 2, 3, 4), None, dt.datetime(1960, 1, 1)], pa.timestamp("us")),
        "ts_ns": pa.array([1, None, 3], pa.timestamp("ns")),
        "ts_ms_tz": pa.array([1000, 2000, None], pa.timestamp("ms", tz="UTC")),
        "ts_s_tz": pa.array([1, 2, 3], pa.timestamp("s", tz="America/New_York")),
    }), root / "a.parquet")
    return str(root)


def _batch(url: str, **kwargs) -> dict:
    with make_batch_reader(url, shuffle_row_groups=False, workers_count=1, **kwargs) as reader:
        batches = [b._asdict() for b in reader]
    assert len(batches) == 1
    return batches[0]


def test_dates_are_date_objects_and_timestamps_datetime64_in_their_unit(dates):
    batch = _batch(dates)
    assert batch["id"].dtype == np.int64
    for name in ("d", "d64", "d_full"):
        assert batch[name].dtype == object
    assert list(batch["d"]) == [dt.date(2020, 1, 1), None, dt.date(1969, 12, 31)]
    assert list(batch["d64"]) == [dt.date(1970, 1, 1), dt.date(1970, 1, 2), None]
    assert all(type(v) is dt.date for v in batch["d_full"])
    # The Parquet unit, seconds as milliseconds (pandas 2); a time zone dropped, the values UTC; NaT for null.
    assert {k: str(batch[k].dtype) for k in ("ts_us", "ts_ns", "ts_ms_tz", "ts_s_tz")} == {
        "ts_us": "datetime64[us]", "ts_ns": "datetime64[ns]", "ts_ms_tz": "datetime64[ms]",
        "ts_s_tz": "datetime64[ms]"}
    assert batch["ts_us"].tolist() == [dt.datetime(2020, 1, 1, 1, 2, 3, 4), None, dt.datetime(1960, 1, 1)]
    assert batch["ts_ns"].astype(np.int64).tolist() == [1, NAT, 3]
    assert batch["ts_s_tz"].astype(np.int64).tolist() == [1000, 2000, 3000]
    assert np.isnat(batch["ts_ms_tz"][2])


def test_a_transform_spec_sees_petastorms_types(dates):
    from petastream.compat.transform import TransformSpec

    def days(frame):
        frame["d_full"] = frame["d_full"].map(lambda v: v.toordinal())  # date objects, as Petastorm's
        return frame[["d_full", "ts_us"]]

    spec = TransformSpec(days, edit_fields=[("d_full", np.int64, (), False)], selected_fields=["d_full", "ts_us"])
    batch = _batch(dates, transform_spec=spec)
    assert batch["d_full"].tolist() == [737425, 737426, 719163]
    assert batch["ts_us"].dtype == np.dtype("datetime64[us]")


def test_tensorflow_gets_int64_nanoseconds(dates):
    from petastream.compat.tf_utils import make_petastorm_dataset

    with make_batch_reader(dates, shuffle_row_groups=False, workers_count=1,
                           schema_fields=["d_full", "ts_us", "ts_ms_tz", "ts_s_tz"]) as reader:
        (batch,) = list(make_petastorm_dataset(reader))
    # As Petastorm's make_petastorm_dataset: nanoseconds since the epoch, NaT as int64's minimum.
    assert batch.d_full.numpy().tolist() == [1577836800000000000, 1577923200000000000, 0]
    assert batch.ts_us.numpy().tolist() == [1577840523000004000, NAT, -315619200000000000]
    assert batch.ts_ms_tz.numpy().tolist() == [1000000000, 2000000000, NAT]
    assert batch.ts_s_tz.numpy().tolist() == [1000000000, 2000000000, 3000000000]


def test_torch_loaders_keep_int64_nanoseconds(dates):
    # Petastorm 0.13.1's loaders fail on these columns (TypeError: object arrays; datetime64 not
    # collated); compat's give the int64 nanoseconds since the epoch, NaT as int64's minimum.
    from petastream.compat.pytorch import BatchedDataLoader, DataLoader

    for loader_type in (DataLoader, BatchedDataLoader):
        reader = make_batch_reader(dates, shuffle_row_groups=False, workers_count=1, schema_fields=["d", "ts_us"])
        with loader_type(reader, batch_size=3) as loader:
            (batch,) = list(loader)
        assert batch["d"].tolist() == [1577836800000000000, NAT, -86400000000000]
        assert batch["ts_us"].tolist() == [1577840523000004000, NAT, -315619200000000000]
