"""The objects of one repository: written in batches (a commit's in one pack) or loose, read, and trees cached.

Why its own writer rather than a general git library's (GitPython's index
rewrites the whole index at every commit; dulwich was measured, see
docs/benchmarks.md): a commit here writes one blob per changed file and one tree per folder on the
changed path (the other trees are reused by id), so a write to a repo of
10,000 memories costs little more than one to an empty one.

A commit's objects (seven for one memory) go into one small pack: two files
instead of seven, and creating a file is most of what a write costs the
kernel. Those packs are merged as they add up (see :mod:`memsite.git.maintenance`).
With ``gc.auto`` or ``gc.autoPackLimit`` set to 0 (maintenance left to
someone else), objects are written loose instead, as git writes them.

Objects are read from loose files and from packs directly (objects stored
whole, as memsite stores them and git stores many); a delta, or an object
found nowhere here (an alternate), goes through a persistent ``git cat-file``
process (see :class:`memsite.git.commands.CatFile`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import zlib
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from pathlib import Path

from ..foundation.errors import RepositoryError
from . import files
from .commands import CatFile, Git
from .maintenance import PackMaintenance, gc_running
from .objects import (
    KINDS,
    LARGE_TREE_BYTES,
    MODE_TREE,
    PACK_TYPES,
    Entry,
    Tree,
    changed_window,
    is_large_tree,
    loose_object,
    object_id,
)
from .pack import PackReader, encode_pack, pack_entry, store_keep, store_pack
from .settings import Flush, GitSettings

PACK_THRESHOLD = 64  # objects in one write from which a pack beats loose files when git's maintenance is off
_tmp_counter = itertools.count()


class ObjectDatabase:
    """Reads and writes objects of one repository; caches parsed trees by id."""

    def __init__(self, objects_dir: Path, settings: GitSettings | None = None) -> None:
        self.dir = objects_dir
        self._dir = str(objects_dir)
        self._cat_file = CatFile(objects_dir.parent)  # (objects/ is in the git dir) for deltas and alternates
        settings = settings or GitSettings()
        self._level = settings.loose_compression
        # A commit's pack stands for its loose objects: flushed as they would be (git flushes packs
        # by default because repacking deletes what they replace; a commit's pack replaces nothing).
        self._flush_loose = settings.flush("loose-object")
        self._flush_pack = (settings.flush("pack"), settings.flush("pack-metadata"))
        self._flush_commit = (self._flush_loose, self._flush_loose)
        self._packing = settings.maintained
        self.maintenance = PackMaintenance(objects_dir.parent, settings, self._flush_pack)
        self._batch: dict[bytes, tuple[int, bytes]] | None = None
        self._batch_names: dict[bytes, str] = {}  # folder of each tree in the batch
        self._held: list[str] = []  # packs with a .keep until their branch moves (see release)
        self._packs: tuple[PackReader, ...] = ()  # newest first
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
        if len(objects) == 1:
            [(binsha, (code, data))] = objects.items()
            self._store_loose(binsha, KINDS[code], data)
        elif objects and gc_running(self.dir.parent):
            # While a 'git gc' runs, loose files, as git's own commands write: it rescans the packs as it
            # goes, and a pack whose index it lists before the pack itself (written meanwhile) it takes for
            # garbage and removes that index when it ends (seen at 30,000 and 74,000 writes into a month).
            # memsite packs them once the gc has ended (PackMaintenance.pack_loose).
            created = {binsha: names.get(binsha, "") for binsha, (code, data) in objects.items()
                       if self._store_loose(binsha, KINDS[code], data)}
            if created:
                self.maintenance.note_loose(created)
        elif objects:
            name = self._write_pack([(binsha, code, data) for binsha, (code, data) in objects.items()],
                                    self._flush_commit, keep=True)
            self.maintenance.list_own(name, len(objects), names)

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
        binsha = object_id(kind, data)
        if self._batch is not None:
            self._batch[binsha] = (PACK_TYPES[kind], data)
            if name:
                self._batch_names[binsha] = name
            return binsha
        self._store_loose(binsha, kind, data)
        return binsha

    def _store_loose(self, binsha: bytes, kind: bytes, data: bytes) -> bool:
        """Store one object as a loose file; False when it was there already (its time refreshed)."""
        path = self._path(binsha.hex())
        folder = os.path.dirname(path)
        try:
            # Already there: refresh its time as git does ('freshen'), or a
            # 'git gc' running meanwhile may prune it as an old unreachable
            # object while the new commit points at it.
            os.utime(path)
            return False
        except OSError:
            pass  # not loose here (or not ours to touch): write it loose
        # Written to a temporary name then renamed: a kill leaves a tmp_obj_*
        # file (git's own prefix, removed by git gc), never a truncated object.
        level = 0 if is_large_tree(kind, data) else self._level
        compressed = zlib.compress(b"%s %d\x00%s" % (kind, len(data), data), level)
        files.store(path, f"{folder}/tmp_obj_{os.getpid()}_{next(_tmp_counter)}", compressed, mode=0o444,
                    flush=self._flush_loose)
        return True

    def write_many(self, kind: bytes, items: list[bytes]) -> list[bytes]:
        """Store several objects of one kind; many at once go into one pack file.

        Thousands of loose files cost a file creation each and slow git down
        until ``git gc``; a pack is one file, as ``git fast-import`` writes.
        """
        if self._batch is not None or len(items) < PACK_THRESHOLD or gc_running(self.dir.parent):
            return [self.write(kind, data) for data in items]
        code = PACK_TYPES[kind]
        shas = [object_id(kind, data) for data in items]
        objects = dict(zip(shas, items))
        self._write_pack([(binsha, code, data) for binsha, data in objects.items()], self._flush_pack)
        return shas

    def _write_pack(self, objects: list[tuple[bytes, int, bytes]], flushes: tuple[Flush | None, Flush | None],
                    keep: bool = False) -> str:
        """Write ``objects`` (id, type code, data) as one pack, each stored whole (no deltas); its name."""
        entries = [(binsha, *pack_entry(code, data, self._level)) for binsha, code, data in objects]
        folder = f"{self._dir}/pack"
        name, pack, idx = encode_pack(entries)
        if keep:  # (before the index: git never sees the pack without it) until release()
            self._held.append(name)
            store_keep(folder, name, f"memsite {os.getpid()}: until its branch moves\n".encode())
        store_pack(folder, name, pack, idx, flushes)
        return name

    def close(self) -> None:
        """End its ``git cat-file`` and close the files the locks of its pack maintenance hold open."""
        self._cat_file.close()
        self.maintenance.close()

    def read(self, binsha: bytes) -> tuple[str, bytes]:
        """Return (kind, data) of an object, loose or packed."""
        try:
            with open(self._path(binsha.hex()), "rb") as handle:
                return loose_object(handle.read())
        except FileNotFoundError:
            pass
        found = self._from_packs(binsha)
        if found is not None:
            return found
        return self._cat_file.read(binsha)

    def _from_packs(self, binsha: bytes) -> tuple[str, bytes] | None:
        """(kind, data) from a pack that stores it whole; None if none does (or it is a delta)."""
        if self._batch is not None and binsha in self._batch:
            code, data = self._batch[binsha]
            return KINDS[code].decode(), data
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
                added.append(PackReader(folder, name))
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
                    found[binsha] = loose_object(handle.read())[1]
                continue
            except FileNotFoundError:
                pass
            packed = self._from_packs(binsha)
            if packed is not None:
                found[binsha] = packed[1]
            else:
                rest.append(binsha)
        if rest:
            git_dir = self.dir.parent  # objects/ is in the git dir
            for binsha, answer in zip(rest, Git(git_dir, git_dir=git_dir).cat_file(rest)):
                if answer is None:
                    raise RepositoryError(f"git object {binsha.hex()} is missing; run 'git fsck'")
                found[binsha] = answer[1]
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
            if new_sub is not None:
                edits[name] = Entry(MODE_TREE, new_sub)
            elif sub_root is not None and name not in direct:
                edits[name] = None  # a folder left empty goes; a file of that name stays, or is what direct says
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

    def diff(self, old: bytes | None, new: bytes | None,
             prefix: str = "") -> Iterator[tuple[str, Entry | None, Entry | None]]:
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
            a_tree = a.sha if a is not None and a.is_tree else None
            b_tree = b.sha if b is not None and b.is_tree else None
            if a_tree is not None or b_tree is not None:
                yield from self.diff(a_tree, b_tree, path + "/")
            if (a is not None and a_tree is None) or (b is not None and b_tree is None):
                yield path, (None if a_tree is not None else a), (None if b_tree is not None else b)

    def _changed_entries(self, old: bytes | None, new: bytes | None) -> tuple[dict[str, Entry], dict[str, Entry]]:
        """The entries of each tree that the other lacks (or has differently), by name."""
        if old is None or new is None:
            old_tree, new_tree = self.tree(old), self.tree(new)
        else:
            old_data, new_data = self._tree_data(old), self._tree_data(new)
            if min(len(old_data), len(new_data)) > LARGE_TREE_BYTES:
                window = changed_window(old_data, new_data)
                if window is not None:
                    return window
            old_tree, new_tree = self._parsed(old, old_data), self._parsed(new, new_data)
        return old_tree.difference(new_tree)

