"""Dotted Petastorm paths inside string literals: mock targets and module names.

``mock.patch("petastorm.spark.spark_dataset_converter.make_batch_reader")`` patches by import
path, so the string has to follow the code to petastream.compat. Only strings in target
position are touched: the first argument (or ``target=``) of ``patch``, ``patch.dict``,
``patch.multiple``, ``<obj>.setattr``/``<obj>.delattr`` (pytest's monkeypatch) and
``import_module``. Other strings, such as the conf key
``"petastorm.spark.converter.parentCacheDirUrl"`` (which compat keeps), are left alone.

One known bug is reported here too: the conf set under the constant's *name*,
``spark.conf.set("SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF", url)``, which sets nothing
useful with Petastorm or petastream.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from .edits import full_name, string_with
from .mapping import Resolved, Unsupported, is_petastorm_path, resolve
from .plan import Finding, Plan
from .tree import Tree

__all__ = ["plan_strings"]

_TARGET_CALL_SUFFIXES = ("patch", "patch.dict", "patch.multiple", "import_module")
_MONKEYPATCH_METHODS = ("setattr", "delattr")
_CONF_CONSTANT_NAME = "SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF"


def plan_strings(
    tree: Tree, resolver: Callable[[str], Resolved | Unsupported] = resolve
) -> Plan:
    plan = Plan()
    for node in tree.of_type(cst.Call, cst.SimpleString):
        if isinstance(node, cst.Call):
            target = _target_argument(node)
            if target is not None:
                _plan_target(target, plan, resolver)
        elif cst.ensure_type(node, cst.SimpleString).evaluated_value == _CONF_CONSTANT_NAME:
            plan.findings.append(
                Finding(
                    node,
                    "conf-key-bug",
                    f"the string '{_CONF_CONSTANT_NAME}' is the constant's name, not the conf "
                    "key, so the cache directory is never configured",
                    "use SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF without quotes "
                    "(from petastream.compat import SparkDatasetConverter), or its value "
                    "'petastorm.spark.converter.parentCacheDirUrl'",
                )
            )
    return plan


def _is_target_call(callee: str) -> bool:
    if any(callee == s or callee.endswith("." + s) for s in _TARGET_CALL_SUFFIXES):
        return True
    head, _, method = callee.rpartition(".")
    return bool(head) and method in _MONKEYPATCH_METHODS


def _target_argument(call: cst.Call) -> cst.SimpleString | None:
    callee = full_name(call.func)
    if callee is None or not _is_target_call(callee):
        return None
    for arg in call.args:
        keyword = arg.keyword.value if arg.keyword is not None else None
        if keyword in (None, "target", "name") and arg.star == "":
            value = arg.value
            return value if isinstance(value, cst.SimpleString) else None
    return None


def _plan_target(
    node: cst.SimpleString, plan: Plan, resolver: Callable[[str], Resolved | Unsupported]
) -> None:
    value = node.evaluated_value
    if not isinstance(value, str) or not is_petastorm_path(value):
        return
    result = resolver(value)
    if isinstance(result, Resolved):
        plan.expressions[node] = string_with(node, result.apply(value))
    else:
        plan.findings.append(
            Finding(
                node,
                "unsupported-patch-target",
                f"patch target '{value}': {result.message}",
                result.suggestion,
            )
        )
