"""The git object model: ids, tree entries, trees and their edits, loose-object parsing.

Pure functions over bytes: nothing here touches the disk. A tree is kept as
its serialized entries in git's order (see :class:`Tree`), so a write that
changes one file of a folder of thousands re-encodes nothing else, and a
diff of two versions of a large folder parses only the bytes around what
changed (see :func:`changed_window`).
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import re
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from ..foundation.errors import RepositoryError

MODE_FILE = 0o100644
MODE_EXEC = 0o100755
MODE_TREE = 0o040000
MODE_LINK = 0o120000
MODE_GITLINK = 0o160000

LARGE_TREE_BYTES = 16 * 1024  # folders above this are stored uncompressed (see is_large_tree)
PACK_TYPES = {b"commit": 1, b"tree": 2, b"blob": 3, b"tag": 4}
KINDS = {code: kind for kind, code in PACK_TYPES.items()}

_TREE_ENTRY = re.compile(rb"([0-7]{5,6} ([^\x00]*)\x00.{20})", re.DOTALL)  # a tree's entry: mode, name, id


@dataclass(frozen=True)
class Entry:
    mode: int
    sha: bytes  # 20-byte binary id

    @property
    def is_tree(self) -> bool:
        return self.mode == MODE_TREE


def _key(name: bytes, mode: int) -> bytes:
    # git orders a folder as if its name ended in '/'.
    return name + b"/" if mode == MODE_TREE else name


def _raw_entry(name: bytes, entry: Entry) -> bytes:
    return b"%o %s\x00%s" % (entry.mode, name, entry.sha)


def _position(keys: list[bytes], name: bytes) -> int | None:
    """Where the file or folder ``name`` is in sorted ``keys``, or None."""
    for key in (name, name + b"/"):
        i = bisect.bisect_left(keys, key)
        if i < len(keys) and keys[i] == key:
            return i
    return None


def decode_entry(raw: bytes) -> tuple[str, Entry]:
    space = raw.index(b" ")
    nul = raw.index(b"\x00", space)
    name = raw[space + 1 : nul].decode("utf-8", "surrogateescape")
    return name, Entry(int(raw[:space], 8), raw[nul + 1 : nul + 21])


class Tree:
    """An immutable git tree, kept as its serialized entries in git's order.

    Lookups bisect the sort keys; Entry objects are only made for the entries
    asked for, so a folder of thousands of memories parses quickly, which
    matters when several processes take turns writing.
    """

    __slots__ = ("_keys", "_raw")

    def __init__(self, keys: list[bytes], raw: list[bytes]) -> None:
        self._keys = keys  # sort keys, in git order
        self._raw = raw  # serialized entries, same order

    @classmethod
    def empty(cls) -> Tree:
        return cls([], [])

    @classmethod
    def parse(cls, data: bytes) -> Tree:
        # One pass (faster than the loop below) when the last entry's
        # name ends where it should: then a search started anywhere finds a NUL and matches, so it
        # never scans the same bytes twice. Used when its entries cover every byte: well formed.
        entries = _TREE_ENTRY.findall(data) if len(data) >= 21 and data[-21] == 0 else []
        if entries and sum(len(entry) for entry, _ in entries) == len(data):
            keys = [name + b"/" if entry.startswith(b"40000 ") else name for entry, name in entries]
            raw = [entry for entry, _ in entries]
        else:
            keys, raw = cls._parse_checked(data)
        if keys != sorted(keys):  # git writes them sorted; guard against hand-made trees
            pairs = sorted(zip(keys, raw))
            keys, raw = [k for k, _ in pairs], [r for _, r in pairs]
        return cls(keys, raw)

    @staticmethod
    def _parse_checked(data: bytes) -> tuple[list[bytes], list[bytes]]:
        """Entry by entry, raising at the first that is cut short."""
        keys: list[bytes] = []
        raw: list[bytes] = []
        find = data.find
        pos, end = 0, len(data)
        while pos < end:
            space = find(b" ", pos)
            nul = find(b"\x00", space)
            if space < 0 or nul < 0 or nul + 21 > end:
                raise RepositoryError("a git tree object is truncated; run 'git fsck'")
            name = data[space + 1 : nul]
            keys.append(name + b"/" if data[pos:space] == b"40000" else name)
            raw.append(data[pos : nul + 21])
            pos = nul + 21
        return keys, raw

    def reparsed(self, data: bytes) -> Tree | None:
        """``Tree.parse(data)`` for a later version of this folder, parsing only the entries that changed
        (when other writers each added a file to a folder of hundreds); None when it cannot (the caller
        then parses ``data`` whole).

        Walks both versions from their start: a run of bytes the two share
        is found in C, its whole entries are taken from this tree, and at the
        first entry that differs the next entry of ``data`` is parsed and put
        in order against this tree's next one (new, or this one removed or
        changed). Parsed one after another from an entry's start, entries end
        where they end, so both walks stay on entry boundaries.
        """
        old, keys, raw = self.serialize(), [], []
        ends = list(itertools.accumulate(map(len, self._raw)))
        count, i, at_old, at_new = len(self._raw), 0, 0, 0
        while True:
            same = common_length(old, data, min(len(old) - at_old, len(data) - at_new), at=(at_old, at_new))
            k = bisect.bisect_right(ends, at_old + same, i)  # this tree's entries [i, k) lie in the shared run
            if k > i:
                keys += self._keys[i:k]
                raw += self._raw[i:k]
                at_new += ends[k - 1] - at_old
                at_old, i = ends[k - 1], k
            if at_new == len(data):
                if i == count:
                    break
                at_old, i = ends[i], i + 1  # removed
                continue
            end = entry_end(data, at_new)
            if end == -1:
                return None
            entry = data[at_new:end]
            name = entry[entry.index(b" ") + 1 : -21]
            key = name + b"/" if entry.startswith(b"40000 ") else name
            if i < count and self._keys[i] <= key:
                at_old, i = ends[i], i + 1  # removed, or changed: the new entry comes next
                continue
            keys.append(key)
            raw.append(entry)
            at_new = end
        return Tree(keys, raw) if keys == sorted(keys) else None

    def serialize(self) -> bytes:
        return b"".join(self._raw)

    def difference(self, other: Tree) -> tuple[dict[str, Entry], dict[str, Entry]]:
        """(this tree's entries that ``other`` lacks or has otherwise, ``other``'s that this one lacks or has
        otherwise), by name; only entries whose serialized bytes differ are decoded."""
        mine, theirs = set(self._raw), set(other._raw)
        return dict(map(decode_entry, mine - theirs)), dict(map(decode_entry, theirs - mine))

    def __len__(self) -> int:
        return len(self._keys)

    def get(self, name: str) -> Entry | None:
        i = _position(self._keys, name.encode("utf-8", "surrogateescape"))
        return None if i is None else decode_entry(self._raw[i])[1]

    def items(self) -> Iterator[tuple[str, Entry]]:
        """(name, Entry) of every entry, in git's order."""
        return map(decode_entry, self._raw)

    def items_from(self, low: str, high: str) -> Iterator[tuple[str, Entry]]:
        """(name, Entry) of the entries whose names sort from ``low`` up to (not including) ``high``.

        Only those are decoded: ``items_from("0", ":")``, the names starting
        with a digit, of a folder of thousands.
        """
        start = bisect.bisect_left(self._keys, low.encode("utf-8", "surrogateescape"))
        stop = bisect.bisect_left(self._keys, high.encode("utf-8", "surrogateescape"), start)
        return map(decode_entry, self._raw[start:stop])

    def edited(self, changes: Mapping[str, Entry | None]) -> Tree:
        """A new tree with each name set to its Entry, or removed when None."""
        keys = list(self._keys)
        raw = list(self._raw)
        for name, entry in changes.items():
            encoded = name.encode("utf-8", "surrogateescape")
            i = _position(keys, encoded)
            if i is not None:
                del keys[i], raw[i]
            if entry is not None:
                key = _key(encoded, entry.mode)
                i = bisect.bisect_left(keys, key)
                keys.insert(i, key)
                raw.insert(i, _raw_entry(encoded, entry))
        return Tree(keys, raw)



_MODES = frozenset({b"100644", b"100755", b"40000", b"120000", b"160000"})


def entry_end(data: bytes, pos: int) -> int:
    """Where the tree entry starting at ``pos`` ends; -1 if none starts there."""
    space = data.find(b" ", pos, pos + 7)  # modes are at most six digits
    if space < 0 or data[pos:space] not in _MODES:
        return -1
    nul = data.find(b"\x00", space)
    return -1 if nul < 0 or nul + 21 > len(data) else nul + 21


def common_length(a: bytes, b: bytes, limit: int, *, from_end: bool = False, at: tuple[int, int] = (0, 0)) -> int:
    """How many leading (or trailing) bytes ``a`` and ``b`` share, at most ``limit``; leading ones
    from offsets ``at`` (in ``a``, in ``b``).

    Compared in C a block at a time, then by halving inside the block that differs.
    """
    i, j = at

    def same(start: int, stop: int) -> bool:  # bytes [start, stop) counted from the chosen end
        if from_end:
            return a[len(a) - stop : len(a) - start] == b[len(b) - stop : len(b) - start]
        return a[i + start : i + stop] == b[j + start : j + stop]

    low, step = 0, 4096
    while low + step <= limit and same(low, low + step):
        low += step
    high = min(low + step, limit)
    while low < high:  # the first 'low' bytes agree; the first difference is before 'high'
        mid = (low + high + 1) // 2
        if same(low, mid):
            low = mid
        else:
            high = mid - 1
    return low


def changed_window(a: bytes, b: bytes) -> tuple[dict[str, Entry], dict[str, Entry]] | None:
    """The differing entries of two serialized trees, parsing only around the bytes that differ.

    A write changes a few entries of a folder of thousands: the trees share a
    long prefix and a long suffix. The entries between are parsed from an
    entry boundary before the first differing byte until both trees are at
    the same distance from their ends inside the shared suffix. None when no
    boundary is found (the caller then parses the trees whole).
    """
    shortest = min(len(a), len(b))
    head = common_length(a, b, shortest)
    tail = common_length(a, b, shortest - head, from_end=True)
    # Step back to an entry that ends before the first difference: 21 bytes
    # after a name's NUL (then the 20-byte id) the next entry starts. A NUL
    # inside an id fakes a start only where a name holds a mode and a space;
    # parsing from there ends at that name's own NUL (names hold none), back on
    # the real boundaries, and the fake entry lies in the shared prefix, so it
    # is the same in both trees and dropped below.
    start = head
    while True:
        nul = a.rfind(b"\x00", 0, max(0, start - 20))
        if nul < 0:
            start = 0
            break
        start = nul + 21
        end = entry_end(a, start)
        if end != -1 and end <= head:
            break
        start = nul
    entries: tuple[dict[str, Entry], dict[str, Entry]] = ({}, {})
    pos = [start, start]
    while True:
        left = (len(a) - pos[0], len(b) - pos[1])
        if left[0] == left[1] and left[0] <= tail:
            break  # the rest is the same bytes from an entry boundary in both: the same entries
        side = 0 if left[0] >= left[1] else 1
        data = (a, b)[side]
        end = entry_end(data, pos[side])
        if end == -1:
            return None
        name, entry = decode_entry(data[pos[side] : end])
        entries[side][name] = entry
        pos[side] = end
    old, new = entries
    for name in old.keys() & new.keys():  # entries the window holds unchanged
        if old[name] == new[name]:
            del old[name], new[name]
    return old, new



def loose_object(raw: bytes) -> tuple[str, bytes]:
    """(kind, data) of a loose object file: zlib's ``<kind> <size>\\0<data>``.

    A stored (level 0) stream is a list of length-prefixed blocks: they are
    joined after the header, copied once rather than through zlib's window
    and again to drop the header, and the
    checksum is still verified. Anything else, damage included, goes to zlib.
    """
    view, pos, end = memoryview(raw), 2, len(raw) - 4
    blocks: list[memoryview] = []
    while raw[:2] == b"\x78\x01" and pos + 5 <= end:  # the zlib header of levels 0 and 1
        head, length = raw[pos], int.from_bytes(view[pos + 1 : pos + 3], "little")
        if head & 0b110 or length ^ int.from_bytes(view[pos + 3 : pos + 5], "little") != 0xFFFF:
            break  # a compressed block (level 1), or damage
        blocks.append(view[pos + 5 : pos + 5 + length])
        pos += 5 + length
        if head & 1:  # the final block
            nul = bytes(blocks[0][:64]).find(b"\x00")
            if pos != end or nul < 0:
                break
            header = bytes(blocks[0][: nul + 1])
            data = b"".join([blocks[0][nul + 1 :], *blocks[1:]])
            if zlib.adler32(data, zlib.adler32(header)) == int.from_bytes(view[end:], "big"):
                return header[: header.index(b" ")].decode(), data
            break
    data = zlib.decompress(raw)  # raises zlib's own error for a damaged object
    nul = data.index(b"\x00")
    return data[: data.index(b" ")].decode(), data[nul + 1 :]


def is_large_tree(kind: bytes, data: bytes) -> bool:
    """Whether a loose object is a large folder, stored uncompressed (zlib level 0) whatever the level.

    A category folder's tree is rewritten by every write to it and replaced by
    the next one; at 10,000 memories it is about 120 KB, and compressing it
    took a large share of a write's time to save a third of its size.
    git reads a stored (level 0) zlib stream like any other, and ``git gc``
    packs these objects with deltas anyway.
    """
    return kind == b"tree" and len(data) > LARGE_TREE_BYTES


def object_id(kind: bytes, data: bytes) -> bytes:
    digest = hashlib.sha1(b"%s %d\x00" % (kind, len(data)))
    digest.update(data)
    return digest.digest()


def blob_id(data: bytes) -> bytes:
    """The id git gives a file with content ``data`` (without writing it)."""
    return object_id(b"blob", data)
