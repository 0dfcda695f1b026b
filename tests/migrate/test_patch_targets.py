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
    # issue 27: the reader API, module for module
    ('patch("petastorm.make_batch_reader")', 'patch("petastream.compat.make_batch_reader")'),
    ('mock.patch("petastorm.reader.make_reader")', 'mock.patch("petastream.compat.reader.make_reader")'),
    (
        'mocker.patch("petastorm.etl.dataset_metadata.get_schema_from_dataset_url")',
        'mocker.patch("petastream.compat.etl.dataset_metadata.get_schema_from_dataset_url")',
    ),
    ('patch("petastorm.tf_utils.make_petastorm_dataset")', 'patch("petastream.compat.tf_utils.make_petastorm_dataset")'),
    ('importlib.import_module("petastorm.unischema")', 'importlib.import_module("petastream.compat.unischema")'),
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
        'patch("petastorm.hdfs.namenode.HdfsNamenodeResolver")\n',
        'patch("petastorm.hdfs.namenode.HdfsNamenodeResolver")\n',
        ["unsupported-patch-target"],
    )
    assert "core-site.xml" in result.items[0].suggestion


def test_patch_targets_of_the_modules_compat_added() -> None:
    assert_migrates(
        """
        patch("petastorm.fs_utils.get_filesystem_and_path_or_paths")
        patch("petastorm.spark.spark_dataset_converter._wait_file_available")
        """,
        """
        patch("petastream.compat.fs_utils.get_filesystem_and_path_or_paths")
        patch("petastream.compat.spark_dataset_converter._wait_file_available")
        """,
    )


def test_dynamic_targets_are_left_alone() -> None:
    source = """
        patch(f"petastorm.spark.{name}")
        patch("petastorm.spark." "make_spark_converter")
        patch(TARGET)
        """
    assert_migrates(source, source)
