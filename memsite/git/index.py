"""A fast path for memsite's index updates: files added, changed and removed in a split index.

``git update-index`` reads the whole index and costs a process start:
together, most of a memsite write. With
``core.splitIndex`` (set by ``memsite init``) the index is a large shared base
file plus a small delta file, ``.git/index``, whose ``link`` extension names
the base and holds two bitmaps over the base's entries: those deleted, and
those replaced by an entry of the delta (git's index-format documentation,
"Split index"). Adding a file that is in neither file, changing or removing
one, only has to rewrite that delta, which this module does directly: a new
file goes among the delta's own entries; a changed one replaces its entry
there, or, if it is in the base, sets its bit in the replace bitmap and adds
the replacing entry; a removed one leaves the delta, or sets its bit in the
delete bitmap.

The path is deliberately narrow. It is taken only when every precondition
holds: index version 2 or 3, a ``link`` extension (split mode), no other
required extension, no stages (a merge in progress), a base whose names are
each once in it, no file removed from the base coming back, a delta still
small (or, for a batch of new files, within git's own limit for it). In any
other case it says so and the caller runs ``git update-index``. Optional
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
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import TypeVar

from . import files as gitfiles
from .locks import LockFile

T = TypeVar("T")
_HEADER = struct.Struct(">4sII")
_ENTRY = struct.Struct(">10I20sH")
_FLAG_EXTENDED = 0x4000
_NAME_MASK = 0x0FFF
_STAGE_MASK = 0x3000
_KEEP_EXTENSIONS = {b"link", b"REUC"}
# Past this many entries in the delta, git is asked to fold it into a new
# base (git's own default is 20% of the index). Each write rewrites and
# hashes the whole delta, so it is kept small.
MAX_DELTA_ENTRIES = 200
# A batch of new files (a transaction's) goes into the delta even past that,
# while the delta stays within this share of the base: git's own limit
# (splitIndex.maxPercentChange, 20% by default). A fold makes git read and
# rewrite the whole index (costly in a large store); this
# way a run of transactions folds once every few, and the next single write
# folds what is left.
BATCH_DELTA_SHARE = 0.2
# Entries of the base replaced in the delta (files changed since the fold)
# are not counted above, as git does not count them: a fold keeps the
# entries of files changed within the same second in the delta (racily
# clean), a few dozen in a run of writes, so counting them would fold again
# at once. Past this many (each write rewrites them all, 64 bytes or more
# each), or past git's share of the base when that is more, the delta is folded.
MAX_REPLACED = 1000

# What update_files did.
ADDED = "added"
NOT_APPLICABLE = "not-applicable"
RESPLIT = "resplit"  # the delta is large: run git with --split-index to fold it

# Names in a shared index file never change (the file is named by its hash),
# so they are kept per file, sorted: a process writing to several
# repositories in turn keeps each one's (reading a large base's names
# costs more than a write).
_base_names: OrderedDict[Path, _Names] = OrderedDict()
BASE_CACHE_SIZE = 8
# The names of the last shared index a memsite process read (or made by
# folding), for the others: '<base id> <count> <SHA-1 of the rest>[ exact]\n',
# then the names, sorted, NUL-separated (no path holds a NUL); 'exact' when
# they are the base's own (see _Names). Several writers
# take turns: after a fold each one's next write needed the new base's names,
# parsed from the index at far more cost than they are read here. Written and read under ``index.lock``,
# which serialises them.
NAMES_FILE = "memsite-index-names"


class _Names:
    """The names of a shared index, sorted, asked by bisection (no set to build: hashing a large base's names
    costs more than the bisections); a name too many only sends that name's write to git.

    ``exact``: the names are the base's own, read from it, so a name's place
    among them is its entry's position in the base (what the link bitmaps
    count); otherwise they may hold a few more (see note_fold).
    """

    def __init__(self, names: list[bytes], exact: bool = False) -> None:
        names.sort()  # (the order git wrote them in: sorting a sorted list is one pass)
        self.sorted = names
        self.exact = exact

    def __contains__(self, name: bytes) -> bool:
        i = bisect.bisect_left(self.sorted, name)
        return i < len(self.sorted) and self.sorted[i] == name

    def position(self, name: bytes) -> int | None:
        """The place of ``name`` among the names (of exact names: its entry's in the base), or None."""
        i = bisect.bisect_left(self.sorted, name)
        return i if i < len(self.sorted) and self.sorted[i] == name else None

    def plus(self, *more: list[bytes]) -> _Names:
        return _Names([*self.sorted, *(name for names in more for name in names)])


@dataclass(frozen=True)
class _Delta:
    """A delta index file as this process wrote it, so its next write need not read and parse it again."""

    stat: tuple[int, int, int]  # (inode, size, mtime) of the file written: a quick test that it is the same
    checksum: bytes  # its last 20 bytes, the SHA-1 of the rest: the exact test
    version: int
    replaced: list[bytes]  # entries that replace a base entry (their names are in the base)
    names: list[bytes]  # the files not in the base, sorted
    added: list[bytes]  # their entries, in the same order
    extensions: list[tuple[bytes, bytes]]
    link: tuple[bytes, list[int], list[int]] | None = None  # its link extension read (see _split_link), once known

    def has(self, name: bytes) -> bool:
        i = bisect.bisect_left(self.names, name)
        return i < len(self.names) and self.names[i] == name


def _identity(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_ino, st.st_size, st.st_mtime_ns


_written: OrderedDict[Path, _Delta] = OrderedDict()  # per index file
_cache_lock = threading.Lock()


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
    return _parse(path.read_bytes(), verify)


def _header(data: bytes, verify: bool) -> tuple[int, int]:
    """(version, entry count) of an index file of version 2 or 3, its checksum checked if ``verify``."""
    if len(data) < 32 or (verify and hashlib.sha1(memoryview(data)[:-20]).digest() != data[-20:]):
        raise _NotApplicable
    signature, version, count = _HEADER.unpack_from(data)
    if signature != b"DIRC" or version not in (2, 3):
        raise _NotApplicable
    return version, count


def _parse(data: bytes, verify: bool = True) -> tuple[int, list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]]:
    version, count = _header(data, verify)
    entries, pos = _entries(data, version, count, _HEADER.size)
    extensions = []
    while pos < len(data) - 20:
        name, size = struct.unpack_from(">4sI", data, pos)
        extensions.append((name, data[pos + 8 : pos + 8 + size]))
        pos += 8 + size
    return version, entries, extensions


def _shared_names(git_dir: Path, base: bytes, exact: bool = False) -> _Names:
    """The names of shared index ``base``; read from it if ``exact`` and those known may hold more."""
    path = git_dir / f"sharedindex.{base.hex()}"
    names = _base_names.get(path)
    if names is None or (exact and not names.exact):
        names = _published_names(git_dir, base)
        if names is None or (exact and not names.exact):
            names = _exact_names(path.read_bytes())
            _publish_names(git_dir, base, names)
    _keep(_base_names, path, names)
    return names


def _exact_names(data: bytes) -> _Names:
    """The names of a shared index, marked exact when each is there once at stage 0 (so a name's place among the
    sorted names is its entry's position); a base with stages is left to git."""
    names = _names(data)
    exact = all(a < b for a, b in pairwise(names))  # git writes them sorted: one pass to check
    return _Names(names, exact=exact)


def _published_names(git_dir: Path, base: bytes) -> _Names | None:
    """The names of shared index ``base`` as another process published them; None if it did not (or they
    do not check out)."""
    try:
        data = (git_dir / NAMES_FILE).read_bytes()
    except OSError:
        return None
    header, _, body = data.partition(b"\n")
    fields = header.split(b" ")
    if len(fields) not in (3, 4) or fields[0] != base.hex().encode() \
            or fields[2] != hashlib.sha1(body).hexdigest().encode():
        return None
    names = body.split(b"\x00") if body else []
    return _Names(names, exact=fields[3:] == [b"exact"]) if fields[1] == str(len(names)).encode() else None


def _publish_names(git_dir: Path, base: bytes, names: _Names) -> None:
    """Leave the names of shared index ``base`` (exactly, or more) for the other writers (see NAMES_FILE)."""
    body = b"\x00".join(names.sorted)
    header = b"%s %d %s%s\n" % (base.hex().encode(), len(names.sorted), hashlib.sha1(body).hexdigest().encode(),
                                 b" exact" if names.exact else b"")
    with contextlib.suppress(OSError):  # (they parse the base instead)
        gitfiles.store(str(git_dir / NAMES_FILE), str(git_dir / f"{NAMES_FILE}.tmp"), header + body, mode=0o644)


def _names(data: bytes) -> list[bytes]:
    """The names of an index file's entries (only these: far quicker than reading a large base whole)."""
    version, count = _header(data, verify=True)
    names, pos = [], _HEADER.size
    for _ in range(count):
        flags = data[pos + 60] << 8 | data[pos + 61]
        if flags & _FLAG_EXTENDED:  # (version 3 only) two more bytes of flags: parsed entry by entry
            return [name for name, _ in _entries(data, version, count, _HEADER.size)[0]]
        length = flags & _NAME_MASK
        if length == _NAME_MASK:
            length = data.index(b"\x00", pos + 62) - pos - 62
        names.append(data[pos + 62 : pos + 62 + length])
        pos += (62 + length + 8) & ~7
    return names


def _keep(cache: OrderedDict[Path, T], key: Path, value: T) -> None:
    with _cache_lock:  # shared by every store of the process, whatever thread writes
        cache[key] = value
        cache.move_to_end(key)
        if len(cache) > BASE_CACHE_SIZE:
            cache.popitem(last=False)


def _link(extensions: list[tuple[bytes, bytes]]) -> bytes | None:
    """The shared index a split index names (its id), or None when the index is not split."""
    links = [data[:20] for name, data in extensions if name == b"link"]
    return links[0] if len(links) == 1 else None


def note_fold(git_dir: Path, lock: LockFile, data: bytes, paths: list[str],
              source: tuple[os.stat_result, bytes] | None) -> None:
    """Remember the index ``git update-index`` wrote into ``lock`` (``data``), having updated ``paths``
    of the index file ``source`` (its stat and checksum; None: there was none).

    When git folded the delta into a new base, that base holds at most the
    names the index held before plus ``paths``; kept as the new base's names,
    they spare the next write reading it whole.
    A name kept that git removed only sends that name's next write to git.
    """
    index = git_dir / "index"
    before = _written.get(index)
    if before is not None and (source is None or before.checksum != source[1]
                               or before.stat != _identity(source[0])):
        before = None  # what this process knows is not the index git started from
    base = _link(before.extensions) if before is not None else None
    old_names = _base_names.get(git_dir / f"sharedindex.{base.hex()}") if base is not None else None
    _written.pop(index, None)
    try:
        delta = _as_delta(os.fstat(lock.fd), data[-20:], *_parse(data, verify=False))
    except (_NotApplicable, ValueError, struct.error):
        return
    new = _link(delta.extensions) if delta is not None else None
    if delta is None or new is None:
        return
    _keep(_written, index, delta)
    shared = git_dir / f"sharedindex.{new.hex()}"
    if before is not None and old_names is not None and shared not in _base_names:
        added = [path.encode("utf-8", "surrogateescape") for path in paths]
        names = old_names.plus(before.names, added)
        _keep(_base_names, shared, names)
        _publish_names(git_dir, new, names)


def _entry(root: str, name: bytes, sha: bytes, *, named: bool = True) -> bytes:
    """The index entry of file ``name`` (its blob ``sha``), with its stat data; without its name if not ``named``
    (an entry that replaces one of the shared index)."""
    st = os.stat(f"{root}/{os.fsdecode(name)}")
    mode = 0o100755 if st.st_mode & 0o100 else 0o100644
    fields = (
        int(st.st_ctime) & 0xFFFFFFFF, st.st_ctime_ns % 1_000_000_000,
        int(st.st_mtime) & 0xFFFFFFFF, st.st_mtime_ns % 1_000_000_000,
        st.st_dev & 0xFFFFFFFF, st.st_ino & 0xFFFFFFFF, mode,
        st.st_uid & 0xFFFFFFFF, st.st_gid & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF,
    )
    if not named:
        name = b""
    raw = _ENTRY.pack(*fields, sha, min(len(name), _NAME_MASK)) + name
    return raw + b"\x00" * (8 - len(raw) % 8)


def _delta(index: Path) -> _Delta | None:
    """The delta index file at ``index``; None while a merge left stages in it (git's to resolve)."""
    fd = os.open(index, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        known = _written.get(index)
        # The same inode, size and time can come back (a reused inode within one clock tick);
        # the checksum git and memsite end every index with cannot.
        if (known is not None and known.stat == _identity(st)
                and os.pread(fd, 20, st.st_size - 20) == known.checksum):
            return known
        data = os.pread(fd, st.st_size, 0)
    finally:
        os.close(fd)
    delta = _as_delta(st, data[-20:], *_parse(data))
    if delta is not None:
        _keep(_written, index, delta)
    return delta


def _as_delta(st: os.stat_result, checksum: bytes, version: int, entries: list[tuple[bytes, bytes]],
              extensions: list[tuple[bytes, bytes]]) -> _Delta | None:
    if any(struct.unpack_from(">H", raw, 60)[0] & _STAGE_MASK for _, raw in entries):
        return None
    named = sorted((name, raw) for name, raw in entries if name)
    return _Delta(_identity(st), checksum, version,
                  [raw for name, raw in entries if not name], [name for name, _ in named], [raw for _, raw in named],
                  extensions)


def _bitmap(data: bytes, pos: int) -> tuple[list[int], int]:
    """The set bits of the EWAH bitmap at ``pos`` of ``data`` (git's ewah_read_mmap and ewah_each_bit), ascending,
    and the offset after it."""
    _bit_size, count = struct.unpack_from(">II", data, pos)
    words = struct.unpack_from(f">{count}Q", data, pos + 8)
    pos += 8 + 8 * count + 4  # (then the place of the last marker word: only for appending)
    if pos > len(data):
        raise _NotApplicable
    bits: list[int] = []
    at = i = 0
    while i < count:
        marker = words[i]  # bit 0: the run's bit; 32 bits: words of that bit; 31 bits: literal words after them
        run = (marker >> 1) & 0xFFFFFFFF
        if marker & 1:
            bits.extend(range(at, at + 64 * run))
        at += 64 * run
        literals = marker >> 33
        if i + literals >= count:
            raise _NotApplicable
        for word in words[i + 1 : i + 1 + literals]:
            while word:
                low = word & -word
                bits.append(at + low.bit_length() - 1)
                word ^= low
            at += 64
        i += 1 + literals
    return bits, pos


def _ewah(bits: list[int]) -> bytes:
    """The EWAH bitmap of ``bits`` (ascending), as git serialises one: runs of empty words, then literal words."""
    if not bits:
        return _EMPTY_EWAH
    count = (bits[-1] >> 6) + 1
    raw = bytearray(count * 8)  # the 64-bit words, little-endian: bit b is bit b % 8 of byte b // 8
    for bit in bits:
        raw[bit >> 3] |= 1 << (bit & 7)
    words = struct.unpack(f"<{count}Q", raw)
    used = [k for k in range(count) if words[k]]
    out: list[int] = []
    last_marker = covered = start = 0
    while start < len(used):
        end = start
        while end + 1 < len(used) and used[end + 1] == used[end] + 1:
            end += 1
        last_marker = len(out)
        out.append((used[start] - covered) << 1 | (end - start + 1) << 33)
        out.extend(words[used[start] : used[end] + 1])
        covered = used[end] + 1
        start = end + 1
    return struct.pack(f">II{len(out)}QI", bits[-1] + 1, len(out), *out, last_marker)


_EMPTY_EWAH = struct.pack(">IIQI", 0, 1, 0, 0)  # (git's empty bitmap: one marker word of nothing)


def _link_data(link: bytes, written: bytes, before: tuple[list[int], list[int]], deleted: list[int],
               replaced: list[int]) -> bytes:
    """The ``link`` extension naming shared index ``link`` with these bitmaps; ``written``, the one the index
    holds, with the bitmaps ``before`` (deleted, replaced): what did not change is not encoded again (a
    write of new files changes neither)."""
    if len(written) == 20 or written[:20] != link:
        return link + _ewah(deleted) + _ewah(replaced)
    end = 20 + 8 + 8 * struct.unpack_from(">I", written, 24)[0] + 4  # (the deleted bitmap's end)
    same_deleted, same_replaced = deleted == before[0], replaced == before[1]
    if same_deleted and same_replaced:
        return written
    return link + (written[20:end] if same_deleted else _ewah(deleted)) + \
        (written[end:] if same_replaced else _ewah(replaced))


def _split_link(data: bytes) -> tuple[bytes, list[int], list[int]]:
    """(shared index id, deleted positions, replaced positions) of a ``link`` extension."""
    if len(data) == 20:  # (git writes no bitmaps when it has none)
        return data, [], []
    deleted, pos = _bitmap(data, 20)
    replaced, pos = _bitmap(data, pos)
    if pos != len(data):
        raise _NotApplicable
    return data[:20], deleted, replaced


def update_files(root: Path, git_dir: Path, files: Mapping[str, bytes | None], lock: LockFile) -> str:
    """Write into the held ``lock`` the index with ``files`` updated: path -> blob id, or None for a file removed.

    What ``git update-index --add --remove --info-only`` would write for
    those paths, each already as given in the working tree (written, or
    gone).

    Returns:
        ADDED if the lock now holds the new index. Otherwise nothing was
        written and ``git update-index`` must run: with ``--split-index`` for RESPLIT.
    """
    index = git_dir / "index"
    names = {name.encode("utf-8", "surrogateescape"): sha for name, sha in files.items()}
    try:
        delta = _delta(index)
        if delta is None:
            return NOT_APPLICABLE
        links = [data for name, data in delta.extensions if name == b"link"]
        required = [name for name, _ in delta.extensions if not name[:1].isupper() and name != b"link"]
        if len(links) != 1 or required:
            return NOT_APPLICABLE
        link, deleted, replaced_at = delta.link or _split_link(links[0])
        if len(replaced_at) != len(delta.replaced):
            return NOT_APPLICABLE
        base_names = _shared_names(git_dir, link)
        if any(not delta.has(name) and name in base_names for name in names):
            # changed or removed in the base: the positions of their entries there are needed
            base_names = _shared_names(git_dir, link, exact=True)
            if not base_names.exact or max(deleted + replaced_at, default=-1) >= len(base_names.sorted):
                return NOT_APPLICABLE
        # Only new names count here (see MAX_REPLACED).
        new = [name for name, sha in names.items() if sha is not None and not delta.has(name)
               and name not in base_names]
        count = len(delta.names) + len(new)
        batch = len(new) >= MAX_DELTA_ENTRIES
        if count > MAX_DELTA_ENTRIES and not batch:
            return RESPLIT
        if count > MAX_DELTA_ENTRIES and count > BATCH_DELTA_SHARE * len(base_names.sorted):
            return RESPLIT
    except (_NotApplicable, FileNotFoundError, ValueError, IndexError, struct.error):
        return NOT_APPLICABLE
    folder = str(root)
    order, added = list(delta.names), list(delta.added)
    before_deleted = deleted
    gone, replacing = set(deleted), dict(zip(replaced_at, delta.replaced))
    for name, sha in sorted(names.items()):
        i = bisect.bisect_left(order, name)
        if i < len(order) and order[i] == name:  # one of the delta's own files
            if sha is None:
                del order[i], added[i]
            else:
                added[i] = _entry(folder, name, sha)
            continue
        at = base_names.position(name) if name in base_names else None
        if at is None:  # new (or, removed, already absent)
            if sha is not None:
                order.insert(i, name)
                added.insert(i, _entry(folder, name, sha))
        elif at in gone:  # removed from the base already: a file coming back is left to git
            if sha is not None:
                return NOT_APPLICABLE
        elif sha is None:
            gone.add(at)
            replacing.pop(at, None)  # (git refuses an entry both replaced and deleted)
        else:
            replacing[at] = _entry(folder, name, sha, named=False)  # the name is the base entry's
    if len(replacing) > max(MAX_REPLACED, BATCH_DELTA_SHARE * len(base_names.sorted)):
        return RESPLIT
    positions, deleted = sorted(replacing), sorted(gone)
    replaced = [replacing[at] for at in positions]
    link_data = _link_data(link, links[0], (before_deleted, replaced_at), deleted, positions)
    kept = [(b"link", link_data), *((n, d) for n, d in delta.extensions if n in _KEEP_EXTENSIONS and n != b"link")]
    body = [_HEADER.pack(b"DIRC", delta.version, len(replaced) + len(added)), *replaced, *added]
    body += [struct.pack(">4sI", n, len(d)) + d for n, d in kept]
    data = b"".join(body)
    checksum = hashlib.sha1(data).digest()
    lock.write(data + checksum)
    st = os.fstat(lock.fd)  # the lock becomes the index by a rename, which keeps inode, size and time
    _keep(_written, index, _Delta(_identity(st), checksum, delta.version, replaced, order, added, kept,
                                  (link, deleted, positions)))
    with contextlib.suppress(OSError):  # as git does: a shared index in use never expires
        os.utime(git_dir / f"sharedindex.{link.hex()}")
    return ADDED


def cached_tree(git_dir: Path) -> bytes | None:
    """The root tree id the index's cache-tree extension vouches for, or None when it vouches for none.

    ``git checkout``, ``git commit`` and ``git reset`` leave it valid and equal
    to the tree they wrote; any change to the index's entries invalidates it.
    The index is parsed once for this and the write's own update (see _delta).
    """
    try:
        try:
            delta = _delta(git_dir / "index")
        except _NotApplicable:  # (an index git wrote without its checksum, say)
            delta = None
        extensions = delta.extensions if delta is not None else _read(git_dir / "index", verify=False)[2]
    except (_NotApplicable, FileNotFoundError, ValueError, struct.error):
        return None
    for name, data in extensions:
        if name == b"TREE" and data[:1] == b"\x00":  # the root's path is empty
            line_end = data.index(b"\n")
            count = data[1:line_end].split(b" ", 1)[0]
            if count.lstrip(b"-").isdigit() and int(count) >= 0:
                return data[line_end + 1 : line_end + 21]
    return None
