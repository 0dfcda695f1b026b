"""Every import form the issue names, plus the harder shapes (splits, scopes, suites)."""

from __future__ import annotations

from .conftest import assert_migrates, migrate


def test_alias_of_a_name() -> None:
    assert_migrates(
        "from petastorm.spark import make_spark_converter as msc\nconv = msc(df)\n",
        "from petastream.compat import make_spark_converter as msc\nconv = msc(df)\n",
    )


def test_pytorch_dataloader_alias() -> None:
    assert_migrates(
        "from petastorm.pytorch import DataLoader as PetastormDataLoader\n",
        "from petastream.compat.pytorch import DataLoader as PetastormDataLoader\n",
    )


def test_transform_spec_from_top_level() -> None:
    assert_migrates(
        "from petastorm import TransformSpec\n", "from petastream.compat import TransformSpec\n"
    )


def test_transform_module_names() -> None:
    assert_migrates(
        "from petastorm.transform import TransformSpec, edit_field\n",
        "from petastream.compat import TransformSpec, edit_field\n",
    )


def test_parenthesised_multiline_keeps_its_layout_and_comments() -> None:
    source = """
        from petastorm.spark.spark_dataset_converter import (  # internals
            SparkDatasetConverter,   # type hints
            TorchDatasetContextManager,
            register_delete_dir_handler  # cleanup
        )
        """
    assert_migrates(source, source.replace("petastorm.spark.", "petastream.compat."))


def test_split_parenthesised_import_keeps_each_names_comment() -> None:
    assert_migrates(
        """
        from petastorm.pytorch import (
            LoaderBase,  # subclassed below
            BatchedDataLoader,  # the loader
            _sanitize_pytorch_types
        )
        """,
        """
        from petastorm.pytorch import (
            LoaderBase,  # subclassed below
            _sanitize_pytorch_types,
        )
        from petastream.compat.pytorch import (
            BatchedDataLoader,  # the loader
        )
        """,
        ["unsupported-import", "unsupported-import"],
    )


def test_split_single_line_import_keeps_trailing_comment_on_the_kept_part() -> None:
    assert_migrates(
        "from petastorm.pytorch import DataLoader, LoaderBase  # noqa: F401\n",
        "from petastorm.pytorch import LoaderBase  # noqa: F401\n"
        "from petastream.compat.pytorch import DataLoader\n",
        ["unsupported-import"],
    )


def test_import_petastorm_with_attribute_use_all_migratable() -> None:
    assert_migrates(
        """
        import os
        import petastorm  # the converter

        def convert(df):
            spark.conf.set(petastorm.spark.SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, os.environ["CACHE"])
            return petastorm.spark.make_spark_converter(df)

        spec = petastorm.TransformSpec(func)
        """,
        """
        import os
        import petastream.compat  # the converter

        def convert(df):
            spark.conf.set(petastream.compat.SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, os.environ["CACHE"])
            return petastream.compat.make_spark_converter(df)

        spec = petastream.compat.TransformSpec(func)
        """,
    )


def test_import_petastorm_partly_migratable_keeps_the_import_and_adds_compat() -> None:
    result = assert_migrates(
        """
        import petastorm

        conv = petastorm.spark.make_spark_converter(df)
        resolver = petastorm.hdfs.namenode.HdfsNamenodeResolver(conf)
        """,
        """
        import petastorm
        import petastream.compat

        conv = petastream.compat.make_spark_converter(df)
        resolver = petastorm.hdfs.namenode.HdfsNamenodeResolver(conf)
        """,
        ["unsupported-use"],
    )
    assert result.items[0].line == 4
    assert "HdfsNamenodeResolver" in result.items[0].message


def test_import_dotted_submodule_uses_several_compat_modules() -> None:
    assert_migrates(
        """
        import petastorm.spark.spark_dataset_converter
        import petastorm.pytorch

        petastorm.spark.spark_dataset_converter.register_delete_dir_handler(None)
        loader = petastorm.pytorch.BatchedDataLoader(reader, batch_size=8)
        conv = petastorm.spark.make_spark_converter(df)
        """,
        """
        import petastream.compat
        import petastream.compat.pytorch
        import petastream.compat.spark_dataset_converter

        petastream.compat.spark_dataset_converter.register_delete_dir_handler(None)
        loader = petastream.compat.pytorch.BatchedDataLoader(reader, batch_size=8)
        conv = petastream.compat.make_spark_converter(df)
        """,
        ["loader-reader-unchecked"],  # `reader` comes from outside the file: a note
    )


def test_import_petastorm_as_alias() -> None:
    assert_migrates(
        "import petastorm as pt\nconv = pt.spark.make_spark_converter(df)\n",
        "import petastream.compat\nconv = petastream.compat.make_spark_converter(df)\n",
    )


def test_import_mirrored_module_as_alias() -> None:
    assert_migrates(
        "import petastorm.spark as ps\nconv = ps.make_spark_converter(df)\n",
        "import petastream.compat as ps\nconv = ps.make_spark_converter(df)\n",
    )


def test_module_alias_with_an_unknown_attribute_keeps_petastorm_for_it() -> None:
    assert_migrates(
        """
        import petastorm.spark.spark_dataset_converter as psc
        psc.make_spark_converter(df)
        psc.FilesystemResolver(url)
        """,
        """
        import petastorm.spark.spark_dataset_converter as psc
        import petastream.compat.spark_dataset_converter
        petastream.compat.spark_dataset_converter.make_spark_converter(df)
        psc.FilesystemResolver(url)
        """,
        ["unsupported-use"],
    )


def test_from_import_of_submodules() -> None:
    assert_migrates(
        """
        from petastorm import spark, pytorch
        from petastorm.spark import spark_dataset_converter

        spark_dataset_converter._FILE_AVAILABILITY_WAIT_TIMEOUT_SECS = 2
        conv = spark.make_spark_converter(df)
        loader_cls = pytorch.DataLoader
        """,
        """
        from petastream import compat as spark
        from petastream.compat import pytorch, spark_dataset_converter

        spark_dataset_converter._FILE_AVAILABILITY_WAIT_TIMEOUT_SECS = 2
        conv = spark.make_spark_converter(df)
        loader_cls = pytorch.DataLoader
        """,
    )


def test_from_import_of_mirrored_modules_moves_module_for_module() -> None:
    assert_migrates(
        "from petastorm import transform\nspec = transform.TransformSpec(func)\n",
        "from petastream.compat import transform\nspec = transform.TransformSpec(func)\n",
    )
    assert_migrates(
        """
        from petastorm import reader, tf_utils
        from petastorm.etl import dataset_metadata
        import petastorm.unischema as us

        schema = dataset_metadata.get_schema_from_dataset_url(url)
        field = us.UnischemaField("id", np.int64, (), None, False)
        with reader.make_reader(url, schema_fields=[field]) as r:
            ds = tf_utils.make_petastorm_dataset(r)
        """,
        """
        from petastream.compat import reader, tf_utils
        from petastream.compat.etl import dataset_metadata
        import petastream.compat.unischema as us

        schema = dataset_metadata.get_schema_from_dataset_url(url)
        field = us.UnischemaField("id", np.int64, (), None, False)
        with reader.make_reader(url, schema_fields=[field]) as r:
            ds = tf_utils.make_petastorm_dataset(r)
        """,
    )


def test_star_imports() -> None:
    assert_migrates("from petastorm.spark import *\n", "from petastream.compat import *\n")
    assert_migrates("from petastorm import *\n", "from petastorm import *\n", ["unsupported-import"])


def test_import_inside_a_function() -> None:
    assert_migrates(
        """
        def convert(df):
            import petastorm
            return petastorm.spark.make_spark_converter(df)
        """,
        """
        def convert(df):
            import petastream.compat
            return petastream.compat.make_spark_converter(df)
        """,
    )


def test_import_in_type_checking_block() -> None:
    assert_migrates(
        """
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from petastorm.spark import SparkDatasetConverter

        def train(conv: "SparkDatasetConverter") -> None: ...
        """,
        """
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from petastream.compat import SparkDatasetConverter

        def train(conv: "SparkDatasetConverter") -> None: ...
        """,
    )


def test_import_on_a_line_with_other_statements() -> None:
    assert_migrates(
        "import os; from petastorm import NoDataAvailableError, TransformSpec\n",
        "import os; from petastorm import NoDataAvailableError; from petastream.compat import TransformSpec\n",
        ["unsupported-import"],
    )
    assert_migrates(
        "if ok: import petastorm.spark as ps\n", "if ok: import petastream.compat as ps\n"
    )


def test_mixed_plain_import() -> None:
    assert_migrates(
        "import os, petastorm\nconv = petastorm.spark.make_spark_converter(os.environ['X'])\n",
        "import os\nimport petastream.compat\nconv = petastream.compat.make_spark_converter(os.environ['X'])\n",
    )


def test_unused_imports() -> None:
    assert_migrates(
        "import petastorm.spark.spark_dataset_converter\n",
        "import petastream.compat.spark_dataset_converter\n",
    )
    # an unused ``import petastorm`` (a check that it is installed): compat stands in its place
    assert_migrates("import petastorm\n", "import petastream.compat\n")
    assert_migrates("import petastorm as pt\n", "import petastream.compat as pt\n")
    assert_migrates("import petastorm\nfrom petastorm import make_reader\n",
                    "import petastream.compat\nfrom petastream.compat import make_reader\n")


def test_string_annotations_through_a_module_import() -> None:
    assert_migrates(
        """
        import petastorm.spark

        def train(conv: "petastorm.spark.SparkDatasetConverter") -> None:
            petastorm.spark.make_spark_converter(df)
        """,
        """
        import petastream.compat

        def train(conv: "petastream.compat.SparkDatasetConverter") -> None:
            petastream.compat.make_spark_converter(df)
        """,
    )
    assert_migrates(
        """
        from typing import Optional
        import petastorm.spark

        def train(conv: "Optional[petastorm.spark.SparkDatasetConverter]") -> None: ...
        """,
        """
        from typing import Optional
        import petastorm.spark

        def train(conv: "Optional[petastorm.spark.SparkDatasetConverter]") -> None: ...
        """,
        ["unsupported-use"],
    )


def test_unknown_name_of_a_mirrored_module_is_reported() -> None:
    result = assert_migrates(
        "from petastorm.spark import make_spark_converter, normalize_dir_url\n",
        "from petastorm.spark import normalize_dir_url\n"
        "from petastream.compat import make_spark_converter\n",
        ["unsupported-import"],
    )
    assert result.items[0].message == "petastorm.spark.normalize_dir_url is not provided by petastream.compat"


def test_name_reassigned_in_the_same_scope_is_not_rewritten() -> None:
    result = assert_migrates(
        """
        try:
            import petastorm
        except ImportError:
            petastorm = None
        conv = petastorm.spark.make_spark_converter(df)
        """,
        """
        try:
            import petastorm
        except ImportError:
            petastorm = None
        conv = petastorm.spark.make_spark_converter(df)
        """,
        ["shadowed-import"],
    )
    assert result.items[0].line == 5


def test_existing_compat_import_is_not_duplicated() -> None:
    assert_migrates(
        "import petastream.compat\nimport petastorm\nc = petastorm.spark.make_spark_converter(df)\n",
        "import petastream.compat\nc = petastream.compat.make_spark_converter(df)\n",
    )


def test_parentheses_around_a_rewritten_chain_are_kept() -> None:
    assert_migrates(
        "import petastorm\nc = (petastorm.spark.make_spark_converter)(df)\n",
        "import petastream.compat\nc = (petastream.compat.make_spark_converter)(df)\n",
    )


def test_crlf_line_endings_are_kept() -> None:
    source = "import petastorm\r\nc = petastorm.spark.make_spark_converter(df)\r\n"
    result = migrate(source)
    assert result.code == "import petastream.compat\r\nc = petastream.compat.make_spark_converter(df)\r\n"


def test_bare_use_of_the_package_keeps_the_import() -> None:
    result = assert_migrates(
        "import petastorm\nc = petastorm.spark.make_spark_converter(df)\nprint(petastorm.__version__)\ndel petastorm\n",
        "import petastorm\nimport petastream.compat\nc = petastream.compat.make_spark_converter(df)\n"
        "print(petastorm.__version__)\ndel petastorm\n",
        ["unsupported-use", "unsupported-use"],
    )
    assert result.items[0].message == "petastorm.__version__ is not provided by petastream.compat"
    assert result.items[1].message == "the petastorm package itself is used here (not one of its names)"
