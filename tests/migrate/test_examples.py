"""End to end: migrate the legacy examples (examples/legacy) and run the result on local Spark.

The exact migrated sources are pinned in tests/migrate/data/legacy_migrated/. The migrated
scripts run against petastream.compat in a subprocess (PYSPARK_PYTHON set to this
interpreter), on local[2] Spark, a few hundred rows and a couple of training steps.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from petastream.cli import main as cli_main

REPO = Path(__file__).resolve().parents[2]
LEGACY = REPO / "examples" / "legacy"
EXPECTED = Path(__file__).parent / "data" / "legacy_migrated"
MIGRATED_FILES = ("torch_converter.py", "tf_converter.py", "requirements.txt")


@pytest.fixture
def migrated(tmp_path: Path) -> Path:
    """A copy of examples/legacy migrated in place with ``petastream migrate --write``."""
    target = tmp_path / "legacy"
    shutil.copytree(LEGACY, target)
    assert cli_main(["migrate", "--write", "-q", str(target)]) == 0
    return target


@pytest.mark.parametrize("name", MIGRATED_FILES)
def test_legacy_example_migrates_to_the_exact_expected_source(migrated: Path, name: str) -> None:
    expected = (EXPECTED / f"{name}.expected").read_text(encoding="utf-8")
    assert (migrated / name).read_text(encoding="utf-8") == expected


def test_migrated_examples_have_no_petastorm_imports_left(migrated: Path) -> None:
    assert cli_main(["migrate", "--check", "-q", str(migrated)]) == 0
    for name in ("torch_converter.py", "tf_converter.py"):
        source = (migrated / name).read_text(encoding="utf-8")
        assert "from petastorm" not in source and "import petastorm" not in source
        # the Petastorm conf key is part of the compat surface and stays
    assert '"petastorm.spark.converter.parentCacheDirUrl"' in (migrated / "torch_converter.py").read_text()


def _run_example(script: Path, cache_dir: Path, timeout: int) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, str(script), str(cache_dir)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=script.parent,
    )


@pytest.mark.spark
@pytest.mark.torch
@pytest.mark.slow
def test_migrated_torch_example_trains_on_local_spark(migrated: Path, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    cache = tmp_path / "cache"
    cache.mkdir()
    done = _run_example(migrated / "torch_converter.py", cache, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "materialized 256 rows" in done.stdout
    assert "trained 2 steps" in done.stdout


@pytest.mark.spark
@pytest.mark.tf
@pytest.mark.slow
def test_migrated_tf_example_trains_on_local_spark(migrated: Path, tmp_path: Path) -> None:
    pytest.importorskip("tensorflow")
    cache = tmp_path / "cache"
    cache.mkdir()
    done = _run_example(migrated / "tf_converter.py", cache, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "trained 1 epoch" in done.stdout
