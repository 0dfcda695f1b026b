"""Shared-memory slots: how worker processes hand decoded parts over without a copy here.

An :class:`Arena` is ``slots`` equal slots in one file in ``/dev/shm`` (tmpfs), mapped by the
loader's process and by one worker process. The worker copies an item's numeric parts into a
free slot (:meth:`Arena.pack`, each part 64-byte aligned) and sends only their layout; this
process wraps the slot as numpy views (:meth:`Arena.views`), which TensorFlow and torch take
without copying (TensorFlow aliases any 64-byte-aligned numpy array and keeps it referenced
while its tensor lives). The slot is leased until the last view of it is gone: ``views``
returns the one base array every view hangs from (numpy collapses view chains onto it), and a
``weakref.finalize`` on that base gives the slot back to the worker.

Why a file of our own and not :class:`multiprocessing.shared_memory.SharedMemory`: before
Python 3.13 every process that *attaches* a ``SharedMemory`` registers it with its resource
tracker, which unlinks it (warning of a "leak") when that process exits, pulling the segment
from under the others (cpython#82300). Here the file is unlinked as soon as both processes
have mapped it, so nothing can leak: the memory goes with the last mapping, also when a
process is killed. Its size is reserved up front (``posix_fallocate``): a full ``/dev/shm`` (64
MB in a default Docker container) then fails here, with a clear error, instead of killing the
worker with ``SIGBUS`` on a page it cannot get; the worker then hands its items over pickled.
"""

from __future__ import annotations

import mmap
import os
import tempfile
from dataclasses import dataclass
from typing import Any

import numpy as np

from petastream.errors import ArenaError

__all__ = ["Arena", "ArenaError", "Layout", "Strings", "pack_strings"]

ALIGN = 64  # TensorFlow wraps numpy memory without a copy only at EIGEN_MAX_ALIGN_BYTES (64)
_PAGE = mmap.PAGESIZE

Layout = list  # per part: ("shm", offset, dtype.str, shape), ("strs", ...) or ("obj", array) (inline)


@dataclass(frozen=True)
class Strings:
    """A column of str/bytes packed: its bytes back to back, and each value's start and length
    (int64, shaped like the column). Strings cross into shared memory as three arrays, not one
    Python object per value; TensorFlow cuts them apart in the graph (``tf.strings.substr``)."""

    data: np.ndarray  # uint8
    starts: np.ndarray
    lengths: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        return self.starts.shape

    def reshape(self, *shape: Any) -> Strings:
        return Strings(self.data, self.starts.reshape(*shape), self.lengths.reshape(*shape))

    def arrays(self) -> tuple[np.ndarray, ...]:
        return self.data, self.starts, self.lengths


def pack_strings(a: np.ndarray) -> Strings | None:
    """``a`` (an array of str or of bytes: object, or numpy ``U``/``S``) packed, or None where
    it holds anything else (nulls, mixed str and bytes, other objects)."""
    import pyarrow as pa

    flat = a.reshape(-1)
    if not len(flat):
        empty = np.zeros(a.shape, np.int64)
        return Strings(np.zeros(0, np.uint8), empty, empty)
    first = flat[0]
    kind = pa.string() if isinstance(first, str) else pa.binary() if isinstance(first, bytes) else None
    if kind is None:
        return None
    try:
        arr = pa.array(flat, type=kind, from_pandas=False)
    except (pa.ArrowException, TypeError, ValueError):
        return None
    if arr.null_count:
        return None
    _, offsets, data = arr.buffers()
    offsets = np.frombuffer(offsets, np.int32, len(arr) + 1).astype(np.int64)
    data = np.frombuffer(data, np.uint8, int(offsets[-1])) if data is not None else np.zeros(0, np.uint8)
    return Strings(data, offsets[:-1].reshape(a.shape), np.diff(offsets).reshape(a.shape))


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def _directories() -> list[str]:
    # Memory only: where /dev/shm exists but is full, a disk-backed file could grow to the
    # arenas' size on disk; the caller falls back to pickling instead. Systems without it
    # (macOS) map a file in the temporary directory.
    shm = "/dev/shm"
    return [shm] if os.path.isdir(shm) and os.access(shm, os.W_OK) else [tempfile.gettempdir()]


def _reserve(fd: int, size: int) -> None:
    """Give the file its size with the pages reserved where the system can (Linux), so that a
    full file system fails here; elsewhere (macOS has no posix_fallocate) just its size."""
    fallocate = getattr(os, "posix_fallocate", None)
    if fallocate is not None:
        fallocate(fd, 0, size)
    else:
        os.ftruncate(fd, size)


class Arena:
    """``slots`` slots of ``slot_bytes`` bytes in a shared mapping (see the module doc)."""

    def __init__(self, path: str, slots: int, slot_bytes: int, mm: mmap.mmap):
        self.path, self.slots, self.slot_bytes, self._mm = path, slots, slot_bytes, mm

    @classmethod
    def create(cls, slots: int, slot_bytes: int) -> Arena:
        """A new arena with room for items of ``slot_bytes`` (rounded up to pages); its file is
        still linked, for the worker to :meth:`attach` (it unlinks it then)."""
        slot_bytes = _round_up(max(slot_bytes, 1), _PAGE)
        size = slots * slot_bytes
        errors = []
        for d in _directories():
            fd, path = tempfile.mkstemp(prefix="petastream-arena-", dir=d)
            try:
                _reserve(fd, size)
                return cls(path, slots, slot_bytes, mmap.mmap(fd, size))
            except OSError as e:
                errors.append(f"{d}: {e.strerror or e}")
                os.unlink(path)
            finally:
                os.close(fd)
        raise ArenaError(f"no room for {size} bytes of shared memory ({slots} slots of {slot_bytes}) "
                         f"in {'; '.join(errors)}")

    @classmethod
    def attach(cls, path: str, slots: int, slot_bytes: int) -> Arena:
        """Map an arena :meth:`create` made, and unlink its file: both processes hold it now."""
        fd = os.open(path, os.O_RDWR)
        try:
            mm = mmap.mmap(fd, slots * slot_bytes)
        finally:
            os.close(fd)
        unlink(path)
        return cls(path, slots, slot_bytes, mm)

    # -- the worker's side --------------------------------------------------------------------
    @staticmethod
    def size_of(parts: tuple[Any, ...]) -> int:
        """Bytes :meth:`pack` needs for ``parts`` (object arrays travel inline: none)."""
        arrays = [a for p in parts for a in (p.arrays() if isinstance(p, Strings) else (p,))]
        return sum(_round_up(a.nbytes, ALIGN) for a in arrays if not a.dtype.hasobject)

    def pack(self, slot: int, parts: tuple[Any, ...]) -> Layout:
        """Copy the numeric arrays and :class:`Strings` of ``parts`` into ``slot``; the layout
        :meth:`views` rebuilds them from. The caller checked :meth:`size_of` against
        ``slot_bytes``."""
        layout: Layout = []
        base, off = slot * self.slot_bytes, 0

        def put(a: np.ndarray) -> tuple[Any, ...]:
            nonlocal off
            np.ndarray(a.shape, a.dtype, buffer=self._mm, offset=base + off)[...] = a
            entry = ("shm", off, a.dtype.str, a.shape)
            off += _round_up(a.nbytes, ALIGN)
            return entry

        for p in parts:
            if isinstance(p, Strings):
                layout.append(("strs", *(put(a) for a in p.arrays())))
            elif p.dtype.hasobject:  # Python objects cannot live in shared memory
                layout.append(("obj", p))
            else:
                layout.append(put(p))
        return layout

    # -- the consumer's side ------------------------------------------------------------------
    def views(self, slot: int, layout: Layout) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
        """``(base, arrays)``: the parts as views of ``slot``, each hanging from ``base``; the
        slot is in use until ``base`` is collected (put a ``weakref.finalize`` on it)."""
        base = np.frombuffer(self._mm, np.uint8, self.slot_bytes, slot * self.slot_bytes)

        def view(entry: tuple[Any, ...]) -> np.ndarray:
            _, off, dtype, shape = entry
            dt = np.dtype(dtype)
            n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
            return base[off:off + n].view(dt).reshape(shape)

        out: list[Any] = []
        for part in layout:
            if part[0] == "obj":
                out.append(part[1])
            elif part[0] == "strs":
                out.append(Strings(*(view(e) for e in part[1:])))
            else:
                out.append(view(part))
        return base, tuple(out)


def unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def copy_parts(parts: tuple[Any, ...]) -> tuple[Any, ...]:
    """Private copies of views (a slot that must go back to its worker at once)."""
    def copy(p: Any) -> Any:
        if isinstance(p, Strings):
            return Strings(*(a.copy() for a in p.arrays()))
        return p.copy() if isinstance(p, np.ndarray) and not p.dtype.hasobject else p

    return tuple(copy(p) for p in parts)
