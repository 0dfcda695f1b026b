"""Jupyter (.ipynb) and Databricks source notebooks."""

from __future__ import annotations

import json
from typing import Any

from petastream.migrate.notebooks import is_databricks_source, migrate_databricks, migrate_ipynb

from .conftest import dedent
from .installability import declared_bound


def code(source: str, outputs: list[Any] | None = None, count: int | None = 1) -> dict[str, Any]:
    return {
        "cell_type": "code",
        "execution_count": count,
        "id": f"c{abs(hash(source)) % 10_000}",
        "metadata": {"tags": ["keep-me"]},
        "outputs": outputs or [],
        "source": dedent(source).rstrip("\n").splitlines(keepends=True),
    }


def markdown(source: str) -> dict[str, Any]:
    return {"cell_type": "markdown", "id": "md", "metadata": {}, "source": [source]}


def notebook(*cells: dict[str, Any], language: str = "python") -> dict[str, Any]:
    return {
        "cells": list(cells),
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": language, "name": "python3"},
            "language_info": {"name": language, "version": "3.11.7"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def dump(nb: dict[str, Any]) -> str:
    """As nbformat writes it: indent 1, sorted keys, non-ASCII kept, final newline."""
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


STREAM = [{"name": "stdout", "output_type": "stream", "text": ["materialized 256 rows ✓\n"]}]


def legacy_notebook() -> dict[str, Any]:
    return notebook(
        markdown("# Train with petastorm\n`from petastorm.spark import make_spark_converter`"),
        code("%pip install petastorm==0.12.1 pyarrow<15", count=None),
        code(
            """
            import petastorm
            from petastorm.spark import SparkDatasetConverter, make_spark_converter
            files = !ls /dbfs/tmp
            """
        ),
        code(
            """
            %%time
            spark.conf.set(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, "file:///tmp/petastorm")
            converter = make_spark_converter(df)
            print(f"materialized {len(converter)} rows")
            """,
            outputs=STREAM,
        ),
        code(
            """
            reader = petastorm.make_batch_reader(converter.file_urls)
            spec = petastorm.TransformSpec(func)
            """
        ),
        code("%%bash\npip install petastorm\necho petastorm"),
        code("%%sql\nSELECT * FROM petastorm.spark"),
    )


def test_code_cells_are_migrated_and_everything_else_kept() -> None:
    original = legacy_notebook()
    text = dump(original)
    result = migrate_ipynb(text)
    expected = legacy_notebook()
    expected["cells"][1]["source"] = ['%pip install "petastream[spark]" pyarrow<15']
    expected["cells"][2]["source"] = [
        "import petastream.compat\n",
        "from petastream.compat import SparkDatasetConverter, make_spark_converter\n",
        "files = !ls /dbfs/tmp",
    ]
    # make_batch_reader on a converter's files reads MDS now: compat's reader takes it over
    expected["cells"][4]["source"] = [
        "reader = petastream.compat.make_batch_reader(converter.file_urls)\n",
        "spec = petastream.compat.TransformSpec(func)",
    ]
    expected["cells"][5]["source"] = ["%%bash\n", 'pip install "petastream[spark]"\n', "echo petastorm"]
    assert result.text == dump(expected)  # same layout, outputs, ids, metadata
    assert result.errors == []
    assert result.items == []
    assert migrate_ipynb(result.text).text == result.text


def test_cross_cell_uses_are_located_by_cell() -> None:
    text = dump(
        notebook(
            code("from petastorm.hdfs.namenode import HdfsNamenodeResolver"),
            markdown("text"),
            code("x = 1\nfs = HdfsNamenodeResolver(url).filesystem()"),
        )
    )
    (item,) = migrate_ipynb(text).items
    assert (item.cell, item.line, item.uses) == (1, 1, ("cell 3:2",))


def test_todo_comments_land_in_the_right_cell() -> None:
    text = dump(notebook(code("import os"), code("from petastorm.hdfs.namenode import HdfsNamenodeResolver\nr = HdfsNamenodeResolver(u)")))
    result = migrate_ipynb(text, todo=True)
    cells = json.loads(result.text)["cells"]
    assert cells[0]["source"] == ["import os"]
    assert cells[1]["source"][0].startswith("# TODO(petastream): petastorm.hdfs.namenode.HdfsNamenodeResolver is not provided")
    assert cells[1]["source"][1:] == ["from petastorm.hdfs.namenode import HdfsNamenodeResolver\n", "r = HdfsNamenodeResolver(u)"]
    assert migrate_ipynb(result.text, todo=True).text == result.text


def test_a_cell_that_does_not_parse_is_reported_and_the_others_migrated() -> None:
    text = dump(
        notebook(
            code("from petastorm.spark import make_spark_converter"),
            code("def broken(:\n    petastorm.spark"),
            code("def unrelated(:\n    pass"),  # never mentions petastorm: not our business
            code("from petastorm import TransformSpec"),
        )
    )
    result = migrate_ipynb(text)
    cells = json.loads(result.text)["cells"]
    assert cells[0]["source"] == ["from petastream.compat import make_spark_converter"]
    assert cells[1]["source"] == ["def broken(:\n", "    petastorm.spark"]
    assert cells[3]["source"] == ["from petastream.compat import TransformSpec"]
    assert len(result.errors) == 1
    assert result.errors[0].startswith("cell 2: does not parse: line ")


def test_source_as_a_single_string_and_other_layouts() -> None:
    nb = notebook(code("from petastorm.spark import make_spark_converter"))
    nb["cells"][0]["source"] = "from petastorm.spark import make_spark_converter\n"
    text = json.dumps(nb, indent=2) + "\n"  # 2-space indent, insertion order
    result = migrate_ipynb(text)
    nb["cells"][0]["source"] = "from petastream.compat import make_spark_converter\n"
    assert result.text == json.dumps(nb, indent=2) + "\n"


def test_non_python_notebook_and_unrelated_notebook_are_untouched() -> None:
    scala = dump(notebook(code("import petastorm"), language="scala"))
    assert migrate_ipynb(scala).text == scala
    plain = dump(notebook(code("import os\nprint(os.name)"), markdown("petastorm")))
    result = migrate_ipynb(plain)
    assert (result.text, result.items, result.errors) == (plain, [], [])


def test_magics_that_look_like_python_operators_are_not_masked() -> None:
    text = dump(notebook(code('import petastorm\nmsg = ("%s rows"\n       % n)\nflag = (a\n        != b)\n!echo hi')))
    result = migrate_ipynb(text)
    assert result.errors == []
    assert result.items == []  # the unused `import petastorm` is rewritten; the magics stay
    assert "import petastream.compat" in result.text and "!echo hi" in result.text


DATABRICKS = """\
# Databricks notebook source
# MAGIC %pip install petastorm==0.12.1

# COMMAND ----------

from petastorm.spark import SparkDatasetConverter, make_spark_converter
from petastorm.hdfs.namenode import HdfsNamenodeResolver

# COMMAND ----------

# MAGIC %md
# MAGIC Train with **petastorm**; `%pip install petastorm` is in the first cell.

# COMMAND ----------

# MAGIC %sh
# MAGIC pip install petastorm

# COMMAND ----------

spark.conf.set(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, "file:///dbfs/tmp/petastorm")
converter = make_spark_converter(df)
"""


def test_databricks_source_notebook() -> None:
    assert is_databricks_source(DATABRICKS)
    result = migrate_databricks(DATABRICKS)
    # the HDFS helper stays, so the notebook-scoped installs keep petastorm beside petastream
    assert result.text == (
        DATABRICKS.replace(
            "# MAGIC %pip install petastorm==0.12.1",
            '# MAGIC %pip install petastorm==0.12.1 "petastream[spark]"',
        )
        .replace("# MAGIC pip install petastorm", '# MAGIC pip install petastorm "petastream[spark]"')
        .replace(
            "from petastorm.spark import SparkDatasetConverter",
            "from petastream.compat import SparkDatasetConverter",
        )
    )
    assert [(i.line, i.code) for i in result.items] == [(7, "unsupported-import")]
    assert migrate_databricks(result.text).text == result.text


def test_databricks_conda_install_is_reported() -> None:
    source = "# Databricks notebook source\n# MAGIC %conda install -c conda-forge petastorm\n"
    result = migrate_databricks(source)
    assert result.text == source
    assert [(i.line, i.code) for i in result.items] == [(2, "unsupported-install")]


def test_databricks_cells_with_bare_magics_and_indentation_are_migrated() -> None:
    """Seen in public notebooks: a bare ``!pip`` line and a cell indented as a whole (both
    run on Databricks) made the file unparseable, and nothing of it was migrated."""
    source = (
        "# Databricks notebook source\n"
        "!pip install petastorm tensorflow_similarity\n"
        "%pip install petastorm==0.12.1\n"
        "\n"
        "# COMMAND ----------\n"
        "\n"
        "from petastorm.spark import make_spark_converter\n"
        "\n"
        "# COMMAND ----------\n"
        "\n"
        "    converter = make_spark_converter(df)\n"
        "    from petastorm.hdfs.namenode import HdfsNamenodeResolver\n"
        "    resolver = HdfsNamenodeResolver(url)\n"
        "    fs = resolver.filesystem()\n"
    )
    result = migrate_databricks(source)
    assert result.text == (
        source.replace("from petastorm.spark import", "from petastream.compat import")
        # HdfsNamenodeResolver stays: the notebook's installs keep petastorm beside petastream
        .replace("!pip install petastorm tensorflow_similarity",
                 '!pip install petastorm "petastream[spark]" tensorflow_similarity')
        .replace("%pip install petastorm==0.12.1", '%pip install petastorm==0.12.1 "petastream[spark]"')
    )
    # items at the file's own lines
    assert [(i.line, i.code, i.uses) for i in result.items] == [(12, "unsupported-import", ("13",))]
    assert migrate_databricks(result.text).text == result.text


def test_an_indented_databricks_cell_is_reindented_around_what_changed() -> None:
    source = ("# Databricks notebook source\n# COMMAND ----------\n"
              "    from petastorm.spark import make_spark_converter\n"
              "    conv = make_spark_converter(df)  # keep me\n")
    assert migrate_databricks(source).text == source.replace("petastorm.spark", "petastream.compat")


def test_plain_python_is_not_a_databricks_notebook() -> None:
    assert not is_databricks_source("# MAGIC %pip install petastorm\nimport os\n")


def indented(*lines: str) -> dict[str, Any]:
    """A code cell exactly as given (code() dedents, which would hide the indentation)."""
    cell = code("x")
    cell["source"] = [line + "\n" for line in lines[:-1]] + [lines[-1]]
    return cell


def test_indented_cells_are_dedented_migrated_and_reindented() -> None:
    # IPython runs a cell whose lines all start indented (pasted from a function body).
    text = dump(
        notebook(
            indented(
                "    from petastorm.spark import SparkDatasetConverter, make_spark_converter",
                "    from petastorm import TransformSpec",
                "    %pip list",
                "    def to_tensor(pdf):",
                "        return pdf",
                "",
                "    converter = make_spark_converter(df)",
            ),
            indented("  import os", "  from petastorm.spark import make_spark_converter"),
        )
    )
    result = migrate_ipynb(text)
    assert result.errors == []
    cells = json.loads(result.text)["cells"]
    assert cells[0]["source"] == [
        "    from petastream.compat import SparkDatasetConverter, TransformSpec, make_spark_converter\n",
        "    %pip list\n",
        "    def to_tensor(pdf):\n",
        "        return pdf\n",
        "\n",
        "    converter = make_spark_converter(df)",
    ]
    assert cells[1]["source"] == ["  import os\n", "  from petastream.compat import make_spark_converter"]
    assert migrate_ipynb(result.text).text == result.text


def test_indented_cell_with_manual_items_reports_cell_lines() -> None:
    text = dump(notebook(indented("    x = 1", "    from petastorm.hdfs.namenode import HdfsNamenodeResolver", "    r = HdfsNamenodeResolver(u)")))
    result = migrate_ipynb(text, todo=True)
    (item,) = result.items
    assert (item.cell, item.line, item.uses) == (1, 2, ("cell 1:3",))
    source = json.loads(result.text)["cells"][0]["source"]
    assert source[1].startswith("    # TODO(petastream): petastorm.hdfs.namenode.HdfsNamenodeResolver")
    assert source[2:] == ["    from petastorm.hdfs.namenode import HdfsNamenodeResolver\n", "    r = HdfsNamenodeResolver(u)"]


def test_pip_install_keeps_petastorm_while_the_notebook_needs_it_and_flags_pins() -> None:
    text = dump(
        notebook(
            code("%pip install petastorm==0.12.1 pyarrow==10.0.1 torch"),
            code("from petastorm.cache import NullCache\nreader = Reader(fs, path, cache=NullCache())"),
        )
    )
    result = migrate_ipynb(text)
    cells = json.loads(result.text)["cells"]
    assert cells[0]["source"] == ['%pip install petastorm==0.12.1 "petastream[spark]" pyarrow==10.0.1 torch']
    assert [(i.cell, i.line, i.code) for i in result.items] == [
        (1, 1, "conflicting-pin"),
        (2, 1, "unsupported-import"),
    ]
    assert result.items[0].message == "pyarrow==10.0.1 conflicts with {}, which needs pyarrow{}".format(
        *declared_bound("pyarrow")
    )
    again = migrate_ipynb(result.text)
    assert (again.text, [i.code for i in again.items]) == (result.text, [i.code for i in result.items])


def test_pip_install_drops_petastorm_once_the_notebook_reads_through_compat() -> None:
    # issue 27: make_batch_reader on any Parquet moves, so nothing keeps petastorm
    text = dump(
        notebook(
            code("%pip install petastorm==0.12.1 torch"),
            code("from petastorm import make_batch_reader\nreader = make_batch_reader('file:///data/train.parquet')"),
        )
    )
    result = migrate_ipynb(text)
    cells = json.loads(result.text)["cells"]
    assert cells[0]["source"] == ['%pip install "petastream[spark]" torch']
    assert cells[1]["source"] == [
        "from petastream.compat import make_batch_reader\n",
        "reader = make_batch_reader('file:///data/train.parquet')",
    ]
    assert result.items == []
    assert migrate_ipynb(result.text).text == result.text
