"""The checked-out branch's working tree and index, brought along by a write under git's ``index.lock``.

A write to the checked-out branch takes ``index.lock`` as ``git commit``
does, and reads there whether the index and the working tree are the
branch's: HEAD naming the branch is not enough (see :meth:`Checkout.commit_locked`).
A person's git command caught between writing the index and moving a ref is
waited for; files a ``git checkout`` racing a write left behind are brought
forward; a file with edits of the person's own is refused, never overwritten.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ..foundation.errors import InvalidInput, RepositoryError
from . import index as gitindex
from .commits import WRITER_DOMAIN, Commits
from .locks import LockFile, Locks
from .object_database import ObjectDatabase
from .objects import blob_id
from .refs import RefMoved, Refs
from .settings import GitSettings
from .worktree import (
    Background,
    FilesAhead,
    IndexUpdate,
    Journal,
    atomic_write,
    remove_file,
    restore,
    sweep_ahead,
    sweep_index_copies,
)

log = logging.getLogger("memsite")

LISTED_FILES = 16  # files in one commit from which the working tree is checked by listing folders
BACKGROUND_FILES = 64  # files in one commit from which the working tree is written on a second thread
CATCH_UP_COMMITS = 64  # how far back an index left behind by a 'git checkout' racing a write is looked for
SETTLE_POLL_SECONDS = 0.02  # how often a write waiting for a person's git command to end looks again


class Checkout:
    """The working tree and index of one worktree, as memsite's writes keep them in step with its branch."""

    def __init__(self, root: Path, git_dir: Path, common_dir: Path, state_dir: Path, *, objects: ObjectDatabase,
                 commits: Commits, refs: Refs, locks: Locks, journal: Journal, settings: GitSettings) -> None:
        self.root = root
        self.state_dir = state_dir
        self.git_dir = git_dir
        self.common_dir = common_dir
        self.objects = objects
        self.commits = commits
        self.refs = refs
        self.locks = locks
        self.journal = journal
        self.settings = settings
        self._index_left: tuple[int, int, int] | None = None  # os.stat of the index this process last wrote

    def recover(self) -> None:
        """Finish or undo the working-tree part of a write whose writer died.

        The branch is the truth: each path the journal lists is made to match
        the checked-out commit, in the working tree and in the index. The
        dead writer's ``index.lock`` was taken back by ``locks.sweep`` first;
        the live index was never touched (the new one was still in that lock).
        If that branch is no longer checked out, the files belong to the
        branch a person checked out since, and are left as they are.
        """
        sweep_ahead(self.state_dir)
        finished = self.journal.finished()
        if finished is not None and finished == self.refs.head_target():
            return  # the last write finished, and its branch is still checked out: nothing to repair or take back
        record = self.journal.read()
        self._take_back_left_behind(record)
        ref, paths = self.journal.pending_write(record)
        if paths:
            sweep_index_copies(self.git_dir)
            if ref is None or self.refs.head_target() == ref:
                self.match_head(paths)
            else:
                log.warning("a write to %s was interrupted while it was checked out; it no longer is, so its "
                            "%d file(s) in the working tree were left as they are", ref, len(paths))
            self.journal.end()

    def _take_back_left_behind(self, record: object) -> None:
        """Undo, in a checkout of another branch, what the last write left for its own branch.

        ``git checkout`` writes HEAD after it releases ``index.lock``. A write
        between the two, to a branch with the same tree as the one being
        checked out, cannot tell the index apart and updates it and the files
        for its own branch; the checkout then leaves them staged there.
        """
        ref, wrong = self.left_in_another_checkout(record)
        if ref is None:
            return
        if wrong:
            log.warning("a write to %s met a checkout of %s: %d file(s) it left there put back", ref,
                        self.refs.head_target(), len(wrong))
            self.match_head(wrong)
        self.journal.end()

    def left_in_another_checkout(self, record: object = None) -> tuple[str | None, list[str]]:
        """(the branch, the paths) the last write left in the working tree of a branch no longer checked out.

        A path counts while it still holds what the write put there and the
        checked-out commit has it otherwise. (None, []) while the write's
        branch is still checked out, or HEAD is detached.
        """
        ref, left = self.journal.left_behind(record)
        head = self.refs.head_target()
        if ref is None or head == ref or head is None:
            return None, []
        tree = self.commits.root_tree(self.refs.read(head))
        wrong = []
        for path, blob in left.items():
            try:
                on_disk: str | None = blob_id((self.root / path).read_bytes()).hex()
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                on_disk = None
            entry = self.objects.lookup(tree, path)
            if on_disk == blob and (entry.sha.hex() if entry is not None else None) != blob:
                wrong.append(path)
        return ref, wrong

    def match_head(self, paths: list[str], lock: LockFile | None = None) -> None:
        """Put ``paths`` back to the checked-out commit; the index through ``lock`` (taken here if None)."""
        own = lock is None
        held = self.locks.acquire(self.git_dir / "index") if lock is None else lock
        try:
            ref = self.refs.head_target()
            tree = self.commits.root_tree(self.refs.read(ref) if ref else None)
            files: dict[str, bytes | None] = {}
            for rel in paths:
                entry = self.objects.lookup(tree, rel)
                files[rel] = self.objects.read_blob(entry.sha) if entry is not None and not entry.is_tree else None
            restore(self.root, self.git_dir, held, files)
            if own:
                held.commit(self.settings.flush("index"))
        finally:
            if own:
                held.rollback()

    def commit_locked(
        self,
        ref: str,
        parent: str | None,
        files: Mapping[str, bytes | None],
        base: bytes | None,
        build: Callable[[], str | None],
        move: Callable[[str], None],
        owned: Mapping[str, bytes] | None,
        ahead: FilesAhead | None,
    ) -> str | None:
        """The part of :meth:`Repository.commit` done under git's ``index.lock``: the branch moves (and the index and
        working tree with it, when checked out)."""
        # As 'git commit' does: HEAD, the branch and the index stay as they
        # are read here until the new index is renamed into place, so a
        # person's 'git checkout' (which takes index.lock too) never
        # interleaves with the write.
        hook = self._hook_index()
        if hook is not None and hook.name != "index":  # the command running this hook holds index.lock till it ends
            self._refuse_in_hook()
        while True:
            lock = self.locks.acquire(self.git_dir / "index")
            try:
                if self.refs.read(ref) != parent:
                    raise RefMoved(f"{ref} moved while the write waited for {self.locks.show(lock.path)}")
                catch_up = self._checked_out(ref, base, parent)
                if catch_up is None:  # the ref's compare-and-swap is all it takes
                    sha = build()
                    if sha is not None:
                        move(sha)
                    return sha
                self._refuse_unsaved_edits(base, files, owned or {})
                return self._commit_checked_out(ref, {**catch_up, **files}, build, move, lock, ahead)
            except _Unsettled as unsettled:
                seen, until = self._checkout_state(ref), unsettled.until
            finally:
                lock.rollback()  # nothing once committed
            while self._checkout_state(ref) == seen and time.time() < until:
                time.sleep(SETTLE_POLL_SECONDS)

    def _hook_index(self) -> Path | None:
        """The index a ``git commit`` running this process as its hook commits from, if it is this repository's.

        git names it in ``GIT_INDEX_FILE`` for its hooks (relative to the top
        of the worktree): ``index`` for a commit of what is staged (written,
        its lock let go), ``index.lock`` or a ``next-index-<pid>.lock`` while
        it holds the lock; None once that lock is gone (a process a hook left
        running) or for any other index a script names.
        """
        named = os.environ.get("GIT_INDEX_FILE")
        if not named:
            return None
        path = Path(named)
        if not path.is_absolute():
            try:
                root, here = os.path.realpath(self.root), os.path.realpath(os.getcwd())
                inside = os.path.commonpath([root, here]) == root  # else it is another repository's hook
            except (OSError, ValueError):  # (the current folder removed, or on another drive: not this one's)
                return None
            path = (self.root if inside else Path(here)) / path
        if os.path.realpath(path.parent) != os.path.realpath(self.git_dir):
            return None
        if path.name == "index" or (_HOOK_LOCK.fullmatch(path.name) is not None and path.exists()):
            return path
        return None

    def _refuse_in_hook(self) -> None:
        raise RepositoryError(f"{self.root}: cannot write from a hook of the 'git commit' running there "
                              f"(GIT_INDEX_FILE={os.environ.get('GIT_INDEX_FILE')}): its commit lands after the hook "
                              "returns; write from a post-commit hook instead (nothing was written)")

    def _pending_since(self, ref: str, index: os.stat_result) -> float | None:
        """When a ``git commit`` that may still move ``ref`` last showed itself; None if none can be pending.

        It writes the index before its hooks run (unless it is unchanged) and
        ``COMMIT_EDITMSG`` before the editor and the commit-msg hook, then
        moves the branch: files written before the branch last moved (a
        ``git reset --soft``, a commit of some of the staged paths) were left
        by a command that has ended.
        """
        try:
            moved = os.stat(self.common_dir / ref).st_mtime_ns
        except OSError:
            moved = 0  # (packed, or gone: no telling)
        written = [index.st_mtime_ns]
        with contextlib.suppress(OSError):
            written.append(os.stat(self.git_dir / "COMMIT_EDITMSG").st_mtime_ns)
        # (A commit ending writes both within a clock tick; one pending wrote its files well after the branch moved.)
        since = [ns for ns in written if ns > moved]
        return max(since) / 1e9 if since else None

    def _checkout_state(self, ref: str) -> tuple[object, ...]:
        """What a person's git command changes as it ends: HEAD, the branch and the index file."""
        try:
            st = os.stat(self.git_dir / "index")
            index: tuple[int, ...] | None = (st.st_ino, st.st_size, st.st_mtime_ns)
        except FileNotFoundError:
            index = None
        return self.refs.head_target(), self.refs.read(ref), index

    def _checked_out(self, ref: str, base: bytes | None, parent: str | None) -> dict[str, bytes | None] | None:
        """Under index.lock: None if the index and working tree are not ``ref``'s; else the files they lag behind by.

        HEAD naming ``ref`` is not enough. An index whose cache-tree vouches
        for a tree that is not the branch's may have been left behind by a
        ``git checkout`` that read the branch just before a write moved it
        (brought forward here: the paths of those commits whose working file
        is still as the older commit has it; see _left_by_checkout), or hold
        a person's staged changes (the file the last commit added, removed
        again), or a git command is between writing the index and moving a
        ref, with no lock held:
        ``git checkout`` writes the index, then HEAD; a plain ``git commit``
        of staged changes writes the index, runs its hooks and editor, then
        moves the branch, and fails if it moved meanwhile. That raises
        _Unsettled: the caller waits for the command to end, until what it
        wrote last (see _pending_since) is ``lock_timeout`` old. An index that
        old is taken as one with changes
        staged (left by a commit its hook refused, say): the write goes into it,
        as into one no commit can be pending on (see _pending_since).
        """
        if self.refs.head_target() != ref:
            return None
        try:
            st = os.stat(self.git_dir / "index")
        except FileNotFoundError:
            return {}
        if (st.st_ino, st.st_size, st.st_mtime_ns) == self._index_left:
            return {}  # as this process left it
        tree = gitindex.cached_tree(self.git_dir)
        if tree is None or tree == base or base is None or parent is None:
            return {}
        behind = self._left_by_checkout(parent, tree)
        if behind is None:
            pending = self._pending_since(ref, st)
            if pending is None:
                return {}  # staged after a commit ('git reset --soft', a partial commit): nothing pending
            age = time.time() - pending
            if 0 <= age < self.locks.timeout:  # (a time ahead of this clock's, on a shared disk: no telling)
                if self._hook_index() is not None:  # the command to wait for is waiting for this hook
                    self._refuse_in_hook()
                raise _Unsettled(pending + self.locks.timeout)
            log.warning("the index of %s has been for another tree for %.0f s (a 'git commit' waiting in its hook "
                        "or editor will fail and need running again): writing through it", ref, age)
            return {}
        files: dict[str, bytes | None] = {}
        for path, old, new in self.objects.diff(tree, base):
            try:
                on_disk: bytes | None = (self.root / path).read_bytes()
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                on_disk = None
            if (blob_id(on_disk) if on_disk is not None else None) == (old.sha if old is not None else None):
                files[path] = self.objects.read_blob(new.sha) if new is not None else None
        log.info("the working tree of %s was %s behind it: brought %d file(s) forward", ref, behind[:12], len(files))
        return files

    def _left_by_checkout(self, tip: str, tree: bytes) -> str | None:
        """The recent ancestor of ``tip`` with root tree ``tree`` that a ``git checkout`` left the index at, or None.

        Left by a checkout that read the branch just before memsite's writes
        moved it: every commit since is memsite's, and HEAD last moved by
        that checkout (when HEAD has a reflog). An index that matches an
        older tree otherwise holds a person's staged changes.
        """
        queue, seen = [tip], set[str]()
        while queue and len(seen) < CATCH_UP_COMMITS:
            current = queue.pop(0)
            if current in seen:
                continue
            seen.add(current)
            header = self.commits.header(current)
            if current != tip and header[b"tree"][0] == tree.hex().encode():
                return current if self._head_moved_by_checkout() else None
            if not any(f"@{WRITER_DOMAIN}>".encode() in line for line in header.get(b"committer", [])):
                return None  # a commit of someone else's since
            queue.extend(parent.decode() for parent in header.get(b"parent", []))
        return None

    def _head_moved_by_checkout(self) -> bool:
        """HEAD's reflog ends with a 'git checkout' (or has no reflog to tell)."""
        try:
            with open(self.git_dir / "logs" / "HEAD", "rb") as handle:
                handle.seek(max(0, os.fstat(handle.fileno()).st_size - 4096))
                last = handle.read().rstrip(b"\n").rpartition(b"\n")[2]
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return last.partition(b"\t")[2].startswith(b"checkout: moving from ")

    def _commit_checked_out(
        self,
        ref: str,
        files: Mapping[str, bytes | None],
        build: Callable[[], str | None],
        move: Callable[[str], None],
        lock: LockFile,
        ahead: FilesAhead | None,
    ) -> str | None:
        """Commit with the working tree and the index: ``files`` are written there (the commit's and any catch-up)."""
        index: list[IndexUpdate] = []

        def update_working_tree() -> None:
            root = str(self.root)  # paths as strings: a transaction writes thousands of files
            if ahead is not None:
                ahead.finish()
            for path, data in files.items():
                if data is None:
                    remove_file(self.root, path)
                elif ahead is None or not ahead.place(path, f"{root}/{path}", data):
                    atomic_write(f"{root}/{path}", data)
            blobs = {path: None if data is None else blob_id(data) for path, data in files.items()}
            index.append(IndexUpdate(self.root, self.git_dir, lock, files, blobs))

        # The working tree and the index are updated while other work goes
        # on: with many files, on a second thread while the objects are built
        # and the branch moves (creating files is kernel time, and 'git
        # update-index' another process); with a few, after the objects,
        # while the caller records the commit on its own thread. The journal
        # covers a crash at any point; the branch is the truth it repairs to.
        self.journal.begin(files, ref)
        sha: str | None = None
        try:
            if len(files) < BACKGROUND_FILES:
                sha = build()
                update_working_tree()
                if sha is not None:
                    move(sha)
            else:
                with Background(update_working_tree) as updating:
                    sha = build()
                    if sha is not None:
                        move(sha)
                updating.result()
            index[0].wait()
        except BaseException as exc:
            moved = sha is not None and self.refs.read(ref) == sha
            if index:  # let a 'git update-index' still running finish first
                with contextlib.suppress(Exception):
                    index[0].wait()
            if moved and not isinstance(exc, Exception):
                raise  # committed, then interrupted: the journal repairs the tree at the next lock
            try:
                self.match_head(list(files), lock)
                lock.commit(self.settings.flush("index"))
                self.journal.end()
            except Exception:  # noqa: BLE001 (the next write repairs it: said below)
                log.warning("could not repair %s now; the next write will", ", ".join(files))
            if not moved or sha is None:
                raise
            log.warning("commit %s landed, then the work after it failed (%s); working tree repaired", sha[:12], exc)
            return sha
        lock.commit(self.settings.flush("index"))
        self.journal.end(ref, {path: None if data is None else blob_id(data).hex() for path, data in files.items()})
        with contextlib.suppress(OSError):
            st = os.stat(self.git_dir / "index")
            self._index_left = (st.st_ino, st.st_size, st.st_mtime_ns)
        return sha

    def _refuse_unsaved_edits(
        self, base: bytes | None, files: Mapping[str, bytes | None], owned: Mapping[str, bytes]
    ) -> None:
        on_disk_names = _FolderNames(str(self.root), listed=len(files) >= LISTED_FILES)
        for path in files:
            entry = self.objects.lookup(base, path)
            if entry is None and not on_disk_names.may_exist(path):
                continue  # new to the branch and not on disk: the common case
            try:
                on_disk = (self.root / path).read_bytes()
            except FileNotFoundError:
                on_disk = None
            except IsADirectoryError:
                raise InvalidInput(f"{path}: is a folder in the working tree; move it away and retry") from None
            committed = entry.sha if entry is not None else None
            if path in owned and on_disk == owned[path]:
                continue
            if (blob_id(on_disk) if on_disk is not None else None) != committed:
                raise InvalidInput(
                    f"{path}: has changes that are not committed; commit them or discard them "
                    f"(git checkout -- {path}) and retry"
                )



class _FolderNames:
    """Whether working-tree files may exist: for many files, from one listing per folder (not a system
    call per file); for a few, asked one by one (a month folder of a large store lists hundreds of names).

    A name that differs from a listed one only in case is checked on disk:
    on a case-insensitive file system it is the same file.
    """

    def __init__(self, root: str, *, listed: bool) -> None:
        self._root = root
        self._listed = listed
        self._folders: dict[str, tuple[set[str], set[str]]] = {}

    def may_exist(self, path: str) -> bool:
        if not self._listed:
            return os.path.lexists(f"{self._root}/{path}")
        folder, _, name = path.rpartition("/")
        names = self._folders.get(folder)
        if names is None:
            try:
                listed = set(os.listdir(f"{self._root}/{folder}" if folder else self._root))
            except OSError:  # missing, not a folder, or unreadable: as os.path.lexists, nothing there
                listed = set()
            names = self._folders[folder] = (listed, {n.casefold() for n in listed})
        if name in names[0]:
            return True
        return name.casefold() in names[1] and os.path.lexists(f"{self._root}/{path}")


_HOOK_LOCK = re.compile(r"index\.lock|next-index-\d+\.lock")  # the index a running 'git commit' holds


class _Unsettled(Exception):
    """A person's git command may be between writing the index and moving a ref (see Checkout._checked_out)."""

    def __init__(self, until: float) -> None:
        super().__init__(until)
        self.until = until  # (time.time()) when the index will have stayed as it is long enough to be staged changes

