"""A Parquet source's layout, decided once at open: files, row groups kept, shards, columns.

Everything a reader needs after open is in :class:`Plan`, a small picklable value: worker
processes and unpickled copies take it as is (after a listing checks that no file changed)
instead of reading every footer again and re-applying the filters.

Shards are the row groups that hold rows after filtering (empty ones are dropped), each cut
into slices of at most ``rows_per_shard`` rows (near-equal sizes) when given. A row group is
the unit a read loads and decodes (:class:`Unit`); the slices of one row group share its load.

A file whose row count is known without its footer (:attr:`ParquetFileRef.num_rows`: a Delta
log's ``numRecords``) may be planned without reading its footer, as one unit, the whole file
(:data:`WHOLE_FILE`): when no filter needs its row groups' statistics or rows, it is small
(:data:`FOOTERLESS_FILE_BYTES`: reading it whole is reading its row groups), its null counts
are known (the open-time null check), and it is fetched whole. Its footer is read when it is
first loaded, and its schema checked then (:func:`check_file`). Opening a table of many small
files is then one footer read, not one per file.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from petastream.checks import optional_positive_int
from petastream.errors import FormatError, InvalidArgumentError
from petastream.parquet.convert import NullValuesError
from petastream.parquet.discover import Discovery, ParquetFileRef, listing
from petastream.parquet.filters import partition_expression, select
from petastream.parquet.footer import Footer, RangeFile, fetcher, read_footer
from petastream.parquet.types import ColumnSpec, column_specs, nullable_spec, spec_for
from petastream.storage.location import Location

__all__ = ["Columns", "FileInfo", "Unit", "Plan", "make_plan", "restrict", "check_unchanged", "check_file",
           "FETCH_MODES", "WHOLE_FILE", "FOOTERLESS_FILE_BYTES"]

FETCH_MODES = ("auto", "file", "row_group")
_PARALLEL = 16  # files planned at once when some are remote
_OBJECT_BYTES = 64  # memory a Python object (str, bytes, Decimal, list) adds per value
#: ``fetch="auto"`` caches row groups, not whole files, when a file's row groups average at
#: least this many bytes read (AWS's guidance for ranged GETs is 8-16 MB: fewer requests
#: per byte would not fill a fast link at S3's latency; see ``_auto_fetch``).
SPLIT_ROW_GROUP_BYTES = 8 << 20
#: :attr:`Unit.row_group` of a file planned without its footer: the unit is the whole file.
WHOLE_FILE = -1
#: Files up to this size may be planned without their footers (see the module doc): a larger
#: file may hold several row groups, each worth a unit of its own (shuffle, memory).
FOOTERLESS_FILE_BYTES = 32 << 20


@dataclass(frozen=True)
class FileInfo:
    ref: ParquetFileRef
    #: Bytes of its footer (``<metadata> <length> PAR1``) and their hash (checked on fill);
    #: 0 and "" for a file planned without its footer (:data:`WHOLE_FILE`).
    footer_bytes: int
    footer_digest: str
    #: Row groups its footer lists (empty ones too: what a reader counting row groups by
    #: position needs, such as Petastorm's); -1 for a file planned without its footer.
    row_groups: int = -1


@dataclass(frozen=True)
class Unit:
    """One row group that holds rows after filtering: what a read loads and decodes at once."""

    file: int
    row_group: int
    #: Rows kept, and rows the row group holds.
    rows: int
    total_rows: int
    #: ``numpy.packbits`` of the rows kept (None: all of them).
    mask: bytes | None
    #: File byte ranges ``(start, stop)`` of the column chunks read (adjacent ones merged).
    ranges: tuple[tuple[int, int], ...]
    #: Uncompressed bytes of the columns read, for the rows kept (from the footer's sizes).
    stored: int
    #: Memory the loaded row group takes (stored bytes, plus Python objects where a column has them).
    decoded: int
    #: Its first row's index in its file (the rows before it in earlier row groups).
    first_row: int = 0

    def selection(self) -> np.ndarray | None:
        if self.mask is None:
            return None
        bits = np.frombuffer(self.mask, dtype=np.uint8)
        return np.unpackbits(bits, count=self.total_rows).astype(bool)

    @property
    def range_bytes(self) -> int:
        return sum(b - a for a, b in self.ranges)


@dataclass
class Plan:
    root_urls: list[str]
    files: list[FileInfo]
    partition_fields: list[tuple[str, Any]]
    specs: list[ColumnSpec]
    units: list[Unit]
    #: Per shard: its unit, and its first row among the unit's kept rows.
    shard_unit: np.ndarray = field(repr=False)
    shard_start: np.ndarray = field(repr=False)
    shard_sizes: np.ndarray = field(repr=False)
    #: ``"file"``: remote files are cached whole; ``"row_group"``: each unit's ranges are.
    fetch: str = "file"
    fingerprint: str = ""
    #: ``{name in the files: name served}`` (see :attr:`Discovery.column_names`).
    column_names: dict[str, str] = field(default_factory=dict)
    #: The ``array_lengths`` planned with (what a footerless file's schema is checked with).
    array_lengths: dict[str, int | None] = field(default_factory=dict)

    @property
    def read_columns(self) -> list[str]:
        """The columns read from the files (partition columns are not in them), as served."""
        return [s.name for s in self.specs if not s.partition]

    @property
    def file_columns(self) -> list[str]:
        """:attr:`read_columns` as the files name them."""
        stored = {v: k for k, v in self.column_names.items()}
        return [stored.get(n, n) for n in self.read_columns]

    def __eq__(self, other: object) -> bool:  # what a reopener compares: the same content and layout
        return isinstance(other, Plan) and other.fingerprint == self.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)


def _leaves(metadata: Any, names: Sequence[str]) -> dict[str, list[int]]:
    """Leaf column indices of each top-level column (``a``, or ``a.list.element``...)."""
    out: dict[str, list[int]] = {n: [] for n in names}
    schema = metadata.schema
    for j in range(len(schema)):
        path = schema.column(j).path
        for name in names:  # names may hold dots themselves: match whole components
            if path == name or path.startswith(name + "."):
                out[name].append(j)
                break
    return out


def _chunk_range(col: Any) -> tuple[int, int]:
    """The bytes of one column chunk, as pyarrow reads them (dictionary page first, if any)."""
    start = int(col.data_page_offset)
    dictionary = col.dictionary_page_offset if col.has_dictionary_page else None
    if dictionary is not None and 0 < dictionary < start:
        start = int(dictionary)
    return start, start + int(col.total_compressed_size)


def _merge(ranges: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out: list[list[int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return tuple((a, b) for a, b in out)


def _served_leaves(metadata: Any, names: Sequence[str], renames: dict[str, str]) -> dict[str, list[int]]:
    """:func:`_leaves` of the served columns ``names`` (stored under ``renames``' keys)."""
    stored = {v: k for k, v in renames.items()}
    found = _leaves(metadata, [stored.get(n, n) for n in names])
    return {renames.get(k, k): v for k, v in found.items()}


def _check_schema(info_url: str, metadata: Any, first: dict[str, ColumnSpec], first_url: str,
                  columns_given: bool, lengths: dict[str, int | None],
                  renames: dict[str, str] | None = None) -> dict[str, Any]:
    """The file's Arrow types by (served) column, checked against the first file's read columns."""
    schema = metadata.schema.to_arrow_schema()
    renames = renames or {}
    types = {renames.get(f.name, f.name): f.type for f in schema}
    for name, spec in first.items():
        t = types.get(name)
        if t is None:
            raise FormatError(f"{info_url} has no column {name!r}, {first_url} has; read files of one "
                              f"schema, or leave the column out with columns=[...] (it has {list(types)})")
        other = spec_for(name, t, lengths.get(name))
        if (other.encoding, other.kind) != (spec.encoding, spec.kind):
            raise FormatError(
                f"column {name!r} is {t} in {info_url} and {spec.arrow_type} in {first_url}; files of "
                "one source must agree on every column read: rewrite them with one type, read them "
                "separately, or leave the column out with columns=[...]")
    if not columns_given:
        extra = sorted(set(types) - set(first))
        if extra:
            raise FormatError(f"{info_url} has columns {extra} that {first_url} lacks; pass columns=[...] "
                              "to read the columns they share")
    return types


def _scan(ref: ParquetFileRef, loc: Location, expr: Any, fields: list[tuple[str, Any]],
          footer: Footer | None = None) -> tuple[Footer, list[tuple[int, np.ndarray | None]]]:
    """One file's footer (read now unless given) and its kept row groups (filters applied);
    see filters.select."""
    import pyarrow as pa

    footer = footer or read_footer(ref, loc)
    md = footer.metadata
    if expr is None:
        kept: list[tuple[int, np.ndarray | None]] = [(rg, None) for rg in range(md.num_row_groups)
                                                     if md.row_group(rg).num_rows]
    else:
        tail = footer.tail or footer.data
        source = ref.path if loc.is_local else pa.PythonFile(
            RangeFile(ref.size, {ref.size - len(tail): tail}, fetcher(loc, ref.path), ref.url), mode="r")
        file_schema = pa.schema(list(md.schema.to_arrow_schema()) + [pa.field(n, t) for n, t in fields])
        kept = select(source, md, file_schema, expr, partition_expression(fields, ref.partition), ref.url)
    footer.tail = None
    return footer, kept


#: The columns to read: names, or what picks them from the first file's fields and the
#: partition fields (``(name, Arrow type)`` each), or None for all.
Columns = Sequence[str] | Callable[[list[tuple[str, Any]], list[tuple[str, Any]]], Sequence[str]] | None


def make_plan(discovery: Discovery, *, columns: Columns, expr: Any, rows_per_shard: int | None,
              array_lengths: dict[str, int | None] | None, null_policy: str, fetch: str) -> Plan:
    """Read every footer, apply the filters, and lay out the shards (see the module doc)."""
    if fetch not in FETCH_MODES:
        raise InvalidArgumentError(f"fetch={fetch!r}: use one of {FETCH_MODES}")
    rows_per_shard = optional_positive_int("rows_per_shard", rows_per_shard, "None: one shard per row group")
    files, roots = discovery.files, discovery.roots
    fields = discovery.partition_fields
    first_ref = files[0]
    first_footer = read_footer(first_ref, roots[first_ref.root])
    first_schema = first_footer.metadata.schema.to_arrow_schema()
    lengths = dict(array_lengths or {})
    renames = dict(discovery.column_names)
    file_fields = [(renames.get(f.name, f.name), f.type) for f in first_schema]
    if callable(columns):  # a reader's own rule over the schema (Petastorm's inferred columns)
        columns = list(columns(file_fields, list(fields)))
    specs = column_specs(file_fields, fields, columns, lengths, first_ref.url)
    physical = {s.name: s for s in specs if not s.partition}

    footerless = [ref is not first_ref and _footerless(ref, expr, fetch, specs, renames, null_policy)
                  for ref in files]

    def scan(ref: ParquetFileRef) -> tuple[Footer, list[tuple[int, np.ndarray | None]]]:
        return _scan(ref, roots[ref.root], expr, fields, first_footer if ref is first_ref else None)

    to_scan = [f for f, lazy in zip(files, footerless) if not lazy]
    if len(to_scan) > 1 and not all(roots[f.root].is_local for f in to_scan):
        with ThreadPoolExecutor(min(_PARALLEL, len(to_scan)), thread_name_prefix="petastream-parquet") as pool:
            footers = list(pool.map(scan, to_scan))
    else:
        footers = [scan(f) for f in to_scan]
    read = [ref for ref, lazy in zip(files, footerless) if not lazy]
    for ref, (footer, _) in zip(read, footers):
        _check_schema(ref.url, footer.metadata, physical, first_ref.url, columns is not None, lengths, renames)
    leaves_of = [_served_leaves(footer.metadata, list(physical), renames) for footer, _ in footers]
    if null_policy in ("petastorm", "rows"):
        specs = _holding_nulls(specs, footers, leaves_of)
    infos: list[FileInfo] = []
    units: list[Unit] = []
    per_row: tuple[float, float] | None = None
    at = 0
    for i, (ref, lazy) in enumerate(zip(files, footerless)):
        if lazy:
            per_row = per_row or _bytes_per_row(units, ref)
            infos.append(FileInfo(ref, 0, ""))
            if ref.num_rows:
                rows = int(ref.num_rows)
                units.append(Unit(i, WHOLE_FILE, rows, rows, None, ((0, ref.size),), int(per_row[0] * rows),
                                  int(per_row[1] * rows)))
            continue
        (footer, kept), leaves = footers[at], leaves_of[at]
        at += 1
        md = footer.metadata
        infos.append(FileInfo(ref, len(footer.data), footer.digest, md.num_row_groups))
        row_starts = np.concatenate([[0], np.cumsum([md.row_group(j).num_rows for j in range(md.num_row_groups)])])
        for rg, keep in kept:
            units.append(_unit(i, rg, keep, md, leaves, specs, null_policy, ref.url, int(row_starts[rg])))
    sizes, unit_of, starts = _shards([u.rows for u in units], rows_per_shard)
    mode = fetch if fetch != "auto" else ("file" if any(footerless) else _auto_fetch(units, infos))
    plan = Plan([loc.url for loc in roots], infos, list(fields), specs, units, unit_of, starts, sizes, mode,
                column_names=renames, array_lengths=lengths)
    plan.fingerprint = _fingerprint(plan)
    return plan


def _footerless(ref: ParquetFileRef, expr: Any, fetch: str, specs: list[ColumnSpec], renames: dict[str, str],
                null_policy: str) -> bool:
    """Whether ``ref`` is planned without its footer (see the module doc): its rows known, no
    filter, fetched whole, small, and (``null_policy="error"``) no nulls in the columns the
    footer's statistics would be checked for, by the counts known."""
    if ref.num_rows is None or expr is not None or fetch == "row_group" or ref.size > FOOTERLESS_FILE_BYTES:
        return False
    if null_policy == "fill":
        return True
    # "error" checks these columns' statistics at open; "petastorm" reads an integer or boolean
    # column that holds nulls as float64/objects, decided from them: a file whose counts are
    # not all zero is planned from its footer
    counts = dict(ref.null_counts)
    stored = {v: k for k, v in renames.items()}
    return all(counts.get(stored.get(s.name, s.name)) == 0 for s in specs
               if not s.partition and s.kind not in ("fixed", "list", "json"))


def _bytes_per_row(units: list[Unit], ref: ParquetFileRef) -> tuple[float, float]:
    """Stored and decoded bytes per row of the units planned from footers (the first file's at
    least): a footerless file's estimates (memory budgets); its file size per row if none."""
    rows = sum(u.rows for u in units)
    if rows:
        return sum(u.stored for u in units) / rows, sum(u.decoded for u in units) / rows
    per = ref.size / max(1, ref.num_rows or 1)
    return per, per


def check_file(plan: Plan, file: int, metadata: Any) -> None:
    """Fail (``FormatError``) unless footerless file ``file``'s footer, read now, has the
    plan's columns with their types and ``numRecords`` rows: what its planning would have
    checked at open."""
    ref = plan.files[file].ref
    physical = {s.name: s for s in plan.specs if not s.partition}
    _check_schema(ref.url, metadata, physical, plan.files[0].ref.url, True, plan.array_lengths, plan.column_names)
    if metadata.num_rows != ref.num_rows:
        raise FormatError(f"{ref.url} holds {metadata.num_rows} rows, its table's log says {ref.num_rows}; "
                          "the file was replaced: open the table again")


def restrict(plan: Plan, keep: Sequence[bool | np.ndarray], rows_per_shard: int | None = None) -> Plan:
    """``plan`` with fewer rows: per unit, ``keep`` is True (as it is), False (dropped), or a
    boolean mask over the rows it keeps now (the rows kept after). Units left empty are
    dropped; shards are one per unit (or slices of ``rows_per_shard``). What a reader that selects row groups or rows by its own
    rules at open (Petastorm's row-group selectors, predicates, shards) builds its source from."""
    if len(keep) != len(plan.units):
        raise InvalidArgumentError(f"restrict: {len(keep)} selections for {len(plan.units)} units")
    units = []
    for unit, k in zip(plan.units, keep):
        if k is True:
            units.append(unit)
            continue
        if k is False:
            continue
        k = np.asarray(k, dtype=bool)
        if len(k) != unit.rows:
            raise InvalidArgumentError(f"restrict: a mask of {len(k)} rows for a unit of {unit.rows}")
        rows = int(k.sum())
        if rows == 0:
            continue
        current = unit.selection()
        full = k if current is None else _scatter(current, k)
        mask = None if rows == unit.total_rows else np.packbits(full).tobytes()
        frac = rows / unit.rows
        units.append(Unit(unit.file, unit.row_group, rows, unit.total_rows, mask, unit.ranges,
                          int(unit.stored * frac), int(unit.decoded * frac), unit.first_row))
    sizes, unit_of, starts = _shards([u.rows for u in units], rows_per_shard)
    out = Plan(list(plan.root_urls), list(plan.files), list(plan.partition_fields), list(plan.specs), units,
               unit_of, starts, sizes, plan.fetch, column_names=dict(plan.column_names),
               array_lengths=dict(plan.array_lengths))
    out.fingerprint = _fingerprint(out)
    return out


def _scatter(current: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """The selection over all rows: ``current`` narrowed to the rows ``kept`` keeps of it."""
    full = np.zeros(len(current), dtype=bool)
    full[np.flatnonzero(current)[kept]] = True
    return full


def _unit(i: int, rg: int, keep: np.ndarray | None, md: Any, leaves: dict[str, list[int]],
          specs: list[ColumnSpec], null_policy: str, url: str, first_row: int = 0) -> Unit:
    group = md.row_group(rg)
    total = group.num_rows
    rows = total if keep is None else int(keep.sum())
    frac = rows / total if total else 0.0
    ranges, stored, objects = [], 0, 0
    for spec in specs:
        if spec.partition:
            stored += 8 * rows
            continue
        for j in leaves[spec.name]:
            col = group.column(j)
            ranges.append(_chunk_range(col))
            stored += int(col.total_uncompressed_size * frac)
            if keep is None and null_policy == "error" and spec.kind not in ("fixed", "list", "json"):
                _check_no_nulls(spec, col, url, rg)
        if spec.kind in ("str", "bytes", "decimal", "json", "object"):
            objects += _OBJECT_BYTES * rows
    mask = None if keep is None else np.packbits(keep).tobytes()
    return Unit(i, rg, rows, total, mask, _merge(ranges), stored, stored + objects, first_row)


def _holding_nulls(specs: list[ColumnSpec], scanned: Sequence[tuple[Footer, Sequence[tuple[int, Any]]]],
                   leaves_of: Sequence[dict[str, list[int]]]) -> list[ColumnSpec]:
    """``null_policy="petastorm"``: the integer and boolean columns whose kept row groups'
    statistics count nulls (or do not count them) read as :func:`nullable_spec` says (float64
    with NaN, objects with None), as Petastorm's batch reader gives them. Decided once for the
    whole source, where Petastorm's dtype changes from one row group to the next, so that a
    batch spanning row groups has one dtype."""
    candidates = [s.name for s in specs if not s.partition and nullable_spec(s) != s]
    found: set[str] = set()
    for (footer, kept), leaves in zip(scanned, leaves_of):
        md = footer.metadata
        for rg, _ in kept:
            group = md.row_group(rg)
            for name in candidates:
                if name in found:
                    continue
                stats = [group.column(j).statistics for j in leaves[name]]
                if any(st is None or not st.has_null_count or st.null_count for st in stats):
                    found.add(name)
    return [nullable_spec(s) if s.name in found else s for s in specs]


def _check_no_nulls(spec: ColumnSpec, col: Any, url: str, rg: int) -> None:
    """Fail at open, not mid-epoch, where the footer's statistics already count nulls."""
    stats = col.statistics
    if stats is not None and stats.has_null_count and stats.null_count:
        raise NullValuesError(
            f"column {spec.name!r} ({spec.arrow_type}) in {url}, row group {rg}, holds "
            f"{stats.null_count} null value(s), which MDS-typed reads cannot hold: filter them out "
            f"(filters=pyarrow.compute.field({spec.name!r}).is_valid()), or pass null_policy='fill' "
            "(0, NaN, '', b'', the epoch)")


def _shards(rows: list[int], per_shard: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    sizes, unit_of, starts = [], [], []
    for u, n in enumerate(rows):
        k = 1 if per_shard is None else max(1, math.ceil(n / per_shard))
        base, extra = divmod(n, k)
        start = 0
        for j in range(k):
            size = base + (j < extra)
            sizes.append(size)
            unit_of.append(u)
            starts.append(start)
            start += size
    return (np.asarray(sizes, dtype=np.int64), np.asarray(unit_of, dtype=np.int64),
            np.asarray(starts, dtype=np.int64))


def _auto_fetch(units: list[Unit], infos: list[FileInfo]) -> str:
    """Row-group ranges where the columns and row groups read (and the copy of its file's
    footer each row group's entry holds) are under half of the files' bytes (a projection or a
    filter leaves most of each file unread), or where the files are read whole but hold large
    row groups (:data:`SPLIT_ROW_GROUP_BYTES`); whole files otherwise (one request per file)."""
    needed = sum(u.range_bytes + infos[u.file].footer_bytes for u in units)
    read = {u.file for u in units}
    files = sum(infos[i].ref.size for i in read)
    if files and needed < files / 2:
        return "row_group"
    # A whole-file entry is decoded only once its last byte is in, and the read-ahead fetches
    # several files at once over one link, so they all end together: a first epoch would be
    # the download, then the decode of every row group. Row-group entries arrive one by one
    # and are decoded while the rest downloads. Worth it when files hold several row groups
    # large enough that the extra requests (a range and the footer, at once) and footer copies
    # cost little beside them.
    several = len(units) >= 2 * len(read)
    large = bool(units) and sum(u.range_bytes for u in units) / len(units) >= SPLIT_ROW_GROUP_BYTES
    return "row_group" if several and large and needed <= files * 1.05 else "file"


def _fingerprint(plan: Plan) -> str:
    h = hashlib.blake2s(digest_size=16)
    for part in (plan.root_urls, [(f.ref.url, f.ref.size, f.ref.tag, f.footer_digest) for f in plan.files],
                 [(s.name, s.encoding, s.kind, s.shape) for s in plan.specs], plan.fetch,
                 sorted(plan.column_names.items())):
        h.update(repr(part).encode())
    for u in plan.units:
        h.update(repr((u.file, u.row_group, u.rows)).encode())
        if u.mask is not None:
            h.update(u.mask)
    h.update(plan.shard_sizes.tobytes())
    return h.hexdigest()


def check_unchanged(plan: Plan, roots: list[Location]) -> None:
    """Fail unless every file of ``plan`` is still the version it was made from (one listing
    per root): a plan travelling to another process must not read other bytes."""
    listings: dict[int, Any] = {}
    for f in plan.files:
        ref = f.ref
        tags = listings.get(ref.root)
        if tags is None:
            loc = roots[ref.root]
            tags = listings[ref.root] = listing(loc, single=not loc.isdir())
        try:
            size, tag = tags(ref.path)
        except OSError:
            size, tag = -1, "missing"
        if (size, tag) != (ref.size, ref.tag):
            raise FormatError(
                f"{ref.url} changed since this Parquet source was opened (size or version differ); "
                "open it again (ParquetSource(...)) instead of unpickling a stale handle")
