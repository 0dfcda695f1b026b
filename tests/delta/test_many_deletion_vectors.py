"""Deletion vectors read by petastream from the log's descriptors (checked against deltalake's
reading), and a table with more than 1,000 files carrying file-based vectors (Databricks'
default), on which deltalake 1.6.6's DeltaTable.deletion_vectors() never returns: DeltaSource
opens it without deltalake's call, and that call, where still made, is bounded in time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pytest

from petastream.delta import DeltaSource
from petastream.delta.deletion_vectors import (
    DELTALAKE_TIMEOUT_ENV,
    deltalake_keep_masks,
    log_keep_masks,
)
from petastream.errors import ConfigurationError, CorruptShardError
from petastream.storage.location import resolve
from tests.delta.conftest import add_paths
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


def test_the_table_opens_and_serves_exactly_the_kept_rows(many):
    """petastream reads the vectors from the log's descriptors itself: deltalake is not asked."""
    path, _ = many
    src = DeltaSource(path)
    assert src.deleted_rows == FILES + 2 and len(src) == FILES * ROWS - FILES - 2
    ids = set(src.read(np.arange(len(src)))["id"].tolist())
    assert len(ids) == len(src)
    assert {0, 1, 2, 5, 10, 15, 4 * 1099 + 3}.isdisjoint(ids)  # file 0: rows 0-2; file i: row i % 4
    assert {3, 4, 6, 7, 8, 4 * 1099} <= ids
    pruned = DeltaSource(path, filters=[("id", "<", 8)])  # two files kept: only their vectors read
    assert sorted(pruned.read(np.arange(len(pruned)))["id"].tolist()) == [3, 4, 6, 7]


def _masks(path: str, version: int | None = None) -> tuple[dict, dict]:
    """(ours, deltalake's) deleted rows per file (by unquoted add path)."""
    from deltalake import DeltaTable

    dt = DeltaTable(path, version=version)
    actions = pa.table(dt.get_add_actions()).to_pydict()
    files = dict(zip(actions["path"], actions["num_records"]))
    ours, why = log_keep_masks(resolve(path), dt.version(), files)
    assert ours is not None, why
    theirs = deltalake_keep_masks(dt, path, dt.version(), len(files))
    deleted = {unquote(p): sorted(np.flatnonzero(~m).tolist()) for p, m in ours.items()}
    return deleted, {p: sorted(np.flatnonzero(~m).tolist()) for p, m in
                     ((unquote(u.split(path.rstrip("/") + "/", 1)[-1]), m) for u, m in theirs.items())}


def test_our_reading_matches_deltalakes(tmp_path):
    """Inline and file vectors, several to a .bin file, a vector replaced by a later one, a
    checkpoint then commits after it, time travel before the checkpoint, escaped partition
    directories."""
    from deltalake import DeltaTable, write_deltalake

    path = str(tmp_path / "t")
    keys = ["a b", "x/y", "c%d", "é=1"]
    write_deltalake(path, pa.table({"id": pa.array(range(400)), "k": pa.array(keys * 100)}), partition_by=["k"])
    files = add_paths(path)
    delete_rows(path, {files[0]: [0, 5], files[1]: [1, 2, 3]})  # one .bin, two vectors
    delete_rows(path, {files[2]: [7]}, inline=True)
    DeltaTable(path).create_checkpoint()  # at version 2
    delete_rows(path, {files[0]: [0, 5, 6], files[3]: range(0, 100, 3)}, prefix="")  # replaces files[0]'s
    ours, theirs = _masks(path)
    assert ours == theirs and ours[unquote(files[0])] == [0, 5, 6] and len(ours) == 4
    before, theirs_before = _masks(path, version=1)
    assert before == theirs_before and len(before) == 2


def test_a_damaged_vector_file_is_an_error_naming_it(tmp_path):
    path = str(tmp_path / "t")
    paths = many_files_table(path, 3)
    delete_rows(path, {paths[0]: [1], paths[1]: [2]}, prefix="dv")
    (name,) = os.listdir(os.path.join(path, "dv"))
    target = os.path.join(path, "dv", name)
    content = bytearray(open(target, "rb").read())
    content[-6] ^= 0xFF  # a bit of the last vector's bitmap
    open(target, "wb").write(bytes(content))
    with pytest.raises(CorruptShardError, match=rf"deletion vector of {paths[1]}: .*{name} fails its size or CRC-32"):
        DeltaSource(path)
    open(target, "wb").write(bytes(content[:-20]))
    with pytest.raises(CorruptShardError, match=rf"{name} \(\d+ bytes\): the file is truncated"):
        DeltaSource(path)


def test_an_empty_vector_deletes_nothing(tmp_path):
    path = str(tmp_path / "t")
    paths = many_files_table(path, 2)
    delete_rows(path, {paths[0]: [], paths[1]: [3]})
    src = DeltaSource(path)
    assert src.deleted_rows == 1 and sorted(src.read(np.arange(len(src)))["id"].tolist()) == [0, 1, 2, 3, 4, 5, 6]


def test_a_log_we_do_not_read_falls_back_to_deltalake(tmp_path):
    """A multi-part checkpoint (one part here, named as such): deltalake reads the vectors."""
    from deltalake import DeltaTable

    path = str(tmp_path / "t")
    paths = many_files_table(path, 3)
    delete_rows(path, {paths[0]: [1], paths[2]: [0, 3]})
    DeltaTable(path).create_checkpoint()
    log = os.path.join(path, "_delta_log")
    os.rename(os.path.join(log, f"{1:020d}.checkpoint.parquet"),
              os.path.join(log, f"{1:020d}.checkpoint.{1:010d}.{1:010d}.parquet"))
    last = json.load(open(os.path.join(log, "_last_checkpoint")))
    json.dump({**last, "parts": 1}, open(os.path.join(log, "_last_checkpoint"), "w"))
    ours, why = log_keep_masks(resolve(path), 1, dict.fromkeys(paths, 4))
    assert ours is None and "multi-part or v2" in why
    src = DeltaSource(path)
    assert src.deleted_rows == 3 and sorted(src.read(np.arange(len(src)))["id"].tolist()) == [0, 2, 3, 4, 5, 6, 7, 9, 10]
