"""Petastorm's own examples, in their idioms (tests/migrate/petastorm_examples), migrated.

mnist, hello_world (external and Petastorm datasets), imagenet and spark_dataset_converter:
every Petastorm import moves to petastream.compat (issue 27; ``spark_utils.dataset_as_rdd``
since issue 34) and the project drops ``petastorm``. The output is isort-clean and a fixed
point, and the migrated ETL script writes a dataset compat reads the schema of.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

import pytest
from ruff.__main__ import find_ruff_bin

from .importable import exists
from .installability import report_items

EXAMPLES = Path(__file__).parent / "petastorm_examples"
RDD = "hello_world/petastorm_dataset/pyspark_hello_world.py"  # dataset_as_rdd


@pytest.fixture
def migrated(tmp_path: Path, run_cli) -> tuple[Path, int, list[dict]]:
    root = tmp_path / "examples"
    shutil.copytree(EXAMPLES, root)
    done = run_cli("--write", "--report", str(tmp_path / "report.json"), ".", cwd=root)
    return root, done.code, report_items((tmp_path / "report.json").read_text(encoding="utf-8"))


def _petastorm_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return [m for m in found if m.split(".")[0] == "petastorm"]


def test_every_petastorm_import_moves(migrated) -> None:
    root, code, items = migrated
    assert (code, items) == (0, [])
    sources = sorted(p for p in root.rglob("*.py") if p.stat().st_size)
    assert len(sources) == 16
    assert not any(_petastorm_imports(path) for path in sources)
    assert (root / "requirements.txt").read_text() == "petastream[spark,tf,torch]\n"
    assert "from petastream.compat.spark_utils import dataset_as_rdd\n" in (root / RDD).read_text()
    # what each example reads with, module for module
    assert (root / "mnist/pytorch_example.py").read_text().count(
        "from petastream.compat import TransformSpec, make_reader\nfrom petastream.compat.pytorch import DataLoader\n"
    ) == 1
    assert "from petastream.compat.tf_utils import make_petastorm_dataset, tf_tensors\n" in (
        root / "hello_world/external_dataset/tensorflow_hello_world.py"
    ).read_text()
    assert "from petastream.compat.etl.dataset_metadata import materialize_dataset\n" in (
        root / "imagenet/generate_petastorm_imagenet.py"
    ).read_text()


def test_a_second_run_changes_nothing(migrated, run_cli) -> None:
    root, code, _ = migrated
    again = run_cli("--check", ".", cwd=root)
    assert (again.code, again.out) == (code, "")


def test_imports_stay_isort_clean(migrated) -> None:
    root, _, _ = migrated
    for tree in (EXAMPLES, root):
        done = subprocess.run([find_ruff_bin(), "check", "--no-cache", "."], cwd=tree, capture_output=True, text=True)
        assert done.returncode == 0, (tree, done.stdout)


def test_migrated_imports_resolve(migrated) -> None:
    root, _, _ = migrated
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("petastream"):
                for alias in node.names:
                    dotted = f"{node.module}.{alias.name}"
                    assert exists(dotted), (path, dotted)


@pytest.mark.spark
def test_migrated_etl_writes_a_dataset_compat_reads(migrated, spark, tmp_path: Path, monkeypatch) -> None:
    from petastream.compat.etl.dataset_metadata import get_schema_from_dataset_url

    root, _, _ = migrated
    monkeypatch.syspath_prepend(str(root))
    for name in ("mnist", "mnist.schema", "mnist.generate_petastorm_mnist"):
        monkeypatch.delitem(__import__("sys").modules, name, raising=False)
    from mnist.generate_petastorm_mnist import write_digits  # the migrated script
    from mnist.schema import DigitsSchema

    assert type(DigitsSchema).__module__ == "petastream.compat.unischema"
    url = f"file://{tmp_path / 'digits'}"
    write_digits(url, count=30, row_group_size_mb=1, spark=spark)
    schema = get_schema_from_dataset_url(url)
    assert list(schema.fields) == ["row_id", "label", "pixels"]
    assert schema.fields["pixels"].shape == (28, 28)
    assert spark.read.parquet(url).count() == 30
