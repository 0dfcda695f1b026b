"""Vectorised gathers: every path (fixed rows, equal lengths, Arrow take, Arrow views, per-byte
index) equals plain slicing, in any order, with repeats and empty ranges, and refuses
out-of-bounds ranges."""

from __future__ import annotations

import numpy as np
import pytest

from petastream.columns import gather
from petastream.columns.gather import (
    gather_ranges,
    gather_ranges_arrow,
    gather_ranges_views,
    gather_rows,
)
from petastream.errors import EncodingError
from petastream.mds.encodings import get_encoding


def _reference(data: np.ndarray, starts, lengths) -> bytes:
    return b"".join(data[s : s + n].tobytes() for s, n in zip(starts, lengths))


@pytest.fixture
def buf():
    return np.random.default_rng(0).integers(0, 256, 50_000, dtype=np.uint8)


def _disjoint_ranges(rng, n, size, *, equal=False, empties=False):
    """``n`` non-overlapping ranges of a ``size``-byte buffer, in random order."""
    slots = np.sort(rng.choice(size // 64, n, replace=False)) * 64
    lengths = np.full(n, 40) if equal else rng.integers(0, 64, n)
    if empties:
        lengths[rng.random(n) < 0.3] = 0
    order = rng.permutation(n)
    return slots[order], lengths[order]


@pytest.mark.parametrize("small", [True, False], ids=["index", "arrow"])
@pytest.mark.parametrize("equal", [False, True])
@pytest.mark.parametrize("empties", [False, True])
def test_gather_ranges_equals_slicing(buf, monkeypatch, small, equal, empties):
    monkeypatch.setattr(gather, "SMALL_GATHER", 1 << 40 if small else 0)
    rng = np.random.default_rng(1)
    starts, lengths = _disjoint_ranges(rng, 500, len(buf), equal=equal, empties=empties)
    repeat = rng.integers(0, 500, 200)  # repeated ranges, as padding repeats ids
    starts, lengths = np.concatenate([starts, starts[repeat]]), np.concatenate([lengths, lengths[repeat]])
    got = gather_ranges(buf, starts, lengths)
    assert got.dtype == np.uint8 and got.flags.writeable
    assert got.tobytes() == _reference(buf, starts, lengths)
    arr = gather_ranges_arrow(buf, starts, lengths)
    assert arr.to_pylist() == [buf[s : s + n].tobytes() for s, n in zip(starts, lengths)]


@pytest.mark.parametrize("starts,lengths", [
    ([0, 10, 5], [20, 20, 3]),      # nested and overlapping
    ([7, 7, 7], [5, 0, 9]),         # one start, different lengths
    ([100, 0, 100], [50, 1, 50]),   # a repeat, out of order
])
def test_overlapping_ranges_fall_back(buf, monkeypatch, starts, lengths):
    monkeypatch.setattr(gather, "SMALL_GATHER", 0)
    assert gather_ranges(buf, starts, lengths).tobytes() == _reference(buf, starts, lengths)
    assert gather_ranges_arrow(buf, starts, lengths).to_pylist() == [
        buf[s : s + n].tobytes() for s, n in zip(starts, lengths)
    ]


def test_gather_ranges_edge_cases(buf):
    assert gather_ranges(buf, [], []).size == 0
    assert gather_ranges(buf, [3, 9], [0, 0]).size == 0
    assert gather_ranges(buf, [len(buf) - 4], [4]).tobytes() == buf[-4:].tobytes()
    assert len(gather_ranges_arrow(buf, [], [])) == 0


@pytest.mark.parametrize("fn", [gather_ranges, gather_ranges_arrow])
@pytest.mark.parametrize("starts,lengths", [([49_997], [4]), ([-1], [2]), ([0], [-1])])
def test_gather_ranges_refuses_out_of_bounds(buf, fn, starts, lengths):
    with pytest.raises(IndexError, match="outside the buffer"):
        fn(buf, starts, lengths)


def test_gather_ranges_needs_a_byte_buffer():
    with pytest.raises(TypeError, match="1-D uint8"):
        gather_ranges(np.zeros(4, np.int32), [0], [1])
    with pytest.raises(ValueError, match="2 starts but 1 lengths"):
        gather_ranges(np.zeros(4, np.uint8), [0, 1], [1])


def test_gather_rows(buf):
    starts = np.random.default_rng(2).integers(0, len(buf) - 76, 1000)
    got = gather_rows(buf, starts, 76)
    assert got.shape == (1000, 76) and got.dtype == np.uint8 and got.flags.c_contiguous
    np.testing.assert_array_equal(got, np.stack([buf[s : s + 76] for s in starts]))
    assert gather_rows(buf, [], 8).shape == (0, 8)
    assert gather_rows(buf, [5], 0).shape == (1, 0)
    np.testing.assert_array_equal(gather_rows(buf, [len(buf) - 8], 8)[0], buf[-8:])
    for bad in ([len(buf) - 7], [-1]):
        with pytest.raises(IndexError, match="outside the buffer"):
            gather_rows(buf, bad, 8)


def test_gather_rows_reads_read_only_buffers():
    data = np.frombuffer(bytes(range(256)) * 4, dtype=np.uint8)
    assert not data.flags.writeable
    np.testing.assert_array_equal(gather_rows(data, [250, 3], 2), [[250, 251], [3, 4]])


@pytest.mark.parametrize("path", ["index", "arrow", "views"])
def test_str_and_bytes_decode_ranges(monkeypatch, path):
    monkeypatch.setattr(gather, "SMALL_GATHER", 1 << 40 if path == "index" else 0)
    if path != "views":  # a pyarrow without binary_view arrays: through take (or the index)
        monkeypatch.setattr(gather, "_VIEWS", [False])
    values = ["", "héllo", "日本語テキスト", "", "a" * 300, "emoji 🎉", "\x00nul"]
    raw = [v.encode() for v in values]
    buf = np.frombuffer(b"|".join(raw), dtype=np.uint8)
    starts = np.cumsum([0] + [len(r) + 1 for r in raw[:-1]])
    lengths = np.array([len(r) for r in raw])
    order = np.array([4, 1, 0, 6, 2, 1, 3, 5, 0])
    strs = get_encoding("str").decode_ranges(buf, starts[order], lengths[order])
    assert strs.dtype == object and list(strs) == [values[i] for i in order]
    assert all(type(s) is str for s in strs)
    blobs = get_encoding("bytes").decode_ranges(buf, starts[order], lengths[order])
    assert blobs.dtype == object and list(blobs) == [raw[i] for i in order]
    assert all(type(b) is bytes for b in blobs)
    empty = get_encoding("str").decode_ranges(buf, [], [])
    assert empty.dtype == object and empty.shape == (0,)


needs_views = pytest.mark.skipif(not gather._views_supported(), reason="pyarrow < 17: no binary_view arrays over a buffer")


@needs_views
@pytest.mark.parametrize("size", [50_000, 30, 5])
def test_gather_ranges_views_equal_slicing(size):
    # Inline values (<= 12 bytes) and pointed-to ones, empty ranges, repeats and overlaps (views
    # may share bytes), ranges ending at the buffer's last byte (the 12-byte window runs past it).
    rng = np.random.default_rng(3)
    buf = rng.integers(0, 256, size, dtype=np.uint8)
    lengths = rng.choice([0, 1, 4, 11, 12, 13, 40, 300], 2000)
    lengths = np.minimum(lengths, size)
    starts = rng.integers(0, size - lengths + 1)
    tail = np.arange(min(size, 14))  # every range that ends at the last byte
    starts = np.concatenate([starts, size - tail, [0]])
    lengths = np.concatenate([lengths, tail, [size]])
    arr = gather_ranges_views(buf, starts, lengths)
    assert str(arr.type) == "binary_view"
    arr.validate(full=True)
    assert arr.to_pylist() == [buf[s : s + n].tobytes() for s, n in zip(starts, lengths)]
    assert len(gather_ranges_views(buf, [], [])) == 0
    with pytest.raises(IndexError, match="outside the buffer"):
        gather_ranges_views(buf, [size - 1], [2])


@needs_views
@pytest.mark.parametrize("choices", [[0, 1, 5, 12], [13, 40, 300]], ids=["all-inline", "none-inline"])
def test_gather_ranges_views_of_one_kind_equal_slicing(choices):
    rng = np.random.default_rng(4)
    buf = rng.integers(0, 256, 20_000, dtype=np.uint8)
    lengths = rng.choice(choices, 500)
    starts = np.concatenate([rng.integers(0, len(buf) - lengths[:-1] + 1), [len(buf) - lengths[-1]]])
    arr = gather_ranges_views(buf, starts, lengths)
    arr.validate(full=True)
    assert arr.to_pylist() == [buf[s : s + n].tobytes() for s, n in zip(starts, lengths)]


@pytest.mark.parametrize("size", [0, 1, 12, 16, 256])
def test_values_of_one_length_decode_through_whole_rows(size):
    # One gather of whole rows, not views: every byte kept (trailing NULs too), in order, repeats.
    rng = np.random.default_rng(5)
    raw = [bytes(rng.integers(0, 256, size, dtype=np.uint8)) for _ in range(40)]
    raw[3] = b"\x00" * size
    text = ["".join(rng.choice(list("aé日\x00"), size // 4)) for _ in range(40)]
    text = [t + "x" * (size - len(t.encode())) for t in text]  # `size` bytes of UTF-8 each
    order = np.concatenate([rng.permutation(40), [7, 7, 0]])
    for values, name, to_bytes in ((raw, "bytes", bytes), (text, "str", str.encode)):
        enc = [to_bytes(v) for v in values]
        buf = np.frombuffer(b"".join(enc), dtype=np.uint8)
        starts = np.arange(40) * size
        got = get_encoding(name).decode_ranges(buf, starts[order], np.full(len(order), size))
        assert got.dtype == object and list(got) == [values[i] for i in order]
        assert all(type(v) is type(values[0]) for v in got)
    if size >= 2:  # one length, bytes that are not UTF-8: refused as in the other paths
        buf = np.frombuffer(b"ok" + b"\xff\xfe" + b"k" * (size - 2) * 2, dtype=np.uint8)
        with pytest.raises(EncodingError, match="not valid UTF-8"):
            get_encoding("str").decode_ranges(buf, [2, 0], [size, size])


@needs_views
def test_gather_ranges_views_leave_positions_past_int32_to_take(monkeypatch):
    big = np.zeros(16, dtype=np.uint8)
    monkeypatch.setattr(gather, "_check_ranges", lambda *a: None)  # pretend a 2+ GiB shard
    assert gather_ranges_views(big, np.array([1 << 31]), np.array([1])) is None


def test_str_decode_ranges_refuses_invalid_utf8():
    buf = np.frombuffer(b"ok\xff\xfe", dtype=np.uint8)
    with pytest.raises(EncodingError, match="not valid UTF-8"):
        get_encoding("str").decode_ranges(buf, [0, 2], [2, 2])
    assert list(get_encoding("bytes").decode_ranges(buf, [2], [2])) == [b"\xff\xfe"]


def test_generic_encodings_decode_ranges_through_the_per_sample_path():
    raw = [b'{"a": 1}', b"[1, 2]", b'"x"']
    buf = np.frombuffer(b"".join(raw), dtype=np.uint8)
    starts = np.array([0, 8, 14])
    got = get_encoding("json").decode_ranges(buf, starts[[2, 0, 1]], np.array([3, 8, 6]))
    assert list(got) == ["x", {"a": 1}, [1, 2]]


def test_positions_sort_like_argsort():
    from petastream.columns.gather import _argsort_positions

    rng = np.random.default_rng(3)
    for high in (1 << 10, 1 << 20, (1 << 32) - 1, 1 << 40):  # one digit, two, the edge, fallback
        starts = rng.integers(0, high, 5000, dtype=np.int64)
        starts[::7] = starts[0]  # ties keep their order (stable)
        assert np.array_equal(_argsort_positions(starts), np.argsort(starts, kind="stable"))


def test_ranges_as_ragged_give_the_values_bytes_and_check_utf8():
    from petastream.columns.text import ranges_as_ragged

    buf = np.frombuffer("héllo, wörld".encode() + b"\xff\xfe", dtype=np.uint8)
    starts, lengths = np.array([7, 0, 5, 0]), np.array([6, 6, 0, 1])  # any order, empty, repeats
    col = ranges_as_ragged(buf, starts, lengths, utf8=True)
    want = [buf[s:s + n].tobytes() for s, n in zip(starts, lengths)]
    assert [col[i].tobytes() for i in range(len(col))] == want and col.offsets[0] == 0
    with pytest.raises(EncodingError, match="not valid UTF-8"):
        ranges_as_ragged(buf, [len(buf) - 2], [2], utf8=True)
    assert ranges_as_ragged(buf, [len(buf) - 2], [2], utf8=False)[0].tobytes() == b"\xff\xfe"
    assert len(ranges_as_ragged(buf, [], [], utf8=True)) == 0


def test_a_dataset_reads_strings_as_ragged_bytes_on_request(tmp_path):
    from petastream.columns.ragged import Ragged
    from petastream.mds.dataset import MDSDataset
    from petastream.mds.writer import write_mds

    n = 300
    s = np.array([f"s{i}é" * (i % 4) for i in range(n)], dtype=object)
    b = np.array([bytes([i % 256]) * (i % 5) for i in range(n)], dtype=object)
    write_mds({"id": np.arange(n), "s": s, "b": b}, str(tmp_path / "ds"), size_limit=2000)
    ds = MDSDataset(str(tmp_path / "ds"))
    ids = np.random.default_rng(0).permutation(n)[:200]  # across shards, shuffled
    assert ds.num_shards > 2
    objects = ds.read(ids)
    ds.strings = "ragged"
    ragged = ds.read(ids)
    assert isinstance(ragged["s"], Ragged) and isinstance(ragged["b"], Ragged)
    assert [ragged["s"][i].tobytes().decode() for i in range(len(ids))] == list(objects["s"])
    assert [ragged["b"][i].tobytes() for i in range(len(ids))] == list(objects["b"])
    assert ragged["id"].tolist() == objects["id"].tolist()
