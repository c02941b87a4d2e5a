"""Git objects: loose-object writes, reads, and tree edits along a changed path.

Why not GitPython's index or object writer: its index is pure Python and
rewrites the whole index (~1 s a commit at 10,000 files), and its loose-object
writer and tree serializer cost more than the rest of a memsite write together.
A commit here writes one blob per changed file and one tree per folder on the
changed path (the other trees are reused by id), which keeps a write to a repo
of 10,000 memories at a few milliseconds. Reads of packed objects go through
GitPython's persistent ``git cat-file`` process.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import os
import struct
import subprocess
import threading
import zlib
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import RepositoryError
from .settings import GitSettings

MODE_FILE = 0o100644
MODE_EXEC = 0o100755
MODE_TREE = 0o040000
MODE_LINK = 0o120000
MODE_GITLINK = 0o160000

PACK_THRESHOLD = 64  # objects in one write from which a pack beats loose files
LARGE_TREE_BYTES = 16 * 1024  # folders above this are stored uncompressed (see _large_tree)
_PACK_TYPES = {b"commit": 1, b"tree": 2, b"blob": 3}

_tmp_counter = itertools.count()


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


def _decode_entry(raw: bytes) -> tuple[str, Entry]:
    space = raw.index(b" ")
    nul = raw.index(b"\x00", space)
    name = raw[space + 1 : nul].decode("utf-8", "surrogateescape")
    return name, Entry(int(raw[:space], 8), raw[nul + 1 : nul + 21])


class Tree:
    """An immutable git tree, kept as its serialized entries in git's order.

    Lookups bisect the sort keys; Entry objects are only made for the entries
    asked for. A folder of thousands of memories parses in about a
    millisecond, which matters when several processes take turns writing.
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
        if keys != sorted(keys):  # git writes them sorted; guard against hand-made trees
            pairs = sorted(zip(keys, raw))
            keys, raw = [k for k, _ in pairs], [r for _, r in pairs]
        return cls(keys, raw)

    def serialize(self) -> bytes:
        return b"".join(self._raw)

    def __len__(self) -> int:
        return len(self._keys)

    def get(self, name: str) -> Entry | None:
        i = _position(self._keys, name.encode("utf-8", "surrogateescape"))
        return None if i is None else _decode_entry(self._raw[i])[1]

    def items(self) -> Iterator[tuple[str, Entry]]:
        """(name, Entry) of every entry, in git's order."""
        return map(_decode_entry, self._raw)

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


class ObjectStore:
    """Reads and writes objects of one repository; caches parsed trees by id."""

    def __init__(self, objects_dir: Path, gitpython_repo: Any, settings: GitSettings | None = None) -> None:
        self.dir = objects_dir
        self._dir = str(objects_dir)
        self._repo = gitpython_repo
        settings = settings or GitSettings()
        self._level = settings.loose_compression
        self._flush_loose = settings.flush("loose-object")
        self._flush_pack = {".pack": settings.flush("pack"), ".idx": settings.flush("pack-metadata")}
        self._trees: OrderedDict[bytes, Tree] = OrderedDict()
        self._folders: dict[tuple[bytes | None, str], bytes | None] = {}
        self._tree_cache_size = 256
        # Large folders diffed by their bytes alone (never parsed): the newest is
        # the old side of the next diff, so it is kept rather than read again.
        self._large: OrderedDict[bytes, bytes] = OrderedDict()

    # --- raw objects -------------------------------------------------------

    def _path(self, hexsha: str) -> str:
        return f"{self._dir}/{hexsha[:2]}/{hexsha[2:]}"  # a plain string: a write makes seven of these

    def write(self, kind: bytes, data: bytes) -> bytes:
        """Store an object (blob, tree, commit) and return its binary id."""
        binsha = _object_id(kind, data)
        path = self._path(binsha.hex())
        folder = os.path.dirname(path)
        try:
            # Already there: refresh its time as git does ('freshen'), or a
            # 'git gc' running meanwhile may prune it as an old unreachable
            # object while the new commit points at it.
            os.utime(path)
            return binsha
        except OSError:
            pass  # not loose here (or not ours to touch): write it loose
        # Written to a temporary name then renamed: a kill leaves a tmp_obj_*
        # file (git's own prefix, removed by git gc), never a truncated object.
        compressed = zlib.compress(b"%s %d\x00%s" % (kind, len(data), data), 0 if _large_tree(kind, data) else self._level)
        tmp = f"{folder}/tmp_obj_{os.getpid()}_{next(_tmp_counter)}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
        except FileNotFoundError:
            os.makedirs(folder, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
        try:
            os.write(fd, compressed)
            if self._flush_loose is not None:
                self._flush_loose(fd)
        finally:
            os.close(fd)
        os.rename(tmp, path)
        return binsha

    def write_many(self, kind: bytes, items: list[bytes]) -> list[bytes]:
        """Store several objects of one kind; many at once go into one pack file.

        Thousands of loose files cost a file creation each and slow git down
        until ``git gc``; a pack is one file, as ``git fast-import`` writes.
        """
        if len(items) < PACK_THRESHOLD:
            return [self.write(kind, data) for data in items]
        shas = []
        seen: set[bytes] = set()
        objects = []
        for data in items:
            binsha = _object_id(kind, data)
            shas.append(binsha)
            if binsha not in seen:
                seen.add(binsha)
                objects.append((binsha, data))
        self._write_pack(_PACK_TYPES[kind], objects)
        return shas

    def _write_pack(self, type_code: int, objects: list[tuple[bytes, bytes]]) -> None:
        parts = [b"PACK", struct.pack(">II", 2, len(objects))]
        offset = 12
        index = []
        for binsha, data in objects:
            size = len(data)
            header = bytearray([(type_code << 4) | (size & 0x0F)])
            size >>= 4
            while size:
                header[-1] |= 0x80
                header.append(size & 0x7F)
                size >>= 7
            entry = bytes(header) + zlib.compress(data, self._level)
            index.append((binsha, zlib.crc32(entry), offset))
            parts.append(entry)
            offset += len(entry)
        if offset >= 1 << 31:
            raise RepositoryError("a single write of over 2 GB; split it into smaller transactions")
        pack = b"".join(parts)
        pack_sha = hashlib.sha1(pack).digest()
        pack += pack_sha
        index.sort()
        fanout = [0] * 256
        for binsha, _, _ in index:
            fanout[binsha[0]] += 1
        total = 0
        for i in range(256):
            total += fanout[i]
            fanout[i] = total
        idx = b"".join([
            b"\xfftOc", struct.pack(">I", 2), struct.pack(">256I", *fanout),
            *(binsha for binsha, _, _ in index),
            *(struct.pack(">I", crc) for _, crc, _ in index),
            *(struct.pack(">I", off) for _, _, off in index),
            pack_sha,
        ])
        idx += hashlib.sha1(idx).digest()
        folder = self.dir / "pack"
        folder.mkdir(parents=True, exist_ok=True)
        name = f"pack-{pack_sha.hex()}"
        # The .pack goes in place before the .idx: git finds packs by their index.
        for suffix, data in ((".pack", pack), (".idx", idx)):
            tmp = folder / f"tmp_{name}{suffix}_{os.getpid()}"
            with open(tmp, "wb") as handle:
                handle.write(data)
                flush = self._flush_pack[suffix]
                if flush is not None:
                    handle.flush()
                    flush(handle.fileno())
            os.chmod(tmp, 0o444)
            os.rename(tmp, folder / f"{name}{suffix}")

    def read(self, binsha: bytes) -> tuple[str, bytes]:
        """Return (kind, data) of an object, loose or packed."""
        try:
            with open(self._path(binsha.hex()), "rb") as handle:
                return _loose_object(handle.read())
        except FileNotFoundError:
            try:
                stream = self._repo.odb.stream(binsha)
            except Exception as exc:  # gitdb raises BadObject; a closed pipe raises OSError
                raise RepositoryError(f"git object {binsha.hex()} is missing ({exc}); run 'git fsck'") from None
            kind = stream.type.decode() if isinstance(stream.type, bytes) else stream.type
            return kind, stream.read()

    def read_blobs(self, shas: list[bytes]) -> dict[bytes, bytes]:
        """Many files at once: loose ones read directly, packed ones through one pipelined cat-file."""
        found: dict[bytes, bytes] = {}
        packed = []
        for binsha in shas:
            try:
                with open(self._path(binsha.hex()), "rb") as handle:
                    found[binsha] = _loose_object(handle.read())[1]
            except FileNotFoundError:
                packed.append(binsha)
        if packed:
            found.update(_cat_file_batch(self.dir.parent, packed))  # objects/ is in the git dir
        return found

    def read_blob(self, binsha: bytes) -> bytes:
        kind, data = self.read(binsha)
        if kind != "blob":
            raise RepositoryError(f"git object {binsha.hex()} is a {kind}, expected a file")
        return data

    # --- trees -------------------------------------------------------------

    def tree(self, binsha: bytes | None) -> Tree:
        """The parsed tree with id ``binsha`` (the empty tree for None)."""
        if binsha is None:
            return Tree.empty()
        cached = self._trees.get(binsha)
        if cached is not None:
            self._trees.move_to_end(binsha)
            return cached
        return self._parsed(binsha, self._tree_data(binsha))

    def _parsed(self, binsha: bytes, data: bytes) -> Tree:
        tree = self._trees.get(binsha)
        if tree is None:
            tree = Tree.parse(data)
        self._remember_tree(binsha, tree)
        return tree

    def _tree_data(self, binsha: bytes) -> bytes:
        """The serialized tree ``binsha``, without parsing it."""
        cached = self._trees.get(binsha)
        if cached is not None:
            return cached.serialize()
        data = self._large.get(binsha)
        if data is not None:
            return data
        kind, data = self.read(binsha)
        if kind != "tree":
            raise RepositoryError(f"git object {binsha.hex()} is a {kind}, expected a folder")
        if len(data) > LARGE_TREE_BYTES:
            self._large[binsha] = data
            if len(self._large) > 4:
                self._large.popitem(last=False)
        return data

    def _remember_tree(self, binsha: bytes, tree: Tree) -> None:
        self._trees[binsha] = tree
        if len(self._trees) > self._tree_cache_size:
            self._trees.popitem(last=False)

    def write_tree(self, tree: Tree) -> bytes:
        binsha = self.write(b"tree", tree.serialize())
        self._remember_tree(binsha, tree)
        return binsha

    def lookup(self, root: bytes | None, path: str) -> Entry | None:
        """The entry at ``path`` (``a/b/c.md``) under tree ``root``, or None."""
        folder, _, name = path.rpartition("/")
        sha = self._folder(root, folder) if folder else root
        return None if sha is None else self.tree(sha).get(name)

    def _folder(self, root: bytes | None, folder: str) -> bytes | None:
        # Trees never change, so (root, folder) -> tree id can be remembered;
        # a write looks up the same few folders for each of its files.
        key = (root, folder)
        if key in self._folders:
            return self._folders[key]
        sha = root
        for part in folder.split("/"):
            entry = self.tree(sha).get(part) if sha is not None else None
            sha = entry.sha if entry is not None and entry.is_tree else None
        if len(self._folders) > 4096:
            self._folders.clear()
        self._folders[key] = sha
        return sha

    def apply(self, root: bytes | None, changes: Mapping[str, Entry | None]) -> bytes | None:
        """Write the trees for ``root`` with ``changes`` (path -> Entry or None) applied.

        Only the folders on changed paths are rewritten; a folder left empty is
        dropped, as git does. Returns the new root id (None if all is empty).
        """
        direct: dict[str, Entry | None] = {}
        nested: dict[str, dict[str, Entry | None]] = {}
        for path, entry in changes.items():
            head, sep, rest = path.partition("/")
            if sep:
                nested.setdefault(head, {})[rest] = entry
            else:
                direct[head] = entry
        tree = self.tree(root)
        edits: dict[str, Entry | None] = dict(direct)
        for name, sub in nested.items():
            current = tree.get(name)
            sub_root = current.sha if current is not None and current.is_tree else None
            new_sub = self.apply(sub_root, sub)
            edits[name] = Entry(MODE_TREE, new_sub) if new_sub is not None else None
        new_tree = tree.edited(edits)
        if not len(new_tree):
            return None
        return self.write_tree(new_tree)

    def walk(self, root: bytes | None, prefix: str = "") -> Iterator[tuple[str, Entry]]:
        """Every file under ``root`` as (path, Entry), depth first."""
        for name, entry in self.tree(root).items():
            path = f"{prefix}{name}"
            if entry.is_tree:
                yield from self.walk(entry.sha, path + "/")
            else:
                yield path, entry

    def diff(self, old: bytes | None, new: bytes | None, prefix: str = "") -> Iterator[tuple[str, Entry | None, Entry | None]]:
        """Files that differ between two trees as (path, old entry, new entry).

        Folders with the same id are skipped without reading them, so a diff
        after one write reads only the folders on that write's path; in a
        large folder only the bytes around the change are parsed.
        """
        if old == new:
            return
        before, after = self._changed_entries(old, new)
        for name in sorted(before.keys() | after.keys()):
            a, b = before.get(name), after.get(name)
            if a == b:
                continue
            path = f"{prefix}{name}"
            a_dir = a is not None and a.is_tree
            b_dir = b is not None and b.is_tree
            if a_dir or b_dir:
                yield from self.diff(a.sha if a_dir else None, b.sha if b_dir else None, path + "/")
            if (a is not None and not a_dir) or (b is not None and not b_dir):
                yield path, (None if a_dir else a), (None if b_dir else b)

    def _changed_entries(self, old: bytes | None, new: bytes | None) -> tuple[dict[str, Entry], dict[str, Entry]]:
        """The entries of each tree that the other lacks (or has differently), by name."""
        if old is None or new is None:
            old_tree, new_tree = self.tree(old), self.tree(new)
        else:
            old_data, new_data = self._tree_data(old), self._tree_data(new)
            if min(len(old_data), len(new_data)) > LARGE_TREE_BYTES:
                window = _changed_window(old_data, new_data)
                if window is not None:
                    return window
            old_tree, new_tree = self._parsed(old, old_data), self._parsed(new, new_data)
        # Only entries whose serialized bytes differ are decoded.
        old_raw, new_raw = set(old_tree._raw), set(new_tree._raw)
        return dict(map(_decode_entry, old_raw - new_raw)), dict(map(_decode_entry, new_raw - old_raw))


_MODES = frozenset({b"100644", b"100755", b"40000", b"120000", b"160000"})


def _entry_end(data: bytes, pos: int) -> int:
    """Where the tree entry starting at ``pos`` ends; -1 if none starts there."""
    space = data.find(b" ", pos, pos + 7)  # modes are at most six digits
    if space < 0 or data[pos:space] not in _MODES:
        return -1
    nul = data.find(b"\x00", space)
    return -1 if nul < 0 or nul + 21 > len(data) else nul + 21


def _common_length(a: bytes, b: bytes, limit: int, *, from_end: bool = False) -> int:
    """How many leading (or trailing) bytes ``a`` and ``b`` share, at most ``limit``.

    Compared in C a block at a time, then by halving inside the block that differs.
    """
    def same(start: int, stop: int) -> bool:  # bytes [start, stop) counted from the chosen end
        if from_end:
            return a[len(a) - stop : len(a) - start] == b[len(b) - stop : len(b) - start]
        return a[start:stop] == b[start:stop]

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


def _changed_window(a: bytes, b: bytes) -> tuple[dict[str, Entry], dict[str, Entry]] | None:
    """The differing entries of two serialized trees, parsing only around the bytes that differ.

    A write changes a few entries of a folder of thousands: the trees share a
    long prefix and a long suffix. The entries between are parsed from an
    entry boundary before the first differing byte until both trees are at
    the same distance from their ends inside the shared suffix. None when no
    boundary is found (the caller then parses the trees whole).
    """
    shortest = min(len(a), len(b))
    head = _common_length(a, b, shortest)
    tail = _common_length(a, b, shortest - head, from_end=True)
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
        end = _entry_end(a, start)
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
        end = _entry_end(data, pos[side])
        if end == -1:
            return None
        name, entry = _decode_entry(data[pos[side] : end])
        entries[side][name] = entry
        pos[side] = end
    old, new = entries
    for name in old.keys() & new.keys():  # entries the window holds unchanged
        if old[name] == new[name]:
            del old[name], new[name]
    return old, new


def _cat_file_batch(git_dir: Path, shas: list[bytes]) -> dict[bytes, bytes]:
    """Read objects with one ``git cat-file --batch``: requests written by a thread, answers read here."""
    proc = subprocess.Popen(["git", f"--git-dir={git_dir}", "cat-file", "--batch"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None

    def feed() -> None:
        try:
            proc.stdin.write(b"".join(sha.hex().encode() + b"\n" for sha in shas))  # type: ignore[union-attr]
        finally:
            proc.stdin.close()  # type: ignore[union-attr]

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    found: dict[bytes, bytes] = {}
    try:
        for binsha in shas:
            header = proc.stdout.readline().split()
            if len(header) != 3:
                raise RepositoryError(f"git object {binsha.hex()} is missing; run 'git fsck'")
            data = proc.stdout.read(int(header[2]) + 1)
            found[binsha] = data[:-1]
    finally:
        writer.join()
        proc.stdout.close()
        proc.wait()
    return found


def _loose_object(raw: bytes) -> tuple[str, bytes]:
    """(kind, data) of a loose object file: zlib's ``<kind> <size>\\0<data>``.

    A stored (level 0) stream is a list of length-prefixed blocks: they are
    joined after the header, copied once rather than through zlib's window
    and again to drop the header (a 1 MB folder: 0.4 ms, not 1.5), and the
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


def _large_tree(kind: bytes, data: bytes) -> bool:
    """Whether a loose object is a large folder, stored uncompressed (zlib level 0) whatever the level.

    A category folder's tree is rewritten by every write to it and replaced by
    the next one; at 10,000 memories it is about 120 KB, and compressing it
    took 2 ms of a 4 ms write (20 ms at 100,000) to save a third of its size.
    git reads a stored (level 0) zlib stream like any other, and ``git gc``
    packs these objects with deltas anyway.
    """
    return kind == b"tree" and len(data) > LARGE_TREE_BYTES


def _object_id(kind: bytes, data: bytes) -> bytes:
    digest = hashlib.sha1(b"%s %d\x00" % (kind, len(data)))
    digest.update(data)
    return digest.digest()


def blob_id(data: bytes) -> bytes:
    """The id git gives a file with content ``data`` (without writing it)."""
    return _object_id(b"blob", data)
