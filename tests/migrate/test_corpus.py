"""The corpus (tests/migrate/corpus, one project per failure class of issue #14), migrated.

Every project, after ``petastream migrate --write``: a second run changes nothing; its
dependency files install together, or every conflict left is reported with file and line
(tests/migrate/installability.py decides, independently of the tool); every petastream import
resolves and every Petastorm import left is still declared. Then one test per class, and the
projects whose migrated code needs only petastream run on local Spark against compat.
"""

from __future__ import annotations

import ast
import json
import re
import runpy
import shutil
import subprocess
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ruff.__main__ import find_ruff_bin

from .importable import exists
from .installability import conflicts, declared, declared_bound, report_items

CORPUS = Path(__file__).parent / "corpus"
PROJECTS = sorted(p.name for p in CORPUS.iterdir() if p.is_dir() and re.fullmatch(r"c\d\d_\w+", p.name))
assert len(PROJECTS) == 10, PROJECTS  # one per class of issue #14


@dataclass
class Migrated:
    original: Path
    root: Path
    code: int
    err: str
    items: list[dict[str, Any]]

    def text(self, name: str) -> str:
        return (self.root / name).read_text(encoding="utf-8")

    def unchanged(self, name: str) -> bool:
        return self.text(name) == (self.original / name).read_text(encoding="utf-8")

    def codes(self, path: str) -> list[tuple[int, str]]:
        return [(i["line"], i["code"]) for i in self.items if i["path"] == path]


@pytest.fixture
def migrate_project(tmp_path: Path, run_cli) -> Callable[[str], Migrated]:
    def run(name: str) -> Migrated:
        root = tmp_path / name
        shutil.copytree(CORPUS / name, root)
        report = tmp_path / f"{name}.json"
        done = run_cli("--write", "--report", str(report), ".", cwd=root)
        return Migrated(CORPUS / name, root, done.code, done.err, report_items(report.read_text()))

    return run


@pytest.fixture
def cache_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"file://{tmp_path / 'converter-cache'}"
    monkeypatch.setenv("PETASTORM_CACHE_URL", url)
    return url


# -- every project ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", PROJECTS)
def test_migrated_project_is_stable(name: str, migrate_project, run_cli) -> None:
    migrated = migrate_project(name)
    assert migrated.code in (0, 3), migrated.err
    again = run_cli("--check", ".", cwd=migrated.root)
    assert (again.code, again.out) == (migrated.code, ""), again.err


@pytest.mark.parametrize("name", PROJECTS)
def test_migrated_project_installs_or_says_why_not(name: str, migrate_project) -> None:
    migrated = migrate_project(name)
    flagged = {
        re.match(r"[\w.\-]+", i["message"]).group(0).lower()  # type: ignore[union-attr]
        for i in migrated.items
        if i["code"] == "conflicting-pin"
    }
    assert set(conflicts(migrated.root)) <= flagged, conflicts(migrated.root)


@pytest.mark.parametrize("name", PROJECTS)
def test_migrated_imports_resolve(name: str, migrate_project) -> None:
    migrated = migrate_project(name)
    packages = {req.name.lower() for _, req in declared(migrated.root).requirements}
    for path, tree in _python_sources(migrated.root):
        for module, names in _imports(tree):
            if module.startswith("petastream"):
                for dotted in [f"{module}.{attr}" for attr in names] or [module]:
                    assert exists(dotted), (path, dotted)
            elif module.split(".")[0] == "petastorm" and any(
                (migrated.root / n).exists()
                for n in ("requirements.txt", "requirements.in", "setup.cfg", "pyproject.toml", "environment.yml")
            ):
                assert "petastorm" in packages, f"{path} imports {module}, which no dependency file lists"


def _python_sources(root: Path) -> list[tuple[Path, ast.Module]]:
    out = []
    for path in sorted(root.rglob("*.py")):
        out.append((path, ast.parse(path.read_text(encoding="utf-8"))))
    for path in sorted(root.rglob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "code":
                out.append((path, ast.parse(_runnable_cell("".join(cell["source"])))))
    return out


def _runnable_cell(source: str) -> str:
    """A notebook cell as IPython runs it: magics aside, first-line indentation removed."""
    lines = [line for line in source.split("\n") if not line.lstrip().startswith("%")]
    return textwrap.dedent("\n".join(lines))


def _imports(tree: ast.Module) -> list[tuple[str, list[str]]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module, [a.name for a in node.names if a.name != "*"]))
        elif isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names]
    return found


_READERS = re.compile(r"\bmake_(batch_)?reader\b")
_PETASTORM_IMPORT = re.compile(r"^[\s\"]*(from|import) petastorm\b", re.MULTILINE)


@pytest.mark.parametrize("name", PROJECTS)
def test_no_reader_file_is_left_flagged(name: str, migrate_project) -> None:
    # issue 27: make_reader / make_batch_reader on any data move to petastream.compat, and
    # their whole pipeline with them; nothing in a file that reads with them is left to a person
    migrated = migrate_project(name)
    readers = {
        str(path.relative_to(migrated.original))
        for path in sorted(migrated.original.rglob("*"))
        if path.suffix in (".py", ".ipynb") and _READERS.search(path.read_text(encoding="utf-8"))
    }
    flagged = {i["path"] for i in migrated.items if i["severity"] == "manual"}
    assert not readers & flagged, [i for i in migrated.items if i["path"] in readers]
    for path in readers:  # and they import no Petastorm module any more
        assert not _PETASTORM_IMPORT.search(migrated.text(path)), path


# -- one test per class --------------------------------------------------------------------------


def test_c01_loader_moves_with_its_reader_and_petastorm_goes(migrate_project) -> None:
    migrated = migrate_project("c01_reader_loader")
    assert (migrated.code, migrated.items) == (0, [])
    assert migrated.text("petastorm_loaders.py").splitlines()[2:4] == [
        "from petastream.compat import make_reader",
        "from petastream.compat.pytorch import DataLoader",
    ]
    assert migrated.text("farfetch.py").splitlines()[2:4] == [
        "from petastream.compat.pytorch import DataLoader",
        "from petastream.compat.reader import make_reader",
    ]
    assert migrated.text("requirements.txt") == "petastream[spark]\ntorch>=2.1\n"
    assert "from petastream.compat import SparkDatasetConverter, make_spark_converter" in migrated.text("train.py")


def test_c02_unischema_etl_and_parquet_reader_move_and_petastorm_goes(migrate_project) -> None:
    migrated = migrate_project("c02_petastorm_only_api")
    assert (migrated.code, migrated.items) == (0, [])
    assert migrated.text("generate_petastorm_dataset.py").splitlines()[3:6] == [
        "from petastream.compat.codecs import CompressedImageCodec, NdarrayCodec, ScalarCodec",
        "from petastream.compat.etl.dataset_metadata import materialize_dataset",
        "from petastream.compat.unischema import Unischema, UnischemaField, dict_to_spark_row",
    ]
    assert migrated.text("hyperopt_train.py").splitlines()[5:7] == [
        "from petastream.compat import TransformSpec, make_batch_reader",
        "from petastream.compat.tf_utils import make_petastorm_dataset",
    ]
    assert "    numpy\n    petastream[spark]\n    tensorflow\n" in migrated.text("setup.cfg")
    assert "petastorm" not in migrated.text("setup.cfg").split("install_requires")[1]


def test_c03_pins_are_rewritten_or_reported_and_the_lock_is_left_for_pip_compile(migrate_project) -> None:
    migrated = migrate_project("c03_pins")
    assert migrated.text("requirements.in").splitlines()[1:5] == [
        "petastream[spark]",
        "pyarrow>=14  # was ==10.0.1 for petastorm; {} needs pyarrow{}".format(*declared_bound("pyarrow")),
        "numpy<2  # petastorm uses np.unicode_",
        "pyspark==3.1.1",
    ]
    assert migrated.codes("requirements.in") == [
        (3, "pin-rewritten"), (4, "petastorm-pin"), (5, "conflicting-pin")
    ]
    pyspark = next(i for i in migrated.items if i["location"] == "requirements.in:5")
    assert pyspark["message"] == "pyspark==3.1.1 conflicts with {}, which needs pyspark{}".format(
        *declared_bound("pyspark")
    )
    assert migrated.unchanged("requirements.txt")
    assert migrated.codes("requirements.txt") == [(15, "regenerate-lock")]
    assert next(i for i in migrated.items if i["path"] == "requirements.txt")["suggestion"].endswith(
        "pip-compile requirements.in"
    )
    assert migrated.codes("setup.cfg") == [(8, "conflicting-pin")]
    assert set(conflicts(migrated.root)) == {"pyarrow", "pyspark"}  # both reported above


def test_c04_custom_collate_fn_is_kept_and_noted(migrate_project) -> None:
    migrated = migrate_project("c04_collate_fn")
    (note,) = [i for i in migrated.items if i["path"] == "datamodule.py"]
    assert (note["code"], note["severity"], note["line"]) == ("custom-collate-fn", "info", 34)
    assert "data_loader_fn=functools.partial(DataLoader, collate_fn=collate_rows)" in migrated.text("datamodule.py")
    assert migrated.text("requirements.txt") == "petastream[spark,torch]\npytorch-lightning>=2.0\n"


def test_c05_reads_of_the_parquet_cache_are_flagged(migrate_project) -> None:
    migrated = migrate_project("c05_cache_layout")
    assert migrated.codes("check_cache.py") == [(16, "cache-layout"), (17, "cache-layout")]
    assert migrated.code == 3


def test_c06_indented_notebook_cells_migrate(migrate_project) -> None:
    migrated = migrate_project("c06_indented_notebook")
    cells = json.loads(migrated.text("train.ipynb"))["cells"]
    assert cells[1]["source"] == ['%pip install "petastream[spark]" torch']
    assert cells[2]["source"][2] == (
        "    from petastream.compat import SparkDatasetConverter, TransformSpec, make_spark_converter\n"
    )
    assert (migrated.code, migrated.items) == (0, [])


def test_c07_conda_environment_file_is_scanned(migrate_project) -> None:
    migrated = migrate_project("c07_conda")
    assert "2 file(s) scanned, 2 changed" in migrated.err
    assert migrated.text("environment.yml").splitlines()[6:] == [
        "  - pyarrow>=14  # was =10.0.1 for petastorm; {} needs pyarrow{}".format(*declared_bound("pyarrow")),
        "  - pandas",
        "  - pip",
        "  - pip:",
        "      - petastream[spark]",
        "      - torch",
    ]


def test_c08_one_api_through_two_paths_moves_module_for_module(migrate_project) -> None:
    migrated = migrate_project("c08_import_paths")
    assert (migrated.code, migrated.items) == (0, [])
    assert migrated.text("reader_module.py").startswith("from petastream.compat.reader import make_reader\n")
    assert migrated.text("top_level.py").startswith("from petastream.compat import make_reader\n")


def test_c09_lint_clean_before_and_after(migrate_project) -> None:
    original = subprocess.run([find_ruff_bin(), "check", "--no-cache", "."], cwd=CORPUS / "c09_lint", capture_output=True, text=True)
    assert original.returncode == 0, original.stdout
    migrated = migrate_project("c09_lint")
    after = subprocess.run([find_ruff_bin(), "check", "--no-cache", "."], cwd=migrated.root, capture_output=True, text=True)
    assert after.returncode == 0, after.stdout + migrated.text("pipeline.py")
    assert migrated.text("pipeline.py").count("from petastream.compat import") == 1


def test_c10_check_exit_codes_gate_ci(tmp_path: Path, run_cli) -> None:
    root = tmp_path / "c10"
    shutil.copytree(CORPUS / "c10_check_gate", root)
    assert run_cli("--check", ".", cwd=root).code == 1  # rewrites pending
    assert run_cli("--write", ".", cwd=root).code == 3  # done, manual items remain
    assert run_cli("--check", ".", cwd=root).code == 3  # CI after the migration: not "pending"
    (root / "broken.py").write_text("import petastorm(\n")
    assert run_cli("--check", ".", cwd=root).code == 2


# -- the runnable ones, on local Spark against compat -------------------------------------------------


@pytest.mark.spark
@pytest.mark.torch
def test_c01_c03_c07_migrated_scripts_run(migrate_project, spark, cache_url) -> None:
    for name, script in (("c01_reader_loader", "train.py"), ("c03_pins", "convert.py"), ("c07_conda", "train.py")):
        migrated = migrate_project(name)
        result = runpy.run_path(str(migrated.root / script), init_globals={"spark": spark})["RESULT"]
        assert result, (name, result)
    assert result == 20  # c07: every row once


@pytest.mark.spark
@pytest.mark.torch
def test_c04_datamodule_runs_with_its_collate_fn(migrate_project, spark, cache_url) -> None:
    migrated = migrate_project("c04_collate_fn")
    batches = runpy.run_path(str(migrated.root / "datamodule.py"))["main"](spark)
    assert sum(len(b["id"]) for b in batches) == 48


@pytest.mark.spark
def test_c05_flagged_reads_fail_on_mds_and_the_suggestion_works(migrate_project, spark, cache_url) -> None:
    import petastream

    migrated = migrate_project("c05_cache_layout")
    first, flagged = migrated.text("check_cache.py").split("# COMMAND ----------")
    scope: dict[str, Any] = {"spark": spark}
    exec(compile(first, "check_cache.py", "exec"), scope)
    converter = scope["converter"]
    assert len(petastream.open(converter.cache_dir_url)) == len(converter) == 40
    with pytest.raises(Exception, match="(?i)parquet|schema"):
        exec(compile(flagged, "check_cache.py", "exec"), scope)
    assert scope["parquet_files"] == []  # what the flagged glob finds in an MDS cache
    converter.delete()


@pytest.mark.spark
@pytest.mark.torch
def test_c06_notebook_cells_run_as_ipython_runs_them(migrate_project, spark, cache_url) -> None:
    migrated = migrate_project("c06_indented_notebook")
    scope: dict[str, Any] = {"spark": spark}
    for cell in json.loads(migrated.text("train.ipynb"))["cells"]:
        if cell["cell_type"] == "code":
            exec(compile(_runnable_cell("".join(cell["source"])), "train.ipynb", "exec"), scope)
    values = scope["first"]["x"].tolist()
    assert len(values) == 8 and all(v % 2 == 0 for v in values)  # the TransformSpec ran
