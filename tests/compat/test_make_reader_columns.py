"""``make_reader`` rows taken as columns: ``RowReader.take_columns`` and the ``DataLoader``'s
default collate done column by column (:mod:`petastream.compat._row_batches`), which must give
what collating each row gives, batch for batch, error for error."""

from __future__ import annotations

import os

import numpy as np
import pytest

from petastream.compat import make_reader
from petastream.compat import row_reader as row_reader_module
from petastream.compat.ngram import NGram

torch = pytest.importorskip("torch")
from petastream.compat.pytorch import DataLoader, decimal_friendly_collate  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "petastorm")
ALL_CODECS = os.path.join(FIXTURES, "all_codecs")


def _outcome(field: str, collate_fn) -> list:
    """Each batch's value of ``field`` (or the error the collate raised), 4 rows a batch, read
    from loader batches of 3 rows (so that batches span two of them)."""
    with make_reader(ALL_CODECS) as whole:  # (a field, not a name: "packed" would match "packed_var" too)
        chosen = whole.schema.fields[field]
    reader = make_reader(ALL_CODECS, schema_fields=[chosen], shuffle_row_groups=False, workers_count=2)
    try:
        with DataLoader(reader, batch_size=4, collate_fn=collate_fn) as loader:
            return [b[field] for b in loader]
    except Exception as e:  # noqa: BLE001 - the outcome compared is the error's type
        return [type(e)]


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and bool(
            torch.equal(a, b) if not a.is_floating_point() else torch.allclose(a, b, equal_nan=True))
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    return type(a) is type(b) and (a == b or a is b)


def _fields() -> list[str]:
    with make_reader(ALL_CODECS) as reader:
        return list(reader.schema.fields)


@pytest.mark.parametrize("field", _fields())
def test_default_collate_by_columns_is_collate_of_each_row(field, monkeypatch):
    monkeypatch.setattr(row_reader_module, "ROWS_PER_BATCH", 3)
    by_columns = _outcome(field, decimal_friendly_collate)
    by_rows = _outcome(field, lambda rows: decimal_friendly_collate(rows))  # another function: rows
    assert len(by_columns) == len(by_rows) and all(_same(a, b) for a, b in zip(by_columns, by_rows)), field
    if field in ("id", "png_rgb", "matrix", "flag"):  # columns that collate as tensors
        assert [len(b) for b in by_columns] == [4, 4, 2]
    if by_columns and isinstance(by_columns[0], torch.Tensor):
        assert by_columns[0].is_contiguous()
        by_columns[0].reshape(-1)[:1] = 0  # the batch's own tensor: writable


def test_columns_and_rows_taken_in_turn_are_the_rows_in_order(monkeypatch):
    monkeypatch.setattr(row_reader_module, "ROWS_PER_BATCH", 3)
    with make_reader(ALL_CODECS, schema_fields=["id", "png_rgb"], shuffle_row_groups=False) as reader:
        expected = [int(r.id) for r in reader]
    with make_reader(ALL_CODECS, schema_fields=["id", "png_rgb"], shuffle_row_groups=False) as reader:
        got = [int(next(reader).id)]
        part = reader.take_columns(5)
        assert list(part) == ["id", "png_rgb"] and len(part["id"]) == 2  # the rest of the first batch
        assert part["png_rgb"].shape == (2, 12, 10, 3)
        got += [int(i) for i in part["id"]]
        state = reader.state_dict()
        got += [int(r.id) for r in reader]
        assert reader.take_columns(5) is None and reader.last_row_consumed
    assert got == expected
    with make_reader(ALL_CODECS, schema_fields=["id", "png_rgb"], shuffle_row_groups=False) as resumed:
        resumed.load_state_dict(state)
        assert [int(i) for i in resumed.take_columns(100)["id"]] == expected[3:6]


def test_ngram_windows_are_not_columns():
    fields = {-1: ["id"], 0: ["id"]}
    with make_reader(ALL_CODECS, schema_fields=NGram(fields, delta_threshold=10, timestamp_field="id"),
                     shuffle_row_groups=False) as reader:
        with pytest.raises(ValueError, match="take_columns.*NGram"):
            reader.take_columns(4)
        assert next(reader)


def test_workers_read_one_batch_of_stored_rows_at_a_time():
    """make_reader's work stage: a worker's bulk read is one batch's rows, so that the first
    batch waits for its own row groups only (none in a read shuffling rows across the dataset,
    whose batches take rows of every row group anyway)."""
    from petastream.pipeline.work import PassWork

    stage = row_reader_module.one_batch_chunks
    limit = row_reader_module.ROWS_PER_BATCH
    assert stage(PassWork(None, None)).max_chunk == limit  # type: ignore[arg-type]
    assert stage(PassWork(None, None, max_chunk=limit // 2)).max_chunk == limit // 2  # type: ignore[arg-type]
    assert stage(PassWork(None, None, max_chunk=10 * limit)).max_chunk == limit  # type: ignore[arg-type]
    with make_reader(ALL_CODECS, shuffle_row_groups=True, seed=3) as reader:
        assert reader.loader.work_stages == [stage]
        assert sorted(int(r.id) for r in reader) == list(range(10))
    with make_reader(ALL_CODECS, shuffle_rows=True, seed=3) as reader:
        assert reader.loader.work_stages == []
