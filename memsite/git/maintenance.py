"""Keeping memsite's own packs few: merging them, and having git store them again with deltas.

A commit's objects go into one small pack (see ``ObjectDatabase.batch``).
memsite lists the packs it writes (``.git/memsite-packs``) and merges them as
they add up, geometrically as ``git repack --geometric`` does but by copying
their entries (a git repack would cost a process and delta searches every few
writes), so their number stays far below the 50 at which ``git gc --auto``
repacks everything; it never touches a pack it did not write. Once they hold
more objects than ``gc.auto``, ``git pack-objects`` stores them again with
deltas in the background, at the lowest priority; once several such packs
add up, git folds them into one, reusing their deltas. Nothing is merged or
removed while a ``git gc`` runs (see :func:`gc_running`), nor while a writer's
pack has its ``.keep`` file (until its branch moves). What writes store
loose while a ``git gc`` runs is packed once it has ended (see
:meth:`PackMaintenance.pack_loose`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from ..foundation.errors import RepositoryError
from . import files, locks
from .commands import feed_ids
from .mutex import SharedLock
from .objects import PACK_TYPES, loose_object
from .pack import PackReader, pack_entry, whole_entries, write_pack
from .settings import Flush, GitSettings, git_environment

PACKS_FILE = "memsite-packs"  # in the git dir: the packs memsite wrote (name, objects), which it alone merges
PACKS_LOCK = "memsite-packs-lock"  # in the git dir: a lock file for that list (linked worktrees share it)
MERGE_LOCK = "memsite-merge-lock"  # in the git dir: held by the process merging memsite's packs
PACK_NAMES = "memsite-pack-names"  # in the git dir: '<id> <folder>' of the trees in memsite's packs (see list_own)
LOOSE_LIST = "memsite-loose"  # in the git dir: '<id> <folder>' of objects memsite stored loose while a git gc ran
PACK_NAMES_LIMIT = 8 << 20  # bytes past which no more names are kept (merges left to git: nothing takes them out)
LIST_LOCK_SECONDS = 30.0
GC_PID_STALE_SECONDS = 12 * 3600  # a gc.pid this old was left by a killed 'git gc' (git's own rule)
MERGE_PACKS = 24  # listed packs from which memsite merges its small ones (git gc --auto repacks all at 50)
FOLD_AT = 8  # git's packs with deltas of memsite's objects from which git folds them (see _fold)

log = logging.getLogger("memsite")


class PackMaintenance:
    """The list of the packs memsite wrote in one repository, and their merges (one process at a time)."""

    def __init__(self, git_dir: Path, settings: GitSettings, flushes: tuple[Flush | None, Flush | None]) -> None:
        self.folder = f"{git_dir}/objects/pack"
        self.git_dir = git_dir
        self._flush_pack = flushes
        self.merge_at = max(2, min(MERGE_PACKS, settings.auto_pack_limit // 2))  # listed packs that make a merge due
        self.delta_after = settings.auto_gc  # objects merged whole past which git stores them with deltas
        self._listed = f"{git_dir}/{PACKS_FILE}"
        self._list_lock = SharedLock(git_dir / PACKS_LOCK)  # taken briefly: to add a pack, or rewrite the list
        self._merge_lock = SharedLock(git_dir / MERGE_LOCK)  # held by the one merge at a time
        self._merge_due = False
        # Bytes of the list's lines that are no packs to merge (git's packs with deltas, a pack git is storing
        # with deltas, the 'repacked' line), as this process last found them: not counted towards a merge.
        self._not_merged = 0
        # git pack-objects, the packs it was given, and the bytes of the names file it was given
        self._delta_job: tuple[subprocess.Popen[bytes], list[str], int] | None = None
        self._names = f"{git_dir}/{PACK_NAMES}"
        self._names_listed = 0  # bytes of the names file when the list was last read to merge
        self._loose = f"{git_dir}/{LOOSE_LIST}"
        self._level = settings.loose_compression

    def list_own(self, name: str, count: int, folders: Mapping[bytes, str]) -> None:
        """Add a pack memsite wrote to its list (a merge rewriting the list meanwhile keeps the line).

        The folders its trees were written for go to a list of their own
        (``memsite-pack-names``): git finds the earlier versions of a tree
        to store it as a delta of by its path, which a list of ids alone
        does not give (a store of 20,000 memories written one by one: 27 KB
        per write stored with deltas without the names, 1.1 KB with them).
        """
        line = f"{name} {count}\n".encode()
        try:
            with self._list_held():
                self._merge_due = _append(self._listed, line) >= self._not_merged + self.merge_at * len(line)
                if folders:
                    _append(self._names, _named_lines(folders), limit=PACK_NAMES_LIMIT)
        except RepositoryError as exc:  # (the list's lock stayed taken)
            log.warning("%s; pack %s is left to git's maintenance", exc, name)

    def note_loose(self, created: Mapping[bytes, str]) -> None:
        """List objects a write stored loose while a git gc ran (``{id: the folder of a tree, or ''}``) for
        :meth:`pack_loose`: only files memsite created are listed (and later removed)."""
        try:
            with self._list_held():
                _append(self._loose, _named_lines(created))
        except RepositoryError as exc:
            log.warning("%s; %d loose object(s) are left to git's maintenance", exc, len(created))

    def maintain(self) -> None:
        """Merge memsite's small packs once enough are listed, and pack what writes stored loose while a
        git gc ran once it has ended (after a commit; no lock needed)."""
        if os.path.exists(self._loose):
            self.pack_loose()
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
            if gc_running(self.git_dir):
                return  # it lists the packs as it starts: one removed meanwhile fails it (see gc_running)
            self._merge()
        finally:
            self._merge_lock.release()

    def pack_loose(self) -> None:
        """Store the objects memsite's writes left loose while a ``git gc`` ran in one pack of memsite's
        list (merged and stored with deltas as the others), and remove those loose files.

        While a gc runs, writes store their objects loose (see
        ``ObjectDatabase.batch``). A gc of a large store runs for seconds while
        agents go on writing: thousands of loose files, stored uncompressed,
        more than ``gc.auto`` (8,304 after 30,000 writes into one month).
        git's gc then ends with "too many unreachable loose objects", writes
        ``gc.log`` and runs no automatic gc for a day, and they stayed loose
        until then. Done once no gc runs, by one process at a time (the
        merge lock); a file gone meanwhile (the gc packed it) is skipped. A
        kill at any point leaves each object loose, packed, or both (the
        next call, or git's ``prune-packed``, removes the loose copy).
        """
        if gc_running(self.git_dir) or not self._merge_lock.acquire(0):
            return
        try:
            if gc_running(self.git_dir):
                return
            with self._list_held():
                try:
                    with open(self._loose, "rb") as handle:
                        listed = handle.read()
                except FileNotFoundError:
                    return
            folders: dict[bytes, str] = {}
            for line in listed.splitlines():
                hexsha, _, folder = line.partition(b" ")
                with contextlib.suppress(ValueError):
                    folders[bytes.fromhex(hexsha.decode("ascii"))] = folder.decode("utf-8", "replace")
            entries, packed = [], []
            for binsha in folders:
                path = f"{self.git_dir}/objects/{binsha.hex()[:2]}/{binsha.hex()[2:]}"
                try:
                    with open(path, "rb") as handle:
                        kind, data = loose_object(handle.read())
                except (OSError, ValueError):  # packed by the gc (which removed the file), or damaged: git's
                    continue
                entries.append((binsha, *pack_entry(PACK_TYPES[kind.encode()], data, self._level)))
                packed.append((binsha, path))
            if entries:
                name = write_pack(self.folder, entries, self._flush_pack)
                self.list_own(name, len(entries), {sha: folders[sha] for sha, _ in packed if folders[sha]})
                for _, path in packed:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path)
            with self._list_held():  # the objects listed since (a gc started again meanwhile) wait their turn
                with open(self._loose, "rb") as handle:
                    rest = handle.read()[len(listed):]
                if rest:
                    files.store(self._loose, f"{self._loose}.tmp_{os.getpid()}", rest, mode=0o644)
                else:
                    os.unlink(self._loose)
        finally:
            self._merge_lock.release()

    def _merge(self) -> None:
        folder = self.folder
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
        # packs git wrote with deltas from memsite's: never merged here; folded by git (see _fold), the tag
        # of the process folding them if one is ('' if none)
        deltas: dict[str, str] = {}
        held: dict[str, str] = {}  # packs a writer keeps until its branch moves (see release): listed as they are
        repacked = 0  # objects listed when git last repacked them (a line 'repacked <n>')
        for line in before.split(b"\n"):
            name, _, rest = line.decode("ascii", "replace").strip().partition(" ")
            count, _, mark = rest.partition(" ")
            if name == "repacked" and count.isdigit():
                repacked = int(count)
            elif name.startswith("pack-") and count.isdigit() and os.path.exists(f"{folder}/{name}.idx"):
                kept_by = keep_of(f"{folder}/{name}.keep")
                if kept_by is None:
                    mark, _, folded_by = mark.partition(" ")
                    if mark == "deltas":
                        deltas[name] = folded_by
                    else:
                        listed[name] = int(count)
                elif kept_by.startswith(b"memsite "):  # a writer's, until its branch moves: merged later
                    held[name] = line.decode("ascii", "replace").strip()
        gone = self._collect_deltas(folder, listed, deltas)
        total = sum(listed.values())
        repacked = min(repacked, total)  # git's repack took packs off the list
        busy = set(self._delta_job[1]) if self._delta_job is not None else set()
        if total > repacked + self.delta_after and not busy:
            self._start_deltas(folder, list(listed))
            busy, repacked = set(listed), total
        elif not busy:
            self._fold(folder, deltas)
        entries: dict[bytes, tuple[int, bytes]] = {}
        merged = []
        rolled_up = set(roll_up({name: count for name, count in listed.items() if name not in busy}))
        for name in (name for name in listed if name in rolled_up):  # oldest first (see _start_deltas)
            try:
                found = whole_entries(folder, name)
            except (OSError, ValueError):
                continue  # gone meanwhile, damaged, or not what memsite writes: left as it is
            for binsha, crc, entry in found:
                entries.setdefault(binsha, (crc, entry))
            merged.append(name)
        kept: list[str] = []
        for name in gone:
            remove_pack(folder, name, kept)
        if len(merged) >= 2:
            new = write_pack(folder, [(binsha, crc, entry) for binsha, (crc, entry) in entries.items()],
                             self._flush_pack)
            for name in merged:
                del listed[name]
                remove_pack(folder, name, kept)
            listed[new] = len(entries)
        listed.update((name, 0) for name in kept)
        fixed = "".join([*(f"{name} 0 deltas {by}".rstrip() + "\n" for name, by in deltas.items()),
                         *(f"{line}\n" for line in held.values()), f"repacked {repacked}\n"])
        text = "".join([*(f"{name} {count}\n" for name, count in listed.items()), fixed]).encode("ascii")
        # Lines a merge cannot take in: without this, once there are as many of them as packs to merge
        # at (git's packs with deltas, up to FOLD_AT and more while git folds some), every write would merge.
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

    @property
    def delta_process(self) -> subprocess.Popen[bytes] | None:
        """The ``git pack-objects`` storing memsite's objects with deltas, while this process runs one."""
        return self._delta_job[0] if self._delta_job is not None else None

    def wait_for_deltas(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for git's pack with deltas (no lock needed); the next
        :meth:`merge_own_packs` takes it in. Otherwise only this process could: its pack would
        stay beside the packs it replaces (or folds) until a 'git gc'."""
        if self._delta_job is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._delta_job[0].wait(timeout)

    def _start_deltas(self, folder: str, names: list[str], fold: bool = False) -> list[str]:
        """Have ``git pack-objects`` store the objects of ``names`` again, with deltas, in the background;
        the packs it is given (those it replaces once done: every one that could be read), [] if it did not start.

        Each tree is given with the folder it was written for, so git
        compares it with the earlier versions of that folder, and in the
        order written (packs oldest first, as merges keep them): git's delta
        window then holds a folder's consecutive versions, which differ by
        an id or two. (In id order its neighbours were versions apart, and
        the small folders written at every commit, such as
        ``content/memories``, were stored whole.) Nothing is
        reused as it is: memsite stores objects whole, and git takes an
        object stored whole in a pack as it is, without looking for a delta.
        ``fold``: ``names`` are git's packs with deltas, folded into one (see :meth:`_fold`).
        """
        ids, fed = [], []
        for name in names:
            with contextlib.suppress(OSError, ValueError):
                ids += PackReader(folder, name).names_in_pack_order()
                fed.append(name)  # only packs whose every object git is given are replaced
        listed = b""
        if not fold:
            with contextlib.suppress(FileNotFoundError), open(self._names, "rb") as handle:
                listed = handle.read(self._names_listed)
        folders = dict(line.split(b" ", 1) for line in listed.split(b"\n")[:-1] if b" " in line)  # hex id -> folder
        try:
            job = subprocess.Popen(["git", f"--git-dir={self.git_dir}", "pack-objects", "-q", "--delta-base-offset",
                                    *(["--window=0"] if fold else ["--no-reuse-object"]), f"{folder}/pack"],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                   env=git_environment())
        except OSError:
            return []  # no git: the packs stay as they are
        idle_priority(job.pid)  # (before it is fed: the threads git searches deltas on inherit it)
        assert job.stdin is not None
        threading.Thread(target=feed_ids, args=(job.stdin, ids, folders), daemon=True).start()
        self._delta_job = (job, fed, len(listed))
        return fed

    def _fold(self, folder: str, deltas: dict[str, str]) -> None:
        """Have git fold its packs with deltas of memsite's objects into one, in the background, once
        :data:`FOLD_AT` of them add up: the smallest, geometrically as merges go.

        Each of git's runs storing memsite's objects with deltas leaves a
        pack (one per ``gc.auto`` objects written: 120 for 100,000 writes).
        Unfolded, they reached the 50 packs at which ``git gc --auto``
        repacks everything: for many seconds in a large store, while writes
        store their objects loose (see ``ObjectDatabase.batch``); that gc then
        ended with "too many unreachable loose objects" and wrote
        ``gc.log``, and git's automatic gc stayed off for a day. Folding
        reuses their deltas and searches no new ones (``--window=0``: what
        they hold whole found no delta when it was written, and git is not
        told the folders again), so it costs git about a copy of their
        bytes, a fifth of the CPU a search took. The packs being folded are
        marked on the list with this process's tag, so no other process
        folds them meanwhile (a mark of a process that has ended is ignored).
        """
        free = {}
        for name, by in deltas.items():
            owner = locks.Owner.from_tag(by)
            if owner is None or locks.is_dead(owner):
                with contextlib.suppress(OSError):
                    free[name] = os.stat(f"{folder}/{name}.pack").st_size
        chosen = roll_up(free) if len(free) >= FOLD_AT else []
        if len(chosen) >= 2:  # marked: the packs git is given, whose marks are taken off if it fails
            tag = locks.current_owner().tag()
            deltas.update((name, tag) for name in self._start_deltas(folder, chosen, fold=True))

    def _collect_deltas(self, folder: str, listed: dict[str, int], deltas: dict[str, str]) -> list[str]:
        """Once git's pack-objects has finished: list its pack, and return the packs it replaces."""
        if self._delta_job is None or self._delta_job[0].poll() is None:
            return []
        (job, names, named), self._delta_job = self._delta_job, None
        assert job.stdout is not None
        made = job.stdout.read().decode("ascii", "replace").strip()
        job.stdout.close()
        if job.returncode != 0 or not os.path.exists(f"{folder}/pack-{made}.idx"):
            deltas.update((name, "") for name in names if name in deltas)  # (a fold's mark taken off)
            return []  # failed: the packs stay, and are tried again later
        deltas[f"pack-{made}"] = ""
        if named:  # the names git was given are not needed again; those listed since are
            with self._list_held(), contextlib.suppress(FileNotFoundError):
                with open(self._names, "rb") as handle:
                    rest = handle.read()[named:]
                files.store(self._names, f"{self._names}.tmp_{os.getpid()}", rest, mode=0o644)
        return [name for name in names if listed.pop(name, None) is not None or deltas.pop(name, None) is not None]


def roll_up(sizes: Mapping[str, int]) -> list[str]:
    """The packs to merge of ``sizes`` (name: size), as ``git repack --geometric=2`` chooses: the smallest,
    until every pack left is at least twice the size of all smaller ones together."""
    by_size = sorted(sizes, key=sizes.__getitem__)
    count, smaller = 0, 0
    for i, name in enumerate(by_size):
        if sizes[name] < 2 * smaller:
            count = i + 1
        smaller += sizes[name]
    return by_size[:count]


def _append(path: str, data: bytes, limit: int | None = None) -> int:
    """Append ``data`` to one of memsite's lists (unless it holds ``limit`` bytes already); its size then."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | files.BINARY, 0o644)
    try:
        size = os.fstat(fd).st_size
        if limit is None or size < limit:
            files.write_all(fd, data)
            size += len(data)
        return size
    finally:
        os.close(fd)


def _named_lines(folders: Mapping[bytes, str]) -> bytes:
    """``<id> <folder>`` lines, as the names and loose lists hold them."""
    return "".join(f"{sha.hex()} {folder}\n" for sha, folder in folders.items()).encode("utf-8", "replace")


def keep_of(path: str) -> bytes | None:
    """What a pack's ``.keep`` file says (None: it has none); memsite's say ``memsite <pid>: ...``."""
    try:
        with open(path, "rb") as handle:
            return handle.read(64)
    except FileNotFoundError:
        return None
    except OSError:
        return b""


def gc_running(git_dir: Path) -> bool:
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


def idle_priority(pid: int) -> None:
    """Run git's background maintenance on the time writers leave: at the lowest priority (POSIX).

    ``git pack-objects`` storing thousands of objects with deltas is seconds
    of CPU; on a machine of two cores it would otherwise take one from the
    writers while it runs.
    """
    with contextlib.suppress(AttributeError, OSError):  # (Windows has no setpriority; the process may have ended)
        os.setpriority(os.PRIO_PROCESS, pid, 19)


def remove_pack(folder: str, name: str, kept: list[str]) -> None:
    """Remove one of memsite's packs (its index first: git stops looking in it); ``kept`` gets it if it stays."""
    for suffix in (".idx", ".pack"):
        try:
            os.unlink(f"{folder}/{name}{suffix}")
        except FileNotFoundError:
            pass
        except OSError:  # open elsewhere (Windows): a harmless copy, removed at a later merge
            kept.append(name)
            return

