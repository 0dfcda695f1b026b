"""The error policy, checked over the source: every ``raise`` of a builtin exception and every
exception class outside :mod:`petastream.errors` is one the policy lists (``errors.py``'s
"Petastorm parity exceptions" and protocol builtins), so a new bare ``ValueError`` fails here."""

from __future__ import annotations

import ast
import builtins
from collections import Counter
from pathlib import Path

import petastream

SRC = Path(petastream.__file__).parent
BUILTIN_ERRORS = {n for n in dir(builtins)
                  if isinstance(getattr(builtins, n), type) and issubclass(getattr(builtins, n), BaseException)}
# Protocol builtins, not errors: a module's __getattr__, abstract methods, ending an iterator.
PROTOCOL = {"AttributeError", "NotImplementedError", "StopIteration", "KeyboardInterrupt", "SystemExit"}

# errors.py, "Petastorm parity exceptions": Petastorm's builtin and text, kept.
PARITY = {
    "compat/spark_dataset_converter.py": {"RuntimeError": 3, "ValueError": 1},
    "compat/_df_helpers.py": {"ValueError": 1},  # check_dtype, moved out of the converter module
    "compat/_urls.py": {"ValueError": 4, "IndexError": 1},
    "compat/reader.py": {"ValueError": 3},
    "compat/_batch_open.py": {"ValueError": 1, "RuntimeError": 1},
    "compat/transform.py": {"ValueError": 3},
    "compat/pytorch.py": {"RuntimeError": 3},
    "compat/_arrow_fields.py": {"ValueError": 1, "RuntimeError": 1},
    "compat/_images.py": {"ValueError": 3},
    "compat/codecs.py": {"RuntimeError": 4, "ValueError": 7, "TypeError": 1},
    "compat/unischema.py": {"ValueError": 7},
    "compat/predicates.py": {"ValueError": 9},
    "compat/selectors.py": {"ValueError": 2},
    "compat/etl/dataset_metadata.py": {"ValueError": 1},
    "compat/etl/rowgroup_indexers.py": {"TypeError": 1, "ValueError": 2},
    "compat/etl/rowgroup_indexing.py": {"ValueError": 4},
    "compat/_parquet_select.py": {"ValueError": 1},
    "compat/_row_work.py": {"ValueError": 2},
    "compat/_row_plan.py": {"ValueError": 2},
    "compat/ngram.py": {"ValueError": 7},
    "compat/row_reader.py": {"ValueError": 3, "RuntimeError": 3},
    "compat/_row_source.py": {"ValueError": 1, "RuntimeError": 1},
    "compat/_row_cache.py": {"ValueError": 1},
    "compat/_row_filters.py": {"ValueError": 5, "TypeError": 1},
    "compat/tf_utils.py": {"RuntimeError": 1},
    "compat/weighted_sampling_reader.py": {"ValueError": 5},
    "compat/fs_utils.py": {"ValueError": 3, "RuntimeError": 1},
    "compat/test_util/reader_mock.py": {"ValueError": 1},
}
# Exception classes that are not PetastreamErrors: internal control flow that never reaches a
# caller (the materializer turns TaskErrors into a MaterializationError, as Spark's own error).
NOT_ERRORS = {("spark/_outcome.py", "Retry"), ("delta/deletion_vectors.py", "_Unreadable"), ("spark/_outcome.py", "TaskErrors"),
              ("pipeline/procpool/worker.py", "_Stopped")}


def _modules() -> dict[str, ast.Module]:
    return {p.relative_to(SRC).as_posix(): ast.parse(p.read_text(), str(p)) for p in sorted(SRC.rglob("*.py"))}


def _raised_name(node: ast.Raise) -> str | None:
    exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return exc.id if isinstance(exc, ast.Name) else None


def _bare_raises() -> dict[str, Counter[str]]:
    out: dict[str, Counter[str]] = {}
    for rel, tree in _modules().items():
        names = Counter(n for node in ast.walk(tree) if isinstance(node, ast.Raise)
                        and (n := _raised_name(node)) in BUILTIN_ERRORS and n not in PROTOCOL)
        if names:
            out[rel] = names
    return out


def test_bare_builtin_raises_are_only_the_listed_ones():
    found = _bare_raises()
    for rel, names in found.items():
        assert dict(names) == PARITY.get(rel), (
            f"{rel} raises bare {dict(names)}: raise a petastream.errors class (one that also "
            "subclasses that builtin), or list a Petastorm parity raise in errors.py and here")
    assert set(PARITY) <= set(found), "a parity entry lists raises that are gone: update errors.py"


def test_exception_classes_derive_from_petastream_error():
    from petastream import errors

    ours = {n for n in dir(errors) if isinstance(getattr(errors, n), type)}
    bad = []
    for rel, tree in _modules().items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef) or rel == "errors.py":
                continue
            bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
            if bases & BUILTIN_ERRORS and not bases & ours and (rel, node.name) not in NOT_ERRORS:
                bad.append((rel, node.name, sorted(bases)))
    assert not bad, f"exception classes outside the PetastreamError tree: {bad}"
