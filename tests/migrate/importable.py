"""Whether a dotted name (a module, or a module's attribute) imports: the names migrated code uses."""

from __future__ import annotations

import importlib


def exists(dotted: str) -> bool:
    """``dotted`` is an importable module or an attribute of one."""
    try:
        importlib.import_module(dotted)
        return True
    except ImportError:
        module, _, attr = dotted.rpartition(".")
    try:
        return bool(module) and hasattr(importlib.import_module(module), attr)
    except ImportError:
        return False
