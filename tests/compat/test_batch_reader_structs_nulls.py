"""``make_batch_reader`` on Parquet files with struct columns and with nulls, and the torch and
TF loaders over it. The expected values, dtypes and warnings were recorded by running Petastorm
0.13.1 (pyarrow 14, pandas 2.2) over the same files; where compat differs on purpose, the test
says so (see docs/migrating.md)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from petastream.compat import make_batch_reader
from petastream.errors import NullValuesError

POINT = pa.struct([("a", pa.int32()), ("b", pa.string())])


def _write(directory, columns: dict, row_group_size: int | None = None) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), directory / "part-0.parquet", row_group_size=row_group_size)
    return str(directory)


@pytest.fixture(scope="module")
def structs(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("structs")
    return _write(root / "d", {
        "id": pa.array(range(6), pa.int64()),
        "st": pa.array([{"a": 0, "b": "x"}, None, {"a": None, "b": "z"}, {"a": 3, "b": None},
                        {"a": 4, "b": "q"}, {"a": 5, "b": "r"}], POINT),
        "ns": pa.array([{"inner": {"a": i, "b": str(i)}, "c": i * 0.5} for i in range(6)],
                       pa.struct([("inner", POINT), ("c", pa.float64())])),
        "m": pa.array([[("k", i)] for i in range(6)], pa.map_(pa.string(), pa.int32())),
        "ls": pa.array([[{"a": i, "b": "s"}] for i in range(6)], pa.list_(POINT)),
    })


@pytest.fixture(scope="module")
def nulls(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("nulls")
    return _write(root / "d", {
        "id": pa.array(range(6), pa.int64()),
        "i32": pa.array([1, None, 3, None, 5, 6], pa.int32()),
        "i8": pa.array([1, None, 3, 4, 5, 6], pa.int8()),
        "f32": pa.array([1.5, None, 3, 4, 5, 6], pa.float32()),
        "b": pa.array([True, None, False, True, True, False]),
        "s": pa.array(["a", None, "c", "d", "e", "f"]),
        "bin": pa.array([b"a", None, b"c", b"d", b"e", b"f"]),
        "dec": pa.array([Decimal("1.50"), None] + [Decimal(i) for i in range(3, 7)], pa.decimal128(10, 2)),
        "ts": pa.array([dt.datetime(2020, 1, 1, 1), None] + [dt.datetime(2020, 1, i) for i in range(3, 7)],
                       pa.timestamp("us")),
        "lf": pa.array([[1.0, 2], [None, 4], [5, 6], [7, 8], [9, 10], [11, 12]], pa.list_(pa.float64())),
        "li": pa.array([[1, 2], [None, 4], [5, 6], [7, 8], [9, 10], [11, 12]], pa.list_(pa.int32())),
        "ls": pa.array([["a", "b"], ["c", None], ["e", "f"], ["g", "h"], ["i", "j"], ["k", "l"]]),
        "lnull": pa.array([[1, 2], None, [5, 6], [7, 8], [9, 10], [11, 12]], pa.list_(pa.int32())),
    })


def _batch(url: str, **kwargs) -> dict:
    with make_batch_reader(url, shuffle_row_groups=False, workers_count=1, **kwargs) as reader:
        batches = [b._asdict() for b in reader]
    assert len(batches) == 1
    return batches[0]


# -- structs -----------------------------------------------------------------------------------

def test_struct_columns_are_left_out_with_petastorms_warning(structs):
    with pytest.warns(UserWarning) as caught:
        batch = _batch(structs)
    assert list(batch) == ["id"]
    np.testing.assert_array_equal(batch["id"], np.arange(6))
    messages = [str(w.message) for w in caught]
    # Petastorm 0.13.1's messages, word for word (the type is repr() of the Arrow type).
    assert "Column 'st' has an unsupported field StructType(struct<a: int32, b: string>). Ignoring..." in messages
    assert ("Column 'ns' has an unsupported field StructType(struct<inner: struct<a: int32, b: string>, "
            "c: double>). Ignoring...") in messages
    assert any(m.startswith("Column 'm' has an unsupported field MapType(") for m in messages)
    assert any(m.startswith("[ARROW-1644] Ignoring unsupported structure ListType(") and "'ls'" in m
               for m in messages)


@pytest.mark.filterwarnings("ignore:.*unsupported")
def test_selecting_a_struct_column(structs):
    with pytest.warns(UserWarning, match="Column 'st'"):
        assert list(_batch(structs, schema_fields=["id", "st"])) == ["id"]
    with pytest.warns(UserWarning, match="Column 'st'"), \
            pytest.raises(RuntimeError, match=r"No fields matching the criteria '\['st'\]' were found"):
        make_batch_reader(structs, schema_fields=["st"])


@pytest.mark.filterwarnings("ignore:.*unsupported")
def test_struct_columns_never_reach_the_loaders(structs):
    pytest.importorskip("torch")
    from petastream.compat.pytorch import BatchedDataLoader, DataLoader

    for loader_type in (DataLoader, BatchedDataLoader):
        with pytest.warns(UserWarning, match="Column 'st'"):
            reader = make_batch_reader(structs, shuffle_row_groups=False)
        with loader_type(reader, batch_size=4) as loader:
            batches = list(loader)
        assert [sorted(b) for b in batches] == [["id"], ["id"]]
        assert batches[0]["id"].tolist() == [0, 1, 2, 3]


# -- nulls -------------------------------------------------------------------------------------

def test_scalar_nulls_as_petastorm_gives_them(nulls):
    batch = _batch(nulls, schema_fields=["id", "i32", "i8", "f32", "b", "s", "bin", "dec", "ts"])
    assert batch["id"].dtype == np.int64
    # Integers holding nulls come as float64 with NaN (pandas), whatever their width.
    for name, expected in (("i32", [1, np.nan, 3, np.nan, 5, 6]), ("i8", [1, np.nan, 3, 4, 5, 6])):
        assert batch[name].dtype == np.float64
        np.testing.assert_array_equal(batch[name], expected)
    assert batch["f32"].dtype == np.float32
    np.testing.assert_array_equal(batch["f32"], np.array([1.5, np.nan, 3, 4, 5, 6], np.float32))
    assert batch["b"].dtype == object and list(batch["b"]) == [True, None, False, True, True, False]
    # Petastorm's astype(np.str_) writes a null string as the text 'None' (compat: an object array).
    assert list(batch["s"]) == ["a", "None", "c", "d", "e", "f"]
    assert list(batch["bin"]) == [b"a", None, b"c", b"d", b"e", b"f"]
    assert list(batch["dec"]) == [Decimal("1.50"), None, Decimal("3.00"), Decimal("4.00"), Decimal("5.00"),
                                  Decimal("6.00")]
    # datetime64 in the file's unit with NaT, as Petastorm's.
    assert batch["ts"].dtype == np.dtype("datetime64[us]")
    assert batch["ts"][0] == np.datetime64("2020-01-01T01:00:00") and np.isnat(batch["ts"][1])


def test_null_elements_in_arrays(nulls):
    batch = _batch(nulls, schema_fields=["lf", "ls"])
    np.testing.assert_array_equal(batch["lf"], [[1, 2], [np.nan, 4], [5, 6], [7, 8], [9, 10], [11, 12]])
    assert batch["lf"].dtype == np.float64
    assert list(batch["ls"][1]) == ["c", None]


def test_what_petastorm_fails_on_is_an_error_naming_the_column(nulls):
    # Petastorm: float64 with NaN for null integer elements; here an error (one dtype per source).
    with pytest.raises(NullValuesError, match="column 'li'.*null element"):
        _batch(nulls, schema_fields=["li"])
    # Petastorm: AttributeError ('NoneType' object has no attribute 'shape') on a null array.
    with pytest.raises(NullValuesError, match="column 'lnull'.*null array"):
        _batch(nulls, schema_fields=["lnull"])


def test_schema_fields_read_only_their_columns(nulls):
    # The column with a null array is not read when schema_fields leaves it out (as Petastorm).
    batch = _batch(nulls, schema_fields=["id", "i32"])
    assert sorted(batch) == ["i32", "id"]


def test_one_dtype_across_row_groups(tmp_path):
    # Petastorm's dtype is per row group (int32 where a row group holds no null); compat's is
    # per source, so a batch spanning row groups has one dtype.
    url = _write(tmp_path / "d", {"i": pa.array([1, 2, None, 4], pa.int32())}, row_group_size=2)
    batch = _batch(url)
    assert batch["i"].dtype == np.float64
    np.testing.assert_array_equal(batch["i"], [1, 2, np.nan, 4])


def test_null_policies_still_available(nulls):
    with pytest.raises(NullValuesError, match="column 'i32'"):
        make_batch_reader(nulls, null_policy="error", schema_fields=["i32"])
    batch = _batch(nulls, null_policy="fill", schema_fields=["i32", "s"])
    assert batch["i32"].dtype == np.int32 and list(batch["i32"]) == [1, 0, 3, 0, 5, 6]
    assert list(batch["s"]) == ["a", "", "c", "d", "e", "f"]


def test_torch_loaders_over_nulls(nulls):
    torch = pytest.importorskip("torch")
    from petastream.compat.pytorch import BatchedDataLoader, DataLoader

    for loader_type in (DataLoader, BatchedDataLoader):
        reader = make_batch_reader(nulls, schema_fields=["i32", "f32"], shuffle_row_groups=False)
        with loader_type(reader, batch_size=3) as loader:
            first = next(iter(loader))
        # As Petastorm 0.13.1: tensor([1., nan, 3.], dtype=torch.float64).
        assert first["i32"].dtype == torch.float64
        np.testing.assert_array_equal(first["i32"].numpy(), [1, np.nan, 3])
        assert first["f32"].dtype == torch.float32


@pytest.mark.filterwarnings("ignore:.*unsupported")
def test_tensorflow_over_nulls_and_structs(nulls, structs):
    tf = pytest.importorskip("tensorflow")
    from petastream.compat.tf_utils import make_petastorm_dataset

    with make_batch_reader(nulls, schema_fields=["i32", "b", "s"], shuffle_row_groups=False) as reader:
        batch = next(iter(make_petastorm_dataset(reader)))
    # As Petastorm 0.13.1: a null boolean is False in tf.bool, a null string b'None'.
    assert batch.b.dtype == tf.bool and batch.b.numpy().tolist() == [True, False, False, True, True, False]
    assert batch.s.numpy().tolist() == [b"a", b"None", b"c", b"d", b"e", b"f"]
    # Petastorm: tf.int32 with -2**31 for a null; here float64 with NaN (docs/migrating.md).
    assert batch.i32.dtype == tf.float64 and np.isnan(batch.i32.numpy()[1])
    with pytest.warns(UserWarning, match="Column 'st'"), make_batch_reader(structs) as reader:
        assert make_petastorm_dataset(reader).element_spec._fields == ("id",)
