"""The consumer's side of a pass, shared by every executor: items in plan order, checked.

Every executor runs the same :class:`~petastream.pipeline.work.PassWork`: worker ``w`` of ``W``
produces the pass's items ``w, w+W, ...`` in order, and the consumer takes item ``t`` from
worker ``t % W``. So items come out in plan order with no reorder buffer, and two invariants
catch a broken plan instead of silently reordering or dropping data: each item carries its
index, which must be the one expected; and a worker must not end while it owes items.
"""

from __future__ import annotations

from petastream.errors import PipelineError

__all__ = ["PassOrder"]


class PassOrder:
    """Which of a pass's ``num_items`` items comes next, and from which of ``num_workers``."""

    def __init__(self, num_items: int, num_workers: int, who: str = "decode worker"):
        self.num_items, self.num_workers, self.who = num_items, max(1, num_workers), who
        self.next = 0

    @property
    def done(self) -> bool:
        return self.next >= self.num_items

    @property
    def worker(self) -> int:
        """The worker that owes the next item."""
        return self.next % self.num_workers

    def accept(self, index: int) -> None:
        """The next item arrived carrying ``index``: it must be the expected one."""
        if index != self.next:
            raise PipelineError(f"{self.who} {self.worker} returned item {index}, expected {self.next}")
        self.next += 1

    def ended_early(self) -> PipelineError:
        """The error for a worker that ended while it owed the next item."""
        return PipelineError(
            f"{self.who} {self.worker} of {self.num_workers} finished without batch {self.next} of "
            f"{self.num_items}: its plan and the consumer's disagree")
