"""Mixtures: several datasets as one, each sampled by weight, repeat count or a fixed count
per epoch. ``loader([Stream(a, weight=2), Stream(b, weight=1)], ...)`` in any petastream
loader; :func:`mixture` for ``epoch_size``; :func:`open_source`: a loader's ``dataset`` argument
as a source (a list of streams as a mixture, anything else through
:func:`petastream.sources.resolve_source`). See :mod:`petastream.mix.stream` (counts) and
:mod:`petastream.mix.source` (how the samples are chosen, and why it is a Source)."""

from petastream.mix.source import MixtureSource, mixture, open_source
from petastream.mix.stream import Stream, epoch_counts

__all__ = ["MixtureSource", "Stream", "epoch_counts", "mixture", "open_source"]
