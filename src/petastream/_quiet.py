"""Quiet imports of chatty native libraries (used by ``petastream bench`` and the demo).

TensorFlow 2.16+ writes its start-up lines (``All log messages before absl::InitializeLog()``,
``oneDNN custom operations are on``, the CPU-instructions note) from C++ straight to file
descriptor 2 while it loads, once per shared library, whatever ``TF_CPP_MIN_LOG_LEVEL`` says.
:func:`import_tensorflow` sends fd 2 to a temporary file for the duration of the import and
writes back every line that is not one of those, so real errors still show.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

__all__ = ["TF_STARTUP_NOISE", "filtered_native_stderr", "import_tensorflow"]

TF_STARTUP_NOISE = (
    "All log messages before absl::InitializeLog()",
    "oneDNN custom operations are on",
    "cpu_feature_guard.cc",
    "To enable the following instructions:",
    "rebuild TensorFlow with the appropriate compiler flags",
    "Unable to register cuDNN factory", "Unable to register cuFFT factory",
    "Unable to register cuBLAS factory",
    "TF-TRT Warning: Could not find TensorRT",
    "computation placer already registered",
)


@contextmanager
def filtered_native_stderr(noise: tuple[str, ...]) -> Iterator[None]:
    """Capture what anything (Python or C++) writes to fd 2 inside the block; afterwards
    write back the lines containing none of ``noise``."""
    try:
        saved = os.dup(2)
    except OSError:  # no fd 2 (some embedded interpreters): nothing to filter
        yield
        return
    sys.stderr.flush()
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode("utf-8", errors="replace")
            kept = [line for line in text.splitlines(keepends=True)
                    if not any(n in line for n in noise)]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()


def import_tensorflow() -> ModuleType:
    """``import tensorflow``, without its start-up lines (Python-side logs at WARNING+)."""
    loaded = sys.modules.get("tensorflow")
    if loaded is not None:
        return loaded
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with filtered_native_stderr(TF_STARTUP_NOISE):
        import tensorflow as tf

        tf.constant(0)  # the second library loads on first use and logs the same lines
    return tf
