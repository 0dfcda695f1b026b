"""``mock.patch("petastorm...")`` target strings follow the code to petastream.compat."""

from __future__ import annotations

import pytest

from .conftest import assert_migrates

PAIRS = [
    ('patch("petastorm.spark.make_spark_converter")', 'patch("petastream.compat.make_spark_converter")'),
    (
        "mock.patch('petastorm.spark.spark_dataset_converter.make_batch_reader')",
        "mock.patch('petastream.compat.spark_dataset_converter.make_batch_reader')",
    ),
    (
        'unittest.mock.patch(target="petastorm.pytorch.DataLoader", autospec=True)',
        'unittest.mock.patch(target="petastream.compat.pytorch.DataLoader", autospec=True)',
    ),
    (
        'mocker.patch("petastorm.spark.spark_dataset_converter._wait_file_available")',
        'mocker.patch("petastream.compat.spark_dataset_converter._wait_file_available")',
    ),
    (
        'monkeypatch.setattr("petastorm.spark.spark_dataset_converter._FILE_AVAILABILITY_WAIT_TIMEOUT_SECS", 2)',
        'monkeypatch.setattr("petastream.compat.spark_dataset_converter._FILE_AVAILABILITY_WAIT_TIMEOUT_SECS", 2)',
    ),
    (
        'monkeypatch.delattr("petastorm.spark.spark_dataset_converter.logger")',
        'monkeypatch.delattr("petastream.compat.spark_dataset_converter.logger")',
    ),
    (
        'patch.multiple("petastorm.spark.spark_dataset_converter", make_batch_reader=DEFAULT)',
        'patch.multiple("petastream.compat.spark_dataset_converter", make_batch_reader=DEFAULT)',
    ),
    (
        'patch("petastorm.spark.SparkDatasetConverter.make_torch_dataloader")',
        'patch("petastream.compat.SparkDatasetConverter.make_torch_dataloader")',
    ),
    ('patch(r"petastorm.transform.edit_field")', 'patch(r"petastream.compat.edit_field")'),
    ('importlib.import_module("petastorm.spark")', 'importlib.import_module("petastream.compat")'),
]


@pytest.mark.parametrize(("before", "after"), PAIRS, ids=[p[0].split("(")[0] for p in PAIRS])
def test_patch_target(before: str, after: str) -> None:
    assert_migrates(before + "\n", after + "\n")


def test_patch_object_keeps_the_attribute_name_and_follows_the_module() -> None:
    assert_migrates(
        """
        import petastorm.spark.spark_dataset_converter as sdc
        with mock.patch.object(sdc, "make_batch_reader") as fake: ...
        """,
        """
        import petastream.compat.spark_dataset_converter as sdc
        with mock.patch.object(sdc, "make_batch_reader") as fake: ...
        """,
    )


def test_unsupported_patch_target_is_reported_and_kept() -> None:
    result = assert_migrates(
        'patch("petastorm.make_batch_reader")\n',
        'patch("petastorm.make_batch_reader")\n',
        ["unsupported-patch-target"],
    )
    assert "make_spark_converter(spark.read.parquet(url))" in result.items[0].suggestion


def test_dynamic_targets_are_left_alone() -> None:
    source = """
        patch(f"petastorm.spark.{name}")
        patch("petastorm.spark." "make_spark_converter")
        patch(TARGET)
        """
    assert_migrates(source, source)
