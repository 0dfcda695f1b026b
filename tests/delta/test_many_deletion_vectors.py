"""A table with more than 1,000 files carrying file-based deletion vectors (Databricks' default):
deltalake 1.6.6's DeltaTable.deletion_vectors() never returns on one (delta-io/delta-rs#4627),
which must not hang DeltaSource at open."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from petastream.delta.deletion_vectors import DELTALAKE_TIMEOUT_ENV, deltalake_keep_masks
from petastream.errors import ConfigurationError
from tests.delta.dv_writer import delete_rows, many_files_table

FILES = 1100
ROWS = 4  # per file


@pytest.fixture(scope="module")
def many(tmp_path_factory) -> tuple[str, list[str]]:
    """1,100 files of 4 rows; file i loses row i % 4 (and file 0 its rows 1 and 2 too), every
    vector in one .bin file, as one DELETE writes them."""
    path = str(tmp_path_factory.mktemp("dv") / "many")
    paths = many_files_table(path, FILES, ROWS)
    deleted = {p: [i % ROWS] for i, p in enumerate(paths)}
    deleted[paths[0]] = [0, 1, 2]
    delete_rows(path, deleted)
    return path, paths


def test_deltalakes_call_is_bounded(many):
    """deltalake's own reading, waited for at most the timeout: either it returns the vectors
    (a deltalake without the hang; this one returns now and then) or an error naming the table,
    its version, its files and the upstream issue, and every later open in that process is
    refused (deltalake's runtime is blocked there), never a hang. In a child process: a call
    that never returns blocks deltalake in its process for good."""
    path, _ = many
    script = f"""
from deltalake import DeltaTable
from petastream.delta import DeltaSource
from petastream.delta.deletion_vectors import deltalake_keep_masks
from petastream.errors import StateError, UnsupportedFeatureError
try:
    masks = deltalake_keep_masks(DeltaTable({path!r}), {path!r}, 1, {FILES})
except UnsupportedFeatureError as e:
    print("ERROR", e)
    try:
        DeltaSource({path!r})
    except StateError as e:
        print("REFUSED", e)
else:
    print("READ", len(masks), sum(int((~m).sum()) for m in masks.values()))
"""
    env = {**os.environ, DELTALAKE_TIMEOUT_ENV: "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                         timeout=300, check=True).stdout
    if out.startswith("READ"):
        assert out.split() == ["READ", str(FILES), str(FILES + 2)]
    else:
        assert f"Delta table {path} at version 1 ({FILES} data files)" in out
        assert "within 1 s" in out and "delta-io/delta-rs#4627" in out
        assert f"REFUSED cannot open the Delta table at {path}: deltalake's deletion_vectors() on {path} at version 1 never returned" in out


@pytest.mark.parametrize("value", ["0", "-3", "soon"])
def test_a_bad_timeout_is_refused(monkeypatch, value):
    monkeypatch.setenv(DELTALAKE_TIMEOUT_ENV, value)
    with pytest.raises(ConfigurationError, match=DELTALAKE_TIMEOUT_ENV):
        deltalake_keep_masks(None, "t", 1, FILES)  # checked before deltalake is called
