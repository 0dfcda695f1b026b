"""Error classes: the one error policy.

Every error petastream raises is a :class:`PetastreamError` that also inherits the builtin
it refines, so ``except PetastreamError`` catches all of ours and ``except ValueError`` (or
``OSError``, ``RuntimeError``...) in user code keeps working. All of them pickle with their
message (they cross process boundaries: Spark executors, DataLoader workers), which plain
multiple inheritance from a builtin gives as long as ``__init__`` takes the message as its
only positional argument. Arguments are checked with :mod:`petastream.checks` (one message
shape: the argument, the value, what to pass instead).

Which class for what:

========================================  ==================================================
class (builtin)                           raised for
========================================  ==================================================
InvalidArgumentError (ValueError)         an argument out of range or inconsistent
InvalidArgumentTypeError (TypeError)      an argument of the wrong type
ConfigurationError (ValueError)           a setting outside the call is missing or unusable
                                          (a Spark conf, the package's own metadata)
OutOfRangeError (IndexError)              an index or id outside what a dataset/plan has
UnknownColumnError (KeyError)             a column name the dataset does not have
FormatError (ValueError)                  a file that does not follow its format
EncodingError, UnsafeEncodingError        a value an MDS encoding cannot take, ``pkl``
CorruptShardError (OSError)               a shard file that is damaged
StorageError, CacheFullError (OSError)    storage that cannot be read or written
DatasetExistsError (FileExistsError)      output already there
IncompleteDatasetError (FileNotFound.)    shard files without index.json: a write that died
MissingExtraError (ModuleNotFoundError)   an optional dependency is needed
StateError (RuntimeError)                 a call the object's state does not allow (used up,
                                          stopped, iterated twice at once, failed before)
InternalError (RuntimeError)              a broken invariant: a petastream bug, report it
UnsupportedColumnError (TypeError),       the Spark materializer's errors
NullValuesError (ValueError),
MaterializationError (RuntimeError)
SupersededError (StateError),             the loader pipeline's (defined here, raised by
WorkerDiedError (RuntimeError),           ``petastream.pipeline``)
ArenaError (OSError)
========================================  ==================================================

Petastorm parity exceptions
---------------------------
``petastream.compat`` mirrors Petastorm, and code written for Petastorm matches on its
exception *types* (``except ValueError``, ``type(e) is RuntimeError`` in retry wrappers and
logs) and *texts*. Where Petastorm raises, compat raises the very builtin Petastorm raises,
with Petastorm's text, not one of the classes above. These are the only raises of bare
builtins in petastream (besides the protocol ones below); keep the text byte for byte:

======================================================  ============  ===========================
where (``petastream.compat.``)                          builtin       Petastorm's text begins
======================================================  ============  ===========================
spark_dataset_converter._get_spark_session              RuntimeError  "_get_spark_session should
                                                                      not be invoked from
                                                                      executor side."
spark_dataset_converter._get_parent_cache_dir_url       ValueError    "Please set the spark
                                                                      config petastorm.spark..."
spark_dataset_converter._check_dtype                    ValueError    "dtype {dtype} is not
                                                                      supported."
spark_dataset_converter.make_spark_converter            RuntimeError  "compression_codec should
                                                                      be None or one of..."
spark_dataset_converter._wait_file_available            RuntimeError  "Timeout while waiting for
                                                                      all parquet-store files"
_urls.normalize_dir_url                                 ValueError    "directory url must be a
                                                                      string"
_urls.normalize_dir_url (``''``)                        IndexError    "string index out of range"
_urls.check_url                                         ValueError    "ERROR! A scheme-less
                                                                      directory url"
_urls.normalize_databricks_dbfs_url                     ValueError    "On databricks runtime..."
_urls.check_parent_cache_dir_url                        ValueError    "URLs must be of the form"
reader.dataset_root                                     ValueError    "dataset url list must be
                                                                      non-empty."
reader._select                                          RuntimeError  "No fields matching the
                                                                      criteria"
reader.make_batch_reader                                ValueError    "Unknown reader_pool_type",
                                                                      "Unknown cache_type",
                                                                      "partition and
                                                                      num_partitions must be..."
reader.Reader.__iter__, _tf, _tf_loader (stopped)       RuntimeError  "Trying to read a sample
                                                                      after a reader..."
transform.TransformSpec                                 ValueError    "User can only specify one
                                                                      of removed_fields..."
transform.transform_batch                               ValueError    "Transformed result columns"
pytorch.LoaderBase.__iter__                             RuntimeError  "Cannot start a new
                                                                      iteration...", "You must
                                                                      finish a full pass..."
pytorch.InMemBatchedDataLoader                          RuntimeError  "InMemBatchedDataLoader
                                                                      couldn't be used multiple
                                                                      times"
======================================================  ============  ===========================

Where Petastorm's text is kept but its check is ours (``compat._checks``: ``num_epochs`` gives
"iterations must be positive integer or None", Petastorm's ventilator's ``ValueError``), the
class is ours (:class:`InvalidArgumentError`, a ``ValueError``).

Builtins kept on purpose (protocols, not errors): ``AttributeError`` from a module's
``__getattr__``, ``NotImplementedError`` in abstract methods, ``argparse.ArgumentTypeError``
in argument parsers, and internal control flow that never leaves its module
(``spark._outcome.Retry``, caught by the materializer).
"""

from __future__ import annotations

__all__ = [
    "PetastreamError",
    "InvalidArgumentError",
    "InvalidArgumentTypeError",
    "ConfigurationError",
    "OutOfRangeError",
    "UnknownColumnError",
    "FormatError",
    "EncodingError",
    "UnsafeEncodingError",
    "CorruptShardError",
    "MissingExtraError",
    "StorageError",
    "CacheFullError",
    "DatasetExistsError",
    "IncompleteDatasetError",
    "StateError",
    "InternalError",
    "UnsupportedColumnError",
    "NullValuesError",
    "MaterializationError",
    "SupersededError",
    "WorkerDiedError",
    "ArenaError",
]


class PetastreamError(Exception):
    """Root of every error raised by petastream."""


# -- arguments and settings --------------------------------------------------------------------
class InvalidArgumentError(PetastreamError, ValueError):
    """An argument's value is out of range or inconsistent with the others."""


class InvalidArgumentTypeError(PetastreamError, TypeError):
    """An argument has the wrong type."""


class ConfigurationError(PetastreamError, ValueError):
    """A setting from outside the call (a Spark conf, an environment variable, the installed
    package's metadata) is missing or unusable; the message names it and how to set it."""


class OutOfRangeError(PetastreamError, IndexError):
    """An index (sample, shard, batch, window, byte range) outside what there is."""


class UnknownColumnError(PetastreamError, KeyError):
    """A column name the dataset does not have; the message lists the ones it has."""

    def __str__(self) -> str:
        # KeyError's str() is the repr of its key; this one's argument is a sentence.
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()


# -- data and storage --------------------------------------------------------------------------
class FormatError(PetastreamError, ValueError):
    """A file or setting that does not follow its format: an MDS index.json, a notebook, a
    conda environment file."""


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


# -- object state ------------------------------------------------------------------------------
class StateError(PetastreamError, RuntimeError):
    """The call is not allowed in the object's current state: it was stopped or used up, is
    being iterated already, or an earlier step failed. The message says what to do first."""


class InternalError(PetastreamError, RuntimeError):
    """A broken invariant: a bug in petastream, not in the caller's use. Please report it
    with the message."""


# -- Spark materializer ------------------------------------------------------------------------
class UnsupportedColumnError(PetastreamError, TypeError):
    """A DataFrame column has a Spark type with no MDS encoding (struct, map, nested array...)."""


class NullValuesError(PetastreamError, ValueError):
    """A column holds nulls and ``null_policy='error'``; the message names columns and counts."""


class MaterializationError(PetastreamError, RuntimeError):
    """The Spark job that writes the dataset failed; the message carries the task's error."""


# -- loader pipeline ---------------------------------------------------------------------------
class SupersededError(StateError):
    """An iterator was pulled after a newer iteration took the loader's position over."""


class WorkerDiedError(PetastreamError, RuntimeError):
    """A worker process exited while it owed items."""


class ArenaError(PetastreamError, OSError):
    """No room for an arena in ``/dev/shm`` (or, without one, the temporary directory)."""
