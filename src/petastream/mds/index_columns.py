"""``index.json`` parsed straight into a :class:`ShardTable`'s columns, without a dict per shard.

``json.loads`` of a million-shard index builds ~30 Python objects a shard (3 GB, and most of
the time of opening such a dataset). pyarrow's JSON reader (RapidJSON, in C++) parses the
same bytes into Arrow columns: the index is one JSON row whose ``shards`` is a list of
structs. Sample counts, sizes, basenames and hashes stay columns; a shard's *template* (every
other field) is found per shard as a code, by dictionary-encoding one key string a shard built
by Arrow kernels, and a template's dict is built once, from its first shard.

A large index in the layout Mosaic's writer and ``merge_index`` give it is cut into pieces of
~32 MB of whole shards, read on up to 8 threads (the reader releases the GIL) and merged: on a
many-core node the parse divides, and only the pieces being read hold their lists and strings
as Arrow data, so memory stays near the final table's size.

The result must equal ``ShardTable.from_shards(parse_index(data))`` exactly, and Arrow cannot
tell every JSON text apart that Python can, so this path answers only for indexes where it
provably can, and returns None for anything else (the caller then parses the JSON: slower,
same answer, same errors):

* the shape of Mosaic's index: ``{"shards": [...], "version": 2}``, each shard with exactly
  Mosaic's 11 keys and each file entry with ``basename``/``bytes``/``hashes``, of the JSON types
  Mosaic writes (a float, a boolean or an extra key anywhere: None);
* every check ``parse_index`` makes passes (it raises the errors);
* no backslash in the text: every string is then its bytes as written, so
* a JSON ``null`` and an absent key, which Arrow both reads as null, are told apart by count:
  the text's ``null`` substrings must equal the nulls the text must spell out (nullable
  fields, list items) plus the ``null`` substrings inside strings. A missing key, or a hash
  written as ``null`` (read as "not recorded"), breaks the count.
"""

from __future__ import annotations

import json
import logging
import mmap
import os
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from petastream.errors import FormatError
from petastream.mds.shard_table import ShardTable

__all__ = ["table_from_json"]

log = logging.getLogger(__name__)

# Shard fields that are the same for shards of one write: a template each.
_TEMPLATE_LISTS = ("column_encodings", "column_names", "column_sizes", "hashes")
_TEMPLATE_SCALARS = ("compression", "format", "size_limit", "version")
_FILE = pa.struct([("basename", pa.string()), ("bytes", pa.int64()), ("hashes", pa.struct([]))])
# Mosaic's shard, typed: the reader then converts to these types or fails (a float, a boolean
# where an integer is due), and does not infer them (pyarrow 26 drops the leading nulls of the
# first list it infers a type for: ``[null, 8]`` read as ``[8]``). The hash algorithms of
# ``hashes`` and any key not named here are inferred: an unknown key is then a field too.
_SHARD = pa.struct([
    ("column_encodings", pa.list_(pa.string())), ("column_names", pa.list_(pa.string())),
    ("column_sizes", pa.list_(pa.int64())), ("compression", pa.string()), ("format", pa.string()),
    ("hashes", pa.list_(pa.string())), ("raw_data", _FILE), ("samples", pa.int64()),
    ("size_limit", pa.int64()), ("version", pa.int64()), ("zip_data", _FILE)])
_SCHEMA = pa.schema([("shards", pa.list_(_SHARD)), ("version", pa.int64())])
_MAX_BLOCK = (1 << 31) - 1  # the reader's block (the whole index, one JSON row) is int32-sized
# Indexes larger than this are cut into pieces of about this many bytes, read on up to
# _MAX_THREADS threads (a copy of each piece being read: threads x pieces in memory).
_PIECE = 32 << 20
_MAX_THREADS = 8
# The text around the shards of the indexes Mosaic's (and our) writer and merge_index write;
# another layout is read whole, on one thread.
_FORMS = ((b'{"shards": [', b'], "version": 2}'), (b'{"version": 2, "shards": [', b']}'))
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
# Separators of a template's key: control characters never occur raw in JSON text.
_ITEM, _FIELD, _NULL = "\x1f", "\x1e", "\x1d"


class _NotPlain(FormatError):
    """The index is not of the shape this path proves exact: parse the JSON instead (which
    raises the user's error where the index is invalid). Never leaves this module."""


def table_from_json(data: bytes | mmap.mmap) -> ShardTable | None:
    """The shards of index.json ``data`` as a ShardTable equal to
    ``ShardTable.from_shards(parse_index(data))``, or None where that is not proven (see the
    module docstring): then parse the JSON."""
    try:
        return _table(data)
    except _NotPlain as e:
        log.info("index.json: %s; parsing it as JSON", e)
    except pa.ArrowException as e:  # e.g. offsets past 2 GiB in a key column
        log.warning("index.json: not read as columns (%s); parsing it as JSON", e)
    return None


def _table(data: bytes | mmap.mmap) -> ShardTable:
    if not 0 < len(data) < _MAX_BLOCK:
        raise _NotPlain(f"{len(data)} bytes, more than one Arrow JSON block holds")
    escapes, nulls = _count(data, (b"\\", b"null"))
    if escapes:
        raise _NotPlain("escaped characters")
    pieces = _pieces(data)
    workers = min(len(pieces), _MAX_THREADS, len(os.sched_getaffinity(0)))
    with ThreadPoolExecutor(workers) as pool:  # the reader releases the GIL: one core each
        parts = list(pool.map(lambda piece: _read_piece(data, *piece), pieces))
    read = sum(n for _, n in parts)
    if nulls != read:
        raise _NotPlain(f"{nulls} nulls in the text where {read} are read: a key is missing "
                        "or a value is null where Arrow cannot tell")
    return _merge([table for table, _ in parts])


def _pieces(data: bytes | mmap.mmap) -> list[tuple[bytes, int, int, bytes]]:
    """``(head, start, end, tail)``: ``head + data[start:end] + tail`` is an index of some of
    the shards, of about ``_PIECE`` bytes, in order; or the whole text as one piece. Cut where
    one shard ends and the next begins (``}, {``). Such a text inside a string (a column named
    so) is a wrong cut, and harmless: each piece must read as exactly ``{"shards": [...],
    "version": 2}`` (one object, no other key, no key twice), which a piece cut inside a shard
    never does, so the whole index is then left to ``json``; pieces that read are sequences of
    whole shards, and in order they are the index's."""
    n = len(data)
    whole = [(b"", 0, n, b"")]
    form = next(((h, t) for h, t in _FORMS if data[:len(h)] == h and data[n - len(t):] == t), None)
    if n <= _PIECE or form is None:
        return whole
    head, tail = form
    pieces, begin, end = [], len(head), n - len(tail)
    while begin + _PIECE < end and (m := _BOUNDARY.search(data, begin + _PIECE, end)):
        pieces.append((head, begin, m.start() + 1, tail))
        begin = m.end() - 1
    pieces.append((head, begin, end, tail))
    return pieces


def _read_piece(data: bytes | mmap.mmap, head: bytes, start: int, end: int, tail: bytes) -> tuple[ShardTable, int]:
    """A piece's shards, read by Arrow and checked for Mosaic's shape and parse_index's rules,
    and the nulls its text must hold: those Arrow read as written (nullable fields, list
    items) and those inside strings. Its Arrow columns but the table's are dropped here."""
    text = pa.py_buffer(head + data[start:end] + tail if head else data)
    try:
        row = pj.read_json(pa.BufferReader(text), read_options=pj.ReadOptions(use_threads=False, block_size=text.size + 1),
                           parse_options=pj.ParseOptions(explicit_schema=_SCHEMA, newlines_in_values=True,
                                                         unexpected_field_behavior="infer"))
        row.validate(full=True)  # offsets within bounds, UTF-8 (as json.loads checks it)
    except (pa.ArrowException, ValueError) as e:
        raise _NotPlain(f"not read by Arrow's JSON reader ({e})") from None
    if row.num_rows != 1 or row.schema.names != _SCHEMA.names or row.column("shards").null_count:
        raise _NotPlain("not one object of 'shards' and 'version'")
    _check_types(row.schema.field("shards").type.value_type)
    if row.column("version").chunk(0)[0].as_py() != 2:
        raise _NotPlain("version is not 2")
    shards: pa.StructArray = row.column("shards").chunk(0).flatten()
    if shards.null_count:
        raise _NotPlain("a shard is null")
    fields = {f.name: shards.field(f.name) for f in shards.type}
    raw = _file_entry(fields.pop("raw_data"), nullable=False)
    zipped = _file_entry(fields.pop("zip_data"), nullable=True)
    literal = _check_fields(fields, zipped) + len(zipped["valid"]) - int(pc.sum(zipped["valid"]).as_py() or 0)
    inside = sum(int(pc.sum(pc.count_substring(s, "null")).as_py() or 0) for s in _strings(fields, raw, zipped))
    return _assemble(fields, raw, zipped), literal + inside


def _merge(tables: list[ShardTable]) -> ShardTable:
    """One table of the pieces' tables, in order: templates the same in several pieces (equal
    JSON) are one, numbered by first appearance as from_shards numbers them."""
    if len(tables) == 1:
        return tables[0]
    templates: list[dict[str, Any]] = []
    codes: dict[str, int] = {}
    ids = []
    for t in tables:
        remap = np.empty(len(t.templates), np.int32)
        for j, template in enumerate(t.templates):
            key = json.dumps(template, sort_keys=True)  # str, int, None, lists, dicts: exact
            if key not in codes:
                codes[key] = len(templates)
                templates.append(template)
            remap[j] = codes[key]
        ids.append(remap[t.template_ids])

    def strings(per_table: list[pa.Array]) -> pa.Array:
        return pa.concat_arrays(per_table)

    def hashes(per_table: list[dict[str, pa.Array]]) -> dict[str, pa.Array]:
        algos = sorted({a for h in per_table for a in h})
        return {a: strings([h.get(a, pa.nulls(len(t), pa.string())) for h, t in zip(per_table, tables)])
                for a in algos}

    return ShardTable(np.concatenate([t.samples for t in tables]), np.concatenate([t.raw_bytes for t in tables]),
                      np.concatenate([t.zip_bytes for t in tables]), strings([t.raw_names for t in tables]),
                      strings([t.zip_names for t in tables]), templates, np.concatenate(ids),
                      hashes([t.raw_hashes for t in tables]), hashes([t.zip_hashes for t in tables]))


def _check_types(shard: pa.DataType) -> None:
    """Raise _NotPlain unless ``shard`` is ``_SHARD`` with hash algorithms (inferred)."""
    names = [f.name for f in shard]
    if names != [f.name for f in _SHARD]:
        raise _NotPlain(f"shard keys {sorted(set(names) - {f.name for f in _SHARD})} are not Mosaic's")
    for got, want in zip(shard, _SHARD):
        if want.type == _FILE:
            if [f.name for f in got.type] != [f.name for f in _FILE] or got.type[0] != _FILE[0] or got.type[1] != _FILE[1]:
                raise _NotPlain(f"{want.name} has keys {[f.name for f in got.type]}")
        elif got.type != want.type:
            raise _NotPlain(f"{want.name} is {got.type}")


def _file_entry(entry: pa.Array, *, nullable: bool) -> dict[str, Any]:
    """A ``raw_data``/``zip_data`` struct's columns (nulls where the entry itself is null)."""
    if entry.null_count and not nullable:
        raise _NotPlain("raw_data is null")
    cols = dict(zip((f.name for f in entry.type), entry.flatten()))
    hashes = cols["hashes"]
    if hashes.null_count != entry.null_count or any(c.null_count != entry.null_count for c in cols.values()):
        raise _NotPlain("a file's basename, bytes or hashes is missing")
    algos = dict(zip((f.name for f in hashes.type), hashes.flatten()))
    if any("null" in a or not pa.types.is_string(v.type) for a, v in algos.items()):
        raise _NotPlain("a file hash is not a string")
    return {"names": cols["basename"], "bytes": cols["bytes"], "hashes": algos, "valid": entry.is_valid()}


def _check_fields(fields: dict[str, pa.Array], zipped: dict[str, Any]) -> int:
    """Raise _NotPlain unless every shard passes parse_index's checks; returns how many nulls
    the text spells out in the template fields."""
    nulls = 0
    for name in _TEMPLATE_LISTS:
        if fields[name].null_count:
            raise _NotPlain(f"{name} is not a list")
        nulls += fields[name].flatten().null_count
    for name in ("samples", "format", "version"):
        if fields[name].null_count:
            raise _NotPlain(f"{name} is missing")
    nulls += fields["compression"].null_count + fields["size_limit"].null_count
    if not pc.all(pc.equal(fields["format"], _scalar("mds")), min_count=0).as_py():
        raise _NotPlain("a shard's format is not 'mds'")
    if len(fields["samples"]) and pc.min(fields["samples"]).as_py() < 0:
        raise _NotPlain("a negative sample count")
    compressed = pc.fill_null(pc.not_equal(fields["compression"], _scalar("")), _scalar(False))
    if pc.any(pc.and_(compressed, pc.invert(zipped["valid"]))).as_py():
        raise _NotPlain("a compressed shard without zip_data")
    return nulls


def _strings(fields: dict[str, pa.Array], raw: dict[str, Any], zipped: dict[str, Any]) -> list[pa.Array]:
    out = [fields[n].flatten() for n in ("column_encodings", "column_names", "hashes")]
    out += [fields["format"], fields["compression"]]
    for entry in (raw, zipped):
        out += [entry["names"], *entry["hashes"].values()]
    return out


def _count(data: bytes | mmap.mmap, patterns: tuple[bytes, ...], begin: int = 0, end: int | None = None) -> list[int]:
    """Occurrences of each pattern (none can overlap itself) in ``data[begin:end]``, a MiB at a
    time (``bytes.count``'s speed; Arrow's ``count_substring`` is 4x slower, an mmap has no count)."""
    end = len(data) if end is None else end
    step, over = 1 << 20, max(map(len, patterns)) - 1
    counts = [0] * len(patterns)
    for start in range(begin, end, step):
        piece = data[start:min(start + step + over, end)]
        for i, pattern in enumerate(patterns):
            # A match starting in this MiB ends at most ``over`` bytes past it: counted here
            # only (one starting in the overlap is the next piece's; it ends past this one).
            counts[i] += piece.count(pattern, 0, step + len(pattern) - 1)
    return counts


def _key_part(col: pa.Array) -> pa.Array:
    """One string a shard naming ``col``'s value: lists by length and items (null items and
    null values by a marker), so that different values never give the same string."""
    if pa.types.is_list(col.type):
        items = pc.fill_null(pc.cast(col.flatten(), pa.string()), _scalar(_NULL))
        offsets = pc.subtract(col.offsets, col.offsets[0])  # flatten() starts at the first
        joined = pc.binary_join(pa.ListArray.from_arrays(offsets, items), _scalar(_ITEM))
        return pc.binary_join_element_wise(pc.cast(pc.list_value_length(col), pa.string()), joined, _scalar(_ITEM))
    return pc.fill_null(pc.cast(col, pa.string()), _scalar(_NULL))


def _assemble(fields: dict[str, pa.Array], raw: dict[str, Any], zipped: dict[str, Any]) -> ShardTable:
    n = len(fields["samples"])
    parts = [_key_part(fields[name]) for name in _TEMPLATE_LISTS + _TEMPLATE_SCALARS]
    for entry in (raw, zipped):
        parts.append(_key_part(entry["valid"]))
        parts += [_key_part(v.is_valid()) for v in entry["hashes"].values()]
    keys = pc.binary_join_element_wise(*parts, _scalar(_FIELD))
    encoded = pc.dictionary_encode(keys)  # codes in order of first appearance, as from_shards
    template_ids = np.frombuffer(encoded.indices.buffers()[1], np.int32, n, encoded.indices.offset * 4).copy()
    _, first = np.unique(template_ids, return_index=True)
    templates = [_template(fields, raw, zipped, int(i)) for i in first]
    return ShardTable(_ints(fields["samples"]), _ints(raw["bytes"]), _ints(pc.fill_null(zipped["bytes"], _scalar(-1))),
                      raw["names"], zipped["names"], templates, template_ids,
                      dict(sorted(raw["hashes"].items())), dict(sorted(zipped["hashes"].items())))


def _template(fields: dict[str, pa.Array], raw: dict[str, Any], zipped: dict[str, Any], i: int) -> dict[str, Any]:
    """Shard ``i``'s template, as from_shards makes it: the per-file values out, the hash
    algorithms a file records (Arrow's nulls: not recorded) kept by name."""
    t = {k: fields[k][i].as_py() for k in _TEMPLATE_LISTS + _TEMPLATE_SCALARS}
    for key, entry in (("raw_data", raw), ("zip_data", zipped)):
        t[key] = {"hashes": sorted(a for a, v in entry["hashes"].items() if v[i].is_valid)} \
            if entry["valid"][i].as_py() else None
    return t


def _ints(col: pa.Array) -> np.ndarray:
    """A zero-copy int64 numpy view of a column without nulls (``to_numpy`` may import
    pandas: 0.8 s)."""
    if col.type != pa.int64() or col.null_count:
        raise _NotPlain(f"an integer column of {col.type} with {col.null_count} nulls")
    return np.frombuffer(col.buffers()[1], np.int64, len(col), col.offset * 8)


def _scalar(value: str | bool | int) -> pa.Scalar:
    """An Arrow scalar made from its bytes: converting a Python value (``pa.scalar``, or a
    plain value passed to a kernel) imports pandas, 0.5 s and more on a first open."""
    if isinstance(value, str):
        data = value.encode()
        return pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(np.array([0, len(data)], np.int32)),
                                                      pa.py_buffer(data)])[0]
    if isinstance(value, bool):
        return pa.Array.from_buffers(pa.bool_(), 1, [None, pa.py_buffer(bytes([value]))])[0]
    return pa.Array.from_buffers(pa.int64(), 1, [None, pa.py_buffer(np.array([value], np.int64))])[0]
