"""Argument checks of the converter's ``make_torch_dataloader`` / ``make_tf_dataset``.

Petastorm checks few of these, and late: ``num_epochs=0`` raises its ventilator's
``ValueError`` on entering the ``with``, while ``batch_size=0`` (torch), ``workers_count=-2``
(an empty pool: the reader waits forever) or ``shuffling_queue_capacity=-5`` (no shuffling)
run on, silently wrong. Here every one raises when the loader is asked for:

* where Petastorm raises, the same type and its message text (``num_epochs``: ``ValueError``
  with "iterations must be positive integer or None"; torch ``shuffling_queue_capacity=None``:
  ``TypeError``, as Petastorm's ``None > 0``);
* elsewhere :class:`~petastream.errors.InvalidArgumentError` (a ``ValueError``), or
  :class:`~petastream.errors.InvalidArgumentTypeError` (a ``TypeError``) for a wrong type.
  Negative TF ``batch_size``/``prefetch``, which TensorFlow itself refuses in Petastorm, are
  refused here too, before TensorFlow is involved.

Kept as Petastorm accepts them: torch ``batch_size=None`` (one batch at the end of the data),
TF ``batch_size`` ``None``/``0`` (32), TF ``prefetch=-1`` (``AUTOTUNE``) and ``0``, TF
``shuffling_queue_capacity`` ``None``/``0`` (no shuffling), ``workers_count=None`` (4).
"""

from __future__ import annotations

from typing import Any

from petastream.checks import int_at_least, is_int
from petastream.errors import InvalidArgumentError, InvalidArgumentTypeError

__all__ = ["check_torch_arguments", "check_tf_arguments", "check_num_epochs", "refuse_row_selection"]


def _int_at_least(where: str, name: str, value: Any, low: int, what: str, fix: str) -> None:
    # petastream.checks' message, prefixed with the call (the error surfaces at iteration)
    int_at_least(name, value, low, what, where=where, fix=fix)


def check_num_epochs(where: str, num_epochs: Any) -> None:
    """None or an int >= 1, with Petastorm's text: its ventilator raises this ValueError for the
    same values (``make_batch_reader`` and the converter's loaders share it)."""
    if num_epochs is not None and (not is_int(num_epochs) or int(num_epochs) < 1):
        raise InvalidArgumentError(
            f"{where}(num_epochs={num_epochs!r}): iterations must be positive integer or None; "
            "pass num_epochs=None (repeat forever, Petastorm's default) or a whole number >= 1")


def _workers(where: str, workers_count: Any) -> None:
    if workers_count is not None:
        _int_at_least(where, "workers_count", workers_count, 1, "decode workers",
                      "pass workers_count=None (4) or a whole number >= 1")


def check_torch_arguments(batch_size: Any, num_epochs: Any, workers_count: Any,
                          shuffling_queue_capacity: Any) -> None:
    where = "make_torch_dataloader"
    if batch_size is not None:
        _int_at_least(where, "batch_size", batch_size, 1, "rows per batch",
                      "pass batch_size=32 (the default), or None for one batch at the end of the data")
    check_num_epochs(where, num_epochs)
    _workers(where, workers_count)
    if shuffling_queue_capacity is None:  # Petastorm: TypeError from `None > 0`
        raise InvalidArgumentTypeError(
            f"{where}(shuffling_queue_capacity=None): shuffling_queue_capacity must be an int; "
            "pass 0 for no shuffling queue, or the number of rows to shuffle over")
    _int_at_least(where, "shuffling_queue_capacity", shuffling_queue_capacity, 0,
                  "rows in the shuffling queue; 0: none",
                  "pass 0 for no shuffling queue, or the number of rows to shuffle over")


def check_tf_arguments(batch_size: Any, prefetch: Any, num_epochs: Any, workers_count: Any,
                       shuffling_queue_capacity: Any) -> None:
    where = "make_tf_dataset"
    if batch_size is not None:
        _int_at_least(where, "batch_size", batch_size, 0, "rows per batch; 0 or None: 32",
                      "pass batch_size=None (32) or a whole number >= 1")
    if prefetch is not None:
        _int_at_least(where, "prefetch", prefetch, -1, "batches to prefetch; -1: AUTOTUNE",
                      "pass prefetch=None (AUTOTUNE), 0 for none, or a whole number of batches")
    check_num_epochs(where, num_epochs)
    _workers(where, workers_count)
    if shuffling_queue_capacity is not None:
        _int_at_least(where, "shuffling_queue_capacity", shuffling_queue_capacity, 0,
                      "rows in the shuffle buffer; 0 or None: no shuffling",
                      "pass None or 0 for no shuffling, or the number of rows to shuffle over")


def refuse_row_selection(what: str, fix: str, **selections: Any) -> None:
    """``predicate``/``rowgroup_selector``/``filters`` where rows are chosen before reading
    (an MDS dataset, an open source): each given one an error saying where it belongs."""
    for name, value in selections.items():
        if value is not None:
            raise InvalidArgumentError(f"{name} is not supported on {what}; {fix}")
