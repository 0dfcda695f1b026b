"""``make_reader`` on the one pipeline: process workers decoding images, the ``on_error``
policies on a corrupt image, exact resume, and a dataset on S3 (moto) read by two ranks through
one node cache (GETs counted on the server)."""

from __future__ import annotations

import logging
import os
import shutil
import warnings

import pyarrow.parquet as pq
import pytest

from petastream.compat import make_reader
from tests.compat.petastorm_values import same

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "petastorm")
ALL_CODECS = os.path.join(FIXTURES, "all_codecs")
INDEXED = os.path.join(FIXTURES, "indexed")


def _rows(**kwargs):
    with make_reader(kwargs.pop("url", ALL_CODECS), **kwargs) as reader:
        return sorted(reader, key=lambda r: int(r.id))


def test_process_workers_decode_png_and_jpeg_as_threads_do():
    threads = _rows(workers_count=2, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback to threads: the work pickles
        with make_reader(ALL_CODECS, reader_pool_type="process", workers_count=2, seed=3) as reader:
            assert reader.loader.executor.worker_type == "process"
            processes = sorted(reader, key=lambda r: int(r.id))
    assert len(processes) == len(threads) == 10
    images = ["png_rgb", "png_gray", "png_u16", "jpeg_rgb", "jpeg_gray", "maybe_png"]
    assert all(same(getattr(a, k), getattr(b, k)) for a, b in zip(processes, threads) for k in a._fields)
    assert processes[0].png_rgb.shape == (12, 10, 3) and processes[0].jpeg_rgb.shape == (16, 16, 3)
    assert all(getattr(processes[0], k) is not None for k in images[:-1])


@pytest.fixture
def corrupt(tmp_path):
    """all_codecs with row id 2's ``png_rgb`` replaced by bytes that are no PNG."""
    root = tmp_path / "corrupt"
    shutil.copytree(ALL_CODECS, root)
    for path in sorted(root.glob("*.parquet")):
        table = pq.read_table(path)
        ids = table.column("id").to_pylist()
        if 2 in ids:
            values = table.column("png_rgb").to_pylist()
            values[ids.index(2)] = b"not a png"
            i = table.schema.get_field_index("png_rgb")
            table = table.set_column(i, table.schema.field(i), [values])
            pq.write_table(table, path, row_group_size=len(ids))
    return str(root)


def test_on_error_raise_names_the_row_and_column(corrupt):
    with pytest.raises(Exception, match="png_rgb") as info:
        _rows(url=corrupt, shuffle_row_groups=False)
    # all_codecs: 2 files of 1 row group; row id 2 is row 2 of the first (shard 0).
    assert "shard (or row group) 0, row 2 (sample id 2)" in " ".join(getattr(info.value, "__notes__", []))


@pytest.mark.parametrize("policy", ["skip", "warn", "callable"])
def test_on_error_skip_completes_the_epoch_counts_it_and_a_resume_skips_it(corrupt, policy, caplog):
    on_error = (lambda bad: True) if policy == "callable" else policy
    with caplog.at_level(logging.WARNING, logger="petastream.pipeline"):
        with make_reader(corrupt, on_error=on_error, shuffle_row_groups=False, workers_count=2) as reader:
            rows = list(reader)
            assert reader.stats()["skipped"] == 1
    assert sorted(int(r.id) for r in rows) == [i for i in range(10) if i != 2]
    assert caplog.records  # never silent
    # A state saved after the skip: a reader that would raise resumes without serving the row.
    with make_reader(corrupt, on_error="skip", shuffle_row_groups=False) as first:
        served = [int(next(first).id) for _ in range(3)]
        state = first.state_dict()
    assert "skipped" in state["loader"]
    with make_reader(corrupt, on_error="raise", shuffle_row_groups=False) as resumed:
        resumed.load_state_dict(state)
        rest = [int(r.id) for r in resumed]
    assert sorted(served + rest) == [i for i in range(10) if i != 2]


@pytest.mark.parametrize("pool", ["thread", "dummy"])
def test_resume_mid_epoch_serves_every_row_once(pool):
    options = dict(seed=5, shuffle_rows=True, num_epochs=2, reader_pool_type=pool)
    with make_reader(INDEXED, **options) as reader:
        everything = [int(r.id) for r in reader]
    with make_reader(INDEXED, **options) as first:
        head = [int(next(first).id) for _ in range(21)]  # into the second epoch, mid-batch
        state = first.state_dict()
    with make_reader(INDEXED, **options) as second:
        second.load_state_dict(state)
        tail = [int(r.id) for r in second]
    assert head + tail == everything  # the same order, no row twice, none lost


def _two_row_groups_per_file(root) -> str:
    """``indexed`` with each file in 2 row groups of 2 rows: rank ``i % 2`` of row group ``i``
    then reads a row group of every file (the ranks share each file)."""
    import json

    from petastream.compat.etl import metadata_files
    from petastream.compat.etl.dataset_metadata import ROW_GROUPS_PER_FILE_KEY
    from petastream.parquet.discover import locate

    shutil.copytree(INDEXED, root)
    counts = {}
    for path in sorted(root.glob("*.parquet")):
        table = pq.read_table(path)
        pq.write_table(table, path, row_group_size=2)
        counts[path.name] = pq.ParquetFile(path).num_row_groups
    common = pq.read_schema(root / "_common_metadata")
    metadata_files.write_common_metadata(locate(str(root)), common, {ROW_GROUPS_PER_FILE_KEY: json.dumps(counts).encode()})
    return str(root)


@pytest.fixture
def s3_indexed(recording_s3, monkeypatch, tmp_path):
    import uuid

    import s3fs

    from tests.servers import s3_env

    for key, value in s3_env(recording_s3.endpoint).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PETASTREAM_CACHE_DIR", str(tmp_path / "node-cache"))
    s3fs.S3FileSystem.clear_instance_cache()
    fs = s3fs.S3FileSystem()
    bucket = f"rows-{uuid.uuid4().hex[:12]}"
    fs.mkdir(bucket)
    fs.put(_two_row_groups_per_file(tmp_path / "indexed") + "/", f"{bucket}/indexed/", recursive=True)
    yield f"s3://{bucket}/indexed", recording_s3
    s3fs.S3FileSystem.clear_instance_cache()


def _parquet_gets(server):
    return [p for method, p in server.requests() if method == "GET" and p.endswith(".parquet")]


@pytest.mark.cloud
@pytest.mark.timeout(300)
def test_two_ranks_on_s3_fetch_each_file_once_per_node_and_resume(s3_indexed):
    url, server = s3_indexed
    ranks = [make_reader(url, cur_shard=r, shard_count=2, num_epochs=2, seed=1) for r in range(2)]
    server.reset()  # (after the opens: their footer reads are not the reads of rows)
    assert [r.loader.dataset.num_shards for r in ranks] == [4, 4]  # a row group of each file each
    ids = [[int(row.id) for row in reader] for reader in ranks]
    assert sorted(ids[0] + ids[1]) == sorted(list(range(16)) * 2)  # each rank its row groups, twice
    gets = _parquet_gets(server)
    fetch = ranks[0].loader.dataset.plan.fetch
    # Once on the node for both ranks and epochs: each file whole, or each row group's ranges.
    assert len(gets) == (4 if fetch == "file" else 8) and len(set(gets)) == 4
    for reader in ranks:
        reader.stop()
        reader.join()
    # Resume rank 1 mid-epoch: exact, and from the node's cache (no GET).
    first, second = (make_reader(url, cur_shard=1, shard_count=2, seed=1) for _ in range(2))
    server.reset()  # (after the opens, as above)
    with first:
        head = [int(next(first).id) for _ in range(3)]
        state = first.state_dict()
    with second:
        second.load_state_dict(state)
        tail = [int(r.id) for r in second]
    assert sorted(head + tail) == sorted(ids[1][: len(ids[1]) // 2]) and not set(head) & set(tail)
    assert _parquet_gets(server) == []


@pytest.mark.cloud
@pytest.mark.timeout(300)
def test_cache_limit_bounds_the_node_cache(s3_indexed, tmp_path):
    url, server = s3_indexed
    import s3fs

    sizes = [f["size"] for f in s3fs.S3FileSystem().ls(url.removeprefix("s3://"), detail=True)
             if f["name"].endswith(".parquet")]
    limit = 3 * max(sizes) + 1
    with make_reader(url, cache_limit=limit, seed=2, num_epochs=2) as reader:
        assert sorted(int(r.id) for r in reader) == sorted(list(range(16)) * 2)
        assert reader.loader.dataset.cache_limit == limit
    data = tmp_path / "node-cache"
    held = sum(p.stat().st_size for p in data.rglob("*") if p.is_file() and "/data/" in str(p))
    assert 0 < held <= limit  # (files were cached, within the limit)
