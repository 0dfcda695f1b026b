"""Removing a dataset's cached shards, and the ``petastream cache`` command.

``petastream cache show`` prints what the node's shard cache holds; ``petastream cache prune``
removes temporary files left by killed processes and evicts least recently opened shards down
to a size (``--to 20gb``; ``--all`` empties it); ``petastream cache forget URL`` removes one
dataset's shards. Shards being read (mapped by a running process) are never removed.
"""

from __future__ import annotations

import argparse
import os
import sys

from petastream.errors import PetastreamError
from petastream.storage.cache import ShardCache, default_cache_root
from petastream.storage.sizes import CACHE_LIMIT_ENV, cache_limit_setting, human, parse_size

__all__ = ["forget_dataset", "add_cache_arguments", "run_cache"]


def forget_dataset(url: str, *, storage_options: dict | None = None,
                   cache_dir: str | None = None) -> tuple[int, int]:
    """Remove the cached copies of dataset ``url``'s shards from the shard cache (call it
    before deleting the dataset: its index.json names them). Returns ``(removed, of which a
    process still maps)``: those keep their disk space until unmapped. The index's entries in
    the node's index cache go too. A dataset that no longer exists has nothing to remove."""
    from petastream.mds.dataset import MDSDataset

    try:
        ds = MDSDataset(url, storage_options=storage_options, cache_dir=cache_dir,
                        prefetch_depth=0, allow_unsafe_types=True)
    except (FileNotFoundError, PetastreamError):
        return 0, 0
    keys: set[str] = set()
    for i in range(ds.num_shards):
        keys |= ds.sources.all_keys(i)
    # Its index's parsed copy (and a remote index.json's) too: not counted, they are no shards.
    ShardCache.at(os.path.join(ds.cache_dir, "indexes")).remove(ds.index_keys)
    return ds.cache.remove(keys)


def add_cache_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dir", default=None,
                   help=f"cache directory (default: $PETASTREAM_CACHE_DIR or {default_cache_root()})")
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    sub.add_parser("show", help="entries, bytes, temporary files, shards being read")
    prune = sub.add_parser("prune", help="remove leftovers of killed runs and evict down to a size")
    group = prune.add_mutually_exclusive_group()
    group.add_argument("--to", default=None,
                       help=f"evict least recently opened shards down to this size (e.g. 20gb; "
                            f"default: ${CACHE_LIMIT_ENV} if set, else only leftovers)")
    group.add_argument("--all", action="store_true", help="evict every shard not being read")
    forget = sub.add_parser("forget", help="remove one dataset's cached shards")
    forget.add_argument("url", help="dataset directory: path or fsspec URL")


def run_cache(args: argparse.Namespace) -> int:
    cache = ShardCache.at(args.dir)
    try:
        if args.action == "show":
            return _show(cache)
        if args.action == "prune":
            to = 0 if args.all else (parse_size(args.to, what="--to") if args.to
                                     else cache_limit_setting(None))
            removed, freed = cache.prune(to)
            print(f"removed {removed} files, {human(freed)} freed; {_line(cache)}")
            return 0
        removed, mapped = forget_dataset(args.url, cache_dir=cache.root)
        print(f"removed {removed} cached shards of {args.url}"
              + (f"; {mapped} still mapped by a running process free their space when it lets go"
                 if mapped else ""))
        return 0
    except (PetastreamError, OSError) as e:
        print(f"petastream cache: {e}", file=sys.stderr)
        return 2


def _show(cache: ShardCache) -> int:
    usage = cache.usage(count_pinned=True)
    limit = os.environ.get(CACHE_LIMIT_ENV)
    print(f"cache        {cache.root}")
    print(f"shards       {usage.entries} ({human(usage.bytes)})")
    print(f"being read   {usage.pinned} ({human(usage.pinned_bytes)})")
    print(f"temporary    {usage.temporary} ({human(usage.temporary_bytes)}): fills in progress "
          "or left by killed processes")
    print(f"limit        {limit + f' (${CACHE_LIMIT_ENV})' if limit else 'none set: keeps 5% of the disk free'}")
    return 0


def _line(cache: ShardCache) -> str:
    usage = cache.usage()
    return f"{usage.entries} shards ({human(usage.bytes)}) remain"
