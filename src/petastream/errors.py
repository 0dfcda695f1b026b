"""Error classes.

One root, :class:`PetastreamError`; every subclass also inherits the builtin it refines, so
``except ValueError`` in user code keeps working. All of them pickle with their message (they
cross process boundaries: Spark executors, DataLoader workers), which plain multiple inheritance
from a builtin gives as long as ``__init__`` takes the message as its only positional argument.

Where Mosaic Streaming raises a builtin for the same bad input (its ``MDSWriter`` and
encodings), ours is catchable as that builtin too and its message carries Mosaic's sentence, so
``except``/``pytest.raises(match=)`` written against Mosaic keep working (``EncodingTypeError``
and the other classes at the end of this module). The case-by-case list, and the deliberate
differences, are in docs/mds.md ("Errors: parity with Mosaic").
"""

from __future__ import annotations

__all__ = [
    "PetastreamError",
    "FormatError",
    "EncodingError",
    "UnsafeEncodingError",
    "CorruptShardError",
    "MissingExtraError",
    "StorageError",
    "CacheFullError",
    "DatasetExistsError",
    "IncompleteDatasetError",
    "InvalidArgumentError",
    "InvalidArgumentTypeError",
    "PipelineError",
    "WorkerDiedError",
    "SupersededError",
    "EncodingTypeError",
    "EncodingOverflowError",
    "EncodedSizeError",
    "MissingColumnError",
    "UnknownEncodingError",
    "UnexpectedArgumentError",
]


class PetastreamError(Exception):
    """Root of every error raised by petastream."""


class FormatError(PetastreamError, ValueError):
    """An index.json or a setting that does not follow the MDS format."""


class EncodingError(PetastreamError, ValueError):
    """A value that cannot be encoded or decoded with its column's MDS encoding."""


class UnsafeEncodingError(PetastreamError, ValueError):
    """A column uses an encoding that can run code on read (``pkl``) and it was not allowed."""


class CorruptShardError(PetastreamError, OSError):
    """A shard file is truncated, has the wrong size or hash, or a broken offsets table."""


class MissingExtraError(PetastreamError, ModuleNotFoundError):
    """An optional dependency is needed; the message names the extra to install.
    A ``ModuleNotFoundError`` (so also an ``ImportError``): ``except`` clauses written for
    Python's own error keep working."""


class StorageError(PetastreamError, OSError):
    """A storage URL could not be read or written."""


class CacheFullError(StorageError):
    """The local shard cache cannot make room: its limit is smaller than the shards in use."""


class DatasetExistsError(PetastreamError, FileExistsError):
    """The output location already holds data and overwriting was not asked for."""


class IncompleteDatasetError(PetastreamError, FileNotFoundError):
    """A directory has shard files but no index.json: a write that did not finish."""


class InvalidArgumentError(PetastreamError, ValueError):
    """An argument's value is out of range or inconsistent with the others."""


class InvalidArgumentTypeError(PetastreamError, TypeError):
    """An argument has the wrong type."""


class PipelineError(PetastreamError, RuntimeError):
    """A loader's pass broke an invariant (a worker ended owing batches, or handed one out of
    order) or its workers failed without an error of their own."""


class WorkerDiedError(PipelineError):
    """A decode worker (thread or process) exited while it owed batches."""


class SupersededError(PetastreamError, RuntimeError):
    """An iterator was pulled after a newer iteration took the loader's position over."""


class _PlainMessage(Exception):
    """``str()`` is the message itself: a ``KeyError`` would show it quoted, as a key."""

    def __str__(self) -> str:
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()


class EncodingTypeError(EncodingError, TypeError, AttributeError):
    """A value of the wrong type for its column's encoding: a ``TypeError``, and an
    ``AttributeError`` (what Mosaic Streaming raises for it)."""


class EncodingOverflowError(EncodingError, OverflowError):
    """A number out of its encoding's range (numpy raises ``OverflowError`` for it)."""


class EncodedSizeError(_PlainMessage, EncodingError, KeyError):
    """A value's bytes are not its fixed-size encoding's size (a ``KeyError`` in Mosaic)."""


class MissingColumnError(_PlainMessage, FormatError, KeyError):
    """A sample or block lacks one of the writer's columns (a ``KeyError``, as in Mosaic)."""


class UnknownEncodingError(FormatError, TypeError):
    """An encoding name that is not MDS's, or a bad ``ndarray:`` configuration (Mosaic's
    ``MDSWriter`` raises ``TypeError`` for an unknown name)."""


class UnexpectedArgumentError(InvalidArgumentTypeError, ValueError):
    """A keyword argument the function does not take: a ``TypeError`` as Python's own, and a
    ``ValueError`` (what Mosaic's writers raise for it)."""
