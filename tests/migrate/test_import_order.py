"""Migrated imports stay lint-clean: a file that passed ``ruff check --select I`` still does.

Each case is an isort-clean file (checked with the real ruff, against the project's own
config) that the migration used to leave failing: same-module imports not merged, petastream
sorted where petastorm stood, long merged lines not wrapped.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from ruff.__main__ import find_ruff_bin

from petastream.migrate.import_order import ImportStyle, style_for

from .conftest import dedent, write_tree

PYPROJECT = """
    [project]
    name = "trainer"

    [tool.ruff]
    line-length = {length}

    [tool.ruff.lint]
    select = ["I"]
    {isort}
    """

CASES = {
    "two_modules_one_line": """
        import os

        from petastorm import TransformSpec
        from petastorm.spark import SparkDatasetConverter, make_spark_converter
        from pyspark.sql import functions as F

        spec = TransformSpec(lambda pdf: pdf)
        """,
    "kept_reader_sorts_before_petastream": """
        from petastorm import make_reader
        from petastorm.pytorch import DataLoader
        from petastorm.spark import make_spark_converter
        from petastorm.transform import TransformSpec


        def loaders(url, df):
            with make_reader(url) as reader:
                yield DataLoader(reader)
            yield make_spark_converter(df).make_torch_dataloader(transform_spec=TransformSpec(None))
        """,
    "lightning_datamodule_local_imports": """
        import pytorch_lightning as pl


        class PetastormDataModule(pl.LightningDataModule):
            def setup(self, stage=None):
                from petastorm.pytorch import BatchedDataLoader
                from petastorm.spark import SparkDatasetConverter, make_spark_converter
                from petastorm.spark.spark_dataset_converter import TorchDatasetContextManager

                self.loader = (BatchedDataLoader, SparkDatasetConverter, make_spark_converter, TorchDatasetContextManager)
        """,
    "comments_and_long_lines": """
        from petastorm import TransformSpec  # row transforms
        from petastorm.spark import SparkDatasetConverter, make_spark_converter  # the converter
        from petastorm.spark.spark_dataset_converter import TFDatasetContextManager, TorchDatasetContextManager

        print(TransformSpec, SparkDatasetConverter, make_spark_converter)
        print(TFDatasetContextManager, TorchDatasetContextManager)
        """,
    "module_imports": """
        import petastorm
        import petastorm.spark
        import torch

        reader = petastorm.make_batch_reader("file:///data/x.parquet")
        converter = petastorm.spark.make_spark_converter(df)
        """,
}


def ruff_clean(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [find_ruff_bin(), "check", "--no-cache", "--select", "I", "."],
        cwd=root,
        capture_output=True,
        text=True,
    )


@pytest.mark.parametrize(
    ("length", "isort"),
    [
        (88, ""),
        (100, ""),
        (88, "[tool.ruff.lint.isort]\nforce-sort-within-sections = true"),
        (88, "[tool.ruff.lint.isort]\nforce-single-line = true"),
    ],
    ids=["defaults", "line-length-100", "force-sort-within-sections", "force-single-line"],
)
def test_isort_clean_files_stay_clean(tmp_path: Path, run_cli, length: int, isort: str) -> None:
    write_tree(tmp_path, {"pyproject.toml": PYPROJECT.format(length=length, isort=isort)})
    write_tree(tmp_path, {f"{name}.py": source for name, source in CASES.items()})
    fixed = subprocess.run([find_ruff_bin(), "check", "--no-cache", "--fix", "."], cwd=tmp_path, capture_output=True, text=True)
    assert fixed.returncode == 0, fixed.stdout  # the corpus in this config's own isort layout
    before = {name: (tmp_path / f"{name}.py").read_text() for name in CASES}
    run = run_cli("--write", ".", cwd=tmp_path)
    assert run.code in (0, 3), run.err
    changed = [name for name in CASES if (tmp_path / f"{name}.py").read_text() != before[name]]
    assert changed == list(CASES)
    check = ruff_clean(tmp_path)
    assert check.returncode == 0, check.stdout + "\n".join(
        (tmp_path / f"{name}.py").read_text() for name in CASES
    )


def test_one_merged_line_where_two_stood(tmp_path: Path, run_cli) -> None:
    write_tree(tmp_path, {"job.py": CASES["two_modules_one_line"]})
    run_cli("--write", "job.py", cwd=tmp_path)
    assert (tmp_path / "job.py").read_text() == dedent(
        """
        import os

        from petastream.compat import SparkDatasetConverter, TransformSpec, make_spark_converter
        from pyspark.sql import functions as F

        spec = TransformSpec(lambda pdf: pdf)
        """
    )


def test_comments_go_with_their_names_when_merged(tmp_path: Path, run_cli) -> None:
    write_tree(tmp_path, {"job.py": CASES["comments_and_long_lines"]})
    run_cli("--write", "job.py", cwd=tmp_path)
    assert (tmp_path / "job.py").read_text().startswith(
        dedent(
            """
            from petastream.compat import (
                SparkDatasetConverter,
                TransformSpec,  # row transforms
                make_spark_converter,  # the converter
            )
            from petastream.compat.spark_dataset_converter import (
                TFDatasetContextManager,
                TorchDatasetContextManager,
            )
            """
        )
    )


def test_blank_line_above_a_group_survives_a_split_import() -> None:
    # The group's first line stays first while a split name moves down (issue #29 item 12,
    # ruff I001 on Petastorm's examples/mnist/pytorch_example.py after the migration).
    from .conftest import assert_migrates

    assert_migrates(
        """
        import os

        import torch
        from petastorm import NoDataAvailableError, TransformSpec
        from petastorm.hdfs.namenode import HdfsNamenodeResolver
        """,
        """
        import os

        import torch
        from petastorm import NoDataAvailableError
        from petastorm.hdfs.namenode import HdfsNamenodeResolver
        from petastream.compat import TransformSpec
        """,
        ["unsupported-import", "unsupported-import"],
    )


def test_a_file_not_in_isort_order_keeps_its_order() -> None:
    from .conftest import assert_migrates

    assert_migrates(
        """
        from petastorm.spark import make_spark_converter
        import os
        from petastorm import TransformSpec
        from petastorm.spark import SparkDatasetConverter
        """,
        """
        from petastream.compat import TransformSpec, make_spark_converter
        import os
        from petastream.compat import SparkDatasetConverter
        """,
    )


def test_style_is_read_from_the_nearest_config(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            "setup.cfg": "[isort]\nprofile = google\nline_length = 120\n",
            "pkg/ruff.toml": "line-length = 99\n[lint.isort]\nforce-single-line = true\n",
            "pkg/a.py": "",
            "b.py": "",
        },
    )
    (tmp_path / ".git").mkdir()
    assert style_for(tmp_path / "pkg" / "a.py") == ImportStyle(99, True, False)
    assert style_for(tmp_path / "b.py") == ImportStyle(120, True, True)
    assert style_for(tmp_path.parent / "elsewhere.py") == ImportStyle()
