"""numpy str/bytes arrays into MDS on every supported pyarrow (issue #15, point 1).

pyarrow 14-19 cannot convert a numpy string array to ``large_string`` directly; the writer
falls back to ``string``. The minimum-versions CI run (scripts/min_versions.sh) runs these on
pyarrow 14; here the old behaviour is also simulated on the current pyarrow.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import petastream

STRS = np.array(["a", "bb", "", "ünï", "x" * 300])
BYTES = np.array([b"a", b"bb", b"", b"\x01\xff", b"y" * 300])


def _round_trip(tmp_path, columns=None):
    out = str(tmp_path / "ds")
    petastream.write_mds({"id": np.arange(len(STRS)), "s": STRS, "b": BYTES}, out, columns=columns)
    ds = petastream.open(out)
    cols = ds.read(np.arange(len(STRS)))
    assert list(cols["s"]) == list(STRS) and list(cols["b"]) == list(BYTES)
    return ds


def test_numpy_string_arrays_round_trip(tmp_path):
    ds = _round_trip(tmp_path, {"id": "int64", "s": "str", "b": "bytes"})
    assert ds[3]["s"] == "ünï"


def test_numpy_string_arrays_infer_their_encodings(tmp_path):
    assert _round_trip(tmp_path).columns == {"id": "int64", "s": "str", "b": "bytes"}


def test_pyarrow_without_numpy_large_string_conversion(tmp_path, monkeypatch):
    """What pyarrow < 20 does: numpy -> large_string/large_binary is not implemented."""
    real = pa.array

    def old_pyarrow_array(obj, type=None, **kwargs):
        if isinstance(obj, np.ndarray) and type in (pa.large_string(), pa.large_binary()):
            raise pa.ArrowNotImplementedError(f"NumPyConverter doesn't implement <{type}> conversion.")
        return real(obj, type=type, **kwargs)

    monkeypatch.setattr(pa, "array", old_pyarrow_array)
    _round_trip(tmp_path, {"id": "int64", "s": "str", "b": "bytes"})


@pytest.mark.parametrize("typ, name", [(pa.int8(), "int8"), (pa.uint16(), "uint16"),
                                       (pa.int64(), "int64"), (pa.float16(), "float16"),
                                       (pa.float64(), "float64")])
def test_arrow_numeric_types_map_to_numpy_without_pandas(typ, name):
    from petastream.mds.infer import encoding_for_arrow_type

    assert encoding_for_arrow_type("c", typ) == name
    assert encoding_for_arrow_type("c", pa.list_(typ, 3)) == f"ndarray:{name}:3"
