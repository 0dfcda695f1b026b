"""Error classes: the one error policy.

Every error petastream raises is a :class:`PetastreamError` that also inherits the builtin
it refines, so ``except PetastreamError`` catches all of ours and ``except ValueError`` (or
``OSError``, ``RuntimeError``...) in user code keeps working. All of them pickle with their
message (they cross process boundaries: Spark executors, DataLoader workers), which plain
multiple inheritance from a builtin gives as long as ``__init__`` takes the message as its
only positional argument. Arguments are checked with :mod:`petastream.checks` (one message
shape: the argument, the value, what to pass instead).

Where Mosaic Streaming raises a builtin for the same bad input (its ``MDSWriter`` and
encodings), ours is catchable as that builtin too and its message carries Mosaic's sentence, so
``except``/``pytest.raises(match=)`` written against Mosaic keep working (``EncodingTypeError``
and the other classes in the "Mosaic parity" part of this module). The case-by-case list, and
the deliberate differences, are in docs/mds.md ("Errors: parity with Mosaic").

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
UnsupportedFeatureError (FormatError)     a table feature petastream does not honour (Delta)
EncodingError, UnsafeEncodingError        a value an MDS encoding cannot take, ``pkl``
CorruptShardError (OSError)               a shard file that is damaged
StorageError, CacheFullError (OSError)    storage that cannot be read or written
DatasetExistsError (FileExistsError)      output already there
DatasetNotFoundError (FileNotFoundError)  nothing to read at a URL
IncompleteDatasetError (FileNotFound.)    shard files without index.json: a write that died
MissingExtraError (ModuleNotFoundError)   an optional dependency is needed
StateError (RuntimeError)                 a call the object's state does not allow (used up,
                                          stopped, iterated twice at once, failed before)
InternalError (RuntimeError)              a broken invariant: a petastream bug, report it
UnsupportedColumnError (TypeError),       the Spark materializer's errors
NullValuesError (ValueError),
MaterializationError (RuntimeError)
PipelineError (RuntimeError),             the loader pipeline's: a pass that broke an
WorkerDiedError (PipelineError),          invariant, a worker that died owing batches, an
SupersededError (StateError),             iterator a newer one took over, no shared memory,
ArenaError (OSError),                     len() of a loader that repeats forever
UnsizedError (TypeError)
EncodingTypeError, EncodingOverflowError, Mosaic parity: a builtin Mosaic raises for the same
EncodedSizeError, MissingColumnError,     input, besides ours (see above)
UnknownEncodingError,
UnexpectedArgumentError
========================================  ==================================================

Petastorm parity exceptions
---------------------------
``petastream.compat`` mirrors Petastorm, and code written for Petastorm matches on its
exception *types* (``except ValueError``, ``type(e) is RuntimeError`` in retry wrappers and
logs) and *texts*. Where Petastorm raises, compat raises the very builtin Petastorm raises,
with Petastorm's text, not one of the classes above. These are the only raises of bare
builtins in petastream (besides the protocol ones below); keep the text byte for byte:

===========================================  ==================================  ===============
where (``petastream.compat.``)               Petastorm's text begins               builtin
===========================================  ==================================  ===============
spark_dataset_converter._get_spark_session   "_get_spark_session should not be"    RuntimeError
spark_dataset_converter                      "Please set the spark config"         ValueError
._get_parent_cache_dir_url
spark_dataset_converter._check_dtype         "dtype {dtype} is not supported."     ValueError
spark_dataset_converter.make_spark_converter "compression_codec should be None"    RuntimeError
spark_dataset_converter._wait_file_available "Timeout while waiting for all"       RuntimeError
_urls.normalize_dir_url                      "directory url must be a string";     ValueError;
                                             for ``''``: "string index out of"     IndexError
_urls.check_url                              "ERROR! A scheme-less directory url"  ValueError
_urls.normalize_databricks_dbfs_url          "On databricks runtime, if `df`"      ValueError
_urls.check_parent_cache_dir_url             "URLs must be of the form"            ValueError
_batch_open.dataset_root,                    "dataset url list must be non-empty"  ValueError
etl.dataset_metadata
_batch_open.select_columns                   "No fields matching the criteria"     RuntimeError
reader.make_batch_reader                     "Unknown reader_pool_type",           ValueError
                                             "Unknown cache_type", "partition and
                                             num_partitions must be ints..."
errors.stopped_error() (every stopped       "Trying to read a sample after a"     RuntimeError
reader: Reader, RowReader, _inmem, _tf)
transform.TransformSpec, .transform_batch    "User can only specify one of",       ValueError
                                             "Transformed result columns"
pytorch.LoaderBase.__iter__                  "Cannot start a new iteration",       RuntimeError
                                             "You must finish a full pass"
pytorch.InMemBatchedDataLoader               "InMemBatchedDataLoader couldn't be"  RuntimeError
codecs (``CompressedImageCodec``,            "Abstract method was called",         RuntimeError,
``NdarrayCodec``, ``ScalarCodec``...),       "Unexpected type of", "Unexpected     ValueError,
_images                                      dimensions of", "Expected a scalar",  TypeError
                                             "Unexpected image dimensions"
unischema, _arrow_fields                     "Was not able to map type", "Cannot   ValueError,
                                             auto-create unischema", "Expected     RuntimeError
                                             partition type", "Dictionary fields"
predicates, selectors                        "Predicate is nor derived from",      ValueError
                                             "rowgroup_selector parameter is..."
etl.rowgroup_indexers, etl.rowgroup_indexing "Make sure Spark map function",       TypeError,
                                             "Cannot build index", "Could not      ValueError
                                             find _metadata file"
row_reader.make_reader, _row_plan, _row_work "Fields must be either None",         ValueError,
_parquet_select, _row_source                 "make_reader has failed", the         RuntimeError
                                             reader_pool_type/predicate texts,
                                             "dataset url list must be non-empty",
                                             "Local cache is not supported"...
_row_cache.check_local_disk                  "Condition 'size_limit_bytes /"       ValueError
_row_filters (legacy pyarrow's filter        "Malformed filters", "Cannot use      ValueError,
checks, Petastorm's ``filters``)             empty collection", "' object is not   TypeError
                                             a collection"...
ngram.NGram                                  "Fields must be set", "delta_thres-   ValueError
                                             hold must be a number"...
weighted_sampling_reader                     "Two or more readers must be",        ValueError
                                             "All readers passed to..."
tf_utils                                     'Encountered "'                       RuntimeError
fs_utils.FilesystemResolver,                 "ERROR! A scheme-less dataset url",   ValueError,
get_filesystem_and_path_or_paths             "URLs must be of the form", "The      RuntimeError
                                             dataset url list must contain",
                                             "Pickling FilesystemResolver is not"
test_util.reader_mock.ReaderMock             "Sequence argument not supported"     ValueError
===========================================  ==================================  ===============

``tests/test_error_policy.py`` counts the bare raises per module against this list, so a new
one fails there until it is a class above or listed here.

Where Petastorm's text is kept but its check is ours (``compat._checks``: ``num_epochs`` gives
"iterations must be positive integer or None", Petastorm's ventilator's ``ValueError``), the
class is ours (:class:`InvalidArgumentError`, a ``ValueError``).

Builtins kept on purpose (protocols, not errors): ``AttributeError`` from a module's
``__getattr__``, ``NotImplementedError`` in abstract methods, ``argparse.ArgumentTypeError``
in argument parsers, and internal control flow that never leaves its module
(``spark._outcome.Retry``, caught by the materializer; ``delta.deletion_vectors._Unreadable``,
a log its reader hands to deltalake).
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
    "UnsupportedFeatureError",
    "EncodingError",
    "UnsafeEncodingError",
    "CorruptShardError",
    "MissingExtraError",
    "StorageError",
    "CacheFullError",
    "DatasetExistsError",
    "DatasetNotFoundError",
    "IncompleteDatasetError",
    "StateError",
    "InternalError",
    "UnsupportedColumnError",
    "NullValuesError",
    "MaterializationError",
    "PipelineError",
    "SupersededError",
    "UnsizedError",
    "WorkerDiedError",
    "ArenaError",
    "EncodingTypeError",
    "EncodingOverflowError",
    "EncodedSizeError",
    "MissingColumnError",
    "UnknownEncodingError",
    "UnexpectedArgumentError",
]


class PetastreamError(Exception):
    """Root of every error raised by petastream."""


class _PlainMessage(Exception):
    """``str()`` is the message itself: a ``KeyError`` would show it quoted, as a key."""

    def __str__(self) -> str:
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()


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


class UnknownColumnError(_PlainMessage, PetastreamError, KeyError):
    """A column name the dataset does not have; the message lists the ones it has."""


# -- data and storage --------------------------------------------------------------------------
class FormatError(PetastreamError, ValueError):
    """A file or setting that does not follow its format: an MDS index.json, a notebook, a
    conda environment file."""


class UnsupportedFeatureError(FormatError):
    """A table asks its readers for a feature petastream does not honour (a Delta table's
    reader feature): refused at open, naming the table, version and feature."""


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


class DatasetNotFoundError(PetastreamError, FileNotFoundError):
    """Nothing to read at a URL: no MDS dataset (no index.json) and no Parquet files."""


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
class PipelineError(PetastreamError, RuntimeError):
    """A loader's pass broke an invariant (a worker ended owing batches, or handed one out of
    order) or its workers failed without an error of their own."""


class WorkerDiedError(PipelineError):
    """A decode worker (thread or process) exited while it owed batches."""


class UnsizedError(PetastreamError, TypeError):
    """``len()`` of a loader that repeats forever: a ``TypeError``, what ``len()`` raises for
    any unsized object (Lightning and PyTorch check for it)."""


class SupersededError(StateError):
    """An iterator was pulled after a newer iteration took the loader's position over."""


class ArenaError(PetastreamError, OSError):
    """No room for an arena in ``/dev/shm`` (or, without one, the temporary directory)."""


# -- Mosaic parity: a builtin Mosaic Streaming raises for the same input, besides ours ---------
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
