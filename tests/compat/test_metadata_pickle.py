"""The pickles in Petastorm metadata: read without running code, written with Petastorm's names."""

from __future__ import annotations

import io
import os
import pickle
from collections import OrderedDict

import numpy as np
import pyarrow.parquet as pq
import pytest

from petastream.compat.codecs import NdarrayCodec
from petastream.compat.etl import _pickling, dataset_metadata, rowgroup_indexing
from petastream.compat.etl._pickling import ForbiddenGlobalError, petastorm_dumps, restricted_loads
from petastream.compat.etl.rowgroup_indexers import FieldNotNullIndexer, SingleFieldIndexer
from petastream.compat.unischema import Unischema, UnischemaField

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "petastorm")


def _metadata(name: str) -> dict[bytes, bytes]:
    return pq.read_schema(os.path.join(FIXTURES, name, "_common_metadata")).metadata


def globals_named(data: bytes) -> set[tuple[str, str]]:
    """Every (module, name) a pickle refers to (loaded with the restricted unpickler)."""
    seen: set[tuple[str, str]] = set()

    class Recorder(_pickling._RestrictedUnpickler):
        def find_class(self, module, name):
            seen.add((module, name))
            return super().find_class(module, name)

    Recorder(io.BytesIO(data)).load()
    return seen


class _Evil:
    def __reduce__(self):
        return os.system, ("echo pwned",)


class _CustomCodec(NdarrayCodec):
    pass


def test_code_running_globals_are_refused():
    with pytest.raises(ForbiddenGlobalError, match=r"global '(posix|os)\.system' is forbidden"):
        restricted_loads(pickle.dumps(_Evil()))
    with pytest.raises(pickle.UnpicklingError, match=r"global 'builtins\.eval' is forbidden"):
        restricted_loads(b"\x80\x04cbuiltins\neval\n\x8c\x011\x85R.")
    with pytest.raises(ForbiddenGlobalError, match="A custom codec class cannot be read"):
        restricted_loads(pickle.dumps(UnischemaField("x", np.int32, (2,), _CustomCodec(), False)))


def test_petastorm_legacy_package_names():
    data = b"\x80\x02cav.ml.dataset_toolkit.codecs\nNdarrayCodec\nq\x00)\x81q\x01."
    assert type(restricted_loads(data)) is NdarrayCodec


def test_numpy_1_names_numpy_2_removed():
    assert restricted_loads(b"\x80\x02cnumpy\nunicode_\n.") is np.str_
    assert restricted_loads(b"\x80\x02cnumpy\nstring_\n.") is np.bytes_
    assert restricted_loads(b"\x80\x02cnumpy\nbool\n.") is np.bool_


def test_protocol_2_and_0_pickles_of_a_schema():
    schema = dataset_metadata.get_schema(os.path.join(FIXTURES, "all_codecs"))
    for protocol in (0, 2):
        out = io.BytesIO()
        _pickling._PetastormPickler(out, protocol=protocol).dump(schema)
        loaded = restricted_loads(out.getvalue())
        assert str(loaded) == str(schema) and loaded.fields == schema.fields


@pytest.mark.parametrize("name", ["all_codecs", "indexed", "partitioned"])
def test_rewritten_schema_names_what_petastorm_names(name):
    """CI cannot run Petastorm: what we write must name exactly the globals Petastorm's pickle
    of the same schema names, and load back to the same schema."""
    theirs = _metadata(name)[dataset_metadata.UNISCHEMA_KEY]
    schema = restricted_loads(theirs)
    ours = petastorm_dumps(schema)
    assert ours[:2] == b"\x80\x04"
    assert globals_named(ours) == globals_named(theirs)
    again = restricted_loads(ours)
    assert str(again) == str(schema)
    assert vars(again).keys() == vars(schema).keys()  # _name, _fields and one entry per field
    for a, b in zip(again.fields.values(), schema.fields.values()):
        assert tuple(a[:3]) + (a.nullable,) == tuple(b[:3]) + (b.nullable,)
        assert type(a.codec) is type(b.codec) and getattr(a.codec, "__dict__", None) == getattr(b.codec, "__dict__", None)


def test_schema_built_with_pyspark_types_pickles_like_petastorm_s():
    import pyspark.sql.types as T

    from petastream.compat.codecs import CompressedImageCodec, ScalarCodec

    schema = Unischema("S", [UnischemaField("b", np.bool_, (), ScalarCodec(T.BooleanType()), False),
                             UnischemaField("i", np.uint8, (2, 2), CompressedImageCodec("jpeg", 70), True)])
    names = globals_named(petastorm_dumps(schema))
    assert ("numpy", "bool_") in names  # numpy 2 alone would write numpy.bool, unknown to numpy 1.x
    assert names <= globals_named(_metadata("all_codecs")[dataset_metadata.UNISCHEMA_KEY])


def test_index_pickle_names_what_petastorm_names():
    theirs = _metadata("indexed")[rowgroup_indexing.ROWGROUPS_INDEX_KEY]
    label = SingleFieldIndexer("label_idx", "label")
    label.build_index([{"label": np.str_("cat")}], 0)
    note = FieldNotNullIndexer("note_idx", "note")
    note.build_index([{"note": "x"}], 2)
    ours = petastorm_dumps(OrderedDict([("label_idx", label), ("note_idx", note)]))
    index_names = {n for n in globals_named(theirs) if n[0] in ("numpy", "numpy.core.multiarray", "builtins",
                                                                 "collections") or "rowgroup" in n[0]}
    assert globals_named(ours) <= index_names | {("collections", "OrderedDict")}
    loaded = restricted_loads(ours)
    assert loaded["label_idx"].get_row_group_indexes("cat") == {0}
    assert loaded["note_idx"].get_row_group_indexes() == {2}
