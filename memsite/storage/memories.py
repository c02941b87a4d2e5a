"""Storage: memories in a git repository, read and written under memsite's policy.

Every write is one git commit authored by the agent, with a subject a reviewer
can read and ``Memory-Id`` / ``Category`` / ``Action`` trailers. Policy is
enforced before anything is written: category routing, size and text checks,
secret refusal, safe names and tags here; dedup and capacity trimming in the
transaction that collects the writes (``transaction.py``).

This layer knows no feature (world state, tasks, recall, ingest): those build
on it, and :class:`memsite.MemoryStore` puts them together.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from ..foundation import inputs, likeness
from ..foundation.config import Config, load_config
from ..foundation.errors import InvalidInput, NotFound, RepositoryError
from ..foundation.record import (
    ABSTRACT_MAX,
    Memory,
    derive_abstract,
    derive_overview,
    format_time,
    new_id,
    normalize_content,
    one_line,
    slugify,
    truncate,
    utcnow,
)
from ..git import RefMoved, Repository
from . import ids
from .activity import ActivityJournal, carry_over
from .catalog import Catalog
from .ids import Removal
from .sqlite import intact, is_damage
from .state import LOW_SPACE, StateDir, disk_full, free_bytes, out_of_room
from .transaction import Transaction, refuse_unreadable
from .vectors import Embedder, Vectors, decode, encode, keys, model_name, published_folder
from .versions import Versions

T = TypeVar("T")
log = logging.getLogger("memsite")
REBUILT = "it is derived from git and was rebuilt"
ACTIVITY_LOST = ("the recalls it held that were not yet committed to the memory files are lost "
                 "(their active_count stays as last committed); a new journal was started")
ACTIVITY_CARRIED = ("{} recalls still readable in it were carried into a new journal; the recalls it held that were "
                    "not yet committed to the memory files and could not be read are lost")
WRITE_ATTEMPTS = 3
EDITABLE_FIELDS = frozenset({"content", "abstract", "overview", "tags", "source", "pinned", "category"})


class Storage:
    """Memories in a git repository, written by one agent: reads, writes and their policy.

    Opened by :class:`memsite.MemoryStore`, which holds one and adds the
    features; see it for the other arguments.

    Args:
        git_settings: the git config every clone needs (from the repository):
            written when the store opens, or before its first write when the
            disk was full then.
        removal: the history's account of a removed memory, (root, tip, id)
            -> :data:`ids.Removal` or None; :meth:`not_found` tells it.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = ".",
        agent: str | None = None,
        *,
        clock: Callable[[], datetime] | None = None,
        progress: Callable[[int, int], None] | None = None,
        embedder: Embedder | None = None,
        branch: str | None = None,
        git_settings: Callable[[Repository], Mapping[tuple[str, str | None, str], str]] | None = None,
        removal: Callable[[Path, str, str], Removal | None] | None = None,
    ) -> None:
        self.repo = Repository(path)
        self.vectors: Vectors | None = None
        self.past: Versions | None = None  # the memories at past commits (see at_commit), once asked for
        self._born: datetime | None = None  # see born()
        self._embedder = embedder
        self._published: tuple[bytes, frozenset[bytes]] | None = None  # (folder's tree id, the text keys in it)
        self._published_files: dict[bytes, frozenset[bytes]] = {}  # a published file's blob id -> its text keys
        self._clock = clock or utcnow
        self._progress = progress
        self._git_settings = git_settings
        self._removal = removal
        try:
            self.root: Path = self.repo.root
            self.config: Config = load_config(self.root)
            self.repo.lock_timeout = self.config.lock_timeout
            self.agent: str = inputs.agent(agent if agent is not None else _default_agent(self.repo))
            # The branch this store reads and writes, fixed when it opens: a
            # person checking out another branch later never redirects it.
            self.ref: str | None = self.repo.refs.head_target() if branch is None else inputs.branch(branch)
            self._cannot_write: str | None = None  # why writes are refused, found when it opened
            self._untold = False  # reading from copies in memory (a full disk), not said yet
            self.state = StateDir(self.repo)
            self._open_state()
        except BaseException:
            self.repo.close()
            raise
        self.thread_state = threading.local()  # .tx: the transaction open in this thread (one at a time)
        # Called with each commit this store makes, once the lock is released (a background syncer listens).
        self.commit_listeners: list[Callable[[str], None]] = []
        try:
            self._configure_clone()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Release the catalog, the activity journal and git's helper processes."""
        self._close_state()
        self.state.close()
        self.repo.close()

    @property
    def branch(self) -> str | None:
        """The branch this store reads and writes (``main``); None when opened on a detached HEAD (read only)."""
        return None if self.ref is None else self.ref.removeprefix("refs/heads/")

    def tip(self) -> str | None:
        """The commit reads see: the store's branch (HEAD's commit while that branch does not exist yet,
        or when the store was opened on a detached HEAD)."""
        commit = self.repo.refs.read(self.ref) if self.ref is not None else None
        return commit if commit is not None else self.repo.refs.head_commit()

    def cannot_write(self) -> str | None:
        """Why a write would be refused now (one line naming the cause), or None."""
        try:
            self.writable_ref()
        except RepositoryError as exc:
            return str(exc)
        return None

    def writable_ref(self) -> str:
        """The branch to write to, after checking that a write can be made.

        Raises:
            RepositoryError: detached HEAD, a rebase (merge, ...) in progress,
                a read-only folder, or a git config that could not be written.
            DiskFull: the disk has no room (for the git config either).
        """
        if self._unconfigured:  # (opened on a full disk: written now, or found unwritable now)
            self._configure_clone()
            if self._unconfigured:
                raise disk_full(self.root)
        if self._cannot_write is not None:
            raise RepositoryError(self._cannot_write)
        self._on_disk()
        if self.ref is None:
            busy = self.repo.in_progress()
            head = (self.repo.refs.head_commit() or "")[:12]
            raise RepositoryError(f"{self.root}: {busy}" if busy else
                                  f"{self.root}: HEAD is detached (at {head}); memories are written to a branch: "
                                  "check out one, or name one (MemoryStore(path, branch=NAME))")
        self.repo.check_writable(self.ref)
        return self.ref

    def _configure_clone(self) -> None:
        """Write the git config ``git_settings`` asks for in this clone (nothing when it is there).

        A clone whose git config cannot be written (a read-only ``.git``) is
        still read; its first write says why it cannot be made. On a full
        disk it is written before the first write, once there is room.
        """
        self._unconfigured = False
        if self._git_settings is None:
            return
        try:
            self.repo.ensure_config(self._git_settings(self.repo))
        except RepositoryError as exc:
            config = self.repo.common_dir / "config"
            if out_of_room(exc, config):
                self._unconfigured = True
                return
            if os.access(config, os.W_OK) and os.access(config.parent, os.W_OK):
                raise
            self._cannot_write = f"{exc}; make {self.repo.locks.show(config)} writable to write memories here"

    def use_embedder(self, embedder: Embedder) -> None:
        """Make recall hybrid with ``embedder`` from now on: its vectors are opened (and healed) here."""
        self._embedder = embedder
        self._open_state(self._open_vectors)

    # --- the files in .memsite/ ------------------------------------------------

    def _open_state(self, opening: Callable[[], None] | None = None) -> None:
        """Open the activity journal, the catalog and the vectors (or what ``opening`` opens).

        A damaged file is set aside first. On a full disk the files are read
        from copies in memory instead (see StateDir), with one warning.
        """
        try:
            (opening or self._open_files)()
        except (OSError, sqlite3.Error, RepositoryError) as exc:
            if not self._read_in_memory(exc):
                raise

    def _open_files(self) -> None:
        self.activity = self._opened("activity.sqlite3", ActivityJournal, ACTIVITY_LOST)
        self.catalog = self._opened("catalog.sqlite3",
                                    lambda path: Catalog(path, self.root, self.activity.path), REBUILT)
        self._open_vectors()

    def _open_vectors(self) -> None:
        if self._embedder is not None:
            embedder = self._embedder
            self.vectors = self._opened(
                "vectors.sqlite3", lambda path: Vectors(path, embedder, self._progress, self.published_vectors),
                REBUILT)

    def published_vectors(self, commit: str | None, wanted: Iterable[bytes] | None = None) -> dict[bytes, bytes]:
        """The embedder's vectors published in the repository at ``commit``: text key -> vector bytes,
        only those of ``wanted`` keys when given (the files are read again only if they hold one)."""
        if self._embedder is None:
            return {}
        folder = published_folder(model_name(self._embedder))
        entry = self.repo.objects.lookup(self.repo.root_tree(commit), folder)
        if entry is None or not entry.is_tree:
            return {}
        wanted = None if wanted is None else set(wanted)
        if self._published is not None and self._published[0] == entry.sha and wanted is not None \
                and not wanted & self._published[1]:
            return {}
        found: dict[bytes, bytes] = {}
        for data in self.repo.files_under(commit, folder).values():
            found.update(decode(data, model_name(self._embedder)))
        self._published = (entry.sha, frozenset(found))  # (the keys only: 100,000 vectors would be 150 MB)
        return found if wanted is None else {key: found[key] for key in wanted if key in found}

    def published_keys(self, commit: str | None) -> frozenset[bytes]:
        """The text keys of the embedder's vectors published in the repository at ``commit`` (each version of a
        file read once: a file another clone appended to is read again, the others are not)."""
        if self._embedder is None:
            return frozenset()
        model = model_name(self._embedder)
        objects = self.repo.objects
        entry = objects.lookup(self.repo.root_tree(commit), published_folder(model))
        if entry is None or not entry.is_tree:
            return frozenset()
        known = {file.sha: self._published_files.get(file.sha) or keys(objects.read_blob(file.sha), model)
                 for _, file in objects.walk(entry.sha)}
        self._published_files = known
        return frozenset().union(*known.values())

    def publish_vectors(self, at_least: int = 1, *, embed: bool = True,
                        others_after: timedelta | None = None) -> tuple[int, str | None]:
        """Publish the vectors of the memories the repository has none for yet, in one commit.

        They go to this clone's own file under ``vectors/<model>/`` (named for the agent and the
        clone), appended to: no other clone writes it, so merges never conflict on it.

        Args:
            at_least: publish only when this many vectors are waiting (fewer: nothing is written).
            embed: embed the memories without vectors first (False: publish only what is embedded).
            others_after: publish other agents' memories only once they are this old (their writer's
                clone publishes them first: clones syncing at once would each publish them again).

        Returns:
            How many vectors were published, and the commit (None when there were none).
        """
        vectors = self.vectors
        if vectors is None:
            return 0, None
        with self.repo.thread_lock:
            if not embed and vectors.waiting(self.published_keys(self.tip())) < at_least:
                return 0, None  # (the catalog is not even brought up to date: a sync stays cheap)
            self.fresh()
            among = None if others_after is None else \
                (self.catalog.matching(None, self.agent, ()) or set()) | \
                (self.catalog.matching(None, None, (), until=self.now() - others_after) or set())
            new = vectors.unpublished(self.catalog, self.published_keys(self.catalog.commit), embed=embed,
                                      among=among)
        if not new or len(new) < at_least:
            return 0, None
        model, dimension = vectors.model, len(new[0][1]) // 4
        path = f"{published_folder(model)}/{self.agent}-{self._publisher()}.vec"
        with self.transaction(f"Vectors of {len(new)} memories ({model})") as tx:
            mine = tx.read_bytes(path)
            if mine is None or not decode(mine, model):  # (a damaged file of ours starts again)
                tx.write_bytes(path, encode(model, dimension, new, header=True))
            else:
                tx.write_bytes(path, mine + encode(model, dimension, new, header=False))
        return len(new), tx.commit

    def _publisher(self) -> str:
        """This clone's name among those publishing vectors: kept in .memsite/ (a new one if it is lost)."""
        kept = self.state.path / "publisher"
        try:
            name = kept.read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            name = ""
        if not re.fullmatch(r"[0-9a-f]{8}", name):
            name = os.urandom(4).hex()
            try:
                kept.write_text(name + "\n", encoding="ascii")
            except OSError:  # (not kept: the next publication starts a file of its own, which is no harm)
                pass
        return name

    def _close_state(self) -> None:
        for name in ("catalog", "activity", "vectors", "past"):
            opened = getattr(self, name, None)
            if opened is not None:
                opened.close()
        self.past = None

    def _opened(self, name: str, open_file: Callable[[Path | str], T], cost: str) -> T:
        try:
            return open_file(self.state.file(name))
        except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
            # (Opening reads only the file's header and schema: a message SQLite could not put in UTF-8 quoted them.)
            if not is_damage(exc) and not isinstance(exc, UnicodeDecodeError):
                raise
            self._set_aside(name, exc, cost)
            return open_file(self.state.file(name))

    def _set_aside(self, name: str, exc: object, cost: str) -> None:
        aside = self.state.set_aside(name, datetime.now(UTC))
        if name == "activity.sqlite3" and not self.state.in_memory:  # (in memory, a new journal would not last)
            try:
                carried = carry_over(aside, self.state.path / name)
            except (sqlite3.Error, OSError) as failed:
                log.debug("%s: no recall carried over: %s", aside, failed)
                carried = 0
            cost = ACTIVITY_CARRIED.format(carried) if carried else cost
        cause = truncate(repr(str(exc))[1:-1], 160)  # it may quote the damaged bytes: control characters escaped
        log.warning("%s could not be read (%s): moved aside to %s; %s", self.state.path / name, cause, aside.name,
                    cost)

    def _read_in_memory(self, exc: BaseException) -> bool:
        """After ``exc``: if the disk is full, read from copies of the files in memory; whether it does now."""
        if self.state.in_memory or not out_of_room(exc, self.state.path):
            return False
        with self.repo.thread_lock:
            self._close_state()
            self.state.to_memory()
            self._open_files()
            self._untold = True  # told at the first read: a write is refused with DiskFull, its one line
        return True

    def _on_disk(self) -> None:
        """Leave the copies in memory for the files on disk once there is room again.

        Raises:
            DiskFull: there is still no room (nothing was written).
        """
        with self.repo.thread_lock:
            if not self.state.in_memory:
                return
            free = free_bytes(self.state.path)
            if free is not None and free < LOW_SPACE:
                raise disk_full(self.root)
            self._close_state()
            self.state.to_disk()
            self._open_state()  # back in memory, with a warning, if the room did not last
            if self.state.in_memory:
                raise disk_full(self.root)

    def healing(self, work: Callable[[], T], *, reading: bool = False) -> T:
        """``work()``; if a file in .memsite/ turns out damaged, it is set aside and ``work`` runs again.

        The catalog, the search index and the vectors are derived from git
        and rebuilt; the activity journal is not derived, so the recalls it
        held are lost (the warning says so) and a new one starts. A read
        (``reading``) that fails for want of room goes on from copies in memory.
        """
        try:
            return work()
        except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
            if not self._healed(exc) and not (reading and self._read_in_memory(exc)):
                raise
        except (OSError, RepositoryError) as exc:
            if not (reading and self._read_in_memory(exc)):
                raise
        finally:
            if reading and self._untold:
                self._untold = False
                log.warning("disk full at %s: reading copies of its files made in memory; nothing is written "
                            "there, and recalls are not counted, until there is room", self.state.path)
        return work()

    def _healed(self, exc: BaseException) -> bool:
        """Set aside the files ``exc`` shows damaged; whether it was damage (else the caller raises it)."""
        damage = is_damage(exc)
        if not damage and not isinstance(exc, UnicodeDecodeError):  # busy, full, read-only: not for healing
            return False
        if self.heal(exc):
            return True
        if not damage:  # a UnicodeDecodeError no file accounts for: not SQLite's
            return False
        with self.state.locked():  # damaged only where it was read, in a way no check sees: the catalog holds most
            self._close_state()
            self._set_aside("catalog.sqlite3", exc, REBUILT)
            self._open_state()
        return True

    def heal(self, cause: object = "PRAGMA integrity_check failed") -> list[str]:
        """Set aside every damaged file in .memsite/ (one warning each) and open new ones; returns their names.

        Runs under the repository lock and checks each file there, so a file
        another process has already rebuilt is left alone.
        """
        healed = []
        with self.state.locked():
            self._close_state()
            try:
                for name, cost in (("activity.sqlite3", ACTIVITY_LOST), ("catalog.sqlite3", REBUILT),
                                   ("vectors.sqlite3", REBUILT), ("past.sqlite3", REBUILT)):
                    if not intact(self.state.path / name):
                        self._set_aside(name, cause, cost)
                        healed.append(name)
            finally:
                self._open_state()
        return healed

    def __enter__(self) -> Storage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.root)!r}, agent={self.agent!r})"

    def now(self) -> datetime:
        """The current time as this store sees it (UTC, whole seconds)."""
        return self._clock().astimezone(UTC).replace(microsecond=0)

    # --- reads -------------------------------------------------------------

    def fresh(self) -> None:
        """Bring the catalog up to the store's branch tip (cheap when it already is)."""
        with self.repo.thread_lock:
            if self.catalog.commit != self.tip():
                with self.state.locked():
                    self.catalog.sync(self.repo, self.config, self.tip(), self._progress)

    def rebuild_index(self) -> int:
        """Rebuild the catalog and full-text index from the files at the branch tip; returns the count.

        Works whatever state the catalog is in: a damaged one is set aside first.
        """
        def rebuild() -> int:
            with self.state.locked():
                self.catalog.reset()
                self.catalog.sync(self.repo, self.config, self.tip(), self._progress)
                return self.catalog.count()

        return self.healing(rebuild)

    def rebuild_caches(self) -> int:
        """Delete the catalogs (of the tip and of a past commit), text and all, and build the catalog again
        from the files.

        After a purge: a row deleted from SQLite stays in its free pages. The
        activity journal stays (recall counts not committed yet; it holds ids
        only), and so do the vectors (keyed by a hash of the text; the purge
        erases the purged memories' own, see :func:`memsite.storage.vectors.erase`).
        """
        with self.repo.thread_lock:
            self._close_state()
            folder = Path(self.state.path)
            for name in ("catalog.sqlite3", "past.sqlite3"):
                for suffix in ("", "-wal", "-shm", "-journal"):
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(folder / f"{name}{suffix}")
                for aside in folder.glob(f"{name}.*"):  # (damaged copies set aside earlier)
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(aside)
            self._open_state()
        return self.rebuild_index()

    def born(self) -> datetime | None:
        """When the first commit of the store's branch was made (None before there is one); asked of git once."""
        if self._born is None:
            tip = self.tip()
            roots = self.repo.git.run("log", "--max-parents=0", "--format=%ct", tip).stdout if tip else ""
            stamps = [int(line) for line in roots.split() if line.isdigit()]
            self._born = datetime.fromtimestamp(min(stamps), UTC) if stamps else None
        return self._born

    def commit_at(self, when: datetime) -> str | None:
        """The last commit of the store's branch (its first parents) made at ``when`` or before; None if none.

        Looked up in the table of past versions (see :meth:`at_commit`), which numbers the branch's commits.
        """
        tip = self.tip()
        if tip is None:
            return None
        return self._past(lambda past: past.commit_at(self.repo, self.config, tip, int(when.timestamp()),
                                                      self._progress))

    def at_commit(self, commit: str, work: Callable[[Catalog], T]) -> T:
        """``work(catalog)`` on a catalog of the memories at ``commit`` (a past one: as-of reads in record time).

        The catalog is the table of every version of every memory along the
        branch (:class:`~memsite.storage.versions.Versions`, ``past.sqlite3``),
        built once and extended as the branch grows: a read as of any commit
        it holds is a look-up. It is derived, like the catalog, and rebuilt when lost.
        """
        self.fresh()

        def read(past: Versions) -> T:
            past.sync(self.repo, self.config, commit, self._progress)
            return work(past)

        return self._past(read)

    def _past(self, work: Callable[[Versions], T]) -> T:
        """``work(versions)`` on the table of past versions, opened once, under the locks that keep it whole."""
        def read() -> T:
            with self.repo.thread_lock, self.state.locked():
                if self.past is None:
                    self.past = self._opened("past.sqlite3", lambda path: Versions(path, self.root, self.activity.path),
                                             REBUILT)
                return work(self.past)

        return self.healing(read, reading=True)

    def get(self, id: str) -> Memory:
        """The memory with ``id``, or with the one id that starts with ``id`` (6 characters or more, any case).

        See :meth:`memsite.MemoryStore.get` for what it raises.
        """
        def read() -> Memory | None:
            with self.repo.thread_lock:
                self.fresh()
                memory = ids.lookup(self.catalog, id)
                if memory is None and isinstance(id, str):
                    refuse_unreadable(self.catalog, id, None)
                return memory

        memory = self.healing(read, reading=True)
        if memory is None:
            raise self.not_found(id)
        return memory

    def not_found(self, id: object) -> NotFound:
        """The error for an id no memory has: it says when, by whom and in which commit the memory was
        forgotten or trimmed, when the history (``removal``) shows it was (get, update and forget raise it)."""
        removed = None
        if self._removal is not None and isinstance(id, str):
            tip = self.tip()
            removed = self._removal(self.root, tip, id) if tip else None
        return ids.not_found(id, removed)

    def contradicted(self, memory: Memory) -> list[Memory]:
        """The memories of ``memory``'s category, still holding, that it may contradict (see
        :mod:`memsite.foundation.likeness`; found by :meth:`Catalog.best_matches`), most alike first."""
        fts_query = likeness.query(memory.content)
        if fts_query is None:
            return []

        def read() -> list[Memory]:
            with self.repo.thread_lock:
                self.fresh()
                return self.catalog.best_matches(fts_query, memory.category, self.now(), likeness.SHOWN)

        near = self.healing(read, reading=True)
        return likeness.candidates(memory.content, near, self.config.dedupe_threshold)

    def list(self, category: str | None = None, agent: str | None = None) -> list[Memory]:
        """Memories, oldest first, optionally of one category (or alias) and/or agent.

        A file that cannot be read is left out with a warning (once); 'memsite check' names it.
        """
        name = self.config.route(category).name if category is not None else None

        def read() -> list[Memory]:
            with self.repo.thread_lock:
                self.fresh()
                return self.catalog.list(category=name, agent=agent)

        return self.healing(read, reading=True)

    def note_recalls(self, ids: builtins.list[str]) -> int | None:
        """Journal one recall of each of ``ids`` by this agent; how many recalls now wait for a flush.

        None when the disk is full: the recall is not counted (reading then
        goes on from copies in memory, whose warning says so).
        """
        if not self.state.in_memory:
            at = format_time(self.now())
            try:
                return self.healing(lambda: self.activity.record(ids, at, self.agent))
            except (OSError, sqlite3.Error) as exc:
                if not self._read_in_memory(exc):
                    raise
        return None

    def flush_activity(self) -> str | None:
        """Commit the recall counts the journal holds; the last commit id, or None.

        Each agent's recalls go into a commit of their own, authored by that
        agent, whoever flushes. Also run when a task closes and when
        ``flush_every`` recalls wait.
        """
        self.writable_ref()

        def flush() -> str | None:
            commit = None
            with self.repo.thread_lock, self.repo.locked():
                self._settle_activity()
                for agent in self.activity.agents():
                    batch = self.activity.begin_batch(new_id(), self.tip(), agent)
                    if batch is None:
                        continue
                    try:
                        tx, _ = self.write(
                            lambda tx: tx.record_activity(batch.batch, batch.counts, batch.agent))  # noqa: B023 (run at once)
                    except BaseException:
                        self.activity.end_batch(batch, committed=False)
                        raise
                    self.activity.end_batch(batch, committed=True)
                    commit = tx.commit or commit
            return commit

        return self.healing(flush)

    def _settle_activity(self) -> None:
        """Finish a flush that was killed: did its commit land? Then its recalls are counted."""
        for batch in self.activity.unfinished():
            landed = self.repo.commit_with_trailer("Activity-Batch", batch.batch, since=batch.parent,
                                                     tip=self.tip() or "HEAD")
            self.activity.end_batch(batch, committed=landed)

    # --- writes ------------------------------------------------------------

    def remember(
        self,
        content: str,
        category: str = "general",
        abstract: str | None = None,
        overview: str | None = None,
        tags: Iterable[str] = (),
        source: str | None = None,
        pinned: bool = False,
        dedupe: bool | None = None,
        supersedes: str | None = None,
        reason: str | None = None,
        contradicts: Iterable[str] = (),
        merge_into: str | None = None,
    ) -> Memory:
        """Write a new memory in its own commit (or recognise one already there).

        See :meth:`memsite.MemoryStore.remember` for the arguments and what it returns and raises.
        ``reason`` says in the commit why it supersedes, merges or is added;
        ``contradicts`` flags ids it may contradict (see :mod:`memsite.features.contradictions`);
        ``merge_into`` merges it into that memory instead of adding it.
        """
        memory = self.new_memory(content, category, abstract, overview, tags, source, pinned)
        return self.add(memory, dedupe, supersedes, reason, contradicts, merge_into)

    def add(self, memory: Memory, dedupe: bool | None = None, supersedes: str | None = None,
            reason: str | None = None, contradicts: Iterable[str] = (), merge_into: str | None = None) -> Memory:
        """:meth:`remember` of a memory :meth:`new_memory` made."""
        flags = list(contradicts)
        if flags:
            memory = memory.replace(extra={**memory.extra, likeness.FIELD: flags})
        dedupe = self.config.dedupe if dedupe is None else dedupe
        if merge_into is not None:
            tx, added = self.write(lambda tx: tx.merge_into(merge_into, memory, reason))
        else:
            tx, added = self.write(lambda tx: tx.add(memory, dedupe, supersedes=supersedes, reason=reason))
        return tx.result(added)

    def dismiss(self, id: str, of: str | None = None) -> Memory:
        """Drop the flag that the memory ``id`` may contradict ``of`` (every flag when None), in one commit."""
        tx, done = self.write(lambda tx: tx.dismiss(id, of))
        return tx.result(done)

    def supersede(self, old: str, new: str, reason: str | None = None) -> tuple[Memory, Memory]:
        """Mark the memory ``old`` replaced by the memory ``new``, in one commit; (old, new) as written.

        See :meth:`memsite.MemoryStore.supersede`.
        """
        tx, (was, now) = self.write(lambda tx: tx.supersede(old, new, reason=reason))
        return tx.result(was), tx.result(now)

    def update(self, id: str, /, **changes: Any) -> Memory:
        """Change fields of a memory in one commit; it keeps its id (or a unique prefix of it, as for :meth:`get`).

        See :meth:`memsite.MemoryStore.update`.
        """
        tx, updated = self.write(lambda tx: tx.update(id, **changes))
        return tx.result(updated)

    def forget(self, id: str, reason: str = "") -> str:
        """Delete a memory in one commit (it stays in history); returns the commit id.

        ``id`` may be a unique prefix of the id, as for :meth:`get`.
        """
        tx, _ = self.write(lambda tx: tx.forget(id, reason=reason))
        assert tx.commit is not None
        return tx.commit

    def trim(self, category: str) -> builtins.list[str]:
        """Apply the category's capacity marks now; returns the ids trimmed."""
        name = self.config.route(category).name
        tx, _ = self.write(lambda tx: tx.trim_category(name))
        return [op.memory.id for op in tx.ops if op.action == "trimmed"]

    def transaction(self, message: str | None = None) -> Transaction:
        """Group writes into one commit: ``with store.transaction("msg") as tx:``.

        The repository lock is held for the block. If the block raises, nothing
        is committed. After it, ``tx.commit`` is the commit id.
        """
        return Transaction(self, message)

    def write(self, body: Callable[[Transaction], T], message: str | None = None) -> tuple[Transaction, T]:
        """Run ``body`` in its own transaction, again if the branch moved under it.

        The branch only moves under memsite's lock when a plain git command
        (a pull, a hand-made commit) ran meanwhile; the write is then redone
        on top of it.
        """
        def attempt() -> tuple[Transaction, T]:
            for tries in range(WRITE_ATTEMPTS):
                try:
                    with self.transaction(message) as tx:
                        result = body(tx)
                    return tx, result
                except RefMoved:
                    if tries == WRITE_ATTEMPTS - 1:
                        raise
            raise AssertionError("unreachable")

        # A damaged catalog fails a write before it commits (after, the commit stands and the catalog catches up).
        return self.healing(attempt)

    # --- building records --------------------------------------------------

    def new_memory(self, content: Any, category: Any, abstract: Any, overview: Any, tags: Any, source: Any,
                    pinned: Any) -> Memory:
        fields = self.checked_fields(dict(content=content, category=category, abstract=abstract, overview=overview,
                                   tags=tags, source=source, pinned=pinned), None)
        now = self.now()
        return Memory(id=new_id(), agent=self.agent, created=now, updated=now, **fields)

    def checked_fields(self, given: dict[str, Any], current: Memory | None) -> dict[str, Any]:
        """Checked values for the fields in ``given`` (of a new memory when ``current`` is None).

        An abstract or overview of None is derived from the text.

        Raises:
            InvalidInput: naming the field and the fix; SecretFound.
        """
        unknown = set(given) - EDITABLE_FIELDS
        if unknown:
            raise InvalidInput(f"update: cannot change {', '.join(sorted(unknown))}; "
                               f"allowed fields are {', '.join(sorted(EDITABLE_FIELDS))}")
        out: dict[str, Any] = {}
        if "category" in given:
            out["category"] = self.config.route(given["category"]).name
        if "content" in given:
            text = inputs.text(given["content"], "content", max_bytes=self.config.max_memory_bytes,
                               setting="max_memory_bytes", fix="split it into smaller memories")
            out["content"] = normalize_content(text)
            if not out["content"]:
                fix = "write what should be remembered" if current is None else "use forget() to remove a memory"
                raise InvalidInput(f"content: is empty; {fix}")
        content = out.get("content", current.content if current else "")
        if "abstract" in given:
            value = given["abstract"]
            out["abstract"] = (derive_abstract(content) if value is None
                               else truncate(one_line(inputs.text(value, "abstract", max_bytes=4096)), ABSTRACT_MAX))
        if "overview" in given:
            value = given["overview"]
            abstract = out.get("abstract", current.abstract if current else "")
            out["overview"] = (derive_overview(content, abstract) if value is None
                               else inputs.text(value, "overview", max_bytes=4096, allow_empty=True).strip())
        if "tags" in given:
            out["tags"] = inputs.tags(given["tags"])
        if "source" in given:
            value = given["source"]
            out["source"] = None if value is None else one_line(inputs.text(value, "source", max_bytes=512)) or None
        if "pinned" in given:
            if not isinstance(given["pinned"], bool):
                raise InvalidInput(f"pinned: expected true or false, got {given['pinned']!r}")
            out["pinned"] = given["pinned"]
        inputs.no_secrets({name: " ".join(value) if name == "tags" else value for name, value in out.items()
                           if name in ("content", "abstract", "overview", "source", "tags")},
                          excerpts=[name for name in ("abstract", "overview") if name in given and given[name] is None])
        return out

    def checked_reason(self, reason: Any) -> str:
        text = one_line(inputs.text(reason or "", "reason", max_bytes=1024, allow_empty=True))
        inputs.no_secrets({"reason": text})
        return text


AGENT_SETTING = "memsite.agent"  # git config: the agent a clone writes as ('memsite clone --agent' sets it)


def _default_agent(repo: Repository) -> str:
    name = os.environ.get("MEMSITE_AGENT") or repo.config.get(AGENT_SETTING, "")
    if name:
        return name
    user = repo.config.get("user.name", "")
    slug = slugify(user, limit=64) if user else ""
    return slug if slug and slug != "memory" else "human"
