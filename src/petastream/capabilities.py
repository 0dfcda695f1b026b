"""What a :class:`~petastream.source.Source` can do beyond the protocol: optional capabilities.

A loader reads any ``Source``; some sources can do more, and the loader uses it where they can.
Each capability is a protocol checked at run time (``isinstance(source, CachePeers)``) and by
mypy: a source that has one declares it (``class MDSDataset(CachePeers, Fingerprinted, ...)``),
so a renamed or retyped member is a type error, not a feature silently switched off, as a
``getattr(source, "cache_peers", None)`` probe made it.

================  ==================================================  ===============================
capability        what it means                                       who has it
================  ==================================================  ===============================
``CachePeers``    reads through a bounded shard cache shared with     MDSDataset, ParquetSource
                  other processes: loaders pace each other over it    (and so DeltaSource)
``Fingerprinted`` a content identity, the same on every machine       MDSDataset, ParquetSource,
                  that opens the same data                            MixtureSource
``StringReads``   str/bytes columns readable as ``Ragged`` bytes      MDSDataset, ParquetSource,
                  (process workers hand them over packed; loaders     MixtureSource
                  asked for ``strings="jagged"`` read through a
                  ``with_strings`` view)
``Pinned``        reads one snapshot of a changing table, and         DeltaSource
                  reopens at another (a resumed ``state_dict``'s)
``Composite``     made of other sources (a mixture's streams)         MixtureSource
================  ==================================================  ===============================

A capability of one format's sources lives with that format, so that this module imports no
format (``petastream.parquet.source.ParquetPlanned``: Parquet columns with their Arrow types).

Data members are annotated, not properties, where a source sets them as plain attributes (a
protocol's property is inherited by a class that declares it, and would refuse the assignment).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from petastream.source import Source

__all__ = ["CachePeers", "Composite", "Fingerprinted", "Peers", "Pinned", "StringReads",
           "fingerprint_of", "reading_strings"]


class Peers(Protocol):
    """The other processes on a shard cache (:class:`~petastream.storage.announce.Announcements`):
    where each reader of an order stands, for pacing (:mod:`petastream.pipeline.pacing`)."""

    def publish_position(self, plan: str, window: int, *, beat: bool = False) -> None: ...

    def withdraw_position(self, plan: str) -> None: ...

    def positions(self, plan: str) -> list[Any]: ...  # each with .pid, .window, .seen


@runtime_checkable
class CachePeers(Protocol):
    """Reads through a bounded shard cache that other processes of the node share."""

    def cache_peers(self) -> Peers | None:
        """The processes sharing the cache, through which loaders of one order pace each other;
        None where nothing bounds the cache or nothing is read through it (then no pacing)."""
        ...


@runtime_checkable
class Fingerprinted(Protocol):
    """Has a content identity: what every rank of a job, on any machine, agrees it reads (pacing
    keys readers of one order by it; process workers check a reopened source against it)."""

    @property
    def fingerprint(self) -> str: ...


@runtime_checkable
class StringReads(Protocol):
    """str/bytes columns can be read as ``"objects"`` (one Python object a value, the default)
    or ``"ragged"`` (a :class:`~petastream.columns.ragged.Ragged` of their bytes): process workers
    set ``"ragged"`` for a pass that hands strings over in shared memory, uncut. ``with_strings``
    reads another way without changing the source (loaders asked for jagged strings read through
    it while others may read the same source as objects)."""

    strings: str

    def with_strings(self, mode: str) -> Source:
        """A shallow copy reading str/bytes columns as ``mode``, sharing shards and caches."""
        ...


@runtime_checkable
class Pinned(Protocol):
    """Reads one snapshot of a table that changes (a Delta table's version): a loader records it
    in ``state_dict()`` and resumes a state saved on another snapshot by reopening there."""

    @property
    def snapshot(self) -> dict[str, Any]:
        """What is read, as ``state_dict()["snapshot"]`` records it (JSON)."""
        ...

    def at_snapshot(self, snapshot: Mapping[str, Any]) -> Source:
        """The same table, same options, at the snapshot ``snapshot`` records."""
        ...


@runtime_checkable
class Composite(Protocol):
    """Made of other sources (a mixture of streams): what holds for the whole is asked of them.
    A method with its own name, not a ``sources`` attribute: an MDS dataset has one too (its
    shard files' sources), and a structural check would take it for a mixture."""

    def component_sources(self) -> Sequence[Source]:
        """The sources it is made of, in order."""
        ...


def fingerprint_of(source: Any) -> str:
    """``source``'s fingerprint (:class:`Fingerprinted`), or its URL where it has none."""
    found = source.fingerprint if isinstance(source, Fingerprinted) else ""
    return found or str(source.url)


def reading_strings(source: Source, mode: str) -> Source:
    """``source`` reading str/bytes columns as ``mode`` (``"objects"``/``"ragged"``), without
    changing ``source`` itself (others may read through it): a copy where it is
    :class:`StringReads` and reads otherwise, else ``source`` (which then reads objects)."""
    if not isinstance(source, StringReads) or source.strings == mode:
        return source
    return source.with_strings(mode)
