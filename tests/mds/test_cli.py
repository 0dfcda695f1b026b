"""`petastream inspect` and `petastream verify`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from petastream.cli import main
from tests.conftest import FIXTURES


def test_inspect_prints_columns_shards_rows_sizes(capsys):
    assert main(["inspect", os.path.join(FIXTURES, "scalars-zstd-hashed")]) == 0
    out = capsys.readouterr().out
    assert "samples      40" in out and "shards       8" in out and "zstd:7" in out
    assert "raw" in out and "stored" in out and "str_decimal" in out


def test_inspect_json(capsys):
    assert main(["inspect", "--json", os.path.join(FIXTURES, "empty-first-shard")]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["samples"] == 2 and info["shards"] == 3 and info["empty_shards"] == 1


def test_verify_clean_dataset_exits_0(capsys):
    assert main(["verify", os.path.join(FIXTURES, "merged")]) == 0
    assert "11 shard files checked, 0 damaged" in capsys.readouterr().out


def test_verify_names_damaged_files_and_exits_1(tmp_path, capsys):
    path = tmp_path / "ds"
    shutil.copytree(os.path.join(FIXTURES, "scalars-zstd-hashed"), path)
    for f in os.listdir(path):
        os.chmod(path / f, 0o644)
    data = bytearray((path / "shard.00002.mds.zstd").read_bytes())
    data[20] ^= 1
    (path / "shard.00002.mds.zstd").write_bytes(bytes(data))
    os.remove(path / "shard.00005.mds.zstd")
    assert main(["verify", str(path)]) == 1
    out = capsys.readouterr().out
    assert "DAMAGED" in out and "shard.00002.mds.zstd: sha1" in out
    assert "shard.00005.mds.zstd: missing" in out and "2 damaged" in out


def test_verify_missing_dataset_exits_2(tmp_path, capsys):
    assert main(["verify", str(tmp_path)]) == 2
    assert "index.json not found" in capsys.readouterr().err


def test_console_script_runs():
    exe = os.path.join(os.path.dirname(sys.executable), "petastream")
    res = subprocess.run([exe, "inspect", os.path.join(FIXTURES, "tabular-fixed")],
                         capture_output=True, text=True, check=True)
    assert "all fixed-size" in res.stdout
