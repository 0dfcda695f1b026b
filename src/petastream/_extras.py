"""Optional dependencies: which extra installs which module, and the one-line error naming it.

Frameworks are optional and imported where used (``petastream.torch`` imports torch at its top,
the migrate tool imports libcst, the Spark path pyspark). Without them Python's own error is a
bare ``No module named 'torch'`` at the end of a long traceback. Here that error becomes a
:class:`~petastream.errors.MissingExtraError` (a ``ModuleNotFoundError``) saying what to install,
in one line::

    petastream.torch needs PyTorch, which is not installed: pip install 'petastream[torch]'

Two ways in: :func:`require` where a module is imported on purpose (the CLI, lazy imports), and
:func:`install_hook`, which ``import petastream`` calls: a meta-path finder that wraps the
loading of every ``petastream.*`` module, so a missing framework imported at the top of any of
them (``petastream.torch``, ``petastream.tf``, the loaders, compat) is reported the same way
without each module carrying a guard. The hook only rewrites ``ModuleNotFoundError`` for the
modules listed in :data:`EXTRAS`; everything else passes through untouched.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import threading
from types import ModuleType
from typing import Any

from petastream.errors import MissingExtraError

__all__ = ["EXTRAS", "require", "missing_extra", "install_hook"]

# top-level module -> (what it is, how to get it). Frameworks are not forced on anyone: an
# installed torch/TensorFlow/PySpark of a supported version is used as is (see docs/install.md).
EXTRAS: dict[str, tuple[str, str]] = {
    "torch": ("PyTorch", "pip install 'petastream[torch]'"),
    "tensorflow": ("TensorFlow",
                   "pip install 'petastream[tf]' (or 'petastream[tf-cpu]' on a CPU-only machine)"),
    "pyspark": ("PySpark", "pip install 'petastream[pyspark]' (Databricks runtimes have it)"),
    "pandas": ("pandas", "pip install 'petastream[spark]'"),
    "cv2": ("OpenCV", "pip install 'petastream[opencv]'"),
    "libcst": ("LibCST", "pip install 'petastream[migrate]'"),
    "PIL": ("Pillow", "pip install 'petastream[images]'"),
    "s3fs": ("s3fs", "pip install 'petastream[cloud]'"),
    "gcsfs": ("gcsfs", "pip install 'petastream[cloud]'"),
    "adlfs": ("adlfs", "pip install 'petastream[cloud]'"),
    "deltalake": ("deltalake (delta-rs)", "pip install 'petastream[delta]'"),
    "pyroaring": ("pyroaring", "pip install 'petastream[delta]'"),
}


def missing_extra(err: ImportError, feature: str) -> MissingExtraError | None:
    """The one-line error for ``err`` if it is a missing optional module, else None."""
    if not isinstance(err, ModuleNotFoundError) or not err.name:
        return err if isinstance(err, MissingExtraError) else None
    top = err.name.split(".")[0]
    if top not in EXTRAS:
        return err if isinstance(err, MissingExtraError) else None
    what, how = EXTRAS[top]
    return MissingExtraError(f"{feature} needs {what}, which is not installed: {how}", name=top)


def require(module: str, feature: str) -> ModuleType:
    """``import_module(module)``, or :class:`MissingExtraError` naming the extra."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        friendly = missing_extra(e, feature)
        if friendly is None:
            raise
        raise friendly from None


class _Loader(importlib.abc.Loader):
    """Runs the real loader; a missing optional module becomes a :class:`MissingExtraError`
    naming the outermost petastream module being imported."""

    _depth = threading.local()

    def __init__(self, wrapped: Any, fullname: str):
        self._wrapped = wrapped
        self._fullname = fullname

    def __getattr__(self, name: str) -> Any:  # get_source, get_resource_reader, is_package...
        return getattr(self._wrapped, name)

    def create_module(self, spec: Any) -> Any:
        return self._wrapped.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        depth = getattr(self._depth, "n", 0)
        self._depth.n = depth + 1
        try:
            self._wrapped.exec_module(module)
        except ModuleNotFoundError as e:
            friendly = missing_extra(e, self._fullname) if depth == 0 else None
            if friendly is None or friendly is e:
                raise
            # Python's own "No module named 'torch'" traceback says nothing more than this.
            raise friendly from None
        finally:
            self._depth.n = depth


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if not fullname.startswith("petastream."):
            return None
        for finder in sys.meta_path:
            if finder is self or isinstance(finder, _Finder):
                continue
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find else None
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, fullname)
                return spec
        return None


def install_hook() -> None:
    """Put the finder first on ``sys.meta_path`` (once per interpreter)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
