"""``make_reader(schema_fields=NGram(...))``: windows of consecutive rows, as Petastorm 0.13.1
forms them over the same fixture (recorded: 4 row groups of ids 0-3, 4-7, 8-11, 12-15)."""

from __future__ import annotations

import os

import pytest

from petastream.compat import make_reader
from petastream.compat.ngram import NGram

INDEXED = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "petastorm", "indexed")
PAIRS = [[0, 1], [1, 2], [2, 3], [4, 5], [5, 6], [6, 7], [8, 9], [9, 10], [10, 11], [12, 13], [13, 14], [14, 15]]


def _grams(ngram: NGram, **kwargs) -> list[dict]:
    with make_reader(INDEXED, schema_fields=ngram, shuffle_row_groups=False, **kwargs) as reader:
        return list(reader)


def test_pairs_within_row_groups():
    grams = _grams(NGram({-1: ["id", "label"], 0: ["id", "vec"]}, 1, "id"))
    assert [[int(g[-1].id), int(g[0].id)] for g in grams] == PAIRS  # never across row groups
    assert sorted(grams[0]) == [-1, 0]
    assert list(grams[0][-1]._fields) == ["id", "label"] and list(grams[0][0]._fields) == ["id", "vec"]
    assert type(grams[0][0]).__name__ == "Indexed_view_view_view"
    assert grams[0][0].vec.shape == (4,)


def test_no_overlap_and_an_empty_offset():
    grams = _grams(NGram({0: ["id"], 2: ["id", "label"]}, 5, "id", timestamp_overlap=False))
    assert [[int(g[0].id), int(g[2].id)] for g in grams] == [[0, 2], [4, 6], [8, 10], [12, 14]]
    assert list(grams[0][1]._fields) == []


def test_row_drop_partitions_keep_every_window():
    grams = _grams(NGram({0: ["id"], 1: ["id"]}, 1, "id"), shuffle_row_drop_partitions=2, workers_count=2)
    assert sorted([int(g[0].id), int(g[1].id)] for g in grams) == PAIRS


def test_delta_threshold_and_order():
    assert _grams(NGram({0: ["id"], 1: ["id"]}, 0, "id")) == []
    with pytest.raises(NotImplementedError, match="NGram assumes that the data is sorted by id"):
        _grams(NGram({0: ["id"], 1: ["id"]}, 1, "id"), shuffle_rows=True, seed=1)


def test_petastorms_argument_checks():
    with pytest.raises(ValueError, match="Fields must be set and must be a dictionary."):
        NGram([["id"]], 1, "id")
    with pytest.raises(ValueError, match="delta_threshold must be a number."):
        NGram({0: ["id"]}, None, "id")
    with pytest.raises(NotImplementedError, match="timestamp_overlap=False is not implemented"):
        make_reader(INDEXED, schema_fields=NGram({0: ["id"], 1: ["id"]}, 1, "id", timestamp_overlap=False),
                    shuffle_row_drop_partitions=2)
