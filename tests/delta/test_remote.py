"""A Delta table on S3 (moto on loopback): the log read by delta-rs's object store, the files
by fsspec through the shard cache; and petastream.tf.dataset over a table."""

from __future__ import annotations

import numpy as np
import pytest

from petastream.delta import DeltaSource
from tests.delta.conftest import add_paths, issue_table
from tests.delta.dv_writer import delete_rows


def test_a_table_on_s3_with_deletion_vectors(tmp_path, s3_bucket):
    import s3fs
    from deltalake import DeltaTable

    local = issue_table(str(tmp_path / "t"))
    DeltaTable(local).create_checkpoint()  # the vectors' reader reads it, and the commit after it, from S3
    first = add_paths(local)[0]
    delete_rows(local, {first: [0, 1, 2]})
    expect = sorted(DeltaSource(local).read(np.arange(1397))["id"].tolist())
    fs = s3fs.S3FileSystem()
    fs.put(local, f"{s3_bucket}/t", recursive=True)
    url = f"{s3_bucket}/t"
    options = {"AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1"}  # endpoint and keys: the environment
    src = DeltaSource(url, delta_storage_options=options)
    assert src.version == 3 and len(src) == 1397
    assert sorted(src.read(np.arange(len(src)))["id"].tolist()) == expect
    from petastream.pipeline.loader import BatchLoader

    served = sorted(int(i) for b in BatchLoader(url, batch_size=100, shuffle=True,
                                                dataset_options={"delta_storage_options": options}) for i in b["id"])
    assert served == expect


@pytest.mark.tf
def test_tf_dataset_reads_the_table(tmp_path):
    ptf = pytest.importorskip("petastream.tf")
    path = issue_table(str(tmp_path / "t"))
    got = sorted(int(i) for b in ptf.dataset(path, batch_size=200, shuffle=True) for i in b["id"].numpy())
    assert got == list(range(100, 1500))
