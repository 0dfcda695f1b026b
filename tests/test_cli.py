"""The ``petastream`` command's conventions and the missing-extra messages (issue #15, points
2, 4 and 7). Missing extras are simulated in a subprocess by blocking the import
(``sys.modules[name] = None`` makes ``import name`` raise ``ModuleNotFoundError``)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import petastream
from petastream.cli import main
from tests.conftest import FIXTURES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABULAR = os.path.join(FIXTURES, "tabular-fixed")


def _run(code: str, *, block: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    prelude = "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in block)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "src"), ROOT])}
    return subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=300)


def _cli(*argv: str, block: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return _run(f"from petastream.cli import main; sys.exit(main({list(argv)!r}))", block=block)


def test_python_dash_m_and_version():
    res = subprocess.run([sys.executable, "-m", "petastream", "--version"], capture_output=True,
                         text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": os.path.join(ROOT, "src")})
    assert res.returncode == 0 and res.stdout.strip() == f"petastream {petastream.__version__}"


def test_help_is_plain_text(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    out = capsys.readouterr().out
    assert exit_info.value.code == 0 and "``" not in out
    assert all(name in out for name in ("inspect", "verify", "bench", "migrate"))


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["frobnicate"])
    assert exit_info.value.code == 2


@pytest.mark.parametrize("argv, missing", [
    (["migrate", "/nonexistent"], "/nonexistent"),
    (["migrate", "--check", "/nonexistent", "/gone"], "/nonexistent, /gone"),
])
def test_migrate_nothing_that_exists_is_a_usage_error(argv, missing, capsys):
    pytest.importorskip("libcst")
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err == f"petastream migrate: no such file or directory: {missing}\n"
    assert captured.out == ""


@pytest.mark.parametrize("argv", [["migrate", "--help"], ["migrate", "."]])
def test_migrate_without_libcst_names_the_extra(argv):
    res = _cli(*argv, block=("libcst",))
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr == ("petastream migrate: needs LibCST, which is not installed: "
                          "pip install 'petastream[migrate]'\n")


@pytest.mark.parametrize("module, blocked, extra", [
    ("petastream.torch", "torch", "petastream[torch]"),
    ("petastream.tf", "tensorflow", "petastream[tf]"),
    ("petastream.migrate", "libcst", "petastream[migrate]"),
])
def test_importing_a_module_without_its_framework_names_the_extra(module, blocked, extra):
    res = _run(f"import {module}", block=(blocked,))
    last = res.stderr.strip().splitlines()[-1]
    assert res.returncode == 1
    assert last.startswith(f"petastream.errors.MissingExtraError: {module} needs ")
    assert f"pip install '{extra}'" in last


def test_missing_extra_is_still_a_module_not_found_error():
    res = _run("try:\n    import petastream.torch\n"
               "except ModuleNotFoundError as e:\n    print(e.name)", block=("torch",))
    assert res.returncode == 0 and res.stdout.strip() == "torch"


def test_materialize_a_path_without_pyspark_names_the_extra(tmp_path):
    res = _run(f"from petastream.spark import materialize\nmaterialize({str(tmp_path)!r})",
               block=("pyspark", "pyspark.sql"))
    assert "petastream.spark.materialize needs PySpark" in res.stderr.strip().splitlines()[-1]
    assert "petastream[pyspark]" in res.stderr


def test_core_imports_stay_light():
    res = _run("import petastream, petastream.cli, petastream.bench, petastream._quiet\n"
               "import petastream.spark, petastream.spark._progress\n"
               "print([m for m in ('torch', 'tensorflow', 'pyspark', 'libcst', 'tqdm') "
               "if m in sys.modules])")
    assert res.returncode == 0 and res.stdout.strip() == "[]"


def test_verify_counts_one_shard_file_in_the_singular(tmp_path, capsys):
    petastream.write_mds({"id": np.arange(3)}, str(tmp_path / "ds"), hashes=[])
    assert main(["verify", str(tmp_path / "ds")]) == 0
    assert capsys.readouterr().out.startswith("1 shard file checked, 0 damaged; sizes only")
