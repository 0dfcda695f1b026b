"""Error classes.

One root, :class:`PetastreamError`; every subclass also inherits the builtin it refines, so
``except ValueError`` in user code keeps working. All of them pickle with their message (they
cross process boundaries: Spark executors, DataLoader workers), which plain multiple inheritance
from a builtin gives as long as ``__init__`` takes the message as its only positional argument.
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
