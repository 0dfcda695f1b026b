"""Where each shard of a dataset is read from, what identifies its bytes, and how they are checked.

A shard is **read in place** (memory-mapped where it lies) when its raw file is on a local
disk: never copied, its hash checked the first time this process maps it. Everything else
(object-store URLs, compressed shards, FUSE mounts of remote storage such as ``/Volumes`` and
``/dbfs`` unless ``read_in_place=True``) is **filled into the shard cache**: fetched, checked,
decompressed, checked again, under a key that names its bytes:

* ``<algo>-<raw hash>-<raw bytes>`` when index.json records a hash of the raw file, or
  ``z-<algo>-<zip hash>-<zip bytes>-<raw bytes>`` when it records one of the compressed file
  only: content-addressed, so a dataset rewritten with other bytes never meets an old copy,
  and identical shards of two datasets are cached once. The hash is checked as the entry is
  filled, so nothing unverified sits under a content key.
* otherwise (no hashes, or ``validate_hash=None``) ``s-<blake2s(url, size, version)>``, where
  the version is the file's modification time and inode (local) or ETag/generation (object
  stores, one listing per directory): a repaired or rewritten source gets a new key.

``validate_hash``: ``"auto"`` (default) checks the fastest algorithm each file records; an
algorithm name checks that one (every shard must record it); None checks sizes only.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import threading
from typing import Any, BinaryIO

import numpy as np

from petastream.errors import CorruptShardError, FormatError
from petastream.mds import hashing
from petastream.mds.compression import parse_compression
from petastream.mds.shard_table import ShardTable
from petastream.storage.location import Location, is_remote_mount

__all__ = ["ShardSources", "HASH_PREFERENCE"]

#: Fastest first: the algorithm ``validate_hash="auto"`` checks among those a file records.
HASH_PREFERENCE = ("xxh3_64", "xxh3_128", "xxh128", "xxh64", "xxh32", "blake2b", "blake2s",
                   "md5", "sha1", "sha256", "sha512", "sha384", "sha224")

# In-place files this process has hash-checked: (path, size, mtime_ns, inode, algo, digest).
_VERIFIED: set[tuple[Any, ...]] = set()
_VERIFIED_LOCK = threading.Lock()


class ShardSources:
    """The shards of one dataset: placement, cache keys, fetching and checking."""

    def __init__(self, location: Location, shards: ShardTable | list[dict[str, Any]], *,
                 validate_hash: str | None = "auto", read_in_place: bool | None = None):
        self.location = location
        # Per-shard facts come from the table's columns; a shard's dict is built only where its
        # hashes or names are needed (the shards this process reads).
        self.shards = shards if isinstance(shards, ShardTable) else ShardTable.from_shards(shards)
        self._compressed = self.shards.compressed()
        self.validate_hash = validate_hash
        self.read_in_place = read_in_place
        if validate_hash not in (None, "auto"):
            self._check_recorded(validate_hash)
        self._tags: dict[str, dict[str, str]] = {}
        self._keys: dict[int, str] = {}
        self._lock = threading.Lock()

    def _check_recorded(self, algo: str) -> None:
        """Fail at open, not mid-epoch, when shards do not record ``algo``."""
        hashing.hexdigest(algo, b"")  # unknown names raise here
        for i, template in enumerate(self.shards.templates):  # per distinct template, not shard
            if algo not in template["hashes"]:
                first = int(np.flatnonzero(self.shards.template_ids == i)[0])
                raise FormatError(
                    f"validate_hash={algo!r}, but shard {first} of {self.location.url} records only "
                    f"{template['hashes']}; pick one of those, 'auto', or None (sizes only)"
                )

    # -- placement ---------------------------------------------------------------------------
    def compressed(self, i: int) -> bool:
        return bool(self._compressed[i])

    def any_compressed(self) -> bool:
        return bool(self._compressed.any())

    def raw_name(self, i: int) -> str:
        return str(self.shards.raw_names[i].as_py())

    def stored_name(self, i: int) -> str:
        """Basename (relative to the dataset) of the file a fill reads."""
        names = self.shards.zip_names if self.compressed(i) else self.shards.raw_names
        return str(names[i].as_py())

    def url(self, i: int) -> str:
        return self.location.child_url(self.stored_name(i))

    def raw_bytes(self, i: int) -> int:
        return int(self.shards.raw_bytes[i])

    def in_place(self, i: int) -> str | None:
        """The local path to map shard ``i`` from directly, or None when it goes through the cache.

        A compressed shard whose raw file also lies beside it (a Mosaic local directory) is read
        from that raw file."""
        if self.read_in_place is False:
            return None
        path = self.location.local_file(self.raw_name(i))
        if path is None or (self.read_in_place is None and is_remote_mount(path)):
            return None
        if self.compressed(i) and not os.path.exists(path):
            return None
        return path

    # -- hashes ------------------------------------------------------------------------------
    def algorithm(self, hashes: dict[str, str]) -> str | None:
        """The algorithm to check among ``hashes`` (a file's recorded digests), or None."""
        if self.validate_hash is None or not hashes:
            return None
        if self.validate_hash != "auto":
            return self.validate_hash if self.validate_hash in hashes else None
        return next((a for a in HASH_PREFERENCE if a in hashes), min(hashes))

    def check(self, where: str, entry: dict[str, Any], data: Any, algo: str | None = None) -> None:
        """Raise :class:`CorruptShardError` unless ``data`` has ``entry``'s hash (if any is checked)."""
        algo = algo or self.algorithm(entry["hashes"])
        if algo is None:
            return
        expected = entry["hashes"][algo]
        actual = hashing.hexdigest(algo, data)
        if actual != expected:
            raise CorruptShardError(f"shard {where}: {algo} is {actual}, index.json says {expected}")

    def _token(self, i: int, path: str) -> tuple[Any, ...] | None:
        """What names an in-place file's checked version; None when there is nothing to check."""
        entry = self.shards[i]["raw_data"]
        algo = self.algorithm(entry["hashes"])
        if algo is None:
            return None
        st = os.stat(path)
        return (path, st.st_size, st.st_mtime_ns, st.st_ino, algo, entry["hashes"][algo])

    def needs_check(self, i: int, path: str) -> bool:
        """Whether mapping in-place shard ``i`` still has a hash to check in this process."""
        try:
            token = self._token(i, path)
        except FileNotFoundError:
            return True  # let the load report it
        with _VERIFIED_LOCK:
            return token is not None and token not in _VERIFIED

    def verify_in_place(self, i: int, path: str, buf: Any) -> None:
        """Check an in-place raw file's hash, once per process per version of the file."""
        token = self._token(i, path)
        if token is None:
            return
        with _VERIFIED_LOCK:
            if token in _VERIFIED:
                return
        self.check(path, self.shards[i]["raw_data"], buf, token[4])
        with _VERIFIED_LOCK:
            _VERIFIED.add(token)

    # -- cache keys --------------------------------------------------------------------------
    def key(self, i: int) -> str:
        """The cache key of shard ``i``'s raw bytes (see the module docstring)."""
        key = self._keys.get(i)
        if key is None:
            key = self._keys[i] = self._key(i)
        return key

    def known_key(self, i: int) -> str | None:
        """The key if already computed (no listing request); for eviction's needed-soon set."""
        return self._keys.get(i)

    def _key(self, i: int) -> str:
        meta = self.shards[i]
        raw = meta["raw_data"]
        algo = self.algorithm(raw["hashes"])
        if algo is not None:
            return f"{algo}-{raw['hashes'][algo]}-{raw['bytes']}"
        if self.compressed(i):
            zipped = meta["zip_data"]
            algo = self.algorithm(zipped["hashes"])
            if algo is not None:
                return f"z-{algo}-{zipped['hashes'][algo]}-{zipped['bytes']}-{raw['bytes']}"
        return self._stat_key(i)

    def all_keys(self, i: int) -> set[str]:
        """Every key shard ``i`` may be cached under, whatever ``validate_hash`` its readers
        used (to remove a dataset's cached copies)."""
        meta = self.shards[i]
        raw = meta["raw_data"]
        keys = {f"{a}-{h}-{raw['bytes']}" for a, h in raw["hashes"].items()}
        if self.compressed(i):
            z = meta["zip_data"]
            keys |= {f"z-{a}-{h}-{z['bytes']}-{raw['bytes']}" for a, h in z["hashes"].items()}
        try:
            keys.add(self._stat_key(i))
        except CorruptShardError:  # the source file is gone already
            pass
        return keys

    def _stat_key(self, i: int) -> str:
        ident = f"{self.url(i)}\0{self._tag(self.stored_name(i))}".encode()
        return "s-" + hashlib.blake2s(ident, digest_size=16).hexdigest()

    def _tag(self, name: str) -> str:
        directory, base = posixpath.split(name)
        with self._lock:
            tags = self._tags.get(directory)
            if tags is None:
                try:
                    tags = self._tags[directory] = self.location.file_tags(directory)
                except FileNotFoundError:
                    tags = self._tags[directory] = {}
        tag = tags.get(base)
        if tag is None:
            raise CorruptShardError(f"shard file {self.location.child_url(name)} listed in index.json is missing")
        return tag

    # -- filling -----------------------------------------------------------------------------
    def fill(self, i: int, out: BinaryIO) -> None:
        """Write shard ``i``'s raw bytes to ``out``: fetched (one read of the stored file),
        size- and hash-checked, decompressed (zstd: streamed, no second copy in memory) and
        checked again; raises :class:`CorruptShardError` naming the file otherwise."""
        meta = self.shards[i]
        name = self.stored_name(i)
        url = self.location.child_url(name)
        compressed = self.compressed(i)
        entry = meta["zip_data"] if compressed else meta["raw_data"]
        try:
            data = self.location.read_bytes(name)
        except FileNotFoundError:
            raise CorruptShardError(f"shard file {url} listed in index.json is missing") from None
        if len(data) != entry["bytes"]:
            raise CorruptShardError(
                f"shard {url}: {len(data)} bytes, index.json says {entry['bytes']}; the file is "
                "truncated or was replaced"
            )
        zip_algo = self.algorithm(entry["hashes"])
        self.check(url, entry, data, zip_algo)
        if not compressed:
            out.write(data)
            return
        # Raw bytes follow from verified compressed bytes (as Mosaic): hash them only otherwise.
        raw = meta["raw_data"]
        raw_algo = None if zip_algo else self.algorithm(raw["hashes"])
        sink = _Sink(out, raw_algo)
        codec = parse_compression(meta["compression"])
        assert codec is not None  # compressed() implies a compression name
        try:
            if codec.family == "zstd":
                import zstandard

                # zstandard needs only .write(); its stub asks for a whole IO[bytes]
                with zstandard.ZstdDecompressor().stream_writer(sink, write_size=1 << 20,  # type: ignore[arg-type]
                                                                 closefd=False) as w:
                    w.write(data)
            else:
                sink.write(codec.decompress(data))
        except CorruptShardError:
            raise
        except Exception as e:  # each codec library raises its own error type
            raise CorruptShardError(f"shard {url}: cannot decompress ({codec.family}): {e}") from e
        if sink.size != raw["bytes"]:
            raise CorruptShardError(
                f"shard {url}: decompresses to {sink.size} bytes, index.json says {raw['bytes']}"
            )
        if raw_algo is not None and sink.hexdigest() != raw["hashes"][raw_algo]:
            raise CorruptShardError(
                f"shard {url} (decompressed): {raw_algo} is {sink.hexdigest()}, index.json says "
                f"{raw['hashes'][raw_algo]}"
            )


class _Sink:
    """A write-only file that counts (and optionally hashes) what passes through it."""

    def __init__(self, out: BinaryIO, algo: str | None):
        self.out, self.size = out, 0
        self._hasher = hashing.hasher(algo) if algo else None

    def write(self, data: Any) -> int:
        self.size += len(data)
        if self._hasher is not None:
            self._hasher.update(data)
        return self.out.write(data)

    def hexdigest(self) -> str:
        assert self._hasher is not None
        return self._hasher.hexdigest()
