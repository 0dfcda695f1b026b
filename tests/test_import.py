"""`import petastream` must stay light: no torch, tensorflow or pyspark."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "tensorflow", "pyspark", "libcst")


def test_import_does_not_pull_frameworks():
    code = (
        "import sys, petastream, petastream.mds.dataset, petastream.mds.writer, petastream.errors\n"
        "petastream.open; petastream.MDSWriter\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_errors_pickle_and_keep_their_builtin_base():
    import pickle

    from petastream.errors import CorruptShardError, EncodingError

    for err in (CorruptShardError("shard x: truncated"), EncodingError("column 'a': bad")):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and str(back) == str(err)
    assert issubclass(CorruptShardError, OSError) and issubclass(EncodingError, ValueError)
