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


def _dataset(tmp_path, hashes):
    import numpy as np

    from petastream.mds.writer import write_mds

    path = tmp_path / "ds"
    write_mds({"id": np.arange(100), "s": np.array([f"v{i}" for i in range(100)], dtype=object)},
              str(path), size_limit=600, hashes=hashes, compression=None)
    return path


def test_verify_says_sizes_only_without_hashes(tmp_path, capsys):
    path = _dataset(tmp_path, [])
    assert main(["verify", str(path)]) == 0
    out = capsys.readouterr().out
    assert "0 damaged; sizes only: index.json records no hashes" in out


def test_verify_catches_a_flipped_id_byte_when_hashes_exist(tmp_path, capsys):
    """A default (hashed) dataset: one flipped byte inside an id is damage, not data."""
    path = _dataset(tmp_path, ["xxh3_64"])
    assert main(["verify", str(path)]) == 0
    assert "contents checked (xxh3_64)" in capsys.readouterr().out
    victim = path / "shard.00000.mds"
    data = bytearray(victim.read_bytes())
    n = int.from_bytes(data[:4], "little")
    first = int.from_bytes(data[4 + 4 * 3: 8 + 4 * 3], "little")  # sample 3: [len s][id][s]
    data[first + 4 + 7] ^= 0x01  # the id's most significant byte: 3 -> 72057594037927939
    victim.write_bytes(bytes(data))
    assert n > 3
    assert main(["verify", str(path)]) == 1
    assert "shard.00000.mds: xxh3_64" in capsys.readouterr().out


def test_verify_decodes_every_value_without_hashes(tmp_path, capsys):
    path = _dataset(tmp_path, [])
    victim = path / "shard.00001.mds"
    data = bytearray(victim.read_bytes())
    data[-1] = 0xFF  # last byte of the last string: not UTF-8
    victim.write_bytes(bytes(data))
    assert main(["verify", str(path)]) == 1
    out = capsys.readouterr().out
    assert "shard.00001.mds" in out and "column 's'" in out and "1 damaged; sizes only" in out
