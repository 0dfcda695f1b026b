"""petastream.json: logical column types beside a Mosaic-exact index.json."""

from __future__ import annotations

import numpy as np
import pytest

from petastream.columns.ragged import Ragged
from petastream.errors import FormatError
from petastream.mds.sidecar import apply_logical, dump_sidecar, logical_dtypes, parse_sidecar


def test_round_trip_and_logical_dtypes():
    cols = {"flag": {"source_type": "boolean", "dtype": "bool"}, "id": {"source_type": "bigint"}}
    assert parse_sidecar(dump_sidecar(cols)) == cols
    assert logical_dtypes(cols) == {"flag": "bool"}


@pytest.mark.parametrize("data, match", [
    (b"{", "not valid JSON"),
    (b'{"format": "other", "columns": {}}', "not a petastream column file"),
    (b'{"format": "petastream.columns", "version": 9, "columns": {}}', "version 9.*upgrade petastream"),
])
def test_bad_files_are_refused(data, match):
    with pytest.raises(FormatError, match=match):
        parse_sidecar(data, "s3://b/ds/petastream.json")


def test_unknown_logical_dtype_is_refused_at_write():
    with pytest.raises(ValueError, match="column 'x': logical dtype 'date'"):
        dump_sidecar({"x": {"dtype": "date"}})


def test_views_are_zero_copy_including_strided_and_ragged_columns():
    packed = np.zeros(4, dtype=[("id", "<i8"), ("flag", "u1")])
    packed["flag"] = [1, 0, 1, 1]
    ragged = Ragged(np.array([1, 0, 1], np.uint8), np.array([0, 2, 3]))
    out = apply_logical({"flag": packed["flag"], "r": ragged, "id": packed["id"]}, {"flag": "bool", "r": "bool"})
    assert out["flag"].dtype == np.bool_ and out["flag"].tolist() == [True, False, True, True]
    assert np.shares_memory(out["flag"], packed)
    assert out["r"].values.dtype == np.bool_ and out["r"][0].tolist() == [True, False]
    assert out["id"].dtype == np.int64  # no logical type: untouched
