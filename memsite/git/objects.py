"""Git objects: writes, reads, and tree edits along a changed path.

Why not GitPython's index or object writer: its index is pure Python and
rewrites the whole index (~1 s a commit at 10,000 files), and its loose-object
writer and tree serializer cost more than the rest of a memsite write together.
A commit here writes one blob per changed file and one tree per folder on the
changed path (the other trees are reused by id), which keeps a write to a repo
of 10,000 memories at a few milliseconds.

A commit's objects (seven for one memory) go into one small pack: two files
instead of seven, and creating a file is most of what a write costs the
kernel. memsite lists the packs it writes (``.git/memsite-packs``) and merges
them as they add up, geometrically as ``git repack --geometric`` does but by
copying their entries (a git repack would cost a process and delta searches
every few writes), so their number stays far below the 50 at which ``git gc
--auto`` repacks everything; it never touches a pack it did not write. Once
they hold more objects than ``gc.auto``, ``git pack-objects`` stores them
again with deltas in the background (see :meth:`ObjectStore.merge_own_packs`).
With ``gc.auto`` or ``gc.autoPackLimit`` set to 0 (maintenance left to
someone else), objects are written loose instead, as git writes them.

Objects are read from loose files and from packs directly (objects stored
whole, as memsite stores them and git stores many); a delta, or an object
found nowhere here (an alternate), goes through GitPython's persistent ``git
cat-file`` process.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import itertools
import logging
import os
import re
import struct
import subprocess
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import RepositoryError
from . import files, locks
from .mutex import SharedLock
from .settings import Flush, GitSettings, git_environment

MODE_FILE = 0o100644
MODE_EXEC = 0o100755
MODE_TREE = 0o040000
MODE_LINK = 0o120000
MODE_GITLINK = 0o160000

PACK_THRESHOLD = 64  # objects in one write from which a pack beats loose files when git's maintenance is off
PACKS_FILE = "memsite-packs"  # in the git dir: the packs memsite wrote (name, objects), which it alone merges
PACKS_LOCK = "memsite-packs-lock"  # in the git dir: a lock file for that list (linked worktrees share it)
MERGE_LOCK = "memsite-merge-lock"  # in the git dir: held by the process merging memsite's packs
PACK_NAMES = "memsite-pack-names"  # in the git dir: '<id> <folder>' of the trees in memsite's packs (see _list_own)
PACK_NAMES_LIMIT = 8 << 20  # bytes past which no more names are kept (merges left to git: nothing takes them out)
LIST_LOCK_SECONDS = 30.0
GC_PID_STALE_SECONDS = 12 * 3600  # a gc.pid this old was left by a killed 'git gc' (git's own rule)
MERGE_PACKS = 24  # listed packs from which memsite merges its small ones (git gc --auto repacks all at 50)
LARGE_TREE_BYTES = 16 * 1024  # folders above this are stored uncompressed (see _large_tree)
_PACK_TYPES = {b"commit": 1, b"tree": 2, b"blob": 3, b"tag": 4}
_KINDS = {code: kind for kind, code in _PACK_TYPES.items()}

_tmp_counter = itertools.count()
PACK_TMP_PREFIX = ".memsite-tmp-"  # a pack or index being written: .memsite-tmp-<pid>-<n>.pack
_TREE_ENTRY = re.compile(rb"([0-7]{5,6} ([^\x00]*)\x00.{20})", re.DOTALL)  # a tree's entry: mode, name, id
log = logging.getLogger("memsite")


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
        # One pass (about twice as fast as the loop: a folder of 500 in 0.2 ms) when the last entry's
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
            same = _common_length(old, data, min(len(old) - at_old, len(data) - at_new), at=(at_old, at_new))
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
            end = _entry_end(data, at_new)
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

    def __len__(self) -> int:
        return len(self._keys)

    def get(self, name: str) -> Entry | None:
        i = _position(self._keys, name.encode("utf-8", "surrogateescape"))
        return None if i is None else _decode_entry(self._raw[i])[1]

    def items(self) -> Iterator[tuple[str, Entry]]:
        """(name, Entry) of every entry, in git's order."""
        return map(_decode_entry, self._raw)

    def items_from(self, low: str, high: str) -> Iterator[tuple[str, Entry]]:
        """(name, Entry) of the entries whose names sort from ``low`` up to (not including) ``high``.

        Only those are decoded: ``items_from("0", ":")``, the names starting
        with a digit, of a folder of thousands.
        """
        start = bisect.bisect_left(self._keys, low.encode("utf-8", "surrogateescape"))
        stop = bisect.bisect_left(self._keys, high.encode("utf-8", "surrogateescape"), start)
        return map(_decode_entry, self._raw[start:stop])

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
        # A commit's pack stands for its loose objects: flushed as they would be (git flushes packs
        # by default because repacking deletes what they replace; a commit's pack replaces nothing).
        self._flush_loose = settings.flush("loose-object")
        self._flush_pack = (settings.flush("pack"), settings.flush("pack-metadata"))
        self._flush_commit = (self._flush_loose, self._flush_loose)
        self._packing = settings.maintained
        self._merge_at = max(2, min(MERGE_PACKS, settings.auto_pack_limit // 2))
        self._listed = f"{objects_dir.parent}/{PACKS_FILE}"
        self._list_lock = SharedLock(objects_dir.parent / PACKS_LOCK)  # taken briefly: to add a pack, or rewrite the list
        self._merge_lock = SharedLock(objects_dir.parent / MERGE_LOCK)  # held by the one merge at a time
        self._merge_due = False
        # Bytes of the list's lines that are no packs to merge (git's packs with deltas, a pack git is storing
        # with deltas, the 'repacked' line), as this process last found them: not counted towards a merge.
        self._not_merged = 0
        self._delta_after = settings.auto_gc
        # git pack-objects, the packs it was given, and the bytes of the names file it was given
        self._delta_job: tuple[subprocess.Popen[bytes], list[str], int] | None = None
        self._batch: dict[bytes, tuple[int, bytes]] | None = None
        self._batch_names: dict[bytes, str] = {}  # folder of each tree in the batch
        self._held: list[str] = []  # packs with a .keep until their branch moves (see release)
        self._names = f"{objects_dir.parent}/{PACK_NAMES}"
        self._names_listed = 0  # bytes of the names file when the list was last read to merge
        self._packs: tuple[_Pack, ...] = ()  # newest first
        self._trees: OrderedDict[bytes, Tree] = OrderedDict()
        self._folders: dict[tuple[bytes | None, str], bytes | None] = {}
        self._seen_at: dict[str, bytes] = {}  # folder path -> the tree last found there (see _tree_at)
        self._tree_cache_size = 256
        # Large folders diffed by their bytes alone (never parsed): the newest is
        # the old side of the next diff, so it is kept rather than read again.
        self._large: OrderedDict[bytes, bytes] = OrderedDict()

    # --- raw objects -------------------------------------------------------

    def _path(self, hexsha: str) -> str:
        return f"{self._dir}/{hexsha[:2]}/{hexsha[2:]}"  # a plain string: a write makes seven of these

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Objects written in this block are stored together when it ends: one pack (or one loose file).

        Nothing is stored if the block raises. Loose objects when git's
        automatic maintenance is off (nobody would merge the packs).
        """
        if self._batch is not None or not self._packing:
            yield
            return
        self._batch = {}
        try:
            yield
            objects, names = self._batch, self._batch_names
        finally:
            self._batch, self._batch_names = None, {}
        if len(objects) == 1 or (objects and _gc_running(self.dir.parent)):
            # While a 'git gc' runs, loose files, as git's own commands write: it rescans the packs as it
            # goes, and a pack whose index it lists before the pack itself (written meanwhile) it takes for
            # garbage and removes that index when it ends (seen at 30,000 and 74,000 writes into a month).
            for code, data in objects.values():
                self.write(_KINDS[code], data)
        elif objects:
            name = self._write_pack([(binsha, code, data) for binsha, (code, data) in objects.items()],
                                    self._flush_commit, keep=True)
            self._list_own(name, len(objects), names)

    def release(self) -> None:
        """Let git's repacks take the packs written since the last call: the branch points at their commits
        now (or never will). Until then each has a ``.keep`` file, as a pack 'git receive-pack' takes in
        has until the refs move: a 'git gc' that lists the packs as it starts and walks the refs just
        before they move would otherwise remove the pack with objects it did not see reachable."""
        held, self._held = self._held, []
        for name in held:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self._dir}/pack/{name}.keep")

    def write(self, kind: bytes, data: bytes, *, name: str | None = None) -> bytes:
        """Store an object (blob, tree, commit) and return its binary id.

        ``name``: the folder a tree is written for, kept for git to find its
        earlier versions when it stores memsite's packs with deltas.
        """
        binsha = _object_id(kind, data)
        if self._batch is not None:
            self._batch[binsha] = (_PACK_TYPES[kind], data)
            if name:
                self._batch_names[binsha] = name
            return binsha
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
        files.store(path, f"{folder}/tmp_obj_{os.getpid()}_{next(_tmp_counter)}", compressed, mode=0o444,
                    flush=self._flush_loose)
        return binsha

    def write_many(self, kind: bytes, items: list[bytes]) -> list[bytes]:
        """Store several objects of one kind; many at once go into one pack file.

        Thousands of loose files cost a file creation each and slow git down
        until ``git gc``; a pack is one file, as ``git fast-import`` writes.
        """
        if self._batch is not None or len(items) < PACK_THRESHOLD or _gc_running(self.dir.parent):
            return [self.write(kind, data) for data in items]
        code = _PACK_TYPES[kind]
        shas = [_object_id(kind, data) for data in items]
        objects = dict(zip(shas, items))
        self._write_pack([(binsha, code, data) for binsha, data in objects.items()], self._flush_pack)
        return shas

    def _write_pack(self, objects: list[tuple[bytes, int, bytes]], flushes: tuple[Flush | None, Flush | None],
                    keep: bool = False) -> str:
        """Write ``objects`` (id, type code, data) as one pack, each stored whole (no deltas); its name."""
        entries = []
        for binsha, code, data in objects:
            size = len(data)
            header = bytearray([(code << 4) | (size & 0x0F)])
            size >>= 4
            while size:
                header[-1] |= 0x80
                header.append(size & 0x7F)
                size >>= 7
            entry = bytes(header) + zlib.compress(data, 0 if _large_tree(_KINDS[code], data) else self._level)
            entries.append((binsha, zlib.crc32(entry), entry))
        return self._store_pack(entries, flushes, keep)

    def _store_pack(self, entries: list[tuple[bytes, int, bytes]], flushes: tuple[Flush | None, Flush | None],
                    keep: bool = False) -> str:
        """Write a pack of ``entries`` (id, CRC-32, the entry's bytes) and its version-2 index; the pack's name."""
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
        folder = f"{self._dir}/pack"
        name = f"pack-{pack_sha.hex()}"
        # The .pack goes in place before the .idx: git finds packs by their index. The temporary names
        # are not git's 'tmp_': 'git prune' stats every such file in the folder, and one renamed under it
        # makes it report 'Could not stat', after which git runs no automatic gc for a day.
        if keep:  # (before the index: git never sees the pack without it) until release()
            files.store(f"{folder}/{name}.keep", f"{folder}/{PACK_TMP_PREFIX}{os.getpid()}-{next(_tmp_counter)}.keep",
                        f"memsite {os.getpid()}: until its branch moves\n".encode(), mode=0o644)
            self._held.append(name)
        for suffix, data, flush in ((".pack", pack, flushes[0]), (".idx", idx, flushes[1])):
            files.store(f"{folder}/{name}{suffix}", f"{folder}/{PACK_TMP_PREFIX}{os.getpid()}-{next(_tmp_counter)}{suffix}",
                        data, mode=0o444, flush=flush)
        return name

    # --- merging memsite's own packs ---------------------------------------

    def _list_own(self, name: str, count: int, folders: Mapping[bytes, str]) -> None:
        """Add a pack memsite wrote to its list (a merge rewriting the list meanwhile keeps the line).

        The folders its trees were written for go to a list of their own
        (``memsite-pack-names``): git finds the earlier versions of a tree
        to store it as a delta of by its path, which a list of ids alone
        does not give (a store of 20,000 memories written one by one: 27 KB
        per write stored with deltas without the names, 1.1 KB with them).
        """
        line = f"{name} {count}\n".encode()
        named = "".join(f"{sha.hex()} {folder}\n" for sha, folder in folders.items()).encode("utf-8", "replace")
        try:
            with self._list_held():
                fd = os.open(self._listed, os.O_WRONLY | os.O_APPEND | os.O_CREAT | files.BINARY, 0o644)
                try:
                    files.write_all(fd, line)
                    self._merge_due = os.fstat(fd).st_size >= self._not_merged + self._merge_at * len(line)
                finally:
                    os.close(fd)
                if named:
                    fd = os.open(self._names, os.O_WRONLY | os.O_APPEND | os.O_CREAT | files.BINARY, 0o644)
                    try:
                        if os.fstat(fd).st_size < PACK_NAMES_LIMIT:
                            files.write_all(fd, named)
                    finally:
                        os.close(fd)
        except RepositoryError as exc:  # (the list's lock stayed taken)
            log.warning("%s; pack %s is left to git's maintenance", exc, name)

    def maintain(self) -> None:
        """Merge memsite's small packs once enough are listed (after a commit; no lock needed)."""
        if self._merge_due:
            self._merge_due = False
            self.merge_own_packs()

    def merge_own_packs(self, wait: float = 0.0) -> None:
        """Merge the small packs memsite wrote into one, as ``git repack --geometric=2`` would.

        Only packs on memsite's list are touched: the smallest ones, until
        every pack left is at least twice the size of all smaller ones
        together, so an object is copied a few times in its life rather
        than at every merge. Their entries are copied as they are (memsite
        stores objects whole), each pack's checksum checked first; the merged
        pack is flushed as git flushes a repack's before the merged packs
        are removed. Left alone: a pack gone meanwhile (a person's 'git gc'),
        one with a ``.keep`` file, and all of them while a multi-pack index
        names packs (git's own maintenance then manages them).

        Copied entries are never deltas, so once the listed packs hold more
        objects than ``gc.auto`` (the number of loose objects at which git
        would pack them), ``git pack-objects`` is started in the background
        to store them again with deltas, as ``git gc --auto`` would have; a
        later merge (or closing the store) lists its pack and removes the packs
        it replaces.

        One process merges at a time, and writers go on meanwhile: a merge
        holds a lock of its own (skipping this one when another process holds
        it longer than ``wait`` seconds), and the list's lock only while it
        reads the list and when it writes it back with the packs listed since.
        A reader that finds a merged pack gone looks for the new one.
        """
        if not self._merge_lock.acquire(wait):
            return
        try:
            if _gc_running(self.dir.parent):
                return  # it lists the packs as it starts: one removed meanwhile fails it (see _gc_running)
            self._merge()
        finally:
            self._merge_lock.release()

    def _merge(self) -> None:
        folder = f"{self._dir}/pack"
        with self._list_held():
            try:
                with open(self._listed, "rb") as handle:
                    before = handle.read()
            except FileNotFoundError:
                return
            try:  # the names of the packs listed so far end here (both are appended to under this lock)
                self._names_listed = os.stat(self._names).st_size
            except FileNotFoundError:
                self._names_listed = 0
        if os.path.exists(f"{folder}/multi-pack-index"):
            return
        listed: dict[str, int] = {}
        deltas: dict[str, int] = {}  # packs git wrote with deltas from memsite's: listed, never merged here
        held: dict[str, str] = {}  # packs a writer keeps until its branch moves (see release): listed as they are
        repacked = 0  # objects listed when git last repacked them (a line 'repacked <n>')
        for line in before.split(b"\n"):
            name, _, rest = line.decode("ascii", "replace").strip().partition(" ")
            count, _, mark = rest.partition(" ")
            if name == "repacked" and count.isdigit():
                repacked = int(count)
            elif name.startswith("pack-") and count.isdigit() and os.path.exists(f"{folder}/{name}.idx"):
                kept_by = _keep_of(f"{folder}/{name}.keep")
                if kept_by is None:
                    (deltas if mark == "deltas" else listed)[name] = int(count)
                elif kept_by.startswith(b"memsite "):  # a writer's, until its branch moves: merged later
                    held[name] = line.decode("ascii", "replace").strip()
        gone = self._collect_deltas(folder, listed, deltas)
        total = sum(listed.values())
        repacked = min(repacked, total)  # git's repack took packs off the list
        busy = set(self._delta_job[1]) if self._delta_job is not None else set()
        if total > repacked + self._delta_after and not busy:
            self._start_deltas(folder, list(listed))
            busy, repacked = set(listed), total
        by_size = sorted((name for name in listed if name not in busy), key=listed.__getitem__)
        roll_up, smaller = 0, 0
        for i, name in enumerate(by_size):
            if listed[name] < 2 * smaller:
                roll_up = i + 1
            smaller += listed[name]
        entries: dict[bytes, tuple[int, bytes]] = {}
        merged = []
        for name in by_size[:roll_up]:
            try:
                found = _whole_entries(folder, name)
            except (OSError, ValueError):
                continue  # gone meanwhile, damaged, or not what memsite writes: left as it is
            for binsha, crc, entry in found:
                entries.setdefault(binsha, (crc, entry))
            merged.append(name)
        kept = []
        for name in gone:
            _remove_pack(folder, name, kept)
        if len(merged) >= 2:
            new = self._store_pack([(binsha, crc, entry) for binsha, (crc, entry) in entries.items()], self._flush_pack)
            for name in merged:
                del listed[name]
                _remove_pack(folder, name, kept)
            listed[new] = len(entries)
        listed.update((name, 0) for name in kept)
        fixed = "".join([*(f"{name} {count} deltas\n" for name, count in deltas.items()),
                         *(f"{line}\n" for line in held.values()), f"repacked {repacked}\n"])
        text = "".join([*(f"{name} {count}\n" for name, count in listed.items()), fixed]).encode("ascii")
        # Lines a merge cannot take in: without this, once there are as many of them as packs to merge
        # at (git's packs with deltas add up until 'git gc' repacks), every write would merge.
        self._not_merged = len(fixed) + sum(len(f"{name} {listed[name]}\n") for name in busy if name in listed)
        with self._list_held():
            try:
                with open(self._listed, "rb") as handle:
                    now = handle.read()
            except FileNotFoundError:
                now = b""
            # The packs listed since it was read (only a merge rewrites it, and this one holds the merge lock).
            since = b"".join(line for line in (now[len(before):] if now.startswith(before) else now).splitlines(True)
                             if line.startswith(b"pack-") and line.endswith(b"\n"))
            # Replaced whole: a kill leaves the old list, whose removed packs are skipped next time.
            files.store(self._listed, f"{self._listed}.tmp_{os.getpid()}", text + since, mode=0o644)

    @contextlib.contextmanager
    def _list_held(self) -> Iterator[None]:
        if not self._list_lock.acquire(LIST_LOCK_SECONDS):
            raise RepositoryError(f"{self._listed}: stayed locked for {LIST_LOCK_SECONDS:.0f} s")
        try:
            yield
        finally:
            self._list_lock.release()

    def close(self) -> None:
        """Close the files its locks hold open."""
        self._list_lock.close()
        self._merge_lock.close()

    @property
    def storing_deltas(self) -> bool:
        """Whether git is storing memsite's objects with deltas (see :meth:`merge_own_packs`)."""
        return self._delta_job is not None

    def wait_for_deltas(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for git's pack with deltas (no lock needed); the next
        :meth:`merge_own_packs` takes it in. Otherwise only this process could: its pack would
        stay beside the packs it replaces until a 'git gc'."""
        if self._delta_job is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._delta_job[0].wait(timeout)

    def _start_deltas(self, folder: str, names: list[str]) -> None:
        """Have ``git pack-objects`` store the objects of ``names`` again, with deltas, in the background.

        Each tree is given with the folder it was written for, so git
        compares it with the earlier versions of that folder. Nothing is
        reused as it is: memsite stores objects whole, and git takes an
        object stored whole in a pack as it is, without looking for a delta.
        """
        ids, fed = [], []
        for name in names:
            with contextlib.suppress(OSError, ValueError):
                ids += _Pack(folder, name).names()
                fed.append(name)  # only packs whose every object git is given are replaced
        try:
            with open(self._names, "rb") as handle:
                listed = handle.read(self._names_listed)
        except FileNotFoundError:
            listed = b""
        folders = dict(line.split(b" ", 1) for line in listed.split(b"\n")[:-1] if b" " in line)  # hex id -> folder
        try:
            job = subprocess.Popen(["git", f"--git-dir={self.dir.parent}", "pack-objects", "-q", "--delta-base-offset",
                                    "--no-reuse-object", f"{folder}/pack"], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=git_environment())
        except OSError:
            return  # no git: the packs stay as they are
        _idle_priority(job.pid)  # (before it is fed: the threads git searches deltas on inherit it)
        assert job.stdin is not None
        threading.Thread(target=_feed, args=(job.stdin, ids, folders), daemon=True).start()
        self._delta_job = (job, fed, len(listed))

    def _collect_deltas(self, folder: str, listed: dict[str, int], deltas: dict[str, int]) -> list[str]:
        """Once git's pack-objects has finished: list its pack, and return the packs it replaces."""
        if self._delta_job is None or self._delta_job[0].poll() is None:
            return []
        (job, names, named), self._delta_job = self._delta_job, None
        assert job.stdout is not None
        made = job.stdout.read().decode("ascii", "replace").strip()
        job.stdout.close()
        if job.returncode != 0 or not os.path.exists(f"{folder}/pack-{made}.idx"):
            return []  # failed: the packs stay, and are tried again later
        deltas[f"pack-{made}"] = 0
        with self._list_held():  # the names git was given are not needed again; those listed since are
            try:
                with open(self._names, "rb") as handle:
                    rest = handle.read()[named:]
                files.store(self._names, f"{self._names}.tmp_{os.getpid()}", rest, mode=0o644)
            except FileNotFoundError:
                pass
        return [name for name in names if listed.pop(name, None) is not None]

    def read(self, binsha: bytes) -> tuple[str, bytes]:
        """Return (kind, data) of an object, loose or packed."""
        try:
            with open(self._path(binsha.hex()), "rb") as handle:
                return _loose_object(handle.read())
        except FileNotFoundError:
            pass
        found = self._from_packs(binsha)
        if found is not None:
            return found
        try:
            stream = self._repo.odb.stream(binsha)
        except Exception as exc:  # gitdb raises BadObject; a closed pipe raises OSError
            raise RepositoryError(f"git object {binsha.hex()} is missing ({exc}); run 'git fsck'") from None
        kind = stream.type.decode() if isinstance(stream.type, bytes) else stream.type
        return kind, stream.read()

    def _from_packs(self, binsha: bytes) -> tuple[str, bytes] | None:
        """(kind, data) from a pack that stores it whole; None if none does (or it is a delta)."""
        if self._batch is not None and binsha in self._batch:
            code, data = self._batch[binsha]
            return _KINDS[code].decode(), data
        for attempt in range(2):
            for pack in self._packs:
                offset = pack.find(binsha)
                if offset is not None:
                    try:
                        return pack.read(offset)
                    except OSError:
                        break  # merged or repacked meanwhile (on Windows, maybe still being removed): look again
            if attempt == 0 and not self._list_packs():
                return None
        return None

    def _list_packs(self) -> bool:
        """Take in the packs added since the last look (and drop removed ones); whether any was new."""
        folder = f"{self._dir}/pack"
        try:
            names = {name[:-4] for name in os.listdir(folder) if name.endswith(".idx")}
        except OSError:
            return False
        known = {pack.name: pack for pack in self._packs if pack.name in names}
        added = []
        for name in names - known.keys():
            with contextlib.suppress(OSError, ValueError):
                added.append(_Pack(folder, name))
        added.sort(key=lambda pack: pack.mtime, reverse=True)
        self._packs = (*added, *known.values())  # replaced whole: a reader on another thread sees one or the other
        return bool(added)

    def read_blobs(self, shas: list[bytes]) -> dict[bytes, bytes]:
        """Many files at once: loose and whole packed ones read directly, the rest through one pipelined cat-file."""
        found: dict[bytes, bytes] = {}
        rest = []
        for binsha in shas:
            try:
                with open(self._path(binsha.hex()), "rb") as handle:
                    found[binsha] = _loose_object(handle.read())[1]
                continue
            except FileNotFoundError:
                pass
            packed = self._from_packs(binsha)
            if packed is not None:
                found[binsha] = packed[1]
            else:
                rest.append(binsha)
        if rest:
            found.update(_cat_file_batch(self.dir.parent, rest))  # objects/ is in the git dir
        return found

    def read_blob(self, binsha: bytes) -> bytes:
        kind, data = self.read(binsha)
        if kind != "blob":
            raise RepositoryError(f"git object {binsha.hex()} is a {kind}, expected a file")
        return data

    # --- trees -------------------------------------------------------------

    def tree(self, binsha: bytes | None, *, was: bytes | None = None) -> Tree:
        """The parsed tree with id ``binsha`` (the empty tree for None); ``was``, an earlier version of the
        same folder: when it is parsed already, only what changed since is parsed (see Tree.reparsed)."""
        if binsha is None:
            return Tree.empty()
        cached = self._trees.get(binsha)
        if cached is not None:
            self._trees.move_to_end(binsha)
            return cached
        data = self._tree_data(binsha)
        earlier = self._trees.get(was) if was is not None and len(data) > LARGE_TREE_BYTES else None
        tree = earlier.reparsed(data) if earlier is not None else None
        if tree is None:
            return self._parsed(binsha, data)
        self._remember_tree(binsha, tree)
        return tree

    def _tree_at(self, folder: str, binsha: bytes | None) -> Tree:
        """The tree ``binsha`` found at the path ``folder``, parsed from the version last found there."""
        was = self._seen_at.get(folder)
        if binsha is not None and binsha != was:
            if len(self._seen_at) > 4096:
                self._seen_at.clear()
            self._seen_at[folder] = binsha
        return self.tree(binsha, was=was)

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

    def write_tree(self, tree: Tree, *, name: str | None = None) -> bytes:
        binsha = self.write(b"tree", tree.serialize(), name=name)
        self._remember_tree(binsha, tree)
        return binsha

    def lookup(self, root: bytes | None, path: str) -> Entry | None:
        """The entry at ``path`` (``a/b/c.md``) under tree ``root``, or None."""
        folder, _, name = path.rpartition("/")
        sha = self._folder(root, folder) if folder else root
        return None if sha is None else self._tree_at(folder, sha).get(name)

    def tree_at(self, root: bytes | None, folder: str) -> Tree | None:
        """The folder at the path ``folder`` (``a/b``) under tree ``root``, or None if there is none."""
        sha = self._folder(root, folder)
        return None if sha is None else self._tree_at(folder, sha)

    def _folder(self, root: bytes | None, folder: str) -> bytes | None:
        # Trees never change, so (root, folder) -> tree id can be remembered;
        # a write looks up the same few folders for each of its files.
        key = (root, folder)
        if key in self._folders:
            return self._folders[key]
        sha, walked = root, ""
        for part in folder.split("/"):
            entry = self._tree_at(walked, sha).get(part) if sha is not None else None
            sha = entry.sha if entry is not None and entry.is_tree else None
            walked = f"{walked}/{part}" if walked else part
        if len(self._folders) > 4096:
            self._folders.clear()
        self._folders[key] = sha
        return sha

    def apply(self, root: bytes | None, changes: Mapping[str, Entry | None], folder: str = "") -> bytes | None:
        """Write the trees for ``root`` with ``changes`` (path -> Entry or None) applied.

        Only the folders on changed paths are rewritten; a folder left empty is
        dropped, as git does. Returns the new root id (None if all is empty).
        ``folder``: the path of ``root`` (the recursion's; see :meth:`write`).
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
            new_sub = self.apply(sub_root, sub, f"{folder}/{name}" if folder else name)
            edits[name] = Entry(MODE_TREE, new_sub) if new_sub is not None else None
        new_tree = tree.edited(edits)
        if not len(new_tree):
            return None
        return self.write_tree(new_tree, name=folder.replace("\n", "_"))

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


def _common_length(a: bytes, b: bytes, limit: int, *, from_end: bool = False, at: tuple[int, int] = (0, 0)) -> int:
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


class _Pack:
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
            kind = _KINDS.get(code)
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


def _keep_of(path: str) -> bytes | None:
    """What a pack's ``.keep`` file says (None: it has none); memsite's say ``memsite <pid>: ...``."""
    try:
        with open(path, "rb") as handle:
            return handle.read(64)
    except FileNotFoundError:
        return None
    except OSError:
        return b""


def _gc_running(git_dir: Path) -> bool:
    """Whether a ``git gc`` is running in this repository (it holds ``gc.pid``, as git itself decides).

    Its repack lists the packs when it starts and reads them later: a pack
    removed meanwhile (merged by memsite) makes it fail ('cannot open pack
    index'), and git then writes ``gc.log`` and runs no automatic gc for a
    day, so the packs pile up. A detached ``git gc --auto``, which memsite's
    writes start now and then, runs while the next writes go on.
    """
    try:
        with open(git_dir / "gc.pid", "rb") as handle:
            if time.time() - os.fstat(handle.fileno()).st_mtime > GC_PID_STALE_SECONDS:
                return False
            pid, _, host = handle.read(256).decode("utf-8", "replace").strip().partition(" ")
    except OSError:
        return False
    if not pid.isdigit():
        return False
    return not locks.is_dead(locks.Owner(int(pid), "-", host))


def _idle_priority(pid: int) -> None:
    """Run git's background maintenance on the time writers leave: at the lowest priority (POSIX).

    ``git pack-objects`` storing thousands of objects with deltas is seconds
    of CPU; on a machine of two cores it would otherwise take one from the
    writers while it runs.
    """
    with contextlib.suppress(AttributeError, OSError):  # (Windows has no setpriority; the process may have ended)
        os.setpriority(os.PRIO_PROCESS, pid, 19)


def _feed(pipe: Any, shas: list[bytes], folders: Mapping[bytes, bytes] | None = None) -> None:
    """Write object ids to a git command's input, a line each (with the folder of a tree, if known), then close it."""
    try:
        lines = []
        for sha in shas:
            hexsha = sha.hex().encode()
            folder = folders.get(hexsha) if folders else None
            lines.append(hexsha + b" " + folder + b"\n" if folder else hexsha + b"\n")
        pipe.write(b"".join(lines))
    except OSError:
        pass  # git ended early: its exit status says so
    finally:
        with contextlib.suppress(OSError):
            pipe.close()


def _remove_pack(folder: str, name: str, kept: list[str]) -> None:
    """Remove one of memsite's packs (its index first: git stops looking in it); ``kept`` gets it if it stays."""
    for suffix in (".idx", ".pack"):
        try:
            os.unlink(f"{folder}/{name}{suffix}")
        except FileNotFoundError:
            pass
        except OSError:  # open elsewhere (Windows): a harmless copy, removed at a later merge
            kept.append(name)
            return


def _whole_entries(folder: str, name: str) -> list[tuple[bytes, int, bytes]]:
    """(id, CRC-32, entry bytes) of every object in a pack that stores them all whole.

    Raises:
        ValueError: the pack holds a delta, is damaged, or is not a version-2 pack.
    """
    index = _Pack(folder, name)
    with open(f"{folder}/{name}.pack", "rb") as handle:
        pack = handle.read()
    if pack[:4] != b"PACK":
        raise ValueError(f"{name}: not a version 2 pack")
    if hashlib.sha1(memoryview(pack)[:-20]).digest() != pack[-20:] or index.pack_checksum() != pack[-20:]:
        raise ValueError(f"{name}: damaged (its checksum does not match)")
    shas, crcs, offsets = index.names(), index.crcs(), index.offsets()
    ends = dict(zip(sorted(offsets), [*sorted(offsets)[1:], len(pack) - 20]))
    entries = []
    for binsha, crc, offset in zip(shas, crcs, offsets):
        if offset & 0x80000000 or not 1 <= (pack[offset] >> 4) & 7 <= 4:
            raise ValueError(f"{name}: holds deltas or large offsets")
        entries.append((binsha, crc, pack[offset : ends[offset]]))
    return entries


def _cat_file_batch(git_dir: Path, shas: list[bytes]) -> dict[bytes, bytes]:
    """Read objects with one ``git cat-file --batch``: requests written by a thread, answers read here."""
    proc = subprocess.Popen(["git", f"--git-dir={git_dir}", "cat-file", "--batch"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=git_environment())
    assert proc.stdin is not None and proc.stdout is not None
    writer = threading.Thread(target=_feed, args=(proc.stdin, shas), daemon=True)
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
