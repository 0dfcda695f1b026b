"""``petastream inspect URL`` and ``petastream verify URL``."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from typing import Any

from petastream.errors import PetastreamError
from petastream.mds import hashing
from petastream.mds.compression import parse_compression
from petastream.mds.dataset import MDSDataset
from petastream.mds.layout import ColumnLayout
from petastream.mds.shard import ShardData

__all__ = ["summarize", "verify", "add_inspect_arguments", "run_inspect",
           "add_verify_arguments", "run_verify"]


def summarize(ds: MDSDataset) -> dict[str, Any]:
    """Columns, encodings, shard count, rows, raw and compressed sizes of a dataset."""
    raw = sum(s["raw_data"]["bytes"] for s in ds.shards)
    packed = sum((s["zip_data"] or s["raw_data"])["bytes"] for s in ds.shards)
    return {
        "url": ds.url,
        "columns": ds.columns,
        "fixed_size": bool(ds.layout and ds.layout.all_fixed),
        "shards": ds.num_shards,
        "empty_shards": int(sum(1 for s in ds.shards if s["samples"] == 0)),
        "samples": len(ds),
        "compression": sorted({s["compression"] for s in ds.shards if s["compression"]}),
        "hashes": sorted({h for s in ds.shards for h in s["hashes"]}),
        "raw_bytes": raw,
        "stored_bytes": packed,
    }


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


@dataclass
class VerifyReport:
    checked: int = 0
    damaged: list[tuple[str, str]] = field(default_factory=list)  # (file url, problem)
    #: Files whose contents were checked against a recorded hash (the others: sizes,
    #: structure and a full decode only).
    hashed: int = 0
    algorithms: set[str] = field(default_factory=set)

    @property
    def ok(self) -> bool:
        return not self.damaged

    def summary(self) -> str:
        if self.hashed == self.checked:
            how = f"contents checked ({', '.join(sorted(self.algorithms))})"
        elif self.hashed:
            how = (f"contents of {self.hashed} checked ({', '.join(sorted(self.algorithms))}), "
                   f"sizes only for {self.checked - self.hashed} without hashes")
        else:
            how = ("sizes only: index.json records no hashes, so damaged bytes that keep the "
                   "structure and decode can pass; write with hashes=['xxh3_64']")
        files = "shard file" if self.checked == 1 else "shard files"
        return f"{self.checked} {files} checked, {len(self.damaged)} damaged; {how}"


def verify(ds: MDSDataset) -> VerifyReport:
    """Check every shard file: present, sizes as recorded, every recorded hash, and a raw form
    whose offsets table and sample count are consistent. Nothing is cached or modified."""
    report = VerifyReport()
    for meta in ds.shards:
        key = "zip_data" if meta["compression"] and meta["zip_data"] else "raw_data"
        entry = meta[key]
        url = ds.location.child_url(entry["basename"])
        report.checked += 1
        if entry.get("hashes"):
            report.hashed += 1
            report.algorithms.update(entry["hashes"])
        try:
            data = ds.location.read_bytes(entry["basename"])
        except FileNotFoundError:
            report.damaged.append((url, "missing"))
            continue
        problem = _check_file(meta, key, data)
        if problem:
            report.damaged.append((url, problem))
    return report


def _check_file(meta: dict[str, Any], key: str, data: bytes) -> str | None:
    entry = meta[key]
    if len(data) != entry["bytes"]:
        return f"{len(data)} bytes, index.json says {entry['bytes']}"
    for algo, expected in sorted(entry.get("hashes", {}).items()):
        actual = hashing.hexdigest(algo, data)
        if actual != expected:
            return f"{algo} {actual} != {expected} recorded in index.json"
    if key == "zip_data":
        try:
            data = parse_compression(meta["compression"]).decompress(data)  # type: ignore[union-attr]
        except Exception as e:  # codec libraries raise their own types
            return f"cannot decompress: {e}"
        raw = meta["raw_data"]
        if len(data) != raw["bytes"]:
            return f"decompresses to {len(data)} bytes, index.json says {raw['bytes']}"
        for algo, expected in sorted(raw.get("hashes", {}).items()):
            if hashing.hexdigest(algo, data) != expected:
                return f"decompressed {algo} does not match index.json"
    try:
        shard = ShardData(data, ColumnLayout.from_shard(meta, allow_unsafe=True),
                          name=entry["basename"], expected_samples=meta["samples"])
        if not entry.get("hashes"):  # no hash: decoding every value is the best check left
            shard.read_columns(columns=[n for n, e in zip(meta["column_names"], meta["column_encodings"])
                                        if e != "pkl"])  # pkl runs code when decoded
    except PetastreamError as e:
        return str(e)
    return None


def add_inspect_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("url", help="dataset directory: path or fsspec URL")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def run_inspect(args: argparse.Namespace) -> int:
    try:
        ds = MDSDataset(args.url)
    except (PetastreamError, FileNotFoundError) as e:
        print(f"petastream inspect: {e}", file=sys.stderr)
        return 2
    info = summarize(ds)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"dataset      {info['url']}")
    print(f"samples      {info['samples']}")
    print(f"shards       {info['shards']}" + (f" ({info['empty_shards']} empty)" if info["empty_shards"] else ""))
    print(f"compression  {', '.join(info['compression']) or 'none'}")
    print(f"hashes       {', '.join(info['hashes']) or 'none'}")
    ratio = info["raw_bytes"] / info["stored_bytes"] if info["stored_bytes"] else 1.0
    print(f"size         {_human(info['raw_bytes'])} raw, {_human(info['stored_bytes'])} stored ({ratio:.2f}x)")
    print("columns" + ("      (all fixed-size: bulk reads are zero-copy views)" if info["fixed_size"] else ""))
    for name, enc in info["columns"].items():
        print(f"  {name:<24} {enc}")
    return 0


def add_verify_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("url", help="dataset directory: path or fsspec URL")


def run_verify(args: argparse.Namespace) -> int:
    try:
        ds = MDSDataset(args.url, allow_unsafe_types=True)
    except (PetastreamError, FileNotFoundError) as e:
        print(f"petastream verify: {e}", file=sys.stderr)
        return 2
    report = verify(ds)
    for url, problem in report.damaged:
        print(f"DAMAGED {url}: {problem}")
    print(report.summary())
    return 0 if report.ok else 1
