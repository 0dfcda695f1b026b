"""The error policy: every class is a PetastreamError that also inherits a builtin, and every
one survives pickling (Spark executors, DataLoader workers) with its type and message."""

from __future__ import annotations

import pickle

import pytest

from petastream import errors
from petastream.spark import _errors as spark_errors

CLASSES = [getattr(errors, name) for name in errors.__all__]
BUILTINS = (ValueError, TypeError, OSError, RuntimeError, IndexError, KeyError, ImportError)


def test_every_name_in_all_is_an_error_class():
    assert all(isinstance(c, type) and issubclass(c, errors.PetastreamError) for c in CLASSES)
    names = {n for n in dir(errors) if isinstance(getattr(errors, n), type) and not n.startswith("_")
             and issubclass(getattr(errors, n), BaseException)}
    assert names == set(errors.__all__)  # none defined and left out of __all__


@pytest.mark.parametrize("cls", [c for c in CLASSES if c is not errors.PetastreamError],
                         ids=lambda c: c.__name__)
def test_each_class_also_inherits_a_builtin(cls):
    assert issubclass(cls, BUILTINS), cls.__mro__


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
def test_pickle_round_trip(cls, protocol):
    err = cls(f"column 'x': {cls.__name__} went wrong; do this instead")
    try:
        raise err
    except cls as raised:
        back = pickle.loads(pickle.dumps(raised, protocol=protocol))
    assert type(back) is cls
    assert str(back) == str(err) and back.args == err.args


def test_pickle_keeps_a_cause_free_message_for_os_errors():
    err = errors.StorageError("s3://b/x: access denied; check the credentials")
    back = pickle.loads(pickle.dumps(err))
    assert str(back) == "s3://b/x: access denied; check the credentials"
    assert isinstance(back, OSError) and back.errno is None


def test_unknown_column_error_reads_as_a_sentence():
    err = errors.UnknownColumnError("no column 'nope'; columns are ['id']")
    assert str(err) == "no column 'nope'; columns are ['id']"  # not KeyError's quoted repr
    assert isinstance(err, KeyError)
    with pytest.raises(KeyError, match=r"^no column 'nope'"):
        raise err


def test_spark_errors_are_the_root_modules():
    assert spark_errors.UnsupportedColumnError is errors.UnsupportedColumnError
    assert spark_errors.NullValuesError is errors.NullValuesError
    assert spark_errors.MaterializationError is errors.MaterializationError


def test_pipeline_errors_nest():
    assert issubclass(errors.SupersededError, errors.StateError)
    assert issubclass(errors.SupersededError, RuntimeError)
    assert issubclass(errors.ArenaError, OSError) and issubclass(errors.WorkerDiedError, RuntimeError)


# -- raises that used to be bare builtins: ours now, with the same builtin ----------------------
@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    import numpy as np

    from petastream.mds.dataset import MDSDataset
    from petastream.mds.writer import write_mds

    out = str(tmp_path_factory.mktemp("ds"))
    write_mds({"id": np.arange(10, dtype=np.int64), "s": [str(i) for i in range(10)]}, out,
              columns={"id": "int64", "s": "str"})
    return MDSDataset(out)


def test_dataset_raises_are_petastream_errors(dataset):
    import numpy as np

    with pytest.raises(errors.OutOfRangeError, match="sample 10 out of range for a dataset of 10"):
        dataset[10]
    with pytest.raises(IndexError):
        dataset.read(np.array([3, 99]))
    with pytest.raises(errors.OutOfRangeError, match=r"shard 5 out of range \(1 shards\)"):
        dataset.shard(5)
    with pytest.raises(errors.UnknownColumnError, match=r"^no column 'nope'; columns are \['id', 's'\]$"):
        dataset.read(np.array([1]), columns=["nope"])
    assert list(dataset) == [dataset[i] for i in range(10)]  # old-style iteration still ends


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"prefetch_depth": -1}, errors.InvalidArgumentError, r"prefetch_depth must be >= 0 \(shards loaded ahead"),
    ({"prefetch_workers": 0}, errors.InvalidArgumentError, r"prefetch_workers must be >= 1"),
    ({"prefetch_workers": True}, errors.InvalidArgumentTypeError, r"prefetch_workers must be an integer, got True"),
])
def test_dataset_arguments(dataset, kwargs, error, match):
    from petastream.mds.dataset import MDSDataset

    with pytest.raises(error, match=match):
        MDSDataset(dataset.url, **kwargs)


def test_dataset_takes_numpy_integers(dataset):
    import numpy as np

    from petastream.mds.dataset import MDSDataset

    assert len(MDSDataset(dataset.url, prefetch_depth=np.int64(2), prefetch_workers=np.int32(1))) == 10
