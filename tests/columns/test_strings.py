"""str/bytes columns as Ragged bytes: the gather, its UTF-8 check, the scatter of same-length rows."""

from __future__ import annotations

import numpy as np
import pytest

from petastream.columns.ops import scatter_columns
from petastream.columns.ragged import Ragged
from petastream.columns.strings import as_ragged_bytes, jagged_columns
from petastream.columns.text import ranges_as_ragged, ranges_to_objects
from petastream.errors import EncodingError, InvalidArgumentError


def _ragged(values: list[bytes]) -> Ragged:
    return as_ragged_bytes("c", np.array(values, dtype=object), "bytes")


def _rows(r: Ragged) -> list[bytes]:
    return [bytes(r[i]) for i in range(len(r))]


@pytest.mark.parametrize("lengths", [[3, 3, 3, 3], [1, 4, 0, 2]])
def test_ranges_as_ragged_equals_objects(lengths):
    buf = np.frombuffer("aé€bcdefghijklmnop".encode() * 4, dtype=np.uint8)
    starts = np.array([20, 0, 7, 14])[: len(lengths)]
    lengths = np.array(lengths)
    got = ranges_as_ragged(buf, starts, lengths, utf8=False)
    assert _rows(got) == list(ranges_to_objects(buf, starts, lengths, "bytes"))
    assert got.offsets[0] == 0 and got.offsets[-1] == lengths.sum()


def test_utf8_checked_value_by_value():
    text = "é".encode()  # two bytes: each alone is not UTF-8, together they are
    buf = np.frombuffer(b"ab" + text, dtype=np.uint8)
    ok = ranges_as_ragged(buf, np.array([0, 2]), np.array([2, 2]), utf8=True)
    assert [bytes(v).decode() for v in ok.to_list()] == ["ab", "é"]
    with pytest.raises(EncodingError, match="'str' column holds bytes that are not valid UTF-8"):
        ranges_as_ragged(buf, np.array([0, 2]), np.array([3, 1]), utf8=True)  # "ab\xc3", "\xa9"
    ascii_only = ranges_as_ragged(buf, np.array([1, 0]), np.array([1, 1]), utf8=True)
    assert _rows(ascii_only) == [b"b", b"a"]


@pytest.mark.parametrize("same", [True, False])
def test_scatter_of_ragged_parts(same):
    a = _ragged([b"aaaa", b"bbbb"] if same else [b"a", b"bbbb"])
    b = _ragged([b"cccc", b"dddd", b"eeee"])
    positions = [np.array([3, 0]), np.array([1, 4, 2])]
    out = scatter_columns([{"c": a}, {"c": b}], positions, 5)["c"]
    expect = [None] * 5
    for part, pos in zip((a, b), positions):
        for row, p in zip(_rows(part), pos):
            expect[p] = row
    assert _rows(out) == expect and out.offsets[0] == 0


def test_scatter_with_an_empty_part():
    a = _ragged([])
    b = _ragged([b"xy", b"zw"])
    out = scatter_columns([{"c": a}, {"c": b}], [np.zeros(0, np.int64), np.array([1, 0])], 2)["c"]
    assert _rows(out) == [b"zw", b"xy"]


def test_jagged_columns():
    enc = {"s": "str", "b": "bytes", "x": "int64"}
    assert jagged_columns("jagged", enc, ["s", "b", "x"]) == {"s": "str", "b": "bytes"}
    assert jagged_columns("objects", enc, ["s", "b", "x"]) == {}
    assert jagged_columns({"b": "jagged", "s": "objects"}, enc, ["s", "b"]) == {"b": "bytes"}
    assert jagged_columns("jagged", enc, ["s"], null_policy="petastorm") == {"s": "str"}  # 'None' text
    with pytest.raises(InvalidArgumentError, match=r"columns \['s'\]: null_policy='rows'"):
        jagged_columns("jagged", enc, ["s"], null_policy="rows")
