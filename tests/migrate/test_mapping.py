"""The Petastorm -> petastream.compat table, and its agreement with the compat modules."""

from __future__ import annotations

import importlib

import pytest

from petastream.migrate.mapping import _MODULES, Resolved, Unsupported, resolve


@pytest.mark.parametrize(
    ("path", "new", "consumed"),
    [
        ("petastorm.spark", "petastream.compat", 2),
        ("petastorm.spark.make_spark_converter", "petastream.compat.make_spark_converter", 3),
        ("petastorm.spark.SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF", "petastream.compat.SparkDatasetConverter", 3),
        ("petastorm.spark.spark_dataset_converter", "petastream.compat.spark_dataset_converter", 3),
        (
            "petastorm.spark.spark_dataset_converter.make_batch_reader",
            "petastream.compat.spark_dataset_converter.make_batch_reader",
            4,
        ),
        ("petastorm.pytorch.decimal_friendly_collate", "petastream.compat.pytorch.decimal_friendly_collate", 3),
        ("petastorm.TransformSpec", "petastream.compat.TransformSpec", 2),
        ("petastorm.transform.edit_field", "petastream.compat.edit_field", 3),
    ],
)
def test_resolved(path: str, new: str, consumed: int) -> None:
    result = resolve(path)
    assert isinstance(result, Resolved)
    assert (result.new, result.consumed) == (new, consumed)


@pytest.mark.parametrize(
    ("path", "reported"),
    [
        ("petastorm", "petastorm"),
        ("petastorm.make_reader", "petastorm.make_reader"),
        ("petastorm.spark.converter.parentCacheDirUrl", "petastorm.spark.converter"),
        ("petastorm.transform", "petastorm.transform"),
        ("petastorm.etl.dataset_metadata.materialize_dataset", "petastorm.etl.dataset_metadata.materialize_dataset"),
        ("petastorm.spark.spark_dataset_converter._no_such_helper", "petastorm.spark.spark_dataset_converter._no_such_helper"),
        ("petastorm.unknown.thing", "petastorm.unknown"),
    ],
)
def test_unsupported(path: str, reported: str) -> None:
    result = resolve(path)
    assert isinstance(result, Unsupported)
    assert result.path == reported
    assert result.suggestion


def test_non_petastorm_path_is_refused() -> None:
    with pytest.raises(ValueError, match="not a petastorm path"):
        resolve("petastream.compat")


def _mapped() -> list[tuple[str, str]]:
    out = []
    for source, module in _MODULES.items():
        if module.target is not None:
            out.append((source, module.target))
        out += [(f"{source}.{name}", new) for name, new in module.names.items()]
    return out


@pytest.mark.parametrize(("source", "new"), _mapped(), ids=[m[0] for m in _mapped()])
def test_every_mapped_name_exists_in_compat(source: str, new: str) -> None:
    try:
        importlib.import_module(new)
        return
    except ImportError:
        module, _, attr = new.rpartition(".")
    assert hasattr(importlib.import_module(module), attr), f"{source} maps to missing {new}"
