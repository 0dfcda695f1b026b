"""Which Python runs petastream's write tasks on a local-mode Spark session.

Petastorm's converter writes Parquet with Spark's JVM writer, so a local script runs it
whatever Python Spark would start for Python tasks. petastream writes from a Python task
(``mapInArrow``), and pyspark starts those with ``PYSPARK_PYTHON`` or, unset, the first
``python3`` on the PATH: for a script run as ``.venv/bin/python train.py`` (an IDE, a cron job,
a test runner: no activated environment) that is another interpreter, which has neither pyarrow
nor petastream, and every conversion failed with ``ModuleNotFoundError``.

In local mode the tasks run on this machine, so the driver's own interpreter (which has both)
is the one to run them. :func:`tasks_on_driver_python` makes it so for the UDF created inside
it, when nobody chose the workers' Python (``PYSPARK_PYTHON`` / ``spark.pyspark.python``
unset, and the context's ``pythonExec`` still pyspark's default). A cluster (its executors
run their own Python) and Spark Connect (the server picks it) are left alone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["tasks_on_driver_python", "driver_python_applies"]

log = logging.getLogger(__name__)

_PYSPARK_DEFAULT = "python3"  # SparkContext.pythonExec when PYSPARK_PYTHON is unset
_swap = threading.Lock()  # two conversions at once: the second must not see the first's swap


def driver_python_applies(sc: Any, environ: Any = None) -> bool:
    """Whether the Python tasks of ``sc`` should run on ``sys.executable`` (see the module)."""
    environ = os.environ if environ is None else environ
    if sc is None or environ.get("PYSPARK_PYTHON"):
        return False
    if not str(getattr(sc, "master", "") or "").startswith("local"):
        return False
    if getattr(sc, "pythonExec", None) != _PYSPARK_DEFAULT or not sys.executable:
        return False
    try:
        chosen = sc.getConf().get("spark.pyspark.python")
    except Exception:  # a context without a JVM conf (a stub): nothing was chosen there
        chosen = None
    return not chosen


@contextlib.contextmanager
def tasks_on_driver_python(df: Any) -> Iterator[None]:
    """Inside: Python UDFs created on ``df``'s session run on the driver's interpreter, where
    :func:`driver_python_applies`; pyspark reads ``pythonExec`` when it wraps the function."""
    sc: Any = None
    if not type(df).__module__.startswith("pyspark.sql.connect"):
        try:
            sc = df.sparkSession.sparkContext
        except Exception:
            sc = None
    with _swap:
        if not driver_python_applies(sc):
            yield
            return
        log.debug("local Spark without PYSPARK_PYTHON: petastream's tasks run on %s", sys.executable)
        sc.pythonExec = sys.executable
        try:
            yield
        finally:
            sc.pythonExec = _PYSPARK_DEFAULT
