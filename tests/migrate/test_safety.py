"""Negative cases: what the codemod must never touch."""

from __future__ import annotations

import pytest

from petastream.migrate.python import migrate_python

from .conftest import assert_migrates, assert_unchanged


def test_local_variable_named_petastorm_is_not_an_import() -> None:
    assert_unchanged(
        """
        petastorm = load_plugin("petastorm")
        conv = petastorm.spark.make_spark_converter(df)
        """
    )


def test_parameter_shadowing_a_module_import() -> None:
    assert_migrates(
        """
        import petastorm

        def run(petastorm):
            return petastorm.spark.make_spark_converter(df)

        conv = petastorm.spark.make_spark_converter(df)
        """,
        """
        import petastream.compat

        def run(petastorm):
            return petastorm.spark.make_spark_converter(df)

        conv = petastream.compat.make_spark_converter(df)
        """,
    )


def test_class_attribute_and_comprehension_variable() -> None:
    assert_unchanged(
        """
        class Config:
            petastorm = {"spark": None}
            flag = petastorm["spark"]

        names = [petastorm.spark for petastorm in plugins]
        """
    )


def test_attribute_named_petastorm_on_another_object() -> None:
    assert_unchanged("conv = self.petastorm.spark.make_spark_converter(df)\n")


def test_other_packages_with_similar_names() -> None:
    assert_unchanged(
        """
        import petastorm_utils
        import mypetastorm.spark
        from petastormx import make_spark_converter
        from .petastorm import spark
        from ..petastorm.spark import make_spark_converter as local_converter
        """
    )


def test_strings_that_are_not_patch_targets() -> None:
    assert_unchanged(
        """
        import logging
        spark.conf.set("petastorm.spark.converter.parentCacheDirUrl", "file:///tmp/petastorm")
        caplog.set_level(logging.INFO, logger="petastorm.spark.spark_dataset_converter")
        print("petastorm.spark.make_spark_converter")
        settings = {"petastorm.spark.make_spark_converter": 1}
        setattr(obj, "petastorm.spark", 1)
        """
    )


def test_already_migrated_code_is_left_alone() -> None:
    assert_unchanged(
        """
        import petastream.compat
        from petastream.compat import make_spark_converter
        from petastream.compat.pytorch import DataLoader
        # Migrated from petastorm.spark
        conv = petastream.compat.make_spark_converter(df)
        """
    )


def test_unrelated_code_keeps_its_odd_formatting() -> None:
    assert_migrates(
        """
        #!/usr/bin/env python
        # -*- coding: utf-8 -*-
        from petastorm.spark import make_spark_converter   #   keep   me
        x  =  [1,2,
               3 ]   # spacing
        def   f( a ,b ) :
            return   a+b
        """,
        """
        #!/usr/bin/env python
        # -*- coding: utf-8 -*-
        from petastream.compat import make_spark_converter   #   keep   me
        x  =  [1,2,
               3 ]   # spacing
        def   f( a ,b ) :
            return   a+b
        """,
    )


def test_source_without_petastorm_is_not_parsed() -> None:
    broken = "def broken(:\n"
    assert migrate_python(broken).code == broken


def test_unparseable_source_with_petastorm_raises() -> None:
    import libcst

    with pytest.raises(libcst.ParserSyntaxError):
        migrate_python("from petastorm.spark import (\n")
