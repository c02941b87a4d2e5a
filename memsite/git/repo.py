"""One git repository as memsite writes to it: locked, committed, recovered.

Every write follows the protocol that lost nothing under concurrent writers
and SIGKILL:

1. take the repository-wide lock (``flock`` on ``.memsite/lock``, see
   ``mutex``; the kernel frees it when a holder dies), then repair whatever a
   killed writer left (see ``recover``);
2. take git's ``index.lock`` (as ``git commit`` does, waiting for one a
   person's git command holds; ``git checkout`` takes it too) and read there
   whether the branch is checked out and still where the write started
   (a person's git command caught between writing the index and moving a
   ref, a checkout or a commit in its hooks, is waited for);
3. build the commit from the parent commit's trees, never from the index;
4. move the branch with compare-and-swap; the returned commit id is the
   acknowledgement;
5. only when the branch is checked out: bring the working tree and the index
   up to date for the touched paths, the new index going into place by
   renaming ``index.lock``. A branch that is not checked out is moved by its
   ref alone; the person's index and files are left alone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import overload

from ..foundation.errors import RepositoryError
from .checkout import Checkout
from .commands import Git
from .commits import Author, Commits
from .discovery import locate
from .locks import DEFAULT_TIMEOUT, Locks
from .mutex import LockTimeout, ProcessLock
from .object_database import ObjectDatabase
from .objects import MODE_FILE, Entry
from .refs import RefMoved, Refs
from .settings import GitSettings
from .worktree import AHEAD_DIR, FilesAhead, Journal, atomic_write

log = logging.getLogger("memsite")

STATE_DIR = ".memsite"
LOCK_TIMEOUT_SECONDS = 120.0
DELTAS_TIMEOUT_SECONDS = 60.0  # how long closing a store waits for git to store memsite's objects with deltas
# memsite never runs 'git commit', so git's own 'gc --auto' never triggers.
# It is run instead after commits whose id starts with these characters: one
# write in 256, the rate at which git samples objects/17/ to decide.
GC_SAMPLE = "17"
_FULL_ID = re.compile(r"[0-9a-fA-F]{40}")  # a revision that is a commit id already: read, not asked of git
# git operations that leave the checkout between two states, and how to end each.
OPERATIONS = (
    ("rebase-merge", "a rebase", "git rebase --continue or --abort"),
    ("rebase-apply/applying", "git am", "git am --continue or --abort"),
    ("rebase-apply", "a rebase", "git rebase --continue or --abort"),
    ("MERGE_HEAD", "a merge", "git merge --continue or --abort"),
    ("CHERRY_PICK_HEAD", "a cherry-pick", "git cherry-pick --continue or --abort"),
    ("REVERT_HEAD", "a revert", "git revert --continue or --abort"),
    ("BISECT_LOG", "a bisect", "git bisect reset"),
)


class Repository:
    """A non-bare git repository with memsite's lock, object writer and refs: the one door into git.

    What other modules use:

    - reading: :meth:`branch`, :meth:`resolve`, :meth:`root_tree`, :meth:`parents`,
      :meth:`read_file`, :meth:`files_under`, :meth:`diff_trees`, :meth:`subject`,
      :meth:`message_with_trailer`; ``objects`` (:class:`ObjectDatabase`) and ``refs`` (:class:`Refs`);
    - writing: :meth:`locked`, :meth:`commit`, :meth:`merge`, :meth:`write_commit`, :meth:`maintain`;
    - git's configuration: ``config`` (:class:`GitConfig`, as it was at open), :meth:`configured`,
      :meth:`ensure_config`;
    - git itself, for what memsite leaves to it (a log walk, a ``cat-file`` batch, plumbing):
      ``git`` (:class:`Git`): ``repo.git.run("read-tree", "HEAD")``, ``repo.git.log(...)``,
      ``repo.git.cat_file([...])``.

    Raises:
        RepositoryError: ``path`` is in no git repository, or a bare one, or one memsite cannot write
            (another object format or ref storage).
    """

    def __init__(self, path: str | os.PathLike[str], *, lock_timeout: float = DEFAULT_TIMEOUT) -> None:
        self.root, self.git_dir, self.common_dir = locate(path)
        self.git = Git(self.root)  # git itself, run here: the door for anything memsite leaves to git
        self.config = self.git.config()  # git's configuration at every level, as it was at open
        self.settings = GitSettings.read(self.config)
        if self.settings.bare and self.git_dir == self.common_dir:  # (a linked worktree of a bare one is fine)
            raise RepositoryError(f"{path}: is a bare repository; memsite needs a clone with a working tree")
        self.settings.check_supported(self.root)  # before anything is written
        self.locks = Locks(self.common_dir, self.root, lock_timeout)
        self.objects = ObjectDatabase(self.common_dir / "objects", self.settings)
        self.commits = Commits(self.objects)
        self.refs = Refs(self.git_dir, self.common_dir, self.locks, self.settings)
        self.state_dir = self.root / STATE_DIR
        with contextlib.suppress(OSError):  # a read-only checkout is still read (see check_writable)
            self.state_dir.mkdir(exist_ok=True)
        self._file_lock = ProcessLock(self.state_dir / "lock")
        # Held by a thread of this process for the whole of its write (and by readers that must not see one
        # half done); re-entrant. The file lock above keeps other processes out.
        self.thread_lock = threading.RLock()
        self._depth = 0
        self.journal = Journal(self.state_dir / "journal.json")
        self.checkout = Checkout(self.root, self.git_dir, self.common_dir, self.state_dir, objects=self.objects,
                                 commits=self.commits, refs=self.refs, locks=self.locks, journal=self.journal,
                                 settings=self.settings)
        # Checked before every write, as plain strings (cheap next to a write).
        self._operations = [(str(self.git_dir / name), what, fix) for name, what, fix in OPERATIONS]
        self._write_folders = [str(folder) for folder in (self.common_dir / "objects",
                                                          self.common_dir / "refs" / "heads",
                                                          self.git_dir, self.state_dir, self.root)]

    @property
    def lock_timeout(self) -> float:
        """Seconds a write waits for a git lock file someone else holds before failing."""
        return self.locks.timeout

    @lock_timeout.setter
    def lock_timeout(self, seconds: float) -> None:
        self.locks.timeout = seconds

    def configured(self, section: str, option: str) -> bool:
        """Whether ``section.option`` is set at any level (system, global or this clone), as :attr:`config` has it."""
        return f"{section}.{option}" in self.config

    def ensure_config(self, values: Mapping[tuple[str, str | None, str], str]) -> None:
        """Set ``(section, subsection, option) -> value`` in this clone's git config where it differs.

        git keeps merge drivers and index settings per clone, never in the
        repository, so every clone needs them written once.
        """
        def current(key: str) -> str | None:  # read afresh: another process may have written
            result = self.git.run("config", "--local", "--get", key)
            return result.stdout.rstrip("\n") if result.returncode == 0 else None

        written = False
        for (section, subsection, option), value in values.items():
            key = f"{section}.{subsection}.{option}" if subsection else f"{section}.{option}"
            if self.config.local(key) == value:
                continue
            for _ in range(2):
                result = self.git.run("config", key, value)
                if result.returncode == 0 or current(key) == value:
                    break
                if "config.lock" not in result.stderr:
                    raise RepositoryError(f"git config {key} failed: {result.stderr.strip()}")
                self.locks.wait_for(self.common_dir / "config.lock")  # git's own: another process is writing it
            else:
                raise RepositoryError(f"git config {key} failed: {result.stderr.strip()}")
            written = True
        if written:
            self.config = self.git.config()

    def close(self) -> None:
        """Take in git's pack with deltas if one is being made, and end the ``git cat-file`` reading objects."""
        maintenance = self.objects.maintenance
        if maintenance.storing_deltas:
            try:
                maintenance.wait_for_deltas(DELTAS_TIMEOUT_SECONDS)  # (other writers go on meanwhile)
                maintenance.merge_own_packs(wait=DELTAS_TIMEOUT_SECONDS)
            except Exception as exc:  # noqa: BLE001 (its packs stay; a later 'git gc' tidies them)
                log.warning("could not take in git's pack of memsite's objects (%s)", exc)
        self.locks.close()  # (the files of locks taken outside the write lock too)
        self.objects.close()
        self.journal.close()
        self._file_lock.close()

    # --- locking -----------------------------------------------------------

    @contextmanager
    def locked(self, *, recover: bool = True) -> Iterator[None]:
        """Hold the repository lock (re-entrant within one thread of this process).

        Taking it first repairs what a killed writer left (``recover``); a
        reader that only brings derived files up to date passes False.
        """
        with self.thread_lock:
            if self._depth == 0:
                try:
                    self._file_lock.acquire(LOCK_TIMEOUT_SECONDS)
                except LockTimeout:
                    raise RepositoryError(
                        f"{self.root}: another writer held the memory lock for {LOCK_TIMEOUT_SECONDS:.0f} s; try again"
                    ) from None
            self._depth += 1
            try:
                if self._depth == 1 and recover:
                    self.locks.sweep()
                    self.recover()
                yield
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self._file_lock.release()
                    self.locks.drop_retired()  # (other writers go on meanwhile)

    def recover(self) -> None:
        """Finish or undo the working-tree part of a write whose writer died (see :meth:`Checkout.recover`)."""
        self.checkout.recover()

    def left_in_another_checkout(self) -> tuple[str | None, list[str]]:
        """(the branch, the paths) the last write left in the working tree of a branch no longer checked out
        (see :meth:`Checkout.left_in_another_checkout`)."""
        return self.checkout.left_in_another_checkout()

    # --- reading -----------------------------------------------------------

    def branch(self) -> str:
        """The checked-out branch's ref name (``refs/heads/main``).

        Raises:
            RepositoryError: HEAD is detached (saying why when a rebase or the like is the cause).
        """
        ref = self.refs.head_target()
        if ref is None:
            busy = self.in_progress()
            raise RepositoryError(f"{self.root}: {busy}" if busy else
                                  f"{self.root}: HEAD is detached; check out a branch before writing memories")
        return ref

    def in_progress(self) -> str | None:
        """What a git operation left half done (a rebase, merge, cherry-pick, revert, bisect), and how to end it."""
        for path, what, fix in self._operations:
            if os.path.lexists(path):
                return f"{what} is in progress: finish it with {fix}"
        return None

    def check_writable(self, ref: str) -> None:
        """Refuse, before anything is written, a write to ``ref`` this checkout cannot take.

        Raises:
            RepositoryError: naming the cause: a rebase (merge, ...) in
                progress, ``ref`` checked out in another worktree, or the
                first folder memsite would write to that is read-only.
        """
        busy = self.in_progress()
        if busy:
            raise RepositoryError(f"{self.root}: {busy}; memories are written once it is done")
        here = self.refs.head_target() == ref
        elsewhere = None if here else self._in_use_elsewhere(ref)
        if elsewhere is not None:  # as git refuses 'git branch -f': that worktree's index and files would lag behind
            folder, how = elsewhere
            if not folder.is_dir():
                then = ("its folder is gone: run 'git worktree prune' ('git worktree unlock' first if it is "
                        "locked) to write to it here")
            elif how == "checked out":
                then = f"write to it from there (MemoryStore('{folder}')), or to another branch"
            else:
                then = "write to it once that is done, or to another branch"
            raise RepositoryError(f"{ref.removeprefix('refs/heads/')}: is {how} in the worktree {folder}; {then}")
        folders = self._write_folders if here else self._write_folders[:-1]
        for writable in folders:
            if not os.access(writable, os.W_OK):
                raise RepositoryError(f"{self.locks.show(Path(writable))}: is read-only, so memsite cannot write "
                                      "memories here; make it writable, or write from a clone you can write to")

    def _in_use_elsewhere(self, ref: str) -> tuple[Path, str] | None:
        """The other worktree of this repository that has ``ref`` checked out (or is rebasing or bisecting it),
        and which of those, as git finds them before it refuses to move a branch."""
        worktrees: list[tuple[Path, Path]] = []  # (its git dir, its folder)
        if self.git_dir != self.common_dir and not self.settings.bare:  # the main worktree, seen from a linked one
            worktrees.append((self.common_dir,
                              self.common_dir.parent if self.common_dir.name == ".git" else self.common_dir))
        try:
            linked = os.listdir(self.common_dir / "worktrees")
        except (FileNotFoundError, NotADirectoryError):
            linked = []
        for name in linked:
            admin = self.common_dir / "worktrees" / name
            if admin != self.git_dir:
                with contextlib.suppress(OSError):  # (git 2.48 can write it relative to the admin folder)
                    gitdir = (admin / "gitdir").read_text(encoding="utf-8").strip()
                    worktrees.append((admin, Path(os.path.normpath(admin / gitdir)).parent))
        for git_dir, folder in worktrees:
            how = _use_of(git_dir, ref)
            if how is not None:
                return folder, how
        return None

    @overload
    def root_tree(self, commit: str) -> bytes: ...
    @overload
    def root_tree(self, commit: None) -> None: ...
    @overload
    def root_tree(self, commit: str | None) -> bytes | None: ...
    def root_tree(self, commit: str | None) -> bytes | None:
        """The root tree id of ``commit`` (None for no commit)."""
        return self.commits.root_tree(commit)

    def parents(self, commit: str) -> list[str]:
        """The parent commit ids of ``commit``."""
        return self.commits.parents(commit)

    def subject(self, commit: str) -> tuple[str, int]:
        """The first line of ``commit``'s message, and when it was committed (see :meth:`Commits.subject`)."""
        return self.commits.subject(commit)

    def files_under(self, commit: str | None, folder: str) -> dict[str, bytes]:
        """Every file under ``folder`` at ``commit``: path -> content."""
        return self.commits.files_under(commit, folder)

    def read_file(self, commit: str | None, path: str) -> bytes | None:
        """The bytes of ``path`` at ``commit``, or None if it has no such file."""
        return self.commits.read_file(commit, path)

    def write_commit(self, tree: bytes, parents: Sequence[str | None], message: str, author: Author, when: int) -> str:
        """Store a commit object of ``tree`` with ``parents`` (no branch moves); returns its id."""
        return self.commits.write(tree, parents, message, author, when)

    def resolve(self, revision: str) -> str:
        """The commit id ``revision`` (a branch, tag, HEAD~2...) names.

        Raises:
            RepositoryError: it names no commit.
        """
        if _FULL_ID.fullmatch(revision):  # read here: most revisions memsite resolves are commit ids
            with contextlib.suppress(RepositoryError, ValueError):
                if self.objects.read(bytes.fromhex(revision))[0] == "commit":
                    return revision.lower()
        result = self.git.run("rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}")
        if result.returncode != 0 or not result.stdout.strip():
            raise RepositoryError(f"{revision!r} is not a commit in {self.root}; fetch it or name another")
        return result.stdout.strip()

    def commit_with_trailer(self, key: str, value: str, *, since: str | None, tip: str = "HEAD") -> bool:
        """Whether a commit after ``since`` up to ``tip`` (a commit or ref) has the trailer ``key: value``."""
        return self.message_with_trailer(key, value, since=since, tip=tip) is not None

    def message_with_trailer(self, key: str, value: str, *, since: str | None, tip: str = "HEAD") -> str | None:
        """The message of the newest commit after ``since`` up to ``tip`` with the trailer ``key: value``, or None."""
        revision = f"{since}..{tip}" if since else tip
        result = self.git.run("log", "-z", "--format=%B", "-F", f"--grep={key}: {value}", revision, "--")
        if result.returncode != 0 and since:  # 'since' rewritten away: look through the whole branch
            return self.message_with_trailer(key, value, since=None, tip=tip)
        for message in result.stdout.split("\0"):
            if f"\n{key}: {value}\n" in f"\n{message.strip()}\n":  # a whole trailer line, not a prefix of one
                return message
        return None

    def diff_trees(self, old: bytes, new: bytes) -> Iterator[tuple[str, Entry | None, Entry | None]]:
        """Files that differ between two trees, as ObjectDatabase.diff yields them, found by git.

        For large folders: git compares trees in C without anyone parsing them in Python.
        """
        result = self.git.run("diff-tree", "-r", "-z", "--raw", "--no-renames", old.hex(), new.hex(), text=False)
        if result.returncode != 0:
            raise RepositoryError(f"git diff-tree failed: {result.stderr.decode(errors='replace').strip()}")
        fields = result.stdout.split(b"\x00")
        for info, path in zip(fields[0::2], fields[1::2]):
            if not info:
                continue
            old_mode, new_mode, old_sha, new_sha, _ = info[1:].split(b" ")
            before = None if set(old_sha) == {ord("0")} else Entry(int(old_mode, 8), bytes.fromhex(old_sha.decode()))
            after = None if set(new_sha) == {ord("0")} else Entry(int(new_mode, 8), bytes.fromhex(new_sha.decode()))
            yield path.decode("utf-8", "surrogateescape"), before, after

    # --- writing -----------------------------------------------------------

    def files_ahead(self) -> FilesAhead:
        """A place to write a large commit's working-tree files while it is prepared (pass it to :meth:`commit`)."""
        return FilesAhead(self.state_dir / AHEAD_DIR)

    def write_working_file(self, path: str, data: bytes) -> None:
        """Write a file to the working tree only (working memory, committed later)."""
        atomic_write(self.root / path, data)

    def commit(
        self,
        ref: str,
        parent: str | None,
        files: Mapping[str, bytes | None],
        *,
        message: str,
        author: Author,
        when: int,
        owned: Mapping[str, bytes] | None = None,
        record: Callable[[], Callable[[str | None], None]] | None = None,
        ahead: FilesAhead | None = None,
    ) -> str | None:
        """Commit ``files`` (path -> bytes, or None to delete) on top of ``parent``.

        Must be called under :meth:`locked`. The branch moves under git's
        ``index.lock``, where HEAD is read: when ``ref`` is checked out, the
        working tree and the index are updated for the same paths; a path
        with uncommitted edits of its own is refused rather than overwritten,
        unless it holds exactly the bytes ``owned`` gives for it (working files
        the writer itself left uncommitted). When it is not, the ref alone
        moves. ``record`` is called before the commit is made, so that the
        caller can write its own account of it meanwhile (on a thread of its
        own); it returns a function that is called once: with the commit id
        when the branch points at it, or None when it never will (its failure
        once the branch has moved is logged: the commit stands). ``ahead``:
        files of this commit already written ahead (see :class:`FilesAhead`),
        renamed into the working tree rather than written there.

        Returns:
            The new commit id, or None when the files already had that content.

        Raises:
            RefMoved: ``ref`` no longer pointed at ``parent``; nothing changed.
            InvalidInput: a path has uncommitted edits in the working tree.
            RepositoryError: a git command held ``index.lock`` or the ref's
                lock longer than ``lock_timeout``; nothing changed.
        """
        base = self.commits.root_tree(parent)
        built: list[str | None] = []

        def build() -> str | None:
            if not built:
                with self.objects.batch():  # the commit's objects: one pack, stored before the branch moves
                    written = [path for path, data in files.items() if data is not None]
                    shas = self.objects.write_many(b"blob", [files[path] for path in written])  # type: ignore[misc]  # written: not None
                    entries: dict[str, Entry | None] = {path: None for path, data in files.items() if data is None}
                    entries.update((path, Entry(MODE_FILE, sha)) for path, sha in zip(written, shas))
                    built.append(self.commits.write_change(base, entries, parent, message, author, when))
            return built[0]

        def move(sha: str) -> None:
            self.refs.update(ref, sha, parent, ident=author.ident(when), message=_reflog(message))

        # The caller's record starts first: it is written on a thread of its own while the rest is done.
        settle = record() if record is not None else None
        sha: str | None = None
        try:
            # (Not checked out: the objects are built before index.lock is taken, to hold it briefly.)
            try:
                if self.refs.head_target() == ref or build() is not None:
                    sha = self.checkout.commit_locked(ref, parent, files, base, build, move, owned, ahead)
            finally:
                self.objects.release()  # the branch points at the commit's pack now, or never will
        except BaseException:
            if settle is not None:
                made = built[0] if built else None
                try:
                    landed = made is not None and self.refs.read(ref) == made
                except Exception:  # noqa: BLE001 (the write's own error is raised below)
                    landed = False  # the catalog then catches up from git
                _settle(settle, made if landed else None)
            raise
        if settle is not None:
            _settle(settle, sha)
        return sha

    def merge(self, ref: str, parent: str | None, theirs: str, tree: bytes | None, *, message: str, author: Author,
              when: int) -> str:
        """Move ``ref`` from ``parent`` to take in ``theirs``: to a new merge commit of the two whose tree git
        merged (``tree``, see :func:`memsite.git.remote.merge_trees`), or to ``theirs`` itself when ``tree`` is
        None (a fast-forward).

        Must be called under :meth:`locked`. As with :meth:`commit`, when ``ref``
        is checked out, the working tree and the index follow for the paths
        that change, and a path with uncommitted edits is refused. A merge
        that brings in files other than plain ones (a person's executable or
        symlink) moves the checkout with ``git merge --ff-only`` instead.

        Returns:
            The commit ``ref`` now points at.

        Raises:
            RefMoved: ``ref`` no longer pointed at ``parent`` (a write landed meanwhile): merge again.
            InvalidInput: a path that changes has uncommitted edits in the working tree.
        """
        base = self.commits.root_tree(parent)
        target = self.commits.root_tree(theirs) if tree is None else tree
        changes = list(self.objects.diff(base, target))
        made: list[str] = []

        def build() -> str:
            if not made:
                made.append(theirs if tree is None
                            else self.commits.write(tree, [parent, theirs], message, author, when))
            return made[0]

        def move(sha: str) -> None:
            self.refs.update(ref, sha, parent, ident=author.ident(when), message=_reflog(message))

        if any(new is not None and new.mode != MODE_FILE for _, _, new in changes) and self.refs.head_target() == ref:
            sha = build()
            if self.refs.read(ref) != parent:
                raise RefMoved(f"{ref} moved while the merge was made")
            result = self.git.run("merge", "--ff-only", "--quiet", sha)
            if result.returncode != 0:
                raise RepositoryError(f"git merge --ff-only {sha[:12]} failed in {self.root}: "
                                      f"{result.stderr.strip().splitlines()[-1] if result.stderr.strip() else ''}")
            return sha
        files = {path: None if new is None else self.objects.read_blob(new.sha) for path, _, new in changes}
        merged = self.checkout.commit_locked(ref, parent, files, base, build, move, None, None)
        assert merged is not None
        return merged

    def with_file(self, tree: bytes, path: str, data: bytes) -> bytes:
        """``tree`` with the file at ``path`` holding ``data`` (objects written; no branch moves)."""
        new = self.objects.apply(tree, {path: Entry(MODE_FILE, self.objects.write(b"blob", data))})
        assert new is not None
        return new

    def maintain(self, commit: str) -> None:
        """After a commit (once the write lock is released: other writers go on meanwhile), merge
        memsite's small packs when due, and let git pack loose objects now and then (it decides;
        it detaches to do it). A failure here never fails the write: it is logged, and git's own
        maintenance still works."""
        try:
            self.objects.maintenance.maintain()
        except Exception as exc:  # noqa: BLE001 (maintenance is optional: the commit has landed)
            log.warning("merging memsite's packs failed (%s); they stay as they are", exc)
        if commit.startswith(GC_SAMPLE):
            self.git.run("gc", "--auto", "--quiet", capture=False, idle=True)  # (it detaches: no pipe to wait on)


def _use_of(git_dir: Path, ref: str) -> str | None:
    """How the worktree of ``git_dir`` uses the branch ``ref``: "checked out", "being rebased", "being bisected".

    As git's own rule: a rebase or a bisect counts while HEAD is detached.
    """
    def read(name: str) -> str | None:
        try:
            return (git_dir / name).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return None

    head = read("HEAD")
    if head is None or head.startswith("ref: "):
        return "checked out" if head == f"ref: {ref}" else None
    if ref in (read("rebase-merge/head-name"), read("rebase-apply/head-name")):
        return "being rebased"
    if (git_dir / "BISECT_LOG").exists() and f"refs/heads/{read('BISECT_START')}" == ref:
        return "being bisected"
    return None



def _settle(settle: Callable[[str | None], None], sha: str | None) -> None:
    """Tell the caller's record of a commit whether it landed; its failure never hides the commit."""
    try:
        settle(sha)
    except Exception as exc:  # noqa: BLE001 (the commit stands; the reader catches up from git)
        if sha is not None:
            log.warning("commit %s landed; recording it in the catalog failed (%s)", sha[:12], exc)


def _reflog(message: str) -> str:
    return "memsite: " + message.split("\n", 1)[0]


__all__ = ["Author", "RefMoved", "Repository"]
