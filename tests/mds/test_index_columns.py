"""index.json parsed into columns by Arrow: the same ShardTable as json.loads + from_shards,
or None (the JSON path then answers), never a different one; and the same errors."""

from __future__ import annotations

import json
import random

import pytest

from petastream.errors import FormatError
from petastream.mds import index_columns
from petastream.mds.index import parse_index
from petastream.mds.index_columns import table_from_json
from petastream.mds.shard_table import ShardTable

BASE = {"column_encodings": ["int"], "column_names": ["a"], "column_sizes": [8], "compression": None,
        "format": "mds", "hashes": [], "raw_data": {"basename": "s.mds", "bytes": 10, "hashes": {}},
        "samples": 1, "size_limit": 5, "version": 2, "zip_data": None}
ZIPPED = dict(BASE, compression="zstd", hashes=["sha1"],
              zip_data={"basename": "s.mds.zstd", "bytes": 3, "hashes": {"sha1": "ab"}})


def _doc(shards: list, **kw) -> bytes:
    return json.dumps({"shards": shards, "version": 2}, sort_keys=True, **kw).encode()


def _outcome(data: bytes) -> str:
    """"columns" (read as columns, equal to the JSON path's table), "json" (left to the JSON
    path) or "error" (both refuse it)."""
    table = table_from_json(data)
    try:
        want = parse_index(data)
    except (FormatError, ValueError):
        assert table is None, "accepted an index the JSON path refuses"
        return "error"
    if table is None:
        return "json"
    ref = ShardTable.from_shards(want)
    assert list(table) == want
    assert table.templates == ref.templates and table.template_ids.tolist() == ref.template_ids.tolist()
    for a in set(ref.raw_hashes) | set(table.raw_hashes):
        assert table.raw_hashes[a].to_pylist() == ref.raw_hashes[a].to_pylist()
    assert table.zip_names.to_pylist() == ref.zip_names.to_pylist()
    assert table.zip_bytes.tolist() == ref.zip_bytes.tolist()
    return "columns"


@pytest.mark.parametrize("data, outcome", [
    (_doc([]), "columns"),
    (_doc([BASE, ZIPPED, dict(ZIPPED, samples=0)]), "columns"),
    (_doc([BASE, ZIPPED], indent=1), "columns"),  # pretty-printed
    (json.dumps({"version": 2, "shards": [BASE, ZIPPED]}).encode(), "columns"),  # a merged index's order
    # A string column first: Arrow's inference would drop the leading null of [null, 8].
    (_doc([dict(BASE, column_sizes=[None, 8], column_names=["s", "a"], column_encodings=["str", "int"])] * 2), "columns"),
    (_doc([dict(BASE, column_sizes=[None, None], column_names=["s", "t"], column_encodings=["str", "str"])]), "columns"),
    (_doc([dict(BASE, column_names=["null"], column_encodings=["nullable"])]), "columns"),  # "null" in strings
    (_doc([dict(BASE, compression="")]), "columns"),
    (json.dumps({"shards": [dict(BASE, column_names=["é"])], "version": 2}, ensure_ascii=False).encode(), "columns"),
    (_doc([dict(BASE, raw_data={"basename": "a", "bytes": 1, "hashes": {"sha1": "x"}}),
           dict(BASE, raw_data={"basename": "b", "bytes": 1, "hashes": {"xxh64": "y"}})]), "columns"),
    (_doc([BASE, dict(BASE, column_names=["b"]), BASE, dict(BASE, size_limit=None)]), "columns"),
    (_doc([BASE]) + b"\n", "columns"),
    # Arrow cannot tell these from plain ones: left to the JSON path.
    (_doc([dict(BASE, raw_data={"basename": "a", "bytes": 1, "hashes": {"sha1": None}})]), "json"),
    (_doc([dict(BASE, extra=1)]), "json"),
    (_doc([dict(BASE, size_limit=1.5)]), "json"),
    (_doc([dict(BASE, column_names=["é"])]), "json"),  # escaped
    (json.dumps({"shards": [BASE], "version": 2, "x": 1}).encode(), "json"),
    # Refused by both.
    (_doc([{k: v for k, v in BASE.items() if k != "compression"}]), "error"),
    (_doc([BASE, {k: v for k, v in BASE.items() if k != "zip_data"}]), "error"),
    (_doc([dict(BASE, samples=-1)]), "error"),
    (_doc([dict(BASE, format="xsv")]), "error"),
    (_doc([dict(BASE, compression="zstd")]), "error"),
    (json.dumps({"shards": [BASE], "version": 3}).encode(), "error"),
    (_doc([BASE]) + b"\n" + _doc([BASE]), "error"),
    (b"{", "error"),
])
def test_columns_equal_the_json_path_or_leave_it_the_index(data, outcome):
    assert _outcome(data) == outcome


def _random_file(r: random.Random, name: str) -> dict:
    algos = r.sample(["sha1", "xxh64", "md5"], r.randint(0, 3))
    return {"basename": name, "bytes": r.randint(0, 10**12), "hashes": {a: r.choice(["ab12", "nullx", "ff"]) for a in algos}}


def _random_shard(r: random.Random, i: int) -> dict:
    k = r.randint(1, 3)
    compression = r.choice([None, "zstd", "", "null"])
    return {"column_encodings": r.sample(["int", "str", "bytes", "null_enc"], k),
            "column_names": [r.choice(["a", "b", "nul", "null", "", "x}, {y"]) for _ in range(k)],
            "column_sizes": [r.choice([8, None, 4]) for _ in range(k)], "compression": compression,
            "format": "mds", "hashes": r.sample(["sha1", "xxh64"], r.randint(0, 2)),
            "raw_data": _random_file(r, f"shard.{i}.mds"), "samples": r.randint(0, 100),
            "size_limit": r.choice([None, 1 << 26]), "version": 2,
            "zip_data": _random_file(r, f"shard.{i}.mds.zstd") if compression or r.random() < 0.2 else None}


def _mutate(r: random.Random, shard: dict) -> None:
    """Break one value of a shard, or of its raw file entry, or of that entry's hashes."""
    target = shard
    if r.random() < 0.3:
        target = shard["raw_data"]
        if r.random() < 0.5 and target["hashes"]:
            target = target["hashes"]
    key = r.choice(list(target))
    change = r.randrange(9)
    if change == 0:
        del target[key]
    elif change == 1:
        target["extra"] = 1
    else:
        target[key] = [None, 1.5, True, "x", [1], {"k": None}, -3, 0][change - 2]


@pytest.mark.parametrize("piece", [None, 64])
def test_random_indexes_read_as_columns_equal_the_json_path(piece, monkeypatch):
    """Also cut into pieces read on threads (``piece`` bytes: most indexes here are cut, some
    where a column name holds ``}, {``, which is no place to cut)."""
    if piece:
        monkeypatch.setattr(index_columns, "_PIECE", piece)
    r = random.Random(7)
    seen = {"columns": 0, "json": 0, "error": 0}
    for _ in range(300):
        shards = [_random_shard(r, i) for i in range(r.randint(0, 6))]
        if shards and r.random() < 0.3:  # one template, as a writer's shards
            shards = [dict(shards[0], samples=i) for i in range(len(shards))]
        if shards and r.random() < 0.5:
            _mutate(r, r.choice(shards))
        data = json.dumps({"shards": shards, "version": 2}, sort_keys=r.random() < 0.7,
                          indent=r.choice([None, None, 1])).encode()
        seen[_outcome(data)] += 1
    assert min(seen.values()) >= 10, seen  # each outcome exercised
