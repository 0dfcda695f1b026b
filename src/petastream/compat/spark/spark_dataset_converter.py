"""``petastorm.spark.spark_dataset_converter``: an alias of
:mod:`petastream.compat.spark_dataset_converter`, the real module.

Importing this path gives that module object itself (it replaces this one in ``sys.modules``),
so module globals set or patched through one path are seen through the other. The star import
is for readers and type checkers only.
"""

import sys

from petastream.compat import spark_dataset_converter as _converter
from petastream.compat.spark_dataset_converter import *  # noqa: F403

sys.modules[__name__] = _converter
