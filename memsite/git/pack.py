"""Pack files: writing a pack and its version-2 index, and reading the objects a pack stores whole.

memsite writes every object of a pack whole (no deltas), so its packs can be
read, checked and merged by copying entries; git's own packs are read the
same way for the objects they store whole, and a delta is left to git.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import struct
import zlib

from ..foundation.errors import RepositoryError
from . import files
from .objects import KINDS, is_large_tree
from .settings import Flush

PACK_TMP_PREFIX = ".memsite-tmp-"  # a pack or index being written: .memsite-tmp-<pid>-<n>.pack
_tmp_counter = itertools.count()


def temporary_name(folder: str, suffix: str) -> str:
    """A name in ``folder`` to write a pack file under before it is renamed into place.

    Not git's 'tmp_': 'git prune' stats every such file in the folder, and one
    renamed under it makes it report 'Could not stat', after which git runs no
    automatic gc for a day.
    """
    return f"{folder}/{PACK_TMP_PREFIX}{os.getpid()}-{next(_tmp_counter)}{suffix}"


def pack_entry(code: int, data: bytes, level: int) -> tuple[int, bytes]:
    """(CRC-32, bytes) of one pack entry storing ``data`` (of type ``code``) whole, compressed at ``level``
    (large folders uncompressed, see :func:`memsite.git.objects.is_large_tree`)."""
    size = len(data)
    header = bytearray([(code << 4) | (size & 0x0F)])
    size >>= 4
    while size:
        header[-1] |= 0x80
        header.append(size & 0x7F)
        size >>= 7
    entry = bytes(header) + zlib.compress(data, 0 if is_large_tree(KINDS[code], data) else level)
    return zlib.crc32(entry), entry


def encode_pack(entries: list[tuple[bytes, int, bytes]]) -> tuple[str, bytes, bytes]:
    """(name, pack bytes, index bytes) of a pack of ``entries`` (id, CRC-32, the entry's bytes)."""
    parts = [b"PACK", struct.pack(">II", 2, len(entries))]
    offset = 12
    index = []
    for binsha, crc, entry in entries:
        index.append((binsha, crc, offset))
        parts.append(entry)
        offset += len(entry)
    if offset >= 1 << 31:
        raise RepositoryError("a single write of over 2 GB; split it into smaller transactions")
    pack = b"".join(parts)
    pack_sha = hashlib.sha1(pack).digest()
    pack += pack_sha
    index.sort()
    counts = [0] * 256
    for binsha, _, _ in index:
        counts[binsha[0]] += 1
    idx = b"".join([
        b"\xfftOc\x00\x00\x00\x02", struct.pack(">256I", *itertools.accumulate(counts)),
        *(binsha for binsha, _, _ in index),
        struct.pack(f">{len(index)}I", *(crc for _, crc, _ in index)),
        struct.pack(f">{len(index)}I", *(off for _, _, off in index)),
        pack_sha,
    ])
    idx += hashlib.sha1(idx).digest()
    return f"pack-{pack_sha.hex()}", pack, idx


def store_pack(folder: str, name: str, pack: bytes, idx: bytes, flushes: tuple[Flush | None, Flush | None]) -> None:
    """Put a pack and its index in place in ``folder``, flushed as ``flushes`` (pack, index) say.

    The .pack goes in place before the .idx: git finds packs by their index.
    """
    for suffix, data, flush in ((".pack", pack, flushes[0]), (".idx", idx, flushes[1])):
        files.store(f"{folder}/{name}{suffix}", temporary_name(folder, suffix), data, mode=0o444, flush=flush)


def write_pack(folder: str, entries: list[tuple[bytes, int, bytes]], flushes: tuple[Flush | None, Flush | None]) -> str:
    """Write a pack of ``entries`` (id, CRC-32, the entry's bytes) and its index to ``folder``; the pack's name."""
    name, pack, idx = encode_pack(entries)
    store_pack(folder, name, pack, idx, flushes)
    return name


def store_keep(folder: str, name: str, text: bytes) -> None:
    """Give the pack ``name`` a ``.keep`` file saying ``text`` (git's repacks leave such a pack alone)."""
    files.store(f"{folder}/{name}.keep", temporary_name(folder, ".keep"), text, mode=0o644)


class PackReader:
    """A pack and its version-2 index; reads the objects it stores whole.

    The index is read once; the pack is opened for each read and closed
    again, so no file stays open that git (or, on Windows, a delete) may
    want to remove.
    """

    __slots__ = ("name", "mtime", "_path", "_idx", "_fanout", "_count")

    def __init__(self, folder: str, name: str) -> None:
        self.name = name
        self._path = f"{folder}/{name}.pack"
        with open(f"{folder}/{name}.idx", "rb") as idx:
            self.mtime = os.fstat(idx.fileno()).st_mtime_ns
            self._idx = idx.read()
        if self._idx[:8] != b"\xfftOc\x00\x00\x00\x02" or len(self._idx) < 1072:
            raise ValueError(f"{name}: not a version 2 pack index")
        self._fanout = struct.unpack_from(">256I", self._idx, 8)
        self._count = self._fanout[255]
        if len(self._idx) < 1072 + 28 * self._count:
            raise ValueError(f"{name}: a pack index cut short")

    def names(self) -> list[bytes]:
        """The ids of every object in the pack, in the index's order."""
        return [self._idx[at : at + 20] for at in range(1032, 1032 + 20 * self._count, 20)]

    def names_in_pack_order(self) -> list[bytes]:
        """The ids of every object in the pack, in the order the pack stores them (as they were written)."""
        return [binsha for _, binsha in sorted(zip(self.offsets(), self.names()))]

    def crcs(self) -> tuple[int, ...]:
        """Each object's CRC-32, in the index's order."""
        return struct.unpack_from(f">{self._count}I", self._idx, 1032 + 20 * self._count)

    def offsets(self) -> tuple[int, ...]:
        """Each object's offset as the index stores it (the high bit set: in the table of large offsets)."""
        return struct.unpack_from(f">{self._count}I", self._idx, 1032 + 24 * self._count)

    def pack_checksum(self) -> bytes:
        """The checksum of the pack this index was written for."""
        return self._idx[-40:-20]

    def find(self, binsha: bytes) -> int | None:
        """The offset of ``binsha`` in the pack, or None."""
        first = binsha[0]
        lo, hi = (self._fanout[first - 1] if first else 0), self._fanout[first]
        idx = self._idx
        while lo < hi:
            mid = (lo + hi) // 2
            at = 1032 + 20 * mid
            name = idx[at : at + 20]
            if name < binsha:
                lo = mid + 1
            elif name > binsha:
                hi = mid
            else:
                (offset,) = struct.unpack_from(">I", idx, 1032 + 24 * self._count + 4 * mid)
                if offset & 0x80000000:  # in the table of large offsets
                    (offset,) = struct.unpack_from(">Q", idx, 1032 + 28 * self._count + 8 * (offset & 0x7FFFFFFF))
                return offset
        return None

    def read(self, offset: int) -> tuple[str, bytes] | None:
        """(kind, data) of the object at ``offset``; None for a delta (left to git).

        Raises:
            FileNotFoundError: the pack is gone (merged or repacked meanwhile).
        """
        fd = os.open(self._path, os.O_RDONLY | files.BINARY)
        try:
            os.lseek(fd, offset, os.SEEK_SET)
            data = os.read(fd, 4096)
            try:
                byte = data[0]
                code, size, shift, pos = (byte >> 4) & 7, byte & 0x0F, 4, 1
                while byte & 0x80:
                    byte = data[pos]
                    size |= (byte & 0x7F) << shift
                    shift += 7
                    pos += 1
            except IndexError:
                return None  # damaged: git says what is wrong
            kind = KINDS.get(code)
            if kind is None:
                return None
            wanted = pos + size + (size >> 9) + 64  # deflate grows data by at most 5 bytes in 16 KB, plus its header
            if wanted > len(data):
                data += os.read(fd, wanted - len(data))
        finally:
            os.close(fd)
        inflate = zlib.decompressobj()
        try:
            out = inflate.decompress(memoryview(data)[pos:])
        except zlib.error:
            return None  # damaged: git says what is wrong
        if not inflate.eof or len(out) != size:
            return None
        return kind.decode(), out



def whole_entries(folder: str, name: str) -> list[tuple[bytes, int, bytes]]:
    """(id, CRC-32, entry bytes) of every object in a pack that stores them all whole, in the pack's order.

    Raises:
        ValueError: the pack holds a delta, is damaged, or is not a version-2 pack.
    """
    index = PackReader(folder, name)
    with open(f"{folder}/{name}.pack", "rb") as handle:
        pack = handle.read()
    if pack[:4] != b"PACK":
        raise ValueError(f"{name}: not a version 2 pack")
    if hashlib.sha1(memoryview(pack)[:-20]).digest() != pack[-20:] or index.pack_checksum() != pack[-20:]:
        raise ValueError(f"{name}: damaged (its checksum does not match)")
    shas, crcs, offsets = index.names(), index.crcs(), index.offsets()
    ends = dict(zip(sorted(offsets), [*sorted(offsets)[1:], len(pack) - 20]))
    entries = []
    for binsha, crc, offset in sorted(zip(shas, crcs, offsets), key=lambda entry: entry[2]):
        if offset & 0x80000000 or not 1 <= (pack[offset] >> 4) & 7 <= 4:
            raise ValueError(f"{name}: holds deltas or large offsets")
        entries.append((binsha, crc, pack[offset : ends[offset]]))
    return entries

