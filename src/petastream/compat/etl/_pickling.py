"""The pickles in a Petastorm dataset's metadata: read without running code, written for Petastorm.

Petastorm stores its ``Unischema`` (key ``dataset-toolkit.unischema.v1``) and its row-group
indexes (``dataset-toolkit.rowgroups_index.v1``) in ``_common_metadata`` as pickles naming
Petastorm's classes (``petastorm.unischema.Unischema``, ``petastorm.codecs.ScalarCodec``...),
pyspark types, numpy scalar types and ``decimal.Decimal``.

Reading (:func:`restricted_loads`): every global the pickle names is looked up in a fixed table
that maps it onto petastream's own class (pyspark types onto stand-ins: no pyspark import);
any other name, ``os.system`` included, raises :class:`ForbiddenGlobalError` before anything is
called. Petastorm's old package names (``av.ml.dataset_toolkit``...) map like ``petastorm``.

Writing (:func:`petastorm_dumps`): a pickle Petastorm 0.13.1 (numpy 1.x, pyspark 3 or 4) loads:
petastream's classes are written under Petastorm's module names, stand-ins under
``pyspark.sql.types``, and numpy names as numpy 1.x spells them (numpy 2 pickles ``np.bool_`` as
``numpy.bool``, which numpy 1.x lacks, and its scalar constructor under ``numpy._core``).
Protocol 4, as Petastorm writes on Python >= 3.8.
"""

from __future__ import annotations

import copyreg
import datetime
import io
import pickle
from collections import OrderedDict, defaultdict
from decimal import Decimal
from typing import Any

import numpy as np

from petastream.compat import codecs
from petastream.compat._spark_types import STAND_INS
from petastream.compat.etl import rowgroup_indexers
from petastream.compat.unischema import Unischema, UnischemaField
from petastream.errors import PetastreamError

__all__ = ["ForbiddenGlobalError", "restricted_loads", "petastorm_dumps"]

PROTOCOL = 4
_LEGACY_PACKAGES = ("av.experimental.deepdrive.dataset_toolkit", "av.ml.dataset_toolkit")


class ForbiddenGlobalError(PetastreamError, pickle.UnpicklingError):
    """A metadata pickle names a global outside the Petastorm schema vocabulary."""


# numpy's scalar constructor (what a pickled numpy scalar calls): numpy.core.multiarray.scalar
# in numpy 1.x, numpy._core.multiarray.scalar in numpy 2.
_NUMPY_SCALAR = np.int32(0).__reduce__()[0]

_PETASTORM_CLASSES: dict[tuple[str, str], Any] = {
    ("petastorm.unischema", "Unischema"): Unischema,
    ("petastorm.unischema", "UnischemaField"): UnischemaField,
    **{("petastorm.codecs", c.__name__): c for c in (
        codecs.DataframeColumnCodec, codecs.ScalarCodec, codecs.NdarrayCodec,
        codecs.CompressedNdarrayCodec, codecs.CompressedImageCodec)},
    **{("petastorm.etl.rowgroup_indexers", c.__name__): c for c in (
        rowgroup_indexers.SingleFieldIndexer, rowgroup_indexers.FieldNotNullIndexer)},
    **{("pyspark.sql.types", name): cls for name, cls in STAND_INS.items()},
}

# Names numpy 1.x pickles that numpy 2 removed or renamed (and numpy 2's own 'bool').
_NUMPY_ALIASES = {"string_": np.bytes_, "unicode_": np.str_, "float_": np.float64,
                  "complex_": np.complex128, "bool8": np.bool_, "object0": np.object_,
                  "str0": np.str_, "bytes0": np.bytes_, "int0": np.intp, "uint0": np.uintp,
                  "bool": np.bool_, "bool_": np.bool_}

_SAFE_BUILTINS = {t.__name__: t for t in (object, set, frozenset, list, tuple, dict, str, bytes,
                                          bytearray, int, float, complex, bool, slice)}
_OTHER_SAFE: dict[tuple[str, str], Any] = {
    ("collections", "OrderedDict"): OrderedDict,
    ("collections", "defaultdict"): defaultdict,
    ("decimal", "Decimal"): Decimal,
    ("numpy", "dtype"): np.dtype,
    ("numpy.core.multiarray", "scalar"): _NUMPY_SCALAR,
    ("numpy._core.multiarray", "scalar"): _NUMPY_SCALAR,
    # Protocol 0/1 pickles (Python 2 era datasets) build objects through copyreg.
    ("copy_reg", "_reconstructor"): copyreg._reconstructor,  # type: ignore[attr-defined]
    ("copyreg", "_reconstructor"): copyreg._reconstructor,  # type: ignore[attr-defined]
    **{("datetime", c.__name__): c for c in (datetime.date, datetime.datetime, datetime.timedelta,
                                             datetime.time, datetime.timezone)},
}


def _numpy_scalar_type(name: str) -> Any:
    if name in _NUMPY_ALIASES:
        return _NUMPY_ALIASES[name]
    candidate = getattr(np, name, None)
    if isinstance(candidate, type) and issubclass(candidate, np.generic):
        return candidate
    return None


def _resolve(module: str, name: str) -> Any:
    for legacy in _LEGACY_PACKAGES:
        if module.startswith(legacy + "."):
            module = "petastorm" + module[len(legacy):]
    found = _PETASTORM_CLASSES.get((module, name)) or _OTHER_SAFE.get((module, name))
    if found is None and module in ("builtins", "__builtin__"):
        found = _SAFE_BUILTINS.get(name)
    if found is None and module == "numpy":
        found = _numpy_scalar_type(name)
    return found


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        found = _resolve(module, name)
        if found is None:
            raise ForbiddenGlobalError(
                f"global '{module}.{name}' is forbidden: a Petastorm dataset's metadata may only "
                "name Petastorm's Unischema, codec and row-group indexer classes, pyspark types, "
                "numpy scalar types and Decimal, and this one could run code on read. A custom "
                "codec class cannot be read (Petastorm 0.13 refuses it too): store the field with "
                "one of Petastorm's codecs and rewrite the metadata with materialize_dataset")
        return found


def restricted_loads(data: bytes) -> Any:
    """Unpickle Petastorm metadata into petastream's classes (see the module docstring)."""
    return _RestrictedUnpickler(io.BytesIO(data)).load()


def _numpy_name(t: type) -> str:
    return "bool_" if t is np.bool_ else t.__name__


def _written_name(obj: Any) -> tuple[str, str] | None:
    """The (module, name) Petastorm's side knows ``obj`` by, where it differs from ours."""
    if obj is _NUMPY_SCALAR:
        return "numpy.core.multiarray", "scalar"
    if isinstance(obj, type):
        name = _numpy_name(obj) if issubclass(obj, np.generic) else None
        if name is not None and getattr(np, name, None) is obj:
            return "numpy", name
        for key, cls in _PETASTORM_CLASSES.items():
            if cls is obj:
                return key
    return None


class _PetastormPickler(pickle._Pickler):
    # The pure-Python pickler: its save_global can name a class after a module that does not
    # exist here (petastorm), which the C pickler refuses to do.
    def save_global(self, obj: Any, name: str | None = None) -> None:
        pickler: Any = self  # typeshed leaves the pure-Python pickler's internals out
        target = _written_name(obj)
        if target is None:
            pickle._Pickler.save_global(pickler, obj, name)  # type: ignore[attr-defined]
            return
        pickler.save(target[0])
        pickler.save(target[1])
        pickler.write(pickle.STACK_GLOBAL)
        pickler.memoize(obj)


def petastorm_dumps(obj: Any) -> bytes:
    """Pickle a Unischema or an index dict the way Petastorm 0.13.1 reads it."""
    out = io.BytesIO()
    _PetastormPickler(out, protocol=PROTOCOL).dump(obj)
    return out.getvalue()
