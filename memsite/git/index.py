"""A fast path for the most common index update: new files in a split index.

``git update-index`` reads the whole index (~1.5 ms for 10,000 entries) and
costs a process start: together about 3.5 ms, most of a memsite write. With
``core.splitIndex`` (set by ``memsite init``) the index is a large shared base
file plus a small delta file, ``.git/index``. Adding a file that is in neither
only has to rewrite that delta, which this module does directly.

The path is deliberately narrow. It is taken only when every precondition
holds: index version 2 or 3, a ``link`` extension (split mode), no other
required extension, every path new to both files, a delta still small. In any
other case it returns False and the caller runs ``git update-index``. Optional
cache extensions (cache-tree, untracked cache, offset tables) are dropped
rather than patched, so git recomputes them instead of trusting stale data.
The new index is written into the ``index.lock`` the caller already holds;
the caller renames it into place once the branch has moved.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import os
import struct
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .locks import LockFile

_HEADER = struct.Struct(">4sII")
_ENTRY = struct.Struct(">10I20sH")
_FLAG_EXTENDED = 0x4000
_NAME_MASK = 0x0FFF
_STAGE_MASK = 0x3000
_KEEP_EXTENSIONS = {b"link", b"REUC"}
# Past this many entries in the delta, git is asked to fold it into a new
# base (git's own default is 20% of the index). Each write rewrites the
# delta, and each fold makes the next write read the new base's names.
MAX_DELTA_ENTRIES = 1000

# What add_new_files did.
ADDED = "added"
NOT_APPLICABLE = "not-applicable"
RESPLIT = "resplit"  # the delta is large: run git with --split-index to fold it

# Names in a shared index file never change (the file is named by its hash),
# so they are kept per file: a process writing to several repositories in
# turn keeps each one's (reading a base of 100,000 names costs ~90 ms).
_base_names: OrderedDict[Path, frozenset[bytes]] = OrderedDict()
BASE_CACHE_SIZE = 8


@dataclass(frozen=True)
class _Delta:
    """A delta index file as this process wrote it, so its next write need not read and parse it again."""

    stat: tuple[int, int, int]  # (inode, size, mtime) of the file written; git replaces it by a new file
    version: int
    replaced: list[bytes]  # entries that replace a base entry (their names are in the base)
    names: list[bytes]  # the files not in the base, sorted
    added: list[bytes]  # their entries, in the same order
    extensions: list[tuple[bytes, bytes]]

    def has(self, name: bytes) -> bool:
        i = bisect.bisect_left(self.names, name)
        return i < len(self.names) and self.names[i] == name


_written: OrderedDict[Path, _Delta] = OrderedDict()  # per index file


class _NotApplicable(Exception):
    pass


def _entries(data: bytes, version: int, count: int, pos: int) -> tuple[list[tuple[bytes, bytes]], int]:
    """Parse ``count`` entries from ``pos``: [(name, raw bytes)], end offset."""
    entries = []
    for _ in range(count):
        flags = struct.unpack_from(">H", data, pos + 60)[0]
        name_start = pos + 62
        if flags & _FLAG_EXTENDED:
            if version < 3:
                raise _NotApplicable
            name_start += 2
        length = flags & _NAME_MASK
        if length == _NAME_MASK:
            length = data.index(b"\x00", name_start) - name_start
        end = (name_start - pos + length + 8) & ~7
        entries.append((data[name_start : name_start + length], data[pos : pos + end]))
        pos += end
    return entries, pos


def _read(path: Path, verify: bool = True) -> tuple[int, list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]]:
    """(version, entries, extensions) of an index file, for versions 2 and 3."""
    data = path.read_bytes()
    if len(data) < 32 or (verify and hashlib.sha1(data[:-20]).digest() != data[-20:]):
        raise _NotApplicable
    signature, version, count = _HEADER.unpack_from(data)
    if signature != b"DIRC" or version not in (2, 3):
        raise _NotApplicable
    entries, pos = _entries(data, version, count, _HEADER.size)
    extensions = []
    while pos < len(data) - 20:
        name, size = struct.unpack_from(">4sI", data, pos)
        extensions.append((name, data[pos + 8 : pos + 8 + size]))
        pos += 8 + size
    return version, entries, extensions


def _shared_names(git_dir: Path, base: bytes) -> frozenset[bytes]:
    path = git_dir / f"sharedindex.{base.hex()}"
    names = _base_names.get(path)
    if names is None:
        _, entries, _ = _read(path)
        names = _base_names[path] = frozenset(name for name, _ in entries)
        if len(_base_names) > BASE_CACHE_SIZE:
            _base_names.popitem(last=False)
    else:
        _base_names.move_to_end(path)
    return names


def _entry(root: Path, name: bytes, sha: bytes) -> bytes:
    st = os.stat(root / os.fsdecode(name))
    mode = 0o100755 if st.st_mode & 0o100 else 0o100644
    fields = (
        int(st.st_ctime) & 0xFFFFFFFF, st.st_ctime_ns % 1_000_000_000,
        int(st.st_mtime) & 0xFFFFFFFF, st.st_mtime_ns % 1_000_000_000,
        st.st_dev & 0xFFFFFFFF, st.st_ino & 0xFFFFFFFF, mode,
        st.st_uid & 0xFFFFFFFF, st.st_gid & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF,
    )
    raw = _ENTRY.pack(*fields, sha, min(len(name), _NAME_MASK)) + name
    return raw + b"\x00" * (8 - len(raw) % 8)


def _delta(index: Path) -> _Delta | None:
    """The delta index file at ``index``; None while a merge left stages in it (git's to resolve)."""
    st = os.stat(index)
    known = _written.get(index)
    if known is not None and known.stat == (st.st_ino, st.st_size, st.st_mtime_ns):
        return known
    version, entries, extensions = _read(index)
    if any(struct.unpack_from(">H", raw, 60)[0] & _STAGE_MASK for _, raw in entries):
        return None
    named = sorted((name, raw) for name, raw in entries if name)
    return _Delta((st.st_ino, st.st_size, st.st_mtime_ns), version, [raw for name, raw in entries if not name],
                  [name for name, _ in named], [raw for _, raw in named], extensions)


def add_new_files(root: Path, git_dir: Path, files: Mapping[str, bytes], lock: LockFile) -> str:
    """Write into the held ``lock`` the index with entries for ``files`` (path -> blob id) added.

    Every file is new and already written in the working tree.

    Returns:
        ADDED if the lock now holds the new index. Otherwise nothing was
        written and ``git update-index`` must run: with ``--split-index`` for RESPLIT.
    """
    index = git_dir / "index"
    try:
        delta = _delta(index)
        if delta is None:
            return NOT_APPLICABLE
        links = [data for name, data in delta.extensions if name == b"link"]
        required = [name for name, _ in delta.extensions if not name[:1].isupper() and name != b"link"]
        if len(links) != 1 or required:
            return NOT_APPLICABLE
        if len(delta.replaced) + len(delta.added) + len(files) > MAX_DELTA_ENTRIES:
            # Git keeps racily-clean entries (files as new as the index)
            # in the delta; a re-split now moves them into the base.
            return RESPLIT
        base_names = _shared_names(git_dir, links[0][:20])
    except (_NotApplicable, FileNotFoundError, ValueError, struct.error):
        return NOT_APPLICABLE
    names = {name.encode("utf-8", "surrogateescape"): sha for name, sha in files.items()}
    if any(delta.has(name) or name in base_names for name in names):
        return NOT_APPLICABLE
    order, added = list(delta.names), list(delta.added)
    for name, sha in sorted(names.items()):
        i = bisect.bisect_left(order, name)
        order.insert(i, name)
        added.insert(i, _entry(root, name, sha))
    kept = [(n, d) for n, d in delta.extensions if n in _KEEP_EXTENSIONS]
    body = [_HEADER.pack(b"DIRC", delta.version, len(delta.replaced) + len(added)), *delta.replaced, *added]
    body += [struct.pack(">4sI", n, len(d)) + d for n, d in kept]
    data = b"".join(body)
    lock.write(data + hashlib.sha1(data).digest())
    st = os.fstat(lock.fd)  # the lock becomes the index by a rename, which keeps inode, size and time
    _written[index] = _Delta((st.st_ino, st.st_size, st.st_mtime_ns), delta.version, delta.replaced, order, added,
                             kept)
    _written.move_to_end(index)
    if len(_written) > BASE_CACHE_SIZE:
        _written.popitem(last=False)
    with contextlib.suppress(OSError):  # as git does: a shared index in use never expires
        os.utime(git_dir / f"sharedindex.{links[0][:20].hex()}")
    return ADDED


def cached_tree(git_dir: Path) -> bytes | None:
    """The root tree id the index's cache-tree extension vouches for, or None when it vouches for none.

    ``git checkout``, ``git commit`` and ``git reset`` leave it valid and equal
    to the tree they wrote; any change to the index's entries invalidates it.
    Read without checking the checksum: it is only a hint.
    """
    try:
        _, _, extensions = _read(git_dir / "index", verify=False)
    except (_NotApplicable, FileNotFoundError, ValueError, struct.error):
        return None
    for name, data in extensions:
        if name == b"TREE" and data[:1] == b"\x00":  # the root's path is empty
            line_end = data.index(b"\n")
            count = data[1:line_end].split(b" ", 1)[0]
            if count.lstrip(b"-").isdigit() and int(count) >= 0:
                return data[line_end + 1 : line_end + 21]
    return None
