"""compat's reader-per-epoch source reuse (:mod:`petastream.compat._source_reuse`) with the
dataset on S3 (a moto server on loopback, every request recorded on the server): a second
reader reads through the first one's source and fetches none of the data it holds; a file
rewritten or deleted on S3 between epochs, by another client, is never served from the kept
source (nor from the decoded copies of ``cache_type="local-disk"``)."""

from __future__ import annotations

import io
import json
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from petastream.compat import _source_reuse, make_batch_reader

pytestmark = [pytest.mark.cloud, pytest.mark.timeout(120)]

ROWS = 40_000  # per file: ~450 KB, so its row groups lie well before the footer's tail
TAIL = 64 * 1024  # what a footer read fetches (petastream.parquet.footer)


@pytest.fixture(autouse=True)
def _nothing_kept():
    _source_reuse.forget()
    yield
    _source_reuse.forget()


@pytest.fixture
def bucket(recording_s3, monkeypatch):
    """A fresh bucket on the recording server: ``(writer, "s3://bucket/data", server)``; the
    writer is an s3fs client of its own, as another job rewriting the files would be."""
    import s3fs

    from tests.servers import s3_env

    for key, value in s3_env(recording_s3.endpoint).items():
        monkeypatch.setenv(key, value)
    s3fs.S3FileSystem.clear_instance_cache()
    writer = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False)
    name = f"reuse-{uuid.uuid4().hex[:12]}"
    writer.mkdir(name)
    yield writer, f"s3://{name}/data", recording_s3
    s3fs.S3FileSystem.clear_instance_cache()


def _put(writer, url: str, start: int, rows: int = ROWS) -> int:
    ids = np.arange(start, start + rows)
    buf = io.BytesIO()
    pq.write_table(pa.table({"id": ids, "x": ids * 0.5}), buf, row_group_size=rows // 4)
    writer.pipe(url.removeprefix("s3://"), buf.getvalue())
    return len(buf.getvalue())


def _epoch(url: str, **kwargs) -> tuple[object, list[int]]:
    with make_batch_reader(url, reader_pool_type="dummy", shuffle_row_groups=False, **kwargs) as reader:
        ids = [int(i) for batch in reader for i in batch.id]
        return reader.dataset, ids


def _parquet_gets(server) -> list[tuple[str, int]]:
    """(file name, first byte) of every GET of a Parquet file since the server's last reset."""
    out = []
    with open(server.log) as f:
        for line in f:
            entry = json.loads(line)
            if entry["method"] == "GET" and entry["url"].split("?", 1)[0].endswith(".parquet"):
                ranged = entry["headers"].get("Range", "bytes=0-")
                out.append((entry["url"].split("?", 1)[0].rsplit("/", 1)[1],
                            int(ranged.removeprefix("bytes=").split("-", 1)[0])))
    return out


CACHES = {"null": {}, "local-disk": {"cache_type": "local-disk"}}


@pytest.mark.parametrize("cache", list(CACHES))
def test_a_second_reader_reuses_the_source_and_fetches_only_footers(bucket, tmp_path, cache):
    writer, url, server = bucket
    sizes = {"a.parquet": _put(writer, f"{url}/a.parquet", 0), "b.parquet": _put(writer, f"{url}/b.parquet", ROWS)}
    assert min(sizes.values()) > 4 * TAIL
    options = {**CACHES[cache], **({"cache_location": str(tmp_path / "decoded")} if CACHES[cache] else {})}
    server.reset()
    first, ids = _epoch(url, **options)
    assert ids == list(range(2 * ROWS))
    assert any(start < sizes[name] - TAIL for name, start in _parquet_gets(server))  # the data, once
    server.reset()
    second, again = _epoch(url, **options)
    assert second is first and again == ids
    # The new reader lists the files and reads their footers (its fingerprint), nothing else:
    # every row group it serves is the kept source's.
    gets = _parquet_gets(server)
    assert gets and all(start >= sizes[name] - TAIL for name, start in gets), gets


@pytest.mark.parametrize("cache", list(CACHES))
@pytest.mark.parametrize("rows", [ROWS, ROWS // 2], ids=["same-rows", "fewer-rows"])
def test_a_file_rewritten_on_s3_between_epochs_is_read_anew(bucket, tmp_path, cache, rows):
    writer, url, _ = bucket
    _put(writer, f"{url}/a.parquet", 0)
    _put(writer, f"{url}/b.parquet", ROWS)
    options = {**CACHES[cache], **({"cache_location": str(tmp_path / "decoded")} if CACHES[cache] else {})}
    first, ids = _epoch(url, **options)
    assert ids == list(range(2 * ROWS))
    _put(writer, f"{url}/a.parquet", 10 * ROWS, rows)  # another job rewrites it: a new ETag
    second, ids = _epoch(url, **options)
    assert second is not first
    assert ids == [*range(10 * ROWS, 10 * ROWS + rows), *range(ROWS, 2 * ROWS)]
    third, again = _epoch(url, **options)  # and the new version is the one kept
    assert third is second and again == ids


@pytest.mark.parametrize("cache", list(CACHES))
def test_a_file_deleted_on_s3_between_epochs_leaves_the_new_listing(bucket, tmp_path, cache):
    writer, url, _ = bucket
    _put(writer, f"{url}/a.parquet", 0)
    _put(writer, f"{url}/b.parquet", ROWS)
    options = {**CACHES[cache], **({"cache_location": str(tmp_path / "decoded")} if CACHES[cache] else {})}
    first, _ = _epoch(url, **options)
    writer.rm(f"{url}/a.parquet".removeprefix("s3://"))
    second, ids = _epoch(url, **options)
    assert second is not first and ids == list(range(ROWS, 2 * ROWS))


def test_a_file_deleted_while_a_reader_reads_it_is_an_error_naming_it(bucket):
    # A listed file gone before its row groups are fetched: the reader fails naming it, rather
    # than ending the epoch short.
    writer, url, _ = bucket
    _put(writer, f"{url}/a.parquet", 0)
    _put(writer, f"{url}/b.parquet", ROWS)
    reader = make_batch_reader(url, reader_pool_type="dummy", shuffle_row_groups=False)
    try:
        writer.rm(f"{url}/b.parquet".removeprefix("s3://"))
        with pytest.raises(OSError, match="b.parquet"):
            for _ in reader:
                pass
    finally:
        reader.stop()
        reader.join()


def test_a_rewritten_file_named_in_a_list_of_urls_is_read_anew(bucket):
    writer, url, _ = bucket
    files = [f"{url}/a.parquet", f"{url}/b.parquet"]
    _put(writer, files[0], 0)
    _put(writer, files[1], ROWS)
    first, ids = _epoch(files)
    assert ids == list(range(2 * ROWS))
    _put(writer, files[1], 7 * ROWS, ROWS // 4)
    second, ids = _epoch(files)
    assert second is not first and ids == [*range(ROWS), *range(7 * ROWS, 7 * ROWS + ROWS // 4)]


@pytest.mark.torch
def test_process_pool_readers_per_epoch_on_s3_reuse_and_see_a_rewrite(bucket):
    # Petastorm's reader_pool_type="process" (DataLoader worker processes, which reopen the
    # source): a reader per epoch through compat's DataLoader, the source kept between them.
    from petastream.compat.pytorch import DataLoader

    writer, url, _ = bucket
    _put(writer, f"{url}/a.parquet", 0, 2000)
    _put(writer, f"{url}/b.parquet", 2000, 2000)

    def epoch() -> tuple[object, list[int]]:
        reader = make_batch_reader(url, reader_pool_type="process", workers_count=2, num_epochs=1)
        with DataLoader(reader, batch_size=256) as loader:
            ids = sorted(int(i) for b in loader for i in b["id"])
        return reader.dataset, ids

    first, ids = epoch()
    second, again = epoch()
    assert second is first and ids == again == list(range(4000))
    _put(writer, f"{url}/b.parquet", 9000, 500)
    third, ids = epoch()
    assert third is not second and ids == [*range(2000), *range(9000, 9500)]
