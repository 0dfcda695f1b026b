"""``index.json``: parsing, validation, writing and merging.

A writer's index is ``json.dumps({"shards": [...], "version": 2}, sort_keys=True)``: default
separators, ASCII, no trailing newline. Each shard object has exactly 11 keys (Mosaic's reader
raises ``TypeError`` on any extra or missing key). A merged index is written *without*
``sort_keys`` (``{"version": 2, "shards": ...}``) and its basenames carry the sub-directory of
the partial dataset (``"101/shard.00000.mds"``); readers accept any key order.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterable, Sequence
from typing import Any

from petastream.errors import FormatError
from petastream.mds.index_sidecar import INDEX_SIDECAR
from petastream.storage.location import Location, resolve

__all__ = ["SHARD_KEYS", "parse_index", "dump_index", "shard_basename", "merge_index", "read_index", "commit_index"]

SHARD_KEYS = frozenset({
    "column_encodings", "column_names", "column_sizes", "compression", "format", "hashes",
    "raw_data", "samples", "size_limit", "version", "zip_data",
})


def shard_basename(index: int, extension: str | None) -> str:
    name = f"shard.{index:05}.mds"
    return f"{name}.{extension}" if extension else name


def parse_index(text: str | bytes, *, source: str = "index.json") -> list[dict[str, Any]]:
    """Validate an index and return its shard objects, in order."""
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise FormatError(f"{source} is not valid JSON: {e}") from e
    if not isinstance(obj, dict) or "shards" not in obj:
        raise FormatError(f"{source}: expected an object with 'version' and 'shards'")
    if obj.get("version") != 2:
        raise FormatError(f"{source}: unsupported index version {obj.get('version')!r} (expected 2)")
    shards = obj["shards"]
    if not isinstance(shards, list):
        raise FormatError(f"{source}: 'shards' must be a list")
    for i, shard in enumerate(shards):
        if not isinstance(shard, dict):
            raise FormatError(f"{source}: shard {i} is not an object")
        if shard.get("format") != "mds":
            raise FormatError(
                f"{source}: shard {i} has format {shard.get('format')!r}; only 'mds' is supported"
            )
        missing = SHARD_KEYS - shard.keys()
        if missing:
            raise FormatError(f"{source}: shard {i} lacks keys {sorted(missing)}")
        if not isinstance(shard["samples"], int) or shard["samples"] < 0:
            raise FormatError(f"{source}: shard {i} has an invalid sample count {shard['samples']!r}")
        if shard["compression"] and not shard["zip_data"]:
            raise FormatError(f"{source}: shard {i} is compressed but has no zip_data")
    return shards


def dump_index(shards: Sequence[dict[str, Any]]) -> bytes:
    """The exact bytes Mosaic's writer produces for ``shards``."""
    return json.dumps({"version": 2, "shards": list(shards)}, sort_keys=True).encode("ascii")


def read_index(url: str | Location, *, storage_options: dict | None = None) -> list[dict[str, Any]]:
    loc = resolve(url, storage_options) if isinstance(url, str) else url
    return parse_index(loc.read_bytes("index.json"), source=loc.child_url("index.json"))


def merge_index(
    parts: Iterable[str] | str,
    out: str | None = None,
    *,
    storage_options: dict | None = None,
) -> list[dict[str, Any]]:
    """Merge partial datasets that are immediate sub-directories of ``out`` into one index.

    ``merge_index(out)`` takes every ``<out>/<sub>/index.json`` sorted by path (as Mosaic, so
    ``10/`` sorts before ``9/``); ``merge_index([url, ...], out)`` takes the given ones in order.
    Shard files stay where they are; basenames gain the sub-directory. The merged index.json is
    written last, atomically, and returned as a shard list.
    """
    if isinstance(parts, str) and out is None:
        out = parts
        root = resolve(out, storage_options)
        subs = sorted(
            posixpath.dirname(p) for p in root.listdir_recursive_names("index.json", depth=2)
            if "/" in p
        )
    else:
        if out is None:
            raise FormatError("merge_index(parts, out): give the output directory as 'out'")
        root = resolve(out, storage_options)
        subs = []
        for url in dict.fromkeys(parts):  # de-duplicated, order kept
            url = url.rstrip("/")
            if url.endswith("/index.json"):
                url = url[: -len("/index.json")]
            subs.append(posixpath.basename(url))
    shards: list[dict[str, Any]] = []
    for sub in subs:
        for shard in read_index(root.child(sub)):
            shard = dict(shard)
            for key in ("raw_data", "zip_data", "raw_meta", "zip_meta"):
                if shard.get(key):
                    shard[key] = dict(shard[key], basename=f"{sub}/{shard[key]['basename']}")
            shards.append(shard)
    # Not sort_keys: Mosaic's merged index starts with "version".
    commit_index(root, json.dumps({"version": 2, "shards": shards}).encode("ascii"))
    return shards


def commit_index(location: Location, index_bytes: bytes) -> None:
    """Write ``index.json`` (the commit point) atomically, and nothing else: the directory
    holds exactly the files Mosaic's writer makes. A ``petastream.index.arrow`` an earlier
    petastream left beside it (it describes the old index only) is removed first."""
    if location.exists(INDEX_SIDECAR):
        location.remove(INDEX_SIDECAR)
    location.write_bytes_atomic("index.json", index_bytes)
