"""A local script without PYSPARK_PYTHON converts, as with Petastorm (whose converter writes from
the JVM): petastream's write tasks run on the driver's interpreter, not on the first ``python3``
of the PATH (see petastream.spark._interpreter)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

from petastream.spark._interpreter import driver_python_applies

pytestmark = pytest.mark.spark


class _Conf:
    def __init__(self, values):
        self.values = values

    def get(self, key, default=None):
        return self.values.get(key, default)


def _context(master="local[2]", python_exec="python3", conf=None):
    conf = _Conf(conf or {})
    return SimpleNamespace(master=master, pythonExec=python_exec, getConf=lambda: conf)


@pytest.mark.parametrize(("sc", "environ", "applies"), [
    (_context(), {}, True),
    (_context(master="local"), {}, True),
    (_context(), {"PYSPARK_PYTHON": "/opt/py/bin/python"}, False),  # chosen: kept
    (_context(conf={"spark.pyspark.python": "/opt/py/bin/python"}), {}, False),
    (_context(python_exec="/opt/py/bin/python"), {}, False),  # set on the context
    (_context(master="spark://head:7077"), {}, False),  # a cluster's executors have their own
    (_context(master="yarn"), {}, False),
    (None, {}, False),  # Spark Connect: the server decides
])
def test_when_the_driver_python_runs_the_tasks(sc, environ, applies):
    assert driver_python_applies(sc, environ) is applies


def test_a_local_script_without_pyspark_python_converts(tmp_path):
    # The first python3 on the PATH cannot run anything: before, every task failed on it.
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python3").write_text("#!/bin/sh\necho 'not this python' >&2\nexit 3\n")
    (fake / "python3").chmod(0o755)
    import pyspark

    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["PATH"] = f"{fake}{os.pathsep}{env.get('PATH', '')}"
    env["SPARK_HOME"] = os.path.dirname(pyspark.__file__)  # else spark-submit asks python3 for it
    parent = "file://" + str(tmp_path / "cache")
    script = textwrap.dedent(f"""
        from pyspark.sql import SparkSession
        from petastream.compat import SparkDatasetConverter, make_spark_converter
        spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false").getOrCreate())
        spark.conf.set(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, {parent!r})
        conv = make_spark_converter(spark.range(30).coalesce(1))
        assert spark.sparkContext.pythonExec == "python3"  # restored after the write
        from petastream.compat import make_batch_reader  # no torch: the minimum-versions run has none
        with make_batch_reader(conv.cache_dir_url, num_epochs=1) as reader:
            print("ids", sorted(int(i) for b in reader for i in b.id))
    """)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"ids {list(range(30))}" in done.stdout
