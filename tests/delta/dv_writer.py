"""A small writer of Delta deletion vectors, for test tables (delta-rs reads them, does not write them).

Written from the Delta protocol's description (PROTOCOL.md, "Deletion Vectors"):

* the bitmap ("RoaringBitmapArray", portable form): magic ``1681511377`` (int32 LE), the
  number of 32-bit bitmaps (int64 LE), then per bitmap its key (the rows' high 32 bits, int32
  LE) and the standard portable serialization of a 32-bit Roaring bitmap of the low 32 bits;
* inline (``storageType`` ``"i"``): ``pathOrInlineDv`` is that bitmap in Z85, ``sizeInBytes``
  its byte length;
* in a file (``"u"``): ``<table>/<prefix>/deletion_vector_<uuid>.bin``, a version byte (1),
  then per vector at its ``offset``: its size (int32 BE), the bitmap, its CRC-32 (int32 BE);
  ``pathOrInlineDv`` is the prefix followed by the UUID's 16 bytes in Z85 (20 characters);
* the commit: protocol (reader 3 / writer 7, feature ``deletionVectors``), the table property
  ``delta.enableDeletionVectors``, and per file a ``remove`` of it and an ``add`` of the same
  path with its ``deletionVector``.

Checked against deltalake reading the same tables (tests/delta/test_deletion_vectors.py).
"""

from __future__ import annotations

import glob
import json
import os
import struct
import time
import uuid
import zlib
from collections.abc import Iterable, Mapping

MAGIC = 1681511377
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def z85(data: bytes) -> str:
    """Z85 (ZeroMQ's Base85) of ``data``, zero-padded to a multiple of 4 bytes."""
    data = data + b"\0" * (-len(data) % 4)
    out = []
    for (word,) in struct.iter_unpack(">I", data):
        chars = []
        for _ in range(5):
            word, r = divmod(word, 85)
            chars.append(_Z85[r])
        out.append("".join(reversed(chars)))
    return "".join(out)


def bitmap(rows: Iterable[int]) -> bytes:
    """The portable RoaringBitmapArray of ``rows`` (row indices in their file)."""
    from pyroaring import BitMap

    by_key: dict[int, list[int]] = {}
    for r in sorted(set(int(r) for r in rows)):
        by_key.setdefault(r >> 32, []).append(r & 0xFFFFFFFF)
    parts = [struct.pack("<iq", MAGIC, len(by_key))]
    for key in sorted(by_key):
        parts.append(struct.pack("<i", key) + BitMap(by_key[key]).serialize())
    return b"".join(parts)


def _log_state(table: str) -> tuple[int, dict, dict, dict]:
    """(latest version, protocol, metaData, {path: add action}) from the JSON commits."""
    version, protocol, meta, adds = -1, {}, {}, {}
    for name in sorted(glob.glob(os.path.join(table, "_delta_log", "*.json"))):
        version = int(os.path.basename(name).split(".")[0])
        with open(name) as f:
            for line in f:
                action = json.loads(line)
                if "protocol" in action:
                    protocol = action["protocol"]
                if "metaData" in action:
                    meta = action["metaData"]
                if "add" in action:
                    adds[action["add"]["path"]] = action["add"]
                if "remove" in action:
                    adds.pop(action["remove"]["path"], None)
    return version, protocol, meta, adds


def delete_rows(table: str, deleted: Mapping[str, Iterable[int]], inline: bool = False, prefix: str = "ab") -> int:
    """Commit deletion vectors to ``table`` (a local Delta table of JSON commits): for each add
    path in ``deleted``, those row indices of its file are deleted. Inline vectors, or one DV
    file holding them all. Returns the new version."""
    version, protocol, meta, adds = _log_state(table)
    readers = sorted(set(protocol.get("readerFeatures") or []) | {"deletionVectors"})
    writers = sorted(set(protocol.get("writerFeatures") or []) | {"deletionVectors"})
    protocol = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": readers, "writerFeatures": writers}
    meta = {**meta, "configuration": {**(meta.get("configuration") or {}), "delta.enableDeletionVectors": "true"}}
    now = int(time.time() * 1000)
    actions: list[dict] = [{"protocol": protocol}, {"metaData": meta}]
    blobs = {path: bitmap(rows) for path, rows in deleted.items()}
    descriptors = {}
    if inline:
        for path, blob in blobs.items():
            descriptors[path] = {"storageType": "i", "pathOrInlineDv": z85(blob), "sizeInBytes": len(blob)}
    else:
        u = uuid.uuid4()
        os.makedirs(os.path.join(table, prefix), exist_ok=True)
        content, offset = bytearray(b"\x01"), 1
        for path, blob in blobs.items():
            descriptors[path] = {"storageType": "u", "pathOrInlineDv": prefix + z85(u.bytes), "offset": offset,
                                 "sizeInBytes": len(blob)}
            record = struct.pack(">i", len(blob)) + blob + struct.pack(">I", zlib.crc32(blob) & 0xFFFFFFFF)
            content += record
            offset += len(record)
        with open(os.path.join(table, prefix, f"deletion_vector_{u}.bin"), "wb") as f:
            f.write(bytes(content))
    for path, desc in descriptors.items():
        add = dict(adds[path])
        desc["cardinality"] = len(set(int(r) for r in deleted[path]))
        actions.append({"remove": {"path": path, "deletionTimestamp": now, "dataChange": True,
                                   "extendedFileMetadata": True, "partitionValues": add.get("partitionValues", {}),
                                   "size": add["size"], **({"deletionVector": add["deletionVector"]}
                                                           if add.get("deletionVector") else {})}})
        stats = json.loads(add.get("stats") or "{}")
        stats["tightBounds"] = False  # the bounds may be those of deleted rows now
        add["stats"] = json.dumps(stats)
        actions.append({"add": {**add, "modificationTime": now, "dataChange": True, "deletionVector": desc}})
    actions.append({"commitInfo": {"timestamp": now, "operation": "DELETE", "operationParameters": {}}})
    new = version + 1
    with open(os.path.join(table, "_delta_log", f"{new:020d}.json"), "x") as f:
        f.write("\n".join(json.dumps(a) for a in actions) + "\n")
    return new


def many_files_table(table: str, files: int, rows_per_file: int = 4) -> list[str]:
    """A local Delta table of ``files`` tiny Parquet files (ids 0.. in order, ``rows_per_file``
    each), written directly as one JSON commit: what deltalake would write, in a fraction of its
    time for thousands of files. Returns the add paths, file ``i`` holding ids
    ``i * rows_per_file ...``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(os.path.join(table, "_delta_log"))
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    now = int(time.time() * 1000)
    actions: list[dict] = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps(schema), "partitionColumns": [], "configuration": {},
                      "createdTime": now}}]
    paths = []
    for i in range(files):
        path = f"part-{i:05d}-{uuid.uuid4()}.parquet"
        ids = pa.array(range(i * rows_per_file, (i + 1) * rows_per_file), pa.int64())
        pq.write_table(pa.table({"id": ids}), os.path.join(table, path))
        stats = {"numRecords": rows_per_file, "minValues": {"id": i * rows_per_file},
                 "maxValues": {"id": (i + 1) * rows_per_file - 1}, "nullCount": {"id": 0}}
        actions.append({"add": {"path": path, "partitionValues": {}, "size": os.path.getsize(os.path.join(table, path)),
                                "modificationTime": now, "dataChange": True, "stats": json.dumps(stats)}})
        paths.append(path)
    with open(os.path.join(table, "_delta_log", f"{0:020d}.json"), "x") as f:
        f.write("\n".join(json.dumps(a) for a in actions) + "\n")
    return paths
